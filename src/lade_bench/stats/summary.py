"""One summary record per (cell, arm): the table every report, ``summary.json`` and the tuner read.

A cell is ``(sweep, cell_id)``: the same semantic cell run in two sweeps is two measurements. Every
number of a record is computed on the cell's paired units (``units.common_rows``) and each record
says its n: ``n_units`` (samples), ``n_pairs`` (paired keys) and ``n_errors`` (the arm's own errored
rows).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.methods import method_names
from lade_bench.stats.efficiency import DEFAULT_VERIFICATION, arm_efficiency, lookahead_step_tokens
from lade_bench.stats.quality import MISMATCH_SUMMARY, ROUGE_COLUMNS, mismatch_summary, quality_means
from lade_bench.stats.rules import IntervalSettings
from lade_bench.stats.speedup import per_sample_mean, speedup_basis, speedup_estimate
from lade_bench.stats.text_health import HEALTH_SUMMARY, health_summary, loop_free_rows, split_arm
from lade_bench.stats.units import BASELINE_ARM, UNIT_COLUMN, common_rows, per_sample_totals, speedup_baseline

# Two columns make a cell unique across sweeps; the rest describe it (identical on all its rows,
# except N/W/G, which some runners leave null on baseline rows). ``compiled`` and ``compile_mode`` are
# its mode (eager, or compiled with that torch.compile mode; ``stats.modes``).
CELL_KEY: tuple[str, ...] = ("sweep", "cell_id")
CELL_ATTRIBUTES: tuple[str, ...] = (
    "model",
    "dataset",
    "ngram",
    "window",
    "guesses",
    "prompt_as_reference",
    "verification",
    "compiled",
    "compile_mode",
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
)
SUMMARY_COLUMNS: tuple[str, ...] = (
    *CELL_KEY,
    *CELL_ATTRIBUTES,
    "arm",
    "n_rows",
    "n_errors",
    "n_units",
    "n_pairs",
    "speedup_basis",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_ci_note",
    "speedup_per_sample_mean",
    "compression_ratio",
    "tokens_per_s",
    "new_tokens",
    "decode_steps",
    "wall_time_s",
    "tokens_per_step",
    "step_tokens_mean",
    "mean_accepted",
    "state_requests_min",
    "state_requests_max",
    "draft_time_share",
    "compile_time_s",
    "n_at_cap",
    *HEALTH_SUMMARY,
    *ROUGE_COLUMNS,
    "pass@1",
    "accuracy",
    "matches_ar",
    *MISMATCH_SUMMARY,
)
# The summary columns read from a clock: they differ between two runs of the same cells, so a check
# that a launcher, a resume or an archive changes nothing compares everything but these.
CLOCK_COLUMNS: tuple[str, ...] = (
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_per_sample_mean",
    "tokens_per_s",
    "wall_time_s",
    "draft_time_share",
    "compile_time_s",
    "speedup_no_loop",
    "speedup_no_loop_ci_low",
    "speedup_no_loop_ci_high",
)
# A cell's model, dataset, sampling and lookahead shape in the order a reader looks them up: the order
# summary records are sorted in and the leading columns of a predicted leaderboard's records.
CELL_READING_ORDER: tuple[str, ...] = (
    "model",
    "dataset",
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
    "ngram",
    "window",
    "guesses",
)
# The columns summary records are sorted by, in reading order (arm order last, see sort_summary).
SORT_COLUMNS: tuple[str, ...] = (
    "sweep",
    *CELL_READING_ORDER,
    "prompt_as_reference",
    "verification",
    "compiled",
    "compile_mode",
    "cell_id",
)


def cell_attributes(cell_rows: pd.DataFrame) -> dict[str, Any]:
    """Identity of one cell: the cell key and the first non-null value of each descriptive column.

    Raises:
        ValueError: ``cell_rows`` is empty or mixes cells.
    """
    if cell_rows.empty:
        raise ValueError("a cell needs at least one row")
    keys = cell_rows[list(CELL_KEY)].drop_duplicates()
    if len(keys) != 1:
        raise ValueError(f"rows of {len(keys)} cells passed as one cell: {keys.to_dict('records')}")
    attributes: dict[str, Any] = {name: plain_value(cell_rows[name].iloc[0]) for name in CELL_KEY}
    for name in CELL_ATTRIBUTES:
        # A column the frame lacks (a file from before it existed) has no value, not an empty frame's row.
        present = cell_rows[name].dropna() if name in cell_rows else pd.Series([], dtype=object)
        attributes[name] = plain_value(present.iloc[0]) if len(present) else None
    if attributes["verification"] is None:
        attributes["verification"] = DEFAULT_VERIFICATION
    # Rows without the column (read from files written before schema 6) are eager, as every cell then was.
    attributes["compiled"] = bool(attributes["compiled"])
    return attributes


def sorted_arms(arms: Sequence[str] | np.ndarray, arm_order: Sequence[str] | None = None) -> list[str]:
    """Arms in ``arm_order`` (unknown arms last, alphabetically); the method registry's order by default."""
    order = {arm: i for i, arm in enumerate(method_names() if arm_order is None else arm_order)}
    return sorted((str(a) for a in arms), key=lambda a: (order.get(a, len(order)), a))


