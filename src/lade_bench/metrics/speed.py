"""Efficiency metrics: speedup, step compression, throughput, acceptance histogram, bootstrap CIs.

Every aggregate here is a ratio of sums over paired samples (docs/conventions: "Summary numbers are
recomputable from rows"). A ratio of sums weights each sample by its cost, so one short prompt with a
noisy timing cannot dominate the way it can in a mean of per-sample ratios; the per-sample mean is
still offered because the paper's readers expect to see both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

Statistic = Literal["ratio_of_sums", "per_sample_mean"]

# Bound the bootstrap's index matrix (n_boot x n) to about 32 MiB of int64 per chunk so that large
# result tables do not need gigabytes; the chunks are still fully vectorised.
_BOOT_CHUNK_ELEMENTS = 1 << 22


def _as_1d(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one value per sample), got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty; need at least one sample")
    if not np.all(np.isfinite(arr)):
        bad = float(arr[~np.isfinite(arr)][0])
        raise ValueError(f"{name} contains a non-finite value ({bad})")
    return arr


def _positive(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = _as_1d(values, name)
    if np.any(arr <= 0):
        idx = int(np.argmax(arr <= 0))
        raise ValueError(f"{name}[{idx}] = {float(arr[idx])!r} is not positive")
    return arr


def _non_negative(values: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = _as_1d(values, name)
    if np.any(arr < 0):
        idx = int(np.argmax(arr < 0))
        raise ValueError(f"{name}[{idx}] = {float(arr[idx])!r} is negative")
    return arr


def _paired(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape != b.shape:
        raise ValueError(f"{name_a} and {name_b} must be paired sample by sample: lengths {a.size} != {b.size}")


def speedup(ar_times: Sequence[float] | np.ndarray, lade_times: Sequence[float] | np.ndarray) -> float:
    """Speedup of lookahead over autoregressive decoding as a ratio of sums.

    Args:
        ar_times: shape (n_samples,), AR wall time per sample in seconds, > 0.
        lade_times: shape (n_samples,), lookahead wall time for the same samples, > 0.

    Returns:
        ``sum(ar_times) / sum(lade_times)``.

    Raises:
        ValueError: on empty input, mismatched lengths, or non-positive / non-finite times.
    """
    ar = _positive(ar_times, "ar_times")
    lade = _positive(lade_times, "lade_times")
    _paired(ar, lade, "ar_times", "lade_times")
    return float(ar.sum() / lade.sum())


def per_sample_speedup_mean(ar_times: Sequence[float] | np.ndarray, lade_times: Sequence[float] | np.ndarray) -> float:
    """Mean over samples of the per-sample speedup ``ar_times[i] / lade_times[i]``.

    Args:
        ar_times: shape (n_samples,), AR wall times, > 0.
        lade_times: shape (n_samples,), paired lookahead wall times, > 0.

    Raises:
        ValueError: as :func:`speedup`.
    """
    ar = _positive(ar_times, "ar_times")
    lade = _positive(lade_times, "lade_times")
    _paired(ar, lade, "ar_times", "lade_times")
    return float(np.mean(ar / lade))


def bootstrap_ci(
    ar_times: Sequence[float] | np.ndarray,
    lade_times: Sequence[float] | np.ndarray,
    statistic: Statistic = "ratio_of_sums",
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval for the speedup, resampling paired samples.

    Pairs (ar_times[i], lade_times[i]) are resampled together, because the two arms of one sample share
    its prompt length and output length; resampling them independently would inflate the interval.

    Args:
        ar_times: shape (n_samples,), AR wall times, > 0.
        lade_times: shape (n_samples,), paired lookahead wall times, > 0.
        statistic: ``"ratio_of_sums"`` (as :func:`speedup`) or ``"per_sample_mean"``
            (as :func:`per_sample_speedup_mean`).
        n_boot: number of bootstrap resamples, >= 1.
        confidence: two-sided coverage in (0, 1).
        seed: seed of the ``numpy.random.Generator``; same inputs and seed give the same interval.

    Returns:
        ``(low, high)``, the ``(1-confidence)/2`` and ``(1+confidence)/2`` percentiles of the statistic
        over the resamples.

    Raises:
        ValueError: on bad times (as :func:`speedup`), unknown statistic, ``n_boot < 1`` or a confidence
            outside (0, 1).
    """
    ar = _positive(ar_times, "ar_times")
    lade = _positive(lade_times, "lade_times")
    _paired(ar, lade, "ar_times", "lade_times")
    if statistic not in ("ratio_of_sums", "per_sample_mean"):
        raise ValueError(f"statistic={statistic!r}; expected 'ratio_of_sums' or 'per_sample_mean'")
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r} must be a positive integer")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1")

    rng = np.random.default_rng(seed)
    n = ar.size
    ratios = ar / lade
    stats = np.empty(int(n_boot), dtype=np.float64)
    chunk = max(1, _BOOT_CHUNK_ELEMENTS // n)
    for start in range(0, int(n_boot), chunk):
        stop = min(int(n_boot), start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        if statistic == "ratio_of_sums":
            stats[start:stop] = ar[idx].sum(axis=1) / lade[idx].sum(axis=1)
        else:
            stats[start:stop] = ratios[idx].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(stats, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


def compression_ratio(new_tokens: Sequence[int] | np.ndarray, steps: Sequence[int] | np.ndarray) -> float:
    """Step compression ratio: ``sum(new_tokens) / sum(steps)`` over samples.

    Which forward passes count as steps (prefill, warm-up) is the caller's decision and must be the same
    for every method; the runner records ``decode_steps`` with that definition.

    Args:
        new_tokens: shape (n_samples,), generated tokens per sample, >= 0.
        steps: shape (n_samples,), forward passes per sample, > 0.

    Raises:
        ValueError: on empty input, mismatched lengths, negative tokens or non-positive steps.
    """
    tokens = _non_negative(new_tokens, "new_tokens")
    st = _positive(steps, "steps")
    _paired(tokens, st, "new_tokens", "steps")
    return float(tokens.sum() / st.sum())


def tokens_per_s(new_tokens: Sequence[int] | np.ndarray, times: Sequence[float] | np.ndarray) -> float:
    """Throughput ``sum(new_tokens) / sum(times)`` in tokens per second over samples.

    Args:
        new_tokens: shape (n_samples,), generated tokens per sample, >= 0.
        times: shape (n_samples,), wall time per sample in seconds, > 0.

    Raises:
        ValueError: on empty input, mismatched lengths, negative tokens or non-positive times.
    """
    tokens = _non_negative(new_tokens, "new_tokens")
    t = _positive(times, "times")
    _paired(tokens, t, "new_tokens", "times")
    return float(tokens.sum() / t.sum())


def accept_length_histogram(accept_lengths: Iterable[Iterable[int]]) -> dict[int, int]:
    """Histogram of tokens accepted per decoding step, pooled over samples.

    Args:
        accept_lengths: one sequence per sample (the results column ``accept_lengths``), each holding the
            number of tokens accepted at every step of that sample; integers >= 0.

    Returns:
        ``{accept_length: count}`` with keys in increasing order.

    Raises:
        ValueError: if a length is not a non-negative integer.
    """
    counts: Counter[int] = Counter()
    for i, per_sample in enumerate(accept_lengths):
        for j, value in enumerate(per_sample):
            as_int = int(value)
            if as_int != value or as_int < 0:
                raise ValueError(f"accept_lengths[{i}][{j}] = {value!r} is not a non-negative integer")
            counts[as_int] += 1
    return dict(sorted(counts.items()))
