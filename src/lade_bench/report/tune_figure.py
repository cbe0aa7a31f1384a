"""The tune figure: step cost vs accepted tokens per step, for every configuration, on the device's terms.

x: tokens accepted per forward pass (compression); y: what such a step costs on this device in AR
tokens, ``t(k) / tau``: k the configuration's mean input tokens per decode step, t the measured
forward-time curve, tau AR's measured wall time per token on the same samples (see
``lade_bench.tune.bound``). A configuration at (a, c) can reach at most ``a / c`` times AR's speed,
so the iso-speedup lines ``c = a / s`` split the plane: above the ``s = 1`` line lookahead cannot beat
AR on this device, whatever the implementation. The right axis reads the cost as input tokens per
step through the device's curve (at the probe's tau). Measured configurations are filled, those the
bound stopped while measuring are hollow, those pruned unmeasured sit at their bound's corner (x);
the held-out results of the top-k are stars numbered by search rank (their held-out speedups listed in a
box, since the top-k sit too close together for labels beside them), reference presets
(e.g. the paper's) hollow diamonds. A validation rerun (``search_from``: the held-out cells timed later,
maybe on another machine) cannot be placed on the search profile's step costs: its top-k are hollow stars at
the point where the search measured them, and every held-out number, the presets' included, is in the box
with its interval and what that interval lets one say (a probe point on the faster side of the 1x line is
not a held-out win).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from lade_bench.profiling.device_profile import step_cost

# The tune record the tuner writes in its folder (``tune.outputs.write_record``); the figure is drawn from it.
TUNE_RECORD = "tune_record.json"
ISO_SPEEDUPS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0)
VERIFICATION_COLORS = {"flat": "#1f77b4", "trie": "#d62728"}
# Behind a point's label, so the grid lines and hollow markers it crosses do not cut through its text.
_LABEL_BOX = {"boxstyle": "round,pad=0.12", "facecolor": "white", "edgecolor": "none", "alpha": 0.85}


def load_record(tune_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The tune record in ``tune_dir``, or None when the folder has none."""
    path = Path(tune_dir) / TUNE_RECORD
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def draw_tune_figure(record: Mapping[str, Any]) -> Figure:
    """Draw the figure from a tune record (``tune_record.json``, which embeds the device profile)."""
    profile = record["profile"]
    tau = record.get("search", {}).get("ar_time_per_token")  # None: costs in profiled one-token passes
    fig = Figure(figsize=(8.5, 5.6), layout="constrained")
    ax = fig.subplots()
    points_x: list[float] = []
    points_y: list[float] = []
    star_lines: list[str] = []
    for verification, color in VERIFICATION_COLORS.items():
        _plot_configs(ax, record, profile, tau, verification, color, points_x, points_y)
    # A validation rerun (``search_from``) timed the held-out cells later, maybe on another machine:
    # its speedups cannot be placed on the step costs of the profile the search measured, so the top-k
    # are starred where the search measured them and every held-out number goes into the box.
    rerun = bool(record.get("search_from"))
    probes = {conf["config"]: _probe_point(conf, profile) for conf in record.get("configurations", [])}
    reference_lines: list[str] = []
    for rec in record.get("heldout") or []:
        lookahead = rec["arms"].get("lookahead", {})
        speed = lookahead.get("speedup")
        result = heldout_text(lookahead)
        point = probes.get(rec["config"]) if rerun else _heldout_point(rec, profile)
        if rec.get("reference"):
            if rerun or point is None:
                reference_lines.append(f"{rec['reference']} ({rec['config']}): {result}")
                continue
            x, y = point
            points_x.append(x)
            points_y.append(y)
            ax.scatter([x], [y], marker="D", s=60, facecolors="none", edgecolors="black", zorder=5)
            text = f"{rec['reference']} ({rec['config']}): {speed:.2f}x held-out" if speed else rec["reference"]
            # Left of the diamond: the presets are the widest steps, so they sit at the right edge.
            ax.annotate(text, (x, y), fontsize=7, xytext=(-10, 6), textcoords="offset points", ha="right",
                        bbox=_LABEL_BOX)  # fmt: skip
            continue
        winner = rec.get("winner")
        rank = rec.get("rank_in_search", "?")
        fate = " - declared winner" if winner else " - not selected"
        probe = rec.get("probe_speedup")
        measured = f"probe {probe:.2f}x, " if probe else ""  # what the star's position shows when rerun
        star_lines.append(f"{rank}: {rec['config']}, {measured}{result}{fate}")
        if point is None:
            continue
        x, y = point
        points_x.append(x)
        points_y.append(y)
        # Hollow at a probe point: a filled star there read as the held-out result, on the faster side of
        # the 1x line while the held-out interval included 1.
        color = VERIFICATION_COLORS[rec["verification"]]
        ax.scatter([x], [y], marker="*", s=260 if winner else 150, facecolors="none" if rerun else color,
                   edgecolors=color if rerun else "black", linewidths=1.6 if winner else 1.0, zorder=5)  # fmt: skip
        # The top-k usually sit close together (they won the same search), so full labels beside the
        # stars would overprint one another: the stars carry their search rank, the box the details.
        ax.annotate(f"{rank}", (x, y), fontsize=8, fontweight="bold", xytext=(8, 6), textcoords="offset points",
                    zorder=6, bbox=_LABEL_BOX)  # fmt: skip
    x_max = max([1.5, *points_x]) * 1.25  # room for the rank numbers and the 1x..3x line labels
    y_max = max([1.5, *points_y]) * 1.1
    xs = np.linspace(0, x_max, 50)
    for s in ISO_SPEEDUPS:
        ax.plot(xs, xs / s, color="black" if s == 1.0 else "grey", lw=1.0 if s == 1.0 else 0.6,
                ls="-" if s == 1.0 else "--", zorder=1)  # fmt: skip
        x_label = min(x_max * 0.95, y_max * 0.95 * s)
        ax.annotate(f"{s:g}x", (x_label, x_label / s), fontsize=7, color="dimgrey", xytext=(2, 2),
                    textcoords="offset points")  # fmt: skip
    ax.set_xlim(0, x_max)
    ax.set_ylim(0, y_max)
    ax.set_xlabel("tokens accepted per step (compression)")
    ax.set_ylabel("step cost on this device, t(k) / (AR time per token)" if tau else "step cost, t(k) / t(1)")
    _token_axis(ax, profile, tau)
    ax.legend(fontsize=7, loc="upper left")
    where = f" (hollow: where the {len(record.get('probe_sample_ids', []))}-sample probe put them):"
    box = ["stars, by search rank" + (where if rerun else ":"), *star_lines]
    if reference_lines:
        box += ["reference presets (not searched):", *reference_lines]
    if rerun:
        box.append("held-out: a later validation run, not on these step costs")
    if star_lines or reference_lines:
        ax.text(0.99, 0.02, "\n".join(box), transform=ax.transAxes, fontsize=7, ha="right", va="bottom",
                multialignment="left", bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9})  # fmt: skip
    search = record.get("search", {})
    heldout = f"{len(record.get('heldout_sample_ids', []))} held-out samples"
    title = (
        f"Tuning lookahead: {search.get('evaluated', '?')} configurations on {len(record.get('probe_sample_ids', []))} "
        f"probe samples;\nstars: top-{len(star_lines)} "
        + (f"at their probe point, their results on {heldout} in the box" if rerun else f"on {heldout}")
    )
    context = f"model: {record.get('model')} | device: {record.get('device')} | dataset: {record.get('dataset')}"
    fig.suptitle(f"{title}\n{context}; lines: speedup = tokens per step / step cost", fontsize=9)
    return fig


