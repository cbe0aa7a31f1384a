"""Ending a whole sandbox from the caller: every process in it, whatever they did, confirmed gone.

bubblewrap reports its child's host pid on ``--info-fd``. With ``--as-pid-1`` that child is the
supervisor, the init of the sandbox's PID namespace: when it dies the kernel kills every other
process in the namespace, and only then does the supervisor finish exiting. So a pidfd on it is a
handle on the whole sandbox: SIGKILL through it, then wait for it to become readable (exited), and
nothing of the sandbox is left. Neither a process session of its own nor a credential change (which
clears the parent-death signal) takes anything out of the namespace.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time

from lade_bench.sandbox.outcome import SandboxError

# How long the kernel may take to tear a killed namespace down before this is reported as a failure.
_REAP_S = 10.0
# The info fd is written as soon as bwrap has made its child; it has this long to do it.
_INFO_S = 30.0


def read_child_pid(info_fd: int) -> int | None:
    """The sandbox's pid-1 host pid from bwrap's ``--info-fd`` (None if bwrap ended without one)."""
    data, end = b"", time.monotonic() + _INFO_S
    while len(data) < 4096:
        left = end - time.monotonic()
        if left <= 0 or not select.select([info_fd], [], [], left)[0]:
            break
        chunk = os.read(info_fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        pid = json.loads(data.decode("utf-8"))["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if type(pid) is int and pid > 1 else None


class Sandbox:
    """A pidfd on the sandbox's init (the supervisor), opened while bubblewrap still waits for it."""

    def __init__(self, child_pid: int | None, bwrap_pid: int) -> None:
        self.pidfd = -1
        if child_pid is None:
            return
        try:
            pidfd = os.pidfd_open(child_pid)
        except ProcessLookupError:  # already gone, with its namespace
            return
        # bwrap waits for its child, so while the child is bwrap's the pid cannot have been reused; the
        # pidfd was opened before this check, so it is the child's too.
        if _parent_of(child_pid) != bwrap_pid:
            os.close(pidfd)
            return
        self.pidfd = pidfd

    def kill(self) -> None:
        """Kill every process of the sandbox and wait until none is left.

        Raises:
            SandboxError: if the sandbox's init did not exit within ``_REAP_S`` (the kernel did not
                tear the namespace down: processes of the sandbox may still run).
        """
        if self.pidfd < 0:
            return
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:  # exited and reaped by bwrap: the namespace went with it
            pass
        try:
            if not select.select([self.pidfd], [], [], _REAP_S)[0]:
                raise SandboxError(f"the sandbox's processes survived SIGKILL for {_REAP_S:g} s")
        finally:
            os.close(self.pidfd)
            self.pidfd = -1


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None
