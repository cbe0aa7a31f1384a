"""The step-cost model of speedup: a generation's time predicted from its recorded steps and a device profile.

Every method here is exact, so which tokens a step feeds and accepts does not depend on the device: a row
records, step by step, the step's width (``step_tokens``: input tokens of each forward pass, prefill first)
and how many tokens it emitted (``accept_lengths``). What a step costs does depend on the device, and a
device profile (``profiling.device_profile``) measures it: forward time against tokens fed and, where the
profile measured a grid, against the cached context the step attends to. The model:

    predicted time of a row = sum over its decode steps i >= 1 of t(width_i, kv_i)
                              + the row's measured time outside the forwards (wall - forward)
    predicted speedup       = sum of AR's predicted times / sum of the arm's predicted times

over paired rows (the way the leaderboard's measured speedup sums wall times). ``kv_i`` is the cache the
step attends to: the prompt plus every token emitted before the step, less the one the step feeds
(:func:`step_kv_lengths`). The time is interpolated in both dimensions and never extrapolated: a step
outside the profile's measured widths or KV lengths is refused, naming the value and the range. A profile
measured at one context (every profile before the grid) is read at that context for every step, and
:func:`prediction_basis` says so. Left out, and documented in docs/statistics.md: the prefill (the issue's
and the leaderboard's unit is the decode; a prefill costs about the same for every arm of one prompt), and
the outside-forward time of rows that did not record their forward time (``forward_time_s`` NaN: AR and
the Hugging Face arms of older sweeps), taken as zero there and counted by :func:`prediction_basis`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.profiling.device_profile import forward_times_at, profile_measures_kv


def step_kv_lengths(prompt_tokens: int, accept_lengths: Sequence[int]) -> np.ndarray:
    """The cached-context length each step attends to: 0 for the prefill, then the prompt plus the tokens
    emitted before the step, less the one the step feeds (it entered the cache with this step)."""
    emitted = np.asarray(accept_lengths, dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(emitted)[:-1]]) if len(emitted) else np.zeros(0, dtype=np.int64)
    kv = int(prompt_tokens) + before - 1
    if len(kv):
        kv[0] = 0
    return np.maximum(kv, 0)


def outside_forward_time(row: Mapping[str, Any]) -> float | None:
    """A row's measured seconds outside the model's forwards (drafting, retrieval, bookkeeping):
    ``wall_time_s - forward_time_s``; None where the row did not record its forward time."""
    wall, forward = row.get("wall_time_s"), row.get("forward_time_s")
    if wall is None or forward is None:
        return None
    wall, forward = float(wall), float(forward)
    if not (math.isfinite(wall) and math.isfinite(forward)):
        return None
    return max(wall - forward, 0.0)


def predicted_forward_time(
    step_tokens: Sequence[int], accept_lengths: Sequence[int], prompt_tokens: int, profile: Mapping[str, Any]
) -> float:
    """Seconds the decode forwards of one generation take on ``profile``: the sum of ``t(width_i, kv_i)``
    over its steps after the prefill.

    Raises:
        ValueError: a step's width or KV length outside the profile's measured range
            (``forward_time_at`` names it), or ``step_tokens`` and ``accept_lengths`` of different lengths.
    """
    widths, kv = _decode_steps(step_tokens, accept_lengths, prompt_tokens)
    return _summed(forward_times_at(profile, widths, kv if profile_measures_kv(profile) else None))


def _decode_steps(
    step_tokens: Sequence[int], accept_lengths: Sequence[int], prompt_tokens: int
) -> tuple[np.ndarray, np.ndarray]:
    """The widths and KV lengths of a generation's steps after the prefill.

    Raises:
        ValueError: ``step_tokens`` and ``accept_lengths`` of different lengths.
    """
    widths = np.asarray(step_tokens)
    if len(widths) != len(accept_lengths):
        raise ValueError(
            f"step_tokens ({len(widths)} steps) and accept_lengths ({len(accept_lengths)}) must describe the same steps"
        )
    return widths[1:], step_kv_lengths(prompt_tokens, accept_lengths)[1:]


def _summed(times: np.ndarray) -> float:
    """Python's ``sum`` of the steps' times, in step order: the committed predictions were summed so, and
    its float sum differs from numpy's pairwise one in the last bits."""
    return sum(times.tolist())