def heldout_text(lookahead: Mapping[str, Any]) -> str:
    """A held-out lookahead summary record as the box states it: speedup, 95% interval, n and what the
    interval lets one say (faster, slower, or that the data cannot tell, where it includes 1)."""
    speed = lookahead.get("speedup")
    if not speed:
        return "no held-out speedup"
    low, high = lookahead.get("speedup_ci_low"), lookahead.get("speedup_ci_high")
    n = f"n={lookahead.get('n_units')}"
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return f"{speed:.2f}x held-out ({n}, no interval)"
    verdict = "faster than AR" if low > 1.0 else "slower than AR" if high < 1.0 else "the data cannot tell"
    return f"{speed:.2f}x [{low:.2f}, {high:.2f}] held-out ({n}): {verdict}"


def _probe_point(conf: Mapping[str, Any], profile: Mapping[str, Any]) -> tuple[float, float] | None:
    """Where the search measured a configuration: (tokens per step, step cost at the probe's AR tau)."""
    probe = conf.get("probe") or {}
    a, k, tau = probe.get("accepted_per_step"), probe.get("mean_step_tokens"), probe.get("ar_time_per_token")
    if a is None or k is None or tau is None or not all(map(math.isfinite, (a, k, tau))):
        return None
    return a, step_cost(profile, k, tau)


