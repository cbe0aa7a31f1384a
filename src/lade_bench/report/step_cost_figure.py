"""Predicted vs measured speedup of the step-cost check (``report.step_cost_check``), drawn.

x: the measured speedup over AR with its 95% paired interval (horizontal bars; none below the n rule);
y: the step-cost model's prediction from the cell's rows and its own device profile; the diagonal is a
perfect prediction. One marker and colour per method, its legend entry naming how many (cell, arm)
points it has; arms the model cannot describe are counted under the axes, not drawn.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lade_bench import stats
from lade_bench.methods import method_color, method_label

# One marker per method, so methods of similar colours stay apart in print.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h")


def draw_check_points(ax: Axes, check: pd.DataFrame) -> None:
    """The predicted (cell, arm) points of ``check`` on ``ax``: measured with its interval against predicted."""
    predicted = check[check["not_predicted"].fillna("") == ""]
    left_out = len(check) - len(predicted)
    unpriced = f"\n{left_out} arm(s) not drawn: the model cannot price them (see the step-cost check's reasons)"
    ax.set_xlabel("measured speedup over AR (×, 95% paired CI)" + (unpriced if left_out else ""), fontsize=9)
    ax.set_ylabel("predicted by the step-cost model (×)", fontsize=9)
    if predicted.empty:
        ax.text(0.5, 0.5, "no arm predicted here", ha="center", va="center", transform=ax.transAxes)
        return
    arms = stats.sorted_arms(predicted["arm"].unique())
    for i, arm in enumerate(arms):
        part = predicted[predicted["arm"] == arm]
        x, y = part["measured"].to_numpy(float), part["predicted"].to_numpy(float)
        low, high = part["ci_low"].to_numpy(float), part["ci_high"].to_numpy(float)
        has = np.isfinite(low) & np.isfinite(high)
        color = method_color(arm)
        ax.errorbar(x[has], y[has], xerr=[x[has] - low[has], high[has] - x[has]], fmt="none", ecolor=color,
                    elinewidth=0.6, alpha=0.5)  # fmt: skip
        ax.scatter(x, y, marker=_MARKERS[i % len(_MARKERS)], color=color, s=22, edgecolors="black", linewidths=0.3,
                   label=f"{method_label(arm)} (n={len(part)})", zorder=3)  # fmt: skip
    values = np.concatenate([predicted["measured"], predicted["predicted"], predicted["ci_low"], predicted["ci_high"]])
    values = values[np.isfinite(values.astype(float))].astype(float)
    lo, hi = min(float(values.min()), 1.0) * 0.9, max(float(values.max()), 1.0) * 1.05
    ax.plot([lo, hi], [lo, hi], ls="--", color="grey", lw=0.8, label="predicted = measured")
    ax.axhline(1.0, color="grey", lw=0.4)
    ax.axvline(1.0, color="grey", lw=0.4)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.legend(fontsize=7, loc="upper left", title="method (n = cells)", title_fontsize=7)


def draw_check_figure(check: pd.DataFrame) -> Figure:
    """One panel per model: every predicted (cell, arm) of ``check`` (all the sweeps it holds)."""
    models = sorted(str(m) for m in check["model"].unique())
    fig = Figure(figsize=(6.4 * len(models), 7.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(models)))
    for ax, model in zip(axes, models, strict=True):
        part = check[check["model"] == model]
        predicted = part[part["not_predicted"].fillna("") == ""]
        errors = (predicted["error"].abs() * 100).median() if len(predicted) else float("nan")
        units = predicted["n_units"].astype(int)
        span = f"{units.min()}–{units.max()}" if len(units) else "0"
        ax.set_title(
            f"{model}: n={len(predicted)} (cell, method) points over {predicted['sweep'].nunique()} sweeps\n"
            f"median |predicted / measured − 1| = {errors:.1f}%; samples per cell: {span}",
            fontsize=9,
        )
        draw_check_points(ax, part)
    fig.suptitle(
        "The step-cost model against every committed cell: predicted vs measured speedup over AR\n"
        "(each cell on its own device profile; greedy: wall time, sampling: time per token)",
        fontsize=10,
    )
    return fig
