"""Running a whole program in a sandbox: a runner, not a judge (the program controls its exit status)."""

from __future__ import annotations

import os
from collections.abc import Iterable

from lade_bench.sandbox.launch import (
    MEMORY_PATTERNS,
    NO_VERDICT,
    TAIL_CHARS,
    check_harness,
    execute,
    harness_note,
    signal_status,
)
from lade_bench.sandbox.limits import DEFAULT_LIMITS, SandboxLimits
from lade_bench.sandbox.outcome import SandboxResult, Status
from lade_bench.sandbox.runtime import wire


def run_in_sandbox(
    code: str,
    limits: SandboxLimits = DEFAULT_LIMITS,
    *,
    timeout_s: float = 10.0,
    run_name: str = "__main__",
    read_only_paths: Iterable[str | os.PathLike] = (),
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Run ``code`` as a Python script in a fresh sandbox and classify how it ended.

    The program is ``/sandbox/program.py``; ``/sandbox`` (cwd, HOME, TMPDIR, ``/tmp``) is a private
    tmpfs of ``limits.disk_mb`` MiB. It passes by exiting with status 0, which the program controls: use
    :func:`run_tests_in_sandbox` to judge untrusted code.

    Args:
        code: the complete program.
        limits: the resource limits of its process (:class:`SandboxLimits`).
        timeout_s: wall-clock limit in seconds for the whole sandbox.
        run_name: ``__name__`` of the program; scorers pass another name than ``"__main__"`` so that a
            completion's ``if __name__ == "__main__":`` block does not run.
        read_only_paths: host directories to show inside, read-only, at the same path.
        allow_unsandboxed: without bubblewrap, run anyway (no file-system or network isolation; loud warning).

    Returns:
        A :class:`SandboxResult`.

    Raises:
        ValueError: on a non-positive ``timeout_s``.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
        SandboxError: the sandbox could not be set up, before the program ran (a broken environment).
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be positive")
    job = {"mode": "run", "program": code}
    raw = execute(job, limits, run_name, timeout_s, timeout_s, [str(p) for p in read_only_paths], allow_unsandboxed)
    verdict = check_harness(raw)
    stdout, stderr = raw.stdout, raw.stderr
    violation = None
    returncode: int | None = None
    if verdict is None and raw.timed_out:
        status: Status = "timeout"
        stderr += f"\n[sandbox] {raw.kill_note}\n"
    elif verdict is None:
        status = "error"
        stderr += f"\n{NO_VERDICT}\n"
    elif "harness_error" in verdict:
        status = "error"
        stderr += harness_note(verdict)
    else:
        worker = verdict["worker"]
        returncode = worker["returncode"]
        by_signal = signal_status(worker, limits.cpu_seconds(timeout_s))
        exception = verdict.get("exception")
        if by_signal is not None:
            status, note = by_signal
            stderr += f"\n[sandbox] {note}\n"
            violation = note if status == "violation" else None
        elif returncode == 0:
            status = "passed"
        elif exception is not None and wire.classify_report(exception) != "failed":
            status = wire.classify_report(exception)  # type: ignore[assignment]
            if status == "violation":
                violation = f"{exception.get('type')}: {exception.get('message')}"[:500]
        elif MEMORY_PATTERNS.search(stderr[-TAIL_CHARS:]):
            status = "memory"
        else:
            status = "failed"
    return SandboxResult(
        passed=status == "passed",
        status=status,
        returncode=returncode,
        duration_s=raw.duration_s,
        stderr_tail=stderr[-TAIL_CHARS:],
        stdout_tail=stdout[-TAIL_CHARS:],
        violation=violation,
        sandboxed=raw.sandboxed,
    )
