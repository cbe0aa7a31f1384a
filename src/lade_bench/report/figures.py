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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsInt, cast

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from lade_bench import stats
from lade_bench.methods import REFERENCE, method_color, method_label, registered_methods
from lade_bench.report import aggregate
from lade_bench.report.sweep import Sweep
from lade_bench.report.tune_figure import draw_tune_figure, load_record
from lade_bench.results.atomic import atomic_write

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
    """A figure written to disk."""

    name: str
    caption: str
    png: Path
    pdf: Path


def _titled(fig: Figure, title: str, context: str) -> Figure:
    fig.suptitle(f"{title}\n{context}", fontsize=10)
    return fig


def _grid(n_panels: int, panel_w: float = 4.4, panel_h: float = 3.6, max_cols: int = 3) -> tuple[Figure, list]:
    cols = min(max_cols, max(1, n_panels))
    rows = math.ceil(n_panels / cols)
    fig = Figure(figsize=(panel_w * cols, panel_h * rows + 0.9), layout="constrained")
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
    methods = summary[summary["arm"] != stats.BASELINE_ARM]
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


def speedup_heatmap_wg(sweep: Sweep) -> Figure:
    """Lookahead speedup over W x G, one panel per dataset (and N, model, sweep where they vary)."""
    data = _greedy_lookahead(sweep.summary)
    if data.empty:
        raise FigureSkipped("no greedy lookahead cells")
    # Prompt-as-reference changes what the pool holds, so on/off cells never share a panel; flat and
    # trie cells of one shape would fall on the same square.
    varying = _varying(data, _SPLIT_KEYS)
    panel_keys = [c for c in _SPLIT_KEYS if c in varying] + ["dataset", "ngram"]
    groups = list(data.groupby(panel_keys, sort=True))
    fig, axes = _grid(len(groups))
    finite = data["speedup"].dropna()
    low = min(float(finite.min()) if len(finite) else 1.0, 0.95)
    high = max(float(finite.max()) if len(finite) else 1.0, 1.05)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=low, vmax=high)
    image = None
    for ax, (key, panel) in zip(axes, groups, strict=True):
        grid = panel.pivot_table(index="guesses", columns="window", values="speedup", aggfunc="first")
        windows = [int(w) for w in grid.columns]
        guesses = [int(g) for g in grid.index]
        values = grid.to_numpy(dtype=float)
        image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu", norm=norm, origin="lower", aspect="auto")
        for i in range(len(guesses)):
            for j in range(len(windows)):
                if np.isfinite(values[i, j]):
                    ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(windows)), [str(w) for w in windows])
        ax.set_yticks(range(len(guesses)), [str(g) for g in guesses])
        ax.set_xlabel("window W (lookahead columns)")
        ax.set_ylabel("guesses G (n-grams verified / step)")
        ax.set_title(_panel_name(panel_keys, key), fontsize=9)
    assert image is not None  # data is not empty, so there is at least one panel
    fig.colorbar(image, ax=axes, label=SPEEDUP_LABEL, shrink=0.9)
    return _titled(fig, "Lookahead speedup over W × G (greedy; < 1 means slower than AR)", sweep.context_line())


def speedup_compression_vs_n(sweep: Sweep) -> Figure:
    """Speedup (with CI) and compression against N, one line per (dataset, W, G)."""
    data = _greedy_lookahead(sweep.summary)
    varying = _varying(data, _SPLIT_KEYS)
    series_keys = [c for c in _SPLIT_KEYS if c in varying] + [
        "dataset",
        "window",
        "guesses",
    ]
    series = [(k, s.sort_values("ngram")) for k, s in data.groupby(series_keys, sort=True) if s["ngram"].nunique() > 1]
    if not series:
        raise FigureSkipped("needs greedy lookahead cells at two or more values of N with the same W and G")
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax_speed, ax_comp = fig.subplots(1, 2)
    for key, s in series:
        label = _panel_name(series_keys, key)
        n = s["ngram"].astype(int).to_numpy()
        ax_speed.plot(n, s["speedup"], marker="o", label=label)
        _error_bars(ax_speed, n, s["speedup"], s["speedup_ci_low"], s["speedup_ci_high"])
        ax_comp.plot(n, s["compression_ratio"], marker="o", label=label)
    ax_speed.axhline(1.0, color="grey", lw=0.8, ls="--")
    for ax, ylabel in ((ax_speed, SPEEDUP_LABEL), (ax_comp, COMPRESSION_LABEL)):
        ax.set_xlabel("n-gram size N (tokens)")
        ax.set_ylabel(ylabel)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7)
    missing = missing_interval_note(pd.concat([s for _, s in series]))  # the plotted cells only
    ax_speed.set_title("speedup (95% CI)" + (f"\n{missing}" if missing else ""), fontsize=9)
    ax_comp.set_title("compression", fontsize=9)
    return _titled(fig, "Lookahead speedup and compression vs N (greedy)", sweep.context_line())


