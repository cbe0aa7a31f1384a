"""Every number a report shows, computed from the per-sample rows in one place.

Figures, tables, the HTML report, the W&B sink and the notebooks all call this module, so a number
cannot be computed two different ways. The rules (see ``shared/design/conventions.md``):

* A cell is ``(sweep, cell_id)``: the same semantic cell run in two sweeps is two measurements.
* Speedup of an arm = ``sum(t_ar) / sum(t_arm)`` over the (sample, turn, repeat) keys both arms
  completed without error; its CI is a paired bootstrap over samples, the turns and repeats of one
  sample summed first because they share its conversation and output lengths (samples are the
  independent unit).
* Compression = ``sum(new_tokens) / sum(decode_steps)`` and throughput = ``sum(new_tokens) /
  sum(wall_time_s)`` over an arm's error-free rows.
* Quality (ROUGE, pass@1, accuracy, ``matches_ar``) = mean over (sample, turn) of the per-key mean
  over repeats, so a sample with more surviving repeats does not weigh more.
* pass@k is reported for k = 1 only: repeats of a sample reuse its seed and so are not independent
  completions, which the unbiased pass@k estimator for k > 1 would require.

Array shapes: every per-sample input is a column of the rows frame (one entry per row).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.decoding.params import LookaheadParams
from lade_bench.metrics.passk import pass_at_k_from_results
from lade_bench.metrics.registry import get_metric
from lade_bench.metrics.speed import accept_length_histogram, bootstrap_ci, compression_ratio, speedup
from lade_bench.report.device_profile import forward_time_at

# Two columns make a cell unique across sweeps; the rest describe it (identical on all its rows,
# except N/W/G, which some runners leave null on baseline rows).
CELL_KEY: tuple[str, ...] = ("sweep", "cell_id")
CELL_ATTRIBUTES: tuple[str, ...] = (
    "model",
    "dataset",
    "ngram",
    "window",
    "guesses",
    "prompt_as_reference",
    "do_sample",
    "temperature",
    "top_p",
    "top_k",
)
# (sample, turn, repeat): what pairs a baseline row with a method row of the same cell.
PAIR_KEY: tuple[str, ...] = ("sample_id", "turn", "repeat")
SAMPLE_KEY: tuple[str, ...] = ("sample_id", "turn")

BASELINE_ARM = "ar"
ARM_ORDER: tuple[str, ...] = ("ar", "lookahead", "prompt_lookup", "jacobi")
ARM_LABELS: dict[str, str] = {
    "ar": "AR",
    "lookahead": "Lookahead",
    "prompt_lookup": "Prompt lookup",
    "jacobi": "Jacobi",
}
ROUGE_COLUMNS: tuple[str, ...] = ("rouge1", "rouge2", "rougeL", "rougeLsum")
# Per-key means of these columns are averaged with the registry's aggregation (metric name -> column).
MEAN_METRICS: dict[str, str] = {
    **{name: name for name in ROUGE_COLUMNS},
    "accuracy": "accuracy",
    "matches_ar": "matches_ar",
}

# Defaults shared by the CLI, the notebooks and the W&B sink so their files agree byte for byte.
N_BOOT = 2000
CONFIDENCE = 0.95
BOOT_SEED = 0

SUMMARY_COLUMNS: tuple[str, ...] = (
    *CELL_KEY,
    *CELL_ATTRIBUTES,
    "arm",
    "n_rows",
    "n_errors",
    "n_pairs",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "compression_ratio",
    "tokens_per_s",
    "new_tokens",
    "decode_steps",
    "wall_time_s",
    "tokens_per_step",
    *ROUGE_COLUMNS,
    "pass@1",
    "accuracy",
    "matches_ar",
)


def ok_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows without an ``error`` (errored rows carry no timing and never enter an aggregate)."""
    return rows[rows["error"].isna()]


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
    attributes: dict[str, Any] = {name: _plain(cell_rows[name].iloc[0]) for name in CELL_KEY}
    for name in CELL_ATTRIBUTES:
        present = cell_rows[name].dropna()
        attributes[name] = _plain(present.iloc[0]) if len(present) else None
    return attributes