def summarize_cell(
    cell_rows: pd.DataFrame,
    *,
    baseline: str = BASELINE_ARM,
    arm_order: Sequence[str] | None = None,
    intervals: IntervalSettings = IntervalSettings(),
) -> list[dict[str, Any]]:
    """One summary record per arm of one cell, in ``arm_order``.

    Every number is computed on the cell's paired units (``common_rows``); ``n_errors`` counts the
    arm's own errored rows. The baseline's record has speedup 1.0 by the same computation as every
    other arm, and no interval (note ``"baseline"``: how a table says which arm it was).

    Args:
        cell_rows: every row of one cell.
        baseline: the arm every speedup is relative to; AR means the faster of the cell's AR arms where
            it has AR on the standard step path too (``units.speedup_baseline``).
        arm_order: the order of the records (unknown arms last).
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        Records with ``SUMMARY_COLUMNS``.
    """
    attributes = cell_attributes(cell_rows)
    sampled = bool(attributes["do_sample"])
    paired = common_rows(cell_rows)
    baseline = speedup_baseline(paired, sampled, baseline)
    # The units whose AR output ends in no loop, once for every arm (the text-health split).
    kept = loop_free_rows(paired, split_arm(paired, baseline))
    records = []
    for arm in sorted_arms(cell_rows["arm"].unique(), arm_order):
        arm_rows = cell_rows[cell_rows["arm"] == arm]
        arm_paired = paired[paired["arm"] == arm]
        totals = per_sample_totals(paired, arm, baseline)
        estimate = speedup_estimate(paired, arm, sampled=sampled, baseline=baseline, intervals=intervals, totals=totals)
        # The other estimator (docs/statistics.md): tables show it beside the ratio of sums, since the
        # two can fall on opposite sides of 1 when per-sample speedups vary with sample length.
        mean = per_sample_mean(totals, sampled=sampled)
        efficiency = arm_efficiency(arm_paired)
        record = {
            **attributes,
            "arm": arm,
            "n_rows": int(len(arm_rows)),
            "n_errors": int(arm_rows["error"].notna().sum()),
            "n_units": int(arm_paired[UNIT_COLUMN].nunique()),
            "n_pairs": int(len(arm_paired)),
            "speedup_basis": speedup_basis(sampled),
            "speedup": estimate.value,
            "speedup_ci_low": estimate.low,
            "speedup_ci_high": estimate.high,
            "speedup_ci_note": estimate.note,
            "speedup_per_sample_mean": math.nan if mean is None else float(mean),
            **efficiency,
            "tokens_per_step": (
                lookahead_step_tokens(attributes, efficiency["step_tokens_mean"]) if arm == "lookahead" else math.nan
            ),
            **quality_means(arm_paired),
            **mismatch_summary(arm_paired),
            # Repetition, loops, and the speedup on the units whose AR output ends in no loop (issue 63).
            **health_summary(
                paired, arm, sampled=sampled, baseline=baseline, intervals=intervals, kept=kept, estimate=estimate
            ),
        }
        records.append({name: record[name] for name in SUMMARY_COLUMNS})
    return records


def summarize(
    rows: pd.DataFrame,
    *,
    baseline: str = BASELINE_ARM,
    arm_order: Sequence[str] | None = None,
    intervals: IntervalSettings = IntervalSettings(),
) -> pd.DataFrame:
    """Summary of every (cell, arm) in ``rows``: the table every report draws from.

    Args:
        rows: per-sample rows as returned by ``lade_bench.results.load_rows`` (one or more sweeps).
        baseline: the arm every speedup is relative to.
        arm_order: the order of a cell's records (unknown arms last).
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        One row per (sweep, cell_id, arm) with ``SUMMARY_COLUMNS``, sorted by sweep, model, dataset,
        sampling, N, W, G, prompt-as-reference and arm order.
    """
    records: list[dict[str, Any]] = []
    for _, cell_rows in rows.groupby(list(CELL_KEY), sort=False):
        records.extend(summarize_cell(cell_rows, baseline=baseline, arm_order=arm_order, intervals=intervals))
    frame = pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS))
    if frame.empty:
        return frame
    return sort_summary(frame, arm_order)


def sort_summary(summary: pd.DataFrame, arm_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Sort summary records in the reading order of tables (nulls last; arms in ``arm_order``, else the registry's)."""
    order = {arm: i for i, arm in enumerate(method_names() if arm_order is None else arm_order)}
    keyed = summary.assign(_arm_order=summary["arm"].map(lambda a: order.get(a, len(order))))
    by = [*SORT_COLUMNS, "_arm_order"]
    ascending = [True] * len(by)
    ascending[by.index("prompt_as_reference")] = False  # the default (True) first
    keyed = keyed.sort_values(by, ascending=ascending, na_position="last", kind="mergesort")
    return keyed.drop(columns="_arm_order").reset_index(drop=True)


def plain_value(value: Any) -> Any:
    """A pandas/numpy scalar as a plain Python value (``None`` for NA)."""
    if value is None or value is pd.NA:
        return None
    return value.item() if isinstance(value, np.generic) else value