# Groups per row of the bar figure: a combined report (several sweeps and models) has a dozen groups or
# more, which on one axis made a figure tens of inches wide that no viewer can read.
BAR_GROUPS_PER_ROW = 4


def draw_speedup_bars(summary: pd.DataFrame, title: str, context: str) -> Figure:
    """Grouped bars: per (sweep, model, dataset) group, each arm's speedup with its 95% CI.

    Groups wrap into rows of :data:`BAR_GROUPS_PER_ROW`, all rows on the same speedup scale.

    Raises:
        FigureSkipped: ``summary`` is empty.
    """
    if summary.empty:
        raise FigureSkipped("no greedy cells")
    group_keys = [c for c in ("sweep", "model") if c in _varying(summary, ("sweep", "model"))] + ["dataset", "cell_id"]
    groups = list(summary.groupby(group_keys, sort=False))
    arms = aggregate.sorted_arms(summary["arm"].unique())
    chunks = [groups[i : i + BAR_GROUPS_PER_ROW] for i in range(0, len(groups), BAR_GROUPS_PER_ROW)]
    per_row = max(len(c) for c in chunks)
    fig = Figure(figsize=(max(5.0, 0.55 * per_row * len(arms) + 1.5), 4.4 * len(chunks)), layout="constrained")
    axes = fig.subplots(len(chunks), 1, sharey=True, squeeze=False)[:, 0]
    missing = missing_interval_note(summary)
    for row, (ax, chunk) in enumerate(zip(axes, chunks, strict=True)):
        _bars_panel(ax, chunk, arms, group_keys, per_row)
        ax.set_ylabel(speedup_axis_label(summary) + ", 95% CI")
        if row == len(chunks) - 1:
            ax.set_xlabel("dataset (lookahead configuration)" + (f"\n{missing}" if missing else ""))
        if row == 0:
            ax.legend(fontsize=8)
    return _titled(fig, title, context)


def _bars_panel(ax, groups: list, arms: list[str], group_keys: list[str], slots: int) -> None:
    """One row of the bar figure: ``groups`` side by side, each with one bar per arm that it has."""
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        xs, ys, lows, highs, notes = [], [], [], [], []
        for g, (_, group) in enumerate(groups):
            rec = group[group["arm"] == arm]
            if rec.empty:
                continue
            xs.append(g + (i - (len(arms) - 1) / 2) * width)
            ys.append(float(rec["speedup"].iloc[0]))
            lows.append(float(rec["speedup_ci_low"].iloc[0]))
            highs.append(float(rec["speedup_ci_high"].iloc[0]))
            notes.append("" if arm == stats.BASELINE_ARM else str(rec["speedup_ci_note"].iloc[0] or ""))
        bars = ax.bar(xs, np.nan_to_num(ys), width, color=method_color(arm), label=method_label(arm))
        _error_bars(ax, xs, ys, lows, highs)
        ax.bar_label(
            bars, labels=[_bar_text(y, note) for y, note in zip(ys, notes, strict=True)], fontsize=7, padding=2
        )
    ticks = []
    for key, group in groups:
        look = group[group["arm"] == "lookahead"]
        shape = ""
        if len(look):
            r = look.iloc[0]
            shape = f"\nN={int(r['ngram'])} W={int(r['window'])} G={int(r['guesses'])}"
        # One line per key: "sweep | model | dataset" on one line overran the neighbouring groups.
        ticks.append(_panel_name(group_keys[:-1], key[:-1]).replace(" | ", "\n") + shape)
    ax.set_xticks(range(len(groups)), ticks, fontsize=8)
    ax.set_xlim(-0.6, slots - 0.4)  # every row on the same horizontal scale, short last row included
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")


def _bar_text(value: float, note: str) -> str:
    """A bar's label: its value, and "no CI" under it when there are too few samples for an interval."""
    text = f"{value:.2f}"
    return f"{text}\nno CI" if note.startswith("no interval") else text


def speedup_bars(sweep: Sweep) -> Figure:
    """Per-dataset speedup of every arm (lookahead, prompt lookup, ...) over AR, headline cells only."""
    return draw_speedup_bars(
        sweep.headline,
        "Speedup per dataset (greedy; per dataset the headline cell, never chosen on the samples shown)",
        sweep.context_line(),
    )