def _heldout_point(rec: Mapping[str, Any], profile: Mapping[str, Any]) -> tuple[float, float] | None:
    """A held-out cell on the profile's step costs, at the held-out AR's own time per token."""
    x, k = rec.get("compression_ratio"), rec.get("mean_step_tokens")
    ar = rec["arms"].get("ar", {})
    if x is None or k is None or not ar.get("new_tokens"):
        return None
    return x, step_cost(profile, k, ar["wall_time_s"] / ar["new_tokens"])


def _plot_configs(ax, record, profile, tau, verification: str, color: str, xs: list, ys: list) -> None:
    measured: list[tuple[float, float]] = []
    stopped: list[tuple[float, float]] = []
    unmeasured: list[tuple[float, float]] = []
    for conf in record.get("configurations", []):
        if conf["verification"] != verification:
            continue
        probe = conf.get("probe") or {}
        a, k, own_tau = probe.get("accepted_per_step"), probe.get("mean_step_tokens"), probe.get("ar_time_per_token")
        if a is not None and k is not None and own_tau is not None and all(map(math.isfinite, (a, k, own_tau))):
            point = (a, step_cost(profile, k, own_tau))
            (stopped if conf["pruned"] else measured).append(point)
        elif conf["pruned"]:
            n, w = conf["ngram"], conf["window"]
            # The prior bound's corner: N tokens per step at the window plus one candidate.
            tokens = w * (n - 1) + (n - 1 if conf["guesses"] > 0 else 0)
            unmeasured.append((float(n) if conf["guesses"] > 0 else 1.0, step_cost(profile, max(tokens, 1), tau)))
    for points, kwargs in (
        (measured, {"color": color, "label": f"{verification}: measured on the probe"}),
        (stopped, {"facecolors": "none", "edgecolors": color, "label": f"{verification}: stopped by the bound"}),
        (
            unmeasured,
            {"color": color, "marker": "x", "alpha": 0.6, "label": f"{verification}: pruned unmeasured (bound)"},
        ),
    ):
        if points:
            px, py = zip(*points, strict=True)
            xs.extend(px)
            ys.extend(py)
            ax.scatter(px, py, s=28, zorder=3, **kwargs)


def _token_axis(ax, profile: Mapping[str, Any], tau: float | None) -> None:
    """A right-hand axis giving the step cost as input tokens per step, through the device's curve."""
    ks = np.asarray(profile["token_counts"], dtype=float)
    unit = tau if tau else float(np.interp(1, ks, profile["forward_time_s"]))
    costs = np.asarray(profile["forward_time_s"], dtype=float) / unit
    # Timing noise can make the measured curve dip; its running maximum is monotone, so invertible.
    costs = np.maximum.accumulate(costs)
    unique_costs, first = np.unique(costs, return_index=True)
    unique_ks = ks[first]

    def to_tokens(cost):
        return np.interp(cost, unique_costs, unique_ks)

    def to_cost(tokens):
        return np.interp(tokens, unique_ks, unique_costs)

    right = ax.secondary_yaxis("right", functions=(to_tokens, to_cost))
    right.set_ylabel("input tokens per step k (device profile)")
