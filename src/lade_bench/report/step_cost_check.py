"""The step-cost model checked against measured cells: per cell and arm, predicted vs measured speedup.

For every non-AR arm of every cell of a loaded sweep, on the cell's paired units (``stats.common_rows``):
the measured speedup is the summary's (the leaderboard's ratio of sums and its paired bootstrap interval,
``stats.summarize``); the predicted one is ``stats.step_cost.predicted_speedup`` of the arm's paired rows
against AR's, in the same (sample, turn, repeat) order, on the cell's own device profile (the report's
matching, ``Sweep.cell_profiles``, or a profile given for a folder that holds none, checked for the
cell's model, dtype, mode, threads and recorded CPU: :func:`given_match`). A sampling cell's measured
speedup is a ratio of time per token, so its prediction is too: the predicted ratio of times times the
arms' token ratio (``sum(tok_arm) / sum(tok_ar)``).

An arm the model cannot describe is listed with the reason, never dropped: an arm whose steps run more
than the one full model on one device (assisted's draft model: ``methods.runs_on_one_model``), rows
without ``step_tokens``, a cell without a profile of its key, a step outside the profile's measured range.
Beside each prediction, what the rows can say about its error: the predicted over the measured summed
time of each side (``ar_time_ratio``, ``arm_time_ratio``: the error is their quotient less one) and the
arm's predicted decode forwards over its measured ``forward_time_s`` (which includes the prefill's
forward); for a prediction outside the measured interval, :func:`reading` says which the rows show.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench import stats
from lade_bench.datasets.spec_bench import GROUP_OF, parse_sample_id
from lade_bench.methods import STANDARD_PATH_REFERENCE, get_method, is_registered, runs_on_one_model
from lade_bench.profiling.device_profile import ProfileKey, StoredProfile, profile_model_matches, same_device_kind
from lade_bench.report.conditions import cell_processor
from lade_bench.report.sweep import CellFiles, Sweep
from lade_bench.stats.step_cost import predicted_speedup, predicted_times, prediction_basis

CHECK_COLUMNS: tuple[str, ...] = (
    "sweep",
    "cell_id",
    "model",
    "dataset",
    "group",
    "dtype",
    "mode",
    "arm",
    "label",
    "setting",
    "sampling",
    "n_units",
    "measured",
    "ci_low",
    "ci_high",
    "ci_note",
    "predicted",
    "error",
    "measured_verdict",
    "predicted_verdict",
    "verdicts_agree",
    "inside_interval",
    "kv_measured",
    "context_tokens",
    "ar_rows_without_outside_time",
    "arm_rows_without_outside_time",
    "ar_time_ratio",
    "arm_time_ratio",
    "arm_forward_ratio",
    "ar_prompt_tokens",
    "reading",
    "profile",
    "profile_match",
    "not_predicted",
)

# How a cell's profile was found (``profile_match``).
MATCH_KEY = "cell's key"
MATCH_GIVEN = "given: model, dtype, mode, threads and the cell's recorded CPU"
MATCH_GIVEN_NO_CPU = "given: model, dtype, mode and threads; CPU not recorded in the profile"

# What the rows say about a prediction outside the measured interval (``reading``; docs/statistics.md).
READ_ARM_OUTSIDE = "arm's outside-forward time not recorded"
READ_ARM_FORWARDS = "profile prices the arm's decode forwards above all its measured forwards"
READ_AR_FORWARDS = "profile prices AR's decode forwards above AR's whole measured time"
READ_CANNOT_TELL = "the rows cannot tell"

# The numeric columns of ``CHECK_COLUMNS`` (NaN where not predicted); every other column is text ("" when empty).
NUMERIC_COLUMNS: tuple[str, ...] = (
    "n_units", "measured", "ci_low", "ci_high", "predicted", "error", "context_tokens", "ar_rows_without_outside_time",
    "arm_rows_without_outside_time", "ar_time_ratio", "arm_time_ratio", "arm_forward_ratio", "ar_prompt_tokens",
)  # fmt: skip


def check_sweep(sweep: Sweep, given: Sequence[StoredProfile] = ()) -> pd.DataFrame:
    """The check of every non-AR (cell, arm) of ``sweep``: one row each, ``CHECK_COLUMNS``, in summary order.

    Args:
        sweep: a loaded sweep (``report.sweep.load_sweep``); its summary gives the measured speedups.
        given: profiles for the cells the sweep's own profiles do not match (a folder that holds none: a
            tuner's held-out rows and its tune record's profile, a sweep and the engine benchmark's
            step-cost curves of its CPU); each used only where :func:`given_match` says it describes the cell.
    """
    cells = {(c.sweep, c.cell_id): c for c in sweep.cells}
    records = []
    summary = sweep.summary[sweep.summary["arm"] != stats.BASELINE_ARM]
    # Each cell's rows, found once (a filter of every row per cell grows with the sweeps reported together).
    rows_of = {(str(k[0]), str(k[1])): frame for k, frame in sweep.rows.groupby(["sweep", "cell_id"], sort=False)}
    for (name, cell_id), cell_summary in summary.groupby(["sweep", "cell_id"], sort=False):
        key = (str(name), str(cell_id))
        cell_rows = rows_of.get(key, sweep.rows.iloc[0:0])
        paired = stats.common_rows(cell_rows)
        stored, match, missing = cell_profile(sweep, cells.get(key), given)
        cell_key = cells[key].profile_key()[0] if key in cells else None
        dtype = cell_key.dtype if cell_key is not None else ""
        times: dict[str, pd.Series] = {}  # each arm's predicted row times, AR's read by every arm of the cell
        ordered: dict[str, pd.DataFrame] = {}  # each arm's paired rows in key order, AR's read by every arm
        for rec in cell_summary.to_dict("records"):
            check = _check_record(sweep, rec, paired, stored, missing, times, ordered)
            records.append(check | {"profile_match": match, "dtype": dtype})
    return pd.DataFrame.from_records(records, columns=list(CHECK_COLUMNS))


def read_check(path: str | Path) -> pd.DataFrame:
    """A ``check.csv`` as :func:`check_sweep` returned it: numbers as floats, text as text ("" kept "")."""
    text = [c for c in CHECK_COLUMNS if c not in NUMERIC_COLUMNS and c != "sampling"]
    check = pd.read_csv(path, dtype={c: str for c in text}, keep_default_na=False)
    for column in NUMERIC_COLUMNS:
        check[column] = pd.to_numeric(check[column].replace("", math.nan))
    check["sampling"] = check["sampling"].astype(str) == "True"
    return check[list(CHECK_COLUMNS)]


def cell_profile(
    sweep: Sweep, cell: CellFiles | None, given: Sequence[StoredProfile]
) -> tuple[StoredProfile | None, str, str]:
    """The profile a cell is predicted from, how it was matched (``profile_match``) and, when there is
    none, the reason: the report's match (``Sweep.cell_profiles``: the cell's own key in its own folder)
    first, else the first of ``given`` that :func:`given_match` accepts."""
    if cell is None:
        return None, "", "no cell files (config, manifest) to read its device-profile key from"
    found = sweep.cell_profiles.get((cell.sweep, cell.cell_id))
    if found is not None:
        return found, MATCH_KEY, ""
    key, aliases = cell.profile_key()
    if key is None:
        return None, "", "the cell's device-profile key is not recorded"
    for stored in given:
        # The CPU the key records; cells keyed before the processor was part of it: their runs' timing conditions.
        match = given_match(stored.profile, key, aliases, key.processor or cell_processor(cell.manifest or {}))
        if match:
            return stored, match, ""
    return None, "", f"no committed device profile of the cell's key: {key.describe()}"


def given_match(profile: Mapping[str, Any], key: ProfileKey, aliases: Sequence[str], cpu: str) -> str:
    """How a given profile describes a cell of ``key`` timed on ``cpu`` (its key's, or its runs' recorded), or
    "" when it does not: its model, dtype, compile mode and device kind (threads) must be the cell's, and
    its processor, where it recorded one, the CPU the cell's runs recorded."""
    if not profile_model_matches(profile, {key.model, *aliases}) or str(profile.get("dtype")) != key.dtype:
        return ""
    mode = str(profile.get("compile_mode") or "eager")
    if mode != key.compile_mode or not same_device_kind(str(profile.get("device_kind") or ""), key.device_kind):
        return ""
    recorded = str(profile.get("processor") or "")
    if not recorded:
        return MATCH_GIVEN_NO_CPU
    return MATCH_GIVEN if recorded == cpu else ""


