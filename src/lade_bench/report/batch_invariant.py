"""The batch-invariant sweep's table (issue 68): exact bfloat16 on a CPU, and what the path costs AR.

    python -m lade_bench.report.batch_invariant SWEEP_DIR [SWEEP_DIR ...] --out paper_figures/batch_invariant

A ``+sweep=batch_invariant`` run (``scripts/batch_invariant_reference.sh``) is the strong-baselines plan
in bfloat16, eager, on the batch-invariant step path, with plain bfloat16 AR on the standard path
(``ar_standard``) timed beside the path's AR on the same samples. Its numbers are
``report.baselines``' (:func:`~lade_bench.report.baselines.arm_records`: the same summary, pairing and
per-token estimates), shown with what this plan adds, per (cell, arm):

* the per-token speedup against the FASTER of the cell's two AR arms (``stats.speedup_baseline``, the
  one place that choice is made), and which one it was (``speedup_baseline``);
* on the path's AR row, the path's AR cost: AR's time per token on the path over ``ar_standard``'s,
  paired over the cell's samples, with its interval and n (the issue's AR cost measured beside plain AR);
* the share of outputs equal to the path's AR (``matches_ar``), which must be 100% for every method
  (``must_match_ar``); ``ar_standard``'s own share is shown but not required (a timing reference), and
  AR's is empty (it is the reference);
* compression, measured input tokens per step after the prefill, and the share at the token cap;
* the step path in every table, so a batch-invariant cell is never read as a standard one.

Writes ``tables/batch_invariant.md`` and ``.csv`` and an archive of each sweep (``rows/<sweep>/``), from
which :func:`~lade_bench.report.baselines.collect_rows` and :func:`batch_invariant_table` recompute the
table exactly. Only finished sweeps are tabulated: a cell still running or failed is refused by name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lade_bench import stats
from lade_bench.methods import REFERENCE, STANDARD_PATH_REFERENCE, must_match_ar
from lade_bench.report.baselines import CELL_COLUMNS as BASELINES_CELL_COLUMNS
from lade_bench.report.baselines import (
    ROWS_DIR,
    arm_records,
    collect_rows,
    interval_text,
    number_text,
    table_main,
    with_mode,
)
from lade_bench.results.archive import export_archive
from lade_bench.results.atomic import atomic_write_text

TABLE_NAME = "batch_invariant"
# The baselines table's cell columns with the step path after the mode: a cell on the path is never read as
# a standard one.
_MODE_AT = BASELINES_CELL_COLUMNS.index("mode") + 1
CELL_COLUMNS = (*BASELINES_CELL_COLUMNS[:_MODE_AT], "step_path", *BASELINES_CELL_COLUMNS[_MODE_AT:])
TABLE_COLUMNS = (
    *CELL_COLUMNS,
    "arm",
    "n_units",
    "speedup_baseline",
    "speedup_per_token",
    "speedup_per_token_ci_low",
    "speedup_per_token_ci_high",
    "path_ar_cost",
    "path_ar_cost_ci_low",
    "path_ar_cost_ci_high",
    "path_ar_cost_n",
    "matches_ar",
    "must_match_ar",
    "compression_ratio",
    "step_tokens_mean",
    "capped_share",
)


def batch_invariant_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The table (``TABLE_COLUMNS``), one row per (cell, arm), from :func:`collect_rows`' frame.

    ``speedup_per_token`` is against ``speedup_baseline`` (the faster AR arm per token, see
    ``report.baselines.arm_records``). The path's AR row carries ``path_ar_cost``: AR's time per token
    on the cell's step path over ``ar_standard``'s on the standard one, on the cell's paired units
    (above 1: the path makes AR slower), with its 95% paired bootstrap interval over samples and n;
    empty in a cell without ``ar_standard``.
    """
    rows = with_mode(rows)
    paired_cells = {cid: stats.common_rows(cell) for cid, cell in rows.groupby("cell_id", sort=False)}
    records = []
    for record in arm_records(rows):
        cost = _path_ar_cost(paired_cells[record["cell_id"]]) if record["arm"] == REFERENCE else None
        records.append(
            {
                **{name: record[name] for name in CELL_COLUMNS},
                "arm": record["arm"],
                "n_units": record["n_units"],
                "speedup_baseline": record["per_token_baseline"],
                "speedup_per_token": record["speedup_per_token"],
                "speedup_per_token_ci_low": record["speedup_per_token_ci_low"],
                "speedup_per_token_ci_high": record["speedup_per_token_ci_high"],
                "path_ar_cost": cost.value if cost else math.nan,
                "path_ar_cost_ci_low": cost.low if cost else math.nan,
                "path_ar_cost_ci_high": cost.high if cost else math.nan,
                "path_ar_cost_n": cost.n_units if cost else 0,
                "matches_ar": record["matches_ar"],
                # AR is what the others are compared with, not an arm that must match itself.
                "must_match_ar": record["arm"] != REFERENCE and must_match_ar(record["arm"]),
                "compression_ratio": record["compression_ratio"],
                "step_tokens_mean": record["step_tokens_mean"],
                "capped_share": record["capped_share"],
            }
        )
    return pd.DataFrame.from_records(records, columns=list(TABLE_COLUMNS))


