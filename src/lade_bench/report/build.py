"""Build every figure, table and the HTML report of one or more sweeps, from their rows alone.

Output layout (``out_dir`` defaults to ``<first sweep>/report``; ``--out paper_figures`` writes the
committed reference figures)::

    <out_dir>/figures/<name>.png, <name>.pdf   one per figure whose inputs exist
    <out_dir>/tables/<name>.tex, <name>.md     the paper tables
    <out_dir>/tables/cells_summary.csv         every (cell, arm) at full precision
    <out_dir>/report.html                      self-contained report
    <out_dir>/UNITS.md                         only with units=no_loop: which units every number is on
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lade_bench import stats
from lade_bench.report.figures import FigureOutput, build_figures, build_tune_figure
from lade_bench.report.html_report import render_html, write_html
from lade_bench.report.roofline import NAME as NAME_ROOFLINE
from lade_bench.report.roofline import build_roofline
from lade_bench.report.spec_bench_board import build_board, read_external_answers
from lade_bench.report.sweep import Sweep, SweepPaths, as_paths, load_sweep
from lade_bench.report.tables import PAPER_TABLES, summary_display_table, write_paper_table
from lade_bench.report.text_health import FIGURE as FIGURE_TEXT_HEALTH
from lade_bench.report.text_health import (
    NO_LOOP_NOTE,
    UNITS_ALL,
    UNITS_NO_LOOP,
    build_text_health_figure,
    check_units,
    units_sweep,
)
from lade_bench.results.atomic import atomic_write_text

logger = logging.getLogger(__name__)

FIGURES_DIR = "figures"
TABLES_DIR = "tables"
REPORT_HTML = "report.html"
SUMMARY_CSV = "cells_summary.csv"
UNITS_NOTE = "UNITS.md"


@dataclass
class ReportResult:
    """What :func:`build_report` wrote.

    Attributes:
        sweep: the loaded sweep.
        out_dir: the output folder.
        figures: figures written.
        skipped: ``{figure or table name: reason}`` for outputs whose inputs are absent.
        tables: ``{table name: [tex, md]}`` for the paper tables written.
        html: the HTML report, or None when not requested.
        board: the Spec-Bench leaderboard's numbers at full precision (``spec_bench_board.board_records``),
            empty without Spec-Bench rows or answer files.
    """

    sweep: Sweep
    out_dir: Path
    figures: list[FigureOutput] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    tables: dict[str, list[Path]] = field(default_factory=dict)
    html: Path | None = None
    board: pd.DataFrame = field(default_factory=pd.DataFrame)


def build_report(
    paths: SweepPaths,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    html: bool = True,
    n_boot: int = stats.N_BOOT,
    min_ci_units: int = stats.MIN_CI_UNITS,
    spec_bench_answers: Sequence[str | os.PathLike[str]] = (),
    spec_bench_questions: str | os.PathLike[str] | None = None,
    units: str = UNITS_ALL,
) -> ReportResult:
    """Load the sweep(s), then write figures, tables and (optionally) the HTML report.

    A figure or table whose inputs the sweep lacks is skipped with a logged reason, and a file of
    that name left by an earlier build is removed so the folder never shows a stale result.

    Args:
        paths: one sweep folder or several (reported together).
        out_dir: output folder; default ``<first sweep folder>/report``.
        html: also write ``report.html``.
        n_boot: bootstrap resamples of every CI.
        min_ci_units: fewest samples a CI is computed from (fewer: point estimate and the reason).
        spec_bench_answers: Spec-Bench answer files shown beside the sweep's Spec-Bench leaderboard,
            labelled external (the baseline's first, then the methods'); never paired with its rows.
        spec_bench_questions: Spec-Bench's question file, which every record of those files is checked
            against (needed with them).
        units: ``all`` paired units, or ``no_loop``: only the keys whose AR output ends in no loop
            (``report.text_health.units_sweep``), every table, figure and interval on those; default out
            folder ``<first sweep folder>/report-no_loop``, and ``UNITS.md`` there says so.

    Raises:
        ValueError: an unknown ``units`` (one line, before the sweep is loaded).
        AnswerFileError: an answer file that is malformed or does not fit the question file, or answer
            files without a question file (one line, before the sweep is loaded).
    """
    # A bad file or setting is refused before any work.
    check_units(units)
    external_answers = read_external_answers(spec_bench_answers, spec_bench_questions)
    sweep = units_sweep(load_sweep(paths, n_boot=n_boot, min_ci_units=min_ci_units), units)
    default_out = "report" if units == UNITS_ALL else f"report-{units}"
    out = Path(out_dir) if out_dir is not None else as_paths(paths)[0] / default_out
    figures_dir, tables_dir = out / FIGURES_DIR, out / TABLES_DIR
    figures, skipped = build_figures(sweep, figures_dir)
    # Accepted tokens per step against repetition (issue 63), beside the registered figures.
    health = build_text_health_figure(sweep, figures_dir)
    if isinstance(health, FigureOutput):
        figures.append(health)
    else:
        skipped[FIGURE_TEXT_HEALTH] = str(health)
    tune_figure = build_tune_figure(sweep, figures_dir)  # only a tune folder (python -m lade_bench.tune) has one
    if tune_figure is not None:
        figures.append(tune_figure)
    for name in skipped:
        _remove_stale(figures_dir, name, (".png", ".pdf"))
    result = ReportResult(sweep=sweep, out_dir=out, figures=figures, skipped=dict(skipped))
    html_tables = {}
    for name, spec in PAPER_TABLES.items():
        table, written = write_paper_table(name, sweep, tables_dir)
        if written is None:
            result.skipped[name] = "the sweep has no cells this table applies to"
            _remove_stale(tables_dir, name, (".tex", ".md"))
            continue
        result.tables[name] = written
        html_tables[name] = (spec.caption, table)
    # Only a sweep with Spec-Bench rows (or given answer files) has a leaderboard; others list nothing skipped.
    board = build_board(sweep, tables_dir, figures_dir, external_answers)
    if board is not None:
        result.figures.append(board.figure)
        result.tables.update(board.tables)
        html_tables.update(board.shown)
        result.board = board.records
    # The roofline of its methods (report.roofline), from the same Spec-Bench rows and the cells' device profiles.
    roofline = build_roofline(sweep, tables_dir, figures_dir)
    if roofline is not None:
        result.figures.append(roofline.figure)
        result.tables[NAME_ROOFLINE] = roofline.tables
        html_tables[NAME_ROOFLINE] = roofline.shown
    atomic_write_text(tables_dir / SUMMARY_CSV, sweep.summary.to_csv(index=False))
    if units == UNITS_NO_LOOP:
        atomic_write_text(out / UNITS_NOTE, NO_LOOP_NOTE)
    if html:
        page = render_html(
            sweep,
            result.figures,
            skipped,
            html_tables,
            summary_display_table(sweep.summary, sweep.record_label, sweep.dataset_text),
        )
        result.html = write_html(out / REPORT_HTML, page)
    return result


def _remove_stale(folder: Path, name: str, suffixes: tuple[str, ...]) -> None:
    for suffix in suffixes:
        path = folder / f"{name}{suffix}"
        if path.is_file():
            logger.info("removing stale %s (its inputs are no longer in the sweep)", path)
            path.unlink()
