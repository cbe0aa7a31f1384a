"""Hydra callback: record a multirun launch's planned cells before any job starts (for the status).

Registered in ``conf/config.yaml`` under ``hydra.callbacks``. Hydra calls
:meth:`RecordLaunchPlan.on_multirun_start` in the launching process (a login node for Slurm, the Ray
driver), before the launcher submits anything. It lists the jobs exactly as Hydra's basic sweeper
will (the sweep file's ``hydra.sweeper.params`` then the command line, expanded into their cartesian
product), composes each job's config for its readable cell name and sweep folder, and writes
``_plan/launch.json`` there (``lade_bench.results.sweep_plan``). No model or dataset is loaded.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lade_bench.results.sweep_plan import job_key, write_launch

log = logging.getLogger(__name__)

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
