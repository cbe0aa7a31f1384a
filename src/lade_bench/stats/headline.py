"""The headline cell per (sweep, model, dataset, mode), chosen without the samples it is reported on.

The mode (eager, or compiled with its torch.compile mode; ``stats.modes``) is part of the group: a
sweep that ran both gets a headline of each, never one chosen across them. So is the subset of a
categorised dataset a cell ran (``subsets``: Spec-Bench's groups, one per cell): each group gets its own
headline instead of one group standing for the benchmark.

Per (sweep, model, dataset, mode) one greedy cell (:func:`choose_headline`): the configuration the sweep
declared before it ran (``report.headline`` in its config) when one of its cells has it; else, when
the configuration alone leaves one candidate (most methods, then prompt-as-reference on), that cell;
else the candidate with the highest lookahead speedup on half A of the samples (a hash of the sample
id splits them), reported on the other half B only. Choosing on the reported samples would pick the
luckiest configuration and overstate its speedup (winner's curse).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.metrics.speed import speedup
from lade_bench.stats.efficiency import DEFAULT_VERIFICATION
from lade_bench.stats.modes import mode_label
from lade_bench.stats.rules import IntervalSettings
from lade_bench.stats.summary import CELL_KEY, SUMMARY_COLUMNS, plain_value, sort_summary, summarize
from lade_bench.stats.units import BASELINE_ARM, common_rows, per_sample_totals, speedup_baseline

logger = logging.getLogger(__name__)

# How the headline cell of a (sweep, model, dataset) was chosen (``selection`` column).
SELECTION_DECLARED = "declared"
SELECTION_ONLY = "only candidate"
SELECTION_SPLIT = "selected on half A"
# The keys of a declared headline (``report.headline`` in a sweep's config).
HEADLINE_KEYS: tuple[str, ...] = ("ngram", "window", "guesses", "prompt_as_reference")
HEADLINE_COLUMNS: tuple[str, ...] = (*SUMMARY_COLUMNS, "subset", "selection", "n_candidates")


def declared_cells(
    summary: pd.DataFrame, headlines: Mapping[tuple[str, str], Mapping[str, Any] | None]
) -> frozenset[tuple[str, str]]:
    """Cells whose lookahead shape is the headline their own sweep config declared.

    Args:
        summary: output of ``summarize``.
        headlines: ``report.headline`` per (sweep, cell_id), as recorded in each cell's config
            (None or absent: the sweep declared none).

    Returns:
        The (sweep, cell_id) keys whose N, W, G, prompt-as-reference and verification layout (flat
        when the headline names none) equal their declared headline.
    """
    out = set()
    for rec in summary.drop_duplicates(list(CELL_KEY)).to_dict("records"):
        key = (str(rec["sweep"]), str(rec["cell_id"]))
        headline = headlines.get(key)
        if (
            headline
            and all(_same_setting(rec[name], headline.get(name)) for name in HEADLINE_KEYS)
            and rec["verification"] == (headline.get("verification") or DEFAULT_VERIFICATION)
        ):
            out.add(key)
    return frozenset(out)


def sample_halves(sample_ids: Iterable[Any]) -> tuple[frozenset[str], frozenset[str]]:
    """Split sample ids into a selection half A and a report half B, without any measurement.

    Ids are ordered by a SHA-256 of the id (stable across runs, cells and row order, and unrelated to
    file order, in which MT-Bench groups its categories) and dealt alternately, so the halves differ
    by at most one sample; A gets the extra one.

    Returns:
        ``(half_a, half_b)``.
    """
    ordered = sorted({str(s) for s in sample_ids}, key=lambda s: (hashlib.sha256(s.encode()).hexdigest(), s))
    return frozenset(ordered[0::2]), frozenset(ordered[1::2])


def choose_headline(
    rows: pd.DataFrame,
    summary: pd.DataFrame,
    declared: Collection[tuple[str, str]] = frozenset(),
    *,
    baseline: str = BASELINE_ARM,
    subsets: Mapping[tuple[str, str], str] | None = None,
) -> pd.DataFrame:
    """The headline cell per (sweep, model, dataset, subset, mode), chosen without the samples it is reported on.

    Among the greedy cells of a (sweep, model, dataset, subset) of one mode (eager, or compiled in one
    torch.compile mode), where ``subsets`` gives each (sweep, cell_id) the part of its dataset it ran
    (``datasets.registry.sample_groups``; "" or absent: the whole dataset):

    1. the cells whose configuration the sweep declared (:func:`declared_cells`), if any;
    2. else those that ran the most methods, preferring prompt-as-reference on (configuration only);
       if one cell is left, it is the headline;
    3. else the samples are split (:func:`sample_halves`): the cell with the highest lookahead
       speedup over ``baseline`` on half A is chosen, and only half B is reported.

    Returns:
        One row per (sweep, model, dataset, subset, mode) with ``sweep, cell_id, model, dataset, subset, mode``
        (``stats.mode_label``), ``selection`` (``SELECTION_*``), ``n_candidates`` (greedy cells it was chosen among) and
        ``reported_samples`` (the sample ids reported, or None for all).
    """
    columns = [
        "sweep", "cell_id", "model", "dataset", "subset", "mode", "selection", "n_candidates", "reported_samples",
    ]  # fmt: skip
    greedy = summary[~summary["do_sample"].astype(bool)]
    cells = _candidate_frame(greedy, declared, subsets or {})
    choices = []
    keys = ["sweep", "model", "dataset", "subset", "mode"]
    for (sweep, model, dataset, subset, mode), group in cells.groupby(keys, sort=False):
        choice = _choose_in_group(rows, group, baseline)
        if choice is None:
            logger.info(
                "no headline for %s/%s/%s%s (%s): one sample cannot be split",
                sweep, model, dataset, f" ({subset})" if subset else "", mode,
            )  # fmt: skip
            continue
        cell_id, selection, reported = choice
        choices.append([sweep, cell_id, model, dataset, subset, mode, selection, len(group), reported])
    return pd.DataFrame(choices, columns=columns)


def _candidate_frame(
    greedy: pd.DataFrame, declared: Collection[tuple[str, str]], subsets: Mapping[tuple[str, str], str]
) -> pd.DataFrame:
    """One row per greedy cell, in summary order, with what the configuration-only ranking needs."""
    per_cell = []
    for (sweep, cell_id), cell in greedy.groupby(list(CELL_KEY), sort=False):
        per_cell.append(
            {
                "sweep": sweep,
                "cell_id": cell_id,
                "model": cell["model"].iloc[0],
                "dataset": cell["dataset"].iloc[0],
                "subset": subsets.get((str(sweep), str(cell_id)), ""),
                # Summaries of every version have both columns (cell_attributes fills them).
                "mode": mode_label(cell["compiled"].iloc[0], cell["compile_mode"].iloc[0]),
                "n_arms": cell["arm"].nunique(),
                "prompt_as_reference": bool(cell["prompt_as_reference"].iloc[0]),
                "declared": (str(sweep), str(cell_id)) in declared,
            }
        )
    columns = ["sweep", "cell_id", "model", "dataset", "subset", "mode", "n_arms", "prompt_as_reference", "declared"]
    return pd.DataFrame(per_cell, columns=columns)


def _choose_in_group(
    rows: pd.DataFrame, group: pd.DataFrame, baseline: str
) -> tuple[str, str, frozenset[str] | None] | None:
    """``(cell_id, selection, reported samples)`` for one (sweep, model, dataset); None if impossible."""
    ranked = group.sort_values(["declared", "n_arms", "prompt_as_reference"], ascending=False, kind="mergesort")
    if ranked["declared"].iloc[0]:
        return str(ranked["cell_id"].iloc[0]), SELECTION_DECLARED, None
    top = ranked[(ranked["n_arms"] == ranked["n_arms"].iloc[0])]
    top = top[top["prompt_as_reference"] == top["prompt_as_reference"].iloc[0]]
    if len(top) == 1:
        return str(top["cell_id"].iloc[0]), SELECTION_ONLY, None
    sweep = top["sweep"].iloc[0]
    candidate_rows = rows[(rows["sweep"] == sweep) & rows["cell_id"].isin(top["cell_id"])]
    half_a, half_b = sample_halves(candidate_rows["sample_id"].unique())
    if not half_b:
        return None
    selection_rows = candidate_rows[candidate_rows["sample_id"].astype(str).isin(half_a)]
    scores = [_lookahead_speedup(selection_rows[selection_rows["cell_id"] == c], baseline) for c in top["cell_id"]]
    best = int(np.argmax(scores))  # the first of equal scores, in summary order
    return str(top["cell_id"].iloc[best]), SELECTION_SPLIT, half_b


def _lookahead_speedup(cell_rows: pd.DataFrame, baseline: str) -> float:
    """Greedy lookahead speedup point estimate of a cell's rows; -inf when it cannot be computed."""
    if not len(cell_rows):
        return -math.inf
    paired = common_rows(cell_rows)
    totals = per_sample_totals(paired, "lookahead", speedup_baseline(paired, False, baseline))
    if totals.empty:
        return -math.inf
    return speedup(totals["t_base"].to_numpy(np.float64), totals["t_arm"].to_numpy(np.float64))


