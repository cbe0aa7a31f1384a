"""Sweeps through the Slurm presets on a real Slurm cluster (``--slurm-cluster``; CI starts a one-node one).

Each test runs the real command, ``python -m lade_bench.run --multirun ... hydra/launcher=slurm_cpu``,
on the smallest real cell (the tiny llama, one question, 4 rows) and injects its fault with Slurm's
own tools while the cell is held mid-cell (gate_sitecustomize.py): ``scancel`` then a rerun,
``scontrol requeue``, a USR2 preemption (``scancel --signal=USR2``) and a real time limit. Each ends
with the cell whole (every row once) and checks the status at every stage. The requests a cluster
cannot hold must end the launch with a message, at once, never leave it waiting.
"""

from __future__ import annotations

import json

import pytest

from lade_bench.launchers.slurm_cluster import read_partitions

from .conftest import SlurmSweep, assert_whole, hurry_requeued, wait_until

pytestmark = pytest.mark.slow


def _no_traceback(output: str) -> None:
    assert "Traceback" not in output, output[-3000:]


def test_scancel_mid_cell_ends_the_launch_then_a_rerun_finishes_it(slurm_sweep: SlurmSweep):
    sweep = slurm_sweep
    launch = sweep.start()
    job = sweep.gate.wait_paused()
    running = sweep.wait_for_state("running").cells[0]
    assert running.owner["job_id"] == job and running.rows_written == 1
    # The job keeps the name the docs give (squeue -n lade-<sweep>) and carries the cell's name as its comment.
    assert sweep.queued_jobs() == {job: "RUNNING"}
    comment = sweep.cluster.run("squeue", "-h", "-j", job, "-o", "%k").stdout.strip()
    assert comment == running.name.rsplit("-", 1)[0]
    sweep.cluster.run("scancel", job)
    code, output = sweep.finish(launch)
    # Without accounting (the CI cluster has none) the launch learns the job's end from the queue alone.
    assert code == 3 and "1 cell(s) not done" in output and f"job {job} ended CANCELLED without a result" in output
    assert "Rerun the same command" in output and "python -m lade_bench.run --multirun lookahead.window=1" in output
    _no_traceback(output)
    assert sweep.status().cells[0].state == "interrupted"  # not requeued: nothing will restart it
    sweep.gate.open()
    code, output = sweep.finish(sweep.start())
    assert code == 0, output[-3000:]
    assert_whole(sweep)
    cell = sweep.folder / sweep.status().cells[0].name
    manifest = json.loads((cell / "manifest.json").read_text())
    assert manifest["command"] == ["run.py", *sweep.command()[3:]]  # the user's command, not submitit's
    assert [run["run"]["job_id"] for run in manifest["previous_runs"]] == [job]
    _each_line_once(sweep)


def _each_line_once(sweep: SlurmSweep) -> None:
    """submitit's lines appear once in each job log and each cell log (they appeared 2-3 times)."""
    logs = [*sweep.folder.glob("_hydra/*/.submitit/*/*.out"), *sweep.folder.glob("*/logs/*.log")]
    assert logs
    for log in logs:
        lines = [line.split(" - ", 1)[-1] for line in log.read_text().splitlines() if "submitit" in line]
        assert len(lines) == len(set(lines)), f"{log}: repeated lines {lines}"
    assert any("Job completed successfully" in log.read_text() for log in logs)


def test_scontrol_requeue_mid_cell_resumes_it(slurm_sweep: SlurmSweep):
    sweep = slurm_sweep
    launch = sweep.start()
    job = sweep.gate.wait_paused()
    sweep.cluster.run("scontrol", "requeue", job)
    requeued = sweep.wait_for_state("requeued").cells[0]
    assert requeued.scheduler.startswith(f"job {job} ") and "requeued 1x" in requeued.scheduler
    assert launch.poll() is None  # the launch waits for the restart
    _resume_after_requeue(sweep, launch, job)