def _check_record(
    sweep: Sweep,
    rec: dict[str, Any],
    paired: pd.DataFrame,
    stored: StoredProfile | None,
    missing: str,
    times: dict[str, pd.Series],
    ordered: dict[str, pd.DataFrame],
) -> dict[str, Any]:
    """One (cell, arm): measured from the summary record, predicted from the paired rows and the profile
    (``times`` and ``ordered`` keep each arm's predicted row times and ordered rows for the cell's other arms)."""
    arm = str(rec["arm"])
    low, high = float(rec["speedup_ci_low"]), float(rec["speedup_ci_high"])
    measured = float(rec["speedup"])
    for side in (arm, stats.BASELINE_ARM):
        if side not in ordered:
            ordered[side] = _ordered(paired[paired["arm"] == side])
    arm_rows, ar_rows = ordered[arm], ordered[stats.BASELINE_ARM]
    sampling = bool(rec["do_sample"])
    out: dict[str, Any] = {
        "sweep": rec["sweep"],
        "cell_id": rec["cell_id"],
        "model": rec["model"],
        "dataset": rec["dataset"],
        "group": _group(arm_rows) if rec["dataset"] == "spec_bench" else "",
        "mode": stats.mode_label(rec.get("compiled"), rec.get("compile_mode")),
        "arm": arm,
        "label": sweep.record_label(rec),
        "setting": _setting(rec),
        "sampling": sampling,
        "n_units": int(rec["n_units"]),
        "measured": measured,
        "ci_low": low,
        "ci_high": high,
        "ci_note": rec["speedup_ci_note"] or "",
        "measured_verdict": stats.speedup_verdict(low, high),
        "profile": stored.path.name if stored is not None else "",
    }
    reason = missing or _two_paths(paired) or _unpredictable(arm, arm_rows, ar_rows)
    predicted = math.nan
    if not reason and stored is not None:
        try:
            predicted = predicted_speedup(arm_rows, ar_rows, stored.profile)
        except ValueError as refused:  # a step outside the profile's measured range: listed, not dropped
            reason = str(refused)
    if reason or stored is None:
        blank = {c: "" for c in ("predicted_verdict", "verdicts_agree", "inside_interval", "kv_measured", "reading")}
        return {**{c: math.nan for c in CHECK_COLUMNS}, **out, **blank, "not_predicted": reason}
    if sampling:  # the measured speedup is per generated token: so is its prediction
        predicted *= float(arm_rows["new_tokens"].sum()) / float(ar_rows["new_tokens"].sum())
    profile = stored.profile
    ar_basis, arm_basis = prediction_basis(_records(ar_rows), profile), prediction_basis(_records(arm_rows), profile)
    verdict = _point_verdict(predicted)
    error = predicted / measured - 1.0
    inside = "" if math.isnan(low) else str(low <= predicted <= high)
    for side, rows in ((stats.BASELINE_ARM, ar_rows), (arm, arm_rows)):
        if side not in times:
            times[side] = predicted_times(rows, profile)
    ratios = {
        "ar_time_ratio": float(times[stats.BASELINE_ARM].sum() / ar_rows["wall_time_s"].sum()),
        "arm_time_ratio": float(times[arm].sum() / arm_rows["wall_time_s"].sum()),
        "arm_forward_ratio": _forward_ratio(arm_rows, times[arm]),
    }
    return {
        **out,
        "predicted": predicted,
        "error": error,
        "predicted_verdict": verdict,
        # Agreement is asked only where the measured interval gives a verdict; elsewhere the data cannot tell.
        "verdicts_agree": (
            "" if out["measured_verdict"] == stats.VERDICT_CANNOT_TELL else str(verdict == out["measured_verdict"])
        ),
        "inside_interval": inside,
        "kv_measured": str(bool(arm_basis["kv_measured"])),
        "context_tokens": arm_basis["context_tokens"],
        "ar_rows_without_outside_time": ar_basis["rows_without_outside_time"],
        "arm_rows_without_outside_time": arm_basis["rows_without_outside_time"],
        **ratios,
        "ar_prompt_tokens": float(ar_rows["prompt_tokens"].mean()),
        "reading": reading(ratios, arm_basis["rows_without_outside_time"], error) if inside == "False" else "",
        "not_predicted": "",
    }


