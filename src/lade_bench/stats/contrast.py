"""What one lookahead setting changes: two greedy cells that differ in that setting only, paired by sample.

The speedups of two cells are each measured against the cell's own AR arm, timed beside it (same
process, arms alternated per sample), so a machine that ran faster for one cell than for the other
(``stats.drift``) moves both arms of that cell alike and divides out. Two cells' speedups read side by
side still do not say whether a setting helps: each has its own interval, and their difference has
another. This module computes that difference as a paired estimate: on the (sample, turn, repeat) units
both cells paired, the ratio of the two cells' ratio-of-sums speedups (after / before), with a
percentile bootstrap that resamples each sample's totals in *both* cells together (the cells ran the
same samples, whose lengths and difficulty drive both). Compression likewise: the ratio of the two
cells' tokens per forward pass.

Which cells are compared is fixed by the sweep, not chosen on its results (:func:`knob_contrasts`):
every pair of greedy cells of one sweep whose settings differ in exactly one of :data:`KNOBS`, at
adjacent levels of it, with everything else equal (model, dataset, output length, seed, mode,
verification layout, and, where given, CPU kind and dtype).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from lade_bench.metrics.speed import bootstrap_sums_ci
from lade_bench.stats.modes import mode_label
from lade_bench.stats.rules import NOTE_NO_PAIRS, Estimate, IntervalSettings, interval_note
from lade_bench.stats.summary import CELL_ATTRIBUTES, CELL_KEY
from lade_bench.stats.units import BASELINE_ARM, PAIR_KEY, UNIT_COLUMN, common_rows, per_sample_totals

# The lookahead settings a contrast varies, one at a time.
KNOBS: tuple[str, ...] = ("ngram", "window", "guesses", "prompt_as_reference")
# Row columns that must also be equal for two cells to be compared (with CELL_ATTRIBUTES).
_SAME_WORK = ("max_new_tokens", "seed")
CONTRAST_COLUMNS: tuple[str, ...] = (
    "sweep",
    "model",
    "dataset",
    "mode",
    "knob",
    "level_from",
    "level_to",
    "fixed",
    "cell_from",
    "cell_to",
    "n_units",
    "n_pairs",
    "speedup_from",
    "speedup_to",
    "speedup_ratio",
    "speedup_ratio_ci_low",
    "speedup_ratio_ci_high",
    "speedup_ratio_ci_note",
    "compression_from",
    "compression_to",
    "compression_ratio",
    "compression_ratio_ci_low",
    "compression_ratio_ci_high",
    "compression_ratio_ci_note",
)
# Per-sample sums of one cell, in this order: baseline time, arm time, arm tokens, arm forward passes.
_SUMS = ("t_base", "t_arm", "tokens", "steps")


class CellContrast(NamedTuple):
    """Two cells compared on the units both paired.

    Attributes:
        speedup_from, speedup_to: each cell's ratio-of-sums speedup over its own baseline, on those units.
        speedup_ratio: ``speedup_to / speedup_from`` with its paired interval and n.
        compression_from, compression_to: each cell's tokens per forward pass of the arm, on those units.
        compression_ratio: ``compression_to / compression_from`` with its paired interval and n.
    """

    speedup_from: float
    speedup_to: float
    speedup_ratio: Estimate
    compression_from: float
    compression_to: float
    compression_ratio: Estimate


def cell_contrast(
    rows_from: pd.DataFrame,
    rows_to: pd.DataFrame,
    *,
    arm: str = "lookahead",
    baseline: str = BASELINE_ARM,
    intervals: IntervalSettings = IntervalSettings(),
) -> CellContrast:
    """The paired change in ``arm``'s speedup and compression from one greedy cell to another.

    Args:
        rows_from: the rows of the cell compared from (e.g. W=4).
        rows_to: the rows of the cell compared to (e.g. W=7), on the same samples.
        arm: the arm whose speedup over ``baseline`` is compared.
        baseline: the arm each cell's speedup is relative to.
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        The contrast over the samples at whose (sample, turn, repeat) units both cells paired every
        arm; NaN values with ``"no paired AR rows"`` when there are none. Ratios above 1 mean the
        ``to`` cell is faster (or compresses more).
    """
    return _contrast(_joint_sample_sums(rows_from, rows_to, arm, baseline), intervals)


def speedup_ratio_by_seed(
    rows_from: pd.DataFrame,
    rows_to: pd.DataFrame,
    seeds: Sequence[int],
    *,
    arm: str = "lookahead",
    baseline: str = BASELINE_ARM,
    intervals: IntervalSettings = IntervalSettings(),
) -> list[Estimate]:
    """:func:`cell_contrast`'s speedup ratio with its interval at each bootstrap seed of ``seeds``.

    The units and the point estimate are the same at every seed; only the resampling differs, so the
    spread of the interval ends shows how far the bootstrap's seed alone moves them (``intervals.seed``
    is ignored). The units are paired once, not once per seed.
    """
    units = _joint_sample_sums(rows_from, rows_to, arm, baseline)
    return [_contrast(units, replace(intervals, seed=seed)).speedup_ratio for seed in seeds]


def _contrast(units: pd.DataFrame, intervals: IntervalSettings) -> CellContrast:
    """:func:`cell_contrast` on the per-sample sums of the units both cells paired."""
    if units.empty:
        missing = Estimate(math.nan, math.nan, math.nan, 0, 0, NOTE_NO_PAIRS)
        return CellContrast(math.nan, math.nan, missing, math.nan, math.nan, missing)
    data = units[[f"{name}_{side}" for side in ("from", "to") for name in _SUMS]].to_numpy(np.float64)
    n_units, n_pairs = len(units), int(units["n_pairs"].sum())
    sums = data.sum(axis=0)

    def speedups(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return s[..., 0] / s[..., 1], s[..., 4] / s[..., 5]

    def compressions(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return s[..., 2] / s[..., 3], s[..., 6] / s[..., 7]

    def estimate(pair: Any) -> Estimate:
        def after_over_before(s: np.ndarray) -> np.ndarray:
            before, after = pair(s)
            return after / before

        value = float(after_over_before(sums))
        note = interval_note(n_units, intervals.min_units)
        if note:
            return Estimate(value, math.nan, math.nan, n_units, n_pairs, note)
        low, high = bootstrap_sums_ci(data, after_over_before, intervals.n_boot, intervals.confidence, intervals.seed)
        return Estimate(value, low, high, n_units, n_pairs, "")

    speed_from, speed_to = speedups(sums)
    comp_from, comp_to = compressions(sums)
    return CellContrast(
        float(speed_from), float(speed_to), estimate(speedups), float(comp_from), float(comp_to), estimate(compressions)
    )


def _joint_sample_sums(rows_from: pd.DataFrame, rows_to: pd.DataFrame, arm: str, baseline: str) -> pd.DataFrame:
    """Per sample: each cell's :data:`_SUMS` over the units both cells paired, and ``n_pairs``."""
    paired = {side: common_rows(rows) for side, rows in (("from", rows_from), ("to", rows_to))}
    keys = None
    for side_rows in paired.values():
        side_keys = side_rows[side_rows["arm"] == arm][list(PAIR_KEY)].drop_duplicates()
        keys = side_keys if keys is None else keys.merge(side_keys, on=list(PAIR_KEY))
    assert keys is not None
    if keys.empty:
        return pd.DataFrame()
    per_side = []
    for side, side_rows in paired.items():
        rows = side_rows.merge(keys, on=list(PAIR_KEY))
        totals = per_sample_totals(rows, arm, baseline).set_index(UNIT_COLUMN)
        steps = rows[rows["arm"] == arm].groupby(UNIT_COLUMN)["decode_steps"].sum()
        sides = {"t_base": totals["t_base"], "t_arm": totals["t_arm"], "tokens": totals["tok_arm"], "steps": steps}
        per_side.append(pd.DataFrame({f"{name}_{side}": sides[name] for name in _SUMS}))
    out = pd.concat(per_side, axis=1, join="inner").dropna()
    out["n_pairs"] = keys.groupby(UNIT_COLUMN).size().reindex(out.index).to_numpy()
    return out.sort_index()


