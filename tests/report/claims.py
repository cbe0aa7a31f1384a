"""Faster, slower or "cannot tell": the verdicts the prose marks, recomputed over several bootstrap seeds.

A sentence of a results README that says an arm is faster or slower than another carries a marker
right after it, an HTML comment the rendered page does not show::

    <!-- claim faster: sweep=main model=gemma3-270m dataset=mt_bench window=7 arm=lookahead -->
    <!-- claim slower: sweep=ablation_wg arm=lookahead window=4 vs window=7 -->
    <!-- claim tie: sweep=main model=gemma3-270m dataset=humaneval window=2 arm=lookahead -->

The selectors (``column=value``, over the committed rows) pick one or more cells, every one of which
must carry the verdict. Without ``vs`` it is about each cell's speedup of ``arm`` over ``baseline``
(default AR); with ``vs`` the right-hand selectors replace values of the left-hand ones and the claim
is about the paired ratio of the two cells' speedups (to / from, ``stats.cell_contrast``), one pair
per left-hand cell.

A verdict of faster (slower) holds only when the interval's lower (upper) end stays above (below) 1 at
every one of :data:`SEEDS`: the bootstrap's seed-to-seed movement of that end is then smaller than its
distance from 1. Anything else is ``tie``: the data cannot tell.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lade_bench import stats
from lade_bench.metrics.speed import bootstrap_ci, bootstrap_per_token_ci
from lade_bench.report.baselines import collect_rows
from lade_bench.report.spec_bench_board import DATASET as SPEC_BENCH
from lade_bench.report.spec_bench_board import group_of_sample
from lade_bench.results import load_rows

# Ten seeds: enough to see how far an interval's end moves with the bootstrap's seed (0.9978-1.0062
# for the Gemma HumanEval tuned cell's lower end), few enough to keep the test in seconds.
SEEDS = tuple(range(10))
VERDICTS = ("faster", "slower", "tie")
MARKER = re.compile(r"<!-- claim (faster|slower|tie): (.*?) -->")
# Cell-level columns a selector may name besides the row columns (added by ``committed_rows``).
_OPTIONS = ("baseline",)
# Per-row lists and texts no speedup reads.
HEAVY_COLUMNS = ("output_ids", "output_text", "accept_lengths", "step_tokens")
# What a ``vs`` partner cell must share with its left-hand cell unless the claim overrides it.
_PARTNER_KEYS = (
    "model", "dataset", "group", "ngram", "window", "guesses", "prompt_as_reference", "do_sample", "compiled",
)  # fmt: skip


@dataclass(frozen=True)
class Claim:
    """One marked verdict: where it is, what it says and the selectors of its cells."""

    document: str
    verdict: str
    selectors: dict[str, object]
    to: dict[str, object] | None

    def label(self) -> str:
        """The claim as a test id."""
        return f"{self.document}: {self.verdict}: {self.selectors} vs {self.to}"


def committed_rows(root: Path) -> pd.DataFrame:
    """Every committed per-sample row (reference sweeps, assisted, tune held-out, baselines, batch-invariant,
    Spec-Bench) in one frame.

    Adds ``dtype`` (float32 outside the baselines archive, whose manifests record it per cell) and
    ``group``: the Spec-Bench category group of a Spec-Bench row (its cell's one group), else empty.
    """
    folders = sorted((root / "paper_figures" / "rows").iterdir())
    folders += [root / "paper_figures" / "assisted" / "rows"]
    folders += sorted((root / "paper_figures" / "tune").glob("*/heldout_rows"))
    folders += sorted((root / "paper_figures" / "spec_bench" / "rows").iterdir())
    frames = [load_rows(folder).assign(dtype="float32") for folder in folders]
    for archive in ("baselines", "batch_invariant"):
        frames.append(collect_rows([root / "paper_figures" / archive / "rows" / archive]).drop(columns="processor"))
    rows = pd.concat(frames, ignore_index=True)
    is_spec_bench = rows["dataset"] == SPEC_BENCH
    groups = rows.loc[is_spec_bench, "sample_id"].map(group_of_sample)
    return rows.assign(group=groups.reindex(rows.index).fillna(""))


def _value(text: str) -> object:
    if text in ("true", "false"):
        return text == "true"
    return int(text) if re.fullmatch(r"-?\d+", text) else text


def parse_selectors(text: str) -> dict[str, object]:
    """A marker's ``column=value`` selectors as a dict (ints and booleans parsed)."""
    pairs = [item.split("=", 1) for item in text.split()]
    if any(len(pair) != 2 for pair in pairs):
        raise ValueError(f"a selector is column=value: {text!r}")
    return {key: _value(value) for key, value in pairs}


def claims_in(document: Path, root: Path) -> list[Claim]:
    """Every marked claim of ``document``."""
    found = []
    for verdict, body in MARKER.findall(document.read_text(encoding="utf-8")):
        left, _, right = body.partition(" vs ")
        found.append(
            Claim(str(document.relative_to(root)), verdict, parse_selectors(left), parse_selectors(right) or None)
        )
    return found


def _select(rows: pd.DataFrame, selectors: dict[str, object]) -> pd.DataFrame:
    mask = pd.Series(True, index=rows.index)
    for key, value in selectors.items():
        if key in _OPTIONS:
            continue
        if key not in rows:
            raise KeyError(f"no column {key!r} in the committed rows")
        mask &= rows[key] == value
    return rows[mask]


def _cells(rows: pd.DataFrame, selectors: dict[str, object]) -> Iterator[pd.DataFrame]:
    picked = _select(rows, selectors)[["sweep", "cell_id"]].drop_duplicates()
    for sweep, cell_id in sorted(picked.itertuples(index=False)):
        yield rows[(rows["cell_id"] == cell_id) & (rows["sweep"] == sweep)]


def _per_token(cell: pd.DataFrame) -> bool:
    # Sampled outputs, and the baselines and batch-invariant tables' low-precision ones (against plain bf16
    # AR, whose outputs differ), may differ in length from AR's: those speedups are per token, as their
    # tables report them.
    return bool(cell["do_sample"].iloc[0]) or cell["sweep"].iloc[0] in ("baselines", "batch_invariant")


def speedup_bounds(cell: pd.DataFrame, arm: str, baseline: str) -> list[tuple[float, float]]:
    """The interval of ``arm``'s speedup over ``baseline`` in one cell, at each of :data:`SEEDS`.

    The cell is paired once; each seed's interval comes from the bootstrap ``stats.speedup_estimate``
    calls, which must give the tables' interval at the tables' seed.
    """
    paired = stats.common_rows(cell)
    per_token = _per_token(cell)
    totals = stats.per_sample_totals(paired, arm, baseline)
    t_base, t_arm, tok_base, tok_arm = (
        totals[c].to_numpy(np.float64) for c in ("t_base", "t_arm", "tok_base", "tok_arm")
    )
    settings = {"n_boot": stats.N_BOOT, "confidence": stats.CONFIDENCE}
    bounds = []
    for seed in SEEDS:
        if per_token:
            bounds.append(bootstrap_per_token_ci(t_base, tok_base, t_arm, tok_arm, **settings, seed=seed))
        else:
            bounds.append(bootstrap_ci(t_base, t_arm, **settings, seed=seed))
    reported = stats.speedup_estimate(paired, arm, sampled=per_token, baseline=baseline)
    assert (reported.low, reported.high) == bounds[SEEDS.index(stats.BOOT_SEED)], "not the tables' bootstrap"
    return bounds


def contrast_bounds(before: pd.DataFrame, after: pd.DataFrame, arm: str) -> list[tuple[float, float]]:
    """The interval of the paired ratio after / before of ``arm``'s speedup, at each of :data:`SEEDS`."""
    return [(ratio.low, ratio.high) for ratio in stats.speedup_ratio_by_seed(before, after, SEEDS, arm=arm)]


def verdict(bounds: Sequence[tuple[float, float]]) -> str:
    """``faster`` or ``slower`` when every seed's interval excludes 1 on that side, else ``tie``."""
    if all(low > 1 for low, _ in bounds):
        return "faster"
    if all(high < 1 for _, high in bounds):
        return "slower"
    return "tie"


def _slim(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` without :data:`HEAVY_COLUMNS`: pandas then merges a contrast's small frames faster."""
    return rows.drop(columns=[c for c in HEAVY_COLUMNS if c in rows])


def claim_verdicts(claim: Claim, rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(cell, verdict the rows give) for every cell (or pair of cells) the claim selects; never empty."""
    return [(name, verdict(bounds)) for name, bounds in claim_bounds(claim, rows)]


def claim_bounds(claim: Claim, rows: pd.DataFrame) -> list[tuple[str, list[tuple[float, float]]]]:
    """(cell, its interval at each of :data:`SEEDS`) for every cell (or pair of cells) the claim selects;
    never empty."""
    # The per-token lists and texts play no part in a speedup; without them pandas' merges are far faster.
    rows = _slim(rows)
    # Only cells that ran the arm (a tuned cell has no prompt lookup arm): the selectors name it.
    selectors = {"arm": "lookahead", **claim.selectors}
    arm, baseline = str(selectors["arm"]), str(selectors.get("baseline", stats.BASELINE_ARM))
    results = []
    for cell in _cells(rows, selectors):
        first = cell.iloc[0]
        name = f"{first['sweep']}/{first['model']}/{first['dataset']}/{first['cell_id']}"
        if claim.to is None:
            bounds = speedup_bounds(cell, arm, baseline)
        else:
            wanted = {**{k: first[k] for k in (*_PARTNER_KEYS, "dtype", "sweep")}, "arm": arm, **claim.to}
            partners = [c for c in _cells(rows, wanted) if c["cell_id"].iloc[0] != first["cell_id"]]
            if len(partners) != 1:
                raise AssertionError(f"{claim.label()}: {name} has {len(partners)} partner cells")
            bounds = contrast_bounds(cell, partners[0], arm)
        if any(low != low or high != high for low, high in bounds):  # NaN: no interval to judge by
            raise AssertionError(f"{claim.label()}: {name} has no interval")
        results.append((name, bounds))
    if not results:
        raise AssertionError(f"{claim.label()}: selects no cell")
    return results
