"""Text health in the report (issue 63): every table on the units whose AR output ends in no loop, and the
figure of accepted tokens per step against repetition, per method.

The measures are ``lade_bench.metrics.text_health``'s, recorded on every row since schema 12 and computed
from the stored output ids of older rows (``stats.with_text_health``, when the sweep is loaded).
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from scipy.stats import spearmanr

from lade_bench import stats
from lade_bench.methods import REFERENCE, STANDARD_PATH_REFERENCE, method_color
from lade_bench.report.figures import FigureOutput, FigureSkipped, _chars_across, _grid, _titled, _wrap, save_figure
from lade_bench.report.sweep import Sweep, sweep_from_rows

# Which units a report's every table and figure is computed on: all paired units, or only those whose AR
# output ends in no loop (``stats.loop_free_rows``; the same paired statistics on fewer units).
UNITS_ALL = "all"
UNITS_NO_LOOP = "no_loop"
UNITS: tuple[str, ...] = (UNITS_ALL, UNITS_NO_LOOP)
# What a report built on the no-loop units says about them (its UNITS.md): never a selection unsaid.
NO_LOOP_NOTE = (
    "# Units of this report: outputs without a loop\n\n"
    "Every table, figure and interval here is computed on the (sample, turn, repeat) keys whose AR output "
    "does not end in an exact repeating loop (lade_bench.metrics.text_health: >= 2 periods, >= 16 tokens), "
    "every method on the same keys: the split is by a property of AR's output, never of the method's own. "
    "Built with `python -m lade_bench.report ... --units no_loop`; the report on all units is built without "
    "it. See docs/statistics.md, 'Text health'.\n"
)

FIGURE = "accepted_vs_repetition"
CAPTION = (
    "Tokens accepted per decode step against the repeated-4-gram share of the same output, one point per "
    "output (row) of each method, crosses for outputs that end in an exact loop; Spearman's rank "
    "correlation per method (every cell of a method pooled)."
)
_NO_LOOP_MARKER, _LOOP_MARKER = "o", "x"
# AR (and AR on the standard step path) accepts one token per step: no panel of its own.
_REFERENCES = (REFERENCE, STANDARD_PATH_REFERENCE)


def check_units(units: str) -> None:
    """Refuse an unknown ``units`` in one line naming the allowed ones (before any sweep is loaded)."""
    if units not in UNITS:
        raise ValueError(f"text-health units {units!r} is not one of: {', '.join(UNITS)}")


def units_sweep(sweep: Sweep, units: str) -> Sweep:
    """``sweep`` itself (``all``), or the sweep of its rows at the keys whose AR output ends in no loop
    (``no_loop``): every summary, headline and table of it is then the split by text health, with the same
    paired estimators and intervals on the units kept."""
    check_units(units)
    if units == UNITS_ALL or sweep.rows.empty:
        return sweep
    return sweep_from_rows(
        stats.loop_free_rows(sweep.rows),
        roots=sweep.roots,
        cells=sweep.cells,
        profiles=sweep.profiles,
        index=sweep.index,
        intervals=sweep.intervals,
    )


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (NaN under 3 points or where one is constant)."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(spearmanr(x, y).statistic)


def method_rows(sweep: Sweep) -> pd.DataFrame:
    """The rows the repetition figure draws: every error-free method row (not AR's) recording both accepted
    tokens per decode step and a repeated-4-gram share, text health filled in for older rows."""
    rows = stats.with_text_health(sweep.rows) if len(sweep.rows) else sweep.rows
    if rows.empty or "mean_accepted" not in rows:
        return rows.iloc[0:0]
    keep = rows["error"].isna() & ~rows["arm"].isin(_REFERENCES)
    keep &= rows["mean_accepted"].notna() & rows["repeated_4gram_share"].notna()
    return rows.loc[keep]


def accepted_vs_repetition(sweep: Sweep) -> Figure:
    """One panel per method: each output's accepted tokens per decode step against its repeated-4-gram share.

    Raises:
        FigureSkipped: no method row records both (only AR, or rows without accepted counts).
    """
    rows = method_rows(sweep)
    if rows.empty:
        raise FigureSkipped("no method's rows record accepted tokens per step and an output of 4 tokens or more")
    arms = stats.sorted_arms(rows["arm"].unique())
    labels = sweep.arm_labels(rows)
    panel_w = 3.8
    fig, axes = _grid(len(arms), panel_w=panel_w, panel_h=3.3, max_cols=4)
    for ax, arm in zip(axes, arms, strict=True):
        part = rows[rows["arm"] == arm]
        x = part["repeated_4gram_share"].to_numpy(dtype=np.float64)
        y = part["mean_accepted"].to_numpy(dtype=np.float64)
        looped = part["loop_start"].notna().to_numpy()
        color = method_color(arm)
        ax.scatter(x[~looped], y[~looped], s=14, alpha=0.55, color=color, marker=_NO_LOOP_MARKER)
        ax.scatter(x[looped], y[looped], s=22, alpha=0.8, color=color, marker=_LOOP_MARKER)
        rho = spearman(x, y)
        rho_text = "n/a" if math.isnan(rho) else f"{rho:.2f}"
        # A configuration's label can be wider than its panel: wrapped, never cut at the figure's edge.
        label = _wrap(labels.get(arm, arm), _chars_across(panel_w, 9))
        ax.set_title(f"{label}\nSpearman {rho_text}, n={len(part)} outputs", fontsize=9)
        ax.set_xlim(-0.03, 1.03)
        # Headroom over the highest point, so no point sits on the frame.
        ax.set_ylim(0, 1.08 * float(np.nanmax(y)) if len(y) and np.isfinite(np.nanmax(y)) else None)
        ax.set_xlabel("share of its 4-grams that repeat an earlier one")
        ax.set_ylabel("accepted tokens / decode step")
        ax.grid(alpha=0.3)
    # One legend for the figure, below the panels: a legend inside a panel hid the points under it.
    markers = [
        Line2D([], [], color="dimgrey", marker=_NO_LOOP_MARKER, linestyle="none", label="output ends in no loop"),
        Line2D([], [], color="dimgrey", marker=_LOOP_MARKER, linestyle="none", label="output ends in a loop"),
    ]
    fig.legend(handles=markers, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    return _titled(
        fig,
        "Accepted tokens per step against repetition of the output",
        sweep.context_line(rows),
        "points: outputs (rows: sample, turn, repeat; every cell of the method pooled)",
    )


def build_text_health_figure(sweep: Sweep, out_dir: str | os.PathLike[str]) -> FigureOutput | FigureSkipped:
    """Draw and save :func:`accepted_vs_repetition`; the :class:`FigureSkipped` reason where it has no input."""
    try:
        fig = accepted_vs_repetition(sweep)
    except FigureSkipped as why:
        return why
    png, pdf = save_figure(fig, out_dir, FIGURE)
    return FigureOutput(name=FIGURE, caption=CAPTION, png=png, pdf=pdf, figure=fig)