def draw_accept_histogram(rows: pd.DataFrame, title: str, context: str) -> Figure:
    """Fraction of forward passes per number of tokens they emitted, one panel per non-AR arm.

    Raises:
        FigureSkipped: ``rows`` has no error-free non-AR rows.
    """
    data = stats.ok_rows(rows[rows["arm"] != stats.BASELINE_ARM])
    if data.empty:
        raise FigureSkipped("no non-AR rows")
    arms = aggregate.sorted_arms(data["arm"].unique())
    fig, axes = _grid(len(arms), panel_w=5.0)
    for ax, arm in zip(axes, arms, strict=True):
        arm_rows = data[data["arm"] == arm]
        series = [(str(name), group) for name, group in arm_rows.groupby("dataset", sort=True)]
        width = 0.8 / len(series)
        for i, (dataset, group) in enumerate(series):
            hist = stats.accept_histogram(group)
            lengths = np.array(list(hist), dtype=int)
            counts = np.array(list(hist.values()), dtype=float)
            mean = float((lengths * counts).sum() / counts.sum())
            offset = (i - (len(series) - 1) / 2) * width
            ax.bar(lengths + offset, counts / counts.sum(), width, label=f"{dataset} (mean {mean:.2f})")
        ax.set_xlabel("tokens emitted per forward pass (prefill included)")
        ax.set_ylabel("fraction of forward passes")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(method_label(arm), fontsize=9)
        ax.legend(fontsize=7)
    return _titled(fig, title, context)


def accept_length_histogram(sweep: Sweep) -> Figure:
    """Accepted tokens per step of each method, pooled over the headline cells' reported samples."""
    if sweep.headline_choice.empty:
        raise FigureSkipped("no greedy cells")
    rows = stats.headline_rows(sweep.rows, sweep.headline_choice)
    return draw_accept_histogram(rows, "Tokens accepted per forward pass (greedy headline cells)", sweep.context_line())


def rouge_parity(sweep: Sweep) -> Figure:
    """Mean ROUGE-1/2/L (x100, bootstrap CI) of AR and each method, per sampling cell."""
    sampled = sweep.summary[sweep.summary["do_sample"].astype(bool)]
    if sampled.empty:
        raise FigureSkipped("no sampling cells (do_sample=true)")
    sampled = sampled[sampled["rougeL"].notna()]
    if sampled.empty:
        raise FigureSkipped("the sampling cells have no ROUGE scores (not a summarisation dataset)")
    cells = list(sampled.groupby(list(stats.CELL_KEY), sort=False))
    fig, axes = _grid(len(cells), panel_w=5.0)
    metrics = ("rouge1", "rouge2", "rougeL")
    for ax, (key, cell) in zip(axes, cells, strict=True):
        notes: set[str] = set()
        cell_rows = sweep.rows[(sweep.rows["sweep"] == key[0]) & (sweep.rows["cell_id"] == key[1])]
        # Every arm on the same paired units, so a failed sample on one arm cannot shift the parity.
        paired = stats.common_rows(cell_rows)
        arms = aggregate.sorted_arms(cell["arm"].unique())
        width = 0.8 / len(arms)
        for i, arm in enumerate(arms):
            arm_rows = paired[paired["arm"] == arm]
            estimates = [
                stats.mean_estimate(stats.per_key_quality(arm_rows, m), intervals=sweep.intervals) for m in metrics
            ]
            notes.update(s.note for s in estimates if s.note)
            means = [100 * s.value for s in estimates]
            xs = np.arange(len(metrics)) + (i - (len(arms) - 1) / 2) * width
            ax.bar(xs, np.nan_to_num(means), width, color=method_color(arm), label=method_label(arm))
            _error_bars(ax, xs, means, [100 * s.low for s in estimates], [100 * s.high for s in estimates])
        rec = cell.iloc[0]
        ax.set_xticks(range(len(metrics)), ["ROUGE-1", "ROUGE-2", "ROUGE-L"])
        ax.set_ylabel("ROUGE F1 (×100, mean, 95% CI over samples)")
        ax.set_xlabel("metric" + (f"\n{'; '.join(sorted(notes))}: no error bars" if notes else ""))
        ax.set_title(
            f"{rec['dataset']} | T={rec['temperature']:g} top-p={rec['top_p']:g} top-k={int(rec['top_k'])}",
            fontsize=9,
        )
        ax.legend(fontsize=7)
    return _titled(fig, "ROUGE parity under sampling (same prompts and seeds per arm)", sweep.context_line())


