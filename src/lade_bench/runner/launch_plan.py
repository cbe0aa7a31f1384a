"""Hydra callback: record a multirun launch's planned cells before any job starts, check them after.

Registered in ``conf/config.yaml`` under ``hydra.callbacks``. Hydra calls
:meth:`RecordLaunchPlan.on_multirun_start` in the launching process (a login node for Slurm, the Ray
driver), before the launcher submits anything. It lists the jobs exactly as Hydra's basic sweeper
will (the sweep file's ``hydra.sweeper.params`` then the command line, expanded into their cartesian
product), composes each job's config for its readable cell name, sweep folder and cell identity
(``runner.plan.launch_identity``), and writes ``_plan/launch.json`` there
(``lade_bench.results.sweep_plan``). No model or dataset is loaded. Jobs with one identity are one
cell (a swept setting no arm of the cell reads, e.g. ``lookahead.window`` beside arms without
lookahead): the plan lists that cell once, with its jobs, and the launch says which swept setting
made the jobs that are one cell; the first job to reach it runs it, the others skip it.

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

from lade_bench.methods import get_method, is_registered, registered_methods
from lade_bench.results.progress import sweep_progress, unfinished_planned_cells
from lade_bench.results.sweep_plan import PlannedCell, job_key, planned_cells, read_launch, write_launch

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
            cells = planned_cells(read_launch(sweep_root) or {})
            for cell in cells:
                if len(cell.jobs) > 1:
                    log.info("%s", one_cell_message(cell))
            log.info("%d planned cell(s) (%d job(s)) recorded in %s", len(cells), len(sweep_jobs), sweep_root)

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

    from lade_bench.runner.plan import launch_identity, readable_cell_name

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
        record |= {"overrides": list(job_overrides), "arms": [str(arm) for arm in cfg.arms]}
        try:
            record["cell"] = launch_identity(cfg)
        except Exception as exc:  # noqa: BLE001 - a bad value: the job refuses it by name; here it is a cell of its own
            log.debug("job #%d has no cell identity: %s", num, exc)
        jobs.append((sweep_root, record))
    return jobs


def one_cell_message(cell: PlannedCell) -> str:
    """Why several jobs of a launch are ``cell``: each setting their overrides differ in, and what reads it.

    E.g. ``lookahead.window=1,3 is read by no arm of this cell (arms=[ar, pia]): 2 jobs are 1 cell, ...``.
    """
    settings = [dict(_setting(o) for o in job["overrides"]) for job in cell.jobs]
    keys = [key for key in dict.fromkeys(k for s in settings for k in s) if len({s.get(key) for s in settings}) > 1]
    arms = [str(arm) for arm in cell.jobs[0].get("arms") or ()]
    read = {section for arm in arms if is_registered(arm) for section in get_method(arm).sections}
    armed = {section for method in registered_methods() for section in method.sections}
    why = []
    for key in keys:
        values = ",".join(dict.fromkeys(str(s.get(key, "(unset)")) for s in settings))
        section = key.split(".")[0]
        if section in armed and section not in read:
            why.append(f"{key}={values} is read by no arm of this cell (arms=[{', '.join(arms)}])")
        else:
            why.append(f"{key}={values} is no part of a cell's id")
    reason = "; ".join(why) or "they have the same settings"
    nums = ", ".join(f"#{job['num']}" for job in cell.jobs)
    return (
        f"{reason}: {len(cell.jobs)} jobs are 1 cell, {cell.name} (jobs {nums}); it is planned once, "
        "run by the first job to reach it and skipped by the others"
    )


def _setting(override: str) -> tuple[str, str]:
    """(key, value) of one Hydra override (``+key=value``, ``~key`` and the like included)."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value
