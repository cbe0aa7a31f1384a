"""Where a finished cell's results are handed on: the one place to plug in W&B, files or dashboards.

A sink is any callable ``sink(cell_config, summary, rows, cell_dir)``:

* ``cell_config``: the resolved job config as a plain dict (enums as strings) plus ``cell_id``;
* ``summary``: the cell summary as written to ``summary.json`` (``status: "done"``), or, for a cell
  that raised once its model was loaded, ``{"status": "failed", "error": ..., "cell_id": ...,
  "results_dir": ...}`` (a cell that failed before, e.g. on a model that cannot be had offline, is no
  sink's business: the index records the failure and the job's error names the fix);
* ``rows``: the cell's rows as a DataFrame (``lade_bench.results.load_rows``; empty if none);
* ``cell_dir``: the cell's folder (manifest, config, rows).

Sinks run after the rows and summary are safely on disk, so a failing sink never loses results, and
before the sweep index marks the cell done: a cell is done only once every sink has its output.

A sink that leaves files per cell (the W&B sink: a run and figures) also has
``is_complete(cell_dir) -> bool``. A rerun asks it and, when False, calls it again with the rows and
summary on disk (a kill may have cut it short); a cell whose durable sinks are all complete is
skipped. Sinks without ``is_complete`` (the console table) leave nothing to check: they are called
again only when a rerun completes a cell, never for a skipped one, nor on Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeGuard, cast

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from lade_bench.runner.console import console_summary_sink

Sink = Callable[[dict[str, Any], dict[str, Any], pd.DataFrame, Path], None]


class DurableSink(Protocol):
    """A sink that also says whether its per-cell output in ``cell_dir`` is complete."""

    def __call__(
        self, cell_config: dict[str, Any], attributes: dict[str, Any], rows: pd.DataFrame, cell_dir: Path, /
    ) -> None:
        """Take one finished (or failed) cell, as every sink does."""

    def is_complete(self, cell_dir: Path) -> bool:
        """True when the sink's output for the cell in ``cell_dir`` is all there."""


def is_durable(sink: Sink) -> TypeGuard[DurableSink]:
    """True for a sink that leaves per-cell files and can say whether they are complete."""
    return callable(getattr(sink, "is_complete", None))


def incomplete_sinks(sinks: Sequence[Sink], cell_dir: Path) -> list[Sink]:
    """The durable sinks whose output for the cell in ``cell_dir`` is missing or was cut short."""
    return [sink for sink in sinks if is_durable(sink) and not sink.is_complete(cell_dir)]


def default_sinks(cfg: DictConfig) -> list[Sink]:
    """The sinks a job hands each cell to: the console summary, then W&B unless disabled."""
    sinks: list[Sink] = [console_summary_sink]
    settings = cast(dict[str, Any], OmegaConf.to_container(cfg.wandb, resolve=True, enum_to_str=True))
    if settings["mode"] != "disabled":
        # Imported here: wandb is slow to import and unit runs with W&B disabled never need it.
        from lade_bench.report.wandb_sink import WandbSettings, WandbSink

        sinks.append(WandbSink(WandbSettings.from_config(settings)))
    return sinks
