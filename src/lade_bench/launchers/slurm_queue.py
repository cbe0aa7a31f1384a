"""The queue's view of a job array (``squeue``), and what its states and pending reasons mean.

``squeue --states=all`` lists a job while it waits, runs or is requeued, and for ``MinJobAge``
(300 s by default) after it ended, with its final state; then it drops it. Accounting (``sacct``)
keeps the final state for good, but a cluster may not have it: the launch needs neither to notice
that a job has left the queue, since a job that is not listed, or listed as ended, is no longer going
to write its result.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

# States after which a job never runs again by itself (Slurm's job state codes, long form).
ENDED = frozenset(
    {"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "TIMEOUT"}
)
# Pending reasons that will not change while the cluster and the request stay as they are: waiting
# longer only hides the problem (e.g. PartitionConfig: more CPUs per task than any node has).
NEVER_STARTS = frozenset(
    {
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "BadConstraints",
        "InvalidAccount",
        "InvalidQOS",
        "AccountNotAllowed",
        "QOSMaxCpuPerJobLimit",
        "QOSMaxGRESPerJob",
        "QOSMaxMemoryPerJob",
        "QOSMaxNodePerJobLimit",
        "QOSMaxWallDurationPerJobLimit",
        "AssocMaxCpuPerJobLimit",
        "AssocMaxGRESPerJob",
        "AssocMaxMemPerJob",
        "AssocMaxNodePerJobLimit",
        "AssocMaxWallDurationPerJobLimit",
        "DependencyNeverSatisfied",
    }
)


@dataclass(frozen=True)
class QueuedJob:
    """One array task as ``squeue`` lists it.

    Attributes:
        job_id: the task's id (``123_4``, or ``123`` for a single job).
        state: Slurm's state (PENDING, RUNNING, COMPLETING, CANCELLED, ...).
        reason: why it is pending (``None`` when it is not).
        restarts: how often Slurm requeued it (after a preemption, a time limit, ``scontrol requeue``).
    """

    job_id: str
    state: str
    reason: str
    restarts: int = 0

    @property
    def ended(self) -> bool:
        """True once the job will not run again by itself."""
        return self.state in ENDED

    def as_record(self) -> dict[str, str | int]:
        """Plain JSON for the sweep's queue record."""
        return {"job_id": self.job_id, "state": self.state, "reason": self.reason, "restarts": self.restarts}


def read_queue(array_job_id: str, env: Mapping[str, str] | None = None) -> dict[str, QueuedJob] | None:
    """Every task of ``array_job_id`` that ``squeue`` still lists, by task job id; None if squeue failed.

    ``-r`` lists pending tasks one per line (``123_4``, not ``123_[4-9]``); ``-O`` (not ``-o``) because
    only it has the restart count. Each field is padded to its width and ended by ``|``.
    """
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    fields = "JobArrayID:64|,State:32|,Reason:128|,RestartCnt:8|"
    command = [squeue, "-h", "-r", "--states=all", "-j", array_job_id, "-O", fields]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=60, check=False, env=dict(env) if env else None
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        # squeue answers "Invalid job id specified" for an id the controller no longer knows: all gone.
        return {} if "Invalid job id" in done.stderr else None
    jobs = {}
    for line in done.stdout.splitlines():
        parts = [part.strip() for part in line.split("|")]
        if len(parts) >= 4 and parts[0]:
            restarts = int(parts[3]) if parts[3].isdigit() else 0
            jobs[parts[0]] = QueuedJob(parts[0], parts[1], parts[2], restarts)
    return jobs


def final_state(job_id: str) -> str | None:
    """The job's final state from accounting (``sacct``), or None on a cluster without accounting.

    Only asked about a job that ``squeue`` no longer lists, for the message that reports it.
    """
    sacct = shutil.which("sacct")
    if sacct is None:
        return None
    try:
        command = [sacct, "-n", "-X", "-P", "-j", job_id, "-o", "State"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    states = done.stdout.split()
    # "CANCELLED by 0" comes out as two words; the state is the first.
    return states[0] if done.returncode == 0 and states else None


def cancel(array_job_id: str, env: Mapping[str, str] | None = None) -> None:
    """Cancel every task of ``array_job_id`` (best effort: the launch is ending anyway)."""
    scancel = shutil.which("scancel")
    if scancel is None:
        return
    try:
        subprocess.run(
            [scancel, array_job_id], capture_output=True, timeout=60, check=False, env=dict(env) if env else None
        )
    except (OSError, subprocess.SubprocessError):
        pass
