"""Test stand-in for ``sbatch`` (tests/runner/test_runner_launchers.py): keeps the job script, answers job 4242.

Before answering, it writes what a job that ran and failed leaves: task 0's result file holds Hydra's
record of a task that raised submitit's ``UncompletedJobError`` (a cell timed out more often than
``max_num_timeout`` allows), exactly as submitit writes it. The other tasks never run.
Usage (as sbatch is called by submitit): ``fake_sbatch.py COPY_TO SCRIPT``.
"""

from __future__ import annotations

import pickle
import re
import shutil
import sys
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from submitit.core.utils import UncompletedJobError

copy_to, script = sys.argv[1], sys.argv[-1]
shutil.copy(script, copy_to)
log = re.search(r"#SBATCH --output=(\S+)", Path(script).read_text())[1]  # .../%A_%a/%A_%a_%t_log.out
task_dir = Path(log.replace("%A", "4242").replace("%a", "0").replace("%t", "0")).parent
task_dir.mkdir(parents=True, exist_ok=True)
failed = JobReturn(status=JobStatus.FAILED)
failed._return_value = UncompletedJobError("Job not requeued because: timed-out too many times.")
with open(task_dir / "4242_0_0_result.pkl", "wb") as out:
    pickle.dump(("success", failed), out)
print("Submitted batch job 4242")
