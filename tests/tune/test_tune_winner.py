"""The declared winner: search rank 1 whatever the held-out numbers, or picked on one half and reported on the other.

Synthetic held-out cells with known timings (rows written and read back as the runner's are), so
every speedup is known: rank 2 is faster on every held-out sample, rank 1 is still the declared
winner under ``search_rank_1``; under ``split_heldout`` the choice sees only the first half.
"""

from __future__ import annotations

import math

import pytest

from lade_bench import stats
from lade_bench.decoding import LookaheadParams
from lade_bench.tune.outputs import heldout_records, heldout_table
from lade_bench.tune.validate import HeldoutResult, declare_winner, split_heldout_ids

from ..stats.rows import frame, row

SAMPLES = [f"s{i}" for i in range(4)]


def _result(tmp_path, rank: int | None, lookahead_wall: dict[str, float], reference: str | None = None):
    """A held-out cell: AR takes 1 s per sample, lookahead the given seconds per sample."""
    cell = f"rank{rank}" if reference is None else reference
    rows = []
    for sample in SAMPLES:
        rows.append(row(cell, sample, "ar", wall=1.0))
        rows.append(row(cell, sample, "lookahead", wall=lookahead_wall[sample]))
    data = frame(tmp_path, rows)
    records = {rec["arm"]: rec for rec in stats.summarize_cell(data)}
    params = LookaheadParams(3, rank or 5, 1)
    nan = {"speedup": math.nan, "ci_low": math.nan, "ci_high": math.nan, "n_units": 0, "note": "no prompt_lookup arm"}
    return HeldoutResult(params, rank, 1.2, tmp_path / cell, records, nan, 4.0, reference, data)


@pytest.fixture
def results(tmp_path):
    # Rank 1: 2x on the first half, 1x on the second (4/3 overall); rank 2: 1/0.7 = 1.43x everywhere.
    rank1 = _result(tmp_path, 1, {"s0": 0.5, "s1": 0.5, "s2": 1.0, "s3": 1.0})
    rank2 = _result(tmp_path, 2, {s: 0.7 for s in SAMPLES})
    preset = _result(tmp_path, None, {s: 0.9 for s in SAMPLES}, reference="paper_7b")
    return [rank1, rank2, preset]


def test_search_rank_1_is_declared_even_when_another_does_better_on_the_heldout_samples(results):
    rank1, rank2, _ = results
    assert rank2.speedup > rank1.speedup  # the held-out samples would have picked rank 2
    choice = declare_winner(results, "search_rank_1", SAMPLES)
    assert choice.winner is rank1 and choice.selection_ids == () and choice.report_ids == tuple(SAMPLES)
    assert choice.winner_speedup == pytest.approx(4 / 3)  # sum(AR) / sum(lookahead) = 4 / 3
    records = heldout_records(results, choice)
    assert [r["selected"] for r in records] == [True, False, False]
    table = heldout_table(records, choice.rule)
    assert list(table["configuration"])[:2] == [f"{rank1.key} (declared winner)", f"{rank2.key} (not selected)"]
    assert "selection half speedup" not in table.columns


def test_split_heldout_picks_on_the_first_half_and_reports_on_the_second(results):
    rank1, rank2, _ = results
    assert split_heldout_ids(SAMPLES) == (("s0", "s1"), ("s2", "s3"))
    choice = declare_winner(results, "split_heldout", SAMPLES)
    assert choice.winner is rank1  # 2x on the selection half against rank 2's 1.43x
    assert choice.selection_speedup == {rank1.key: pytest.approx(2.0), rank2.key: pytest.approx(1 / 0.7)}
    # Reported on the other half only: rank 1's 1x there, not the 2x it was picked on.
    assert choice.winner_speedup == pytest.approx(1.0)
    records = heldout_records(results, choice)
    assert records[0]["arms"]["lookahead"]["n_units"] == 2 and records[0]["selection_speedup"] == pytest.approx(2.0)
    assert records[0]["arms_all_heldout"]["lookahead"]["n_units"] == 4
    assert records[2]["arms"]["lookahead"]["speedup"] == pytest.approx(2 / 1.8)  # the preset, on the same half
    table = heldout_table(records, choice.rule)
    assert "selection half speedup" in table.columns and "report half lookahead vs AR" in table.columns


def test_an_odd_heldout_set_gives_the_selection_half_the_extra_sample_and_bad_rules_are_named(results):
    assert split_heldout_ids(["a", "b", "c"]) == (("a", "b"), ("c",))
    with pytest.raises(ValueError, match="at least 2 held-out samples"):
        split_heldout_ids(["a"])
    with pytest.raises(ValueError, match=r"tune.winner='best' is not allowed; use one of \['search_rank_1'"):
        declare_winner(results, "best", SAMPLES)
