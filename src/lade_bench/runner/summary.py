"""Per-cell summary for ``summary.json`` and the console, recomputed from the rows table alone.

The numbers come from ``lade_bench.report.aggregate`` (the one place that computes speedup, its
bootstrap CI, compression, throughput and quality, all on the units every arm completed), so the
console, ``summary.json``, W&B and the report always agree. This module only reshapes them per arm
and adds two per-cell extras: the per-sample mean speedup and the accepted-tokens-per-step histogram.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.metrics.speed import per_sample_speedup_mean
from lade_bench.report import aggregate

# Quality metrics appear only where the dataset has them (NaN from the aggregate means "absent").
_OPTIONAL = ("rouge1", "rouge2", "rougeL", "rougeLsum", "pass@1", "accuracy", "matches_ar", *aggregate.MISMATCH_SUMMARY)
_SPEEDUP = ("speedup", "speedup_ci_low", "speedup_ci_high")


def summarize_cell(
    rows: pd.DataFrame,
    *,
    n_boot: int = aggregate.N_BOOT,
    seed: int = aggregate.BOOT_SEED,
    min_ci_units: int = aggregate.MIN_CI_UNITS,
) -> dict[str, Any]:
    """Summary of one cell's rows (as ``lade_bench.results.load_rows`` returns them).

    Returns:
        ``{"n_samples", "n_rows", "n_errors", "arms": {arm: {...}}}``. Each arm has ``rows``,
        ``errors``, ``samples`` and ``pairs`` (the paired units its numbers use), ``new_tokens``,
        ``wall_time_s``, ``tokens_per_s``, ``compression_ratio``, ``step_tokens_mean`` (input tokens
        per forward after the prefill; None where not counted) and ``accept_length_histogram``;
        quality means where the dataset has them (``rouge*``, ``pass@1``, ``accuracy``); non-AR arms
        add ``speedup`` with ``speedup_basis`` (wall time when greedy, time per token when sampling),
        its 95% bootstrap interval ``speedup_ci_low``/``speedup_ci_high`` or ``speedup_ci_note``
        saying why there is none (fewer than ``min_ci_units`` samples), ``speedup_per_sample_mean``,
        ``paired_samples`` and, for greedy cells, ``matches_ar`` (the match rate) with ``mismatches``,
        ``engine_errors`` and, where mismatches have them, ``ar_margin_median`` and ``arm_margin_max``
        (see ``aggregate.mismatch_summary``). A number that cannot be computed is None.
    """
    summary: dict[str, Any] = {
        "n_samples": int(rows["sample_id"].nunique()),
        "n_rows": len(rows),
        "n_errors": int(rows["error"].notna().sum()),
        "arms": {},
    }
    paired = aggregate.common_rows(rows)
    records = aggregate.summarize_cell(rows, n_boot=n_boot, seed=seed, min_ci_units=min_ci_units)
    for record in records:
        arm = record["arm"]
        stats: dict[str, Any] = {
            "rows": record["n_rows"],
            "errors": record["n_errors"],
            "samples": record["n_units"],
            "pairs": record["n_pairs"],
            "new_tokens": record["new_tokens"],
            "wall_time_s": record["wall_time_s"],
            "tokens_per_s": _number(record["tokens_per_s"]),
            "compression_ratio": _number(record["compression_ratio"]),
            "step_tokens_mean": _number(record["step_tokens_mean"]),
            # JSON object keys are strings; the values are step counts per accepted length.
            "accept_length_histogram": {
                str(k): v for k, v in aggregate.accept_histogram(paired[paired["arm"] == arm]).items()
            },
        }
        stats.update({name: _plain(record[name]) for name in _OPTIONAL if not _is_nan(record[name])})
        if arm != aggregate.BASELINE_ARM:
            stats.update({name: _number(record[name]) for name in _SPEEDUP})
            stats["speedup_basis"] = record["speedup_basis"]
            stats["speedup_ci_note"] = record["speedup_ci_note"] or None
            pairs = aggregate.per_sample_totals(paired, arm)
            stats["paired_samples"] = len(pairs)
            stats["speedup_per_sample_mean"] = per_sample_mean(pairs, sampled=bool(record["do_sample"]))
        summary["arms"][arm] = stats
    return summary


def per_sample_mean(pairs: pd.DataFrame, *, sampled: bool) -> float | None:
    """Mean over samples of the per-sample speedup, on the same basis as the cell's speedup.

    Greedy: ``t_ar / t_arm`` per sample. Sampling: the ratio of time per token per sample, over the
    samples where both arms generated at least one token. None when no sample qualifies.
    """
    if sampled:
        pairs = pairs[(pairs["tok_ar"] > 0) & (pairs["tok_arm"] > 0)]
    if pairs.empty:
        return None
    t_ar, t_arm = pairs["t_ar"].to_numpy(np.float64), pairs["t_arm"].to_numpy(np.float64)
    if sampled:
        t_ar = t_ar / pairs["tok_ar"].to_numpy(np.float64)
        t_arm = t_arm / pairs["tok_arm"].to_numpy(np.float64)
    return per_sample_speedup_mean(t_ar, t_arm)


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (summary.json is JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def _number(value: Any) -> float | None:
    """JSON-friendly number: NaN (cannot be computed) becomes None."""
    return None if value is None or _is_nan(value) else float(value)
