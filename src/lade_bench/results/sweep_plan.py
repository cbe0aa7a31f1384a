"""The cells a multirun launch planned, so that a status can tell pending cells from finished ones.

A launch (``python -m lade_bench.run +sweep=NAME ...``) knows its jobs (one override list each) before
any of them starts, but not their cell ids: those depend on the device a job lands on (``device:
auto``), which the submitting machine (a cluster's login node) cannot know. So the launch records its
jobs, keyed by their overrides, in ``_plan/launch.json``; each job, once it has planned its cell,
records which cell it is in ``_plan/jobs/<job key>.json``. A planned job without that record has not
started yet. Only the latest launch into a sweep folder is kept: the status shows that launch's
progress (and any other cell the index knows).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lade_bench.results.atomic import atomic_write_json
from lade_bench.results.sweep_layout import plan_dir

LAUNCH_JSON = "launch.json"
JOBS_DIR = "jobs"


def job_key(overrides: Iterable[str]) -> str:
    """A short stable key of one job: a hash of its task overrides, in any order."""
    text = "\n".join(sorted(str(o) for o in overrides))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def write_launch(sweep_root: str | os.PathLike[str], jobs: Sequence[Mapping[str, Any]]) -> Path:
    """Record the jobs of a launch (replacing the previous launch's record).

    Args:
        sweep_root: the sweep folder.
        jobs: one mapping per job: ``num`` (Hydra's job number), ``key`` (:func:`job_key` of its
            overrides), ``name`` (the readable cell name) and ``overrides``.
    """
    path = plan_dir(sweep_root) / LAUNCH_JSON
    record = {"created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "jobs": [dict(j) for j in jobs]}
    atomic_write_json(path, record)
    return path


def read_launch(sweep_root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The latest launch's record (``created_utc``, ``jobs``), or None when no launch was recorded.

    Raises:
        ValueError: the record does not parse (named); the next launch into the sweep rewrites it.
    """
    path = plan_dir(sweep_root) / LAUNCH_JSON
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(record, dict) or not isinstance(record.get("jobs", []), list):
        raise ValueError(f"{path}: not a launch record (an object with a list of jobs)")
    return record


def record_job(sweep_root: str | os.PathLike[str], key: str, cell_id: str, cell_dir: str) -> None:
    """Record that the job ``key`` runs cell ``cell_id`` (its folder relative to the sweep root).

    One small file per job, written atomically and only when it changes: jobs never contend for it.
    """
    path = plan_dir(sweep_root) / JOBS_DIR / f"{key}.json"
    record = {"cell_id": cell_id, "cell_dir": cell_dir}
    try:
        if json.loads(path.read_text(encoding="utf-8")) == record:
            return
    except (OSError, ValueError):
        pass
    atomic_write_json(path, record)


def read_jobs(sweep_root: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Job key -> ``{"cell_id", "cell_dir"}`` for every job that has started."""
    folder = plan_dir(sweep_root) / JOBS_DIR
    if not folder.is_dir():
        return {}
    jobs = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # replaced while we read (or damaged): the job's next run rewrites it
            continue
        if isinstance(record, dict) and isinstance(record.get("cell_id"), str) and "cell_dir" in record:
            jobs[path.stem] = record
    return jobs
