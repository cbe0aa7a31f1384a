import numpy as np
import pytest

from lade_bench.metrics import speed
from lade_bench.metrics.speed import (
    accept_length_histogram,
    bootstrap_ci,
    compression_ratio,
    per_sample_speedup_mean,
    speedup,
    tokens_per_s,
)


def test_speedup_is_ratio_of_sums():
    # sum(ar) = 4, sum(lade) = 3; per-sample ratios 1.0 and 1.5.
    assert speedup([1.0, 3.0], [1.0, 2.0]) == pytest.approx(4 / 3)
    assert per_sample_speedup_mean([1.0, 3.0], [1.0, 2.0]) == pytest.approx(1.25)


def test_speedup_accepts_numpy_arrays():
    assert speedup(np.array([2.0, 2.0, 2.0]), np.array([1.0, 1.0, 1.0])) == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("ar", "lade", "message"),
    [
        ([1.0, 2.0], [1.0], "lengths 2 != 1"),
        ([], [], "ar_times is empty"),
        ([1.0, 0.0], [1.0, 1.0], r"ar_times\[1\] = 0.0 is not positive"),
        ([1.0, 1.0], [1.0, -2.0], r"lade_times\[1\] = -2.0 is not positive"),
        ([1.0, float("nan")], [1.0, 1.0], "ar_times contains a non-finite value"),
        ([[1.0]], [[1.0]], "must be 1-D"),
    ],
)
def test_speedup_validation_names_the_value(ar, lade, message):
    with pytest.raises(ValueError, match=message):
        speedup(ar, lade)
    with pytest.raises(ValueError, match=message):
        per_sample_speedup_mean(ar, lade)
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(ar, lade)


def _paired_times(n, seed):
    rng = np.random.default_rng(seed)
    ar = rng.uniform(1.0, 10.0, size=n)
    lade = ar / 1.8 * rng.lognormal(0.0, 0.2, size=n)
    return ar, lade


@pytest.mark.parametrize("statistic", ["ratio_of_sums", "per_sample_mean"])
def test_bootstrap_ci_contains_point_estimate_and_narrows(statistic):
    point = {"ratio_of_sums": speedup, "per_sample_mean": per_sample_speedup_mean}[statistic]
    ar_small, lade_small = _paired_times(20, seed=1)
    ar_big, lade_big = _paired_times(800, seed=2)
    low_s, high_s = bootstrap_ci(ar_small, lade_small, statistic=statistic)
    low_b, high_b = bootstrap_ci(ar_big, lade_big, statistic=statistic)
    assert low_s <= point(ar_small, lade_small) <= high_s
    assert low_b <= point(ar_big, lade_big) <= high_b
    assert (high_b - low_b) < 0.5 * (high_s - low_s)


def test_bootstrap_ci_is_seeded_and_confidence_widens():
    ar, lade = _paired_times(50, seed=3)
    assert bootstrap_ci(ar, lade, seed=7) == bootstrap_ci(ar, lade, seed=7)
    low90, high90 = bootstrap_ci(ar, lade, confidence=0.90)
    low99, high99 = bootstrap_ci(ar, lade, confidence=0.99)
    assert low99 <= low90 and high90 <= high99


def test_bootstrap_ci_constant_ratio_is_degenerate():
    low, high = bootstrap_ci([1.0, 2.0, 4.0], [0.5, 1.0, 2.0], statistic="per_sample_mean")
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)


def test_bootstrap_ci_chunking_does_not_change_the_result(monkeypatch):
    ar, lade = _paired_times(30, seed=4)
    whole = bootstrap_ci(ar, lade, n_boot=500)
    monkeypatch.setattr(speed, "_BOOT_CHUNK_ELEMENTS", 30 * 7)  # 7 resamples per chunk
    assert bootstrap_ci(ar, lade, n_boot=500) == whole


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"statistic": "median"}, "statistic='median'"),
        ({"n_boot": 0}, "n_boot=0"),
        ({"confidence": 1.0}, "confidence=1.0"),
    ],
)
def test_bootstrap_ci_rejects_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ci([1.0, 2.0], [1.0, 1.0], **kwargs)


