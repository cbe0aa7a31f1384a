"""Hostile programs against other processes and kernel memory, as root (as CI runs) and as an unprivileged caller.

Root causes, one program each: an fd's signal owner may be any pid (``fcntl(F_SETOWN, 1)`` with
``F_SETSIG``/``O_ASYNC`` made the kernel send SIGALRM to the supervisor, firing its timer); niceness,
CPU affinity, scheduler, I/O priority and rlimits could be set for other pids of the same uid (the
supervisor); sockets of every family held kernel memory outside every limit (TCP over the sandbox's
loopback, unix socket pairs); inotify instances used up the caller's; the worker could change the
mode of the host file behind its stdout, which an unprivileged caller's sandbox uid owns.
"""

from __future__ import annotations

import errno
import json
import platform

import pytest

from lade_bench.sandbox import SandboxLimits, run_in_sandbox, run_tests_in_sandbox

from .sandbox_helpers import as_unprivileged_caller, needs_sandbox

pytestmark = needs_sandbox
x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="raw syscall numbers are x86-64's")

# Every program below records each attempt's outcome: 'done', or the errno it was refused with.
ATTEMPT = """
libc = ctypes.CDLL(None, use_errno=True)
out = {}
def attempt(name, call):
    try:
        rc = call()
        out[name] = 'done' if not isinstance(rc, int) or rc >= 0 else ctypes.get_errno()
    except OSError as exc:
        out[name] = exc.errno
"""

# Each attempt aimed at pid 1 (the supervisor) or at the process group / user (which include it) is
# harmless to the host if it succeeds (the values set are the ones already in place, or a higher nice).
OTHER_PROCESSES = (
    """
import ctypes, fcntl, json, os, resource, signal, socket, struct
"""
    + ATTEMPT
    + """
r, w = os.pipe()
attempt('F_SETOWN', lambda: fcntl.fcntl(r, fcntl.F_SETOWN, 1))
attempt('F_SETOWN_EX', lambda: fcntl.fcntl(r, 15, struct.pack('ii', 1, 1)))  # F_OWNER_PID, pid 1
attempt('F_SETSIG', lambda: fcntl.fcntl(r, 10, signal.SIGALRM))
attempt('O_ASYNC', lambda: fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC))
attempt('FIOASYNC', lambda: fcntl.ioctl(r, 0x5452, struct.pack('i', 1)))
attempt('nice_init', lambda: os.setpriority(os.PRIO_PROCESS, 1, 19))
attempt('nice_group', lambda: os.setpriority(os.PRIO_PGRP, 0, 19))
attempt('nice_user', lambda: os.setpriority(os.PRIO_USER, 0, 19))
attempt('affinity_init', lambda: os.sched_setaffinity(1, os.sched_getaffinity(0)))
attempt('scheduler_init', lambda: os.sched_setscheduler(1, os.SCHED_BATCH, os.sched_param(0)))
attempt('prlimit_init', lambda: resource.prlimit(1, resource.RLIMIT_CORE, (0, 0)))
if os.uname().machine == 'x86_64':
    attempt('ioprio_init', lambda: libc.syscall(251, 1, 1, (2 << 13) | 7))  # ioprio_set(PROCESS, 1, BE 7)
# What a program may still do to itself.
attempt('nice_self', lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))
attempt('affinity_self', lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
attempt('signal_self', lambda: os.kill(os.getpid(), 0))
print(json.dumps(out))
"""
)

