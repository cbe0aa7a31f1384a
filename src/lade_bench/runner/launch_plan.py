"""Hydra callback: record a multirun launch's planned cells before any job starts, check them after.

Registered in ``conf/config.yaml`` under ``hydra.callbacks``. Hydra calls
:meth:`RecordLaunchPlan.on_multirun_start` in the launching process (a login node for Slurm, the Ray
driver), before the launcher submits anything. It lists the jobs exactly as Hydra's basic sweeper
will (the sweep file's ``hydra.sweeper.params`` then the command line, expanded into their cartesian
product), composes each job's config for its readable cell name and sweep folder, and writes
``_plan/launch.json`` there (``lade_bench.results.sweep_plan``). No model or dataset is loaded.

:meth:`RecordLaunchPlan.on_multirun_end`, once every job has returned, makes the launch exit with
status 3 when a cell it planned is neither done nor run by a live job now (a job skipped a cell
whose owner then died, say): a sweep never ends "successfully" with work left undone.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lade_bench.results.progress import sweep_progress, unfinished_planned_cells
from lade_bench.results.sweep_plan import job_key, write_launch

log = logging.getLogger(__name__)

# Exit status of a launch that left planned cells undone (1: a job raised; 2: a config error).
INCOMPLETE_EXIT = 3

# The sweeper whose job list this callback can reproduce; other sweepers (Optuna, ...) choose their
# jobs as they go, so a launch with them records no plan (the status then lists started cells only).
_BASIC_SWEEPER = "hydra._internal.core_plugins.basic_sweeper.BasicSweeper"


class RecordLaunchPlan(Callback):
    """Writes ``<sweep>/_plan/launch.json`` at the start of every multirun with Hydra's basic sweeper."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """List the launch's jobs and record them in each sweep folder they write to."""
        if config.hydra.sweeper.get("_target_") != _BASIC_SWEEPER:
            log.info("sweeper %s: no launch plan recorded", config.hydra.sweeper.get("_target_"))
            return
        try:
            jobs = planned_jobs(config)
        except Exception as exc:  # the status is a convenience: never stop a launch for it
            log.warning("could not record the launch plan (the status will list started cells only): %s", exc)
            return
        by_sweep: dict[Path, list[dict[str, Any]]] = defaultdict(list)
        for sweep_root, job in jobs:
            by_sweep[sweep_root].append(job)
        for sweep_root, sweep_jobs in by_sweep.items():
            write_launch(sweep_root, sweep_jobs)
            log.info("%d planned cell(s) recorded in %s", len(sweep_jobs), sweep_root)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        """Exit with :data:`INCOMPLETE_EXIT` if a planned cell is neither done nor run by a live job."""
        if config.hydra.sweeper.get("_target_") != _BASIC_SWEEPER:
            return
        try:
            roots = sorted({root for root, _ in planned_jobs(config)})
        except Exception as exc:  # noqa: BLE001 - as at the start: no plan, nothing to check against
            log.warning("could not list the launch's planned cells to check them: %s", exc)
            return
        undone = []
        for root in roots:
            try:
                progress = sweep_progress(root)
            except FileNotFoundError:
                undone.append(f"{root}: no cell of this sweep was started")
                continue
            undone += [f"{root / cell.name} ({cell.state})" for cell in unfinished_planned_cells(progress)]
        if undone:
            log.error(
                "the launch ended with %d planned cell(s) neither done nor being run by a live job: %s. "
                "Rerun the same command to finish them (python -m lade_bench.status <sweep folder> shows where "
                "each stands)",
                len(undone),
                "; ".join(undone),
            )
            raise SystemExit(INCOMPLETE_EXIT)


def planned_jobs(config: DictConfig) -> list[tuple[Path, dict[str, Any]]]:
    """(sweep folder, job record) for every job the basic sweeper will launch, in its order."""
    from hydra import compose
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from lade_bench.runner.plan import readable_cell_name

    # As BasicSweeper.sweep builds them: the sweeper's params first, then the command line.
    params = [f"{key}={value}" for key, value in (config.hydra.sweeper.get("params") or {}).items()]
    arguments = [*params, *config.hydra.overrides.task]
    overrides = OverridesParser.create().parse_overrides(arguments)
    (batches,) = BasicSweeper.split_arguments(overrides, None)
    jobs = []
    for num, job_overrides in enumerate(batches):
        cfg = compose(config_name=config.hydra.job.config_name, overrides=list(job_overrides))
        sweep_root = Path(cfg.output_root).expanduser().resolve() / cfg.sweep_name
        record = {"num": num, "key": job_key(job_overrides), "name": readable_cell_name(cfg)}
        jobs.append((sweep_root, {**record, "overrides": list(job_overrides)}))
    return jobs
