"""Per-cell summary numbers, recomputed from the rows table alone (``summary.json`` is a cache).

Speedup pairs each non-AR row with the AR row of the same (sample, turn, repeat); wall times are
then summed per sample, so the bootstrap resamples samples (the independent unit), not turns.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from lade_bench.metrics.passk import pass_at_k_from_results
from lade_bench.metrics.speed import (
    accept_length_histogram,
    bootstrap_ci,
    compression_ratio,
    per_sample_speedup_mean,
    speedup,
    tokens_per_s,
)
from lade_bench.metrics.task_accuracy import match_rate
from lade_bench.results import ARMS

ROUGE_COLUMNS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
CONFIDENCE = 0.95
_PAIR_KEYS = ["sample_id", "turn", "repeat"]


def summarize_cell(rows: pd.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Summary of one cell's rows (as ``lade_bench.results.load_rows`` returns them).

    Args:
        rows: one cell's rows, errored rows included.
        n_boot: bootstrap resamples for the speedup interval.
        seed: bootstrap seed (same rows and seed give the same interval).

    Returns:
        ``{"n_samples", "n_rows", "n_errors", "arms": {arm: {...}}}``. Each arm has ``rows``,
        ``errors``, ``new_tokens``, ``wall_time_s``, ``tokens_per_s``, ``compression_ratio`` and
        ``accept_length_histogram``; quality means where the dataset has them (``rouge*``,
        ``pass@1``, ``accuracy``); non-AR arms add ``speedup`` (ratio of sums), its 95%
        bootstrap interval ``speedup_ci_low``/``speedup_ci_high``, ``speedup_per_sample_mean``,
        ``paired_samples`` and, for greedy cells, ``matches_ar`` (the match rate). A number that
        cannot be computed is None.
    """
    ok = rows[rows["error"].isna()]
    summary: dict[str, Any] = {
        "n_samples": int(rows["sample_id"].nunique()),
        "n_rows": len(rows),
        "n_errors": int(rows["error"].notna().sum()),
        "arms": {},
    }
    ar = ok[ok["arm"] == "ar"]
    for arm in [a for a in ARMS if a in set(rows["arm"])]:
        arm_ok = ok[ok["arm"] == arm]
        stats = _efficiency(arm_ok)
        stats["errors"] = int((rows["arm"] == arm).sum() - len(arm_ok))
        stats.update(_quality(arm_ok))
        if arm != "ar":
            stats.update(_speedup(ar, arm_ok, n_boot, seed))
            flags = arm_ok["matches_ar"].dropna()
            if len(flags):
                stats["matches_ar"] = match_rate(flags.astype(bool).to_numpy())
        summary["arms"][arm] = stats
    return summary


def _efficiency(rows: pd.DataFrame) -> dict[str, Any]:
    stats: dict[str, Any] = {"rows": len(rows)}
    if rows.empty:
        return stats | dict.fromkeys(("new_tokens", "wall_time_s", "tokens_per_s", "compression_ratio"))
    tokens = rows["new_tokens"].to_numpy(dtype=float)
    times = rows["wall_time_s"].to_numpy(dtype=float)
    histogram = accept_length_histogram(list(a) for a in rows["accept_lengths"])
    return stats | {
        "new_tokens": int(tokens.sum()),
        "wall_time_s": float(times.sum()),
        "tokens_per_s": tokens_per_s(tokens, times),
        "compression_ratio": compression_ratio(tokens, rows["decode_steps"].to_numpy(dtype=float)),
        # JSON object keys are strings; the values are step counts per accepted length.
        "accept_length_histogram": {str(k): v for k, v in histogram.items()},
    }


def _quality(rows: pd.DataFrame) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for column in ROUGE_COLUMNS:
        values = rows[column].dropna()
        if len(values):
            stats[column] = float(values.mean())
    passed = rows[["sample_id", "passed"]].dropna()
    if len(passed):
        by_sample = passed.groupby("sample_id")["passed"].apply(lambda s: [bool(v) for v in s]).to_dict()
        stats["pass@1"] = pass_at_k_from_results(by_sample, 1)
    accuracy = rows["accuracy"].dropna()
    if len(accuracy):
        stats["accuracy"] = float(accuracy.mean())
    return stats


def _speedup(ar: pd.DataFrame, arm: pd.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    columns = [*_PAIR_KEYS, "wall_time_s"]
    pairs = ar[columns].merge(arm[columns], on=_PAIR_KEYS, suffixes=("_ar", ""))
    none = dict.fromkeys(("speedup", "speedup_ci_low", "speedup_ci_high", "speedup_per_sample_mean")) | {
        "paired_samples": 0
    }
    if pairs.empty:
        return none
    per_sample = pairs.groupby("sample_id")[["wall_time_s_ar", "wall_time_s"]].sum()
    t_ar = per_sample["wall_time_s_ar"].to_numpy(dtype=float)
    t_arm = per_sample["wall_time_s"].to_numpy(dtype=float)
    low, high = bootstrap_ci(t_ar, t_arm, n_boot=n_boot, confidence=CONFIDENCE, seed=seed)
    return {
        "speedup": speedup(t_ar, t_arm),
        "speedup_ci_low": low,
        "speedup_ci_high": high,
        "speedup_per_sample_mean": per_sample_speedup_mean(t_ar, t_arm),
        "paired_samples": len(per_sample),
    }