def test_compression_ratio_and_tokens_per_s():
    assert compression_ratio([10, 20], [5, 5]) == pytest.approx(3.0)
    assert tokens_per_s([10, 30], [1.0, 3.0]) == pytest.approx(10.0)
    assert compression_ratio([0, 0], [1, 1]) == 0.0
    with pytest.raises(ValueError, match=r"steps\[0\] = 0.0 is not positive"):
        compression_ratio([10], [0])
    with pytest.raises(ValueError, match=r"new_tokens\[1\] = -1.0 is negative"):
        tokens_per_s([1, -1], [1.0, 1.0])
    with pytest.raises(ValueError, match="lengths 2 != 1"):
        tokens_per_s([1, 1], [1.0])


def test_accept_length_histogram():
    hist = accept_length_histogram([[1, 2, 2], [3, 1], []])
    assert hist == {1: 2, 2: 2, 3: 1}
    assert list(hist) == [1, 2, 3]
    assert accept_length_histogram([np.array([4, 4])]) == {4: 2}
    with pytest.raises(ValueError, match=r"accept_lengths\[1\]\[0\] = -1"):
        accept_length_histogram([[1], [-1]])
    with pytest.raises(ValueError, match=r"accept_lengths\[0\]\[1\] = 1.5"):
        accept_length_histogram([[1, 1.5]])


def test_per_token_speedup_is_a_ratio_of_time_per_token():
    # AR: 20 tokens in 2 s (0.1 s/token); the other arm: 60 tokens in 3 s (0.05 s/token) -> 2x,
    # although its wall time is longer (a ratio of wall times would say 0.67x)
    assert speed.per_token_speedup([1.0, 1.0], [10, 10], [1.5, 1.5], [30, 30]) == pytest.approx(2.0)
    assert speedup([1.0, 1.0], [1.5, 1.5]) == pytest.approx(2 / 3)
    # equal lengths: the same number as the ratio of wall times
    assert speed.per_token_speedup([1.0, 3.0], [5, 5], [1.0, 2.0], [5, 5]) == pytest.approx(4 / 3)
    assert np.isnan(speed.per_token_speedup([1.0], [0], [1.0], [3]))
    with pytest.raises(ValueError, match="lengths 2 != 1"):
        speed.per_token_speedup([1.0, 1.0], [1], [1.0, 1.0], [1, 1])
    with pytest.raises(ValueError, match=r"lade_tokens\[0\] = -1.0 is negative"):
        speed.per_token_speedup([1.0], [1], [1.0], [-1])


def test_bootstrap_per_token_ci_brackets_the_estimate_and_is_seeded():
    rng = np.random.default_rng(5)
    ar_t, ar_n = rng.uniform(1, 3, 40), rng.integers(20, 60, 40)
    la_t, la_n = ar_t / 1.5, rng.integers(20, 60, 40)
    point = speed.per_token_speedup(ar_t, ar_n, la_t, la_n)
    low, high = speed.bootstrap_per_token_ci(ar_t, ar_n, la_t, la_n, n_boot=500)
    assert low <= point <= high
    assert speed.bootstrap_per_token_ci(ar_t, ar_n, la_t, la_n, n_boot=500) == (low, high)


def test_bootstrap_sums_ci_resamples_whole_units():
    # a constant ratio inside every unit: any resample of units gives it exactly
    units = np.array([[2.0, 1.0], [6.0, 3.0], [10.0, 5.0]])
    low, high = speed.bootstrap_sums_ci(units, lambda s: s[:, 0] / s[:, 1], n_boot=200)
    assert low == pytest.approx(2.0) and high == pytest.approx(2.0)
    with pytest.raises(ValueError, match="shape"):
        speed.bootstrap_sums_ci(np.zeros((0, 2)), lambda s: s[:, 0])
    with pytest.raises(ValueError, match="n_boot=0"):
        speed.bootstrap_sums_ci(units, lambda s: s[:, 0], n_boot=0)
