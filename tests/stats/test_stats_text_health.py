"""Text health in the summaries (issue 63): repetition and loops per (cell, arm), and every speedup split by
whether AR's output of the unit ends in a loop, with the same paired estimator and interval.

Rows written before schema 12 (as these, built without the columns) get the measures from their output ids.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lade_bench import stats
from lade_bench.report import tables
from lade_bench.results import load_rows
from lade_bench.stats.text_health import inferred_stop_ids, with_text_health
from tests.stats.rows import frame, row

LOOP = [5, 6, 7, 8] * 5  # 20 tokens, one loop from 0: 17 4-grams, 4 distinct
CLEAN = list(range(100, 120))  # 20 tokens: 17 distinct 4-grams
INTERVALS = stats.IntervalSettings(n_boot=200, min_units=2)

# (sample, AR's output, AR's wall time, lookahead's output, lookahead's wall time)
UNITS = [
    ("s0", LOOP, 4.0, LOOP, 1.0),
    ("s1", LOOP, 4.0, LOOP, 1.0),
    ("s2", CLEAN, 2.0, CLEAN, 2.5),
    ("s3", CLEAN, 3.0, CLEAN, 2.5),
    # Lookahead's output loops where AR's does not: the unit stays (the split reads AR's output only).
    ("s4", CLEAN, 1.0, LOOP, 1.0),
]


def _rows(units=UNITS):
    built = []
    for sample, ar_ids, ar_wall, la_ids, la_wall in units:
        for arm, ids, wall in (("ar", ar_ids, ar_wall), ("lookahead", la_ids, la_wall)):
            built.append(row("c", sample, arm, wall=wall, tokens=20, steps=20, output_ids=ids, max_new_tokens=20))
    return built


def test_the_summary_counts_loops_and_splits_the_speedup_by_ar_s_outputs(tmp_path):
    summary = stats.summarize(frame(tmp_path, _rows()), intervals=INTERVALS).set_index("arm")
    ar, la = summary.loc["ar"], summary.loc["lookahead"]
    assert la["speedup"] == pytest.approx(14.0 / 8.0)  # (4 + 4 + 2 + 3 + 1) / (1 + 1 + 2.5 + 2.5 + 1)
    # Without loops: s2, s3, s4 (AR's output of s4 is clean), (2 + 3 + 1) / (2.5 + 2.5 + 1).
    assert la["speedup_no_loop"] == pytest.approx(6.0 / 6.0) and la["n_units_no_loop"] == 3
    assert (ar["n_loops"], la["n_loops"]) == (2, 3)
    assert ar["repeated_4gram_share"] == pytest.approx(2 * (13 / 17) / 5)
    assert la["distinct_4"] == pytest.approx((3 * 4 / 17 + 2 * 1.0) / 5)
    assert ar["speedup_no_loop_ci_note"] == stats.NOTE_BASELINE


def test_the_split_has_the_interval_of_the_same_estimator_on_the_kept_units_alone(tmp_path):
    whole = stats.summarize(frame(tmp_path / "whole", _rows()), intervals=INTERVALS).set_index("arm")
    kept = stats.summarize(frame(tmp_path / "kept", _rows(UNITS[2:])), intervals=INTERVALS).set_index("arm")
    la, alone = whole.loc["lookahead"], kept.loc["lookahead"]
    assert (la["speedup_no_loop"], la["n_units_no_loop"]) == (alone["speedup"], alone["n_units"])
    assert math.isfinite(alone["speedup_ci_low"])
    assert (la["speedup_no_loop_ci_low"], la["speedup_no_loop_ci_high"]) == (
        alone["speedup_ci_low"],
        alone["speedup_ci_high"],
    )
    record = {**la.to_dict(), "arm": "lookahead"}
    low, high = tables.fmt(alone["speedup_ci_low"]), tables.fmt(alone["speedup_ci_high"])
    assert tables.no_loop_speedup_cell(record) == f"1.00 [{low}, {high}]; 3"
    assert tables.loops_cell(record) == "3/5"
    assert tables.text_health_cells(record)[tables.REPEATED_HEADER] == tables.fmt(3 * (13 / 17) / 5, 1, 100.0)


def test_loop_free_rows_keep_every_arm_at_the_keys_whose_ar_output_ends_in_no_loop(tmp_path):
    kept = stats.loop_free_rows(frame(tmp_path, _rows()))
    assert sorted(set(kept["sample_id"])) == ["s2", "s3", "s4"]
    assert sorted(kept["arm"]) == ["ar"] * 3 + ["lookahead"] * 3


def test_old_rows_at_their_budget_are_at_the_cap_unless_they_end_in_a_stop_id_another_output_ended_on(tmp_path):
    # s0 ends early on token 2 (so 2 is a stop id); s1 uses the whole budget and ends on 2 (ended by
    # itself), s2 uses it and ends on 9 (at the cap).
    outputs = {"s0": [*CLEAN[:5], 2], "s1": [*CLEAN[:9], 2], "s2": [*CLEAN[:9], 9]}
    built = [
        row("c", sample, arm, tokens=len(ids), steps=len(ids), output_ids=ids, max_new_tokens=10)
        for sample, ids in outputs.items()
        for arm in ("ar", "lookahead")
    ]
    rows = frame(tmp_path, built)
    assert rows["at_cap"].isna().all()  # written without the column
    assert inferred_stop_ids(rows) == {"m": frozenset({2})}
    filled = stats.with_text_health(rows)
    at_cap = dict(zip(filled["sample_id"], filled["at_cap"], strict=False))
    assert at_cap == {"s0": False, "s1": False, "s2": True}


def test_without_any_loop_the_split_is_the_speedup_itself(tmp_path):
    clean = [(sample, CLEAN, ar, CLEAN, la) for sample, _, ar, _, la in UNITS]
    la = stats.summarize(frame(tmp_path, _rows(clean)), intervals=INTERVALS).set_index("arm").loc["lookahead"]
    assert la["n_loops"] == 0 and la["n_units_no_loop"] == la["n_units"] == 5
    assert (la["speedup_no_loop"], la["speedup_no_loop_ci_low"], la["speedup_no_loop_ci_high"]) == (
        la["speedup"],
        la["speedup_ci_low"],
        la["speedup_ci_high"],
    )


def test_the_docs_loop_and_repetition_counts_are_the_committed_spec_bench_rows():
    """docs/statistics.md's counts of loops and repetition on the committed Spec-Bench AR outputs (one per model,
    question and turn: AR's output is the same in every cell) are what the rows give."""
    root = Path(__file__).resolve().parents[2]
    rows = with_text_health(load_rows(root / "paper_figures" / "spec_bench" / "rows" / "spec_bench"))
    ar = rows[(rows["arm"] == "ar") & (rows["repeat"] == 0)].drop_duplicates(["model", "sample_id", "turn"])
    by_model = {model: group for model, group in ar.groupby("model")}
    gemma, smollm2 = by_model["gemma3-270m"], by_model["smollm2-135m-instruct"]
    assert len(gemma) == len(smollm2) == 70
    text = " ".join((root / "docs" / "statistics.md").read_text().split())
    expected = (
        f"this counts {int(gemma['loop_start'].notna().sum())} of Gemma-3-270M's {len(gemma)} AR outputs and "
        f"{int(smollm2['loop_start'].notna().sum())} of SmolLM2's as loops"
    )
    assert expected in text
    figures = (
        f"(Gemma distinct-4 {gemma['distinct_4'].mean():.2f}, {gemma['repeated_4gram_share'].mean():.0%} repeated; "
        f"SmolLM2 {smollm2['repeated_4gram_share'].mean():.0%} repeated)"
    )
    assert figures in text
    # The Spec-Bench results (at a glance, and in their README) label their verdicts with the same counts
    # (issue 63).
    loops = (
        f"{int(gemma['loop_start'].notna().sum())} of Gemma-3-270M's {len(gemma)} AR outputs and "
        f"{int(smollm2['loop_start'].notna().sum())} of SmolLM2's end in an exact repeating loop"
    )
    for document in (root / "docs" / "reference_results.md", root / "paper_figures" / "spec_bench" / "README.md"):
        assert loops in " ".join(document.read_text().split()), document


