"""Where a sweep stands: every cell's state, rows written against rows expected, and time left.

Read-only: it combines what the jobs of a sweep leave on disk and never writes or locks anything, so
it is safe to run at any time, from any node sharing the sweep folder:

* the launch plan (``_plan/``): the cells the latest multirun launch planned, and which planned job
  became which cell (a planned cell none of whose jobs has started is *pending*). Jobs the launch
  planned as one cell (``results.sweep_plan``) are that cell once; so are jobs that turn out to be one
  cell only where they run (``device: auto`` decided alike): a job whose cell is listed already adds
  no second, pending one;
* the index (``index.jsonl``): done, failed (with the error) or running, and who ran the cell last;
* the cell locks (``_locks/cell-<id>.lock``): who runs a cell now and their last heartbeat. An index
  that says running without a live lock means the job died: the cell is *interrupted* (a rerun of
  the sweep resumes it);
* each cell's ``rows.jsonl`` and ``manifest.json``: rows written and rows expected; a done cell's
  files are verified (``cell_check``): one that is damaged shows as *damaged*, naming the file (a
  rerun of the sweep repairs it). Its rows are counted too: a row whose generation raised (its
  ``error`` is set) or a greedy row whose tokens differ from AR's leaves the cell *done*, yet its
  tables then pair that arm with AR on fewer units (or report a broken exactness), so both counts
  are shown beside the state rather than left for a reader of the tables to find;
* the queue record (``_plan/queue.json``, ``results.sweep_queue``) that a Slurm launch keeps while it
  waits: a cell whose job Slurm requeued (a preemption, a time limit, ``scontrol requeue``) and will
  restart by itself is *requeued*, not failed or interrupted; a planned cell of a launch whose
  submission the cluster refused is *refused*, not pending; a pending cell shows its queued job.

A sweep-level file that does not parse (an index line, the launch plan) is left out and named in
``warnings``; the status still shows what the rest says.

The time left is a rough estimate: rows still to write (pending cells count as many rows as the
cells already planned in detail), times the seconds per row the sweep's runs took so far (model
loading included), divided by the number of jobs running now.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lade_bench.methods import must_match_ar
from lade_bench.results.cell_check import check_cell
from lade_bench.results.lockfile import owner_state, read_lock
from lade_bench.results.sweep_index import salvage_index
from lade_bench.results.sweep_layout import cell_lock_path
from lade_bench.results.sweep_plan import planned_cells, read_jobs, read_launch
from lade_bench.results.sweep_queue import read_queue_record
from lade_bench.results.writer import MANIFEST_JSON, ROWS_JSONL, ROWS_PARQUET, SUMMARY_JSON, scan_rows_jsonl

# In display order: what needs attention first.
STATES: tuple[str, ...] = ("running", "requeued", "interrupted", "damaged", "failed", "refused", "pending", "done")
# Stale timeout assumed for a lock that does not record its own (the config default).
_DEFAULT_STALE_S = 300.0


@dataclass
class CellProgress:
    """One cell (or planned job) of a sweep.

    Attributes:
        name: the cell's folder name (readable name and id), or the planned job's readable name.
        state: one of :data:`STATES`.
        cell_id: the cell id; None for a pending job (its id depends on the device it will run on).
        rows_written: distinct rows on disk.
        rows_expected: rows the cell will have once done; None where unknown.
        expected_is_estimate: rows_expected of a pending cell, guessed from the cells planned so far.
        owner: the running job (lock record: run id, host, pid, job id, ...), for running cells.
        heartbeat_age_s: seconds since the running job's last heartbeat.
        error: the failure message of a failed cell.
        rows_failed: rows (latest per key) whose generation raised: their ``error`` is set.
        rows_mismatched: greedy rows of a lookahead-style arm whose tokens differ from AR's
            (``matches_ar`` false).
        log: the log of the cell's latest run (its file in the cell folder, else the job's log).
        job_num: Hydra's job number in the latest launch, where the cell was planned there (its
            first job, when several jobs of the launch are this cell).
        other_jobs: the launch's other jobs that are this cell (they find it done or owned and skip it).
        scheduler: what the scheduler says about the cell's job, in words (a requeued or queued job).
        job_id: the scheduler job of the cell's latest run (from its lock or the index).
        restarts: Slurm's restart count of that job when that run started (None outside Slurm).
    """

    name: str
    state: str
    cell_id: str | None = None
    rows_written: int = 0
    rows_expected: int | None = None
    expected_is_estimate: bool = False
    owner: dict[str, Any] | None = None
    heartbeat_age_s: float | None = None
    error: str | None = None
    rows_failed: int = 0
    rows_mismatched: int = 0
    log: str | None = None
    job_num: int | None = None
    other_jobs: list[int] = field(default_factory=list)
    scheduler: str | None = None
    job_id: str | None = None
    restarts: int | None = None
    # For the time estimate: (seconds, rows) of the cell's latest run.
    _run_work: tuple[float, int] | None = field(default=None, repr=False)

    @property
    def flaws(self) -> str:
        """For a done cell with failed rows or greedy rows that differ from AR, both counts in words; else empty."""
        if self.state != "done" or not (self.rows_failed or self.rows_mismatched):
            return ""
        return f"{self.rows_failed} row(s) failed, {self.rows_mismatched} greedy row(s) differ from AR"


@dataclass
class SweepProgress:
    """A sweep's progress (see :func:`sweep_progress`).

    Attributes:
        sweep_root: the sweep folder.
        launch_utc: when the latest launch was recorded; None when there is no plan.
        cells: every cell, in launch order then index order.
        seconds_per_row: wall seconds per row over the runs so far (None until a run wrote rows).
        eta_s: rough seconds left (None when unknown or when nothing is left).
        warnings: sweep-level files that could not be read, each ``path[:line]: problem``.
    """

    sweep_root: Path
    launch_utc: str | None
    cells: list[CellProgress]
    seconds_per_row: float | None
    eta_s: float | None
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Number of cells per state, every state present."""
        return {state: sum(cell.state == state for cell in self.cells) for state in STATES}

    @property
    def rows_written(self) -> int:
        """Rows on disk over all cells."""
        return sum(cell.rows_written for cell in self.cells)

    @property
    def rows_expected(self) -> int | None:
        """Rows the sweep will have once done; None when a cell's expectation is unknown."""
        expected = [cell.rows_expected for cell in self.cells]
        return None if any(e is None for e in expected) else sum(e or 0 for e in expected)

    def flawed_done_cells(self) -> list[CellProgress]:
        """The done cells with a failed row or a greedy row that differs from AR."""
        return [cell for cell in self.cells if cell.flaws]

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON: the counts, totals, estimate and every cell."""
        cells = [{k: v for k, v in asdict(cell).items() if not k.startswith("_")} for cell in self.cells]
        return {
            "sweep_root": str(self.sweep_root),
            "launch_utc": self.launch_utc,
            "counts": self.counts(),
            "rows_written": self.rows_written,
            "rows_expected": self.rows_expected,
            "seconds_per_row": self.seconds_per_row,
            "eta_s": self.eta_s,
            "warnings": list(self.warnings),
            "cells": cells,
        }


def sweep_progress(sweep_root: str | os.PathLike[str], side_files: Sequence[str] = ()) -> SweepProgress:
    """Read where the sweep in ``sweep_root`` stands (see the module docstring).

    Args:
        sweep_root: the sweep folder.
        side_files: further JSON files of a done cell to verify (a sink's record, e.g. ``wandb_run.json``).

    Raises:
        FileNotFoundError: ``sweep_root`` does not exist.
    """
    root = Path(sweep_root)
    if not root.is_dir():
        raise FileNotFoundError(f"no sweep at {root}")
    entries, warnings = salvage_index(root)
    index = {entry["cell_id"]: entry for entry in entries}
    try:
        launch = read_launch(root)
    except (OSError, ValueError) as exc:
        launch = None
        warnings.append(f"{exc}; planned cells not shown")
    started = read_jobs(root)
    cells: list[CellProgress] = []
    seen: set[str] = set()
    for planned in planned_cells(launch or {}):
        first, *others = [job["num"] for job in planned.jobs]
        runs = [started[job["key"]] for job in planned.jobs if job["key"] in started]
        known = next((run for run in runs if run["cell_id"] not in seen), None)
        if known is None:
            if not runs:  # none of its jobs has started
                cells.append(CellProgress(name=planned.name, state="pending", job_num=first, other_jobs=others))
            # else its jobs run a cell listed already: one cell, whatever the launch could tell apart
            continue
        seen.add(known["cell_id"])
        entry = index.get(known["cell_id"])
        cell = _cell(root, known["cell_id"], known["cell_dir"], entry, first, side_files)
        cell.other_jobs = others
        cells.append(cell)
    for cell_id, entry in index.items():
        if cell_id not in seen:
            cells.append(_cell(root, cell_id, entry["cell_dir"], entry, None, side_files))
    launch_utc = (launch or {}).get("created_utc")
    queue = read_queue_record(root, launch_utc)
    if queue is not None:
        _apply_queue(cells, queue)
    _estimate_pending(cells)
    seconds_per_row, eta = _estimate_time(cells)
    return SweepProgress(root, (launch or {}).get("created_utc"), cells, seconds_per_row, eta, warnings)


def _apply_queue(cells: list[CellProgress], queue: dict[str, Any]) -> None:
    """Refine the planned cells' states with what the launch last saw in the scheduler's queue."""
    jobs = queue.get("jobs") or {}
    submission = queue.get("submission") or {}
    refused = submission.get("state") == "refused"
    for cell in cells:
        if cell.job_num is None:
            continue
        listed = [jobs.get(str(num)) for num in (cell.job_num, *cell.other_jobs)] if queue["live"] else []
        # Of a cell's jobs, the one that ran it last (a requeue), else the first one queued.
        queued = next((q for q in listed if q is not None and q.get("job_id") == cell.job_id), None)
        queued = queued or next((q for q in listed if q is not None), None)
        if queued is not None:
            where = f"job {queued.get('job_id')} {queued.get('state')}"
            if queued.get("reason") not in (None, "", "None"):
                where += f" ({queued['reason']})"
            if queued.get("restarts"):
                where += f", requeued {queued['restarts']}x"
            # Requeued since the cell's latest run started: the same job id, restarted more often.
            requeued = cell.job_id == queued.get("job_id") and (queued.get("restarts") or 0) > (cell.restarts or 0)
            if requeued and cell.state in ("failed", "interrupted"):
                # The same Slurm job is back in the queue: Slurm requeued it and restarts it by itself.
                cell.state, cell.scheduler = "requeued", f"{where}: Slurm restarts it by itself"
            elif cell.state == "pending":
                cell.scheduler = f"queued as {where}"
        elif refused and cell.state == "pending":
            cell.state, cell.error = "refused", submission.get("message")


def unfinished_planned_cells(progress: SweepProgress) -> list[CellProgress]:
    """The latest launch's cells that are neither done nor being run by a live job.

    After a launch has returned, each of these is work it left undone (a job that skipped a cell
    whose owner then died, a cell interrupted or damaged, a planned job that never ran).
    """
    return [cell for cell in progress.cells if cell.job_num is not None and cell.state not in ("done", "running")]


def _cell(
    root: Path,
    cell_id: str,
    cell_dir: str,
    entry: dict[str, Any] | None,
    job_num: int | None,
    side_files: Sequence[str] = (),
) -> CellProgress:
    folder = root / cell_dir
    lock = read_lock(cell_lock_path(root, cell_id))
    live = lock is not None and owner_state(lock, lock.owner.get("stale_after_s", _DEFAULT_STALE_S)) == "alive"
    status = (entry or {}).get("status")
    if live:
        state = "running"
    elif status in ("done", "failed"):
        state = status
    elif status == "running" or lock is not None:
        state = "interrupted"  # the index or a lock says a job ran it, and that job is gone
    else:
        state = "pending"  # planned and claimed by a job, which skipped it or has not started it yet
    cell = CellProgress(name=cell_dir, state=state, cell_id=cell_id, job_num=job_num)
    run_id = None
    if live and lock is not None:
        cell.owner, cell.heartbeat_age_s = lock.owner, lock.age_s
        run_id = lock.owner.get("run_id")
    elif entry is not None:
        run_id = entry.get("run.run_id")
    # The latest run's scheduler job: a lock (even a dead one) is newer than the index's record.
    latest = lock.owner if lock is not None else {k[4:]: v for k, v in (entry or {}).items() if k.startswith("run.")}
    cell.job_id, cell.restarts = latest.get("job_id"), latest.get("restart_count")
    if entry is not None and entry.get("status") == "failed":
        cell.error = entry.get("error")
    if state == "done":
        damage = check_cell(folder, required=(SUMMARY_JSON, MANIFEST_JSON), side_files=side_files)
        if damage:
            cell.state, cell.error = "damaged", "; ".join(found.describe() for found in damage)
    counts = _count_rows(folder, run_id, done=state == "done")
    cell.rows_written, cell.rows_failed, cell.rows_mismatched = counts.written, counts.failed, counts.mismatched
    cell.rows_expected = _rows_expected(folder) or (counts.written if state == "done" else None)
    cell.log = _run_log(folder, run_id, entry)
    cell._run_work = _run_work(
        entry, lock.owner if live and lock is not None else None, counts.by_run, done=state == "done"
    )
    return cell


@dataclass(frozen=True)
class _RowCounts:
    written: int = 0  # distinct rows (latest per key)
    by_run: int = 0  # of them, written by the cell's latest run
    failed: int = 0  # of them, with ``error`` set
    mismatched: int = 0  # of them, ``matches_ar`` false


def _count_rows(folder: Path, run_id: str | None, *, done: bool) -> _RowCounts:
    jsonl = folder / ROWS_JSONL
    if not jsonl.is_file():
        parquet = folder / ROWS_PARQUET
        if not (done and parquet.is_file()):
            return _RowCounts()
        try:
            table = pq.read_table(parquet, columns=["arm", "error", "matches_ar"]).to_pylist()
        except (OSError, ValueError, KeyError):  # a damaged parquet: the cell shows as damaged
            return _RowCounts()
        return _RowCounts(len(table), 0, *_flaws(table))
    try:
        rows = scan_rows_jsonl(jsonl).rows
    except ValueError:  # a corrupt line mid-file: the cell's own run will say so; count nothing here
        return _RowCounts()
    latest = {(r["sample_id"], r["turn"], r["arm"], r["repeat"]): r for r in rows}
    by_run = sum(r.get("run_id") == run_id for r in latest.values()) if run_id else 0
    return _RowCounts(len(latest), by_run, *_flaws(latest.values()))


def _flaws(rows: Iterable[dict[str, Any]]) -> tuple[int, int]:
    """(rows whose generation raised, rows whose greedy tokens differ from AR's where they must equal them:
    a timing reference's mismatches, ``ar_standard``'s, are recorded but no flaw, ``Method.exact``)."""
    rows = list(rows)
    mismatched = sum(r.get("matches_ar") is False and must_match_ar(str(r.get("arm"))) for r in rows)
    return sum(r.get("error") is not None for r in rows), mismatched


def _rows_expected(folder: Path) -> int | None:
    try:
        manifest = json.loads((folder / MANIFEST_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    expected = manifest.get("rows_expected")
    return expected if isinstance(expected, int) else None


def _run_log(folder: Path, run_id: str | None, entry: dict[str, Any] | None) -> str | None:
    if run_id is not None and (folder / "logs" / f"{run_id}.log").is_file():
        return str(folder / "logs" / f"{run_id}.log")
    return (entry or {}).get("run.log")


def _run_work(
    entry: dict[str, Any] | None, owner: dict[str, Any] | None, rows: int, *, done: bool
) -> tuple[float, int] | None:
    """(seconds, rows) of the latest run: until now for a running one, until done for a finished one."""
    if rows == 0:
        return None
    if owner is not None:
        start: float | None = _parse(owner.get("started_utc"))
        end: float | None = time.time()
    elif done and entry is not None:
        start, end = _parse(entry.get("run.started_utc")), _parse(entry.get("updated_utc"))
    else:
        return None
    if start is None or end is None or end <= start:
        return None
    return end - start, rows


def _estimate_pending(cells: list[CellProgress]) -> None:
    known = [cell.rows_expected for cell in cells if cell.rows_expected is not None]
    if not known:
        return
    guess = int(statistics.median(known))
    for cell in cells:
        if cell.rows_expected is None and cell.state == "pending":
            cell.rows_expected, cell.expected_is_estimate = guess, True


def _estimate_time(cells: list[CellProgress]) -> tuple[float | None, float | None]:
    work = [cell._run_work for cell in cells if cell._run_work is not None]
    if not work:
        return None, None
    seconds_per_row = sum(seconds for seconds, _ in work) / sum(rows for _, rows in work)
    left = 0
    for cell in cells:
        if cell.state == "done":
            continue
        if cell.rows_expected is None:
            return seconds_per_row, None
        left += max(0, cell.rows_expected - cell.rows_written)
    if left == 0:
        return seconds_per_row, None
    running = max(1, sum(cell.state == "running" for cell in cells))
    return seconds_per_row, left * seconds_per_row / running


def _parse(stamp: Any) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None