def paired_times(cell_rows: pd.DataFrame, arm: str) -> pd.DataFrame:
    """Wall times of ``arm`` and the AR baseline, paired, then summed per sample over turns and repeats.

    Only (sample, turn, repeat) keys that both arms completed without error are kept.

    Returns:
        Frame with columns ``sample_id, t_ar, t_arm, n_pairs`` (paired keys of the sample), one row
        per sample, sorted by sample id; empty when nothing pairs.
    """
    good = ok_rows(cell_rows)
    base = good[good["arm"] == BASELINE_ARM][[*PAIR_KEY, "wall_time_s"]]
    other = good[good["arm"] == arm][[*PAIR_KEY, "wall_time_s"]]
    merged = base.merge(other, on=list(PAIR_KEY), suffixes=("_ar", "_arm"), validate="one_to_one")
    if merged.empty:
        return pd.DataFrame({"sample_id": [], "t_ar": [], "t_arm": [], "n_pairs": []})
    grouped = merged.groupby("sample_id", sort=True)
    out = grouped.agg(t_ar=("wall_time_s_ar", "sum"), t_arm=("wall_time_s_arm", "sum"), n_pairs=("repeat", "size"))
    return out.reset_index()


def speedup_with_ci(
    cell_rows: pd.DataFrame,
    arm: str,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
) -> tuple[float, float, float, int]:
    """Speedup of ``arm`` over AR in one cell with its bootstrap CI.

    Returns:
        ``(speedup, ci_low, ci_high, n_pairs)`` where n_pairs counts paired (sample, turn, repeat)
        keys; NaNs and 0 when nothing pairs (no AR arm, or every pair errored).
    """
    pairs = paired_times(cell_rows, arm)
    if pairs.empty:
        return math.nan, math.nan, math.nan, 0
    t_ar = pairs["t_ar"].to_numpy(dtype=np.float64)
    t_arm = pairs["t_arm"].to_numpy(dtype=np.float64)
    value = speedup(t_ar, t_arm)
    low, high = bootstrap_ci(t_ar, t_arm, n_boot=n_boot, confidence=confidence, seed=seed)
    return value, low, high, int(pairs["n_pairs"].sum())


def quality_means(arm_rows: pd.DataFrame) -> dict[str, float]:
    """ROUGE, accuracy, ``matches_ar`` and pass@1 of one arm's error-free rows (NaN where absent)."""
    out: dict[str, float] = {}
    for metric, column in MEAN_METRICS.items():
        per_key = per_sample_quality(arm_rows, column)
        out[metric] = get_metric(metric).aggregate(per_key) if per_key.size else math.nan
    passed = ok_rows(arm_rows)[[*SAMPLE_KEY, "passed"]].dropna(subset=["passed"])
    if passed.empty:
        out["pass@1"] = math.nan
    else:
        by_problem = {key: [bool(v) for v in group["passed"]] for key, group in passed.groupby(list(SAMPLE_KEY))}
        out["pass@1"] = pass_at_k_from_results(by_problem, k=1)
    return out


def arm_efficiency(arm_rows: pd.DataFrame) -> dict[str, float]:
    """Compression, throughput and totals of one arm's error-free rows (NaN where there are none)."""
    good = ok_rows(arm_rows)
    if good.empty:
        return {
            "compression_ratio": math.nan,
            "tokens_per_s": math.nan,
            "new_tokens": 0,
            "decode_steps": 0,
            "wall_time_s": 0.0,
        }
    tokens = good["new_tokens"].to_numpy(dtype=np.float64)
    steps = good["decode_steps"].to_numpy(dtype=np.float64)
    times = good["wall_time_s"].to_numpy(dtype=np.float64)
    return {
        "compression_ratio": compression_ratio(tokens, steps),
        "tokens_per_s": get_metric("tokens_per_s").aggregate(tokens, times),
        "new_tokens": int(tokens.sum()),
        "decode_steps": int(steps.sum()),
        "wall_time_s": float(times.sum()),
    }


