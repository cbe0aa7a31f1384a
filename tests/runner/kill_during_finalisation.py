"""Test helper: ``python -m lade_bench.run`` with one finalisation step patched to SIGKILL the run.

Usage: ``python kill_during_finalisation.py``, then one JSON request per line on stdin,
``{"stage": STAGE, "args": [overrides...], "log": PATH}``; each is answered by one JSON line on stdout,
``{"stage": STAGE, "signal": N or null, "exit_status": N or null}``. The CLI's modules (torch,
transformers, W&B, the engine) are imported once here; each request forks a child that starts its own
session and runs the CLI as ``python -m lade_bench.run`` would, with the stage's step patched, its
output in the ``log`` file. The patched step kills the child's whole process group (as an OOM killer or
a cluster's job kill would), W&B's service process included; the patch lives only in that child, and
production code has no switch for it. Stages, in finalisation order:

* ``rows_parquet``: just after ``rows.parquet`` is written;
* ``summary``: just after ``summary.json`` is written;
* ``wandb_table``: inside the W&B run, after the samples table is logged, before any figure;
* ``figure_write``: while the first figure is written (its temp file is complete, not yet renamed);
* ``wandb_finish``: after ``run.finish()`` returned, before the run is recorded as finished;
* ``index_done``: while the index is marked done (``index.jsonl`` replaced, ``index.parquet`` not yet).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import runpy
import signal
import sys
import traceback
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


# What a run of the CLI imports, heaviest first (the rest comes in with these); the parent imports them
# once so that each child only runs. Found by listing the modules a forked full run added to sys.modules.
CLI_MODULES = (
    "torch",
    "transformers",
    "wandb",
    "wandb.apis.public",
    "wandb.sdk.launch",
    "requests",
    "opentelemetry.exporter.otlp.proto.http._log_exporter",
    "opentelemetry.exporter.otlp.proto.http.metric_exporter",
    "opentelemetry.sdk._logs.export",
    "opentelemetry.sdk.metrics.export",
    "opentelemetry.sdk.trace",
    "matplotlib.pyplot",
    "matplotlib.backends.backend_agg",
    "matplotlib.backends.backend_pdf",
    "fontTools.subset",
    "pyarrow.dataset",
    "pyarrow.parquet",
    "hydra._internal.core_plugins.basic_launcher",
    "hydra._internal.core_plugins.basic_sweeper",
    "hydra._internal.core_plugins.importlib_resources_config_source",
    "hydra_plugins.hydra_ray_launcher.ray_launcher",
    "hydra_plugins.lade_bench_launchers.launchers",
    "lade_bench.runner.config_schema",
    "lade_bench.runner.job",
    "lade_bench.runner.cell",
    "lade_bench.runner.arms",
    "lade_bench.runner.launch_plan",
    "lade_bench.runner.output_check",
    "lade_bench.decoding.lookahead.lookahead",
    "lade_bench.sandbox.judge",
)


def _import_the_cli() -> None:
    """Import what a run of the CLI imports, without running anything (no torch computation before a fork)."""
    for name in CLI_MODULES:
        importlib.import_module(name)


def _run_stage_in_this_child(stage: str, args: list[str], log: str) -> None:
    """In the forked child: own session, output to ``log``, patch ``stage``, run the CLI; never returns."""
    code = 1
    try:
        os.setsid()  # the stage's killpg then reaches this child and what it starts, never the parent
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        signal.alarm(STAGE_TIMEOUT_S)
        install(stage)
        sys.argv = ["lade_bench.run", *args]
        # As `python -m lade_bench.run` does it: Hydra finds conf/ relative to the module run as __main__.
        runpy.run_module("lade_bench.run", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_stage(stage: str, args: list[str], log: str) -> dict[str, Any]:
    """Run the CLI with ``args`` in a forked child killed at ``stage``; how the child ended."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _run_stage_in_this_child(stage, args, log)
    _, status = os.waitpid(pid, 0)
    try:  # whatever the child started and left behind (e.g. it was not killed at the stage)
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return {
        "stage": stage,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "exit_status": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
    }


def serve() -> None:
    """Answer each JSON request on stdin (one stage of the CLI) with how its child ended, until stdin closes."""
    _import_the_cli()
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(run_stage(request["stage"], request["args"], request["log"])), flush=True)


if __name__ == "__main__":
    serve()
