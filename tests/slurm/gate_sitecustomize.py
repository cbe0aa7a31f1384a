"""Test gate for tests/slurm: copied as ``sitecustomize.py`` into a folder on the Slurm job's PYTHONPATH.

Python imports it at the start of every process of the job. It holds the cell after its first row
is on disk (the lock held, the index saying running, no summary) until the test opens the gate by
creating ``open`` beside this file, so that the test's fault (scancel, requeue, a signal, the time
limit) lands mid-cell. Each paused process leaves ``paused-<pid>`` with its Slurm job id. Nothing
else changes: the job runs the project's own code, and Slurm's signals reach it while it waits.
"""

import os
import pathlib
import time

GATE = pathlib.Path(__file__).resolve().parent
WAIT_AT_MOST_S = 900  # a test that never opens the gate must not leave a job waiting forever


def _hold_after_first_row() -> None:
    from lade_bench.results import CellWriter

    original = CellWriter.append

    def append(self, row):  # noqa: ANN001, ANN202 - the patched method's signature
        original(self, row)
        if (GATE / "open").exists():
            return
        array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
        job = f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID", "")
        (GATE / f"paused-{os.getpid()}").write_text(job)
        deadline = time.monotonic() + WAIT_AT_MOST_S
        while not (GATE / "open").exists() and time.monotonic() < deadline:
            time.sleep(0.2)  # Slurm's signals interrupt the sleep: submitit's handler runs here

    CellWriter.append = append


_hold_after_first_row()