def tokens_per_step(ngram: Any, window: Any, guesses: Any) -> float:
    """Most input tokens of one lookahead step, ``(W + G) * (N - 1)``; NaN when the shape is unset."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (ngram, window, guesses)):
        return math.nan
    return float(LookaheadParams(int(ngram), int(window), int(guesses)).tokens_per_step)


def summarize_cell(
    cell_rows: pd.DataFrame,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
) -> list[dict[str, Any]]:
    """One summary record per arm of one cell (AR first, then the other arms in ``ARM_ORDER``).

    The AR record has speedup 1.0 by the same ratio-of-sums computation as every other arm.
    """
    attributes = cell_attributes(cell_rows)
    records = []
    for arm in sorted_arms(cell_rows["arm"].unique()):
        arm_rows = cell_rows[cell_rows["arm"] == arm]
        value, low, high, n_pairs = speedup_with_ci(cell_rows, arm, n_boot=n_boot, confidence=confidence, seed=seed)
        is_lookahead = arm == "lookahead"
        shape = (attributes["ngram"], attributes["window"], attributes["guesses"])
        record = {
            **attributes,
            "arm": arm,
            "n_rows": int(len(arm_rows)),
            "n_errors": int(arm_rows["error"].notna().sum()),
            "n_pairs": n_pairs,
            "speedup": value,
            "speedup_ci_low": low,
            "speedup_ci_high": high,
            **arm_efficiency(arm_rows),
            "tokens_per_step": tokens_per_step(*shape) if is_lookahead else math.nan,
            **quality_means(arm_rows),
        }
        records.append({name: record[name] for name in SUMMARY_COLUMNS})
    return records


def summarize(
    rows: pd.DataFrame,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
) -> pd.DataFrame:
    """Summary of every (cell, arm) in ``rows``: the table every report draws from.

    Args:
        rows: per-sample rows as returned by ``lade_bench.results.load_rows`` (one or more sweeps).
        n_boot, confidence, seed: bootstrap settings of the speedup CI.

    Returns:
        One row per (sweep, cell_id, arm) with ``SUMMARY_COLUMNS``, sorted by sweep, model, dataset,
        sampling, N, W, G, prompt-as-reference and arm order.
    """
    records: list[dict[str, Any]] = []
    for _, cell_rows in rows.groupby(list(CELL_KEY), sort=False):
        records.extend(summarize_cell(cell_rows, n_boot=n_boot, confidence=confidence, seed=seed))
    frame = pd.DataFrame.from_records(records, columns=list(SUMMARY_COLUMNS))
    if frame.empty:
        return frame
    return sort_summary(frame)


def sort_summary(summary: pd.DataFrame) -> pd.DataFrame:
    """Sort summary records in the reading order of tables (nulls last, arms in ``ARM_ORDER``)."""
    order = {arm: i for i, arm in enumerate(ARM_ORDER)}
    keyed = summary.assign(_arm_order=summary["arm"].map(lambda a: order.get(a, len(order))))
    by = [
        "sweep",
        "model",
        "dataset",
        "do_sample",
        "temperature",
        "top_p",
        "top_k",
        "ngram",
        "window",
        "guesses",
        "prompt_as_reference",
        "cell_id",
        "_arm_order",
    ]
    ascending = [True] * len(by)
    ascending[by.index("prompt_as_reference")] = False  # the default (True) first
    keyed = keyed.sort_values(by, ascending=ascending, na_position="last", kind="mergesort")
    return keyed.drop(columns="_arm_order").reset_index(drop=True)


def sorted_arms(arms: Sequence[str] | np.ndarray) -> list[str]:
    """Arms in ``ARM_ORDER`` (unknown arms last, alphabetically)."""
    order = {arm: i for i, arm in enumerate(ARM_ORDER)}
    return sorted((str(a) for a in arms), key=lambda a: (order.get(a, len(order)), a))


def accept_histogram(rows: pd.DataFrame) -> dict[int, int]:
    """Forward passes per number of tokens they emitted, pooled over ``rows`` without error.

    Every forward pass counts, the prefill included, so the histogram's mean is the compression ratio.
    """
    good = ok_rows(rows)
    return accept_length_histogram(list(good["accept_lengths"]))


def main_cells(summary: pd.DataFrame) -> pd.DataFrame:
    """The cell shown per (sweep, model, dataset) in the main table and the per-dataset bar chart.

    Among greedy cells: the one that ran the most arms (so lookahead and prompt lookup are compared
    on the same samples), then prompt-as-reference on (the method's default), then the highest
    lookahead speedup. The last tie-break picks the best configuration *on these samples*, as the
    paper's main table picks a tuned configuration; captions say so.

    Returns:
        The summary rows (all arms) of the selected cells.
    """
    greedy = summary[~summary["do_sample"].astype(bool)]
    if greedy.empty:
        return greedy
    per_cell = []
    for key, cell in greedy.groupby([*CELL_KEY], sort=False):
        lookahead = cell[cell["arm"] == "lookahead"]["speedup"]
        per_cell.append(
            {
                "sweep": key[0],
                "cell_id": key[1],
                "model": cell["model"].iloc[0],
                "dataset": cell["dataset"].iloc[0],
                "n_arms": cell["arm"].nunique(),
                "prompt_as_reference": bool(cell["prompt_as_reference"].iloc[0]),
                "lookahead_speedup": float(lookahead.iloc[0]) if len(lookahead) else -math.inf,
            }
        )
    ranked = pd.DataFrame(per_cell).sort_values(
        ["n_arms", "prompt_as_reference", "lookahead_speedup"], ascending=False, kind="mergesort"
    )
    chosen = ranked.drop_duplicates(["sweep", "model", "dataset"])[list(CELL_KEY)]
    return greedy.merge(chosen, on=list(CELL_KEY)).pipe(sort_summary)


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray,
    *,
    n_boot: int = N_BOOT,
    confidence: float = CONFIDENCE,
    seed: int = BOOT_SEED,
) -> tuple[float, float, float]:
    """Mean of per-sample values with a percentile bootstrap CI (for quality metrics such as ROUGE).

    Args:
        values: shape (n_samples,), finite.

    Returns:
        ``(mean, low, high)``; NaNs for empty input.
    """
    arr = np.asarray(values, dtype=np.float64)
    if arr.size == 0:
        return math.nan, math.nan, math.nan
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(int(n_boot), arr.size))
    means = arr[idx].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(arr.mean()), float(low), float(high)


def per_sample_quality(arm_rows: pd.DataFrame, column: str) -> np.ndarray:
    """Per-(sample, turn) mean of a quality column over repeats, as ``quality_means`` averages it.

    Returns:
        Array of shape (n_samples,), sorted by (sample_id, turn).
    """
    good = ok_rows(arm_rows)[[*SAMPLE_KEY, column]].dropna(subset=[column])
    if good.empty:
        return np.zeros(0)
    good = good.assign(**{column: good[column].astype(np.float64)})
    return good.groupby(list(SAMPLE_KEY), sort=True)[column].mean().to_numpy()


def predicted_speedups(summary: pd.DataFrame, profiles: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Speedup predicted from each lookahead cell's compression and its sweep's device profile.

    ``predicted = compression * t(1) / t((W + G) * (N - 1))`` with ``t(k)`` the measured time of one
    forward pass carrying k new tokens: a step that emits ``compression`` tokens on average costs
    ``t(k)`` instead of the ``compression * t(1)`` that AR would spend on them. It ignores the host
    overhead of lookahead (pool, window bookkeeping), so the gap to the measured speedup is that cost.

    Args:
        summary: output of :func:`summarize`.
        profiles: device profile per sweep name (see ``device_profile``); sweeps without one are left
            out.

    Returns:
        One row per lookahead (sweep, cell) with the cell attributes, ``tokens_per_step``,
        ``compression_ratio``, ``t1_s``, ``tk_s``, ``predicted_speedup`` and the measured ``speedup``.
    """
    columns = [
        *CELL_KEY,
        *CELL_ATTRIBUTES,
        "tokens_per_step",
        "compression_ratio",
        "t1_s",
        "tk_s",
        "predicted_speedup",
        "speedup",
    ]
    lookahead = summary[(summary["arm"] == "lookahead") & summary["sweep"].isin(list(profiles))]
    records = []
    for rec in lookahead.to_dict("records"):
        k = rec["tokens_per_step"]
        if not math.isfinite(k) or not math.isfinite(rec["compression_ratio"]):
            continue
        profile = profiles[rec["sweep"]]
        t1 = forward_time_at(profile, 1)
        tk = forward_time_at(profile, int(k))
        records.append(
            {
                **{c: rec[c] for c in (*CELL_KEY, *CELL_ATTRIBUTES)},
                "tokens_per_step": k,
                "compression_ratio": rec["compression_ratio"],
                "t1_s": t1,
                "tk_s": tk,
                "predicted_speedup": rec["compression_ratio"] * t1 / tk,
                "speedup": rec["speedup"],
            }
        )
    return pd.DataFrame.from_records(records, columns=columns)


def flat_metrics(summary: pd.DataFrame) -> dict[str, float]:
    """Finite numeric metrics of one cell's summary as ``{"<arm>/<metric>": value}`` (for W&B).

    Non-finite values (a metric the dataset does not have) are left out rather than logged as NaN.
    """
    metric_columns = [c for c in SUMMARY_COLUMNS if c not in (*CELL_KEY, *CELL_ATTRIBUTES, "arm")]
    out: dict[str, float] = {}
    for rec in summary.to_dict("records"):
        for column in metric_columns:
            value = _plain(rec[column])
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out[f"{rec['arm']}/{column}"] = value
    return out


def _plain(value: Any) -> Any:
    """A pandas/numpy scalar as a plain Python value (``None`` for NA)."""
    if value is None or value is pd.NA:
        return None
    return value.item() if isinstance(value, np.generic) else value
