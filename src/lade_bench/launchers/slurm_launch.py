"""Submit a sweep's cells as a Slurm job array and wait for them, without ever waiting forever.

What hydra-submitit-launcher's own ``launch`` does (build submitit's executor from the launcher's
options, submit one array task per Hydra job, collect each job's return), with four changes:

* **Before submitting**, the request is checked against the partition's nodes
  (``slurm_cluster.request_problems``): a request no node can hold ends the launch at once, with the
  setting and what the cluster offers, instead of a job that stays PENDING forever.
* **A refused submission** (sbatch's own error) ends the launch with sbatch's message, no traceback,
  and is recorded for the status ("refused", not "pending").
* **The wait** looks at the queue (``squeue``) every ``poll_s`` seconds instead of asking accounting
  (``sacct``) about each job: a job that has left the queue (or is listed as ended) without writing
  its result for ``result_grace_s`` seconds is over, with or without accounting, and a job PENDING for
  a reason that never clears (``slurm_queue.NEVER_STARTS``) ends the launch too. The launch then
  exits with status 3 and one message naming the cells, their jobs' logs and the rerun command.
* **The status** gets the queue's view (``results.sweep_queue``): which cells' jobs are queued, or
  requeued by Slurm after a preemption or time limit and waiting to restart.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lade_bench.launchers.job_side import quiet_submitit_duplicates
from lade_bench.launchers.slurm_cluster import ClusterUnreadable, read_partitions, request_problems
from lade_bench.launchers.slurm_queue import NEVER_STARTS, QueuedJob, cancel, final_state, read_queue
from lade_bench.results.sweep_plan import read_launch
from lade_bench.results.sweep_queue import write_queue

log = logging.getLogger(__name__)

# Exit statuses, as elsewhere in the runner: 2 for a request the cluster refuses (a config mistake),
# 3 for a launch that ended with planned cells undone (runner.launch_plan.INCOMPLETE_EXIT).
REFUSED_EXIT = 2
INCOMPLETE_EXIT = 3
# Seconds without an answer from squeue after which the launch stops waiting (the controller is down).
UNREACHABLE_AFTER_S = 600.0


def launch_on_slurm(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list[Any]:
    """Check, submit and wait for ``job_overrides`` as ``launcher`` (a ``LadeSlurmLauncher``) is configured.

    Returns:
        Hydra's ``JobReturn`` of every job, in order, once every job has returned.

    Raises:
        SystemExit: 2 when the cluster cannot or will not run the request, 3 when a job ended
            without a result or failed (the message names the cells and the rerun command), 130
            when the wait is interrupted (the jobs stay queued).
    """
    quiet_submitit_duplicates()
    settings = launcher.wait_settings
    command = rerun_command(launcher.user_command)
    records = QueueRecords(launcher.config, command, float(settings["poll_s"]))
    nums = [initial_job_idx + i for i in range(len(job_overrides))]
    if settings["check_resources"]:
        _check_request(launcher.params, records)
    executor = _executor(launcher)
    for num, overrides in zip(nums, job_overrides, strict=True):
        log.info("\t#%d : %s", num, " ".join(overrides))
    job_params = [
        (list(overrides), "hydra.sweep.dir", num, f"job_id_for_{num}", _singleton_state())
        for num, overrides in zip(nums, job_overrides, strict=True)
    ]
    try:
        jobs = executor.map_array(launcher, *zip(*job_params, strict=True))
    except Exception as exc:  # noqa: BLE001 - sbatch's refusal arrives as submitit's error with sbatch's stderr
        message = f"sbatch refused the job array: {_sbatch_error(exc)}"
        records.write({"state": "refused", "message": message}, {}, ended=message)
        log.error("%s. Nothing was submitted; fix the request (hydra.launcher.*), then rerun: %s", message, command)
        raise SystemExit(REFUSED_EXIT) from None
    array_id = str(jobs[0].job_id).split("_")[0]
    log.info("submitted %d cell(s) as Slurm job array %s (squeue -j %s)", len(jobs), array_id, array_id)
    submission = {"state": "submitted", "array_job_id": array_id}
    try:
        lost = _wait(jobs, nums, array_id, settings, records, submission, launcher.params)
    except KeyboardInterrupt:
        message = f"the launch stopped waiting; its jobs stay queued (scancel {array_id} stops them)"
        records.write(submission, {}, ended=message)
        log.warning("%s; python -m lade_bench.status <sweep folder> shows their progress", message)
        raise SystemExit(130) from None
    returns, failed = [], dict(lost)
    for num, job in zip(nums, jobs, strict=True):
        if num in lost:
            continue
        try:
            returned = job.results()[0]
        except Exception as exc:  # noqa: BLE001 - the job's own error (its traceback is in its log)
            failed[num] = f"job {job.job_id} failed: {_last_line(exc)}"
            continue
        if _job_failed(returned):  # Hydra caught the cell's exception: said here once, its traceback is in the log
            failed[num] = f"job {job.job_id} failed: {_last_line(returned._return_value)}"
        else:
            returns.append(returned)
    if failed:
        _give_up(records, submission, failed, jobs, nums, command, "ended without finishing")
    records.write(submission, {}, ended="every job returned")
    return returns


class QueueRecords:
    """The launch's queue record in each sweep folder it writes to (``results.sweep_queue``)."""

    def __init__(self, config: Any, command: str, poll_s: float) -> None:
        from lade_bench.runner.launch_plan import planned_jobs

        self.command = command
        self.stale_after_s = 3 * poll_s + 60  # a slow squeue (up to 60 s) must not look like a dead launcher
        self.names: dict[int, str] = {}
        self.root_of: dict[int, Path] = {}
        self.launch_utc: dict[Path, str | None] = {}
        try:
            planned = planned_jobs(config)
        except Exception as exc:  # noqa: BLE001 - the status is a convenience: never stop a launch for it
            log.warning("could not list the launch's cells (the status will not show the queue): %s", exc)
            planned = []
        for root, job in planned:
            self.names[job["num"]], self.root_of[job["num"]] = job["name"], root
            if root not in self.launch_utc:
                try:
                    self.launch_utc[root] = (read_launch(root) or {}).get("created_utc")
                except (OSError, ValueError):
                    self.launch_utc[root] = None

    def name(self, num: int) -> str:
        """The readable cell name of Hydra job ``num`` (its number where the plan is unknown)."""
        return self.names.get(num, f"job #{num}")

    def write(self, submission: dict[str, Any], jobs: dict[int, QueuedJob], ended: str | None = None) -> None:
        """Record the submission and each job's queue state (``ended``: the launch is over, and how)."""
        for root, launch_utc in self.launch_utc.items():
            record: dict[str, Any] = {
                "launch_utc": launch_utc,
                "scheduler": "slurm",
                "stale_after_s": self.stale_after_s,
                "command": self.command,
                "submission": submission,
                "jobs": {str(num): job.as_record() for num, job in jobs.items() if self.root_of.get(num) == root},
            }
            if ended is not None:
                record["ended"] = ended
            try:
                write_queue(root, record)
            except OSError as exc:  # a full disk is the jobs' problem to report; the wait goes on
                log.debug("could not write the queue record in %s: %s", root, exc)


