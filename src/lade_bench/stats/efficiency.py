"""Efficiency of one arm on paired units: compression, throughput, tokens per step, accept histogram.

Compression = ``sum(new_tokens) / sum(decode_steps)`` and throughput = ``sum(new_tokens) /
sum(wall_time_s)`` over the paired units (ratios of sums, like the speedup).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.decoding.core.params import LookaheadParams
from lade_bench.metrics.registry import get_metric
from lade_bench.metrics.speed import accept_length_histogram, compression_ratio
from lade_bench.stats.units import ok_rows

# Rows written before the verification layout was recorded (schema v4) all used the flat layout.
DEFAULT_VERIFICATION = "flat"


def arm_efficiency(arm_rows: pd.DataFrame) -> dict[str, float]:
    """Compression, throughput and totals of one arm's error-free rows (NaN where there are none).

    Callers pass the arm's paired rows (``common_rows``), as for ``quality_means``.
    """
    good = ok_rows(arm_rows)
    if good.empty:
        return {
            "compression_ratio": math.nan,
            "tokens_per_s": math.nan,
            "new_tokens": 0,
            "decode_steps": 0,
            "wall_time_s": 0.0,
            "step_tokens_mean": math.nan,
            "mean_accepted": math.nan,
            "state_requests_min": math.nan,
            "state_requests_max": math.nan,
            "draft_time_share": math.nan,
            "compile_time_s": math.nan,
            "n_at_cap": math.nan,
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
        "step_tokens_mean": mean_decode_step_tokens(good),
        "mean_accepted": mean_decode_step_accepted(good),
        **state_warmth_range(good),
        "draft_time_share": draft_time_share(good),
        "compile_time_s": compile_time(good),
        "n_at_cap": at_cap(good),
    }


def at_cap(rows: pd.DataFrame) -> float:
    """How many of ``rows`` stopped at their cell's ``max_new_tokens`` rather than ending by themselves.

    The rows' own ``at_cap`` (the budget reached, the last token no stop id: ``metrics.text_health``)
    where every row records it; rows before schema 12 are counted by the budget alone (an output that
    emitted its stop id as the budget's last token counts as cut there). NaN when a row does not record
    its budget (rows before schema v7): a count over part of the rows would be read as a count over all
    of them.
    """
    if "at_cap" in rows and len(rows) and rows["at_cap"].notna().all():
        return float(rows["at_cap"].astype(bool).sum())
    if "max_new_tokens" not in rows or rows.empty or rows["max_new_tokens"].isna().any():
        return math.nan
    budget = rows["max_new_tokens"].to_numpy(dtype=np.float64)
    return float((rows["new_tokens"].to_numpy(dtype=np.float64) >= budget).sum())


def draft_time_share(rows: pd.DataFrame) -> float:
    """Share of the wall time spent in a draft model's forwards, ``sum(draft_time_s) / sum(wall_time_s)``.

    NaN for a method without a draft (the column is null) and for rows written before it existed
    (schema < 5); like the other ratios, a share over part of the rows would describe other samples.
    """
    if "draft_time_s" not in rows or rows.empty or rows["draft_time_s"].isna().any():
        return math.nan
    total = float(rows["wall_time_s"].sum())
    return float(rows["draft_time_s"].sum()) / total if total > 0 else math.nan


def compile_time(rows: pd.DataFrame) -> float:
    """Seconds of untimed compile runs before ``rows``' timed generations, ``sum(compile_time_s)``.

    NaN for eager rows (the column is null) and rows written before it existed (schema < 6). It is
    reported beside the timings and never part of them.
    """
    if "compile_time_s" not in rows or rows.empty or rows["compile_time_s"].isna().all():
        return math.nan
    return float(rows["compile_time_s"].sum())


def mean_decode_step_tokens(rows: pd.DataFrame) -> float:
    """Measured input tokens per forward pass after the prefill, over ``rows`` (``step_tokens``).

    NaN when a row does not count them (rows before schema v4, or a column absent): a mean over part
    of the rows would describe other samples than the arm's other numbers.
    """
    if "step_tokens" not in rows or rows.empty or rows["step_tokens"].isna().any():
        return math.nan
    decode_tokens = sum(int(np.sum(counts[1:])) for counts in rows["step_tokens"])
    decode_steps = sum(len(counts) - 1 for counts in rows["step_tokens"])
    return decode_tokens / decode_steps if decode_steps else math.nan


def mean_decode_step_accepted(rows: pd.DataFrame) -> float:
    """Tokens emitted per forward pass after the prefill over ``rows`` (Spec-Bench's tau, pooled like
    compression): ``sum(accept_lengths[1:]) / (decode steps)``; NaN without a decode step."""
    if rows.empty:
        return math.nan
    accepted = sum(int(np.sum(lengths[1:])) for lengths in rows["accept_lengths"])
    steps = sum(len(lengths) - 1 for lengths in rows["accept_lengths"])
    return accepted / steps if steps else math.nan


def state_warmth_range(rows: pd.DataFrame) -> dict[str, float]:
    """Fewest and most earlier requests a stateful arm's state had learnt from at its rows' starts
    (``state_requests_seen``; ``lade_bench.methods.state``): 0 and 0 is cold, a growing maximum warm.
    NaN for a stateless arm and for rows written before the column existed (schema < 8)."""
    if "state_requests_seen" not in rows or rows.empty or rows["state_requests_seen"].isna().any():
        return {"state_requests_min": math.nan, "state_requests_max": math.nan}
    seen = rows["state_requests_seen"].to_numpy(dtype=np.float64)
    return {"state_requests_min": float(seen.min()), "state_requests_max": float(seen.max())}


def lookahead_step_tokens(attributes: Mapping[str, Any], measured_mean: float) -> float:
    """Input tokens of a lookahead cell's step as the report uses them (``tokens_per_step``).

    Flat: ``(W + G) * (N - 1)``, the paper's step size. Trie: the measured mean per decode step,
    since how many tokens a trie saves depends on the candidates (NaN if not measured).
    """
    if attributes.get("verification", DEFAULT_VERIFICATION) == DEFAULT_VERIFICATION:
        return tokens_per_step(attributes["ngram"], attributes["window"], attributes["guesses"])
    return measured_mean


def tokens_per_step(ngram: Any, window: Any, guesses: Any) -> float:
    """Most input tokens of one lookahead step, ``(W + G) * (N - 1)``; NaN when the shape is unset."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (ngram, window, guesses)):
        return math.nan
    return float(LookaheadParams(int(ngram), int(window), int(guesses)).tokens_per_step)


def accept_histogram(rows: pd.DataFrame) -> dict[int, int]:
    """Forward passes per number of tokens they emitted, pooled over ``rows`` without error.

    Every forward pass counts, the prefill included, so the histogram's mean is the compression ratio.
    """
    good = ok_rows(rows)
    return accept_length_histogram(list(good["accept_lengths"]))
