"""The roofline of speculative decoding on a device: tokens per step against a step's relative cost.

Every method here is exact, so what a step feeds and accepts is the same on any device; what a step
costs is the device's (its profile). The roofline puts each method and group at

    x = the arm's predicted time per decode step / AR's predicted time per decode step
    y = the arm's tokens per decode step / AR's tokens per decode step (AR's is 1)

over the group's paired rows, the predicted times those of the step-cost model
(``stats.step_cost.predicted_times``: each decode step's forward time on the cell's own device profile
plus the row's measured time outside the forwards). A decode step is a forward after the prefill, as
the leaderboard's Accepted/step counts it. Since an arm's output equals AR's, both emit the same
tokens after the prefill, and ``y / x`` is exactly the model's predicted speedup (summed predicted AR
time over the arm's): the iso-speedup lines ``y = s * x`` are exact. The measured speedup beside it
is the leaderboard's estimator and interval (``stats.speedup_estimate`` on ``stats.pooled_units``).

Groups are Spec-Bench's category groups for Spec-Bench rows, the dataset otherwise, and "overall" per
model pools them. Only greedy rows whose cell has a matching profile are drawn.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from lade_bench import stats
from lade_bench.export.spec_bench_answers import split_settings
from lade_bench.methods import method_color
from lade_bench.report.conditions import short_processor
from lade_bench.report.figures import FigureOutput, _n_text, _titled, save_figure
from lade_bench.report.spec_bench_board import COLUMN_TITLES, DATASET, OVERALL, group_of_sample
from lade_bench.report.sweep import Sweep
from lade_bench.report.tables import PaperTable, fmt, fmt_speedup, write_table
from lade_bench.results.atomic import atomic_write_text
from lade_bench.stats.efficiency import mean_decode_step_accepted
from lade_bench.stats.step_cost import outside_forward_time, predicted_times, prediction_basis
from lade_bench.stats.units import ok_rows

logger = logging.getLogger(__name__)

NAME = "roofline"
# The iso-speedup lines drawn (speedup = tokens per step / relative step cost).
ISO_SPEEDUPS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
PREDICTED = "predicted_time_s"
# The columns of the full-precision CSV, in order.
CSV_COLUMNS = (
    "model", "arm", "label", "setting", "group", "n_units", "accepted_per_step", "relative_step_cost",
    "predicted_speedup", "measured_speedup", "measured_ci_low", "measured_ci_high", "measured_ci_note",
    "verdict", "arm_rows", "arm_rows_without_outside_time", "profile_processor", "profile_context_tokens",
    "kv_measured",
)  # fmt: skip
TABLE = PaperTable(
    NAME,
    "The roofline of speculative decoding on this device: per model, method and group, n = samples; "
    "Accepted/step = the arm's tokens per decode step (AR's is 1); Relative cost = the arm's predicted "
    "time per decode step over AR's, from each cell's own device profile (stats.step_cost: forward time "
    "at each step's width, plus the row's measured time outside the forwards); Predicted = Accepted/step "
    "/ Relative cost, the step-cost model's speedup; Measured = the leaderboard's speedup with its 95% "
    "paired bootstrap interval; Verdict = faster or slower where that interval excludes 1, else cannot "
    "tell (at this bootstrap seed); Outside time = whether the arm's rows recorded their time outside "
    "the forwards (drafting, retrieval, bookkeeping; wall - forward), else taken as 0 and the prediction "
    "leaves it out (AR's rows do not record it either); Profile = the processor of the cell's device "
    "profile and the context it measured (a one-context profile reads every step there); Overall = the "
    "groups pooled where one profile costs them all.",
    lambda sweep: roofline_table(roofline_records(sweep)),
)
CAPTION = (
    "Roofline of speculative decoding: tokens accepted per decode step against the step's predicted cost "
    "relative to AR's one-token step (each cell's own device profile), one point per method and group; "
    "the dashed lines are the step-cost model's iso-speedups (speedup = accepted / relative cost)."
)


@dataclass(frozen=True)
class RooflineResult:
    """What :func:`build_roofline` wrote: the table files, the figure and the records at full precision."""

    tables: list[Path]
    figure: FigureOutput
    shown: tuple[str, pd.DataFrame]
    records: pd.DataFrame


def _with_groups(rows: pd.DataFrame) -> pd.DataFrame:
    """Greedy rows with their entry setting and group (Spec-Bench's category group, else the dataset)."""
    rows = rows[~rows["do_sample"].astype(bool)]
    if rows.empty:
        return rows.assign(setting=pd.Series(dtype=object), group=pd.Series(dtype=object))
    groups = [
        group_of_sample(str(s)) if d == DATASET else str(d)
        for s, d in zip(rows["sample_id"], rows["dataset"], strict=True)
    ]
    return rows.assign(setting=split_settings(rows).fillna(""), group=groups)


def _predicted(sweep: Sweep, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` of the cells with a device profile, each with its step-cost prediction (on its cell's profile)."""
    frames = []
    for key, cell in rows.groupby(["sweep", "cell_id"], sort=False):
        stored = sweep.cell_profiles.get((str(key[0]), str(key[1])))
        if stored is None:
            continue
        cell = ok_rows(cell)  # a failed row pairs with nothing and may have no steps to cost
        try:
            predicted = predicted_times(cell, stored.profile)
        except (ValueError, TypeError) as why:
            # A step outside the profile's measured range (never extrapolated) or rows without step
            # counts: the cell has no prediction, and the rest of the report is still built.
            logger.warning("roofline: cell %s left out: %s", key[1], why)
            continue
        basis = prediction_basis([], stored.profile)
        frames.append(
            cell.assign(
                **{
                    PREDICTED: predicted,
                    "profile_processor": short_processor(str(stored.profile.get("processor") or "unrecorded")),
                    "profile_context_tokens": basis["context_tokens"],
                    "kv_measured": basis["kv_measured"],
                }
            )
        )
    return pd.concat(frames) if frames else rows.iloc[0:0]


def _decode_steps(rows: pd.DataFrame) -> int:
    """Forwards after the prefill (the steps the step-cost model sums over)."""
    return sum(len(steps) - 1 for steps in rows["step_tokens"])


def roofline_point(paired: pd.DataFrame, arm: str, intervals: stats.IntervalSettings) -> dict[str, Any]:
    """One method-and-group point from paired rows carrying their predicted times (``predicted_time_s``).

    ``relative_step_cost`` is the arm's predicted seconds per decode step over AR's on the same units,
    ``accepted_per_step`` the arm's tokens per decode step over AR's, and their ratio the predicted
    speedup (summed predicted AR time over the arm's); the measured speedup is the leaderboard's.
    """
    # AR, or the faster AR arm where the cells also time AR on the standard step path.
    baseline = stats.speedup_baseline(paired, False)
    arm_rows, ar_rows = paired[paired["arm"] == arm], paired[paired["arm"] == baseline]
    cost = (arm_rows[PREDICTED].sum() / _decode_steps(arm_rows)) / (ar_rows[PREDICTED].sum() / _decode_steps(ar_rows))
    accepted = mean_decode_step_accepted(arm_rows) / mean_decode_step_accepted(ar_rows)
    estimate = stats.speedup_estimate(paired, arm, sampled=False, baseline=baseline, intervals=intervals)
    # Rows that did not record their forward time have no measured outside-forward time (taken as zero).
    unmeasured = sum(outside_forward_time(row) is None for row in arm_rows.to_dict("records"))
    return {
        "n_units": estimate.n_units,
        "accepted_per_step": accepted,
        "relative_step_cost": cost,
        "predicted_speedup": accepted / cost,
        "measured_speedup": estimate.value,
        "measured_ci_low": estimate.low,
        "measured_ci_high": estimate.high,
        "measured_ci_note": estimate.note,
        "verdict": stats.speedup_verdict(estimate.low, estimate.high),
        "arm_rows": len(arm_rows),
        "arm_rows_without_outside_time": unmeasured,
    }


def roofline_records(sweep: Sweep, rows: pd.DataFrame | None = None) -> pd.DataFrame:
    """One record per (model, method, setting, group) of ``rows`` (default: the sweep's) that are greedy
    and whose cell has a device profile, then per (model, method, setting) overall (every group pooled,
    where there are several and one device profile costs them all); empty when none has a profile.

    Columns: :data:`CSV_COLUMNS`.
    """
    rows = _predicted(sweep, _with_groups(sweep.rows if rows is None else rows))
    if rows.empty:
        return pd.DataFrame(columns=list(CSV_COLUMNS))
    cells = {key: cell for key, cell in rows.groupby(["sweep", "cell_id"], sort=False)}
    records = []
    for (model, arm, setting), entry in rows[rows["arm"] != stats.BASELINE_ARM].groupby(
        ["model", "arm", "setting"], sort=True
    ):
        keys = list(entry.groupby(["sweep", "cell_id"], sort=True).groups)
        label = sweep.arm_label(str(arm), [(str(k[0]), str(k[1])) for k in keys])
        groups = sorted(set(entry["group"]), key=_group_order)
        # "Overall" pools groups costed on one profile only: cells timed on different CPU kinds are
        # never pooled into one speedup.
        one_profile = len({sweep.cell_profiles[(str(k[0]), str(k[1]))].path for k in keys}) == 1
        for group in [*groups, OVERALL] if len(groups) > 1 and one_profile else groups:
            chosen = [cells[k] if group == OVERALL else cells[k][cells[k]["group"] == group] for k in keys]
            paired = stats.pooled_units([c for c in chosen if len(c)])
            first = paired.iloc[0]
            records.append(
                {
                    "model": model,
                    "arm": arm,
                    "label": label,
                    "setting": setting,
                    "group": group,
                    **roofline_point(paired, str(arm), sweep.intervals),
                    "profile_processor": " / ".join(sorted(set(paired["profile_processor"]))),
                    "profile_context_tokens": int(first["profile_context_tokens"]),
                    "kv_measured": bool(first["kv_measured"]),
                }
            )
    return pd.DataFrame.from_records(records, columns=list(CSV_COLUMNS))


def _group_order(group: str) -> tuple[int, str]:
    """Spec-Bench's groups in its order, then datasets by name."""
    order = list(COLUMN_TITLES)
    return (order.index(group), group) if group in order else (len(order), group)


def group_title(group: str) -> str:
    """``"Math"`` for a Spec-Bench group, the dataset's name otherwise."""
    return COLUMN_TITLES.get(group, group)


def entry_title(rec: dict[str, Any]) -> str:
    """The configuration that ran, with its lookahead setting where the model ran several."""
    return f"{rec['label']} ({rec['setting']})" if rec["setting"] else str(rec["label"])


def roofline_table(records: pd.DataFrame) -> pd.DataFrame:
    """The display table: one row per record, numbers as the table prints them."""
    if records.empty:
        return pd.DataFrame()
    return pd.DataFrame(
        [
            {
                "Model": rec["model"],
                "Method": entry_title(rec),
                "Group": group_title(str(rec["group"])),
                "n": str(int(rec["n_units"])),
                "Accepted/step": fmt(rec["accepted_per_step"]),
                "Relative cost": fmt(rec["relative_step_cost"]),
                "Predicted": fmt(rec["predicted_speedup"]),
                "Measured (95% CI)": fmt_speedup(
                    rec["measured_speedup"], rec["measured_ci_low"], rec["measured_ci_high"], rec["measured_ci_note"]
                ),
                "Verdict": rec["verdict"],
                "Outside time": _outside_text(int(rec["arm_rows_without_outside_time"]), int(rec["arm_rows"])),
                "Profile": (
                    f"{rec['profile_processor']}: "
                    + (
                        f"KV grid (context {int(rec['profile_context_tokens'])})"
                        if rec["kv_measured"]
                        else f"one context, {int(rec['profile_context_tokens'])} tokens"
                    )
                ),
            }
            for rec in records.to_dict("records")
        ]
    )


# The axes' lower ends: AR's own point (1, 1) and every point of a slower-than-AR step stay in view.
X_MIN, Y_MIN = 0.8, 0.8
_TICKS = (1, 1.5, 2, 3, 4, 5, 7, 10, 15, 20, 30)


def _outside_text(unmeasured: int, rows: int) -> str:
    """Whether the arm's predicted time includes its measured time outside the forwards."""
    if unmeasured == 0:
        return "measured"
    return "not recorded: 0" if unmeasured == rows else f"not recorded in {unmeasured} of {rows} rows: 0"


# A marker per group, so that the groups of one method (one colour) are told apart.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">")


def draw_roofline(records: pd.DataFrame, context: str) -> Figure:
    """One panel per model: each method-and-group point at (relative step cost, tokens per step), the
    method's colour and the group's marker, with the iso-speedup lines labelled and n in the title."""
    points = records[records["group"] != OVERALL]
    models = list(dict.fromkeys(points["model"]))
    entries = list(dict.fromkeys(entry_title(rec) for rec in points.to_dict("records")))
    groups = sorted(set(points["group"]), key=_group_order)
    fig = Figure(figsize=(6.2 * len(models) + 2.6, 6.4), layout="constrained")
    axes = fig.subplots(1, len(models), squeeze=False, sharey=True)[0]
    x_max = 1.15 * max(1.5, float(points["relative_step_cost"].max()))
    y_max = 1.15 * max(2.0, float(points["accepted_per_step"].max()))
    colours = _entry_colours(points, entries)
    for ax, model in zip(axes, models, strict=True):
        part = points[points["model"] == model]
        # Log on both axes: every iso-speedup line y = s * x is a straight line of slope 1.
        xs = np.array([X_MIN, x_max])
        for speedup in ISO_SPEEDUPS:
            parity = speedup == 1.0
            ax.plot(xs, speedup * xs, color="0.3" if parity else "0.65", lw=1.1 if parity else 0.8,
                    ls="-" if parity else "--", zorder=1)  # fmt: skip
            _label_iso(ax, speedup, x_max, y_max)
        for rec in part.to_dict("records"):
            marker = _MARKERS[groups.index(rec["group"]) % len(_MARKERS)]
            ax.plot(
                rec["relative_step_cost"], rec["accepted_per_step"], marker,
                color=colours[entry_title(rec)], ms=7, mec="black", mew=0.4, zorder=3,
            )  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(X_MIN, x_max)
        ax.set_ylim(Y_MIN, y_max)
        _plain_ticks(ax.xaxis, X_MIN, x_max)
        _plain_ticks(ax.yaxis, Y_MIN, y_max)
        kinds = len(set(part["profile_processor"]))
        cpus = f", {kinds} CPU kinds (each cell on its own profile)" if kinds > 1 else ""
        ax.set_title(f"{model}\n{_n_text(part['n_units'])} per point, {len(part)} points{cpus}", fontsize=10)
        ax.set_xlabel("step cost relative to AR's one-token step (×)", fontsize=9)
        ax.grid(color="0.93", zorder=0)
        ax.tick_params(labelsize=8)
    axes[0].set_ylabel("tokens accepted per decode step", fontsize=9)
    method_handles = [
        Line2D([], [], ls="", marker="o", color=colours[e], mec="black", mew=0.4, label=e) for e in entries
    ]
    group_handles = [
        Line2D([], [], ls="", marker=_MARKERS[i % len(_MARKERS)], color="0.6", mec="black", mew=0.4,
               label=group_title(g))
        for i, g in enumerate(groups)
    ]  # fmt: skip
    fig.legend(handles=method_handles + group_handles, loc="outside right center", fontsize=8, frameon=False)
    n_note = "dashed: iso-speedup lines of the step-cost model (speedup = accepted / relative cost); solid: AR's speed"
    return _titled(fig, "Roofline of speculative decoding on this device (greedy)", context, n_note)


def _entry_colours(points: pd.DataFrame, entries: list[str]) -> dict[str, Any]:
    """Each entry's method colour; a method's second setting (lookahead's two) a lighter shade of it."""
    colours: dict[str, Any] = {}
    seen: dict[str, int] = {}
    arms = {entry_title(rec): str(rec["arm"]) for rec in points.to_dict("records")}
    for index, entry in enumerate(entries):
        arm = arms[entry]
        base = method_color(arm) or f"C{index % 10}"
        times = seen.get(arm, 0)
        seen[arm] = times + 1
        colours[entry] = base if times == 0 else _lighter(base)
    return colours


def _lighter(colour: Any) -> tuple[float, float, float]:
    """``colour`` mixed halfway with white."""
    from matplotlib.colors import to_rgb

    return tuple(0.5 + 0.5 * c for c in to_rgb(colour))  # type: ignore[return-value]


def _plain_ticks(axis: Any, low: float, high: float) -> None:
    """Ticks at plain numbers (1, 1.5, 2, 3, ...) inside ``[low, high]`` on a log axis, no minor labels."""
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    axis.set_major_locator(FixedLocator([t for t in _TICKS if low <= t <= high]))
    axis.set_major_formatter(lambda value, _: f"{value:g}")
    axis.set_minor_locator(NullLocator())
    axis.set_minor_formatter(NullFormatter())


def _label_iso(ax: Any, speedup: float, x_max: float, y_max: float) -> None:
    """The iso-line's label just inside where it leaves the panel (the top edge, else the right edge)."""
    y = 0.9 * y_max
    x = y / speedup
    if x > x_max:
        x, y = 0.97 * x_max, 0.97 * x_max * speedup
    ax.text(x, y, f"{speedup:g}×", fontsize=8, color="0.25", ha="right", va="center", zorder=2,
            bbox={"fc": "white", "ec": "none", "pad": 0.5})  # fmt: skip


def build_roofline(
    sweep: Sweep,
    tables_dir: str | os.PathLike[str],
    figures_dir: str | os.PathLike[str],
    rows: pd.DataFrame | None = None,
) -> RooflineResult | None:
    """Write ``roofline.csv`` (full precision), ``roofline.md``/``.tex`` and ``roofline.png``/``.pdf`` for
    ``rows`` of ``sweep`` (default: its Spec-Bench rows, what the report draws; ``scripts/roofline.py``
    passes others); None when there are none with a device profile."""
    spec_rows = sweep.rows[sweep.rows["dataset"] == DATASET] if rows is None else rows
    if spec_rows.empty:
        return None
    records = roofline_records(sweep, spec_rows)
    if records.empty:
        return None
    provenance = f"Computed from {len(spec_rows)} rows of sweep {sweep.label} and its device profiles"
    table = roofline_table(records)
    written = write_table(table, tables_dir, TABLE, provenance) or []
    csv = Path(tables_dir) / f"{NAME}.csv"
    atomic_write_text(csv, records.to_csv(index=False))
    png, pdf = save_figure(draw_roofline(records, sweep.context_line(spec_rows)), figures_dir, NAME)
    return RooflineResult([*written, csv], FigureOutput(NAME, CAPTION, png, pdf), (TABLE.caption, table), records)
