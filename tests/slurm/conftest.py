"""A real Slurm cluster for tests/slurm, named by ``--slurm-cluster=FILE``; without it these tests skip.

FILE describes the cluster (YAML): ``slurm_conf`` (given to Slurm's commands as SLURM_CONF; null: the
commands' default), ``shared_dir`` (a folder every node sees, for the tests' sweeps; null: pytest's
temp folder, enough for a one-node cluster) and ``overrides`` (added to every test launch, e.g. a
partition or account). ``bash scripts/slurm_cluster.sh start`` starts a one-node cluster on this
machine and writes the file for it; CI (.ci/run) does that before pytest and stops the cluster after.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from lade_bench.results.progress import SweepProgress, sweep_progress

HERE = Path(__file__).resolve().parent
# The smallest real cell: the tiny llama, one question (2 turns x 2 arms = 4 rows), 8 new tokens.
TINY = ["model=tiny_llama", "dtype=float64", "device=cpu", "dataset.limit=1", "max_new_tokens=8", "warmup=0",
        "wandb.mode=disabled", "device_profile.enabled=false"]  # fmt: skip
ROWS_PER_CELL = 4
# Short looks at the queue: the tests' jobs take seconds. The time a launch may take before a test
# calls it hung is generous: it fails a test only when the launch truly waits forever.
FAST_WAIT = ["hydra.launcher.poll_s=1", "hydra.launcher.result_grace_s=3"]
HUNG_AFTER_S = 600


@dataclass
class Cluster:
    """The cluster the tests run on: the environment for Slurm's commands, extra overrides, a shared folder."""

    env: dict[str, str]
    overrides: list[str]
    shared_dir: Path | None

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess:
        """Run a Slurm command (squeue, scontrol, scancel) against this cluster."""
        done = subprocess.run(list(command), env=self.env, capture_output=True, text=True, timeout=60)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(command)} failed: {done.stderr}")
        return done


@pytest.fixture(scope="session")
def cluster(request) -> Cluster:
    """The cluster ``--slurm-cluster`` names (it must answer: a named cluster that does not is a failure)."""
    path = request.config.getoption("--slurm-cluster")
    if path is None:
        pytest.skip("no Slurm cluster: pass --slurm-cluster=FILE (bash scripts/slurm_cluster.sh start writes one)")
    spec = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(spec, dict), f"{path}: not a mapping"
    env = dict(os.environ)
    if spec.get("slurm_conf"):
        env["SLURM_CONF"] = str(spec["slurm_conf"])
    if shutil.which("sinfo") is None:
        pytest.fail(f"--slurm-cluster={path}, but sinfo is not on PATH")
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or not done.stdout.strip():
        pytest.fail(f"--slurm-cluster={path}: sinfo does not answer: {done.stderr.strip() or done.stdout.strip()}")
    shared = Path(spec["shared_dir"]) if spec.get("shared_dir") else None
    return Cluster(env=env, overrides=list(spec.get("overrides") or []), shared_dir=shared)


