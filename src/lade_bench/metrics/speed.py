"""Efficiency metrics: speedup, step compression, throughput, acceptance histogram, bootstrap CIs.

Every aggregate here is a ratio of sums over paired samples (docs/conventions: "Summary numbers are
recomputable from rows"). A ratio of sums weights each sample by its cost, so one short prompt with a
noisy timing cannot dominate the way it can in a mean of per-sample ratios; the per-sample mean is
still offered because the paper's readers expect to see both.

Two speedups, chosen by the caller (``lade_bench.stats.speedup``) from the decoding mode:

* greedy: :func:`speedup`, the ratio of summed wall times; the arms produce the same tokens, so equal
  work is timed on both sides;
* sampling: :func:`per_token_speedup`, the ratio of time per generated token; the arms produce
  different outputs of different lengths, and a ratio of wall times would reward the arm that happens
  to stop earlier.

Intervals are percentile bootstraps over *units* (one unit = everything one sample contributed, its
turns and repeats summed first); :func:`bootstrap_sums_ci` is the one resampling loop, the others
are statistics of resampled column sums.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import numpy as np

Statistic = Literal["ratio_of_sums", "per_sample_mean"]

# Bound each bootstrap chunk (replicates x units x columns) to about 32 MiB of float64 so that large
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


def per_token_speedup(
    ar_times: Sequence[float] | np.ndarray,
    ar_tokens: Sequence[int] | np.ndarray,
    lade_times: Sequence[float] | np.ndarray,
    lade_tokens: Sequence[int] | np.ndarray,
) -> float:
    """Speedup as a ratio of time per generated token (the speedup under sampling).

    ``(sum(ar_times) / sum(ar_tokens)) / (sum(lade_times) / sum(lade_tokens))``, i.e. the arm's
    throughput over AR's on the same samples. Under sampling the two arms emit different outputs of
    different lengths; comparing time per token removes the reward for stopping earlier.

    Args:
        ar_times, lade_times: shape (n_samples,), wall times per sample, > 0, paired.
        ar_tokens, lade_tokens: shape (n_samples,), generated tokens per sample, >= 0, paired.

    Returns:
        The ratio; NaN when either arm generated no token at all.

    Raises:
        ValueError: on empty input, mismatched lengths, non-positive times or negative tokens.
    """
    ar, ar_tok, lade, lade_tok = _per_token_columns(ar_times, ar_tokens, lade_times, lade_tokens)
    if ar_tok.sum() == 0 or lade_tok.sum() == 0:
        return float("nan")
    return float((ar.sum() / ar_tok.sum()) / (lade.sum() / lade_tok.sum()))


def _per_token_columns(
    ar_times: Sequence[float] | np.ndarray,
    ar_tokens: Sequence[int] | np.ndarray,
    lade_times: Sequence[float] | np.ndarray,
    lade_tokens: Sequence[int] | np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    ar = _positive(ar_times, "ar_times")
    ar_tok = _non_negative(ar_tokens, "ar_tokens")
    lade = _positive(lade_times, "lade_times")
    lade_tok = _non_negative(lade_tokens, "lade_tokens")
    for arr, name in ((ar_tok, "ar_tokens"), (lade, "lade_times"), (lade_tok, "lade_tokens")):
        _paired(ar, arr, "ar_times", name)
    return ar, ar_tok, lade, lade_tok


def _check_interval_settings(n_boot: int, confidence: float) -> None:
    if int(n_boot) != n_boot or n_boot < 1:
        raise ValueError(f"n_boot={n_boot!r} must be a positive integer")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence!r} must lie strictly between 0 and 1")


def bootstrap_sums_ci(
    units: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of a statistic of column sums, resampling whole units.

    Each bootstrap replicate draws ``n_units`` rows of ``units`` with replacement and sums them; the
    statistic maps those sums to one value. Everything a unit holds (both arms' times, tokens, the
    turns and repeats of one sample) is resampled together, which is what keeps a paired comparison
    paired and nested observations nested.

    Args:
        units: shape (n_units, k), per-unit sums of k columns, finite, n_units >= 1.
        statistic: maps sums of shape (m, k) to m values (vectorised over replicates).
        n_boot: number of replicates, >= 1.
        confidence: two-sided coverage in (0, 1).
        seed: seed of the ``numpy.random.Generator``; same inputs and seed give the same interval.

    Returns:
        ``(low, high)``: the ``(1-confidence)/2`` and ``(1+confidence)/2`` percentiles.

    Raises:
        ValueError: ``units`` is not a non-empty finite 2-D array, or bad ``n_boot``/``confidence``.
    """
    data = np.asarray(units, dtype=np.float64)
    if data.ndim != 2 or data.shape[0] == 0:
        raise ValueError(f"units must have shape (n_units >= 1, k), got {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("units contain a non-finite value")
    _check_interval_settings(n_boot, confidence)
    rng = np.random.default_rng(seed)
    n, k = data.shape
    stats = np.empty(int(n_boot), dtype=np.float64)
    chunk = max(1, _BOOT_CHUNK_ELEMENTS // (n * k))
    for start in range(0, int(n_boot), chunk):
        stop = min(int(n_boot), start + chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        stats[start:stop] = statistic(data[idx].sum(axis=1))
    alpha = 1.0 - confidence
    low, high = np.quantile(stats, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


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
    Whether there are enough samples for the interval to mean anything is the caller's decision (the
    report prints none below ``stats.MIN_CI_UNITS``).

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
    _check_interval_settings(n_boot, confidence)
    if statistic == "ratio_of_sums":
        units = np.column_stack([ar, lade])
        return bootstrap_sums_ci(units, lambda s: s[:, 0] / s[:, 1], n_boot, confidence, seed)
    n = ar.size
    return bootstrap_sums_ci((ar / lade)[:, None], lambda s: s[:, 0] / n, n_boot, confidence, seed)


def bootstrap_per_token_ci(
    ar_times: Sequence[float] | np.ndarray,
    ar_tokens: Sequence[int] | np.ndarray,
    lade_times: Sequence[float] | np.ndarray,
    lade_tokens: Sequence[int] | np.ndarray,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`per_token_speedup`, resampling paired samples.

    Args:
        ar_times, ar_tokens, lade_times, lade_tokens: as :func:`per_token_speedup`, one entry per
            sample (the unit that is resampled).
        n_boot, confidence, seed: as :func:`bootstrap_ci`.

    Returns:
        ``(low, high)``; a replicate whose draw has no token on one side counts as NaN, so the bounds
        are NaN when that happens (only with samples that generated nothing).

    Raises:
        ValueError: as :func:`per_token_speedup`, or bad ``n_boot``/``confidence``.
    """
    units = np.column_stack(_per_token_columns(ar_times, ar_tokens, lade_times, lade_tokens))

    def ratio(sums: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return (sums[:, 0] * sums[:, 3]) / (sums[:, 1] * sums[:, 2])

    return bootstrap_sums_ci(units, ratio, n_boot, confidence, seed)


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
