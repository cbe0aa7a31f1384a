"""Before a job touches a sweep: clear what killed jobs left at sweep level, and repair what can be.

Jobs are killed at any instant (``kill -9``, preemption, a full disk), and some of what they leave
is not inside a cell (where the cell's owner cleans up): temp files of atomic writes in the sweep
folder, ``_plan/`` and ``device_profiles/``; the temp and renamed files of a lock acquire or break;
locks whose owner is dead or that hold no owner record; a damaged device profile (set aside as
``<name>.damaged``, so that the next job needing its key measures it again). Many jobs may run one
sweep at once, so only what is certainly left over goes: files older than the lock grace period (a
write takes milliseconds), and locks no live process holds.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from lade_bench.profiling.device_profile import PROFILES_DIR, repair_profile
from lade_bench.results.atomic import remove_temp_files
from lade_bench.results.lockfile import ORPHAN_GRACE_S, break_lock, owner_state, read_lock, remove_lock_leftovers
from lade_bench.results.sweep_layout import locks_dir, plan_dir
from lade_bench.results.sweep_plan import JOBS_DIR

log = logging.getLogger(__name__)

# Owner states that are certain (see _break_abandoned_locks), with the reason a takeover names.
_ABANDONED = {"dead": "its process is gone", "orphaned": "it has no owner record: its writer was killed creating it"}


def tidy_sweep(sweep_root: str | os.PathLike[str]) -> list[Path]:
    """Remove a sweep's certain leftovers of killed jobs and set damaged device profiles aside.

    Returns the files removed or set aside (each is also logged).
    """
    root = Path(sweep_root)
    if not root.is_dir():
        return []
    touched: list[Path] = []
    for folder in (root, plan_dir(root), plan_dir(root) / JOBS_DIR, root / PROFILES_DIR):
        touched += remove_temp_files(folder, older_than_s=ORPHAN_GRACE_S)
    touched += remove_lock_leftovers(locks_dir(root))
    set_aside = repair_profile(root)
    for path in touched:
        log.info("%s: left by an interrupted run, removed", path)
    for path in set_aside:
        log.warning("%s: damaged, kept as %s.damaged; the next job needing it measures it again", path, path.name)
    touched += set_aside
    return touched + _break_abandoned_locks(locks_dir(root))


def _break_abandoned_locks(folder: Path) -> list[Path]:
    """Locks whose owner process is gone or that hold no owner record (never a silent one: its owner judges)."""
    if not folder.is_dir():
        return []
    broken = []
    for path in sorted(folder.glob("*.lock")):
        info = read_lock(path)
        # The stale timeout is irrelevant here: only death and orphanhood are certain.
        state = None if info is None else owner_state(info, float("inf"))
        if info is not None and state in _ABANDONED and break_lock(path, info):
            # As loud as a takeover in runner.locks.claim: whose work is being picked up, and why.
            log.warning("%s: taking over the lock of %s (%s)", path.name, info.describe(), _ABANDONED[state])
            broken.append(path)
    return broken