def headline_rows(rows: pd.DataFrame, choice: pd.DataFrame) -> pd.DataFrame:
    """The rows the headline reports: the chosen cells, restricted to their reported samples."""
    parts = []
    for rec in choice.to_dict("records"):
        cell = rows[(rows["sweep"] == rec["sweep"]) & (rows["cell_id"] == rec["cell_id"])]
        if rec["reported_samples"] is not None:
            cell = cell[cell["sample_id"].astype(str).isin(rec["reported_samples"])]
        parts.append(cell)
    return pd.concat(parts, ignore_index=True) if parts else rows.iloc[0:0]


def headline_summary(
    rows: pd.DataFrame,
    choice: pd.DataFrame,
    *,
    baseline: str = BASELINE_ARM,
    arm_order: Sequence[str] | None = None,
    intervals: IntervalSettings = IntervalSettings(),
    summary: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Summary records (all arms) of the headline cells on their reported samples.

    Args:
        summary: ``summarize(rows)`` with the same ``baseline``, ``arm_order`` and ``intervals``, when
            the caller has it: a cell reported on all its samples then takes its records from there
            instead of being summarized twice (each cell's records depend on its own rows only).

    Returns:
        ``HEADLINE_COLUMNS``: the summary columns plus ``subset`` ("" where ``choice`` has none: a choice
        made before subsets existed), ``selection`` and ``n_candidates``.
    """
    whole = choice["reported_samples"].isna() if summary is not None else pd.Series(False, index=choice.index)
    reported = headline_rows(rows, choice[~whole])
    parts = [] if reported.empty else [summarize(reported, baseline=baseline, arm_order=arm_order, intervals=intervals)]
    if summary is not None and whole.any():
        keys = set(zip(choice.loc[whole, "sweep"], choice.loc[whole, "cell_id"], strict=True))
        parts.append(summary[[key in keys for key in zip(summary["sweep"], summary["cell_id"], strict=True)]])
    if not parts:
        return pd.DataFrame(columns=list(HEADLINE_COLUMNS))
    summary = parts[0] if len(parts) == 1 else sort_summary(pd.concat(parts, ignore_index=True), arm_order)
    labels = choice.assign(subset=choice["subset"] if "subset" in choice else "")
    labels = labels[[*CELL_KEY, "subset", "selection", "n_candidates"]]
    return summary.merge(labels, on=list(CELL_KEY), how="left")[list(HEADLINE_COLUMNS)]


def _same_setting(value: Any, declared: Any) -> bool:
    """A cell attribute equals a declared headline value (ints and bools compared as such)."""
    value = plain_value(value)
    if value is None or declared is None or (isinstance(value, float) and math.isnan(value)):
        return False
    if isinstance(declared, bool) or isinstance(value, bool):
        return bool(value) == bool(declared)
    return int(value) == int(declared)
