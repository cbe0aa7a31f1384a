"""Text health of a cell's rows: the per-row measures filled where rows lack them, their means, and the
speedup on the units whose AR output does not end in a loop.

The per-row measures are ``lade_bench.metrics.text_health``'s (repeated-4-gram share, distinct-4, loop
start, at cap). Rows written before schema 12 lack the columns; :func:`with_text_health` computes them
from the rows' stored ``output_ids``, so every report shows them for committed rows too.

The split (``docs/statistics.md``, "Text health"): a unit is kept when the *AR* output of its key has no
final loop, so every arm is compared on the same units, chosen by a property of the baseline's output,
never of the method's own (which would select the method's luckiest outputs). Greedy arms emit AR's
tokens, so there it is the property of every arm's output too.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.metrics.text_health import (
    AT_CAP,
    DISTINCT,
    LOOP_START,
    REPEATED_SHARE,
    TEXT_HEALTH_COLUMNS,
    text_health,
)
from lade_bench.stats.rules import Estimate, IntervalSettings
from lade_bench.stats.speedup import speedup_estimate
from lade_bench.stats.units import BASELINE_ARM, PAIR_KEY

# The summary columns of text health (stats.summary.SUMMARY_COLUMNS): means over the arm's paired rows,
# how many of them end in a loop, and the speedup on the units whose AR output ends in none.
HEALTH_SUMMARY: tuple[str, ...] = (
    REPEATED_SHARE,
    DISTINCT,
    "n_loops",
    "n_units_no_loop",
    "speedup_no_loop",
    "speedup_no_loop_ci_low",
    "speedup_no_loop_ci_high",
    "speedup_no_loop_ci_note",
)


def inferred_stop_ids(rows: pd.DataFrame) -> dict[str, frozenset[int]]:
    """Each model's stop ids as its rows show them: the last token of every output shorter than its budget.

    A generation ends before ``max_new_tokens`` only by emitting a stop id (the engine emits it, then
    stops), so these are stop ids; rows before schema 12 did not record the model's list. A model none
    of whose outputs ended early gets no stop id: every output at its budget is then counted at the cap.
    """
    found: dict[str, set[int]] = {str(m): set() for m in rows["model"].unique()} if len(rows) else {}
    ok = rows[rows["error"].isna() & rows["max_new_tokens"].notna()] if "max_new_tokens" in rows else rows.iloc[0:0]
    for model, ids, budget in zip(ok["model"], ok["output_ids"], ok["max_new_tokens"], strict=True):
        if ids is not None and 0 < len(ids) < budget:
            found[str(model)].add(int(ids[-1]))
    return {model: frozenset(ids) for model, ids in found.items()}


def with_text_health(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the text-health columns filled from ``output_ids`` where a row lacks them.

    A row lacks them when it has no error and its ``at_cap`` is null (written before schema 12; every
    newer error-free row has it). ``at_cap`` stays null where the row records no ``max_new_tokens``
    (before schema 7). Rows that have the columns are returned as they are (the same frame when none
    lacks them).
    """
    have = {c: c in rows for c in (*TEXT_HEALTH_COLUMNS, "max_new_tokens")}
    missing = rows["error"].isna().to_numpy()
    if have[AT_CAP]:
        missing = missing & rows[AT_CAP].isna().to_numpy()
    if not missing.any() and all(have[c] for c in TEXT_HEALTH_COLUMNS):
        return rows
    stops = inferred_stop_ids(rows)
    values: dict[str, list[Any]] = {c: list(rows[c]) if have[c] else [None] * len(rows) for c in TEXT_HEALTH_COLUMNS}
    budgets = rows["max_new_tokens"].to_numpy() if have["max_new_tokens"] else np.full(len(rows), np.nan)
    for i in np.flatnonzero(missing):
        ids = rows["output_ids"].iat[i]
        if ids is None:
            continue
        budget = budgets[i]
        known = budget is not None and not pd.isna(budget)
        health = text_health(ids, int(budget) if known else 0, stops.get(str(rows["model"].iat[i]), frozenset()))
        for column in TEXT_HEALTH_COLUMNS:
            values[column][i] = health[column] if (column != AT_CAP or known) else None
    return rows.assign(
        **{
            REPEATED_SHARE: pd.array(values[REPEATED_SHARE], dtype="Float64").astype(float),
            DISTINCT: pd.array(values[DISTINCT], dtype="Float64").astype(float),
            LOOP_START: pd.array([None if _null(v) else int(v) for v in values[LOOP_START]], dtype="Int64"),
            AT_CAP: pd.array([None if _null(v) else bool(v) for v in values[AT_CAP]], dtype="boolean"),
        }
    )


