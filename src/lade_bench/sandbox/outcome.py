"""What a sandboxed call returns, and the two ways it can fail before judging anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["passed", "failed", "timeout", "memory", "violation", "error"]


class SandboxUnavailableError(RuntimeError):
    """bubblewrap or libseccomp is missing or cannot start a sandbox, and unsandboxed runs are not allowed."""


class SandboxError(RuntimeError):
    """The sandbox harness itself failed (not the generated code): a bug or a broken environment."""


@dataclass(frozen=True)
class TestOutcome:
    """One test as the supervisor saw it: ``passed``, ``failed``, ``error``, ``timeout``, ``violation``,
    ``memory`` or ``skipped``, with the traceback tail for anything but a pass."""

    name: str
    outcome: str
    detail: str = ""


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run.

    Attributes:
        passed: True iff ``status == "passed"``.
        status: ``"passed"``; ``"failed"`` (a failed test, an exception, a non-zero exit);
            ``"timeout"`` (a wall-clock or CPU-time limit); ``"memory"`` (the address-space limit);
            ``"violation"`` (the program hit a wall of the sandbox: a refused write, process, signal or
            connection, or the file-size limit, and that ended it); ``"error"`` (killed by a signal
            such as SIGSEGV).
        returncode: the generated program's exit status (negative: killed by that signal); None when
            the sandbox was killed on the wall clock, and for test runs, where the supervisor ends it.
        duration_s: wall time of the whole sandbox, seconds.
        stderr_tail: the last few thousand characters the generated code wrote to stderr (plus notes).
        stdout_tail: the same for stdout.
        violation: what was refused, for ``status == "violation"``; else None.
        report: per-test lines from the supervisor (test runs only).
        tests: per-test outcomes (test runs only).
        sandboxed: False when it ran without bubblewrap (``allow_unsandboxed``).
    """

    passed: bool
    status: Status
    returncode: int | None
    duration_s: float
    stderr_tail: str
    stdout_tail: str
    violation: str | None = None
    report: str = ""
    tests: tuple[TestOutcome, ...] = ()
    sandboxed: bool = True
