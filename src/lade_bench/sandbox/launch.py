"""Starting one sandbox: the job in, the verdict, output and time limits out."""

from __future__ import annotations

import json
import logging
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lade_bench.sandbox.bubblewrap import (
    RUNTIME,
    RUNTIME_INSIDE,
    WORKDIR,
    bwrap_argv,
    environment,
    has_libseccomp,
    host_uid,
    require_sandbox,
)
from lade_bench.sandbox.limits import SandboxLimits
from lade_bench.sandbox.outcome import SandboxError, Status
from lade_bench.sandbox.reaper import Sandbox, read_child_pid

log = logging.getLogger(__name__)

TAIL_CHARS = 4000
# Start-up of bwrap and two interpreters (more when numpy or pandas are imported), on top of the
# supervisor's own time limits, before the wall clock here gives up on the whole sandbox.
STARTUP_ALLOWANCE_S = 15.0
# The supervisor announces each time limit it arms; if it is still inside one this long after it
# should have ended (its own timer cannot interrupt a long C call, e.g. normalising a huge Fraction
# the candidate returned), the whole sandbox is killed from here.
_SECTION_SLACK_FACTOR = 1.25
_SECTION_SLACK_S = 5.0
# Messages by which CPython, glibc and C++ extensions report an exhausted address space.
MEMORY_PATTERNS = re.compile(
    r"^MemoryError\b|std::bad_alloc|Cannot allocate memory|out of memory|Unable to allocate",
    re.MULTILINE | re.IGNORECASE,
)


@dataclass
class Raw:
    """What one sandbox left behind: the supervisor's verdict, the output, and how it ended."""

    verdict: dict[str, Any] | None
    stdout: str
    stderr: str
    duration_s: float
    kill_note: str | None  # why the sandbox was killed from here (a time limit); None if it ended itself
    sandboxed: bool

    @property
    def timed_out(self) -> bool:
        """Whether a time limit ended it (then there is no verdict)."""
        return self.kill_note is not None


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _watch(proc: subprocess.Popen, sections_fd: int, wall_s: float) -> str | None:
    """Wait for the sandbox to end; returns why it must be killed (a time limit), None if it ended.

    The supervisor writes ``<seconds>`` when it arms a time limit and ``-`` when it leaves it on
    ``sections_fd``. A section still open ``_SECTION_SLACK_*`` after its limit means the supervisor is
    stuck where its own timer cannot reach it (inside one long C call), so it is stopped from here.
    """
    wall_end = time.monotonic() + wall_s
    section_end: float | None = None
    section_s = 0.0
    pending = b""
    reading = True
    while True:
        end = wall_end if section_end is None else min(wall_end, section_end)
        left = end - time.monotonic()
        if left <= 0:
            if end == wall_end:
                return f"killed after the wall-clock timeout of {wall_s:g} s"
            return (f"killed: the supervisor stayed busy past its {section_s:g} s time limit (in a long C "
                    f"call on a value the candidate returned)")  # fmt: skip
        if not reading:
            try:
                proc.wait(timeout=left)
                return None
            except subprocess.TimeoutExpired:
                continue
        if not select.select([sections_fd], [], [], left)[0]:
            continue
        chunk = os.read(sections_fd, 4096)
        if not chunk:  # the supervisor has ended (or closed it): only the wall clock is left
            reading = False
            continue
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line.strip() == b"-":
                section_end = None
            else:
                try:
                    section_s = float(line)
                except ValueError:
                    continue
                section_end = time.monotonic() + section_s * _SECTION_SLACK_FACTOR + _SECTION_SLACK_S


