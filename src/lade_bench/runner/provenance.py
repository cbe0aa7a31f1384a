"""Who runs a cell: the run id, host, process and scheduler job recorded with its lock, rows and index.

Every timing in a sweep can then be traced to the run that produced it (``run_id`` in each row, the
same id in the manifest and the index), and through it to a machine and a scheduler job. The
scheduler is recognised from the job's environment: submitit (Slurm or its local executor, as run
by ``hydra-submitit-launcher``), a Ray worker (``hydra-ray-launcher``), or a Slurm job started some
other way (``sbatch`` around a plain command).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lade_bench.results.lockfile import this_host

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunIdentity:
    """One run of one cell by one process.

    Attributes:
        run_id: unique id of this run, e.g. ``20250101T120000-3f2a9c1b``.
        host: the machine's host name.
        pid: the process id.
        scheduler: ``"slurm"``, ``"submitit-local"``, ``"ray"``, or None (a plain process).
        job_id: the scheduler's job id (Slurm ``1234`` or ``1234_5`` for an array task, submitit's
            local job id, Ray's task id); None without a scheduler.
        started_utc: when the run started (ISO 8601).
        log: the job's log file or folder, where known (submitit's stdout, Hydra's job folder).
        restart_count: how often Slurm requeued the job (``SLURM_RESTART_COUNT``, 0 before the first
            requeue); None outside Slurm.
    """

    run_id: str
    host: str
    pid: int
    scheduler: str | None
    job_id: str | None
    started_utc: str
    log: str | None = None
    restart_count: int | None = None

    def row_columns(self) -> dict[str, Any]:
        """The provenance columns of every row this run writes."""
        return {"run_id": self.run_id, "job_id": self.job_id, "host": self.host}

    def as_record(self) -> dict[str, Any]:
        """The identity as plain JSON (lock owner, index ``run.*`` fields, manifest)."""
        return {
            "run_id": self.run_id,
            "host": self.host,
            "pid": self.pid,
            "scheduler": self.scheduler,
            "job_id": self.job_id,
            "started_utc": self.started_utc,
            "log": self.log,
            "restart_count": self.restart_count,
        }

    def same_scheduler_job(self, owner: dict[str, Any]) -> bool:
        """True when a lock ``owner`` was written by a run of this same Slurm job id.

        Slurm keeps the id when it requeues a preempted or timed-out job, so such an owner is either
        an earlier incarnation (gone) or a sibling command of the same allocation (maybe alive):
        ``runner.locks.requeued_from`` tells them apart.
        """
        return self.scheduler == "slurm" and self.job_id is not None and owner.get("job_id") == self.job_id


def current_run() -> RunIdentity:
    """The identity of a new run of a cell in this process."""
    now = datetime.now(timezone.utc)
    scheduler, job_id, log = _scheduler_job()
    if log is None:
        log = _hydra_job_dir()
    return RunIdentity(
        run_id=f"{now:%Y%m%dT%H%M%S}-{secrets.token_hex(4)}",
        host=this_host(),
        pid=os.getpid(),
        scheduler=scheduler,
        job_id=job_id,
        started_utc=now.isoformat(timespec="seconds"),
        log=log,
        restart_count=_slurm_restart_count() if scheduler == "slurm" else None,
    )


def _slurm_restart_count() -> int:
    # Slurm sets it only once a job was requeued; a first run has none.
    value = os.environ.get("SLURM_RESTART_COUNT", "0")
    return int(value) if value.isdigit() else 0


def label_slurm_job(run: RunIdentity, name: str) -> None:
    """Put ``name`` in this run's Slurm job comment, so that ``squeue`` shows which cell runs where.

    A Slurm array shares one job name, given at submission, before any cell is known. The name stays
    (``squeue -n lade-<sweep>`` keeps listing every task, as docs/cluster.md says); the cell's readable
    name goes into the comment (``squeue -n lade-<sweep> -o "%.12i %.8T %k"``). Best effort: nothing
    happens outside Slurm, and a refusal (``scontrol`` missing or not allowed) only leaves no comment.
    """
    scontrol = shutil.which("scontrol")
    if run.scheduler != "slurm" or run.job_id is None or scontrol is None:
        return
    command = [scontrol, "update", f"JobId={run.job_id}", f"Comment={name}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.debug("could not comment Slurm job %s: %s", run.job_id, exc)
        return
    if done.returncode != 0:
        log.debug("could not comment Slurm job %s: %s", run.job_id, done.stderr.strip())


# The command that launched this process's jobs, where it is not this process's own sys.argv (a
# scheduler's job runner starts the job): set by the launcher's job-side code (lade_bench.launchers).
_LAUNCH_COMMAND: list[str] | None = None


def record_launch_command(argv: Sequence[str]) -> None:
    """Record ``argv`` (the launching process's ``sys.argv``) as the command of this process's runs."""
    global _LAUNCH_COMMAND
    _LAUNCH_COMMAND = list(argv)


def launch_command() -> list[str]:
    """The user's command for the manifest: the launcher's, else this process's ``sys.argv``.

    The program is given by its file name (``run.py`` for ``python -m lade_bench.run``), as before.
    """
    argv = _LAUNCH_COMMAND if _LAUNCH_COMMAND is not None else sys.argv
    return [Path(argv[0]).name, *argv[1:]] if argv else []


def _scheduler_job() -> tuple[str | None, str | None, str | None]:
    """(scheduler, job id, log file) of the job running this process, from what launched it."""
    if "submitit" in sys.modules:  # imported by submitit's job runner before our code runs
        import submitit

        try:
            env = submitit.JobEnvironment()
        except RuntimeError:  # submitit imported, but this process is not a submitit job
            pass
        else:
            scheduler = "slurm" if env.cluster == "slurm" else f"submitit-{env.cluster}"
            return scheduler, str(env.job_id), str(env.paths.stdout)
    if "ray" in sys.modules:  # a Ray worker process runs our task with ray imported
        import ray

        if ray.is_initialized():
            context = ray.get_runtime_context()
            task = context.get_task_id()
            if task is not None:
                return "ray", task, None
    # A Slurm job not run through submitit (e.g. sbatch around the plain command).
    slurm_job = os.environ.get("SLURM_JOB_ID")
    if slurm_job:
        array_job, array_task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        return "slurm", f"{array_job}_{array_task}" if array_job and array_task else slurm_job, None
    return None, None, None


def _hydra_job_dir() -> str | None:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    return str(HydraConfig.get().runtime.output_dir)
