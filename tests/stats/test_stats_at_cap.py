"""Outputs at the cap: counted per arm on the paired units from each row's own budget (schema 7)."""

from __future__ import annotations

import math

from lade_bench import stats
from lade_bench.report import tables
from tests.stats.rows import frame, row


def _cell(budget):
    # Lookahead's outputs on s0 and s1 stop at 10 tokens (the budget), s2's ends at 7; AR likewise.
    built = []
    for sample, tokens in (("s0", 10), ("s1", 10), ("s2", 7)):
        for arm in ("ar", "lookahead"):
            built.append(row("c", sample, arm, tokens=tokens, steps=tokens, max_new_tokens=budget))
    built.append(row("c", "s3", "lookahead", error="boom", max_new_tokens=budget))  # unpaired: not counted
    built.append(row("c", "s3", "ar", tokens=10, steps=10, max_new_tokens=budget))
    return built


def test_outputs_that_reached_their_budget_are_counted_on_the_paired_units(tmp_path):
    summary = stats.summarize(frame(tmp_path, _cell(10)))
    records = summary.set_index("arm").to_dict("index")
    assert records["ar"]["n_at_cap"] == 2 and records["lookahead"]["n_at_cap"] == 2
    assert records["lookahead"]["n_pairs"] == 3
    assert tables.at_cap_cell({**records["lookahead"], "arm": "lookahead"}) == "2/3"


def test_a_larger_budget_counts_none_and_rows_without_one_count_as_unknown(tmp_path):
    larger = stats.summarize(frame(tmp_path / "larger", _cell(64)))
    assert (larger["n_at_cap"] == 0).all()
    unknown = stats.summarize(frame(tmp_path / "unknown", _cell(None)))
    assert unknown["n_at_cap"].map(math.isnan).all()
    assert tables.at_cap_cell(unknown.to_dict("records")[0]) == "n/a"


def test_the_quality_cell_names_the_datasets_metric():
    assert tables.quality_cell({"pass@1": 0.05, "accuracy": math.nan, "rougeL": math.nan}) == "pass@1 5.0%"
    assert tables.quality_cell({"pass@1": math.nan, "accuracy": 0.0, "rougeL": math.nan}) == "accuracy 0.0%"
    assert tables.quality_cell({"pass@1": math.nan, "accuracy": math.nan, "rougeL": 0.2134}) == "ROUGE-L 21.34"
    assert tables.quality_cell({"pass@1": math.nan, "accuracy": math.nan, "rougeL": math.nan}) == ""
