"""Per-cell summary numbers from rows with known values."""

from __future__ import annotations

import pandas as pd
import pytest

from lade_bench.results import COLUMN_NAMES, CellWriter, load_rows
from lade_bench.runner.execute import arm_order
from lade_bench.runner.rows import derive_seed
from lade_bench.runner.summary import summarize_cell


def _row(sample_id, arm, wall, tokens, steps, turn=0, **extra):
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(
        cell_id="c0",
        sweep="unit",
        model="m",
        dataset="d",
        sample_id=sample_id,
        turn=turn,
        arm=arm,
        repeat=0,
        prompt_as_reference=True,
        compiled=False,
        do_sample=False,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        seed=0,
    )
    if steps is not None:
        row.update(
            prompt_tokens=3,
            wall_time_s=wall,
            forward_time_s=wall,
            new_tokens=tokens,
            decode_steps=steps,
            accept_lengths=[1] * steps if arm == "ar" else [1] + [2] * (steps - 1),
            tokens_per_s=tokens / wall,
            compression_ratio=tokens / steps,
            output_ids=[0] * tokens,
            output_text="",
        )
    row.update(extra)
    return row


@pytest.fixture
def _frame(tmp_path):
    """Rows through the real writer and reader, so dtypes are those the runner summarises."""

    def write(rows) -> pd.DataFrame:
        writer = CellWriter(tmp_path / "cell")
        for row in rows:
            writer.append(row)
        writer.finalize()
        return load_rows(tmp_path / "cell")

    return write


def test_speedup_is_a_ratio_of_per_sample_sums(_frame):
    rows = _frame(
        [
            _row("a", "ar", 2.0, 10, 10),
            _row("a", "lookahead", 1.0, 10, 5, matches_ar=True),
            _row("a", "ar", 2.0, 10, 10, turn=1),
            _row("a", "lookahead", 1.0, 10, 5, turn=1, matches_ar=True),
            _row("b", "ar", 6.0, 30, 30),
            _row("b", "lookahead", 6.0, 30, 20, matches_ar=False),
        ]
    )
    summary = summarize_cell(rows, n_boot=200)
    la = summary["arms"]["lookahead"]
    assert summary["n_samples"] == 2 and summary["n_rows"] == 6 and summary["n_errors"] == 0
    assert la["speedup"] == pytest.approx((4.0 + 6.0) / (2.0 + 6.0))
    assert la["speedup_per_sample_mean"] == pytest.approx((2.0 + 1.0) / 2)
    assert la["paired_samples"] == 2 and (la["samples"], la["pairs"]) == (2, 3)
    # two samples are too few for an interval: none, and the reason instead
    assert la["speedup_ci_low"] is None and la["speedup_ci_high"] is None
    assert la["speedup_ci_note"] == "no interval: 2 samples (< 10)"
    assert la["speedup_basis"] == "wall time"
    lowered = summarize_cell(rows, n_boot=200, min_ci_units=2)["arms"]["lookahead"]
    assert 1.0 <= lowered["speedup_ci_low"] <= lowered["speedup"] <= lowered["speedup_ci_high"] <= 2.0
    assert lowered["speedup_ci_note"] is None
    assert la["compression_ratio"] == pytest.approx(50 / 30)
    assert la["tokens_per_s"] == pytest.approx(50 / 8.0)
    assert la["matches_ar"] == pytest.approx(2 / 3)
    assert summary["arms"]["ar"]["compression_ratio"] == 1.0
    assert "speedup" not in summary["arms"]["ar"]
    assert la["accept_length_histogram"] == {"1": 3, "2": 27}


def test_quality_means_and_pass_at_1(_frame):
    rows = _frame(
        [
            _row("a", "ar", 1.0, 5, 5, passed=True, rouge1=0.5, rouge2=0.1, rougeL=0.4, rougeLsum=0.4),
            _row("b", "ar", 1.0, 5, 5, passed=False, rouge1=0.3, rouge2=0.3, rougeL=0.2, rougeLsum=0.2),
            _row("a", "lookahead", 0.5, 5, 3, passed=True, accuracy=1.0),
            _row("b", "lookahead", 0.5, 5, 3, passed=True, accuracy=0.0),
        ]
    )
    summary = summarize_cell(rows, n_boot=50)
    assert summary["arms"]["ar"]["pass@1"] == 0.5
    assert summary["arms"]["ar"]["rouge1"] == pytest.approx(0.4)
    assert summary["arms"]["lookahead"]["pass@1"] == 1.0
    assert summary["arms"]["lookahead"]["accuracy"] == 0.5
    assert "matches_ar" not in summary["arms"]["lookahead"]  # no flags recorded (e.g. sampling)


def test_errored_rows_are_counted_not_timed(_frame):
    rows = _frame(
        [
            _row("a", "ar", 1.0, 5, 5),
            _row("a", "lookahead", 0.5, 5, 3),
            _row("b", "ar", 1.0, 5, 5),
            _row("b", "lookahead", None, None, None, error="OutOfMemoryError: ..."),
        ]
    )
    summary = summarize_cell(rows, n_boot=50)
    assert summary["n_errors"] == 1
    assert summary["arms"]["lookahead"]["errors"] == 1
    assert summary["arms"]["lookahead"]["paired_samples"] == 1
    assert summary["arms"]["lookahead"]["speedup"] == pytest.approx(2.0)
    # AR's numbers leave out sample b too, where its partner failed
    assert summary["arms"]["ar"]["samples"] == 1 and summary["arms"]["ar"]["wall_time_s"] == 1.0


def test_arm_order_alternates_and_seeds_are_deterministic():
    arms = ("ar", "lookahead", "jacobi")
    assert arm_order(arms, 0) == ["ar", "lookahead", "jacobi"]
    assert arm_order(arms, 1) == ["jacobi", "lookahead", "ar"]
    assert derive_seed(0, 3, 1) == derive_seed(0, 3, 1)
    seeds = {derive_seed(s, i, t) for s in range(3) for i in range(20) for t in range(2)}
    assert len(seeds) == 120 and all(0 <= s < 2**31 for s in seeds)


def test_a_resumed_cells_old_rows_are_rescored_as_the_report_rescores_them():
    """Issue 63: the committed Spec-Bench SmolLM2 math cell (rows from before schema 12) credited one output
    cut at the cap for its last number (10.0%); the report withdraws that credit, and so does the runner's
    own summary of the same rows (what summary.json and the console of a resumed cell show)."""
    from pathlib import Path

    archive = Path(__file__).resolve().parents[2] / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
    rows = load_rows(archive)
    math_rows = rows[
        (rows["model"] == "smollm2-135m-instruct")
        & rows["sample_id"].str.startswith("math_reasoning-")
        & (rows["arm"] == "prompt_lookup")
    ]
    (cell_id,) = math_rows["cell_id"].unique()  # the every-method cell
    cell = rows[rows["cell_id"] == cell_id]
    assert "at_cap" not in cell or cell["at_cap"].isna().all()  # rows from before schema 12
    assert cell.loc[cell["arm"] == "ar", "accuracy"].mean() == pytest.approx(0.1)
    summary = summarize_cell(cell, n_boot=50)
    assert summary["arms"]["ar"]["accuracy"] == 0.0