def test_usr2_preemption_is_requeued_and_resumes(slurm_sweep: SlurmSweep):
    sweep = slurm_sweep
    launch = sweep.start()
    job = sweep.gate.wait_paused()
    sweep.cluster.run("scancel", "--signal=USR2", job)
    requeued = sweep.wait_for_state("requeued").cells[0]
    assert requeued.scheduler.startswith(f"job {job} ") and requeued.rows_written == 1
    assert "preempted" in _job_log(sweep, job)
    _resume_after_requeue(sweep, launch, job)


def test_time_limit_is_requeued_and_resumes(slurm_sweep: SlurmSweep):
    sweep = slurm_sweep
    # A two-minute limit, signalled a minute before it (the cell is held at the gate by then, even on a
    # loaded machine): submitit requeues it as timed out.
    launch = sweep.start("hydra.launcher.timeout_min=2", "hydra.launcher.signal_delay_s=60")
    job = sweep.gate.wait_paused()
    requeued = sweep.wait_for_state("requeued").cells[0]
    assert requeued.scheduler.startswith(f"job {job} ") and "requeued 1x" in requeued.scheduler
    assert "this job is timed-out" in _job_log(sweep, job) and "Requeued job" in _job_log(sweep, job)
    _resume_after_requeue(sweep, launch, job)


def _resume_after_requeue(sweep: SlurmSweep, launch, job: str) -> None:
    """Let the held cell go on, end Slurm's requeue hold, and check the launch ends with every cell whole."""
    sweep.gate.open()
    hurry_requeued(sweep.cluster, job)
    code, output = sweep.finish(launch)
    assert code == 0, output[-3000:]
    assert_whole(sweep)


def _job_log(sweep: SlurmSweep, job: str) -> str:
    return "".join(log.read_text() for log in sweep.folder.glob(f"_hydra/*/.submitit/{job}/*.out"))


# A partition name no site uses, for the "no such partition" case.
NOWHERE = "lade-none"


@pytest.mark.parametrize(
    ("overrides", "said"),
    [
        # slurm_gpu as shipped, on a cluster without GPUs: checked before submitting.
        (["hydra/launcher=slurm_gpu"], ["hydra.launcher.gpus_per_node=1: asks for 1 GPU(s) per node; partition"]),
        ([f"hydra.launcher.partition={NOWHERE}"], [f"the cluster has no partition {NOWHERE}; it has"]),
        # Unchecked, sbatch accepts more CPUs than any node has and Slurm keeps the job PENDING for good.
        (
            ["hydra.launcher.cpus_per_task=4096", "hydra.launcher.check_resources=false"],
            ["with reason PartitionConfig, which does not clear by waiting", "hydra.launcher.cpus_per_task=4096"],
        ),
        # Unchecked, sbatch refuses a GPU request itself.
        (["hydra/launcher=slurm_gpu", "hydra.launcher.check_resources=false"], ["sbatch refused the job array"]),
    ],
    ids=["gpu-preset", "no-such-partition", "pending-forever", "sbatch-refuses"],
)
def test_a_request_the_cluster_cannot_hold_ends_the_launch(slurm_sweep: SlurmSweep, overrides, said):
    sweep = slurm_sweep
    if "slurm_gpu" in " ".join(overrides) and any(p.gpus() for p in read_partitions(sweep.cluster.env).values()):
        pytest.skip("this cluster has GPUs: slurm_gpu would run")
    code, output = sweep.finish(sweep.start(*overrides))
    assert code == 2 and all(words in output for words in said), output[-3000:]
    _no_traceback(output)
    cell = sweep.status().cells[0]
    assert cell.state == "refused" and all(words in cell.error for words in said)  # not "pending": nothing runs it
    wait_until(lambda: set(sweep.queued_jobs().values()) <= {"CANCELLED"}, "the refused job cancelled")