def knob_contrasts(
    summary: pd.DataFrame,
    rows: pd.DataFrame,
    *,
    arm: str = "lookahead",
    cell_labels: Mapping[tuple[str, str], str] | None = None,
    intervals: IntervalSettings = IntervalSettings(),
) -> pd.DataFrame:
    """Every paired one-setting contrast of a sweep's greedy ``arm`` cells (see the module docstring).

    Args:
        summary: ``stats.summarize`` of ``rows`` (the cells' settings are read from it).
        rows: the per-sample rows of one or more sweeps.
        arm: the arm whose cells are compared.
        cell_labels: a further label per ``(sweep, cell_id)`` that must be equal for two cells to be
            compared (e.g. CPU kind and dtype, from the manifests); None: not checked.
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        One row per contrast (:data:`CONTRAST_COLUMNS`), ordered by sweep, model, dataset, knob and
        level. ``fixed`` names the settings held equal (e.g. ``"N5 G4 ref. off"``). Where two cells of a
        group share the same level too (nothing tells them apart), that group gives no contrast.
    """
    cells = summary[(summary["arm"] == arm) & ~summary["do_sample"].astype(bool)]
    if cells.empty:
        return pd.DataFrame(columns=list(CONTRAST_COLUMNS))
    records: list[dict[str, Any]] = []
    work = rows.groupby(list(CELL_KEY))[list(_SAME_WORK)].first()
    settings = []
    for rec in cells.to_dict("records"):
        key = (rec["sweep"], rec["cell_id"])
        same = tuple(_hashable(v) for v in work.loc[key]) if key in work.index else (None, None)
        label = None if cell_labels is None else cell_labels.get((str(key[0]), str(key[1])))
        settings.append({**{name: rec[name] for name in (*CELL_KEY, *CELL_ATTRIBUTES)}, "_same": (*same, label)})
    by_cell = {key: frame for key, frame in rows.groupby(list(CELL_KEY), sort=False)}
    for knob in KNOBS:
        held = [name for name in CELL_ATTRIBUTES if name != knob]
        groups: dict[tuple, list[dict[str, Any]]] = {}
        for cell in settings:
            group_key = (cell["sweep"], *(_hashable(cell[name]) for name in held), cell["_same"])
            groups.setdefault(group_key, []).append(cell)
        for members in groups.values():
            levels = [_hashable(cell[knob]) for cell in members]
            if len(members) < 2 or len(set(levels)) != len(levels):
                continue
            ordered = sorted(members, key=lambda cell: _hashable(cell[knob]))
            for before, after in zip(ordered, ordered[1:], strict=False):
                records.append(_record(knob, before, after, by_cell, arm, intervals))
    table = pd.DataFrame.from_records(records, columns=list(CONTRAST_COLUMNS))
    order = {knob: i for i, knob in enumerate(KNOBS)}
    table = table.assign(_knob=table["knob"].map(order))
    return (
        table.sort_values(["sweep", "model", "dataset", "_knob", "fixed", "level_from"], kind="stable")
        .drop(columns="_knob")
        .reset_index(drop=True)
    )


