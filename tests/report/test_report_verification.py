"""Flat and trie verification in the report: kept apart, step tokens measured, older rows read as flat.

Rows go through the real writer and reader (as in ``test_report_statistics``).
"""

from __future__ import annotations

import math

import pytest

from lade_bench import stats
from lade_bench.report import aggregate, tables

from .test_report_statistics import _frame, _row

SHAPE = (3, 2, 2)  # (W + G)(N - 1) = 8 input tokens per flat step


def _cell(cell: str, verification: str | None, step_tokens: list[int] | None) -> list[dict]:
    """Ten samples of AR and lookahead; lookahead rows of 4 steps with these per-forward counts."""
    rows = []
    for i in range(10):
        sample = f"s{i}"
        for arm in ("ar", "lookahead"):
            steps = 10 if arm == "ar" else 4
            counts = [3] + [1] * 9 if arm == "ar" else step_tokens
            rows.append(
                _row(cell, sample, arm, shape=SHAPE, steps=steps, wall=1.0 if arm == "ar" else 0.8,
                     verification=verification, step_tokens=counts)
            )  # fmt: skip
    return rows


@pytest.fixture()
def rows(tmp_path):
    return _frame(
        tmp_path,
        [
            *_cell("FLAT", "flat", [9, 8, 8, 8]),
            *_cell("TRIE", "trie", [9, 7, 6, 5]),
            *_cell("OLD", None, None),  # written before schema v4: no layout, no counts
        ],
    )


def test_summary_keeps_layouts_apart_and_measures_step_tokens(rows):
    summary = aggregate.summarize(rows, n_boot=10).set_index(["cell_id", "arm"])
    assert summary.loc[("FLAT", "lookahead"), "verification"] == "flat"
    assert summary.loc[("TRIE", "lookahead"), "verification"] == "trie"
    assert summary.loc[("OLD", "lookahead"), "verification"] == "flat"
    # Measured: input tokens per forward after the prefill.
    assert summary.loc[("FLAT", "lookahead"), "step_tokens_mean"] == 8.0
    assert summary.loc[("TRIE", "lookahead"), "step_tokens_mean"] == 6.0
    assert summary.loc[("TRIE", "ar"), "step_tokens_mean"] == 1.0
    assert math.isnan(summary.loc[("OLD", "lookahead"), "step_tokens_mean"])
    # Step size used for predictions: the paper's (W + G)(N - 1) for flat, the measured mean for a trie.
    assert summary.loc[("FLAT", "lookahead"), "tokens_per_step"] == 8.0
    assert summary.loc[("OLD", "lookahead"), "tokens_per_step"] == 8.0
    assert summary.loc[("TRIE", "lookahead"), "tokens_per_step"] == 6.0


def test_a_declared_headline_names_its_layout(rows):
    summary = aggregate.summarize(rows, n_boot=10)
    shape = dict(zip(("ngram", "window", "guesses"), SHAPE, strict=True), prompt_as_reference=True)
    headlines = {("unit", cell): shape for cell in ("FLAT", "TRIE", "OLD")}
    assert stats.declared_cells(summary, headlines) == {("unit", "FLAT"), ("unit", "OLD")}
    trie = {key: {**shape, "verification": "trie"} for key in headlines}
    assert stats.declared_cells(summary, trie) == {("unit", "TRIE")}


def test_tables_name_the_layout_only_when_a_trie_is_there(rows):
    summary = aggregate.summarize(rows, n_boot=10)
    both = tables.summary_display_table(summary)
    assert set(both[tables.VERIFICATION_HEADER]) == {"flat", "trie"}
    flat_only = tables.summary_display_table(summary[summary["cell_id"] != "TRIE"])
    assert tables.VERIFICATION_HEADER not in flat_only
