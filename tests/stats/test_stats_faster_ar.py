"""A cell with both AR arms (``ar`` on the batch-invariant path, ``ar_standard`` on the standard one,
issue 68) measures every speedup against the faster of the two: ``stats.speedup_baseline``."""

from __future__ import annotations

import pytest

from lade_bench import stats
from tests.stats.rows import frame, row


def _cell(tmp_path, times, *, do_sample=False, tokens=None, cell="c0", samples=4):
    """Rows of one cell: ``times`` arm -> wall time per sample, ``tokens`` arm -> new tokens (default 10)."""
    built = [
        row(cell, f"s{s}", arm, do_sample=do_sample, wall=wall * (1 + 0.1 * s), tokens=(tokens or {}).get(arm, 10))
        for s in range(samples)
        for arm, wall in times.items()
    ]
    return frame(tmp_path / cell, built)


@pytest.mark.parametrize(
    ("ar", "standard", "expected"), [(2.0, 1.5, "ar_standard"), (1.5, 2.0, "ar"), (2.0, 2.0, "ar")]
)
def test_the_faster_ar_arm_is_the_baseline_of_every_speedup(tmp_path, ar, standard, expected):
    rows = _cell(tmp_path, {"ar": ar, "ar_standard": standard, "lookahead": 1.0})
    paired = stats.common_rows(rows)
    assert stats.speedup_baseline(paired, sampled=False) == expected
    records = {rec["arm"]: rec for rec in stats.summarize_cell(rows)}
    assert records[expected]["speedup"] == 1.0 and records[expected]["speedup_ci_note"] == stats.NOTE_BASELINE
    looked = paired[paired["arm"] == "lookahead"]["wall_time_s"].sum()
    assert records["lookahead"]["speedup"] == pytest.approx(
        paired[paired["arm"] == expected]["wall_time_s"].sum() / looked
    )


def test_sampled_cells_compare_the_ar_arms_per_token(tmp_path):
    """Sampled outputs differ in length: ar_standard took longer in all but less per token, so it is the faster."""
    rows = _cell(
        tmp_path, {"ar": 2.0, "ar_standard": 2.2, "lookahead": 1.0}, do_sample=True, tokens={"ar_standard": 12}
    )
    paired = stats.common_rows(rows)
    assert stats.speedup_baseline(paired, sampled=True) == "ar_standard"
    assert stats.speedup_baseline(paired, sampled=False) == "ar"


def test_a_named_baseline_and_a_cell_without_ar_standard_keep_their_baseline(tmp_path):
    both = _cell(tmp_path, {"ar": 2.0, "ar_standard": 1.0, "lookahead": 1.5})
    assert stats.speedup_baseline(stats.common_rows(both), False, baseline="lookahead") == "lookahead"
    alone = _cell(tmp_path, {"ar": 2.0, "lookahead": 1.5}, cell="c1")
    assert stats.speedup_baseline(stats.common_rows(alone), False) == "ar"
    # Units pooled over a cell with and one without ar_standard: only AR covers them all.
    pooled = stats.pooled_units([both, alone])
    assert stats.speedup_baseline(pooled, False) == "ar"
