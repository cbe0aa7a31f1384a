"""The resource limits of the process that runs generated code (one object, validated once)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# Open files of the candidate's process: enough for any benchmark solution, few enough to keep kernel
# buffers (pipes, sockets) small.
_OPEN_FILES = 256


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of the candidate's process in one sandbox; the wall clock is the caller's, per call.

    Attributes:
        memory_mb: address-space limit (RLIMIT_AS) in MiB; the code cannot start processes or take
            memory outside its address space (memfd, shared memory), so this bounds all of its memory.
        cpu_time_s: CPU-time limit (RLIMIT_CPU); None: the call's time limit rounded up, plus one second.
        max_file_mb: largest file it may write (RLIMIT_FSIZE), in MiB; also caps captured output.
        max_threads: threads it may start (RLIMIT_NPROC; the sandbox user is never root on the host,
            so the kernel enforces it for root callers too).
        disk_mb: size of its writable tmpfs (cwd, HOME, ``/tmp``), in MiB.

    Raises:
        ValueError: on a limit that is not positive, naming it.
    """

    memory_mb: int = 1024
    cpu_time_s: float | None = None
    max_file_mb: int = 32
    max_threads: int = 8
    disk_mb: int = 64

    def __post_init__(self) -> None:
        for name in ("memory_mb", "max_file_mb", "max_threads", "disk_mb"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)!r} must be positive")
        if self.cpu_time_s is not None and self.cpu_time_s <= 0:
            raise ValueError(f"cpu_time_s={self.cpu_time_s!r} must be positive (or None)")

    def cpu_seconds(self, time_limit_s: float) -> int:
        """RLIMIT_CPU for a call whose own time limit is ``time_limit_s``."""
        return math.ceil(self.cpu_time_s if self.cpu_time_s is not None else time_limit_s + 1.0)

    def for_worker(self, run_name: str, seccomp: bool, time_limit_s: float) -> dict[str, Any]:
        """The limits as the worker applies them (bytes and counts), for one call."""
        return {
            "memory_bytes": self.memory_mb * 2**20,
            "cpu_seconds": self.cpu_seconds(time_limit_s),
            "file_bytes": self.max_file_mb * 2**20,
            "open_files": _OPEN_FILES,
            "threads": self.max_threads,
            "run_name": run_name,
            "seccomp": seccomp,
        }


# The limits a call gets when it names none (frozen, so one shared object is safe as a default).
DEFAULT_LIMITS = SandboxLimits()
