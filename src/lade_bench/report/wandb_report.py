"""A W&B Report with the HTML report's panels, created through ``wandb-workspaces`` (online only).

Two steps, because a Report can only show what runs logged:

1. a ``report`` run in the sweep's group logs every sweep figure (``figures/<name>``, the same PNGs
   as the HTML report) and every paper table (``tables/<name>``);
2. a Report is saved whose panel grids select the sweep's group: a media browser per figure, a
   table panel per paper table, bar charts of the cells' ``lookahead/speedup`` and
   ``lookahead/compression_ratio`` summaries, and a run comparer of their configs.

Saving needs network and a logged-in account, so it is not exercised by the offline test suite;
:func:`build_wandb_report` (the pure part) is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import wandb
import wandb_workspaces.reports.v2 as wr

from lade_bench.report.build import ReportResult
from lade_bench.report.spec_bench_board import BOARD_TABLES
from lade_bench.report.tables import PAPER_TABLES
from lade_bench.report.wandb_sink import FIGURE_KEY_PREFIX, WandbSettings

if TYPE_CHECKING:
    from wandb_workspaces.reports.v2.interface import PanelTypes

TABLE_KEY_PREFIX = "tables/"
SUMMARY_BAR_METRICS: tuple[str, ...] = ("lookahead/speedup", "lookahead/compression_ratio", "lookahead/tokens_per_s")


def build_wandb_report(
    *,
    project: str,
    entity: str,
    group: str,
    figure_names: Sequence[str],
    table_names: Sequence[str],
    description: str = "",
) -> Any:
    """The ``wandb_workspaces`` Report object for a sweep group (not saved).

    Args:
        project, entity: where the runs live and the Report is saved.
        group: the sweep's W&B group (its runs, and its ``report`` run).
        figure_names: figure keys logged by the report run (without the ``figures/`` prefix).
        table_names: table keys logged by the report run (without the ``tables/`` prefix).
        description: shown under the title.
    """
    runset = wr.Runset(entity=entity, project=project, name=group, filters=f"Group = '{group}'")
    # Annotated as the panel union: PanelGrid.panels is a (invariant) list of it.
    figure_panels: list[PanelTypes] = [
        wr.MediaBrowser(title=name, media_keys=[f"{FIGURE_KEY_PREFIX}{name}"], layout=wr.Layout(w=24, h=12))
        for name in figure_names
    ]
    table_panels: list[PanelTypes] = [
        wr.WeavePanelSummaryTable(table_name=f"{TABLE_KEY_PREFIX}{name}", layout=wr.Layout(w=24, h=10))
        for name in table_names
    ]
    metric_panels = [wr.BarPlot(title=metric, metrics=[metric], orientation="h") for metric in SUMMARY_BAR_METRICS]
    return wr.Report(
        project=project,
        entity=entity,
        title=f"Lookahead decoding: {group}"[:128],
        description=description,
        blocks=[
            wr.H1(text=f"Sweep {group}"),
            wr.P(text=description or "Every number is recomputed from the per-sample rows of the sweep."),
            wr.H2(text="Figures"),
            wr.PanelGrid(runsets=[runset], panels=figure_panels),
            wr.H2(text="Tables"),
            wr.PanelGrid(runsets=[runset], panels=table_panels),
            wr.H2(text="Cells"),
            wr.PanelGrid(runsets=[runset], panels=[*metric_panels, wr.RunComparer(layout=wr.Layout(w=24, h=10))]),
        ],
    )


def publish_wandb_report(result: ReportResult, settings: WandbSettings) -> str:
    """Log the report's figures and tables to a ``report`` run, then save a W&B Report; returns its URL.

    Raises:
        ValueError: ``settings.mode`` is not ``online`` (a Report lives on the server).
    """
    if settings.mode != "online":
        raise ValueError(f"a W&B Report needs wandb.mode=online, got {settings.mode!r}")
    sweep = result.sweep
    group = sweep.label
    entity = settings.entity or wandb.Api().default_entity
    if entity is None:
        raise ValueError("no W&B entity: set wandb.entity or log in to W&B (a Report is saved under an entity)")
    run = wandb.init(
        project=settings.project,
        entity=entity,
        group=group,
        job_type="report",
        name=f"{group} | report",
        mode="online",
        dir=str(settings.dir or result.out_dir),
        reinit="create_new",
        settings=wandb.Settings(console="off"),
    )
    exit_code = 1
    try:
        payload: dict[str, Any] = {f"{FIGURE_KEY_PREFIX}{f.name}": wandb.Image(str(f.png)) for f in result.figures}
        for name in result.tables:
            table = {**PAPER_TABLES, **BOARD_TABLES}[name].build(sweep)
            payload[f"{TABLE_KEY_PREFIX}{name}"] = wandb.Table(dataframe=table)
        run.log(payload)
        exit_code = 0
    finally:
        run.finish(exit_code=exit_code)
    report = build_wandb_report(
        project=settings.project,
        entity=entity,
        group=group,
        figure_names=[f.name for f in result.figures],
        table_names=list(result.tables),
        description=sweep.context_line(),
    )
    report.save()
    return str(report.url)