def _record(
    knob: str,
    before: dict[str, Any],
    after: dict[str, Any],
    by_cell: Mapping[tuple, pd.DataFrame],
    arm: str,
    intervals: IntervalSettings,
) -> dict[str, Any]:
    contrast = cell_contrast(
        by_cell[(before["sweep"], before["cell_id"])], by_cell[(after["sweep"], after["cell_id"])],
        arm=arm, intervals=intervals,
    )  # fmt: skip
    speed, comp = contrast.speedup_ratio, contrast.compression_ratio
    return {
        "sweep": before["sweep"],
        "model": before["model"],
        "dataset": before["dataset"],
        "mode": mode_label(before["compiled"], before["compile_mode"]),
        "knob": knob,
        "level_from": before[knob],
        "level_to": after[knob],
        "fixed": fixed_settings(before, knob),
        "cell_from": before["cell_id"],
        "cell_to": after["cell_id"],
        "n_units": speed.n_units,
        "n_pairs": speed.n_pairs,
        "speedup_from": contrast.speedup_from,
        "speedup_to": contrast.speedup_to,
        "speedup_ratio": speed.value,
        "speedup_ratio_ci_low": speed.low,
        "speedup_ratio_ci_high": speed.high,
        "speedup_ratio_ci_note": speed.note,
        "compression_from": contrast.compression_from,
        "compression_to": contrast.compression_to,
        "compression_ratio": comp.value,
        "compression_ratio_ci_low": comp.low,
        "compression_ratio_ci_high": comp.high,
        "compression_ratio_ci_note": comp.note,
    }


def fixed_settings(cell: Mapping[str, Any], knob: str) -> str:
    """The lookahead settings of ``cell`` other than ``knob``, e.g. ``"N5 G4 ref. off"``."""
    parts = [f"{letter}{int(cell[name])}" for name, letter in (("ngram", "N"), ("window", "W"), ("guesses", "G"))]
    parts = [part for part, name in zip(parts, ("ngram", "window", "guesses"), strict=True) if name != knob]
    if knob != "prompt_as_reference":
        parts.append(f"ref. {'on' if cell['prompt_as_reference'] else 'off'}")
    return " ".join(parts)


def _hashable(value: Any) -> Any:
    # Summary values come from parquet and JSON: NaN stands for "not set" and must equal itself.
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