def _check_request(params: dict[str, Any], records: QueueRecords) -> None:
    try:
        partitions = read_partitions()
    except ClusterUnreadable as exc:
        log.warning("could not read the cluster's partitions (%s); the request is not checked before submitting", exc)
        return
    problems = request_problems(params, partitions)
    if problems:
        message = "the cluster cannot run this request: " + "; ".join(problems)
        records.write({"state": "refused", "message": message}, {}, ended=message)
        log.error("%s. Nothing was submitted; change the setting(s) named, then rerun: %s", message, records.command)
        raise SystemExit(REFUSED_EXIT)


def _wait(
    jobs: Sequence[Any],
    nums: Sequence[int],
    array_id: str,
    settings: dict[str, Any],
    records: QueueRecords,
    submission: dict[str, Any],
    params: dict[str, Any],
) -> dict[int, str]:
    """Wait until every job has a result or is over without one; returns the latter (num -> what happened)."""
    poll_s, grace_s = float(settings["poll_s"]), float(settings["result_grace_s"])
    finished: set[int] = set()
    lost: dict[int, str] = {}
    gone_since: dict[int, float] = {}
    never_seen: dict[int, int] = {}
    last_answer = time.monotonic()
    while len(finished) + len(lost) < len(jobs):
        queue = read_queue(array_id)
        now = time.monotonic()
        if queue is None:
            if now - last_answer > UNREACHABLE_AFTER_S:
                cells = {num: f"job {job.job_id}: squeue has not answered for {UNREACHABLE_AFTER_S:.0f} s"
                         for num, job in zip(nums, jobs, strict=True) if num not in finished}  # fmt: skip
                _give_up(records, submission, cells, jobs, nums, records.command, "lost touch with Slurm")
        else:
            last_answer = now
        seen: dict[int, QueuedJob] = {}
        for num, job in zip(nums, jobs, strict=True):
            if num in finished or num in lost:
                continue
            if _has_result(job):
                finished.add(num)
                continue
            if queue is None:
                continue
            entry = queue.get(str(job.job_id))
            if entry is None or entry.ended:
                # Out of the queue: the result may still be on its way through a shared file system.
                if now - gone_since.setdefault(num, now) >= grace_s:
                    if entry is not None:
                        state = f"ended {entry.state}"
                    else:  # dropped from the queue (MinJobAge): accounting, where there is some, knows how it ended
                        final = final_state(str(job.job_id))
                        state = f"ended {final}" if final else "no longer in the queue"
                    lost[num] = f"job {job.job_id} {state} without a result"
                continue
            gone_since.pop(num, None)
            seen[num] = entry
            # Twice in a row: a reason can flicker while the scheduler first looks at a job.
            never_seen[num] = never_seen.get(num, 0) + 1 if entry.reason in NEVER_STARTS else 0
        if queue is not None:
            records.write(submission, seen)
        hopeless = {num: seen[num] for num, count in never_seen.items() if count >= 2 and num in seen}
        if hopeless:
            cancel(array_id)
            reasons = sorted({entry.reason for entry in hopeless.values()})
            message = (f"Slurm keeps job(s) {', '.join(e.job_id for e in hopeless.values())} PENDING with reason "
                       f"{', '.join(reasons)}, which does not clear by waiting (the request exceeds what the "
                       f"partition, account or QOS allows); the array {array_id} was cancelled"
                       f"{_what_does_not_fit(params)}")  # fmt: skip
            records.write({**submission, "state": "refused", "message": message}, {}, ended=message)
            log.error("%s. Change the request (hydra.launcher.*), then rerun: %s", message, records.command)
            raise SystemExit(REFUSED_EXIT)
        if len(finished) + len(lost) < len(jobs):
            time.sleep(poll_s)
    return lost


