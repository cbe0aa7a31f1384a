"""The worker's seccomp filter: what the generated code may not ask the kernel for; stdlib only.

Installed by the worker (:mod:`worker`) before any generated code runs, for the rest of its life
(a filter cannot be removed, and every thread inherits it). Refused:

* new processes (fork, vfork, clone without CLONE_THREAD; clone3 reports ENOSYS so that glibc starts
  threads through clone), other programs (execve, execveat), ptrace and process_vm_*;
* anything aimed at another process, the supervisor included: signals to any pid but its own
  (kill, tgkill, rt_*sigqueueinfo; tkill and pidfds outright), an fd's signal owner (fcntl
  F_SETOWN, F_SETOWN_EX, F_SETSIG, O_ASYNC; ioctl FIOSETOWN, SIOCSPGRP, FIOASYNC), its niceness,
  CPU affinity, scheduler, rlimits and memory placement (setpriority, sched_set*, prlimit64,
  migrate_pages, move_pages: only for pid 0, itself; ioprio_set outright), kcmp, process_madvise;
* new namespaces, the kernel key rings, io_uring, userfaultfd, perf events, bpf;
* kernel memory that no limit of this process counts: memfd, System V shared memory, message
  queues and semaphores, POSIX message queues, sockets of every family (socket, socketpair: the channel to the
  supervisor is a pair of pipes set up before), inotify instances;
* changing the owner, mode or extended attributes of an open file (fchmod, fchown, fsetxattr, ...):
  the worker's stdout and stderr are files of the caller's, which an unprivileged caller's sandbox
  uid owns outside.
"""

import ctypes
import errno

# libseccomp constants (seccomp.h).
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_NE = 1
_SCMP_CMP_MASKED_EQ = 7
_CLONE_THREAD = 0x00010000
_LOW32 = 0xFFFFFFFF  # int arguments: the kernel reads the low 32 bits only, so compare those
# fcntl commands and ioctl requests that make the kernel signal an fd's owner (any pid).
_F_SETFL, _F_SETOWN, _F_SETSIG, _F_SETOWN_EX = 4, 8, 10, 15
_O_ASYNC = 0o20000
_FIOSETOWN, _SIOCSPGRP, _FIOASYNC = 0x8901, 0x8902, 0x5452
# Refused outright (EPERM). Key rings (add_key wrote to the host root's ring when the sandbox user was
# host root); memory outside RLIMIT_AS; handles on other processes; namespaces; kernel interfaces
# that have been a steady source of exploits and that no benchmark solution needs; sockets and
# inotify (kernel memory outside every limit of this process); changes to an open file's owner,
# mode or attributes (its stdout and stderr belong to the caller).
_REFUSED = ("add_key", "request_key", "keyctl", "memfd_create", "memfd_secret", "shmget", "shmat", "msgget", "semget",
            "mq_open", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "unshare", "setns", "kcmp",
            "process_madvise", "process_mrelease", "io_uring_setup", "io_uring_enter", "io_uring_register",
            "userfaultfd", "perf_event_open", "bpf", "tkill", "ioprio_set", "socket", "socketpair",
            "inotify_init", "inotify_init1", "fanotify_init", "fchmod", "fchmodat2", "fchown", "fchownat",
            "chown", "lchown", "fsetxattr", "fremovexattr")  # fmt: skip
# Signals: only with this process as the target (argument 0), so never to the supervisor.
_SELF_ONLY = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")
# Argument 0 is a pid these act on: only 0 (the caller itself) is allowed.
_PID0_ONLY = ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr", "prlimit64",
              "migrate_pages", "move_pages")  # fmt: skip


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _is(arg: int, value: int) -> _ArgCmp:
    """Argument ``arg`` (an int: its low 32 bits) equals ``value``."""
    return _ArgCmp(arg, _SCMP_CMP_MASKED_EQ, _LOW32, value)


def _not(arg: int, value: int) -> _ArgCmp:
    """Argument ``arg`` differs from ``value`` in any of its 64 bits (so high garbage is refused too)."""
    return _ArgCmp(arg, _SCMP_CMP_NE, value, 0)


def rules(pid: int) -> list[tuple[str, int, list[_ArgCmp]]]:
    """The filter's rules for a worker whose pid is ``pid``: (syscall, action, argument conditions)."""
    refuse = _errno_action(errno.EPERM)
    no_process = _errno_action(errno.EAGAIN)
    out = [
        ("fork", no_process, []),
        ("vfork", no_process, []),
        # clone without CLONE_THREAD makes a process; with it, a thread (allowed, bounded by RLIMIT_NPROC).
        ("clone", no_process, [_ArgCmp(0, _SCMP_CMP_MASKED_EQ, _CLONE_THREAD, 0)]),
        # clone3 passes its flags in memory, which seccomp cannot read: refuse it so glibc uses clone.
        ("clone3", _errno_action(errno.ENOSYS), []),
        # Nor may it replace itself with another program (it would still be confined, but why allow it).
        ("execve", refuse, []),
        ("execveat", refuse, []),
        ("ptrace", refuse, []),
        ("process_vm_readv", refuse, []),
        ("process_vm_writev", refuse, []),
        # Any process may be made an fd's owner, which the kernel then signals (SIGIO, or F_SETSIG's).
        ("fcntl", refuse, [_is(1, _F_SETOWN)]),
        ("fcntl", refuse, [_is(1, _F_SETOWN_EX)]),
        ("fcntl", refuse, [_is(1, _F_SETSIG)]),
        ("fcntl", refuse, [_is(1, _F_SETFL), _ArgCmp(2, _SCMP_CMP_MASKED_EQ, _O_ASYNC, _O_ASYNC)]),
        ("ioctl", refuse, [_is(1, _FIOSETOWN)]),
        ("ioctl", refuse, [_is(1, _SIOCSPGRP)]),
        ("ioctl", refuse, [_is(1, _FIOASYNC)]),
        # Niceness: PRIO_PROCESS (0) of itself (0) only; a process group or user would include the supervisor.
        ("setpriority", refuse, [_not(0, 0)]),
        ("setpriority", refuse, [_not(1, 0)]),
    ]
    out += [(name, refuse, []) for name in _REFUSED]
    out += [(name, refuse, [_not(0, pid)]) for name in _SELF_ONLY]
    out += [(name, refuse, [_not(0, 0)]) for name in _PID0_ONLY]
    return out


def install_seccomp(pid: int) -> None:
    """Load the filter (:func:`rules`) for the rest of this process's life.

    Raises:
        OSError: if libseccomp refused a rule or the kernel the filter (the worker then runs nothing).
    """
    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        for name, action, cmps in rules(pid):
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a syscall on this architecture (aarch64 has no fork/vfork)
                continue
            array = (_ArgCmp * max(1, len(cmps)))(*cmps)
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
            if rc != 0:
                raise OSError(-rc, f"seccomp rule for {name} failed")
        rc = lib.seccomp_load(ctx)
        if rc != 0:
            raise OSError(-rc, "seccomp_load failed")
    finally:
        lib.seccomp_release(ctx)
