"""The report's figures (matplotlib), drawn from ``aggregate`` output and saved as PNG and PDF.

Each figure is a function of a loaded :class:`~lade_bench.report.sweep.Sweep` that returns a
``matplotlib.figure.Figure`` or raises :class:`FigureSkipped` with the reason its inputs are absent
(e.g. no sampling cells: no ROUGE parity). Figures are built with the object API (``Figure()``), not
pyplot, so no global figure state or GUI backend is involved. Every figure names the model, the device
and the sweep in its title and labels its axes with units.
"""

from __future__ import annotations

import logging
import math
import os
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import SupportsInt, cast

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.colors import LogNorm, to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from lade_bench import stats
from lade_bench.methods import (
    REFERENCE,
    STANDARD_PATH_REFERENCE,
    method_color,
    method_label,
    method_state_text,
    registered_methods,
)
from lade_bench.methods.state import STATIC_STATE
from lade_bench.profiling.device_profile import StoredProfile, profile_measures_kv
from lade_bench.report import aggregate
from lade_bench.report.conditions import cell_processors, short_processor
from lade_bench.report.step_cost_check import check_sweep
from lade_bench.report.step_cost_figure import draw_check_points
from lade_bench.report.sweep import Sweep
from lade_bench.report.tune_figure import draw_tune_figure, load_record
from lade_bench.results.atomic import atomic_write
from lade_bench.results.sweep_layout import PROFILES_DIR

logger = logging.getLogger(__name__)

SPEEDUP_LABEL = "speedup over AR (×, wall time)"
PER_TOKEN_SPEEDUP_LABEL = "speedup over AR (×, time per token)"
COMPRESSION_LABEL = "compression (tokens / forward pass)"
DPI = 150


class FigureSkipped(Exception):
    """A figure's inputs are absent from the sweep; the message says which."""


@dataclass(frozen=True)
class FigureSpec:
    """One report figure: file stem, caption and drawing function."""

    name: str
    caption: str
    draw: Callable[[Sweep], Figure]


@dataclass(frozen=True)
class FigureOutput:
    """A figure written to disk, and the figure itself where the build kept it (``figure``: what was
    saved, for a caller that inspects the drawing, e.g. its layout, without drawing it again)."""

    name: str
    caption: str
    png: Path
    pdf: Path
    figure: Figure | None = field(default=None, compare=False, repr=False)


# Average glyph width as a fraction of the font size (DejaVu Sans), to wrap text to a known width.
_GLYPH_WIDTH = 0.6


# The arms a figure draws as the reference, never as a method: AR, and in a batch-invariant cell AR on the
# standard step path timed beside it (a timing reference whose outputs need not equal AR's, issue 68).
REFERENCE_ARMS: tuple[str, ...] = (REFERENCE, STANDARD_PATH_REFERENCE)


