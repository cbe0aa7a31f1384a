"""Reporting: everything derived from the per-sample rows, never the other way round.

Modules, in data-flow order:

* ``sweep``: load sweep folder(s) (rows, cell side files, device profile) -> :class:`Sweep`.
* ``aggregate``: the report's side of the numbers (arm order and labels, W&B flattening) over
  ``lade_bench.stats``, which computes every number (paired units, speedup + CI, compression,
  quality, headline selection; ``docs/statistics.md`` states the rules); figures, tables, the HTML
  report, the W&B sink and the notebooks all call it.
* the device profiles (forward time vs tokens per pass, ``device_profiles/<key>.json`` per sweep and
  (device kind, model, dtype, attention)) are measured by ``lade_bench.profiling``; its functions
  are re-exported here for the report's callers.
* ``figures``: matplotlib figures (PNG + PDF), each skipped with a reason when its inputs are absent.
* ``step_cost_check`` / ``step_cost_page`` / ``step_cost_figure``: the step-cost model's predicted vs
  measured speedup of every (cell, arm), its Markdown page and figure (``step_cost_cli`` writes them).
* ``tables`` / ``table_format``: the paper tables as LaTeX and Markdown.
* ``html_report``: the self-contained HTML report; ``build``: all of the above for a sweep.
* ``wandb_sink``: one W&B run per cell (the runner's sink); ``wandb_report``: a W&B Report (online).
* ``notebook_runner``: execute the jupytext notebooks in ``notebooks/`` with parameters.

Command line: ``python -m lade_bench.report SWEEP_DIR [...] [--out DIR]`` (see ``cli``). W&B modules
are not imported here so that building a report does not import wandb.
"""

from lade_bench.profiling.device_profile import (
    load_profile,
    load_profiles,
    measure_forward_curve,
    record_device_profile,
    save_profile,
)
from lade_bench.report.aggregate import headline_summary, summarize
from lade_bench.report.build import ReportResult, build_report
from lade_bench.report.figures import FIGURES, FigureSkipped, build_figures
from lade_bench.report.sweep import Sweep, load_sweep
from lade_bench.report.tables import PAPER_TABLES, write_paper_table
from lade_bench.stats import choose_headline  # re-exported: part of the report's public API before stats existed

__all__ = [
    "FIGURES",
    "PAPER_TABLES",
    "FigureSkipped",
    "ReportResult",
    "Sweep",
    "build_figures",
    "build_report",
    "choose_headline",
    "headline_summary",
    "load_profile",
    "load_profiles",
    "load_sweep",
    "measure_forward_curve",
    "record_device_profile",
    "save_profile",
    "summarize",
    "write_paper_table",
]
