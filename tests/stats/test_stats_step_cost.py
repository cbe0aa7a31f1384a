"""The step-cost model (stats.step_cost): KV lengths per step, grid interpolation, refusals, the speedup."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lade_bench.profiling.device_profile import forward_time_at, kv_range, profile_measures_kv
from lade_bench.stats.step_cost import (
    outside_forward_time,
    predicted_forward_time,
    predicted_speedup,
    prediction_basis,
    step_kv_lengths,
)

# t(k, kv) = 1 + k / 10 + kv / 100 on the grid points, so bilinear interpolation is exact.
TOKENS = [1, 2, 4, 8]
KV = [8, 64, 256]
GRID = {
    "token_counts": TOKENS,
    "context_tokens": 64,
    "forward_time_s": [1 + k / 10 + 64 / 100 for k in TOKENS],
    "kv_lengths": KV,
    "forward_time_grid_s": [[1 + k / 10 + kv / 100 for k in TOKENS] for kv in KV],
}
ONE_CONTEXT = {key: GRID[key] for key in ("token_counts", "context_tokens", "forward_time_s")}


def test_kv_length_of_each_step_is_prompt_plus_tokens_emitted_before_it_less_the_one_fed() -> None:
    # prefill of 10 prompt tokens emits 1; the next step feeds it (kv 10) and emits 3; the next feeds one (kv 13)
    assert step_kv_lengths(10, [1, 3, 2]).tolist() == [0, 10, 13]


def test_grid_profile_interpolates_in_width_and_kv_and_one_context_profile_ignores_kv() -> None:
    assert profile_measures_kv(GRID) and not profile_measures_kv(ONE_CONTEXT)
    assert kv_range(GRID) == (8, 256) and kv_range(ONE_CONTEXT) == (64, 64)
    assert forward_time_at(GRID, 3, 160) == pytest.approx(1 + 0.3 + 1.6)
    assert forward_time_at(ONE_CONTEXT, 3, 160) == pytest.approx(1 + 0.3 + 0.64)


@pytest.mark.parametrize(("tokens", "kv", "named"), [(9, 64, "1..8 tokens"), (2, 300, "8..256 tokens, not 300")])
def test_steps_outside_the_measured_grid_are_refused_not_extrapolated(tokens: int, kv: int, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        forward_time_at(GRID, tokens, kv)


def test_predicted_forward_time_sums_decode_steps_at_their_width_and_kv() -> None:
    # prompt 10: decode steps feed 4 tokens at kv 10, then 1 token at kv 13; the prefill is left out
    expected = (1 + 0.4 + 0.10) + (1 + 0.1 + 0.13)
    assert predicted_forward_time([10, 4, 1], [1, 3, 1], 10, GRID) == pytest.approx(expected)


def test_predicted_speedup_adds_the_measured_outside_time_and_counts_rows_without_it() -> None:
    ar = pd.DataFrame(
        {
            "step_tokens": [[10, 1, 1, 1, 1]],
            "accept_lengths": [[1, 1, 1, 1, 1]],
            "prompt_tokens": [10],
            "wall_time_s": [9.0],
            "forward_time_s": [math.nan],
        }
    )
    arm = pd.DataFrame(
        {
            "step_tokens": [[10, 4, 1]],
            "accept_lengths": [[1, 3, 1]],
            "prompt_tokens": [10],
            "wall_time_s": [5.0],
            "forward_time_s": [4.5],
        }
    )
    ar_time = sum(1 + 0.1 + kv / 100 for kv in (10, 11, 12, 13))
    arm_time = (1 + 0.4 + 0.10) + (1 + 0.1 + 0.13) + 0.5
    assert outside_forward_time(arm.iloc[0]) == pytest.approx(0.5) and outside_forward_time(ar.iloc[0]) is None
    assert predicted_speedup(arm, ar, GRID) == pytest.approx(ar_time / arm_time)
    basis = prediction_basis(pd.concat([ar, arm]).to_dict("records"), GRID)
    assert basis == {"kv_measured": True, "context_tokens": 64, "rows": 2, "rows_without_outside_time": 1}
    with pytest.raises(ValueError, match="pairs rows"):
        predicted_speedup(arm, pd.concat([ar, ar]), GRID)
