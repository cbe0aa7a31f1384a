"""Per-cell summary for ``summary.json`` and the console, recomputed from the rows table alone.

The numbers come from ``lade_bench.report.aggregate`` (the one place that computes speedup, its
bootstrap CI, compression, throughput and quality), so the console, ``summary.json``, W&B and the
report always agree. This module only reshapes them per arm and adds two per-cell extras: the
per-sample mean speedup and the accepted-tokens-per-step histogram.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from lade_bench.metrics.speed import per_sample_speedup_mean
from lade_bench.report import aggregate

# Quality metrics appear only where the dataset has them (NaN from the aggregate means "absent").
_OPTIONAL = ("rouge1", "rouge2", "rougeL", "rougeLsum", "pass@1", "accuracy", "matches_ar")
_SPEEDUP = ("speedup", "speedup_ci_low", "speedup_ci_high")


def summarize_cell(
    rows: pd.DataFrame, *, n_boot: int = aggregate.N_BOOT, seed: int = aggregate.BOOT_SEED
) -> dict[str, Any]:
    """Summary of one cell's rows (as ``lade_bench.results.load_rows`` returns them).

    Returns:
        ``{"n_samples", "n_rows", "n_errors", "arms": {arm: {...}}}``. Each arm has ``rows``,
        ``errors``, ``new_tokens``, ``wall_time_s``, ``tokens_per_s``, ``compression_ratio`` and
        ``accept_length_histogram``; quality means where the dataset has them (``rouge*``,
        ``pass@1``, ``accuracy``); non-AR arms add ``speedup`` (ratio of sums), its 95%
        bootstrap interval ``speedup_ci_low``/``speedup_ci_high``, ``speedup_per_sample_mean``,
        ``paired_samples`` and, for greedy cells, ``matches_ar`` (the match rate). A number that
        cannot be computed is None.
    """
    summary: dict[str, Any] = {
        "n_samples": int(rows["sample_id"].nunique()),
        "n_rows": len(rows),
        "n_errors": int(rows["error"].notna().sum()),
        "arms": {},
    }
    good = aggregate.ok_rows(rows)
    for record in aggregate.summarize_cell(rows, n_boot=n_boot, seed=seed):
        arm = record["arm"]
        stats: dict[str, Any] = {
            "rows": record["n_rows"],
            "errors": record["n_errors"],
            "new_tokens": record["new_tokens"],
            "wall_time_s": record["wall_time_s"],
            "tokens_per_s": _number(record["tokens_per_s"]),
            "compression_ratio": _number(record["compression_ratio"]),
            # JSON object keys are strings; the values are step counts per accepted length.
            "accept_length_histogram": {
                str(k): v for k, v in aggregate.accept_histogram(good[good["arm"] == arm]).items()
            },
        }
        stats.update({name: record[name] for name in _OPTIONAL if not _is_nan(record[name])})
        if arm != aggregate.BASELINE_ARM:
            stats.update({name: _number(record[name]) for name in _SPEEDUP})
            pairs = aggregate.paired_times(rows, arm)
            stats["paired_samples"] = len(pairs)
            stats["speedup_per_sample_mean"] = (
                per_sample_speedup_mean(pairs["t_ar"].to_numpy(float), pairs["t_arm"].to_numpy(float))
                if len(pairs)
                else None
            )
        summary["arms"][arm] = stats
    return summary


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _number(value: Any) -> float | None:
    """JSON-friendly number: NaN (cannot be computed) becomes None."""
    return None if value is None or _is_nan(value) else float(value)