def _wrap(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken at `` | `` first, then between words."""
    lines: list[str] = []
    for part in text.split(" | "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " | " + part
        else:
            lines.extend(textwrap.wrap(part, width) or [""])
    return "\n".join(lines)


def _chars_across(width_in: float, fontsize: float) -> int:
    """How many characters of ``fontsize`` points fit across ``width_in`` inches (with a margin)."""
    return max(20, int(0.92 * width_in * 72 / (_GLYPH_WIDTH * fontsize)))


def _titled(fig: Figure, title: str, context: str, n_note: str = "") -> Figure:
    """Suptitle: the title, the provenance line and what n counts, wrapped to the figure's width.

    Wrapping matters: a provenance line naming several sweeps and models is wider than a one-panel
    figure, and a suptitle wider than its figure is cut off at both edges.
    """
    width = _chars_across(fig.get_figwidth(), 10)
    lines = [_wrap(title, width), _wrap(context, width)] + ([_wrap(n_note, width)] if n_note else [])
    fig.suptitle("\n".join(lines), fontsize=10)
    return fig


def _n_text(counts: Sequence[object] | pd.Series, what: str = "samples") -> str:
    """``"n=20 samples"``, or ``"n=18-20 samples"`` when the counts differ (empty counts: ``"n=0"``)."""
    values = sorted({int(cast(SupportsInt, c)) for c in counts if pd.notna(c)})
    if not values:
        return f"n=0 {what}"
    if values == [1]:
        return f"n=1 {what.removesuffix('s')}"
    span = str(values[0]) if len(values) == 1 else f"{values[0]}–{values[-1]}"
    return f"n={span} {what}"


def _arm_units(records: pd.DataFrame) -> pd.Series:
    """Samples behind a cell's comparison: the methods' ``n_units`` (the references' when they are alone)."""
    others = records[~records["arm"].isin(REFERENCE_ARMS)]
    return (others if len(others) else records)["n_units"]


def _grid(n_panels: int, panel_w: float = 4.4, panel_h: float = 3.6, max_cols: int = 3) -> tuple[Figure, list]:
    cols = min(max_cols, max(1, n_panels))
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(panel_w * cols, panel_h * rows + 1.1), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[n_panels:]:
        ax.set_visible(False)
    return fig, axes[:n_panels]


def _error_bars(
    ax,
    xs: Sequence[float] | np.ndarray,
    values: Sequence[float],
    lows: Sequence[float],
    highs: Sequence[float],
) -> None:
    """Draw asymmetric CI error bars only where the CI exists.

    A missing interval (too few samples) gets no bar at all: a zero-length bar with caps would read
    as a zero-width interval, the very thing the report must not suggest.
    """
    x, v = np.asarray(xs, dtype=float), np.asarray(values, dtype=float)
    low, high = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
    shown = np.isfinite(v) & np.isfinite(low) & np.isfinite(high)
    if not shown.any():
        return
    err = np.clip(np.vstack([v[shown] - low[shown], high[shown] - v[shown]]), 0.0, None)
    ax.errorbar(x[shown], v[shown], yerr=err, fmt="none", ecolor="black", elinewidth=1, capsize=3)


def speedup_axis_label(summary: pd.DataFrame) -> str:
    """Axis label naming what the speedups in ``summary`` are ratios of (both, if mixed)."""
    bases = set(summary["speedup_basis"].dropna())
    if bases == {stats.BASIS_PER_TOKEN}:
        return PER_TOKEN_SPEEDUP_LABEL
    if bases == {stats.BASIS_WALL_TIME} or not bases:
        return SPEEDUP_LABEL
    return "speedup over AR (×; wall time greedy, time per token sampled)"


def missing_interval_note(summary: pd.DataFrame) -> str:
    """A line saying why some error bars are absent (empty when every non-AR record has an interval)."""
    methods = summary[~summary["arm"].isin(REFERENCE_ARMS)]
    lacking = methods["speedup_ci_note"].fillna("").str.startswith("no interval")
    too_few = sorted({int(n) for n in methods.loc[lacking, "n_units"]})
    if not too_few:
        return ""
    units = ", ".join(str(n) for n in too_few)
    return f"no error bar where a cell has too few samples for an interval ({units} samples)"


def _greedy_lookahead(summary: pd.DataFrame) -> pd.DataFrame:
    return summary[(summary["arm"] == "lookahead") & ~summary["do_sample"].astype(bool)]


_SHAPE_NAMES = {"ngram": "N", "window": "W", "guesses": "G"}
# Cell attributes that split panels or series when they vary (named in the titles then).
_SPLIT_KEYS = ("sweep", "model", "prompt_as_reference", "verification")


def _panel_name(keys: Sequence[str], values: object) -> str:
    """``"toy | N=3"`` from group keys and a groupby key (names shown for shape parameters only)."""
    parts = values if isinstance(values, tuple) else (values,)

    def name(key: str, value: object) -> str:
        if key in _SHAPE_NAMES:
            # Shape parameters (N, W, G) are numeric columns.
            return f"{_SHAPE_NAMES[key]}={int(cast(SupportsInt, value))}"
        if key == "prompt_as_reference":
            return f"prompt ref {'on' if value else 'off'}"
        if key == "verification":
            return f"{value} verification"
        return str(value)

    return " | ".join(name(k, v) for k, v in zip(keys, parts, strict=True))


def _varying(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """Columns of ``frame`` with more than one value (worth naming in panel titles)."""
    return [c for c in columns if frame[c].nunique(dropna=False) > 1]


def _contrasting_text(rgba: Sequence[float]) -> str:
    """Black or white, whichever contrasts more with a cell of colour ``rgba`` (WCAG contrast ratio)."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = (linear(float(c)) for c in rgba[:3])
    luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue
    # Contrast ratios (L1 + 0.05) / (L2 + 0.05) against white (L = 1) and black (L = 0).
    return "white" if (1.05 / (luminance + 0.05)) > ((luminance + 0.05) / 0.05) else "black"


# Colour bar ticks of the heatmap: ratios that read at a glance, reciprocal pairs around 1.
_RATIO_TICKS = (0.125, 0.25, 0.5, 0.67, 1.0, 1.5, 2.0, 4.0, 8.0)


def _has_grid(panel: pd.DataFrame) -> bool:
    """Whether a panel's cells span at least two W and two G values.

    A 1 x 1 "grid" is a single number, and a strip (two W at one G, e.g. a main table's declared and
    tuned cells) is one comparison, which the paired contrast table gives with its interval; a colour
    scale over two squares says less than that.
    """
    return bool(panel["window"].nunique() > 1 and panel["guesses"].nunique() > 1)


def speedup_heatmap_wg(sweep: Sweep) -> Figure:
    """Lookahead speedup over W x G, one panel per (model, dataset, N) whose cells form a grid.

    Panels also split on sweep, prompt-as-reference and verification where these vary. Cells that
    do not span two W and two G at their (model, dataset, N) draw nothing: a 1 x 1 heatmap is a single
    number, which the bar figure shows with its interval, and a strip is one comparison, which the
    ``knob_contrasts`` table pairs.

    Raises:
        FigureSkipped: no greedy lookahead cells, or none of them has a neighbour in W or G.
    """
    data = _greedy_lookahead(sweep.summary)
    if data.empty:
        raise FigureSkipped("no greedy lookahead cells")
    # Prompt-as-reference changes what the pool holds, so on/off cells never share a panel; flat and
    # trie cells of one shape would fall on the same square; cells of two sweeps ran at different times.
    varying = _varying(data, ("sweep", "verification"))
    panel_keys = ["model", *varying, "dataset", "ngram", "prompt_as_reference"]
    groups = [(key, panel) for key, panel in data.groupby(panel_keys, sort=True) if _has_grid(panel)]
    if not groups:
        raise FigureSkipped(
            "no (model, dataset, N) has greedy lookahead cells at two or more values of both W and G "
            "(1 x 1 grids and strips are not drawn)"
        )
    panel_w = 4.2
    fig, axes = _grid(len(groups), panel_w=panel_w, panel_h=3.8)
    drawn = pd.concat([panel for _, panel in groups])
    finite = drawn["speedup"].dropna()
    # Logarithmic and symmetric around 1.0 (0.5x as red as 2x is blue): colour intensity means the
    # same factor on both sides of parity, and 1.0 is the white middle of the diverging map.
    spread = max(
        1.05,
        float(finite.max()) if len(finite) else 1.0,
        1.0 / float(finite.min()) if len(finite) and finite.min() > 0 else 1.0,
    )
    norm = LogNorm(vmin=1.0 / spread, vmax=spread)
    cmap = colormaps["RdBu"]
    image = None
    for ax, (key, panel) in zip(axes, groups, strict=True):
        grid = panel.pivot_table(index="guesses", columns="window", values="speedup", aggfunc="first")
        windows = [int(w) for w in grid.columns]
        guesses = [int(g) for g in grid.index]
        values = grid.to_numpy(dtype=float)
        ax.set_facecolor("0.9")  # an (N, W, G) the sweep did not run
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, norm=norm, origin="lower", aspect="auto")
        # Font sized so that "0.65" fills at most ~70% of the narrower side of a square.
        square_pt = min((panel_w - 1.3) * 72 / len(windows), 2.6 * 72 / len(guesses))
        fontsize = max(5.0, min(9.0, 0.7 * square_pt / (4 * _GLYPH_WIDTH)))
        for i in range(len(guesses)):
            for j in range(len(windows)):
                if np.isfinite(values[i, j]):
                    ax.text(
                        j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=fontsize,
                        color=_contrasting_text(cmap(norm(values[i, j]))),
                    )  # fmt: skip
                else:
                    # Said in words: the grey of an empty square is close to the near-white of parity.
                    ax.text(j, i, "not run", ha="center", va="center", fontsize=0.8 * fontsize, color="0.35")
        ax.set_xticks(range(len(windows)), [str(w) for w in windows])
        ax.set_yticks(range(len(guesses)), [str(g) for g in guesses])
        ax.set_xlabel("window W (lookahead columns)", fontsize=9)
        ax.set_ylabel("guesses G (n-grams verified / step)", fontsize=9)
        name = _wrap(_panel_name(panel_keys, key), _chars_across(panel_w - 0.6, 9))
        ax.set_title(f"{name}\n{_n_text(panel['n_units'])} per cell", fontsize=9)
    assert image is not None  # groups is not empty, so there is at least one panel
    # Two short lines: one long label is wider than a one-panel figure is tall, and is clipped.
    bar = fig.colorbar(image, ax=axes, shrink=0.9)
    bar.set_label(f"{SPEEDUP_LABEL}\n(1 = AR, log scale)", fontsize=8)
    ticks = [t for t in _RATIO_TICKS if 1.0 / spread <= t <= spread]
    bar.set_ticks(ticks, labels=[f"{t:g}" for t in ticks])
    bar.ax.minorticks_off()
    return _titled(
        fig,
        "Lookahead speedup over W × G (greedy; < 1 means slower than AR; red slower, blue faster)",
        sweep.context_line(drawn),
        "n = samples per cell, every arm on the same samples",
    )


def speedup_compression_vs_n(sweep: Sweep) -> Figure:
    """Speedup (with CI) and compression against N, one row of panels per model, one line per (dataset, W, G)."""
    data = _greedy_lookahead(sweep.summary)
    varying = _varying(data, ("sweep", "prompt_as_reference", "verification"))
    series_keys = [*varying, "dataset", "window", "guesses"]
    models = []
    for model, model_data in data.groupby("model", sort=True):
        grouped = model_data.groupby(series_keys, sort=True)
        series = [(k, s.sort_values("ngram")) for k, s in grouped if s["ngram"].nunique() > 1]
        if series:
            models.append((str(model), series))
    if not models:
        raise FigureSkipped("needs greedy lookahead cells at two or more values of N with the same W and G")
    fig = Figure(figsize=(10, 4.0 * len(models) + 1.0), layout="constrained")
    axes = fig.subplots(len(models), 2, squeeze=False)
    # Series names can be long (sweep | prompt ref | dataset | W | G): wrapped, in one legend per row.
    label_width = _chars_across(4.0, 7)
    title_width = _chars_across(4.6, 9)
    for (model, series), (ax_speed, ax_comp) in zip(models, axes, strict=True):
        for key, s in series:
            label = _wrap(f"{_panel_name(series_keys, key)} | {_n_text(s['n_units'])}", label_width)
            n = s["ngram"].astype(int).to_numpy()
            ax_speed.plot(n, s["speedup"], marker="o", label=label)
            _error_bars(ax_speed, n, s["speedup"], s["speedup_ci_low"], s["speedup_ci_high"])
            ax_comp.plot(n, s["compression_ratio"], marker="o")
        ax_speed.axhline(1.0, color="grey", lw=0.8, ls="--")
        for ax, ylabel in ((ax_speed, SPEEDUP_LABEL), (ax_comp, COMPRESSION_LABEL)):
            ax.set_xlabel("n-gram size N (tokens)")
            ax.set_ylabel(ylabel)
            ax.xaxis.get_major_locator().set_params(integer=True)
        ax_speed.legend(fontsize=7)
        missing = missing_interval_note(pd.concat([s for _, s in series]))  # the plotted cells only
        ax_speed.set_title(
            _wrap(f"{model} | speedup (95% CI)", title_width) + (f"\n{missing}" if missing else ""), fontsize=9
        )
        ax_comp.set_title(_wrap(f"{model} | compression (lines as on the left)", title_width), fontsize=9)
    return _titled(
        fig,
        "Lookahead speedup and compression vs N (greedy)",
        sweep.context_line(pd.concat([s for _, series in models for _, s in series])),
        "n = samples per point (legend)",
    )


# Bars per row of the bar figure: a model with many groups (several sweeps and datasets) wraps into
# rows of this many bars rather than making a figure tens of inches wide that no viewer can read.
BAR_SLOTS_PER_ROW = 24
# Height of one line of a size-8 legend entry, with its spacing, in inches.
_LEGEND_LINE_IN = 0.19
# Empty space between two groups of bars, in bar widths.
_GROUP_GAP = 0.8


@dataclass(frozen=True)
class _BarRow:
    """One row of the bar figure: some of one model's groups, each a (groupby key, records) pair."""

    model: str
    groups: list
    continued: bool

    def extent(self, arms: Sequence[str]) -> float:
        """Width of the row in bar slots, gaps between groups included."""
        bars = sum(len(_group_arms(group, arms)) for _, group in self.groups)
        return bars + _GROUP_GAP * (len(self.groups) - 1)


def _group_arms(group: pd.DataFrame, arms: Sequence[str]) -> list[str]:
    """The arms (in report order) that a group has a record of."""
    present = set(group["arm"])
    return [arm for arm in arms if arm in present]


def _bar_rows(summary: pd.DataFrame, group_keys: list[str], arms: Sequence[str]) -> list[_BarRow]:
    """One model per row (a model never shares a row), wrapping a model at :data:`BAR_SLOTS_PER_ROW` bars."""
    rows: list[_BarRow] = []
    for model, model_summary in summary.groupby("model", sort=True):
        chunk: list = []
        slots = 0
        for key, group in model_summary.groupby(group_keys, sort=False):
            width = len(_group_arms(group, arms))
            if chunk and slots + width > BAR_SLOTS_PER_ROW:
                rows.append(_BarRow(str(model), chunk, continued=any(r.model == str(model) for r in rows)))
                chunk, slots = [], 0
            chunk.append((key, group))
            slots += width
        if chunk:
            rows.append(_BarRow(str(model), chunk, continued=any(r.model == str(model) for r in rows)))
    return rows


def draw_speedup_bars(
    summary: pd.DataFrame,
    title: str,
    context: str,
    cpus: Mapping[tuple[str, str], str] | None = None,
    labels: Mapping[str, str] | None = None,
) -> Figure:
    """Grouped bars: per (sweep, dataset, cell) group, each arm's speedup with its 95% CI; one model per row.

    ``labels`` names each arm's configuration in the legend (``Sweep.arm_labels``); None: the plain label.

    A model with more than :data:`BAR_SLOTS_PER_ROW` bars continues on the next row (titled so); all
    rows share the speedup scale and the bar width. Each bar's value sits above its error bar, and
    each group's tick names the lookahead shape and n (samples, every arm on the same ones).

    Raises:
        FigureSkipped: ``summary`` is empty.
    """
    if summary.empty:
        raise FigureSkipped("no greedy cells")
    group_keys = [*_varying(summary, ("sweep",)), "dataset", "cell_id"]
    arms = aggregate.sorted_arms(summary["arm"].unique())
    rows = _bar_rows(summary, group_keys, arms)
    extent = max(row.extent(arms) for row in rows)
    # Cells timed on different CPU kinds are not comparable across groups: each tick then names its kind.
    shown_cpus = {(str(r["sweep"]), str(r["cell_id"])): (cpus or {}).get((str(r["sweep"]), str(r["cell_id"])), "")
                  for r in summary[["sweep", "cell_id"]].drop_duplicates().to_dict("records")}  # fmt: skip
    cpu_of = shown_cpus if len(set(shown_cpus.values())) > 1 else {}
    fig = Figure(figsize=(max(6.0, 0.42 * extent + 1.8), 3.9 * len(rows) + 1.4), layout="constrained")
    axes = fig.subplots(len(rows), 1, sharey=True, squeeze=False)[:, 0]
    tops = [1.0]
    for ax, row in zip(axes, rows, strict=True):
        tops.append(_bars_panel(ax, row.groups, arms, group_keys, cpu_of))
        ax.set_xlim(-0.8, extent - 0.2)  # every row on the same horizontal scale, short rows included
        ax.set_ylabel(speedup_axis_label(summary) + ", 95% CI", fontsize=9)
        ax.set_title(row.model + (" (continued)" if row.continued else ""), fontsize=10, loc="left")
    # Room above the highest label (value over error bar), the same on every row (shared y).
    axes[0].set_ylim(0.0, 1.18 * max(t for t in tops if np.isfinite(t)))
    missing = missing_interval_note(summary)
    what = "dataset (lookahead configuration; n = samples" + ("; CPU kind that timed the cell)" if cpu_of else ")")
    axes[-1].set_xlabel(what + (f"\n{missing}" if missing else ""))
    handles = [
        Patch(color=method_color(arm), label=_legend_label(summary, arm, (labels or {}).get(arm))) for arm in arms
    ]
    # One row where the entries fit across the figure; else as many columns as fit (a configuration's
    # label is long), each as wide as the widest entry's line plus its patch.
    widths = [max(len(line) for line in str(h.get_label()).splitlines()) + 5 for h in handles]
    across = _chars_across(float(fig.get_figwidth()), 8)
    ncols = len(arms) if sum(widths) <= across else max(1, min(len(arms), across // max(widths)))
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, fontsize=8, frameon=False)
    # The legend's own height on top of the panels': at a fixed height the layout squeezed it past the
    # figure's lower edge (the Spec-Bench bars' last entry was cut).
    lines = max(str(h.get_label()).count("\n") + 1 for h in handles)
    fig.set_figheight(fig.get_figheight() + math.ceil(len(handles) / ncols) * lines * _LEGEND_LINE_IN)
    return _titled(fig, title, context, "n = samples per group, every arm on the same samples (paired)")


def _legend_label(summary: pd.DataFrame, arm: str, label: str | None = None) -> str:
    """The arm's label (``label``, else the method's); for a method that learns across requests, how warm
    its state ran in these bars (the fewest and most earlier requests it had seen: 0-0 or a few per
    sample is cold)."""
    label = label or method_label(arm)
    if "state_requests_max" not in summary:
        return label
    mine = summary[summary["arm"] == arm]
    low = pd.to_numeric(mine["state_requests_min"], errors="coerce").min()
    high = pd.to_numeric(mine["state_requests_max"], errors="coerce").max()
    if not (np.isfinite(low) and np.isfinite(high)):
        return label
    state = method_state_text(arm, None, low, high)
    if state == STATIC_STATE:  # nothing learnt from the earlier requests it counts
        return f"{label}\n(static state)"
    return f"{label}\n(state saw {int(low)}-{int(high)} earlier requests)"


def _bars_panel(
    ax, groups: list, arms: Sequence[str], group_keys: list[str], cpu_of: Mapping[tuple[str, str], str]
) -> float:
    """One row of the bar figure: ``groups`` side by side, each with one bar per arm that it has.

    Returns:
        The highest point drawn (bar top or error bar top), for the shared y limit.
    """
    highest = 0.0
    ticks, centres = [], []
    x = 0.0
    placed: dict[str, tuple[list, list, list, list, list]] = {arm: ([], [], [], [], []) for arm in arms}
    for key, group in groups:
        present = _group_arms(group, arms)
        for arm in present:
            rec = group[group["arm"] == arm].iloc[0]
            xs, ys, lows, highs, notes = placed[arm]
            xs.append(x)
            ys.append(float(rec["speedup"]))
            lows.append(float(rec["speedup_ci_low"]))
            highs.append(float(rec["speedup_ci_high"]))
            notes.append("" if arm in REFERENCE_ARMS else str(rec["speedup_ci_note"] or ""))
            x += 1.0
        centres.append(x - 1.0 - (len(present) - 1) / 2)
        x += _GROUP_GAP
        look = group[group["arm"] == "lookahead"]
        shape = ""
        if len(look):
            r = look.iloc[0]
            shape = f"\nN={int(r['ngram'])} W={int(r['window'])} G={int(r['guesses'])}"
            shape += "" if bool(r["prompt_as_reference"]) else "\nprompt ref off"
        # One line per key: "sweep | dataset" on one line overran the neighbouring groups.
        name = _panel_name(group_keys[:-1], key[:-1]).replace(" | ", "\n")
        first = group.iloc[0]
        cpu = cpu_of.get((str(first["sweep"]), str(first["cell_id"])))
        ticks.append(
            f"{name}{shape}\n{_n_text(_arm_units(group), 'samples')}" + (f"\n{short_processor(cpu)}" if cpu else "")
        )
    for arm in arms:
        xs, ys, lows, highs, notes = placed[arm]
        if not xs:
            continue
        ax.bar(xs, np.nan_to_num(ys), 0.9, color=method_color(arm), label=method_label(arm))
        _error_bars(ax, xs, ys, lows, highs)
        for bx, y, high, note in zip(xs, ys, highs, notes, strict=True):
            # Above the error bar's cap, not inside it: a label under the cap is overprinted.
            top = max(y if np.isfinite(y) else 0.0, high if np.isfinite(high) else -math.inf)
            highest = max(highest, top)
            ax.annotate(
                _bar_text(y, note), (bx, top), xytext=(0, 3), textcoords="offset points",
                ha="center", va="bottom", fontsize=7,
            )  # fmt: skip
    ax.set_xticks(centres, ticks, fontsize=8)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    return highest


def _bar_text(value: float, note: str) -> str:
    """A bar's label: its value, and "no CI" over it when there are too few samples for an interval."""
    text = f"{value:.2f}" if np.isfinite(value) else "n/a"
    return f"no CI\n{text}" if note.startswith("no interval") else text


def speedup_bars(sweep: Sweep) -> Figure:
    """Per-dataset speedup of every arm (lookahead, prompt lookup, ...) over AR.

    Per (sweep, model, dataset, subset) the headline cell, on the samples it reports; where the sweep ran
    exactly one more greedy cell there (the main sweep's tuned preset beside the declared
    configuration, prompt as reference off beside on), that cell too, on all its samples. Grid sweeps
    (the ablations) keep their headline cell only: their own figures show every cell. A cell that ran
    part of a categorised dataset is named with its groups (``Sweep.dataset_text``).
    """
    if sweep.headline.empty:
        raise FigureSkipped("no greedy cells")
    greedy = sweep.summary[~sweep.summary["do_sample"].astype(bool)]
    greedy = greedy.assign(subset=_subsets_of(sweep, greedy))
    extra = []
    keys = ["sweep", "model", "dataset", "subset"]
    for (name, model, dataset, subset), head in sweep.headline.groupby(keys, sort=False):
        cells = greedy[
            (greedy["sweep"] == name)
            & (greedy["model"] == model)
            & (greedy["dataset"] == dataset)
            & (greedy["subset"] == subset)
        ]
        others = cells[~cells["cell_id"].isin(head["cell_id"])]
        if others["cell_id"].nunique() == 1:
            extra.append(others.drop(columns="subset"))
    # Each extra cell beside its headline cell (same sweep and dataset), not after all of them.
    shown = pd.concat([sweep.headline.drop(columns="subset"), *extra], ignore_index=True)
    shown = shown.assign(dataset=_subsets_of(sweep, shown, named=True))
    shown = shown.sort_values(["model", "sweep", "dataset"], kind="stable")
    return draw_speedup_bars(
        shown,
        "Speedup per dataset (greedy; the headline cell, never chosen on the samples shown, and the one "
        "other cell of a sweep that ran two, e.g. the tuned preset)",
        sweep.context_line(shown),
        cell_processors(sweep.cells),
        sweep.arm_labels(shown),
    )


def _subsets_of(sweep: Sweep, records: pd.DataFrame, *, named: bool = False) -> list[str]:
    """Per record (``sweep``, ``cell_id``, ``dataset``): the groups its cell ran of a categorised dataset
    ("" for the whole dataset), or with ``named`` the dataset as tables show it (``Sweep.dataset_text``)."""
    if named:
        return [sweep.dataset_text(rec) for rec in records[["sweep", "cell_id", "dataset"]].to_dict("records")]
    return [sweep.subsets.get((str(s), str(c)), "") for s, c in zip(records["sweep"], records["cell_id"], strict=True)]


def _shape_text(rec: pd.Series | dict) -> str:
    """``"N=5 W=7 G=7"`` of a cell record (lookahead's configuration in that cell)."""
    return f"N={int(rec['ngram'])} W={int(rec['window'])} G={int(rec['guesses'])}"


def draw_accept_histogram(
    rows: pd.DataFrame, title: str, context: str, labels: Mapping[str, str] | None = None
) -> Figure:
    """Fraction of forward passes per number of tokens they emitted: one panel per (model, cell), one series per arm.

    Never pooled across models, sweeps or cells: a pooled histogram's mean matches no reported
    compression ratio. Each legend entry names the arm, its mean (the cell's compression) and its
    n; the legend's title names the cell. Every panel has the same axes (the longest pass drawn and
    the fraction scale are the figure's, not the panel's), so panels compare by eye; each arm is a
    line of markers, one per length, which stays readable with seven arms where grouped bars were
    slivers.

    Raises:
        FigureSkipped: ``rows`` has no error-free rows of a method (AR and ar_standard are references).
    """
    # Each cell's paired rows (every arm on the same units), so that each mean is the compression
    # ratio the tables report for that cell and arm.
    paired = [stats.common_rows(cell) for _, cell in rows.groupby(list(stats.CELL_KEY), sort=False)]
    data = pd.concat(paired, ignore_index=True) if paired else rows.iloc[:0]
    data = data[~data["arm"].isin(REFERENCE_ARMS) & data["accept_lengths"].map(_has_lengths)]
    if data.empty:
        raise FigureSkipped("no rows of a method (only the AR references)")
    panels = list(data.groupby(["model", "sweep", "dataset", "cell_id"], sort=True))
    hists = [
        {arm: stats.accept_histogram(cell[cell["arm"] == arm]) for arm in aggregate.sorted_arms(cell["arm"].unique())}
        for _, cell in panels
    ]
    # One length axis for the figure: the longest cap any panel needs (passes past it pooled into one point).
    cap = max(_histogram_cap(panel) for panel in hists)
    several_sweeps = data["sweep"].nunique() > 1
    panel_w = 5.0
    fig, axes = _grid(len(panels), panel_w=panel_w, panel_h=4.6)
    tallest = 0.0
    pooled = any(length > cap for panel in hists for hist in panel.values() for length in hist)
    for ax, ((model, sweep_name, dataset, _), cell), panel in zip(axes, panels, hists, strict=True):
        arms = list(panel)
        for arm in arms:
            arm_rows = cell[cell["arm"] == arm]
            lengths = np.array(list(panel[arm]), dtype=int)
            counts = np.array(list(panel[arm].values()), dtype=float)
            mean = float((lengths * counts).sum() / counts.sum())  # over every pass, the tail included
            label = (
                f"{(labels or {}).get(arm) or method_label(arm)}: mean {mean:.2f}, "
                f"n={arm_rows['sample_id'].nunique()} samples "
                f"({len(arm_rows)} rows, {int(counts.sum())} passes)"
            )
            # A configuration's label makes an entry wider than the panel: wrapped to its width.
            label = _wrap(label, _chars_across(panel_w, 6.5))
            shown = np.minimum(lengths, cap + 1)
            folded = pd.Series(counts).groupby(shown).sum().sort_index()
            fractions = folded.to_numpy() / counts.sum()
            ax.plot(
                folded.index.to_numpy(), fractions, color=method_color(arm), marker="o", markersize=4,
                linewidth=1.2, label=label,
            )  # fmt: skip
            tallest = max(tallest, float(fractions.max()))
        ax.set_xlabel("tokens emitted per forward pass (prefill included; log scale)", fontsize=9)
        ax.set_ylabel("fraction of forward passes", fontsize=9)
        rec = cell.iloc[0]
        # The lookahead shape only in a cell that ran lookahead: in any other its columns are unused settings.
        shape = f" | {_shape_text(rec)}" if "lookahead" in arms else ""
        ref = "" if bool(rec["prompt_as_reference"]) or not shape else " | prompt ref off"
        name = " | ".join([str(model), *([str(sweep_name)] if several_sweeps else []), str(dataset)])
        name = _wrap(f"{name}{shape}{ref}", _chars_across(panel_w - 0.6, 9))
        ax.set_title(f"{name}\n{_n_text([cell['sample_id'].nunique()])} (paired)", fontsize=9)
        # Below the panel, not over it: a legend inside covered a third of the points.
        ax.legend(fontsize=6.5, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False,
                  title=f"cell: {dataset}{shape.replace(' |', ',')}", title_fontsize=6.5)  # fmt: skip
    # A log2 length axis: most passes emit 1-5 tokens, a few drafts' tails reach tens, and on a linear axis
    # shared by every panel the common lengths were squeezed into its first tenth.
    ticks = [t for t in (1, 2, 4, 8, 16, 32, 64, 128) if t <= cap and (not pooled or (cap + 1) / t >= 1.3)]
    for ax in axes[: len(panels)]:
        ax.set_xscale("log", base=2)
        ax.set_xlim(0.85, (cap + 1) * 1.15)
        ax.set_ylim(0.0, tallest * 1.12)
        ax.set_xticks(
            [*ticks, *([cap + 1] if pooled else [])], [str(t) for t in ticks] + ([f">{cap}"] if pooled else [])
        )
        ax.minorticks_off()
    return _titled(
        fig, title, context, "n = samples every arm of the cell completed; rows = (sample, turn, repeat) runs"
    )


def _histogram_cap(hists: Mapping[str, Mapping[int, int]], share: float = 0.98) -> int:
    """The longest pass a panel draws one bar for: the shortest length that covers ``share`` of the
    passes of every arm of the panel (at least 5).

    A few assisted rounds of 20-90 tokens would otherwise stretch the axis until the bars of the
    other arms are slivers; the passes beyond the cap are pooled into one bar past it.
    """
    caps = []
    for hist in hists.values():
        lengths = np.array(sorted(hist), dtype=int)
        counts = np.array([hist[k] for k in lengths], dtype=float)
        covered = np.cumsum(counts) / counts.sum()
        caps.append(int(lengths[np.searchsorted(covered, share)]))
    return max(5, *caps) if caps else 5


def _has_lengths(value: object) -> bool:
    """Whether a row's ``accept_lengths`` holds at least one step (arms without steps record none)."""
    return value is not None and len(cast(Sequence[int], value)) > 0


def accept_length_histogram(sweep: Sweep) -> Figure:
    """Accepted tokens per step of each method in each headline cell, on that cell's reported samples."""
    if sweep.headline_choice.empty:
        raise FigureSkipped("no greedy cells")
    rows = stats.headline_rows(sweep.rows, sweep.headline_choice)
    rows = rows.assign(dataset=_subsets_of(sweep, rows, named=True)) if len(rows) else rows
    return draw_accept_histogram(
        rows,
        "Tokens accepted per forward pass (greedy headline cells, one panel per cell)",
        sweep.context_line(rows),
        sweep.arm_labels(rows),
    )


ROUGE_METRICS: tuple[tuple[str, str], ...] = (("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeL", "ROUGE-L"))


def rouge_parity(sweep: Sweep) -> Figure:
    """Paired ROUGE difference (arm minus AR, x100, 95% CI over samples) of each method, per sampling cell.

    Each difference is ``stats.quality_delta`` on the cell's ``common_rows``: the arm and AR scored
    on the same prompts and seeds, differenced per sample, the interval resampling samples. The
    parity question is whether that difference is near 0, which two per-arm intervals cannot show.
    """
    sampled = sweep.summary[sweep.summary["do_sample"].astype(bool)]
    if sampled.empty:
        raise FigureSkipped("no sampling cells (do_sample=true)")
    sampled = sampled[sampled["rougeL"].notna()]
    if sampled.empty:
        raise FigureSkipped("the sampling cells have no ROUGE scores (not a summarisation dataset)")
    cells = [
        (key, cell)
        for key, cell in sampled.groupby(list(stats.CELL_KEY), sort=False)
        if (~cell["arm"].isin(REFERENCE_ARMS)).any() and (cell["arm"] == stats.BASELINE_ARM).any()
    ]
    if not cells:
        raise FigureSkipped("no sampling cell has both AR and another arm with ROUGE scores")
    cells.sort(key=lambda item: (str(item[1]["model"].iloc[0]), str(item[0][0]), str(item[1]["dataset"].iloc[0])))
    several_sweeps = sampled["sweep"].nunique() > 1
    panel_w = 5.2
    fig, axes = _grid(len(cells), panel_w=panel_w, panel_h=3.9)
    for ax, (key, cell) in zip(axes, cells, strict=True):
        notes: set[str] = set()
        units: list[int] = []
        cell_rows = sweep.rows[(sweep.rows["sweep"] == key[0]) & (sweep.rows["cell_id"] == key[1])]
        # Every arm on the same paired units, so a failed sample on one arm cannot shift the parity.
        paired = stats.common_rows(cell_rows)
        arms = [a for a in aggregate.sorted_arms(cell["arm"].unique()) if a not in REFERENCE_ARMS]
        width = 0.8 / len(arms)
        for i, arm in enumerate(arms):
            deltas = [stats.quality_delta(paired, arm, m, intervals=sweep.intervals) for m, _ in ROUGE_METRICS]
            notes.update(d.note for d in deltas if d.note)
            units.extend(d.n_units for d in deltas)
            values = [100 * d.value for d in deltas]
            xs = np.arange(len(ROUGE_METRICS)) + (i - (len(arms) - 1) / 2) * width
            ax.plot(
                xs,
                values,
                "o",
                color=method_color(arm),
                label=f"{sweep.arm_label(arm, [(str(key[0]), str(key[1]))])} − AR",
            )
            _error_bars(ax, xs, values, [100 * d.low for d in deltas], [100 * d.high for d in deltas])
            for x, v in zip(xs, values, strict=True):
                if np.isfinite(v):
                    ax.annotate(f"{v:+.1f}", (x, v), xytext=(5, 0), textcoords="offset points", fontsize=7,
                                va="center")  # fmt: skip
        ax.axhline(0.0, color=method_color(REFERENCE), lw=0.8, ls="--")
        base = cell[cell["arm"] == stats.BASELINE_ARM].iloc[0]
        # AR's own mean under each tick: a difference of 1 point reads differently at 2 and at 40.
        ax.set_xticks(range(len(ROUGE_METRICS)), [f"{label}\n(AR {100 * base[m]:.1f})" for m, label in ROUGE_METRICS])
        ax.set_xlim(-0.6, len(ROUGE_METRICS) - 0.4)
        ax.set_ylabel("paired Δ ROUGE F1 (arm − AR, ×100)\nmean, 95% CI over samples", fontsize=9)
        ax.set_xlabel("metric" + (f"\n{'; '.join(sorted(notes))}: no error bars" if notes else ""), fontsize=9)
        rec = cell.iloc[0]
        sweep_part = f"{rec['sweep']} | " if several_sweeps else ""
        name = _wrap(
            f"{rec['model']} | {sweep_part}{rec['dataset']} | T={rec['temperature']:g} top-p={rec['top_p']:g} "
            f"top-k={int(rec['top_k'])}",
            _chars_across(panel_w - 0.6, 9),
        )
        ax.set_title(f"{name}\n{_n_text(units, 'paired samples')}", fontsize=9)
        ax.legend(fontsize=7)
    return _titled(
        fig,
        "ROUGE parity under sampling: paired difference arm − AR (same prompts and seeds; 0 = parity)",
        sweep.context_line(pd.concat([cell for _, cell in cells])),
        "n = samples scored by both arms (the pairs each difference is over)",
    )


def device_profile(sweep: Sweep) -> Figure:
    """Per profile key (device kind, model, dtype, attention), one row: its forward time vs tokens per
    pass, and the step-cost model's predicted vs measured speedup of every arm of the cells it predicts.

    Each cell is predicted from the profile of its own key measured in its own sweep folder
    (``report.step_cost_check``: its arms' recorded steps priced on the profile, plus their measured
    outside-forward time), so a row holds one model; where several sweeps each measured a profile of one
    key, the row draws every measurement (one curve per sweep folder, which shows how well the curve
    reproduces) rather than one row each. Arms the model cannot describe (assisted, cells without a
    profile of their key) are counted under the axes and in the title, not drawn.
    """
    if not sweep.profiles:
        raise FigureSkipped(
            "no device profile in the sweep folder(s) (device_profiles/, or a legacy device_profile.json); "
            "the runner measures one per model when device_profile.enabled=true"
        )
    check = check_sweep(sweep)
    profile_of = {key: str(stored.path) for key, stored in sweep.cell_profiles.items()}
    keys = zip(check["sweep"].astype(str), check["cell_id"].astype(str), strict=True)
    files = pd.Series([profile_of.get(key, "") for key in keys], index=check.index, dtype=object)
    groups: dict[str, list[StoredProfile]] = {}
    for stored in sweep.profiles:
        groups.setdefault(stored.label(), []).append(stored)
    rows = len(groups)
    fig = Figure(figsize=(13, 1.2 + 5.4 * rows), layout="constrained")
    axes = np.asarray(fig.subplots(rows, 2, gridspec_kw={"width_ratios": [1.0, 1.1]})).reshape(rows, 2)
    for (ax_curve, ax_pred), (label, measured) in zip(axes, groups.items(), strict=True):
        _profile_curves(ax_curve, measured)
        draw_check_points(ax_pred, check[files.isin([str(stored.path) for stored in measured])])
        title = label if len(measured) == 1 else f"{label}; measured once in each of {len(measured)} sweep folders"
        ax_curve.set_title(textwrap.fill(title, 70), fontsize=8)
        ax_pred.set_title("step-cost model: predicted vs measured speedup, one point per (cell, method)", fontsize=8)
    unmatched = int((files == "").sum())
    note = f"predicted vs measured: n={int((files != '').sum())} (cell, method) pairs, each on its own sweep's profile"
    if unmatched > 0:
        note += f"; {unmatched} without a profile of their cell's key: not predicted"
    return _titled(
        fig, "Device profile: cost of a wider forward pass, and the speedups it predicts",
        sweep.context_line(check if len(check) else None),
        f"{note}; measured speedups over {_n_text(check['n_units'])} per cell",
    )  # fmt: skip


def _profile_sweep_name(stored: StoredProfile) -> str:
    """The sweep folder (or archive) a stored profile was measured in, from where it was read."""
    folder = stored.path.parent
    return folder.parent.name if folder.name == PROFILES_DIR else folder.name


def _profile_curves(ax: Axes, measured: Sequence[StoredProfile]) -> None:
    """Each measurement's median forward time against new tokens per pass (at its one context, or at the
    shortest and longest KV length of a grid)."""
    palette = colormaps["tab10"]
    for i, stored in enumerate(measured):
        profile = stored.profile
        colour = to_rgba(method_color("lookahead") or "C0") if len(measured) == 1 else palette(i % 10)
        ks = np.asarray(profile["token_counts"], dtype=float)
        where = f" ({_profile_sweep_name(stored)})" if len(measured) > 1 else ""
        curves = [("", np.asarray(profile["forward_time_s"], dtype=float), "-")]
        if profile_measures_kv(profile):
            grid, lengths = profile["forward_time_grid_s"], profile["kv_lengths"]
            curves = [
                (f", KV {int(lengths[j])}", np.asarray(grid[j], dtype=float), ls) for j, ls in ((0, "-"), (-1, "--"))
            ]
        for suffix, times, ls in curves:
            ax.plot(ks, 1000 * times, marker=".", ls=":" if stored.legacy else ls, color=colour,
                    label=f"median forward time{where}{suffix}")  # fmt: skip
    ax.set_xscale("log", base=2)
    context = sorted({int(stored.profile.get("context_tokens", 0)) for stored in measured})
    kv = (
        "KV grid"
        if any(profile_measures_kv(s.profile) for s in measured)
        else f"KV cache of {'/'.join(map(str, context))} tokens"
    )
    ax.set_xlabel(f"new tokens per forward pass k ({kv})")
    ax.set_ylabel("forward time (ms, median)")
    ax.legend(fontsize=7)


def cell_world_sizes(sweep: Sweep) -> dict[tuple[str, str], int]:
    """Ranks each cell ran on, from its manifest (1 for cells recorded before multi-device runs)."""
    sizes = {}
    for cell in sweep.cells:
        parallel = (cell.manifest or {}).get("parallel") or {}
        sizes[(str(cell.sweep), str(cell.cell_id))] = int(parallel.get("world_size") or 1)
    return sizes


# Vertical offsets (points) of the n= labels of successive lines, so that labels of close points do not overlap.
_ANNOTATION_OFFSETS = (4, -11)


def speedup_vs_devices(sweep: Sweep) -> Figure:
    """Speedup over single-device AR of lookahead parallelism, tensor- and pipeline-parallel AR vs devices.

    Each point is one cell: its lookahead (or ar_tp, ar_pp) arm against the AR arm of the same cell, which
    always runs on one device, paired per sample. Lookahead at 1 device is plain lookahead.

    Raises:
        FigureSkipped: no greedy cell ran on more than one device.
    """
    sizes = cell_world_sizes(sweep)
    summary = sweep.summary
    scaling = {m.name: m.scaling_label for m in registered_methods() if m.scaling_label is not None}
    greedy = summary[~summary["do_sample"].astype(bool) & summary["arm"].isin(list(scaling))]
    devices = [sizes.get((str(s), str(c)), 1) for s, c in zip(greedy["sweep"], greedy["cell_id"], strict=True)]
    frame = greedy.assign(devices=devices)
    if frame.empty or frame["devices"].max() <= 1:
        raise FigureSkipped("no greedy cell ran on more than one device (lookahead.devices > 1 under torchrun)")
    keys = [*_varying(frame, ("sweep",)), "model", "dataset", "ngram", "window", "guesses"]
    groups = list(frame.groupby(keys, sort=False))
    missing = missing_interval_note(frame)
    fig, axes = _grid(len(groups), panel_w=5.2, panel_h=4.0)
    for ax, (key, group) in zip(axes, groups, strict=True):
        for index, (arm, label) in enumerate(scaling.items()):
            offset = _ANNOTATION_OFFSETS[index % len(_ANNOTATION_OFFSETS)]
            rec = group[group["arm"] == arm].sort_values("devices")
            if rec.empty:
                continue
            xs, ys = rec["devices"].tolist(), rec["speedup"].tolist()
            ax.plot(xs, ys, marker="o", color=method_color(arm), label=label)
            _error_bars(ax, xs, ys, rec["speedup_ci_low"].tolist(), rec["speedup_ci_high"].tolist())
            for x, y, n in zip(xs, ys, rec["n_units"], strict=True):
                ax.annotate(f"n={int(n)}", (x, y), textcoords="offset points", xytext=(4, offset), fontsize=7)
        ax.axhline(1.0, color=method_color(REFERENCE), lw=0.8, ls="--", label="AR, 1 device")
        ax.set_xticks(sorted(group["devices"].unique()))
        ax.set_xlabel("devices (ranks)" + (f"\n{missing}" if missing else ""), fontsize=9)
        ax.set_ylabel(SPEEDUP_LABEL + ", 95% CI")
        ax.set_title(_panel_name(keys, key), fontsize=9)
        ax.legend(fontsize=7)
    return _titled(fig, "LP vs TP vs PP: speedup vs devices (greedy; n = samples)", sweep.context_line())


FIGURES: dict[str, FigureSpec] = {
    spec.name: spec
    for spec in (
        FigureSpec(
            "speedup_heatmap_wg",
            "Lookahead speedup over AR across window W and guesses G (greedy): one panel per model, dataset "
            "and N whose cells span two or more W or G values; n = samples per cell.",
            speedup_heatmap_wg,
        ),
        FigureSpec(
            "speedup_compression_vs_n",
            "Speedup (95% CI) and compression as the n-gram size N grows, at fixed W and G.",
            speedup_compression_vs_n,
        ),
        FigureSpec(
            "speedup_bars",
            "Per-dataset speedup over AR of lookahead, prompt lookup (and other arms) with 95% CIs, one model "
            "per row; n = samples per group.",
            speedup_bars,
        ),
        FigureSpec(
            "accept_length_histogram",
            "Tokens accepted per forward pass, one panel per model and headline cell (never pooled); each "
            "arm's mean equals its compression ratio in that cell.",
            accept_length_histogram,
        ),
        FigureSpec(
            "rouge_parity",
            "ROUGE under sampling as the paired difference arm minus AR (per sample, same prompts and seeds), "
            "with its 95% bootstrap CI over samples: an interval around 0 means the arm keeps AR's quality.",
            rouge_parity,
        ),
        FigureSpec(
            "speedup_vs_devices",
            "Speedup over one-device AR vs the number of devices: lookahead parallelism (LP) and "
            "tensor-parallel AR (TP), strong scaling on the same samples.",
            speedup_vs_devices,
        ),
        FigureSpec(
            "device_profile",
            "Measured forward time vs tokens per pass on this device, and the step-cost model's predicted vs "
            "measured speedup of every method of the cells it predicts.",
            device_profile,
        ),
    )
}


def save_figure(fig: Figure, out_dir: str | os.PathLike[str], name: str) -> tuple[Path, Path]:
    """Save ``fig`` as ``<out_dir>/<name>.png`` and ``.pdf`` with reproducible metadata.

    Each file is replaced atomically, so a kill mid-save leaves the old file (or none), never half
    an image.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png, pdf = out / f"{name}.png", out / f"{name}.pdf"
    # No software version or creation date in the files: regenerating unchanged figures must not
    # produce a diff in paper_figures/.
    atomic_write(png, lambda handle: fig.savefig(handle, format="png", dpi=DPI, metadata={"Software": None}))
    pdf_metadata = {"Creator": None, "Producer": None, "CreationDate": None}
    atomic_write(pdf, lambda handle: fig.savefig(handle, format="pdf", metadata=pdf_metadata))
    return png, pdf


def build_figures(
    sweep: Sweep, out_dir: str | os.PathLike[str], names: Sequence[str] | None = None
) -> tuple[list[FigureOutput], dict[str, str]]:
    """Draw and save every figure (or those in ``names``) whose inputs the sweep has.

    Returns:
        ``(written, skipped)``: the figures written, and ``{name: reason}`` for those skipped (each
        reason is also logged).
    """
    written: list[FigureOutput] = []
    skipped: dict[str, str] = {}
    for name in names or list(FIGURES):
        spec = FIGURES[name]
        try:
            fig = spec.draw(sweep)
        except FigureSkipped as why:
            skipped[name] = str(why)
            logger.info("figure %s skipped: %s", name, why)
            continue
        png, pdf = save_figure(fig, out_dir, name)
        written.append(FigureOutput(name=name, caption=spec.caption, png=png, pdf=pdf, figure=fig))
    return written, skipped


TUNE_FIGURE = "tune_step_cost"
TUNE_CAPTION = (
    "Tuner (python -m lade_bench.tune): step cost on this device vs tokens accepted per step for every "
    "configuration searched, with iso-speedup lines; stars are the pre-declared top-k (hollow, at their probe "
    "point, when a later validation run timed them: their held-out speedups and intervals are in the box)."
)


def build_tune_figure(sweep: Sweep, out_dir: str | os.PathLike[str]) -> FigureOutput | None:
    """The tuner's figure, when a sweep folder is a tune folder (holds ``tune_record.json``); else None.

    Not one of :data:`FIGURES`: an ordinary sweep has no tune, and its report should not list the
    figure as skipped.
    """
    records = [record for root in sweep.roots if (record := load_record(root)) is not None]
    if not records:
        return None
    if len(records) > 1:
        logger.info("%d tune records in the sweep folders; the tune figure shows the first", len(records))
    png, pdf = save_figure(draw_tune_figure(records[0]), out_dir, TUNE_FIGURE)
    return FigureOutput(name=TUNE_FIGURE, caption=TUNE_CAPTION, png=png, pdf=pdf)
