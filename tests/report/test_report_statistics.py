"""Statistics a reviewer can trust (issue 7, points 3-6), on rows with known values.

* every comparison between arms is paired on the units where all arms succeeded, and says its n;
* the main table never selects its cell on the samples it reports, and names sweep and selection;
* no interval from fewer than ``MIN_CI_UNITS`` samples, and the reason is shown everywhere;
* under sampling the speedup is a ratio of time per generated token.

Rows go through the real writer and reader, so dtypes are those the report sees.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from rich.console import Console

from lade_bench import stats
from lade_bench.metrics.speed import bootstrap_ci
from lade_bench.report import aggregate, tables
from lade_bench.report.sweep import CellFiles, load_sweep, sweep_from_rows
from lade_bench.results import CellWriter
from lade_bench.runner.console import summary_table, table_legend
from lade_bench.runner.summary import summarize_cell as runner_summary
from tests.stats.rows import frame as _frame
from tests.stats.rows import row as _row

ARMS = ("ar", "lookahead", "prompt_lookup")


def _record(summary: pd.DataFrame, arm: str, cell: str | None = None) -> dict[str, Any]:
    chosen = summary[(summary["arm"] == arm) & ((summary["cell_id"] == cell) if cell else True)]
    assert len(chosen) == 1
    return chosen.iloc[0].to_dict()


# --- 3. every comparison between arms is paired ------------------------------------------------


@pytest.fixture
def one_arm_failed(tmp_path) -> pd.DataFrame:
    """4 samples; prompt lookup fails on s0, where AR is slow, verbose and scores high ROUGE."""
    rows = []
    for i in range(4):
        s = f"s{i}"
        special = i == 0
        rows.append(
            _row(
                "c", s, "ar", wall=9.0 if special else 2.0, tokens=50 if special else 10, rougeL=0.9 if special else 0.1
            )
        )
        rows.append(
            _row("c", s, "lookahead", wall=1.0, tokens=50 if special else 10, steps=5, rougeL=0.9 if special else 0.2)
        )
        if special:
            rows.append(_row("c", s, "prompt_lookup", error="RuntimeError: boom"))
        else:
            rows.append(_row("c", s, "prompt_lookup", wall=1.5, tokens=10, steps=8, rougeL=0.3))
    return _frame(tmp_path, rows)


def test_a_failed_sample_on_one_arm_leaves_every_arm_on_the_same_units(one_arm_failed):
    summary = aggregate.summarize(one_arm_failed)
    ar, look, pl = (_record(summary, arm) for arm in ARMS)
    # s0 is gone for every arm, not only for prompt lookup (the old code kept it for AR and lookahead)
    assert ar["rougeL"] == pytest.approx(0.1) and look["rougeL"] == pytest.approx(0.2) and pl["rougeL"] == 0.3
    assert ar["tokens_per_s"] == pytest.approx(30 / 6.0)
    assert look["speedup"] == pytest.approx(6.0 / 3.0)  # s0's 9 s of AR time is not in the ratio either
    assert look["compression_ratio"] == pytest.approx(30 / 15)
    for rec in (ar, look, pl):
        assert (rec["n_units"], rec["n_pairs"]) == (3, 3)
    assert (ar["n_errors"], look["n_errors"], pl["n_errors"]) == (0, 0, 1)


def test_quality_delta_is_paired_and_equals_the_difference_of_the_shown_means(one_arm_failed):
    paired = stats.common_rows(one_arm_failed)
    delta = stats.quality_delta(paired, "lookahead", "rougeL")
    assert delta.value == pytest.approx(0.1) and (delta.n_units, delta.n_pairs) == (3, 3)
    assert delta.note == "no interval: 3 samples (< 10)" and math.isnan(delta.low)


def test_sampling_table_delta_and_counts_use_the_paired_units(tmp_path):
    rows = []
    for i in range(4):
        rows.append(_row("c", f"s{i}", "ar", do_sample=True, rougeL=0.9 if i == 0 else 0.1))
        rows.append(
            _row("c", f"s{i}", "lookahead", do_sample=True, error="boom")
            if i == 0
            else _row("c", f"s{i}", "lookahead", do_sample=True, rougeL=0.3)
        )
    table = tables.sampling_rouge_table(sweep_from_rows(_frame(tmp_path, rows)))
    ar, look = table.iloc[0], table.iloc[1]
    assert ar["ROUGE-L"] == "10.00" and look["ROUGE-L"] == "30.00"  # old: AR 30.00 (s0 included)
    assert look["Δ ROUGE-L (95% CI)"] == "20.00 (no interval: 3 samples (< 10))"
    assert (look["Samples"], look["Pairs"], look["Errors"]) == ("3", "3", "1")
    assert (ar["Samples"], ar["Errors"]) == ("3", "0")


# --- 5. intervals with honest units ------------------------------------------------------------


def _mt_bench_like(n_samples: int, *, turns: int = 2, repeats: int = 2, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_samples):
        for turn in range(turns):
            for repeat in range(repeats):
                t = float(rng.uniform(1.0, 3.0))
                rows.append(_row("c", f"q{i}", "ar", turn=turn, repeat=repeat, wall=t))
                rows.append(_row("c", f"q{i}", "lookahead", turn=turn, repeat=repeat, wall=t / rng.uniform(1.2, 2.0)))
    return rows


def test_the_minimum_is_a_named_constant():
    assert stats.MIN_CI_UNITS == 10
    assert stats.IntervalSettings().min_units == stats.MIN_CI_UNITS
    assert stats.interval_note(9) == "no interval: 9 samples (< 10)"
    assert stats.interval_note(10) == ""
    assert stats.interval_note(1, 2) == "no interval: 1 sample (< 2)"


def test_three_questions_give_no_interval_whatever_the_turns_and_repeats(tmp_path):
    rows = _frame(tmp_path, _mt_bench_like(3))  # 3 questions x 2 turns x 2 repeats = 12 pairs
    look = _record(aggregate.summarize(rows), "lookahead")
    assert (look["n_units"], look["n_pairs"]) == (3, 12)
    assert math.isfinite(look["speedup"]) and math.isnan(look["speedup_ci_low"]) and math.isnan(look["speedup_ci_high"])
    assert look["speedup_ci_note"] == "no interval: 3 samples (< 10)"
    # the same rows with the minimum lowered get an interval: the gate is the setting, nothing else
    lowered = _record(aggregate.summarize(rows, min_ci_units=3), "lookahead")
    assert (
        lowered["speedup_ci_low"] <= lowered["speedup"] <= lowered["speedup_ci_high"] and not lowered["speedup_ci_note"]
    )


def test_the_missing_interval_is_explained_in_tables_console_and_wandb(tmp_path):
    rows = _frame(tmp_path, _mt_bench_like(3))
    sweep = sweep_from_rows(rows)
    look = tables.ablation_wg_table(sweep).iloc[0]
    value = f"{_record(sweep.summary, 'lookahead')['speedup']:.2f}"
    assert look["Speedup, wall time (95% CI)"] == f"{value} (no interval: 3 samples (< 10))"
    assert "[" not in look["Speedup, wall time (95% CI)"]
    summary = runner_summary(rows, n_boot=100)
    assert summary["arms"]["lookahead"]["speedup_ci_low"] is None
    assert summary["arms"]["lookahead"]["speedup_ci_note"] == "no interval: 3 samples (< 10)"
    console = Console(width=200, record=True)
    console.print(summary_table(summary))
    assert "none: 3 samples (< 10)" in console.export_text()
    assert "too few samples" in table_legend(summary)
    notes = aggregate.flat_notes(sweep.summary)
    assert notes["lookahead/speedup_ci_note"] == "no interval: 3 samples (< 10)"
    assert "lookahead/speedup_ci_low" not in aggregate.flat_metrics(sweep.summary)
    assert aggregate.flat_metrics(sweep.summary)["lookahead/n_units"] == 3


def test_the_resampling_unit_is_the_sample_with_turns_and_repeats_nested(tmp_path):
    rows = _frame(tmp_path, _mt_bench_like(12, turns=2, repeats=3, seed=1))
    look = _record(aggregate.summarize(rows, n_boot=500), "lookahead")
    assert (look["n_units"], look["n_pairs"]) == (12, 72)
    per_sample = rows.pivot_table(index="sample_id", columns="arm", values="wall_time_s", aggfunc="sum")
    expected = bootstrap_ci(per_sample["ar"].to_numpy(), per_sample["lookahead"].to_numpy(), n_boot=500)
    assert (look["speedup_ci_low"], look["speedup_ci_high"]) == pytest.approx(expected)
    # a bootstrap over the 72 pairs as if independent would be narrower: that is not what we print
    keys = rows.pivot_table(index=["sample_id", "turn", "repeat"], columns="arm", values="wall_time_s")
    flat = bootstrap_ci(keys["ar"].to_numpy(), keys["lookahead"].to_numpy(), n_boot=500)
    assert flat[1] - flat[0] < expected[1] - expected[0]


def test_quality_interval_resamples_samples_not_turns():
    index = pd.MultiIndex.from_tuples([(f"q{i}", t) for i in range(12) for t in range(2)], names=["sample_id", "turn"])
    values = pd.Series(np.linspace(0.0, 1.0, 24), index=index)
    estimate = stats.mean_estimate(values, intervals=stats.IntervalSettings(n_boot=300))
    assert (estimate.n_units, estimate.n_pairs) == (12, 24) and estimate.value == pytest.approx(0.5)
    assert estimate.low <= estimate.value <= estimate.high
    few = stats.mean_estimate(values.iloc[:6])
    assert few.n_units == 3 and few.note == "no interval: 3 samples (< 10)" and math.isnan(few.high)


# --- 6. speedup under sampling -----------------------------------------------------------------


def _length_differs(tmp_path: Path, do_sample: bool) -> pd.DataFrame:
    """AR: 10 tokens in 1.0 s; lookahead: 20 tokens in 1.5 s (it went on for longer)."""
    rows = []
    for i in range(3):
        rows.append(_row("c", f"s{i}", "ar", do_sample=do_sample, wall=1.0, tokens=10))
        rows.append(_row("c", f"s{i}", "lookahead", do_sample=do_sample, wall=1.5, tokens=20, steps=10))
    return _frame(tmp_path / str(do_sample), rows)


def test_sampling_speedup_is_a_ratio_of_time_per_token(tmp_path):
    look = _record(aggregate.summarize(_length_differs(tmp_path, True)), "lookahead")
    assert look["speedup_basis"] == stats.BASIS_PER_TOKEN == "time per token"
    assert look["speedup"] == pytest.approx((1.0 / 10) / (1.5 / 20))  # 1.33, not the 0.67 of wall times
    summary = runner_summary(_length_differs(tmp_path / "again", True), n_boot=50)
    assert summary["arms"]["lookahead"]["speedup_per_sample_mean"] == pytest.approx(4 / 3)
    assert summary["arms"]["lookahead"]["speedup_basis"] == "time per token"


def test_greedy_speedup_stays_a_ratio_of_wall_times(tmp_path):
    look = _record(aggregate.summarize(_length_differs(tmp_path, False)), "lookahead")
    assert look["speedup_basis"] == "wall time" and look["speedup"] == pytest.approx(1.0 / 1.5)


def test_per_token_speedup_is_named_in_tables_and_console(tmp_path):
    sweep = sweep_from_rows(_length_differs(tmp_path, True))
    table = tables.sampling_rouge_table(sweep)
    assert "Speedup per token (95% CI)" in table.columns and "Speedup, wall time (95% CI)" not in table.columns
    assert "ratio of time per generated token" in tables.PAPER_TABLES["sampling_rouge"].caption
    assert tables.summary_display_table(sweep.summary)["Speedup of"].tolist() == ["time per token"] * 2
    summary = runner_summary(sweep.rows, n_boot=50)
    console = Console(width=200, record=True)
    console.print(summary_table(summary))
    assert "speedup/tok" in console.export_text() and "time per generated token" in table_legend(summary)


# --- 4. no winner's curse in the main table ----------------------------------------------------


def _two_config_rows(b_factor_y: float = 3.0, n: int = 10) -> tuple[list[dict[str, Any]], frozenset, frozenset]:
    """Cells X (W=7) and Y (W=1): X is faster on half A, Y far faster on half B and overall."""
    ids = [f"q{i}" for i in range(n)]
    half_a, half_b = stats.sample_halves(ids)
    rows = []
    for sample in ids:
        in_a = sample in half_a
        for cell, shape, speed in (
            ("X", (5, 7, 7), 1.5 if in_a else 1.0),
            ("Y", (5, 1, 7), 1.2 if in_a else b_factor_y),
        ):
            rows.append(_row(cell, sample, "ar", shape=shape, wall=1.0))
            rows.append(_row(cell, sample, "lookahead", shape=shape, wall=1.0 / speed))
    return rows, half_a, half_b


def _two_configs(tmp_path: Path, b_factor_y: float = 3.0) -> tuple[pd.DataFrame, frozenset, frozenset]:
    rows, half_a, half_b = _two_config_rows(b_factor_y)
    return _frame(tmp_path, rows), half_a, half_b


def test_sample_halves_are_balanced_deterministic_and_order_free():
    ids = [f"q{i}" for i in range(11)]
    a, b = stats.sample_halves(ids)
    assert (len(a), len(b)) == (6, 5) and not a & b and a | b == set(ids)
    assert stats.sample_halves(reversed(ids)) == (a, b)
    assert stats.sample_halves(["only"]) == (frozenset({"only"}), frozenset())


def test_split_half_selects_on_half_a_and_reports_half_b_only(tmp_path):
    rows, half_a, half_b = _two_configs(tmp_path)
    summary = aggregate.summarize(rows)
    overall = {c: _record(summary, "lookahead", c)["speedup"] for c in ("X", "Y")}
    assert overall["Y"] > overall["X"]  # selecting on all samples (the old rule) would pick Y
    choice = stats.choose_headline(rows, summary)
    assert choice[["cell_id", "selection", "n_candidates"]].values.tolist() == [["X", stats.SELECTION_SPLIT, 2]]
    assert choice["reported_samples"].iloc[0] == half_b
    headline = aggregate.headline_summary(rows, choice)
    look = _record(headline, "lookahead")
    assert look["n_units"] == len(half_b) and look["speedup"] == pytest.approx(1.0)  # X on half B only
    assert set(stats.headline_rows(rows, choice)["sample_id"]) == half_b


def test_selection_never_looks_at_the_reported_samples(tmp_path):
    # Whatever happens on half B, the choice stays: it is made on half A alone.
    for factor in (0.1, 1.0, 50.0):
        rows, _, _ = _two_configs(tmp_path / str(factor), b_factor_y=factor)
        choice = stats.choose_headline(rows, aggregate.summarize(rows, n_boot=10))
        assert choice["cell_id"].tolist() == ["X"]


def test_a_declared_headline_wins_over_any_measurement(tmp_path):
    rows, _, _ = _two_configs(tmp_path)
    summary = aggregate.summarize(rows)
    declared = stats.declared_cells(
        summary, {("unit", "Y"): {"ngram": 5, "window": 1, "guesses": 7, "prompt_as_reference": True}}
    )
    assert declared == {("unit", "Y")}
    choice = stats.choose_headline(rows, summary, declared)
    assert choice[["cell_id", "selection"]].values.tolist() == [["Y", stats.SELECTION_DECLARED]]
    assert choice["reported_samples"].iloc[0] is None
    assert _record(aggregate.headline_summary(rows, choice), "lookahead")["n_units"] == 10
    # a headline the cell does not have is not a declaration of that cell
    wrong = {("unit", "X"): {"ngram": 5, "window": 15, "guesses": 15, "prompt_as_reference": True}}
    assert stats.declared_cells(summary, wrong) == frozenset()


def test_a_headline_reusing_the_summary_equals_one_summarized_again(tmp_path):
    """Cells reported on all samples take their records from the sweep's summary; cells reported on half
    their samples are summarized again: the frame is the one a full recomputation gives."""
    rows, _, half_b = _two_configs(tmp_path)
    summary = aggregate.summarize(rows)
    split = stats.choose_headline(rows, summary)
    y_shape = {"ngram": 5, "window": 1, "guesses": 7, "prompt_as_reference": True}
    declared = stats.choose_headline(rows, summary, stats.declared_cells(summary, {("unit", "Y"): y_shape}))
    mixed = pd.concat([split, declared], ignore_index=True)
    assert mixed["reported_samples"].isna().tolist() == [False, True]
    again = aggregate.headline_summary(rows, mixed)
    reused = aggregate.headline_summary(rows, mixed, summary=summary)
    pd.testing.assert_frame_equal(reused, again)
    assert _record(reused, "lookahead", "X")["n_units"] == len(half_b)
    assert _record(reused, "lookahead", "Y")["n_units"] == 10


def test_a_single_candidate_needs_no_selection(tmp_path):
    rows, _, _ = _two_configs(tmp_path)
    only_x = rows[rows["cell_id"] == "X"]
    choice = stats.choose_headline(only_x, aggregate.summarize(only_x))
    assert choice[["cell_id", "selection"]].values.tolist() == [["X", stats.SELECTION_ONLY]]


def test_main_table_has_sweep_and_selection_columns(tmp_path):
    rows, _, half_b = _two_configs(tmp_path)
    table = tables.main_speedup_table(sweep_from_rows(rows))
    assert list(table.columns[:5]) == ["Sweep", "Model", "Dataset", "Mode", "Selection"]
    assert set(table["Mode"]) == {"eager"}
    assert set(table["Sweep"]) == {"unit"} and set(table["Selection"]) == {"best of 2 on half A"}
    assert set(table["Samples"]) == {str(len(half_b))} and set(table["W"]) == {"", "7"}
    caption = tables.PAPER_TABLES["main_speedup"].caption
    assert "half A" in caption and "half B" in caption and "declared" in caption


def test_load_sweep_reads_the_declared_headline_from_config_yaml(tmp_path):
    rows, _, _ = _two_config_rows()
    root = tmp_path / "unit"
    headline = {"ngram": 5, "window": 1, "guesses": 7, "prompt_as_reference": True}
    for cell in ("X", "Y"):
        writer = CellWriter(root / cell)
        for row in rows:
            if row["cell_id"] == cell:
                writer.append(row)
        writer.finalize()
        (root / cell / "config.yaml").write_text(yaml.safe_dump({"report": {"headline": headline}}))
    sweep = load_sweep(root, n_boot=50)
    assert [c.headline for c in sweep.cells] == [headline, headline]
    assert sweep.headline_choice[["cell_id", "selection"]].values.tolist() == [["Y", "declared"]]
    assert set(tables.main_speedup_table(sweep)["Selection"]) == {"declared"}


def test_sweep_from_rows_takes_the_declaration_from_the_cells(tmp_path):
    rows, _, _ = _two_configs(tmp_path)
    headline = {"ngram": 5, "window": 7, "guesses": 7, "prompt_as_reference": True}
    cells = [CellFiles("unit", c, tmp_path / c, None, None, None, headline) for c in ("X", "Y")]
    assert sweep_from_rows(rows, cells=cells).headline_choice["cell_id"].tolist() == ["X"]
    assert sweep_from_rows(rows).headline_choice["selection"].tolist() == [stats.SELECTION_SPLIT]


def test_figures_draw_no_error_bar_where_there_is_no_interval(sweep):
    from matplotlib.container import ErrorbarContainer

    from lade_bench.report.figures import FIGURES

    def error_bars(s) -> tuple[list, str]:
        ax = FIGURES["speedup_bars"].draw(s).axes[0]
        return [c for c in ax.containers if isinstance(c, ErrorbarContainer)], ax.get_xlabel()

    bars, label = error_bars(sweep)  # 2-3 samples per cell: no interval anywhere
    assert bars == [] and "too few samples for an interval" in label
    lowered = sweep_from_rows(sweep.rows, cells=sweep.cells, intervals=stats.IntervalSettings(n_boot=50, min_units=2))
    bars, label = error_bars(lowered)
    assert bars and "too few" not in label
