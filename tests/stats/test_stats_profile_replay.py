"""Replaying recorded step widths on a device profile (``stats.profile_replay``)."""

import pytest

from lade_bench.stats.profile_replay import replayed_forward_time, replayed_speedup

PROFILE = {"token_counts": [1, 2, 4, 8], "forward_time_s": [0.010, 0.012, 0.016, 0.030]}


def test_decode_steps_are_costed_at_their_width_and_the_prefill_only_when_asked():
    assert replayed_forward_time([8, 1, 4, 3], PROFILE) == pytest.approx(0.010 + 0.016 + 0.014)
    assert replayed_forward_time([8, 1], PROFILE, prefill=True) == pytest.approx(0.030 + 0.010)


def test_speedup_is_the_ratio_of_summed_times_over_paired_generations():
    ar = [[8, 1, 1, 1, 1], [4, 1, 1]]
    drafted = [[8, 4, 2], [4, 2]]
    assert replayed_speedup(drafted, ar, PROFILE) == pytest.approx(0.060 / 0.040)


def test_unpaired_sides_and_widths_outside_the_profile_are_refused():
    with pytest.raises(ValueError, match="pairs generations"):
        replayed_speedup([[1, 1]], [], PROFILE)
    with pytest.raises(ValueError, match="not 16"):
        replayed_forward_time([1, 16], PROFILE)


def test_a_configuration_summary_pools_its_decode_steps_and_pairs_its_ar_rows():
    import pandas as pd

    from lade_bench.stats.profile_replay import configuration_summary

    rows = pd.DataFrame(
        {
            "step_tokens": [[8, 4, 2], [4, 2]],
            "accept_lengths": [[1, 3, 1], [1, 2]],
            "new_tokens": [5, 3],
            "decode_steps": [3, 2],
            "matches_ar": [True, False],
        }
    )
    summary = configuration_summary(rows, [[8, 1, 1, 1, 1], [4, 1, 1]], PROFILE)
    assert summary["n"] == 2 and summary["matches_ar"] == 0.5
    assert summary["predicted_speedup"] == pytest.approx(0.060 / 0.040)
    assert summary["width"] == pytest.approx((4 + 2 + 2) / 3)
