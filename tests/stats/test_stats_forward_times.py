"""Many steps priced at once (``forward_times_at``) equal each step priced alone (``forward_time_at``), to the
last bit, and refuse the first step outside the profile with the same message: the committed predictions were
computed step by step and must not move."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lade_bench.profiling.device_profile import forward_time_at, forward_times_at
from lade_bench.stats.step_cost import decode_forward_time, predicted_times

# A curved grid (times not linear in either dimension), so every interpolation rounds.
TOKENS = [1, 2, 3, 5, 8, 13]
KV = [8, 64, 256, 1024]
GRID = {
    "token_counts": TOKENS,
    "context_tokens": 64,
    "forward_time_s": [0.01 + 0.003 * k**0.7 for k in TOKENS],
    "kv_lengths": KV,
    "forward_time_grid_s": [[0.01 + 0.003 * k**0.7 + 1e-5 * kv**0.9 + 1e-7 * k * kv for k in TOKENS] for kv in KV],
}
ONE_CONTEXT = {key: GRID[key] for key in ("token_counts", "context_tokens", "forward_time_s")}
# Widths and KV lengths on, between and at the ends of the measured points.
WIDTHS = np.array([1, 2, 4, 13, 7, 3, 1, 12, 5, 8, 13, 6])
KVS = np.array([8, 1024, 9, 1023, 64, 100, 255, 256, 1000, 8, 600, 1024])


@pytest.mark.parametrize("profile", [GRID, ONE_CONTEXT], ids=["kv-grid", "one-context"])
def test_steps_priced_at_once_equal_each_step_priced_alone_to_the_last_bit(profile) -> None:
    alone = [forward_time_at(profile, int(w), float(kv)) for w, kv in zip(WIDTHS, KVS, strict=True)]
    assert forward_times_at(profile, WIDTHS, KVS).tolist() == alone
    # The sum over a row's decode steps (the prefill, step 0, left out) is Python's, in step order.
    assert decode_forward_time(WIDTHS, KVS, profile) == sum(alone[1:])


@pytest.mark.parametrize(("width", "kv"), [(14, 64), (2, 1025), (0, 7)])
def test_the_first_step_outside_the_profile_is_refused_with_the_single_step_message(width: int, kv: int) -> None:
    widths, kvs = np.append(WIDTHS, [width, 20]), np.append(KVS, [kv, 5000])
    with pytest.raises(ValueError) as alone:
        forward_time_at(GRID, width, float(kv))
    with pytest.raises(ValueError) as at_once:
        forward_times_at(GRID, widths, kvs)
    assert str(at_once.value) == str(alone.value)


def test_predicted_times_refuse_the_first_row_that_leaves_the_profile() -> None:
    rows = pd.DataFrame(
        {
            "step_tokens": [[10, 1, 3], [10, 2, 14], [10, 20]],
            "accept_lengths": [[1, 1, 2], [1, 2, 1], [1, 1]],
            "prompt_tokens": [10, 10, 10],
        }
    )
    with pytest.raises(ValueError, match="covers 1..13 tokens per forward pass, not 14;"):
        predicted_times(rows, GRID)
    fine = predicted_times(rows.iloc[:1], GRID)  # kv 10, then 10 + 1 emitted
    assert fine.tolist() == [forward_time_at(GRID, 1, 10.0) + forward_time_at(GRID, 3, 11.0)]
