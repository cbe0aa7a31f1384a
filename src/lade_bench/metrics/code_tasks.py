"""Functional correctness of MBPP and ClassEval completions, executed in :mod:`lade_bench.metrics.sandbox`.

Both scorers assemble one program (completion + tests), run it in a fresh sandboxed interpreter and
read the outcome from the exit status. The program prints a per-call random marker after its last test
and the sandbox requires it, so a completion that calls ``exit()`` / ``sys.exit(0)`` before the tests
cannot pass. The program runs under a ``__name__`` other than ``"__main__"``: the reference harnesses
exec() (MBPP) or import (ClassEval) the code, so a completion's ``if __name__ == "__main__":`` demo block
must not run here either.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from lade_bench.metrics.sandbox import SandboxResult, run_in_sandbox

_RUN_NAME = "__lade_task__"
# ClassEval's own harness gives each test class 5 s (func_set_timeout(5) in test_pipeline.py).
CLASSEVAL_SECONDS_PER_TEST_CLASS = 5.0
# Interpreter start-up and imports (numpy, sqlite3, ...) before the first test runs.
_STARTUP_SECONDS = 3.0


def _marker() -> str:
    return f"__LADE_TESTS_DONE_{secrets.token_hex(8)}__"


def _require(payload: Mapping[str, Any], keys: Sequence[str], what: str) -> None:
    missing = [k for k in keys if k not in payload]
    if missing:
        raise ValueError(f"{what} payload lacks field(s) {missing}; has {sorted(payload)}")


def build_mbpp_program(completion_code: str, sample_payload: Mapping[str, Any], marker: str = "") -> str:
    """The program :func:`score_mbpp` runs: setup code, completion, assertions, then the marker print.

    The setup code goes first so that what it defines (usually imports or helper classes the tests use)
    is visible to the completion and the tests, while the completion's own definitions take precedence.
    """
    _require(sample_payload, ("test_list",), "MBPP")
    tests = sample_payload["test_list"]
    if isinstance(tests, str) or not tests:
        raise ValueError(f"MBPP test_list must be a non-empty list of assertion strings, got {tests!r}")
    parts = [
        sample_payload.get("test_setup_code") or "",
        completion_code,
        "\n".join(tests),
    ]
    if marker:
        parts.append(f"print({marker!r}, flush=True)")
    return "\n\n".join(parts) + "\n"


def score_mbpp(
    completion_code: str,
    sample_payload: Mapping[str, Any],
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    include_challenge_tests: bool = False,
) -> SandboxResult:
    """Score one MBPP completion: it passes if every assertion in ``test_list`` holds.

    Args:
        completion_code: the generated Python code (full function definitions).
        sample_payload: the MBPP record or the subset with ``test_list`` (list of ``assert ...`` strings)
            and optionally ``test_setup_code`` (str) and ``challenge_test_list`` (list of str).
        timeout_s: wall-clock limit for the whole program.
        memory_mb: address-space limit of the sandbox.
        include_challenge_tests: also run ``challenge_test_list`` (not part of standard MBPP scoring).

    Returns:
        The :class:`~lade_bench.metrics.sandbox.SandboxResult`; ``.passed`` is the per-completion flag.

    Raises:
        ValueError: if the payload has no usable ``test_list``.
    """
    payload = dict(sample_payload)
    if include_challenge_tests:
        payload["test_list"] = list(payload.get("test_list") or []) + list(payload.get("challenge_test_list") or [])
    marker = _marker()
    program = build_mbpp_program(completion_code, payload, marker)
    return run_in_sandbox(program, timeout_s=timeout_s, memory_mb=memory_mb, run_name=_RUN_NAME, success_marker=marker)


def build_classeval_program(completion_code: str, payload: Mapping[str, Any], marker: str = "") -> str:
    """The program :func:`score_classeval` runs.

    As ClassEval's own harness: the task's ``import_statement`` lines, the completion, the ``test`` code;
    then every class in ``test_classes`` is run with unittest, and the program exits 0 (after printing
    the marker) only if each test class ran at least one test and none failed or errored.
    """
    _require(payload, ("test", "test_classes", "import_statement"), "ClassEval")
    imports = payload["import_statement"]
    if isinstance(imports, str):
        imports = [imports]
    # ClassEval_97 lists " Words2NumbersTestMain" with a stray leading space; ClassEval's own harness then
    # fails to find that class, which would make the task unpassable.
    test_classes = [name.strip() for name in payload["test_classes"]]
    if not test_classes:
        raise ValueError("ClassEval payload has an empty test_classes list")
    runner = f"""
import sys as _lade_sys
import unittest as _lade_unittest

_lade_ok = True
for _lade_name in {test_classes!r}:
    _lade_suite = _lade_unittest.defaultTestLoader.loadTestsFromTestCase(globals()[_lade_name])
    _lade_result = _lade_unittest.TextTestRunner(stream=_lade_sys.stderr, verbosity=1).run(_lade_suite)
    # ClassEval counts a test class as a success only if it ran tests and none failed or errored.
    if _lade_result.testsRun == 0 or not _lade_result.wasSuccessful():
        _lade_ok = False
        print(f"[classeval] {{_lade_name}}: {{len(_lade_result.failures)}} failed, "
              f"{{len(_lade_result.errors)}} errors of {{_lade_result.testsRun}}", file=_lade_sys.stderr)
if _lade_ok and {bool(marker)!r}:
    print({marker!r}, flush=True)
_lade_sys.exit(0 if _lade_ok else 1)
"""
    return "\n".join(imports) + "\n" + completion_code + "\n\n" + payload["test"] + "\n\n" + runner


def score_classeval(
    completion_code: str,
    payload: Mapping[str, Any],
    timeout_s: float | None = None,
    memory_mb: int = 2048,
) -> SandboxResult:
    """Score one ClassEval completion at class level: it passes if all its unittest test classes pass.

    Args:
        completion_code: the generated class (full source, as ClassEval's ``solution_code``).
        payload: the ClassEval record or a subset with ``test`` (unittest source defining the classes
            named in ``test_classes``), ``test_classes`` (list of str) and ``import_statement`` (list of
            import lines prepended to the completion, as ClassEval's harness does).
        timeout_s: wall-clock limit for the whole program; defaults to 5 s per test class (ClassEval's
            per-class limit) plus interpreter start-up.
        memory_mb: address-space limit of the sandbox (some tasks import numpy / PIL).

    Returns:
        The :class:`~lade_bench.metrics.sandbox.SandboxResult`; ``.passed`` is the class-level flag, and
        ``.stderr_tail`` holds unittest's report.

    Raises:
        ValueError: if the payload lacks a required field.
    """
    marker = _marker()
    program = build_classeval_program(completion_code, payload, marker)
    if timeout_s is None:
        timeout_s = CLASSEVAL_SECONDS_PER_TEST_CLASS * len(payload["test_classes"]) + _STARTUP_SECONDS
    return run_in_sandbox(program, timeout_s=timeout_s, memory_mb=memory_mb, run_name=_RUN_NAME, success_marker=marker)
