"""Shared pieces of the sandbox tests: the skip marker and things outside the sandbox to protect."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lade_bench.sandbox import sandbox_problem

needs_sandbox = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"no sandbox here: {sandbox_problem()} (scripts/setup.sh installs bubblewrap)"
)


class Listener:
    """A TCP listener on 127.0.0.1 (or an abstract unix socket) that records every connection it gets."""

    def __init__(self, family: int = socket.AF_INET, address: object = ("127.0.0.1", 0)) -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.bind(address)
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.address = self.sock.getsockname()
        self.accepted: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # timeout: check the stop flag again
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    self.accepted.append(conn.recv(1024))
                except OSError:
                    self.accepted.append(b"")

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@contextmanager
def outside_process() -> Iterator[subprocess.Popen]:
    """A process of ours outside the sandbox (``sleep 60``) that must survive; ended at the end."""
    proc = subprocess.Popen(["sleep", "60"])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


# An unprivileged host uid for running the sandbox as a non-root caller would (root only can switch).
_UNPRIVILEGED_UID = 54_321


def as_unprivileged_caller(code: str, timeout_s: float = 240) -> dict:
    """Run ``code`` (Python that prints one JSON object last) as an unprivileged host user; its object.

    Only root can switch users. The user must be able to run an interpreter and read this checkout's
    ``src``: this one's interpreter, or else the system's (``/usr/bin/python3``; the sandbox module
    needs only the standard library). The test is skipped where neither works.
    """
    import json
    import os
    import sys

    import lade_bench

    if os.geteuid() != 0:
        pytest.skip("already an unprivileged caller: the rest of the sandbox tests are that run")
    src = os.path.dirname(os.path.dirname(os.path.abspath(lade_bench.__file__)))
    env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "PYTHONPATH": src}
    as_user = {"user": _UNPRIVILEGED_UID, "group": _UNPRIVILEGED_UID, "extra_groups": [], "env": env, "cwd": "/"}
    why = []
    for python in dict.fromkeys([sys.executable, "/usr/bin/python3"]):
        try:
            probe = subprocess.run([python, "-c", "import lade_bench.sandbox"], capture_output=True, **as_user)
        except OSError as exc:
            why.append(f"{python}: {exc}")
            continue
        if probe.returncode == 0:
            break
        why.append(f"{python}: {probe.stderr.decode()[-300:]}")
    else:
        pytest.skip(f"uid {_UNPRIVILEGED_UID} can run no interpreter that imports lade_bench here: {why}")
    done = subprocess.run([python, "-c", code], capture_output=True, timeout=timeout_s, **as_user)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


# Source of ``survivors(marker)`` (run here and in an unprivileged caller's interpreter): the pids of
# processes whose command line holds ``marker`` (a sandbox's worker carries its limits there), with
# their sandbox's supervisor, their parent.
SURVIVORS = """
def survivors(marker):
    import os
    found = set()
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():  # this process may hold the marker in its own code
            continue
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                if marker.encode() not in f.read():
                    continue
            found.add(int(pid))
            with open(f'/proc/{pid}/status', 'rb') as f:
                ppid = next(int(line.split()[1]) for line in f if line.startswith(b'PPid:'))
            with open(f'/proc/{ppid}/cmdline', 'rb') as f:
                if b'supervisor.py' in f.read():
                    found.add(ppid)
        except (OSError, StopIteration, ValueError):
            continue
    return sorted(found)
"""


def survivors(marker: str) -> list[int]:
    """Pids of processes left by the sandbox whose worker's command line holds ``marker`` (see SURVIVORS)."""
    namespace: dict = {}
    exec(SURVIVORS, namespace)
    return namespace["survivors"](marker)