def device_profile(sweep: Sweep) -> Figure:
    """Measured forward time vs tokens per pass per profile key, and predicted vs measured speedup per (N, W, G).

    Each lookahead cell is predicted from the profile of its own device kind, model, dtype and
    attention implementation; cells without one are counted in the right panel's title, not drawn.
    """
    if not sweep.profiles:
        raise FigureSkipped(
            "no device profile in the sweep folder(s) (device_profiles/, or a legacy device_profile.json); "
            "the runner measures one per model when device_profile.enabled=true"
        )
    predicted = aggregate.predicted_speedups(sweep.summary, sweep.cell_profiles)
    n_lookahead = int((sweep.summary["arm"] == "lookahead").sum()) if len(sweep.summary) else 0
    fig = Figure(figsize=(11, 4.4), layout="constrained")
    ax_curve, ax_pred = fig.subplots(1, 2)
    for stored in sweep.profiles:
        profile, label = stored.profile, stored.label()
        ks = np.asarray(profile["token_counts"], dtype=float)
        ms = 1000 * np.asarray(profile["forward_time_s"], dtype=float)
        (line,) = ax_curve.plot(ks, ms, marker=".", ls=":" if stored.legacy else "-", label=label)
        marks = predicted[predicted["profile"] == label]
        if len(marks):
            ax_curve.plot(marks["tokens_per_step"], 1000 * marks["tk_s"], "x", color=line.get_color(), ms=6)
    ax_curve.set_xscale("log", base=2)
    context_tokens = sorted({int(p.profile["context_tokens"]) for p in sweep.profiles})
    ax_curve.set_xlabel(f"new tokens per forward pass k (KV cache of {'/'.join(map(str, context_tokens))} tokens)")
    ax_curve.set_ylabel("forward time (ms, median)")
    ax_curve.set_title("forward time vs tokens per profile (× = a cell's tokens per step)", fontsize=9)
    ax_curve.legend(fontsize=6)
    if predicted.empty:
        ax_pred.text(0.5, 0.5, "no lookahead cells to predict", ha="center", va="center", transform=ax_pred.transAxes)
    else:
        ax_pred.scatter(predicted["predicted_speedup"], predicted["speedup"], color=method_color("lookahead"))
        several_datasets = predicted["dataset"].nunique() > 1
        for rec in predicted.to_dict("records"):
            label = f"N{int(rec['ngram'])}W{int(rec['window'])}G{int(rec['guesses'])}"
            label += "" if rec["prompt_as_reference"] else " noref"
            label += "" if rec["verification"] == "flat" else f" {rec['verification']}"
            label += " sampled" if rec["do_sample"] else ""
            label += f" {rec['dataset']}" if several_datasets else ""
            ax_pred.annotate(label, (rec["predicted_speedup"], rec["speedup"]), fontsize=6, xytext=(3, 3),
                             textcoords="offset points")  # fmt: skip
        both = np.concatenate([predicted["predicted_speedup"], predicted["speedup"]]).astype(float)
        both = both[np.isfinite(both)]
        lo, hi = (float(both.min()), float(both.max())) if both.size else (0.5, 1.5)
        lo, hi = min(lo, 1.0) * 0.9, max(hi, 1.0) * 1.1
        ax_pred.plot([lo, hi], [lo, hi], ls="--", color="grey", lw=0.8, label="measured = predicted")
        ax_pred.axhline(1.0, color="grey", lw=0.5)
        ax_pred.legend(fontsize=7)
    ax_pred.set_xlabel("predicted speedup: compression × t(1) / t((W+G)(N-1))  (×)")
    ax_pred.set_ylabel("measured speedup over AR (×; per token when sampled)")
    unmatched = n_lookahead - len(predicted)
    title = f"predicted (from the cell's own profile) vs measured, n={len(predicted)} cells"
    if unmatched > 0:
        title += f"\n{unmatched} lookahead cell(s) without a profile of their model: not predicted"
    ax_pred.set_title(title, fontsize=9)
    return _titled(fig, "Device profile: cost of a wider forward pass", sweep.context_line())


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
            "Lookahead speedup over AR across window W and guesses G (greedy, prompt as reference).",
            speedup_heatmap_wg,
        ),
        FigureSpec(
            "speedup_compression_vs_n",
            "Speedup (95% CI) and compression as the n-gram size N grows, at fixed W and G.",
            speedup_compression_vs_n,
        ),
        FigureSpec(
            "speedup_bars",
            "Per-dataset speedup over AR of lookahead, prompt lookup (and other arms) with 95% CIs.",
            speedup_bars,
        ),
        FigureSpec(
            "accept_length_histogram",
            "Tokens accepted per forward pass; the mean equals the compression ratio.",
            accept_length_histogram,
        ),
        FigureSpec(
            "rouge_parity",
            "ROUGE of AR vs lookahead under sampling: parity means lookahead keeps the output distribution.",
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
            "Measured forward time vs tokens per pass on this device, and the speedup it predicts per (N, W, G).",
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
        written.append(FigureOutput(name=name, caption=spec.caption, png=png, pdf=pdf))
    return written, skipped


TUNE_FIGURE = "tune_step_cost"
TUNE_CAPTION = (
    "Tuner (python -m lade_bench.tune): step cost on this device vs tokens accepted per step for every "
    "configuration searched, with iso-speedup lines; stars are the pre-declared top-k on held-out samples."
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
