"""Both speedup estimators in every summary record: the ratio of sums and the per-sample mean."""

from __future__ import annotations

import pytest

from lade_bench import stats
from tests.stats.rows import frame, row


def test_the_two_estimators_can_fall_on_opposite_sides_of_1_and_both_are_recorded(tmp_path):
    # Sample a: lookahead is slower (10 s vs 12 s); sample b: four times faster (1 s vs 0.25 s).
    rows = [
        row("c", "a", "ar", wall=10.0),
        row("c", "a", "lookahead", wall=12.0),
        row("c", "b", "ar", wall=1.0),
        row("c", "b", "lookahead", wall=0.25),
    ]
    records = stats.summarize(frame(tmp_path, rows)).set_index("arm")
    assert records.loc["lookahead", "speedup"] == pytest.approx(11.0 / 12.25)  # < 1
    assert records.loc["lookahead", "speedup_per_sample_mean"] == pytest.approx((10 / 12 + 4.0) / 2)  # > 1
    assert records.loc["ar", "speedup_per_sample_mean"] == pytest.approx(1.0)
