"""Where a finished cell's results are handed on: the one place to plug in W&B, files or dashboards.

A sink is any callable ``sink(cell_config, summary, rows, cell_dir)``:

* ``cell_config``: the resolved job config as a plain dict (enums as strings) plus ``cell_id``;
* ``summary``: the cell summary as written to ``summary.json`` (``status: "done"``), or, for a cell
  that raised, ``{"status": "failed", "error": ..., "cell_id": ..., "results_dir": ...}``;
* ``rows``: the cell's rows as a DataFrame (``lade_bench.results.load_rows``; empty if none);
* ``cell_dir``: the cell's folder (manifest, config, rows).

Sinks run after the rows and summary are safely on disk, so a failing sink never loses results. They
are not called for cells skipped because an earlier run finished them, nor on Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from lade_bench.runner.console import console_summary_sink

Sink = Callable[[dict[str, Any], dict[str, Any], pd.DataFrame, Path], None]


def default_sinks(cfg: DictConfig) -> list[Sink]:
    """The sinks a job hands each cell to: the console summary, then W&B unless disabled."""
    sinks: list[Sink] = [console_summary_sink]
    settings = OmegaConf.to_container(cfg.wandb, resolve=True, enum_to_str=True)
    if settings["mode"] != "disabled":
        # Imported here: wandb is slow to import and unit runs with W&B disabled never need it.
        from lade_bench.report.wandb_sink import WandbSettings, WandbSink

        sinks.append(WandbSink(WandbSettings.from_config(settings)))
    return sinks
