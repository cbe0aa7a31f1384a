"""The cells a multirun launch planned, so that a status can tell pending cells from finished ones.

A launch (``python -m lade_bench.run +sweep=NAME ...``) knows its jobs (one override list each) before
any of them starts, but not their cell ids: those depend on the device a job lands on (``device:
auto``), which the submitting machine (a cluster's login node) cannot know. So the launch records its
jobs, keyed by their overrides, in ``_plan/launch.json``; each job, once it has planned its cell,
records which cell it is in ``_plan/jobs/<job key>.json``. A planned job without that record has not
started yet. Only the latest launch into a sweep folder is kept: the status shows that launch's
progress (and any other cell the index knows).

Jobs of a launch can be one cell: a swept setting that no arm of the cell reads (``lookahead.window``
beside arms without lookahead) changes no cell id. The launch tells them apart as far as it can
before any job starts (``runner.plan.launch_identity``) and records each planned cell once, under
``cells``, with the jobs that are it: the first job to reach it runs it, the others find it done or
owned and skip it, and the cell is neither counted twice nor left pending.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
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


@dataclass(frozen=True)
class PlannedCell:
    """One cell a launch planned: its readable name and the launch's jobs that are it (in job order)."""

    name: str
    jobs: tuple[Mapping[str, Any], ...]


def write_launch(sweep_root: str | os.PathLike[str], jobs: Sequence[Mapping[str, Any]]) -> Path:
    """Record the jobs of a launch and the cells they are (replacing the previous launch's record).

    Args:
        sweep_root: the sweep folder.
        jobs: one mapping per job: ``num`` (Hydra's job number), ``key`` (:func:`job_key` of its
            overrides), ``name`` (the readable cell name), ``overrides`` and, optionally, ``cell``:
            jobs with one ``cell`` value are one cell (``runner.plan.launch_identity``); a job
            without it is a cell of its own.
    """
    path = plan_dir(sweep_root) / LAUNCH_JSON
    cells: dict[str, dict[str, Any]] = {}
    for job in jobs:
        identity = str(job.get("cell") or f"job {job['num']}")  # no identity: a cell of its own
        cell = cells.setdefault(identity, {"cell": job.get("cell"), "name": job["name"], "jobs": []})
        cell["jobs"].append(job["num"])
    record = {
        "created_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "jobs": [dict(j) for j in jobs],
        "cells": list(cells.values()),
    }
    atomic_write_json(path, record)
    return path


def planned_cells(launch: Mapping[str, Any]) -> list[PlannedCell]:
    """The cells of a launch record (:func:`read_launch`), each once, with its jobs, in job order.

    A record written before launches listed their cells (no ``cells``) has one cell per job.

    Raises:
        ValueError: ``cells`` names a job the record does not list.
    """
    jobs = [job for job in launch.get("jobs", []) if isinstance(job, Mapping)]
    if "cells" not in launch:
        return [PlannedCell(str(job["name"]), (job,)) for job in jobs]
    by_num = {job["num"]: job for job in jobs}
    cells = []
    for cell in launch["cells"]:
        unknown = [num for num in cell["jobs"] if num not in by_num]
        if unknown:
            raise ValueError(f"launch record: cell {cell['name']!r} names job(s) {unknown} it does not list")
        cells.append(PlannedCell(str(cell["name"]), tuple(by_num[num] for num in cell["jobs"])))
    return cells


def read_launch(sweep_root: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The latest launch's record (``created_utc``, ``jobs``, ``cells``), or None when no launch was recorded.

    Raises:
        ValueError: the record does not parse, or its cells do not match its jobs (named); the next
            launch into the sweep rewrites it.
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
    try:
        planned_cells(record)
    except (KeyError, TypeError, ValueError) as exc:  # a hand edit: the next launch rewrites it
        raise ValueError(f"{path}: its cells do not match its jobs ({exc!r})") from exc
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
