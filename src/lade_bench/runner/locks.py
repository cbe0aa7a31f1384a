"""One job per cell: ownership locks with a heartbeat, for sweeps that many jobs write at once.

A job owns a cell while it runs it: it holds ``<sweep>/_locks/cell-<cell id>.lock`` (an atomic lock
file recording the run id, host, pid and scheduler job, see ``lade_bench.results.lockfile``) and a
background thread refreshes the file's heartbeat every ``cell_lock.heartbeat_s``. Another job that
reaches the cell while the owner lives skips it (``cell_lock.when_owned: skip``) or waits for it
(``wait``); it takes the lock over once the owner is dead (same host: the process is gone), silent
for ``cell_lock.stale_after_s`` (any host), an earlier incarnation of the same Slurm job (a
requeue after preemption or a timeout, see :func:`requeued_from`), or a lock without an owner
record (a writer killed while creating it; taken over after a grace period of seconds, and waited
for, never skipped, until then). The lock is released in ``finally``.

The lock's protocol (create atomically, judge an existing owner, take a dead one's lock over) is
``lade_bench.results.lockfile.acquire_or_owner``, in that one module; this one adds the policy towards
a live owner (skip or wait), the heartbeat thread and the Slurm requeue rule.

The owner checks that the lock is still its own before every write (:meth:`Ownership.ensure_held`):
a job that was silent long enough to be taken over (suspended, cut off from the file system) stops
with :class:`LockLostError` instead of writing beside the new owner.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lade_bench.results.lockfile import LockHandle, LockInfo, acquire_or_owner, owner_state, read_lock, this_host
from lade_bench.runner.provenance import RunIdentity

log = logging.getLogger(__name__)

WHEN_OWNED = ("skip", "wait")
# How often a waiting job looks at the lock again, at most (it also never waits past a heartbeat).
_MAX_POLL_S = 5.0


class LockSettingsError(ValueError):
    """A ``cell_lock`` setting out of range (the message names the value and what is allowed)."""


class LockLostError(RuntimeError):
    """Another job took over a lock this process held (it was silent past the stale timeout)."""


@dataclass(frozen=True)
class LockSettings:
    """How cell locks behave (the ``cell_lock`` config section).

    Attributes:
        heartbeat_s: seconds between two refreshes of a held lock.
        stale_after_s: a lock not refreshed for this long is taken over.
        when_owned: ``"skip"`` a cell another live job owns, or ``"wait"`` for it.
    """

    heartbeat_s: float = 30.0
    stale_after_s: float = 300.0
    when_owned: str = "skip"

    def __post_init__(self) -> None:
        if not self.heartbeat_s > 0:
            raise LockSettingsError(f"cell_lock.heartbeat_s={self.heartbeat_s!r} is not allowed: use a number > 0")
        if not self.stale_after_s >= 2 * self.heartbeat_s:
            raise LockSettingsError(
                f"cell_lock.stale_after_s={self.stale_after_s!r} must be at least twice cell_lock.heartbeat_s="
                f"{self.heartbeat_s!r}, or a live owner between two heartbeats would look dead"
            )
        if self.when_owned not in WHEN_OWNED:
            raise LockSettingsError(f"cell_lock.when_owned={self.when_owned!r} is not one of {WHEN_OWNED}")

    @classmethod
    def from_config(cls, section: Any) -> LockSettings:
        """Settings from the ``cell_lock`` config section (enums or plain strings)."""
        when = section.when_owned
        return cls(float(section.heartbeat_s), float(section.stale_after_s), getattr(when, "value", when))


class Ownership:
    """A held lock whose heartbeat a daemon thread refreshes until :meth:`release`.

    Use as a context manager, or call :meth:`release` in ``finally``.
    """

    def __init__(self, handle: LockHandle, heartbeat_s: float) -> None:
        self.handle = handle
        self._heartbeat_s = heartbeat_s
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {handle.path.name}", daemon=True)
        self._thread.start()

    @property
    def path(self) -> Path:
        """The lock file."""
        return self.handle.path

    def _beat(self) -> None:
        while not self._stop.wait(self._heartbeat_s):
            try:
                if not self.handle.touch():
                    self._lost.set()
                    log.error("lock %s was taken over by another job; this run stops writing", self.path)
                    return
            except OSError as exc:  # a file-system hiccup: try again next beat (staleness allows for it)
                log.warning("cannot refresh the heartbeat of %s: %s", self.path, exc)

    def ensure_held(self) -> None:
        """Raise :class:`LockLostError` unless the lock is still this process's own (checked on disk)."""
        if self._lost.is_set() or not self.handle.is_held():
            self._lost.set()
            info = read_lock(self.path)
            now = f"now held by {info.describe()}" if info is not None else "now released"
            raise LockLostError(
                f"{self.path} was taken over while this run was silent past its stale timeout ({now}); "
                "stopped before writing anything more"
            )

    def release(self) -> None:
        """Stop the heartbeat and remove the lock if it is still this process's."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
        self.handle.release()

    def __enter__(self) -> Ownership:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def claim(path: Path, me: RunIdentity, settings: LockSettings, what: str, **owner: Any) -> Ownership | None:
    """Take the lock at ``path`` for ``what`` (e.g. "cell 3f2a"), or None when a live job owns it and we skip.

    With ``when_owned="wait"`` this blocks until the owner releases the lock (or dies), then takes it.
    A dead, silent or requeued owner's lock is taken over, with a warning naming that owner.

    Args:
        path: the lock file.
        me: this run (recorded in the lock with ``owner``).
        settings: heartbeat, stale timeout and skip-or-wait policy.
        what: what the lock protects, for log messages.
        owner: extra keys recorded in the lock file (e.g. the cell's folder).
    """
    record = {**me.as_record(), "heartbeat_s": settings.heartbeat_s, "stale_after_s": settings.stale_after_s, **owner}

    def taken_over(info: LockInfo, reason: str) -> None:
        log.warning("%s: taking over the lock of %s (%s)", what, info.describe(), reason)

    waiting_since = None
    while True:
        # The lock protocol (create, judge the owner, take a dead one's over) is lockfile's; here only
        # the policy towards a live owner: skip, or wait.
        got = acquire_or_owner(
            path, record, settings.stale_after_s, requeued=lambda info: requeued_from(me, info), on_takeover=taken_over
        )
        if isinstance(got, LockHandle):
            if waiting_since is not None:
                log.info("%s: lock released after %.0f s of waiting; taking it", what, time.monotonic() - waiting_since)
            return Ownership(got, settings.heartbeat_s)
        info = got
        if settings.when_owned == "skip":
            log.info("%s is being run by another job (%s): skipped", what, info.describe())
            return None
        if waiting_since is None:
            waiting_since = time.monotonic()
            log.info("%s is being run by another job (%s): waiting for it", what, info.describe())
        time.sleep(min(_MAX_POLL_S, settings.heartbeat_s) * (0.5 + random.random()))


def requeued_from(me: RunIdentity, info: LockInfo) -> bool:
    """True when the lock ``info`` is held by an earlier incarnation of this very (requeued) Slurm job.

    Two commands of one allocation (``srun`` steps, two commands in one batch script) share the job
    id too, so the id alone does not tell a requeue: a requeue has a higher Slurm restart count, and
    an owner of the same incarnation on this host must be gone. Locks written before restart counts
    were recorded fall back to liveness alone (another host: assumed requeued, as before).
    """
    if not me.same_scheduler_job(info.owner):
        return False
    theirs = info.owner.get("restart_count")
    if isinstance(theirs, int) and me.restart_count is not None and me.restart_count != theirs:
        return me.restart_count > theirs
    if info.owner.get("host") == this_host():
        return owner_state(info, float("inf")) == "dead"
    return not isinstance(theirs, int)
