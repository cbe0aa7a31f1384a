"""Shared pieces of the sandbox tests: the skip marker and things outside the sandbox to protect."""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lade_bench.metrics.sandbox import sandbox_problem

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