def decode_forward_time(
    step_tokens: Sequence[int], kv_lengths: Sequence[int] | None, profile: Mapping[str, Any]
) -> float:
    """The sum of ``t(width_i, kv_i)`` over the steps after the prefill (step 0); ``kv_lengths`` None: every
    step at the profile's one measured context (what a one-context profile can say).

    Raises:
        ValueError: a width or KV length outside the profile's measured range.
    """
    widths = np.asarray(step_tokens)[1:]
    kv = None if kv_lengths is None else np.asarray(kv_lengths)[1:]
    return _summed(forward_times_at(profile, widths, kv))


def predicted_row_time(row: Mapping[str, Any], profile: Mapping[str, Any]) -> float:
    """One row's predicted seconds: its decode forwards on ``profile`` plus its measured outside-forward time
    (zero where the row did not record it; :func:`prediction_basis` counts those rows)."""
    forwards = predicted_forward_time(row["step_tokens"], row["accept_lengths"], int(row["prompt_tokens"]), profile)
    return forwards + (outside_forward_time(row) or 0.0)


def predicted_times(rows: pd.DataFrame, profile: Mapping[str, Any]) -> pd.Series:
    """:func:`predicted_row_time` of every row, indexed like ``rows``: every row's steps priced in one
    :func:`forward_times_at` call (a step refused is the first in row order, as row by row), each row's
    times summed in step order.

    Raises:
        ValueError: as :func:`predicted_row_time`.
    """
    # Only the columns read here: a records list of the whole frame would copy every row's texts and ids.
    used = [c for c in ("step_tokens", "accept_lengths", "prompt_tokens", "wall_time_s", "forward_time_s") if c in rows]
    records = rows[used].to_dict("records")
    steps = [_decode_steps(r["step_tokens"], r["accept_lengths"], int(r["prompt_tokens"])) for r in records]
    if not steps:
        return pd.Series([], index=rows.index, dtype=float)
    widths = np.concatenate([w for w, _ in steps])
    kv = np.concatenate([k for _, k in steps]) if profile_measures_kv(profile) else None
    times = forward_times_at(profile, widths, kv).tolist()
    ends = np.cumsum([len(w) for w, _ in steps]).tolist()
    starts = [0, *ends[:-1]]
    return pd.Series(
        [sum(times[a:b]) + (outside_forward_time(r) or 0.0) for a, b, r in zip(starts, ends, records, strict=True)],
        index=rows.index,
        dtype=float,
    )


def predicted_speedup(arm_rows: pd.DataFrame, ar_rows: pd.DataFrame, profile: Mapping[str, Any]) -> float:
    """The step-cost model's speedup of an arm over AR on ``profile``: summed predicted AR time over summed
    predicted arm time, over paired rows (the same prompts, in the same order).

    Raises:
        ValueError: unpaired sides (different lengths or no row), or a step outside the profile's range.
    """
    if len(arm_rows) != len(ar_rows) or len(arm_rows) == 0:
        raise ValueError(f"predicted_speedup pairs rows: got {len(arm_rows)} arm and {len(ar_rows)} AR rows")
    return float(predicted_times(ar_rows, profile).sum() / predicted_times(arm_rows, profile).sum())


def prediction_basis(rows: Iterable[Mapping[str, Any]], profile: Mapping[str, Any]) -> dict[str, Any]:
    """What a prediction over ``rows`` rests on: whether the profile measured KV lengths (else every step
    is read at its one context), and how many rows had no measured outside-forward time (taken as zero)."""
    listed = list(rows)
    return {
        "kv_measured": profile_measures_kv(profile),
        "context_tokens": int(profile.get("context_tokens", 0)),
        "rows": len(listed),
        "rows_without_outside_time": sum(outside_forward_time(row) is None for row in listed),
    }