def _what_does_not_fit(params: dict[str, Any]) -> str:
    """The settings the cluster's nodes cannot satisfy, in words for a message (empty when none is seen)."""
    try:
        problems = request_problems(params, read_partitions())
    except ClusterUnreadable:
        return ""
    return "; " + "; ".join(problems) if problems else ""


def _give_up(
    records: QueueRecords,
    submission: dict[str, Any],
    undone: dict[int, str],
    jobs: Sequence[Any],
    nums: Sequence[int],
    command: str,
    how: str,
) -> None:
    """End the launch: one message naming each undone cell, its job's log, and the rerun command."""
    logs = {num: getattr(job.paths, "stdout", None) for num, job in zip(nums, jobs, strict=True)}
    lines = [f"  {records.name(num)}: {what}" + (f" (log: {logs[num]})" if logs.get(num) else "")
             for num, what in sorted(undone.items())]  # fmt: skip
    message = f"the launch {how}: {len(undone)} cell(s) not done"
    records.write(submission, {}, ended=message)
    log.error(
        "%s:\n%s\nRerun the same command to finish them (done cells are skipped, interrupted ones resume):\n  %s\n"
        "python -m lade_bench.status <sweep folder> shows where each cell stands.",
        message,
        "\n".join(lines),
        command,
    )
    raise SystemExit(INCOMPLETE_EXIT)


def rerun_command(argv: Sequence[str]) -> str:
    """The command that launched this process, as a user would type it again."""
    if not argv:
        return "the same command"
    if Path(argv[0]).name == "run.py" and Path(argv[0]).parent.name == "lade_bench":
        return shlex.join(["python", "-m", "lade_bench.run", *argv[1:]])
    return shlex.join(argv)


def _job_failed(returned: Any) -> bool:
    """True for Hydra's record of a job whose task raised (Hydra's sweeper would re-raise it as a traceback)."""
    from hydra.core.utils import JobStatus

    return getattr(returned, "status", None) == JobStatus.FAILED


def _has_result(job: Any) -> bool:
    folder = Path(job.paths.folder)
    try:
        folder.stat()  # refreshes an NFS client's view of the folder before the existence check
    except OSError:
        pass
    return Path(job.paths.result_pickle).exists()


def _executor(launcher: Any) -> Any:
    """submitit's Slurm executor with the launcher's options, exactly as hydra-submitit-launcher builds it."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from omegaconf import OmegaConf

    params = launcher.params
    init_params = {"folder": params["submitit_folder"], "slurm_max_num_timeout": params["max_num_timeout"]}
    executor = submitit.AutoExecutor(cluster="slurm", **init_params)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    rest = {key if key in base else f"slurm_{key}": value for key, value in params.items()
            if key not in {"submitit_folder", "max_num_timeout"}}  # fmt: skip
    executor.update_parameters(**rest)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    log.info("Submitit 'slurm' sweep output dir : %s", sweep_dir)
    return executor


def _singleton_state() -> Any:
    from hydra.core.singleton import Singleton

    return Singleton.get_state()


def _sbatch_error(exc: Exception) -> str:
    text = str(exc).strip()
    # submitit wraps sbatch's stderr in its own sentences; the sbatch lines are the ones to show.
    lines = [line.strip() for line in text.splitlines() if "sbatch" in line.lower() and "error" in line.lower()]
    return " ".join(lines) if lines else _last_line(exc)


def _last_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__
