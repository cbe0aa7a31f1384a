"""What the scheduler says about a launch's jobs, as the launching process last saw it: ``_plan/queue.json``.

Only the launching process talks to the scheduler (on a cluster, the login node that runs the
command); the status reads files. So while a launch waits for its Slurm jobs it rewrites this record
at every look at the queue: each planned job's scheduler job id, state and pending reason, and
whether the submission was refused. The status then tells a cell that Slurm will restart by itself
(its job requeued after a preemption or time limit, PENDING again) from one that failed, and a
refused submission from work that waits in the queue.

The record belongs to one launch (``launch_utc``, the ``created_utc`` of ``_plan/launch.json``); it
is believed only while its launcher still updates it (``updated_utc`` within ``stale_after_s``), or,
for a refusal or the launch's end, until the next launch.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lade_bench.results.atomic import atomic_write_json
from lade_bench.results.sweep_layout import plan_dir

QUEUE_JSON = "queue.json"


def write_queue(sweep_root: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Replace the sweep's queue record with ``record`` plus the time of writing (``updated_utc``).

    ``record`` holds ``launch_utc``, ``stale_after_s``, ``command`` (the rerun command), ``submission``
    (``{"state": "submitted" | "refused", "message", "array_job_id"}``), ``jobs`` (Hydra job number ->
    ``{"job_id", "state", "reason"}``) and, once the launch is over, ``ended`` (its outcome in words).
    """
    stamped = {**record, "updated_utc": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    atomic_write_json(plan_dir(sweep_root) / QUEUE_JSON, stamped)


def read_queue_record(sweep_root: str | os.PathLike[str], launch_utc: str | None) -> dict[str, Any] | None:
    """The queue record of the launch recorded at ``launch_utc``, with ``live`` set; None if there is none.

    ``live`` is True while the launcher still updates it: only then do its job states say anything
    about now. A record of another launch, or one that does not parse, counts as none.
    """
    path = Path(plan_dir(sweep_root)) / QUEUE_JSON
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or launch_utc is None or record.get("launch_utc") != launch_utc:
        return None
    try:
        age = datetime.now(timezone.utc).timestamp() - datetime.fromisoformat(record["updated_utc"]).timestamp()
        stale_after = float(record.get("stale_after_s", 120))
    except (KeyError, TypeError, ValueError):
        return None
    record["live"] = "ended" not in record and age <= stale_after
    return record