def reading(ratios: Mapping[str, float], arm_rows_without_outside_time: int, error: float) -> str:
    """What the rows show about a prediction outside the measured interval: the first that holds of what
    moves a prediction the way it erred. Too fast (``error`` > 0): the arm's outside time is unrecorded
    (taken as zero), or AR's predicted decode forwards exceed AR's whole measured time (AR's forwards
    over-priced). Too slow: the arm's predicted decode forwards exceed its measured forwards, prefill
    included (the arm's forwards over-priced, not its outside time). Else the rows cannot tell (AR records
    no forward time, so its forwards, its outside time and the prefill left out cannot be told apart)."""
    if error > 0 and arm_rows_without_outside_time:
        return READ_ARM_OUTSIDE
    if error > 0 and ratios["ar_time_ratio"] > 1.0:
        return READ_AR_FORWARDS
    if error < 0 and ratios["arm_forward_ratio"] > 1.0:
        return READ_ARM_FORWARDS
    return READ_CANNOT_TELL


def unpriced_reason(arm: str) -> str:
    """Why a profile cannot price a registered ``arm`` whose steps run more than the one full model on one
    device (``methods.runs_on_one_model`` false: assisted's draft, tensor or pipeline parallelism)."""
    roles = " + ".join(get_method(arm).models)
    return f"its steps run {roles}; a device profile times one model on one device"


