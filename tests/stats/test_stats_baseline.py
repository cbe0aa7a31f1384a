"""The baseline is a parameter: every estimate against a non-AR arm equals the same estimate by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from lade_bench import stats
from tests.stats.rows import frame, row

# Wall times per (sample, arm); two turns per sample so that a sample is summed before it is a unit.
TIMES = {"ar": 4.0, "lookahead": 2.0, "prompt_lookup": 3.0}


@pytest.fixture
def cell(tmp_path):
    """A cell with three arms over 12 samples, written and read back like the runner's rows."""

    def build(do_sample: bool) -> pd.DataFrame:
        built = []
        for sample in range(12):
            for turn in range(2):
                for arm, base in TIMES.items():
                    wall = base * (1.0 + 0.1 * sample) + 0.01 * turn * (arm == "prompt_lookup")
                    tokens = 10 + sample + (2 if do_sample and arm == "lookahead" else 0)
                    rouge = 0.5 + 0.01 * sample + (0.02 if arm == "lookahead" else 0.0) * (sample % 2)
                    values = {"wall": wall, "tokens": tokens, "steps": tokens, "rougeL": rouge}
                    built.append(row("c0", f"s{sample:02d}", arm, turn=turn, do_sample=do_sample, **values))
        return frame(tmp_path / f"sampled_{do_sample}", built)

    return build


@pytest.mark.parametrize("do_sample", [False, True])
def test_speedup_against_a_non_ar_baseline_is_the_ratio_of_its_sums(cell, do_sample):
    rows = cell(do_sample)
    paired = stats.common_rows(rows)
    estimate = stats.speedup_estimate(paired, "lookahead", sampled=do_sample, baseline="prompt_lookup")
    base, arm = paired[paired["arm"] == "prompt_lookup"], paired[paired["arm"] == "lookahead"]
    expected = base["wall_time_s"].sum() / arm["wall_time_s"].sum()
    if do_sample:
        expected *= arm["new_tokens"].sum() / base["new_tokens"].sum()
    assert estimate.value == pytest.approx(expected)
    assert (estimate.n_units, estimate.n_pairs, estimate.note) == (12, 24, "")
    assert estimate.low < estimate.value < estimate.high
    # Against AR (the default) it is another number, from the same rows.
    assert stats.speedup_estimate(paired, "lookahead", sampled=do_sample).value != pytest.approx(expected)


def test_summary_against_a_non_ar_baseline_gives_the_baseline_one_and_no_interval(cell):
    records = {r["arm"]: r for r in stats.summarize_cell(cell(False), baseline="prompt_lookup")}
    assert list(records) == ["ar", "lookahead", "prompt_lookup"]
    assert records["prompt_lookup"]["speedup"] == pytest.approx(1.0)
    assert records["prompt_lookup"]["speedup_ci_note"] == stats.NOTE_BASELINE
    assert records["ar"]["speedup"] < 1.0 < records["lookahead"]["speedup"]
    assert records["lookahead"]["speedup_ci_note"] == ""


def test_per_sample_totals_and_quality_delta_take_the_baseline(cell):
    paired = stats.common_rows(cell(False))
    totals = stats.per_sample_totals(paired, "lookahead", baseline="prompt_lookup")
    assert list(totals.columns) == list(stats.TOTALS_COLUMNS)
    first = paired[paired["sample_id"] == "s00"]
    assert totals["t_base"].iloc[0] == pytest.approx(first[first["arm"] == "prompt_lookup"]["wall_time_s"].sum())
    mean = stats.per_sample_mean(totals, sampled=False)
    assert mean == pytest.approx((totals["t_base"] / totals["t_arm"]).mean())
    delta = stats.quality_delta(paired, "lookahead", "rougeL", baseline="prompt_lookup")
    assert delta.value == pytest.approx(0.01)  # +0.02 on the odd half of the samples
    assert stats.quality_delta(paired, "prompt_lookup", "rougeL", baseline="prompt_lookup").value == 0.0


def test_a_missing_baseline_pairs_nothing(cell):
    rows = cell(False)
    paired = stats.common_rows(rows[rows["arm"] != "prompt_lookup"])
    estimate = stats.speedup_estimate(paired, "lookahead", sampled=False, baseline="prompt_lookup")
    assert math.isnan(estimate.value) and estimate.note == stats.NOTE_NO_PAIRS