KERNEL_MEMORY = (
    """
import ctypes, json, os, socket
"""
    + ATTEMPT
    + """
for family in ('AF_INET', 'AF_INET6', 'AF_UNIX', 'AF_NETLINK', 'AF_PACKET'):
    for kind in ('SOCK_STREAM', 'SOCK_DGRAM'):
        attempt(f'{family}/{kind}', lambda: socket.socket(getattr(socket, family), getattr(socket, kind)))
attempt('socketpair', socket.socketpair)
attempt('inotify_init', libc.inotify_init)
attempt('inotify_init1', lambda: libc.inotify_init1(0))
# The host file behind stdout: its mode as it is (nothing changes even where this is let through).
attempt('fchmod_stdout', lambda: os.fchmod(1, os.fstat(1).st_mode & 0o7777))
attempt('fchown_stdout', lambda: os.fchown(1, -1, -1))
if os.uname().machine == 'x86_64':  # semget(IPC_PRIVATE, 32000 semaphores, IPC_CREAT | 0600)
    attempt('semget', lambda: libc.syscall(64, 0, 32000, 0o1600))
attempt('pipe', os.pipe)  # pipes stay (bounded by the uid's pipe buffers and the open-files limit)
import resource
out['sigpending'] = resource.getrlimit(resource.RLIMIT_SIGPENDING)[1]  # queued signals, POSIX timers
print(json.dumps(out))
"""
)
SELF = ("nice_self", "affinity_self", "signal_self")


def _report(code: str) -> dict:
    result = run_in_sandbox(code, SandboxLimits(memory_mb=256), timeout_s=20)
    assert result.status == "passed", result.stderr_tail
    return json.loads(result.stdout_tail.strip().splitlines()[-1])


def _check_other_processes(out: dict) -> None:
    for name, value in out.items():
        assert value == ("done" if name in SELF else errno.EPERM), (name, out)


def _check_kernel_memory(out: dict) -> None:
    for name, value in out.items():
        if name not in ("pipe", "sigpending"):
            assert value == errno.EPERM, (name, out)
    assert out["pipe"] == "done" and 0 < out["sigpending"] <= 1024, out


def test_no_other_process_can_be_signalled_reniced_or_repinned():
    _check_other_processes(_report(OTHER_PROCESSES))


def test_sockets_inotify_and_the_output_files_owner_are_refused():
    _check_kernel_memory(_report(KERNEL_MEMORY))


# A correct candidate that makes the kernel send SIGALRM to pid 1 (the supervisor) on every call: the
# supervisor's timer used to fire, failing the candidate with "timeout". Refused, it changes nothing.
SIGNALS_BY_FD_OWNER = """
import fcntl, os, signal
r, w = os.pipe()
try:
    fcntl.fcntl(r, fcntl.F_SETOWN, 1)
    fcntl.fcntl(r, 10, signal.SIGALRM)  # F_SETSIG
    fcntl.fcntl(r, fcntl.F_SETFL, os.O_ASYNC | os.O_NONBLOCK)
except OSError:
    pass
def add(a, b):
    os.write(w, b'x')
    return a + b
"""
ADD_TESTS = {"kind": "check_function",
             "code": "def check(add):\n    assert add(1, 2) == 3\n    assert add(4, 4) == 8\n",
             "function": "check", "candidate": "add", "time_limit_s": 3}  # fmt: skip


@x86_64
def test_signals_through_an_fds_owner_do_not_reach_the_supervisor():
    result = run_tests_in_sandbox(SIGNALS_BY_FD_OWNER, ADD_TESTS, override_names=("add",), bind_candidate_names=False)
    assert result.status == "passed", result.report


UNPRIVILEGED = """
import json
from lade_bench.sandbox import SandboxLimits, run_in_sandbox, run_tests_in_sandbox
out = {}
for name, code in (('other', OTHER), ('memory', MEMORY)):
    result = run_in_sandbox(code, SandboxLimits(memory_mb=256), timeout_s=20)
    out[name] = json.loads(result.stdout_tail.strip().splitlines()[-1]) if result.status == 'passed' else result.status
out['owner'] = run_tests_in_sandbox(OWNER, TESTS, override_names=('add',), bind_candidate_names=False).status
print(json.dumps(out))
"""


def test_an_unprivileged_caller_gets_the_same_kernel_walls():
    code = (
        f"OTHER, MEMORY, OWNER, TESTS = {OTHER_PROCESSES!r}, {KERNEL_MEMORY!r}, {SIGNALS_BY_FD_OWNER!r}, "
        f"{ADD_TESTS!r}\n" + UNPRIVILEGED
    )
    out = as_unprivileged_caller(code)
    _check_other_processes(out["other"])
    _check_kernel_memory(out["memory"])
    assert out["owner"] == "passed", out