def _null(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def loop_free_rows(cell_rows: pd.DataFrame, baseline: str = BASELINE_ARM) -> pd.DataFrame:
    """The rows of one or more cells at the keys whose ``baseline`` (AR) output does not end in a loop.

    A key is (cell, sample, turn, repeat); a key whose baseline row errored or is missing is dropped
    (it has no paired speedup either). Every arm keeps the same keys, in the rows' order, so paired
    statistics of the result compare the arms on the same units.
    """
    rows = with_text_health(cell_rows)
    if rows.empty:
        return rows.reset_index(drop=True)
    key = [c for c in ("sweep", "cell_id") if c in rows] + list(PAIR_KEY)
    clean = (rows["arm"] == baseline) & rows["error"].isna() & rows[LOOP_START].isna()
    # Each row's key told whether its baseline row is clean by a grouped transform (not a merge of key
    # tables: every report summarises each cell, and this runs once per cell).
    keep = clean.groupby([rows[c] for c in key], sort=False, dropna=False).transform("any")
    return rows.loc[keep.to_numpy(dtype=bool)].reset_index(drop=True)


def split_arm(paired: pd.DataFrame, baseline: str = BASELINE_ARM) -> str:
    """The arm whose output decides the split: AR where the rows have it (also where the speedup's baseline
    is another AR arm), else ``baseline``."""
    return BASELINE_ARM if (paired["arm"] == BASELINE_ARM).any() else baseline


def health_means(arm_paired: pd.DataFrame) -> dict[str, float]:
    """Mean repeated-4-gram share and distinct-4 of an arm's paired rows (NaN outputs under 4 tokens left
    out) and how many end in a loop (``n_loops``)."""
    rows = with_text_health(arm_paired)
    rows = rows[rows["error"].isna()]
    if rows.empty:
        return {REPEATED_SHARE: math.nan, DISTINCT: math.nan, "n_loops": math.nan}
    return {
        REPEATED_SHARE: _nanmean(rows[REPEATED_SHARE]),
        DISTINCT: _nanmean(rows[DISTINCT]),
        "n_loops": float(rows[LOOP_START].notna().sum()),
    }


def _nanmean(values: pd.Series) -> float:
    arr = values.to_numpy(dtype=np.float64, na_value=np.nan)
    arr = arr[~np.isnan(arr)]
    return float(arr.mean()) if arr.size else math.nan


def loop_free_speedup(
    paired: pd.DataFrame,
    arm: str,
    *,
    sampled: bool,
    baseline: str = BASELINE_ARM,
    intervals: IntervalSettings = IntervalSettings(),
    kept: pd.DataFrame | None = None,
) -> Estimate:
    """``speedup_estimate`` of ``arm`` on the cell's paired units whose AR output ends in no loop.

    The same estimator and paired bootstrap over samples as every speedup; the baseline stays the one the
    cell's speedup uses. AR's rows decide which keys stay (:func:`loop_free_rows`, :func:`split_arm`).
    ``kept``: those rows where the caller has them already (one per cell, for every arm).
    """
    if kept is None:
        kept = loop_free_rows(paired, split_arm(paired, baseline))
    return speedup_estimate(kept, arm, sampled=sampled, baseline=baseline, intervals=intervals)


def health_summary(
    paired: pd.DataFrame,
    arm: str,
    *,
    sampled: bool,
    baseline: str = BASELINE_ARM,
    intervals: IntervalSettings = IntervalSettings(),
    kept: pd.DataFrame | None = None,
    estimate: Estimate | None = None,
) -> dict[str, Any]:
    """The :data:`HEALTH_SUMMARY` columns of one arm of a cell (``paired``: the cell's ``common_rows``).

    ``kept``: :func:`loop_free_rows` of ``paired`` where the caller has it; ``estimate``: the arm's speedup on
    all of ``paired``, which is the split's too where no AR output loops (the same rows in the same order),
    so it is not computed twice.
    """
    if kept is None:
        kept = loop_free_rows(paired, split_arm(paired, baseline))
    if estimate is None or len(kept) != len(paired):
        estimate = loop_free_speedup(paired, arm, sampled=sampled, baseline=baseline, intervals=intervals, kept=kept)
    return {
        **health_means(paired[paired["arm"] == arm]),
        "n_units_no_loop": estimate.n_units,
        "speedup_no_loop": estimate.value,
        "speedup_no_loop_ci_low": estimate.low,
        "speedup_no_loop_ci_high": estimate.high,
        "speedup_no_loop_ci_note": estimate.note,
    }
