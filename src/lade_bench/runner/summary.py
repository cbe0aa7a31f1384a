"""Per-cell summary for ``summary.json`` and the console, recomputed from the rows table alone.

The numbers come from ``lade_bench.stats`` (the one place that computes speedup, its bootstrap CI,
compression, throughput and quality, all on the units every arm completed), so the console,
``summary.json``, W&B and the report always agree. This module only reshapes them per arm and adds
two per-cell extras: the per-sample mean speedup and the accepted-tokens-per-step histogram.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lade_bench import stats
from lade_bench.datasets.registry import ending_datasets

# Quality metrics appear only where the dataset has them (NaN from the aggregate means "absent").
_OPTIONAL = ("rouge1", "rouge2", "rougeL", "rougeLsum", "pass@1", "accuracy", "matches_ar", *stats.MISMATCH_SUMMARY)
_SPEEDUP = ("speedup", "speedup_ci_low", "speedup_ci_high")


def summarize_cell(
    rows: pd.DataFrame,
    *,
    n_boot: int = stats.N_BOOT,
    seed: int = stats.BOOT_SEED,
    min_ci_units: int = stats.MIN_CI_UNITS,
) -> dict[str, Any]:
    """Summary of one cell's rows (as ``lade_bench.results.load_rows`` returns them).

    Returns:
        ``{"n_samples", "n_rows", "n_errors", "arms": {arm: {...}}}``. Each arm has ``rows``,
        ``errors``, ``samples`` and ``pairs`` (the paired units its numbers use), ``new_tokens``,
        ``wall_time_s``, ``tokens_per_s``, ``compression_ratio``, ``step_tokens_mean`` (input tokens
        per forward after the prefill; None where not counted), ``mean_accepted`` (tokens emitted per
        forward after the prefill), ``state_requests_min``/``_max`` (earlier requests a stateful arm's
        state had seen at its rows' starts; None for a stateless arm), ``compile_time_s`` (the untimed
        compile runs before its rows, compiled cells; None when eager) and ``accept_length_histogram``;
        quality means where the dataset has them (``rouge*``, ``pass@1``, ``accuracy``, ``bleu``, ``chrf``,
        ``exact_match``, ``token_f1``); ``speedup_baseline`` names the arm the speedups are against (AR,
        or the faster of AR and ``ar_standard`` where the cell has both); the other arms
        add ``speedup`` with ``speedup_basis`` (wall time when greedy, time per token when sampling),
        its 95% bootstrap interval ``speedup_ci_low``/``speedup_ci_high`` or ``speedup_ci_note``
        saying why there is none (fewer than ``min_ci_units`` samples), ``speedup_per_sample_mean``,
        ``paired_samples`` and, for greedy cells, ``matches_ar`` (the match rate) with ``mismatches``,
        ``engine_errors`` and, where mismatches have them, ``ar_margin_median`` and ``arm_margin_max``
        (see ``stats.mismatch_summary``). A number that cannot be computed is None.
    """
    # Rows a resumed cell kept from before schema 12 get their text health and today's scoring of an output
    # cut at the cap, as every report gives them (issue 63): summary.json and the console never show a
    # credit the report withdraws. Rows written since are returned as they are.
    rows = stats.rescore_cut_answers(stats.with_text_health(rows), ending_datasets())
    summary: dict[str, Any] = {
        "n_samples": int(rows["sample_id"].nunique()),
        "n_rows": len(rows),
        "n_errors": int(rows["error"].notna().sum()),
        "arms": {},
    }
    paired = stats.common_rows(rows)
    intervals = stats.IntervalSettings(n_boot=n_boot, seed=seed, min_units=min_ci_units)
    records = stats.summarize_cell(rows, intervals=intervals)
    # AR, or the faster AR arm of a cell that also times AR on the standard step path (the records' choice).
    baseline = stats.speedup_baseline(paired, bool(rows["do_sample"].any()))
    summary["speedup_baseline"] = baseline
    for record in records:
        arm = record["arm"]
        arm_stats: dict[str, Any] = {
            "rows": record["n_rows"],
            "errors": record["n_errors"],
            "samples": record["n_units"],
            "pairs": record["n_pairs"],
            "new_tokens": record["new_tokens"],
            "wall_time_s": record["wall_time_s"],
            "tokens_per_s": _number(record["tokens_per_s"]),
            "compression_ratio": _number(record["compression_ratio"]),
            "step_tokens_mean": _number(record["step_tokens_mean"]),
            # Tokens emitted per decode step (Spec-Bench's tau), and a stateful arm's warmth range.
            "mean_accepted": _number(record["mean_accepted"]),
            "state_requests_min": _number(record["state_requests_min"]),
            "state_requests_max": _number(record["state_requests_max"]),
            # Untimed compile runs before the arm's timed rows (compiled cells; None when eager).
            "compile_time_s": _number(record["compile_time_s"]),
            # JSON object keys are strings; the values are step counts per accepted length.
            "accept_length_histogram": {
                str(k): v for k, v in stats.accept_histogram(paired[paired["arm"] == arm]).items()
            },
        }
        arm_stats.update({name: _plain(record[name]) for name in _OPTIONAL if not _is_nan(record[name])})
        # Spec-Bench's reference metrics (BLEU, chrF, exact match, token F1) are not summary-table columns.
        reference = stats.quality_means(paired[paired["arm"] == arm])
        arm_stats.update({name: reference[name] for name in stats.REFERENCE_METRICS if not _is_nan(reference[name])})
        if arm != baseline:
            arm_stats.update({name: _number(record[name]) for name in _SPEEDUP})
            arm_stats["speedup_basis"] = record["speedup_basis"]
            arm_stats["speedup_ci_note"] = record["speedup_ci_note"] or None
            pairs = stats.per_sample_totals(paired, arm, baseline)
            arm_stats["paired_samples"] = len(pairs)
            arm_stats["speedup_per_sample_mean"] = stats.per_sample_mean(pairs, sampled=bool(record["do_sample"]))
        summary["arms"][arm] = arm_stats
    return summary


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (summary.json is JSON)."""
    return value.item() if isinstance(value, np.generic) else value


def _number(value: Any) -> float | None:
    """JSON-friendly number: NaN (cannot be computed) becomes None."""
    return None if value is None or _is_nan(value) else float(value)