def test_the_spec_bench_readme_quotes_the_repetition_figures_correlations():
    """The Spec-Bench README's Spearman range between accepted tokens per step and repetition, per method over
    its outputs, is the committed figure's (report.text_health, the same rows), Jacobi and REST named apart."""
    from lade_bench.report.sweep import load_sweep
    from lade_bench.report.text_health import method_rows, spearman

    root = Path(__file__).resolve().parents[2]
    rows = method_rows(load_sweep(root / "paper_figures" / "spec_bench" / "rows" / "spec_bench"))
    rho = {
        arm: spearman(part["repeated_4gram_share"].to_numpy(float), part["mean_accepted"].to_numpy(float))
        for arm, part in rows.groupby("arm")
    }
    apart = {"jacobi", "rest"}
    others = [value for arm, value in rho.items() if arm not in apart]
    # "Weak": below 0.25 in absolute value (the figure's panels give -0.20 and 0.10).
    assert abs(rho["jacobi"]) < 0.25 and abs(rho["rest"]) < 0.25 and min(others) > 0.5
    expected = (
        f"Spearman correlation {min(others):.2f}-{max(others):.2f} per method over its outputs, "
        "Jacobi and REST aside, whose correlations are weak"
    )
    text = " ".join((root / "paper_figures" / "spec_bench" / "README.md").read_text().split())
    assert expected in text
