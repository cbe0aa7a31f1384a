"""Where the sweep-level bookkeeping lives inside a sweep folder (beside the index and the cells).

::

    <sweep_root>/
      _locks/index.lock                   held for the instant of an index update
      _locks/cell-<cell id>.lock          held by the job running that cell (owner, heartbeat)
      _locks/device_profile-<key>.lock    held by the job measuring that profile key's curve
      _plan/launch.json                   the cells the latest multirun launch planned
      _plan/jobs/<job key>.json           which cell each planned job turned out to be
      device_profiles/<key>.json          the forward-time curve of one profile key (profiling.device_profile)
      device_profile.json                 the single profile of sweeps before profile version 2

Locks are files created atomically (see ``lade_bench.results.lockfile``), so they hold across the
nodes of a cluster sharing the sweep folder over NFS.
"""

from __future__ import annotations

import os
from pathlib import Path

LOCKS_DIR = "_locks"
PLAN_DIR = "_plan"
# One profile per key (version 2), or per device kind (legacy, version 1).
PROFILES_DIR = "device_profiles"
# A sweep's single profile, written by sweeps before version 2 (and by save_profile, for notebooks).
PROFILE_JSON = "device_profile.json"


def locks_dir(sweep_root: str | os.PathLike[str]) -> Path:
    """The folder holding the sweep's lock files."""
    return Path(sweep_root) / LOCKS_DIR


def index_lock_path(sweep_root: str | os.PathLike[str]) -> Path:
    """The lock taken around every read-modify-write of the sweep index."""
    return locks_dir(sweep_root) / "index.lock"


def cell_lock_path(sweep_root: str | os.PathLike[str], cell_id: str) -> Path:
    """The lock of the job that owns cell ``cell_id`` while it runs."""
    return locks_dir(sweep_root) / f"cell-{cell_id}.lock"


def profile_lock_path(sweep_root: str | os.PathLike[str], key_slug: str) -> Path:
    """The lock of the job measuring the device profile of one key (``ProfileKey.slug()``)."""
    return locks_dir(sweep_root) / f"device_profile-{key_slug}.lock"


def plan_dir(sweep_root: str | os.PathLike[str]) -> Path:
    """The folder holding the planned cells of the latest launch and their resolution to cells."""
    return Path(sweep_root) / PLAN_DIR
