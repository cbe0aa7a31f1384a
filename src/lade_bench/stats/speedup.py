"""Speedup estimators on paired units: ratio of sums (reported) and per-sample mean (beside it).

* **Ratio of sums** (:func:`speedup_estimate`, the number every table, summary and W&B run reports).
  Greedy: ``sum(t_base) / sum(t_arm)``; the arms produce the same tokens, so the same work is timed
  on both sides. Sampling: the ratio of time per generated token,
  ``(sum(t_base) / sum(tok_base)) / (sum(t_arm) / sum(tok_arm))``; the arms produce different
  outputs of different lengths (and MT-Bench's turn 2 builds on each arm's own answer), so a ratio
  of wall times would reward the arm that stops earlier. ``speedup_basis`` names which one a record
  holds. A ratio of sums weights each sample by its cost, so one short, noisy sample cannot dominate.
* **Per-sample mean** (:func:`per_sample_mean`): the mean over samples of each sample's ratio, on the
  same basis; ``summary.json`` and the console show it beside the ratio of sums because readers of
  the paper expect both.

The baseline is ``"ar"`` unless the caller names another arm (``baseline=``), e.g. lookahead against
prompt lookup in the tuner's held-out table.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.metrics.speed import (
    bootstrap_ci,
    bootstrap_per_token_ci,
    per_sample_speedup_mean,
    per_token_speedup,
    speedup,
)
from lade_bench.stats.rules import NOTE_BASELINE, NOTE_NO_PAIRS, Estimate, IntervalSettings, interval_note
from lade_bench.stats.units import BASELINE_ARM, per_sample_totals

# The three things a speedup's interval can say about an arm against its baseline (docs/reference_results.md).
VERDICT_FASTER, VERDICT_SLOWER, VERDICT_CANNOT_TELL = "faster", "slower", "cannot tell"

# What ``speedup`` is a ratio of (``speedup_basis`` column).
BASIS_WALL_TIME = "wall time"
BASIS_PER_TOKEN = "time per token"


def speedup_basis(do_sample: Any) -> str:
    """What a cell's speedup is a ratio of: wall time (greedy) or time per token (sampling)."""
    return BASIS_PER_TOKEN if bool(do_sample) else BASIS_WALL_TIME


def speedup_verdict(low: float, high: float) -> str:
    """What a speedup's interval says: ``"faster"`` when its lower end is above 1, ``"slower"`` when its
    upper end is below 1, else ``"cannot tell"`` (the interval spans 1, or there is none: NaN ends)."""
    if math.isfinite(low) and low > 1.0:
        return VERDICT_FASTER
    if math.isfinite(high) and high < 1.0:
        return VERDICT_SLOWER
    return VERDICT_CANNOT_TELL


def speedup_estimate(
    paired: pd.DataFrame,
    arm: str,
    *,
    sampled: bool,
    baseline: str = BASELINE_ARM,
    intervals: IntervalSettings = IntervalSettings(),
    totals: pd.DataFrame | None = None,
) -> Estimate:
    """Speedup of ``arm`` over ``baseline`` on a cell's paired rows, with its interval over samples.

    Args:
        paired: the cell's ``common_rows``.
        arm: the arm; the baseline itself gets 1.0 by the same computation and no interval
            (``"baseline"``).
        sampled: the cell samples (speedup per token) or is greedy (speedup of wall times).
        baseline: the arm the speedup is relative to.
        intervals: bootstrap settings and the fewest samples an interval needs.
        totals: ``per_sample_totals(paired, arm, baseline)`` when the caller has it already.

    Returns:
        The estimate; value NaN and note ``"no paired AR rows"`` when nothing pairs.
    """
    if totals is None:
        totals = per_sample_totals(paired, arm, baseline)
    if totals.empty:
        return Estimate(math.nan, math.nan, math.nan, 0, 0, NOTE_NO_PAIRS)
    t_base, t_arm, tok_base, tok_arm = (
        totals[c].to_numpy(np.float64) for c in ("t_base", "t_arm", "tok_base", "tok_arm")
    )
    value = per_token_speedup(t_base, tok_base, t_arm, tok_arm) if sampled else speedup(t_base, t_arm)
    n_units, n_pairs = len(totals), int(totals["n_pairs"].sum())
    note = NOTE_BASELINE if arm == baseline else interval_note(n_units, intervals.min_units)
    if note:
        return Estimate(value, math.nan, math.nan, n_units, n_pairs, note)
    n_boot, confidence, seed = intervals.n_boot, intervals.confidence, intervals.seed
    if sampled:
        low, high = bootstrap_per_token_ci(
            t_base, tok_base, t_arm, tok_arm, n_boot=n_boot, confidence=confidence, seed=seed
        )
    else:
        low, high = bootstrap_ci(t_base, t_arm, n_boot=n_boot, confidence=confidence, seed=seed)
    return Estimate(value, low, high, n_units, n_pairs, "")


def per_sample_mean(totals: pd.DataFrame, *, sampled: bool) -> float | None:
    """Mean over samples of the per-sample speedup, on the same basis as the cell's speedup.

    Args:
        totals: :func:`~lade_bench.stats.units.per_sample_totals` of the arm and its baseline.
        sampled: the cell samples (ratio of time per token per sample) or is greedy.

    Greedy: ``t_base / t_arm`` per sample. Sampling: the ratio of time per token per sample, over the
    samples where both arms generated at least one token. None when no sample qualifies.
    """
    if sampled:
        totals = totals[(totals["tok_base"] > 0) & (totals["tok_arm"] > 0)]
    if totals.empty:
        return None
    t_base, t_arm = totals["t_base"].to_numpy(np.float64), totals["t_arm"].to_numpy(np.float64)
    if sampled:
        t_base = t_base / totals["tok_base"].to_numpy(np.float64)
        t_arm = t_arm / totals["tok_arm"].to_numpy(np.float64)
    return per_sample_speedup_mean(t_base, t_arm)