def _path_ar_cost(paired: pd.DataFrame) -> stats.Estimate | None:
    """AR's time per token over ``ar_standard``'s on a cell's paired rows: the per-token "speedup" of
    ``ar_standard`` with AR as its baseline, (t_ar / tok_ar) / (t_standard / tok_standard)."""
    if not (paired["arm"] == STANDARD_PATH_REFERENCE).any():
        return None
    return stats.speedup_estimate(paired, STANDARD_PATH_REFERENCE, sampled=True, baseline=REFERENCE)


def render_markdown(table: pd.DataFrame) -> str:
    """The table as markdown, the step path in every row, then one line on exactness: every arm that must
    equal the path's AR does on every unit, or the arms and cells that do not."""
    lines = [
        "| model | dataset | dtype | mode | step path | lookahead (N, W, G) | arm | speedup per token "
        "vs the faster AR | faster AR | AR cost of the path (ar / ar_standard, time per token) | "
        "matches the path's AR | compression | tokens per step | at cap | CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.to_dict("records"):
        config = f"{row['ngram']}, {row['window']}, {row['guesses']}"
        per_token = (row["speedup_per_token"], row["speedup_per_token_ci_low"], row["speedup_per_token_ci_high"])
        cost = (row["path_ar_cost"], row["path_ar_cost_ci_low"], row["path_ar_cost_ci_high"])
        matches = number_text(row["matches_ar"], ".0%")
        if matches and not row["must_match_ar"]:
            matches += " (not required: a timing reference)"
        lines.append(
            f"| {row['model']} | {row['dataset']} | {row['dtype']} | {row['mode']} | {row['step_path']} | "
            f"{config} | {row['arm']} | {interval_text(*per_token, row['n_units'])} | {row['speedup_baseline']} | "
            f"{interval_text(*cost, row['path_ar_cost_n'])} | {matches} | "
            f"{number_text(row['compression_ratio'], '.2f')} | {number_text(row['step_tokens_mean'], '.1f')} | "
            f"{number_text(row['capped_share'], '.0%')} | {row['processor']} |"
        )
    lines += ["", exactness_line(table)]
    return "\n".join(lines) + "\n"


def exactness_line(table: pd.DataFrame) -> str:
    """Whether every arm that must equal the path's AR did on every paired unit; else which did not."""
    required = table[table["must_match_ar"].astype(bool)]
    short = required[required["matches_ar"] != 1.0]
    if short.empty:
        return "Every arm that must equal the path's AR did on every paired unit (100% in every cell)."
    missed = "; ".join(
        f"{r['model']} {r['dataset']} ({r['ngram']}, {r['window']}, {r['guesses']}) {r['arm']}: "
        f"{number_text(r['matches_ar'], '.0%') or 'not recorded'}"
        for r in short.to_dict("records")
    )
    return f"NOT EXACT: arms below 100% of the path's AR: {missed}."


def write_batch_invariant(sweep_dirs: Sequence[str | Path], out: str | Path) -> Path:
    """Archive each finished sweep under ``out/rows/``, then tabulate those archives; returns the markdown's path.

    Raises:
        ValueError: a sweep is not finished (``results.archive`` names each cell and why).
    """
    out = Path(out)
    archives = [export_archive(sweep, out / ROWS_DIR / Path(sweep).name).path for sweep in sweep_dirs]
    table = batch_invariant_table(collect_rows(archives))
    atomic_write_text(out / "tables" / f"{TABLE_NAME}.csv", table.to_csv(index=False))
    path = out / "tables" / f"{TABLE_NAME}.md"
    atomic_write_text(path, render_markdown(table))
    return path


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    return table_main(argv, "lade_bench.report.batch_invariant", __doc__, "batch-invariant", write_batch_invariant)


if __name__ == "__main__":
    raise SystemExit(main())