@dataclass
class Gate:
    """Holds a test's Slurm jobs after their first row until :meth:`open` (see gate_sitecustomize.py)."""

    folder: Path

    @property
    def setup(self) -> str:
        """The launcher override that puts the gate on the job's PYTHONPATH."""
        return f'hydra.launcher.setup=["export PYTHONPATH={self.folder}"]'

    def wait_paused(self, timeout_s: float = HUNG_AFTER_S) -> str:
        """Wait until a job holds at the gate (mid-cell); returns its Slurm job id (``123_0``)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            paused = sorted(self.folder.glob("paused-*"), key=lambda p: p.stat().st_mtime)
            if paused:
                return paused[-1].read_text()
            time.sleep(0.3)
        raise AssertionError(f"no job reached the gate in {timeout_s} s")

    def open(self) -> None:
        """Let every held and later job through."""
        (self.folder / "open").touch()


@dataclass
class SlurmSweep:
    """One test's sweep on the cluster: its command, the running launch, its folder and status."""

    cluster: Cluster
    output_root: Path
    name: str
    gate: Gate
    extra: list[str] = field(default_factory=list)
    launches: list[subprocess.Popen] = field(default_factory=list)

    @property
    def folder(self) -> Path:
        """The sweep folder."""
        return self.output_root / self.name

    def command(self, *overrides: str) -> list[str]:
        """``python -m lade_bench.run --multirun ...`` of this sweep: one cell through slurm_cpu."""
        return [sys.executable, "-m", "lade_bench.run", "--multirun", "lookahead.window=1", *TINY,
                "hydra/launcher=slurm_cpu", "hydra.launcher.cpus_per_task=1", *FAST_WAIT, self.gate.setup,
                f"sweep_name={self.name}", f"output_root={self.output_root}", *self.cluster.overrides, *self.extra,
                *overrides]  # fmt: skip

    def start(self, *overrides: str) -> subprocess.Popen:
        """Start the launch in the background (its output in ``launch-<n>.log`` beside the sweep)."""
        log = open(self.output_root / f"launch-{len(self.launches)}.log", "w")  # noqa: SIM115 - closed with the process
        launch = subprocess.Popen(self.command(*overrides), env=self.cluster.env, stdout=log, stderr=subprocess.STDOUT)
        self.launches.append(launch)
        return launch

    def finish(self, launch: subprocess.Popen) -> tuple[int, str]:
        """Wait for a launch to end by itself; (exit status, its output)."""
        try:
            code = launch.wait(timeout=HUNG_AFTER_S)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"the launch still waits after {HUNG_AFTER_S} s: it hangs") from exc
        index = self.launches.index(launch)
        return code, (self.output_root / f"launch-{index}.log").read_text()

    def status(self) -> SweepProgress:
        """What ``python -m lade_bench.status`` reads now."""
        return sweep_progress(self.folder)

    def wait_for_state(self, state: str, timeout_s: float = HUNG_AFTER_S) -> SweepProgress:
        """Poll the status until its one cell is in ``state``; returns that status."""
        deadline = time.monotonic() + timeout_s
        seen = []
        while time.monotonic() < deadline:
            progress = self.status()
            states = [cell.state for cell in progress.cells]
            if states == [state]:
                return progress
            if not seen or seen[-1] != states:
                seen.append(states)
            time.sleep(0.5)
        raise AssertionError(f"the cell never became {state}; it went through {seen}")

    def queued_jobs(self) -> dict[str, str]:
        """Job id -> state of this sweep's jobs, as ``squeue -n lade-<sweep>`` lists them."""
        done = self.cluster.run("squeue", "-h", "-r", "--states=all", "-n", f"lade-{self.name}", "-o", "%i|%T")
        return dict(line.split("|") for line in done.stdout.split())

    def stop(self) -> None:
        """Teardown: end this test's launches and cancel its jobs, whatever state the test left."""
        self.gate.open()
        for launch in self.launches:
            if launch.poll() is None:
                launch.kill()
                launch.wait(timeout=60)
        for job in self.queued_jobs():
            self.cluster.run("scancel", job.split("_")[0], check=False)


@pytest.fixture
def slurm_sweep(cluster, tmp_path, request) -> SlurmSweep:
    """A fresh one-cell sweep on the cluster, stopped (launches ended, jobs cancelled) after the test."""
    base = cluster.shared_dir / f"lade-{os.getpid()}-{time.time_ns()}" if cluster.shared_dir else tmp_path
    base.mkdir(parents=True, exist_ok=True)
    gate_dir = base / "gate"
    gate_dir.mkdir()
    shutil.copy(HERE / "gate_sitecustomize.py", gate_dir / "sitecustomize.py")
    # A name per test: squeue -n lade-<name> must list this test's jobs only.
    name = f"t{time.time_ns() % 10**9}-{request.node.name[5:30]}".replace("[", "-").replace("]", "")
    sweep = SlurmSweep(cluster, base / "runs", name, Gate(gate_dir))
    sweep.output_root.mkdir()
    yield sweep
    sweep.stop()


def assert_whole(sweep: SlurmSweep) -> None:
    """Every cell done, each row written once, the status agreeing, no lock left behind."""
    progress = sweep.status()
    assert [cell.state for cell in progress.cells] == ["done"], [(c.name, c.state, c.error) for c in progress.cells]
    assert progress.rows_written == progress.rows_expected == ROWS_PER_CELL * len(progress.cells)
    for cell in progress.cells:
        rows = [json.loads(line) for line in (sweep.folder / cell.name / "rows.jsonl").read_text().splitlines()]
        keys = [(r["sample_id"], r["turn"], r["arm"], r["repeat"]) for r in rows]
        assert len(keys) == len(set(keys)) == ROWS_PER_CELL, f"{cell.name}: rows lost or duplicated"
    assert list((sweep.folder / "_locks").glob("cell-*.lock")) == []


def hurry_requeued(cluster: Cluster, job_id: str) -> None:
    """Start a requeued job now: Slurm holds every requeued job for two minutes (Reason=BeginTime)."""

    def state() -> str:
        return cluster.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout.strip()

    # A start time set while the job still completes is reset by the requeue; one that already runs needs none.
    wait_until(lambda: state() not in ("COMPLETING", "REQUEUED"), f"job {job_id} requeued")
    if state() == "PENDING":
        cluster.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")


def wait_until(check: Callable[[], bool], what: str, timeout_s: float = HUNG_AFTER_S) -> None:
    """Poll ``check`` until it holds."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not after {timeout_s} s")