def _ordered(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows in (sample, turn, repeat) order: an arm's and AR's paired rows then align one to one."""
    return rows.sort_values(list(stats.PAIR_KEY), kind="stable").reset_index(drop=True)


def _records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    return rows[["wall_time_s", "forward_time_s"]].to_dict("records")


def _two_paths(paired: pd.DataFrame) -> str:
    """Why a cell that times AR on two step paths cannot be checked ("" otherwise): its measured speedups
    are against the faster AR arm, often AR on the standard path (``ar_standard``), while a profile is one
    path's step curve, so the model would price both AR arms alike and predict against the other one."""
    if (paired["arm"] == STANDARD_PATH_REFERENCE).any():
        return (
            "the cell times AR on two step paths (ar and ar_standard) and measures against the faster; "
            "a device profile is one path's step curve"
        )
    return ""


def _unpredictable(arm: str, arm_rows: pd.DataFrame, ar_rows: pd.DataFrame) -> str:
    """Why the model cannot describe this arm's rows ("" when it can)."""
    if is_registered(arm) and not runs_on_one_model(get_method(arm)):
        return unpriced_reason(arm)
    if arm_rows.empty:
        return "no paired rows"
    for side, rows in ((arm, arm_rows), (stats.BASELINE_ARM, ar_rows)):
        if rows["step_tokens"].map(lambda s: s is None or len(s) == 0).any():
            return f"{side} rows without step_tokens (recorded before rows kept each step's width)"
    if not arm_rows[list(stats.PAIR_KEY)].equals(ar_rows[list(stats.PAIR_KEY)]):
        return "the arm's and AR's paired rows do not align"
    return ""


def _point_verdict(predicted: float) -> str:
    """A predicted speedup is a point: faster above 1, slower below."""
    if predicted > 1.0:
        return stats.VERDICT_FASTER
    return stats.VERDICT_SLOWER if predicted < 1.0 else stats.VERDICT_CANNOT_TELL


def _forward_ratio(rows: pd.DataFrame, times: pd.Series) -> float:
    """The profile's decode forwards of ``rows`` (their predicted ``times`` less the measured outside time)
    over their measured ``forward_time_s``, prefill included; NaN where no row recorded it."""
    timed = rows["forward_time_s"].notna()
    if not timed.any():
        return math.nan
    outside = (rows["wall_time_s"] - rows["forward_time_s"]).clip(lower=0.0)
    return float((times[timed] - outside[timed]).sum() / rows.loc[timed, "forward_time_s"].sum())


def _setting(rec: Mapping[str, Any]) -> str:
    """The lookahead shape a lookahead or Jacobi cell ran, ``N5W7G7`` (+ ``noref``); else empty."""
    if rec["arm"] not in ("lookahead", "jacobi") or pd.isna(rec.get("ngram")):
        return ""
    shape = f"N{int(rec['ngram'])}W{int(rec['window'])}G{int(rec['guesses'])}"
    return shape + ("" if rec.get("prompt_as_reference") else " noref")


def _group(rows: pd.DataFrame) -> str:
    """The Spec-Bench groups a cell's samples belong to (one per cell as the sweep runs them)."""
    return "+".join(sorted({GROUP_OF[parse_sample_id(str(s))[0]] for s in rows["sample_id"]}))
