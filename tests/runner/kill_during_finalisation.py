"""Test helper: ``python -m lade_bench.run`` with one finalisation step patched to SIGKILL the run.

``install(STAGE)`` patches the stage's step in the calling process: the CLI server's child
(cli_server.py, ``patch=("kill_during_finalisation", STAGE)``) calls it before it runs the CLI. The
patched step kills the child's whole process group (as an OOM killer or a cluster's job kill would),
W&B's service process included; the patch lives only in that child, and production code has no switch
for it. Stages, in finalisation order:

* ``rows_parquet``: just after ``rows.parquet`` is written;
* ``summary``: just after ``summary.json`` is written;
* ``wandb_table``: inside the W&B run, after the samples table is logged, before any figure;
* ``figure_write``: while the first figure is written (its temp file is complete, not yet renamed);
* ``wandb_finish``: after ``run.finish()`` returned, before the run is recorded as finished;
* ``index_done``: while the index is marked done (``index.jsonl`` replaced, ``index.parquet`` not yet).
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lade_bench.report import wandb_run_record
from lade_bench.report.wandb_sink import WandbSink
from lade_bench.results import SUMMARY_JSON, CellWriter

STAGES = ("rows_parquet", "summary", "wandb_table", "figure_write", "wandb_finish", "index_done")


def _die() -> None:
    os.killpg(os.getpgrp(), signal.SIGKILL)


def _after(owner: Any, name: str, when: Callable[..., bool] = lambda *args, **kwargs: True) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        if when(*args, **kwargs):
            _die()
        return result

    setattr(owner, name, wrapper)


def _before(owner: Any, name: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        _die()
        return original(*args, **kwargs)

    setattr(owner, name, wrapper)


def _before_rename(when: Callable[[Path], bool]) -> None:
    # atomic_write renames its finished temp file with os.replace; dying first leaves the temp file.
    original = os.replace

    def replace(src, dst, *args, **kwargs):
        if when(Path(dst)):
            _die()
        return original(src, dst, *args, **kwargs)

    os.replace = replace


def _index_marks_done(dst: Path) -> bool:
    return dst.name == "index.parquet" and '"status":"done"' in (dst.parent / "index.jsonl").read_text()


def install(stage: str) -> None:
    """Patch the step named ``stage`` to kill this process group."""
    if stage == "rows_parquet":
        _after(CellWriter, "finalize")
    elif stage == "summary":
        _after(CellWriter, "write_json", when=lambda self, name, obj: name == SUMMARY_JSON)
    elif stage == "wandb_table":
        _before(WandbSink, "_log_figures")
    elif stage == "figure_write":
        _before_rename(lambda dst: dst.suffix == ".png")
    elif stage == "wandb_finish":
        _before(wandb_run_record, "record_finished")
    elif stage == "index_done":
        _before_rename(_index_marks_done)
    else:
        raise SystemExit(f"unknown stage {stage!r}; one of {STAGES}")


# A stage whose child is still running after this long has hung: SIGALRM ends it (and the test fails).
STAGE_TIMEOUT_S = 300
