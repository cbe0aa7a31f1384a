"""How much faster one arm runs in one setting than in another: the gain of a stronger baseline.

Every speedup of the suite compares two arms of one cell, in one mode and dtype (``stats.modes``
refuses eager-against-compiled pairs). The baselines table also asks a different question: how much
faster AR itself got from compiling it or lowering its precision. That is this module's one
comparison across cells: the same arm, on the same (sample, turn, repeat) units of two cells that
ran the same samples, e.g. AR compiled bf16 against AR eager fp32.

The basis is time per token, not wall time: another dtype or compiled kernels may flip a near-tie
and so produce a different number of tokens for the same prompt (and a later turn then sees a
different history), which a ratio of wall times would count as speed.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from lade_bench.metrics.speed import bootstrap_per_token_ci, per_token_speedup
from lade_bench.stats.rules import NOTE_NO_PAIRS, Estimate, IntervalSettings, interval_note
from lade_bench.stats.units import PAIR_KEY, ok_rows


def baseline_gain(
    reference: pd.DataFrame, other: pd.DataFrame, *, arm: str = "ar", intervals: IntervalSettings = IntervalSettings()
) -> Estimate:
    """Per-token speedup of ``arm`` in ``other``'s cell over the same arm in ``reference``'s cell.

    Args:
        reference: the rows of the reference cell (e.g. eager fp32).
        other: the rows of the cell compared with it (another mode or dtype, same samples).
        arm: the arm compared with itself.
        intervals: bootstrap settings and the fewest samples an interval needs.

    Returns:
        The estimate over the samples both cells completed (units summed per sample, resampled by
        sample); NaN with ``"no paired AR rows"`` when none pair. ``n_pairs`` counts the paired
        (sample, turn, repeat) units.
    """
    columns = [*PAIR_KEY, "wall_time_s", "new_tokens"]
    base = ok_rows(reference)
    compared = ok_rows(other)
    base = base[base["arm"] == arm][columns]
    compared = compared[compared["arm"] == arm][columns]
    merged = base.merge(compared, on=list(PAIR_KEY), suffixes=("_base", "_arm"), validate="one_to_one")
    if merged.empty:
        return Estimate(math.nan, math.nan, math.nan, 0, 0, NOTE_NO_PAIRS)
    totals = merged.groupby("sample_id", sort=True).agg(
        t_base=("wall_time_s_base", "sum"),
        t_arm=("wall_time_s_arm", "sum"),
        tok_base=("new_tokens_base", "sum"),
        tok_arm=("new_tokens_arm", "sum"),
    )
    t_base, t_arm, tok_base, tok_arm = (totals[c].to_numpy(np.float64) for c in totals.columns)
    value = per_token_speedup(t_base, tok_base, t_arm, tok_arm)
    n_units, n_pairs = len(totals), len(merged)
    note = interval_note(n_units, intervals.min_units)
    if note:
        return Estimate(value, math.nan, math.nan, n_units, n_pairs, note)
    low, high = bootstrap_per_token_ci(
        t_base, tok_base, t_arm, tok_arm, n_boot=intervals.n_boot, confidence=intervals.confidence, seed=intervals.seed
    )
    return Estimate(value, low, high, n_units, n_pairs, "")
