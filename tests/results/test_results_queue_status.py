"""The status with a Slurm launch's queue record: requeued (not failed), refused (not pending), queued jobs."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

from rich.console import Console

from lade_bench import status
from lade_bench.results import update_index
from lade_bench.results.progress import sweep_progress
from lade_bench.results.sweep_layout import plan_dir
from lade_bench.results.sweep_plan import job_key, read_launch, record_job, write_launch
from lade_bench.results.sweep_queue import write_queue


def _launch(root, cells: int) -> str:
    jobs = [
        {"num": i, "key": job_key([f"w={i}"]), "name": f"planned-{i}", "overrides": [f"w={i}"]} for i in range(cells)
    ]
    write_launch(root, jobs)
    return read_launch(root)["created_utc"]


def _failed_by_slurm_signal(root, num: int, job_id: str, restart_count: int = 0) -> None:
    """A cell whose run ended with submitit's SystemExit after a preemption, as the runner records it."""
    cell_dir = root / f"cell-{num}"
    cell_dir.mkdir()
    run = {"run_id": f"r{num}", "job_id": job_id, "scheduler": "slurm", "restart_count": restart_count}
    update_index(root, f"c{num}", cell_dir=cell_dir, status="running", run=run)
    update_index(root, f"c{num}", cell_dir=cell_dir, status="failed", error="stopped by SystemExit(-1)")
    record_job(root, job_key([f"w={num}"]), f"c{num}", cell_dir.name)


def _queue(root, launch_utc, jobs, **extra):
    record = {"launch_utc": launch_utc, "stale_after_s": 60, "command": "python -m lade_bench.run w=0,1,2",
              "submission": {"state": "submitted", "array_job_id": "7"}, "jobs": jobs, **extra}  # fmt: skip
    write_queue(root, record)


def test_a_requeued_job_is_told_from_a_failed_cell_and_a_queued_one_from_an_unsubmitted_one(tmp_path):
    launch_utc = _launch(tmp_path, 3)
    _failed_by_slurm_signal(tmp_path, 0, "7_0")  # requeued by Slurm: restarted once since the run began
    _failed_by_slurm_signal(tmp_path, 1, "7_1")  # failed for good: its job is gone from the queue
    jobs = {
        "0": {"job_id": "7_0", "state": "PENDING", "reason": "BeginTime", "restarts": 1},
        "2": {"job_id": "7_2", "state": "PENDING", "reason": "Resources", "restarts": 0},
    }
    _queue(tmp_path, launch_utc, jobs)
    cells = {cell.job_num: cell for cell in sweep_progress(tmp_path).cells}
    assert [cells[n].state for n in range(3)] == ["requeued", "failed", "pending"]
    assert cells[0].scheduler == "job 7_0 PENDING (BeginTime), requeued 1x: Slurm restarts it by itself"
    assert cells[2].scheduler == "queued as job 7_2 PENDING (Resources)"
    out = io.StringIO()
    status.render(Console(file=out, width=200), sweep_progress(tmp_path))
    assert "requeued 1" in out.getvalue() and "restarts it by itself; the cell resumes" in out.getvalue()


def test_the_same_job_not_yet_restarted_is_not_requeued(tmp_path):
    # Still RUNNING its first incarnation (the cell failed an instant before the job ends): failed.
    launch_utc = _launch(tmp_path, 1)
    _failed_by_slurm_signal(tmp_path, 0, "7_0")
    _queue(tmp_path, launch_utc, {"0": {"job_id": "7_0", "state": "RUNNING", "reason": "None", "restarts": 0}})
    assert sweep_progress(tmp_path).cells[0].state == "failed"


def test_a_stale_or_older_queue_record_says_nothing(tmp_path):
    launch_utc = _launch(tmp_path, 1)
    _failed_by_slurm_signal(tmp_path, 0, "7_0")
    jobs = {"0": {"job_id": "7_0", "state": "PENDING", "reason": "BeginTime", "restarts": 1}}
    _queue(tmp_path, "2000-01-01T00:00:00+00:00", jobs)  # another launch's
    assert sweep_progress(tmp_path).cells[0].state == "failed"
    _queue(tmp_path, launch_utc, jobs)
    path = plan_dir(tmp_path) / "queue.json"
    record = json.loads(path.read_text())
    old = datetime.now(timezone.utc) - timedelta(seconds=600)
    path.write_text(json.dumps({**record, "updated_utc": old.isoformat(timespec="seconds")}))  # its launcher died
    assert sweep_progress(tmp_path).cells[0].state == "failed"


def test_a_refused_submission_is_not_pending_work(tmp_path):
    launch_utc = _launch(tmp_path, 2)
    message = "sbatch refused the job array: sbatch: error: Invalid generic resource (gres) specification"
    _queue(tmp_path, launch_utc, {}, submission={"state": "refused", "message": message}, ended=message)
    progress = sweep_progress(tmp_path)
    assert [(cell.state, cell.error) for cell in progress.cells] == [("refused", message)] * 2
    assert progress.counts()["pending"] == 0
    out = io.StringIO()
    status.render(Console(file=out, width=200), progress)
    assert "refused 2" in out.getvalue() and "Invalid generic resource" in out.getvalue()
