"""A row's forward passes replayed on a device profile: the time its step widths would take on that device.

Where two configurations of a method cannot be timed beside each other on a quiet machine, their recorded
step widths (``step_tokens``: input tokens per forward pass, prefill first) are costed on one committed
device profile (``profiling.device_profile``: forward time per input-token count at a fixed context), and
the ratio of the sums is the predicted speedup: a model of the step cost, not a measurement, and said so
wherever it is printed. It is the forward part of ``stats.step_cost`` read at the profile's one context
(:func:`lade_bench.stats.step_cost.decode_forward_time`): outside the forwards (drafting, retrieval) is not in
it, which is what the committed effect tables of two configurations of one method were computed with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from lade_bench.stats.efficiency import mean_decode_step_accepted, mean_decode_step_tokens
from lade_bench.stats.step_cost import decode_forward_time


def replayed_forward_time(step_tokens: Sequence[int], profile: Mapping[str, Any], prefill: bool = False) -> float:
    """Seconds the forwards of one generation take on ``profile``: the sum of ``t(width)`` over its steps.

    Args:
        step_tokens: input tokens per forward pass, prefill first (the rows' ``step_tokens``).
        profile: a device profile (``token_counts``, ``forward_time_s``).
        prefill: count the prefill too (False: the decode steps only, which is what differs between
            configurations of one method on one prompt).

    Raises:
        ValueError: a width outside the profile's measured range (``forward_time_at`` names it).
    """
    steps = list(step_tokens)
    if prefill:
        return decode_forward_time([0, *steps], None, profile)  # a placeholder step 0 so the prefill is summed
    return decode_forward_time(steps, None, profile)


def replayed_speedup(
    arm_steps: Iterable[Sequence[int]], reference_steps: Iterable[Sequence[int]], profile: Mapping[str, Any]
) -> float:
    """Predicted speedup of one arm over a reference on ``profile``: the ratio of summed replayed decode
    times (reference / arm) over paired generations, the way the leaderboard's measured speedup sums
    wall times.

    Raises:
        ValueError: the two sides have different lengths (unpaired), or no generation.
    """
    arm, reference = list(arm_steps), list(reference_steps)
    if len(arm) != len(reference) or not arm:
        raise ValueError(f"replayed_speedup pairs generations: got {len(arm)} arm and {len(reference)} reference ones")
    arm_time = sum(replayed_forward_time(steps, profile) for steps in arm)
    reference_time = sum(replayed_forward_time(steps, profile) for steps in reference)
    return reference_time / arm_time


def configuration_summary(
    rows: pd.DataFrame, ar_step_tokens: Iterable[Sequence[int]], profile: Mapping[str, Any]
) -> dict[str, float]:
    """One configuration's numbers from its rows, each paired with its AR row's step widths.

    ``n``: rows; ``tau``: tokens emitted per decode step, pooled (``stats.efficiency``); ``width``: tokens fed per
    decode step, pooled; ``matches_ar``: share of rows whose output equals AR's; ``predicted_speedup``: AR's
    replayed decode time over the configuration's on ``profile`` (:func:`replayed_speedup`), a prediction from
    the device profile, not a timing. The one summary the rivals' measured effects (docs/engine_bench) use.
    """
    return {
        "n": len(rows),
        "tau": mean_decode_step_accepted(rows),
        "width": mean_decode_step_tokens(rows),
        "matches_ar": float(rows["matches_ar"].astype(bool).mean()),
        "predicted_speedup": replayed_speedup(rows["step_tokens"], ar_step_tokens, profile),
    }
