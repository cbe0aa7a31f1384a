"""The leaderboard a device profile predicts: every (cell, arm) of a sweep, predicted beside measured.

Each error-free row's time is replaced by its predicted time on its model's profile
(``stats.step_cost.predicted_times``: the decode steps priced at their width and KV length, plus the
row's measured time outside the forwards), and the rows so priced go through the same summary as
measured rows (``stats.summarize``): the same paired units, the same ratio of sums (of time per token
in a sampling cell), the same bootstrap over samples, now over the predicted times. The measured
summary of the unchanged rows stands beside it, so a reader sees what the rows' own device measured
and what the profile's device is predicted to show. Accepted tokens per step and tokens fed per step
are the rows' own (exact methods: the same on every device).

An arm that runs more than the one full model on one device (assisted generation's draft, tensor or
pipeline parallelism: ``methods.runs_on_one_model`` is false) is not priced: a profile times one model's
forwards on one device, so its record keeps the measured numbers and says why it has no prediction.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from lade_bench import stats
from lade_bench.methods import get_method, is_registered, runs_on_one_model
from lade_bench.predict.profiles import PredictError, ProfileFile
from lade_bench.report.conditions import cell_processor, short_processor
from lade_bench.report.sweep import Sweep, SweepFolders
from lade_bench.stats.step_cost import outside_forward_time, predicted_times, prediction_basis
from lade_bench.stats.summary import CELL_READING_ORDER

# The summary columns a predicted record keeps, renamed; the rest of a record is the measured summary's.
_PREDICTED = {
    "n_units": "predicted_n_units",
    "speedup": "predicted_speedup",
    "speedup_ci_low": "predicted_ci_low",
    "speedup_ci_high": "predicted_ci_high",
    "speedup_ci_note": "predicted_ci_note",
}
_MEASURED = {
    "speedup": "measured_speedup",
    "speedup_ci_low": "measured_ci_low",
    "speedup_ci_high": "measured_ci_high",
    "speedup_ci_note": "measured_ci_note",
}
# The error a priced row gets when it has nothing to price (see predicted_rows).
NOTHING_TO_PRICE = "nothing to price: no decode step after the prefill and no time outside the forwards"
# What a leaderboard record holds (see PredictedTable.records), in this order.
RECORD_COLUMNS: tuple[str, ...] = (
    "sweep",
    "cell_id",
    *CELL_READING_ORDER,
    "arm",
    "method",
    "n_units",
    "n_pairs",
    "speedup_basis",
    *_PREDICTED.values(),
    *_MEASURED.values(),
    "measured_on",
    "rows_without_outside_time",
    "mean_accepted",
    "step_tokens_mean",
)


@dataclass
class PredictedTable:
    """The leaderboard of one model's cells, predicted from one profile.

    Attributes:
        profile: the profile every predicted number of the table rests on.
        model: the model of its cells.
        records: one per (cell, arm), ``RECORD_COLUMNS``, in the summary's reading order.
        basis: ``stats.step_cost.prediction_basis`` of the table's rows (KV measured or one context,
            rows without a measured outside-forward time), and ``rows_nothing_to_price``: the rows
            marked :data:`NOTHING_TO_PRICE`.
    """

    profile: ProfileFile
    model: str
    records: pd.DataFrame
    basis: dict[str, Any] = field(default_factory=dict)


def predicted_rows(rows: pd.DataFrame, profiles: Mapping[str, ProfileFile]) -> pd.DataFrame:
    """``rows`` with each error-free row's ``wall_time_s`` replaced by its predicted time on its model's profile.

    Errored rows are kept as they are (no summary reads them). A row with nothing to price (no decode
    step, the model leaves the prefill out, and no recorded time outside the forwards: an output that
    ended at the prefill's token) is marked errored (:data:`NOTHING_TO_PRICE`), so its (sample, turn,
    repeat) leaves every arm's predicted comparison of its cell: a zero time cannot enter a ratio.

    Raises:
        PredictError: a row without step widths, or a step outside its profile's measured widths or
            KV lengths (the cell, the arm and ``forward_time_at``'s message: the value and the range).
    """
    out = rows.copy()
    good = stats.ok_rows(rows)
    for (sweep, cell_id, arm), part in good.groupby(["sweep", "cell_id", "arm"], sort=False):
        if unpriced_reason(str(arm)):
            continue
        where = f"cell {sweep}/{cell_id} ({part['model'].iloc[0]}, {part['dataset'].iloc[0]}), arm {arm}"
        if any(steps is None or len(steps) == 0 for steps in part["step_tokens"]):
            raise PredictError(f"{where}: rows without step widths (step_tokens) cannot be priced on a profile")
        try:
            priced = predicted_times(part, profiles[str(part["model"].iloc[0])].profile)
        except ValueError as why:
            raise PredictError(f"{where}: {why}") from None
        out.loc[part.index, "wall_time_s"] = priced
        out.loc[priced.index[priced <= 0], "error"] = NOTHING_TO_PRICE
    return out


def predicted_leaderboard(
    folders: SweepFolders, profiles: Mapping[str, ProfileFile], intervals: stats.IntervalSettings
) -> list[PredictedTable]:
    """One :class:`PredictedTable` per model of the sweep, each from that model's profile.

    Raises:
        PredictError: what :func:`predicted_rows` refuses.
    """
    rows = folders.rows
    priced = predicted_rows(rows, profiles)
    measured = stats.summarize(rows, intervals=intervals)
    merged = measured.rename(columns=_MEASURED).merge(
        predicted_speedups(priced, intervals),
        on=[*stats.CELL_KEY, "arm"],
        how="left",
        validate="one_to_one",
    )
    labels = Sweep(roots=folders.roots, rows=rows, summary=measured, cells=folders.cells)
    devices = {(c.sweep, c.cell_id): _cell_device(c.manifest or {}) for c in folders.cells}
    merged["method"] = [labels.record_label(rec) for rec in merged.to_dict("records")]
    merged["measured_on"] = [
        devices.get((s, c), "unrecorded") for s, c in zip(merged["sweep"], merged["cell_id"], strict=True)
    ]
    merged = merged.merge(_rows_without_outside_time(rows), on=[*stats.CELL_KEY, "arm"], how="left")
    merged["rows_without_outside_time"] = merged["rows_without_outside_time"].fillna(0).astype(int)
    for arm in merged["arm"].unique():
        reason = unpriced_reason(str(arm))
        if reason:
            unpriced = merged["arm"] == arm
            merged.loc[unpriced, ["predicted_speedup", "predicted_ci_low", "predicted_ci_high"]] = math.nan
            merged.loc[unpriced, "predicted_ci_note"] = reason
    tables = []
    for model, profile in sorted(profiles.items()):
        records = merged.loc[merged["model"] == model, list(RECORD_COLUMNS)].reset_index(drop=True)
        model_rows = stats.ok_rows(rows.loc[rows["model"] == model])
        model_rows = model_rows[[not unpriced_reason(str(arm)) for arm in model_rows["arm"]]]  # priced rows only
        basis = prediction_basis(model_rows.to_dict("records"), profile.profile)
        basis["rows_nothing_to_price"] = int(((priced["model"] == model) & (priced["error"] == NOTHING_TO_PRICE)).sum())
        tables.append(PredictedTable(profile, model, records, basis))
    return tables


def predicted_speedups(priced: pd.DataFrame, intervals: stats.IntervalSettings) -> pd.DataFrame:
    """Every (cell, arm)'s speedup over AR on :func:`predicted_rows`' priced rows, as the summary computes a
    measured one (``stats.speedup_estimate`` on the cell's paired units: ratio of sums, of time per token in
    a sampling cell, its bootstrap over samples), without the summary's other columns, which the measured
    summary gives. Columns: the cell key, ``arm`` and the predicted ones (``predicted_n_units`` ...)."""
    records = []
    for (sweep, cell_id), cell_rows in priced.groupby(list(stats.CELL_KEY), sort=False):
        sampled = bool(stats.cell_attributes(cell_rows)["do_sample"])
        paired = stats.common_rows(cell_rows)
        for arm in cell_rows["arm"].unique():
            estimate = stats.speedup_estimate(paired, str(arm), sampled=sampled, intervals=intervals)
            records.append(
                {
                    "sweep": sweep,
                    "cell_id": cell_id,
                    "arm": arm,
                    "predicted_n_units": estimate.n_units,
                    "predicted_speedup": estimate.value,
                    "predicted_ci_low": estimate.low,
                    "predicted_ci_high": estimate.high,
                    "predicted_ci_note": estimate.note,
                }
            )
    return pd.DataFrame.from_records(records, columns=[*stats.CELL_KEY, "arm", *_PREDICTED.values()])


def unpriced_reason(arm: str) -> str:
    """Why ``arm``'s rows cannot be priced on a device profile (``""``: they can): its steps run more than
    the one full model on one device, which is all a profile times."""
    if not is_registered(arm) or runs_on_one_model(get_method(arm)):
        return ""
    roles = " + ".join(get_method(arm).models)
    return f"not predicted: its steps run {roles}, and a profile times one model on one device"


def _rows_without_outside_time(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (cell, arm), the error-free rows whose time outside the forwards the model takes as zero
    (``stats.step_cost.outside_forward_time`` None: no forward time recorded), so a table can say which
    predictions leave a method's drafting or bookkeeping out."""
    good = stats.ok_rows(rows, [*stats.CELL_KEY, "arm", "wall_time_s", "forward_time_s"])
    missing = [
        outside_forward_time({"wall_time_s": wall, "forward_time_s": forward}) is None
        for wall, forward in zip(good["wall_time_s"], good["forward_time_s"], strict=True)
    ]
    counted = good.assign(rows_without_outside_time=missing)
    return counted.groupby([*stats.CELL_KEY, "arm"], as_index=False)["rows_without_outside_time"].sum()


def _cell_device(manifest: Mapping[str, Any]) -> str:
    """The device that timed a cell: its manifest's device and, on a CPU, its processor, short."""
    device = str(manifest.get("device") or "unrecorded device")
    processor = cell_processor(manifest)
    return f"{device}, {short_processor(processor)}" if device.startswith("cpu") else device
