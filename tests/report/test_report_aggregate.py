"""Aggregates checked against sums recomputed here, directly from the rows on disk."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lade_bench import stats
from lade_bench.report import aggregate
from lade_bench.results import load_rows

from .sweep_builder import CELLS, ERROR_SAMPLE


def _common(cell_rows: pd.DataFrame) -> pd.DataFrame:
    """Error-free rows at the (sample, turn, repeat) keys where every arm of the cell succeeded."""
    good = cell_rows[cell_rows["error"].isna()]
    arms_per_key = good.groupby(["sample_id", "turn", "repeat"])["arm"].nunique()
    keys = arms_per_key[arms_per_key == cell_rows["arm"].nunique()].index
    return good.set_index(["sample_id", "turn", "repeat"]).loc[lambda f: f.index.isin(keys)]


def _expected_speedup(cell_rows: pd.DataFrame, arm: str) -> tuple[float, int]:
    common = _common(cell_rows)
    ar = common[common["arm"] == "ar"]["wall_time_s"]
    other = common[common["arm"] == arm]["wall_time_s"]
    return float(ar.sum() / other.sum()), len(other)


def test_summary_has_one_record_per_cell_and_arm(sweep):
    expected = sum(len(spec.arms) for spec in CELLS)
    assert len(sweep.summary) == expected
    assert sweep.summary[["sweep", "cell_id", "arm"]].drop_duplicates().shape[0] == expected


def test_speedup_and_compression_equal_ratio_of_sums_from_rows(sweep, sweep_dir):
    rows = load_rows(sweep_dir)
    for rec in sweep.summary.to_dict("records"):
        cell_rows = rows[rows["cell_id"] == rec["cell_id"]]
        speedup, n_pairs = _expected_speedup(cell_rows, rec["arm"])
        assert rec["speedup"] == pytest.approx(speedup, rel=1e-12)
        assert rec["n_pairs"] == n_pairs
        # 2 or 3 samples per cell: never an interval, and the record says why
        assert math.isnan(rec["speedup_ci_low"]) and math.isnan(rec["speedup_ci_high"])
        n = rec["n_units"]
        assert rec["speedup_ci_note"] == ("baseline" if rec["arm"] == "ar" else f"no interval: {n} samples (< 10)")
        common = _common(cell_rows)
        arm_rows = common[common["arm"] == rec["arm"]]
        assert rec["compression_ratio"] == pytest.approx(arm_rows["new_tokens"].sum() / arm_rows["decode_steps"].sum())
        assert rec["tokens_per_s"] == pytest.approx(arm_rows["new_tokens"].sum() / arm_rows["wall_time_s"].sum())
        if rec["arm"] == "ar":
            assert rec["speedup"] == 1.0 and rec["compression_ratio"] == 1.0


def test_errored_rows_are_counted_but_never_aggregated(sweep):
    code = sweep.summary[sweep.summary["dataset"] == "toy_code"].set_index("arm")
    assert code.loc["lookahead", "n_errors"] == 2  # the error sample, in each of the 2 repeats
    # every arm, prompt lookup and AR too, on the 2 samples x 2 repeats where all arms succeeded
    assert code["n_pairs"].tolist() == [4, 4, 4] and code["n_units"].tolist() == [2, 2, 2]
    assert code.loc["prompt_lookup", "n_errors"] == 0 and code.loc["ar", "n_errors"] == 0
    errored = sweep.rows[sweep.rows["error"].notna()]
    assert set(errored["sample_id"]) == {ERROR_SAMPLE}


def test_greedy_lookahead_matches_ar_everywhere(sweep):
    greedy = sweep.summary[~sweep.summary["do_sample"] & (sweep.summary["arm"] != "ar")]
    assert (greedy["matches_ar"] == 1.0).all()
    assert sweep.summary[sweep.summary["do_sample"]]["matches_ar"].isna().all()


def test_quality_means_are_per_sample_means(sweep):
    rows = sweep.rows
    for rec in sweep.summary[sweep.summary["dataset"] == "toy_sum"].to_dict("records"):
        arm_rows = rows[(rows["cell_id"] == rec["cell_id"]) & (rows["arm"] == rec["arm"])]
        assert rec["rougeL"] == pytest.approx(arm_rows["rougeL"].mean())
        assert math.isnan(rec["pass@1"])
    code = sweep.summary[(sweep.summary["dataset"] == "toy_code") & (sweep.summary["arm"] == "ar")].iloc[0]
    common = _common(rows[rows["cell_id"] == code["cell_id"]])  # lookahead failed on the error sample
    per_sample = common[common["arm"] == "ar"].groupby("sample_id")["passed"].mean()
    assert len(per_sample) == 2 and ERROR_SAMPLE not in per_sample.index
    assert code["pass@1"] == pytest.approx(per_sample.mean())


def test_accept_histogram_mean_is_the_compression(sweep):
    for rec in sweep.summary[sweep.summary["arm"] == "lookahead"].to_dict("records"):
        cell_rows = sweep.rows[(sweep.rows["cell_id"] == rec["cell_id"]) & (sweep.rows["arm"] == "lookahead")]
        hist = stats.accept_histogram(cell_rows)
        mean = sum(k * v for k, v in hist.items()) / sum(hist.values())
        assert mean == pytest.approx(rec["compression_ratio"])


def test_headline_prefers_the_cell_with_most_arms_without_measuring(sweep):
    # toy_sum has six greedy cells, one of them with prompt lookup: chosen by configuration alone
    choice = sweep.headline_choice.set_index("dataset")
    assert choice.loc["toy_sum", "selection"] == stats.SELECTION_ONLY
    assert choice.loc["toy_sum", "n_candidates"] == 6 and choice.loc["toy_sum", "reported_samples"] is None
    main = sweep.headline
    assert set(main["dataset"]) == {"toy_sum", "toy_code"}
    for _, cell in main.groupby("cell_id"):
        assert set(cell["arm"]) == {"ar", "lookahead", "prompt_lookup"}
        assert not cell["do_sample"].any()


def test_flat_metrics_leave_out_missing_values(sweep):
    cell = sweep.summary[sweep.summary["dataset"] == "toy_code"]
    flat = aggregate.flat_metrics(cell)
    assert "lookahead/speedup" in flat and "lookahead/pass@1" in flat
    assert "lookahead/rougeL" not in flat  # the code dataset has no ROUGE
    assert all(isinstance(v, (int, float)) and math.isfinite(v) for v in flat.values())


def test_cell_without_ar_has_no_speedup(sweep):
    cell = sweep.rows[sweep.rows["cell_id"] == sweep.rows["cell_id"].iloc[0]]
    no_ar = cell[cell["arm"] != "ar"]
    records = aggregate.summarize_cell(no_ar)
    assert all(math.isnan(r["speedup"]) and r["speedup_ci_note"] == stats.NOTE_NO_PAIRS for r in records)


def test_mean_estimate_brackets_the_mean():
    index = pd.MultiIndex.from_tuples([(f"s{i}", 0) for i in range(11)], names=["sample_id", "turn"])
    estimate = stats.mean_estimate(pd.Series(np.linspace(0.0, 1.0, 11), index=index))
    assert estimate.low <= estimate.value <= estimate.high and estimate.value == pytest.approx(0.5)
    empty = stats.mean_estimate(pd.Series([], dtype=float, index=index[:0]))
    assert math.isnan(empty.value) and empty.n_units == 0


def test_empty_rows_give_an_empty_summary(sweep):
    empty = sweep.rows.iloc[0:0]
    assert aggregate.summarize(empty).empty
