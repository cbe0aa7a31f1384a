"""Lock files that hold on a shared file system (NFS) as well as on one machine.

``fcntl``/``flock`` locks are not enough for a sweep written by jobs on several nodes: NFS mounts
with ``nolock`` (common on clusters) keep them local to each node, so two nodes would both "hold"
the same lock. A lock here is a file created with ``O_CREAT | O_EXCL``, which is atomic on local
file systems and on NFSv3+: exactly one creator wins. The file holds its owner as JSON (a random
token, host, pid and the pid's start time, plus whatever the caller adds: run id, job id, logs), and
its modification time is the owner's heartbeat (:meth:`LockHandle.touch`).

A lock whose owner died must not block a sweep forever. :func:`owner_state` judges an existing lock:

* ``"dead"``: the owner ran on this host and its process is gone (or is a zombie, or the pid now
  belongs to another process, told apart by the process start time);
* ``"silent"``: the heartbeat is older than ``stale_after_s`` (any host: a crashed node, a hung or
  killed job). Ages compare the file's mtime with this host's clock, so cluster clocks must agree to
  well within ``stale_after_s`` (NTP does);
* ``"orphaned"``: the file holds no readable owner record and is older than
  :data:`ORPHAN_GRACE_S`: the leftover of a writer killed (or out of space) between creating it and
  writing its record, never a live owner;
* ``"alive"`` otherwise.

The owner record is written to a temp file first and linked to the lock's name (``link`` is as
atomic as ``O_EXCL``, on NFS too), so a lock normally never exists without its record; where the file
system has no hard links, ``O_EXCL`` and a write follow each other, and the grace period covers the
instant between them. :func:`remove_lock_leftovers` deletes what a kill inside this module leaves
(the temp file of an acquire, the renamed file of a break).

:func:`break_lock` removes a dead or silent lock without ever removing a lock that was re-created in
the meantime by someone else: it renames the file away (atomic: one process wins), checks that the
file it got is the one it judged (same token), and puts a fresh one back if not.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import re
import secrets
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from lade_bench.results.atomic import fsync_dir, temp_name

OwnerState = Literal["alive", "dead", "silent", "orphaned"]
# Keys the lock file always has; callers add their own beside them.
_CORE_KEYS = ("token", "host", "pid", "pid_start", "created_utc")
# A lock file without a readable owner this old is a killed writer's leftover: writing the record
# takes microseconds, so seconds leave room for a slow NFS server and clocks a little apart.
ORPHAN_GRACE_S = 10.0
# What a kill inside try_acquire / break_lock leaves beside a lock: ``.<lock>.<hex>.tmp``, ``<lock>.<hex>.removing``.
_LEFTOVER = re.compile(r"(\..+\.lock\.[0-9a-f]{12}\.tmp|.+\.lock\.[0-9a-f]{12}\.removing)")


@dataclass(frozen=True)
class LockInfo:
    """An existing lock as another process sees it.

    Attributes:
        path: the lock file.
        owner: the JSON the owner wrote (token, host, pid, pid_start, created_utc and its own keys);
            ``{}`` while the owner is still writing it (it was created an instant ago).
        heartbeat_utc: when the owner last refreshed the lock (the file's mtime), seconds since the epoch.
        age_s: seconds since that heartbeat, by this host's clock.
    """

    path: Path
    owner: dict[str, Any]
    heartbeat_utc: float
    age_s: float

    @property
    def token(self) -> str | None:
        """The owner's random token (None while the file is being written)."""
        return self.owner.get("token")

    def describe(self) -> str:
        """One line naming the owner, e.g. ``host node12, pid 4242, job 1234_5, heartbeat 12 s ago``."""
        if self.token is None:
            return f"no owner record (a writer killed while creating it?), file {self.age_s:.0f} s old"
        parts = [f"host {self.owner.get('host', '?')}", f"pid {self.owner.get('pid', '?')}"]
        if self.owner.get("job_id"):
            parts.append(f"job {self.owner['job_id']}")
        parts.append(f"heartbeat {self.age_s:.0f} s ago")
        return ", ".join(parts)


@dataclass
class LockHandle:
    """A lock this process created; only its holder touches or releases it.

    Attributes:
        path: the lock file.
        token: the random token written into it (how the holder recognises its own file).
        owner: everything written into the file.
    """

    path: Path
    token: str
    owner: dict[str, Any] = field(default_factory=dict)

    def is_held(self) -> bool:
        """True while the lock file still is this handle's (not released, not broken by another process)."""
        info = read_lock(self.path)
        return info is not None and info.token == self.token

    def touch(self) -> bool:
        """Refresh the heartbeat (the file's mtime); False, touching nothing, when the lock is no longer ours."""
        if not self.is_held():
            return False
        try:
            os.utime(self.path)
        except FileNotFoundError:
            return False
        return True

    def release(self) -> None:
        """Remove the lock if it is still this handle's; a lock someone else holds now is left alone."""
        _remove_if_token(self.path, self.token)


def this_host() -> str:
    """This machine's host name, as lock owners record it."""
    return socket.gethostname()


def process_start(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, from /proc), or None where unknown.

    With the pid it identifies a process: a pid reused by a later process has another start time.
    """
    stat = _proc_stat(pid)
    return stat[19] if stat is not None and len(stat) > 19 else None


def try_acquire(path: str | os.PathLike[str], owner: Mapping[str, Any] | None = None) -> LockHandle | None:
    """Create the lock file atomically; None when it exists already (someone else holds it).

    Args:
        path: the lock file (its folder is created if needed).
        owner: extra JSON-serialisable keys recorded beside the token, host, pid and start time.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(8)
    pid = os.getpid()
    record = {
        "token": token,
        "host": this_host(),
        "pid": pid,
        "pid_start": process_start(pid),
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        **{k: v for k, v in (owner or {}).items() if k not in _CORE_KEYS},
    }
    data = json.dumps(record, default=str).encode("utf-8")
    if not _link_new(path, data):
        return None
    fsync_dir(path.parent)
    return LockHandle(path, token, record)


def _link_new(path: Path, data: bytes) -> bool:
    """Create ``path`` holding ``data`` unless it exists; False when it does (someone else holds it)."""
    draft = temp_name(path)
    try:
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(draft, path)
            return True
        except FileExistsError:
            return False
        except OSError as exc:  # a file system without hard links: create, then write the record
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
                raise
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            return False
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:  # out of space mid-record: leave no ownerless lock behind
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(draft)


def remove_lock_leftovers(directory: str | os.PathLike[str], older_than_s: float = ORPHAN_GRACE_S) -> list[Path]:
    """Delete the files a kill inside :func:`try_acquire` or :func:`break_lock` leaves in ``directory``.

    Only files older than ``older_than_s``: a younger one may belong to an acquire or break in
    progress in another process. Returns the files removed.
    """
    folder = Path(directory)
    if not folder.is_dir():
        return []
    removed = []
    now = time.time()
    for entry in folder.iterdir():
        if not _LEFTOVER.fullmatch(entry.name):
            continue
        try:
            if now - entry.stat().st_mtime > older_than_s:
                entry.unlink()
                removed.append(entry)
        except FileNotFoundError:  # removed by another process cleaning up at the same time
            continue
    if removed:
        fsync_dir(folder)
    return removed


def read_lock(path: str | os.PathLike[str]) -> LockInfo | None:
    """The lock at ``path`` as it stands now, or None when there is none."""
    path = Path(path)
    try:
        stat = path.stat()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        owner = json.loads(text)
    except ValueError:  # a lock from before owner records were linked into place whole, or garbled:
        owner = {}  # no token, so owner_state calls it orphaned once it is older than the grace period
    if not isinstance(owner, dict):
        owner = {}
    return LockInfo(path, owner, stat.st_mtime, max(0.0, time.time() - stat.st_mtime))


def owner_state(info: LockInfo, stale_after_s: float) -> OwnerState:
    """Judge an existing lock: ``"dead"``, ``"silent"``, ``"orphaned"`` or ``"alive"`` (see the module docstring)."""
    if info.token is None:
        return "orphaned" if info.age_s > ORPHAN_GRACE_S else "alive"
    pid = info.owner.get("pid")
    if info.owner.get("host") == this_host() and isinstance(pid, int):
        if not _process_alive(pid, info.owner.get("pid_start")):
            return "dead"
    if info.age_s > stale_after_s:
        return "silent"
    return "alive"


def break_lock(path: str | os.PathLike[str], judged: LockInfo) -> bool:
    """Remove the lock ``judged`` (dead or silent); True if this call removed it.

    Safe when several processes break the same lock at once and when its file was meanwhile
    replaced by a new owner's: only the file carrying ``judged``'s token is ever removed.
    """
    return _remove_if_token(Path(path), judged.token)


# Why a lock is taken over, by the state it was judged in (``"requeued"``: see :func:`acquire_or_owner`).
TAKEOVER_REASONS = {
    "dead": "its process is gone",
    "silent": "no heartbeat for more than {stale_after_s:.0f} s",
    "requeued": "it is an earlier run of this same requeued job",
    "orphaned": "it has no owner record: its writer was killed while creating it",
}


def acquire_or_owner(
    path: str | os.PathLike[str],
    owner: Mapping[str, Any] | None,
    stale_after_s: float,
    *,
    requeued: Callable[[LockInfo], bool] | None = None,
    on_takeover: Callable[[LockInfo, str], None] | None = None,
) -> LockHandle | LockInfo:
    """The whole acquisition protocol: the lock at ``path``, or the live owner that holds it.

    Creates the lock; when it exists, reads its owner and judges it (:func:`owner_state`), takes over
    a dead, silent or orphaned owner's lock (:func:`break_lock`, then creates it again), and returns
    the owner's :class:`LockInfo` once it is alive with its record written (a lock created an instant
    ago is looked at again until its record is there or it turns out orphaned). Waiting for a live
    owner, or skipping, is the caller's policy.

    Args:
        path: the lock file.
        owner: keys recorded in the lock beside the core ones (:func:`try_acquire`).
        stale_after_s: a heartbeat older than this makes the owner "silent".
        requeued: ``requeued(info)`` True takes the lock over whatever its state (an earlier run of
            the caller's own requeued scheduler job).
        on_takeover: called with the lock taken over and why (``TAKEOVER_REASONS``), e.g. to log it.
    """
    while True:
        handle = try_acquire(path, owner)
        if handle is not None:
            return handle
        info = read_lock(path)
        if info is None:
            continue  # released between our attempt and our look: try again
        state = "requeued" if requeued is not None and requeued(info) else owner_state(info, stale_after_s)
        if state != "alive":
            if break_lock(path, info) and on_takeover is not None:
                on_takeover(info, TAKEOVER_REASONS[state].format(stale_after_s=stale_after_s))
            continue
        if info.token is None:  # being written an instant ago, or orphaned: known within the grace period
            time.sleep(0.2 * (0.5 + random.random()))
            continue
        return info


@contextlib.contextmanager
def exclusive(
    path: str | os.PathLike[str],
    *,
    stale_after_s: float,
    poll_s: float = 0.05,
    owner: Mapping[str, Any] | None = None,
) -> Iterator[LockHandle]:
    """Hold the lock at ``path`` for a short critical section, waiting while a live owner has it.

    Meant for sections of milliseconds to seconds (an index update): the holder does not refresh
    its heartbeat, so ``stale_after_s`` must exceed the longest section. A holder that died on this
    host is taken over at once; one on another host after ``stale_after_s``.
    """
    while not isinstance(handle := acquire_or_owner(path, owner, stale_after_s), LockHandle):
        time.sleep(poll_s * (0.5 + random.random()))  # jitter: waiters do not retry in lockstep
    try:
        yield handle
    finally:
        handle.release()


def _remove_if_token(path: Path, token: str | None) -> bool:
    """Rename ``path`` away, keep it removed if it carried ``token``, otherwise put it back."""
    grave = path.with_name(f"{path.name}.{secrets.token_hex(6)}.removing")
    try:
        os.rename(path, grave)
    except FileNotFoundError:
        return False
    try:
        taken = json.loads(grave.read_text(encoding="utf-8"))
        taken_token = taken.get("token") if isinstance(taken, dict) else None
    except (OSError, ValueError):
        taken_token = None
    if taken_token == token:
        grave.unlink()
        fsync_dir(path.parent)
        return True
    # We took a lock that was re-created after we looked: give it back unless yet another owner has
    # taken the name since (link never replaces); that owner then holds it, the other learns it lost.
    try:
        os.link(grave, path)
    except FileExistsError:
        pass
    except OSError:  # a file system without hard links
        if not path.exists():
            os.rename(grave, path)
            return False
    with contextlib.suppress(FileNotFoundError):
        grave.unlink()
    fsync_dir(path.parent)
    return False


def _process_alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        pass
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc (not Linux): os.kill said it exists
    if stat[0] in ("Z", "X"):  # a zombie holds no lock: it only waits for its parent to reap it
        return False
    return start is None or len(stat) <= 19 or stat[19] == start


def _proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state first), or None."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces; the fields after it are plain.
    return text[text.rfind(")") + 2 :].split()
