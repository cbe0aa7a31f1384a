"""Sweep status from the files alone: done, running (owner, heartbeat), interrupted, failed, pending, time left."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

from rich.console import Console

from lade_bench import status
from lade_bench.results import COLUMN_NAMES, CellWriter, update_index
from lade_bench.results.lockfile import try_acquire
from lade_bench.results.progress import STATES, sweep_progress, unfinished_planned_cells
from lade_bench.results.sweep_layout import cell_lock_path
from lade_bench.results.sweep_plan import job_key, record_job, write_launch


def _ago(seconds: float) -> str:
    return (datetime.now(timezone.utc) - timedelta(seconds=seconds)).isoformat(timespec="seconds")


def _cell(root, make_row, cell_id, rows, *, run_id, expected=4):
    cell_dir = root / f"cell-{cell_id}"
    writer = CellWriter(cell_dir)
    for i in range(rows):
        arm = ("ar", "lookahead")[i % 2]
        row = make_row(cell_id=cell_id, sample_id=f"s{i // 2}", arm=arm, matches_ar=None if arm == "ar" else True)
        row["run_id"] = run_id
        writer.append(dict.fromkeys(COLUMN_NAMES) | row)  # columns added later stay null here
    writer.write_json("manifest.json", {"rows_expected": expected})
    return cell_dir


def _sweep(root, make_row):
    jobs = [{"num": i, "key": job_key([f"w={i}"]), "name": f"planned-{i}", "overrides": [f"w={i}"]} for i in range(5)]
    write_launch(root, jobs)
    states = {"a": ("done", 4, "ra"), "b": ("running", 2, "rb"), "c": ("failed", 1, "rc"), "d": ("running", 3, "rd")}
    for num, (cell_id, (state, rows, run_id)) in enumerate(states.items()):
        cell_dir = _cell(root, make_row, cell_id, rows, run_id=run_id)
        run = {"run_id": run_id, "started_utc": _ago(100), "log": f"/logs/{run_id}.out"}
        update_index(root, cell_id, cell_dir=cell_dir, status="running", run=run)
        if state == "done":  # finished as the runner finishes a cell, or the status calls it damaged
            CellWriter(cell_dir).finalize()
            CellWriter(cell_dir).write_json("summary.json", {"status": "done"})
            update_index(root, cell_id, cell_dir=cell_dir, status="done")
        if state == "failed":
            update_index(
                root, cell_id, cell_dir=cell_dir, status="failed", error="OutOfMemoryError: CUDA out of memory"
            )
        record_job(root, jobs[num]["key"], cell_id, cell_dir.name)
    # b is running now: its job holds the lock (this process stands in for it) and wrote 2 rows in 20 s.
    owner = {"run_id": "rb", "job_id": "4242_1", "started_utc": _ago(20), "stale_after_s": 300}
    return try_acquire(cell_lock_path(root, "b"), owner)


def test_every_state_rows_and_time_left(tmp_path, make_row):
    lock = _sweep(tmp_path, make_row)
    progress = sweep_progress(tmp_path)
    assert progress.counts() == {
        **dict.fromkeys(STATES, 0),
        "running": 1,
        "interrupted": 1,
        "failed": 1,
        "pending": 1,
        "done": 1,
    }
    by_state = {cell.state: cell for cell in progress.cells}
    assert by_state["running"].owner["job_id"] == "4242_1" and by_state["running"].heartbeat_age_s < 5
    assert by_state["failed"].error.startswith("OutOfMemoryError") and by_state["failed"].log == "/logs/rc.out"
    assert by_state["interrupted"].rows_written == 3 and by_state["interrupted"].rows_expected == 4
    assert by_state["pending"].name == "planned-4" and by_state["pending"].expected_is_estimate
    assert (progress.rows_written, progress.rows_expected) == (10, 20)
    # Done cell: 4 rows in 100 s; running cell: 2 rows in 20 s; so 20 s per row. 10 rows are left (4 of
    # them guessed for the pending cell), on the 1 job running now.
    assert abs(progress.seconds_per_row - 20) < 1 and abs(progress.eta_s - 200) < 10
    lock.release()
    assert sweep_progress(tmp_path).counts()["interrupted"] == 2  # its job is gone now


def test_status_command_prints_a_table_and_json(tmp_path, make_row, capsys):
    lock = _sweep(tmp_path, make_row)
    console = Console(width=200, record=True, file=io.StringIO())
    status.render(console, sweep_progress(tmp_path))
    text = console.export_text()
    assert "running 1 · interrupted 1 · failed 1 · pending 1 · done 1" in text
    assert "job 4242_1, heartbeat" in text and "OutOfMemoryError" in text and "rerun" in text
    assert "rows 10 / 20 (50%)" in text and "left with 1 job(s) running" in text
    assert status.main([str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["done"] == 1
    assert status.main([str(tmp_path / "missing")]) == 2
    lock.release()


def test_a_sweep_killed_before_its_first_cell_has_a_status(tmp_path, capsys):
    # Killed right after planning: a launch plan, no index, no cell, no lock.
    write_launch(tmp_path, [{"num": 0, "key": job_key(["w=0"]), "name": "planned-0", "overrides": ["w=0"]}])
    progress = sweep_progress(tmp_path)
    assert [(cell.name, cell.state) for cell in progress.cells] == [("planned-0", "pending")]
    assert status.main([str(tmp_path)]) == 0
    assert "pending 1" in capsys.readouterr().out


def test_unfinished_planned_cells_are_those_neither_done_nor_live(tmp_path, make_row):
    lock = _sweep(tmp_path, make_row)
    progress = sweep_progress(tmp_path)
    # a is done and b has a live owner; c failed, d's job is gone (interrupted), the fifth never started.
    assert sorted(cell.state for cell in unfinished_planned_cells(progress)) == ["failed", "interrupted", "pending"]
    lock.release()


def _finished(root, make_row, cell_id):
    """A cell run to the end as the runner leaves it (rows, parquet, summary, index done)."""
    cell_dir = _cell(root, make_row, cell_id, 4, run_id=f"r{cell_id}")
    CellWriter(cell_dir).finalize()
    CellWriter(cell_dir).write_json("summary.json", {"status": "done"})
    update_index(root, cell_id, cell_dir=cell_dir, status="done", run={"run_id": f"r{cell_id}"})
    return cell_dir


def test_jobs_that_are_one_cell_are_one_cell_never_a_pending_one(tmp_path, make_row):
    # Issue 64: jobs whose swept setting no arm reads are one cell. Planned as one (a shared ``cell``
    # identity), they are listed once before any job starts and once done.
    merged = [{"num": i, "key": job_key([f"w={i}"]), "name": "one", "overrides": [], "cell": "x"} for i in (0, 1)]
    write_launch(tmp_path / "merged", merged)
    before = sweep_progress(tmp_path / "merged")
    (pending,) = before.cells
    assert (pending.name, pending.state, pending.job_num, pending.other_jobs) == ("one", "pending", 0, [1])
    cell_dir = _finished(tmp_path / "merged", make_row, "a")
    for job in merged:  # the first job ran it, the second found it done: both record the same cell
        record_job(tmp_path / "merged", job["key"], "a", cell_dir.name)
    after = sweep_progress(tmp_path / "merged")
    assert [(cell.state, cell.cell_id) for cell in after.cells] == [("done", "a")]
    assert unfinished_planned_cells(after) == []
    # Planned apart (the launch could not tell them apart: no identity), they still are one cell once run.
    apart = [{key: value for key, value in job.items() if key != "cell"} for job in merged]
    write_launch(tmp_path / "apart", apart)
    cell_dir = _finished(tmp_path / "apart", make_row, "a")
    for job in apart:
        record_job(tmp_path / "apart", job["key"], "a", cell_dir.name)
    progress = sweep_progress(tmp_path / "apart")
    assert [(cell.state, cell.cell_id) for cell in progress.cells] == [("done", "a")]
    assert unfinished_planned_cells(progress) == []