def execute(
    job: dict[str, Any],
    limits: SandboxLimits,
    run_name: str,
    time_limit_s: float,
    wall_s: float,
    read_only_paths: Sequence[str],
    allow_unsandboxed: bool,
) -> Raw:
    """Run the supervisor on ``job`` in a fresh sandbox (or unsandboxed where allowed) and collect it.

    ``time_limit_s`` is the call's own limit (the CPU-time default); ``wall_s`` the wall clock of the
    whole sandbox, start-up included.
    """
    sandboxed = require_sandbox(allow_unsandboxed)
    # Host-side files (job, verdict, output) live outside anything the sandbox can see.
    outer = Path(tempfile.mkdtemp(prefix="lade_sandbox_")).resolve()
    sections_r, sections_w = os.pipe()
    # bwrap writes its child's host pid here: the handle by which the whole sandbox is killed.
    info_r, info_w = os.pipe() if sandboxed else (-1, -1)
    try:
        supervisor = f"{RUNTIME_INSIDE if sandboxed else RUNTIME}/supervisor.py"
        drop_to: list[str] = []
        if sandboxed:
            workdir = WORKDIR
            privileged = os.geteuid() == 0
            prefix = bwrap_argv(shutil.which("bwrap") or "bwrap", limits.disk_mb, read_only_paths,
                                 privileged=privileged)  # fmt: skip
            prefix[1:1] = ["--info-fd", str(info_w)]
            drop_to = [str(host_uid())] if privileged else []
            env: dict[str, str] | None = None
        else:
            workdir = str(outer / "work")
            os.mkdir(workdir, 0o700)
            prefix, env = [], environment(workdir)
        seccomp = sandboxed or has_libseccomp()
        job = {**job, "workdir": workdir, "limits": limits.for_worker(run_name, seccomp, time_limit_s),
               "supervisor_memory_bytes": max(limits.memory_mb, 1024) * 2**20 + 2**30}  # fmt: skip
        (outer / "job.json").write_text(json.dumps(job), encoding="utf-8")
        paths = {name: outer / name for name in ("stdout", "stderr", "verdict")}
        with (
            open(outer / "job.json", "rb") as stdin,
            open(paths["stdout"], "wb") as out,
            open(paths["stderr"], "wb") as err,
            open(paths["verdict"], "wb") as verdict_file,
        ):
            fd = verdict_file.fileno()
            cmd = [*prefix, sys.executable, "-I", "-B", "-X", "utf8", supervisor, str(fd), str(sections_w), *drop_to]
            start = time.perf_counter()
            passed = (fd, sections_w, info_w) if sandboxed else (fd, sections_w)
            proc = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, pass_fds=passed, env=env,
                                    cwd=workdir if not sandboxed else None, start_new_session=True)  # fmt: skip
            for end in (sections_w, info_w):
                if end >= 0:
                    os.close(end)
            sections_w = info_w = -1
            sandbox = Sandbox(read_child_pid(info_r), proc.pid) if sandboxed else None
            try:
                kill_note = _watch(proc, sections_r, wall_s)
            finally:
                # With bwrap, killing the namespace's init ends every process in it, confirmed; without,
                # the group kill is all there is.
                if sandbox is not None:
                    sandbox.kill()
                _kill_group(proc.pid)
                proc.wait()
            duration = time.perf_counter() - start
        verdict = None if kill_note else _parse_verdict(_read_text(paths["verdict"]))
        return Raw(verdict, _read_text(paths["stdout"]), _read_text(paths["stderr"]), duration, kill_note, sandboxed)
    finally:
        for end in (sections_r, sections_w, info_r, info_w):
            if end >= 0:
                os.close(end)
        shutil.rmtree(outer, ignore_errors=True)


# A verdict is a few levels deep (verdict -> tests -> test -> field); anything deeper is refused
# before parsing, so the parse never depends on how deep the caller's own stack is.
_VERDICT_DEPTH = 8
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _json_depth(text: str) -> int:
    depth = deepest = 0
    for char in re.findall(r"[\[\]{}]", _JSON_STRING.sub("", text)):
        depth += 1 if char in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _parse_verdict(text: str) -> dict[str, Any] | None:
    """The supervisor's verdict, or None (empty, cut short by a kill, malformed or too deep): never raises."""
    try:
        if _json_depth(text) > _VERDICT_DEPTH:
            return None
        verdict = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return verdict if isinstance(verdict, dict) else None


# The supervisor ended without a verdict although no time limit expired. The worker can neither
# signal nor open it, so this is an outside kill (the OOM killer, say). Never a pass.
NO_VERDICT = "[sandbox] the supervisor ended without a verdict"


def check_harness(raw: Raw) -> dict[str, Any] | None:
    """The verdict, after refusing those that say the sandbox never got as far as the candidate.

    ``internal_error`` and ``setup_error`` happen before any generated code runs (a broken
    environment or a bug here), so they raise. A failure of the supervisor after the candidate
    started (``harness_error``) may be the candidate's doing and stays a verdict: "error".
    """
    if raw.verdict is None:
        return None
    for key in ("internal_error", "setup_error"):
        if key in raw.verdict:
            raise SandboxError(f"sandbox {key.replace('_', ' ')}: {raw.verdict[key]}")
    if "harness_error" in raw.verdict:
        log.warning("the sandbox's supervisor failed while judging a candidate (verdict: error): %s",
                    str(raw.verdict["harness_error"])[-TAIL_CHARS:])  # fmt: skip
    return raw.verdict


def harness_note(verdict: Mapping[str, Any]) -> str:
    """The stderr note for a supervisor that failed after the candidate started."""
    return f"\n[sandbox] the supervisor failed while judging the candidate:\n{verdict['harness_error']}\n"


def signal_status(worker: Mapping[str, Any], cpu_limit: int) -> tuple[Status, str | None] | None:
    """Status and note for a worker ended by a signal (CPU limit, file size, crash); None if it was not."""
    signame = worker.get("signal")
    if signame is None:
        return None
    if signame == "SIGXCPU" or (signame == "SIGKILL" and worker.get("cpu_s", 0) >= cpu_limit):
        return "timeout", f"killed at the CPU-time limit of {cpu_limit} s"
    if signame == "SIGXFSZ":
        return "violation", "killed at the file-size limit"
    return "error", f"killed by signal {signame}"
