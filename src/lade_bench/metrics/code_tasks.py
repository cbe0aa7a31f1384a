"""Functional correctness of MBPP and ClassEval completions, judged by :mod:`lade_bench.sandbox`.

The completion runs in the sandbox's worker process as module ``__lade_task__`` (so a completion's
``if __name__ == "__main__":`` demo block does not run, as in the reference harnesses, which exec()
or import the code). The tests run in the sandbox's trusted supervisor against proxies of the
completion's functions and classes, and the supervisor alone writes the verdict. So nothing the
completion prints, exits with, writes or monkeypatches (``unittest``, ``sys.excepthook``, ...) can
make a failing completion pass; only the values it returns count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lade_bench.sandbox import SandboxLimits, SandboxResult, run_tests_in_sandbox

# ClassEval's own harness gives each test class 5 s (func_set_timeout(5) in test_pipeline.py).
CLASSEVAL_SECONDS_PER_TEST_CLASS = 5.0
# Loading the completion (its imports, e.g. numpy) before the first test runs.
_LOAD_SECONDS = 10.0


@dataclass(frozen=True)
class CodeTestJob:
    """What :func:`~lade_bench.sandbox.run_tests_in_sandbox` gets for one completion.

    Attributes:
        candidate: code run in the worker (setup or imports, then the completion).
        tests: the test specification (see ``run_tests_in_sandbox``).
        trusted_setup: code run before the tests in the supervisor (the task's imports and helpers).
        override_names: completion names that replace the trusted setup's.
        bind_candidate_names: whether the tests see the completion's other top-level names.
    """

    candidate: str
    tests: dict[str, Any]
    trusted_setup: str = ""
    override_names: tuple[str, ...] = field(default_factory=tuple)
    bind_candidate_names: bool = True

    def run(self, *, load_time_limit_s: float, limits: SandboxLimits, allow_unsandboxed: bool) -> SandboxResult:
        """Run this job in a fresh sandbox."""
        return run_tests_in_sandbox(
            self.candidate,
            self.tests,
            limits,
            trusted_setup=self.trusted_setup,
            bind_candidate_names=self.bind_candidate_names,
            override_names=self.override_names,
            load_time_limit_s=load_time_limit_s,
            allow_unsandboxed=allow_unsandboxed,
        )


def _require(payload: Mapping[str, Any], keys: Sequence[str], what: str) -> None:
    missing = [k for k in keys if k not in payload]
    if missing:
        raise ValueError(f"{what} payload lacks field(s) {missing}; has {sorted(payload)}")


def mbpp_job(
    completion_code: str,
    sample_payload: Mapping[str, Any],
    *,
    timeout_s: float = 10.0,
    include_challenge_tests: bool = False,
) -> CodeTestJob:
    """The sandbox job of one MBPP completion: each ``assert`` line of ``test_list`` is one test.

    ``test_setup_code`` runs before the completion in the worker (what it defines is visible to the
    completion) and before the tests in the supervisor (the tests' imports and helpers keep their
    trusted meaning); the completion's own names fill the rest of the tests' namespace.
    """
    _require(sample_payload, ("test_list",), "MBPP")
    tests = list(sample_payload["test_list"]) if not isinstance(sample_payload["test_list"], str) else None
    if not tests:
        raise ValueError(
            f"MBPP test_list must be a non-empty list of assertion strings, got {sample_payload['test_list']!r}"
        )
    if include_challenge_tests:
        tests += list(sample_payload.get("challenge_test_list") or [])
    setup = sample_payload.get("test_setup_code") or ""
    return CodeTestJob(
        candidate=f"{setup}\n\n{completion_code}\n",
        tests={"kind": "statements", "statements": tests, "time_limit_s": timeout_s},
        trusted_setup=setup,
    )


def score_mbpp(
    completion_code: str,
    sample_payload: Mapping[str, Any],
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    include_challenge_tests: bool = False,
    *,
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Score one MBPP completion: it passes if every assertion in ``test_list`` holds.

    Args:
        completion_code: the generated Python code (full function definitions).
        sample_payload: the MBPP record or the subset with ``test_list`` (list of ``assert ...`` strings)
            and optionally ``test_setup_code`` (str) and ``challenge_test_list`` (list of str).
        timeout_s: time limit for all the assertions together (and, separately, for loading the code).
        memory_mb: address-space limit of the completion's process.
        include_challenge_tests: also run ``challenge_test_list`` (not part of standard MBPP scoring).
        allow_unsandboxed: run even without bubblewrap (unsafe; see ``sandbox.allow_unsandboxed``).

    Returns:
        The :class:`~lade_bench.sandbox.SandboxResult`; ``.passed`` is the per-completion flag,
        ``.report`` says which assertion failed and why.

    Raises:
        ValueError: if the payload has no usable ``test_list``.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
    """
    job = mbpp_job(
        completion_code, sample_payload, timeout_s=timeout_s, include_challenge_tests=include_challenge_tests
    )
    limits = SandboxLimits(memory_mb=memory_mb)
    return job.run(load_time_limit_s=timeout_s, limits=limits, allow_unsandboxed=allow_unsandboxed)


def classeval_job(
    completion_code: str,
    payload: Mapping[str, Any],
    *,
    seconds_per_test_class: float = CLASSEVAL_SECONDS_PER_TEST_CLASS,
) -> CodeTestJob:
    """The sandbox job of one ClassEval completion.

    As ClassEval's own harness: the task's ``import_statement`` lines, then the completion (in the
    worker); the ``test`` code with the same imports (in the supervisor); every class in
    ``test_classes`` is run with unittest and passes if it ran tests and none failed or errored.
    """
    _require(payload, ("test", "test_classes", "import_statement"), "ClassEval")
    imports = payload["import_statement"]
    imports = "\n".join([imports] if isinstance(imports, str) else imports)
    # ClassEval_97 lists " Words2NumbersTestMain" with a stray leading space; ClassEval's own harness then
    # fails to find that class, which would make the task unpassable.
    test_classes = [name.strip() for name in payload["test_classes"]]
    if not test_classes:
        raise ValueError("ClassEval payload has an empty test_classes list")
    return CodeTestJob(
        candidate=f"{imports}\n{completion_code}\n",
        tests={
            "kind": "unittest",
            "code": payload["test"],
            "classes": test_classes,
            "time_limit_s_per_class": seconds_per_test_class,
        },  # fmt: skip
        trusted_setup=imports,
    )


def score_classeval(
    completion_code: str,
    payload: Mapping[str, Any],
    seconds_per_test_class: float = CLASSEVAL_SECONDS_PER_TEST_CLASS,
    memory_mb: int = 2048,
    *,
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Score one ClassEval completion at class level: it passes if all its unittest test classes pass.

    Args:
        completion_code: the generated class (full source, as ClassEval's ``solution_code``).
        payload: the ClassEval record or a subset with ``test`` (unittest source defining the classes
            named in ``test_classes``), ``test_classes`` (list of str) and ``import_statement`` (list of
            import lines prepended to the completion, as ClassEval's harness does).
        seconds_per_test_class: time limit of each test class (ClassEval's own: 5 s).
        memory_mb: address-space limit of the completion's process (some tasks import numpy / pandas).
        allow_unsandboxed: run even without bubblewrap (unsafe; see ``sandbox.allow_unsandboxed``).

    Returns:
        The :class:`~lade_bench.sandbox.SandboxResult`; ``.passed`` is the class-level flag and
        ``.report`` holds each test's outcome.

    Raises:
        ValueError: if the payload lacks a required field.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
    """
    job = classeval_job(completion_code, payload, seconds_per_test_class=seconds_per_test_class)
    return job.run(
        load_time_limit_s=_LOAD_SECONDS, limits=SandboxLimits(memory_mb=memory_mb), allow_unsandboxed=allow_unsandboxed
    )
