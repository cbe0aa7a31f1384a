"""Greedy mismatches in a cell: their position and margins in the rows, counts in the summary, errors flagged."""

from __future__ import annotations

import pytest

import lade_bench.decoding
from lade_bench.decoding import lookahead_generate
from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.console import mismatch_lines
from lade_bench.runner.mismatch import mismatch_columns
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY

MISMATCH = ("divergence_index", "ar_margin", "arm_margin", "engine_error")


def test_exact_cell_records_no_divergence(compose_cfg, tmp_path):
    outcome = run_cell(compose_cfg([*TINY, f"output_root={tmp_path}"]))
    rows = load_rows(outcome.cell_dir).set_index(["turn", "arm"])
    lookahead = rows.xs("lookahead", level="arm")
    assert (lookahead["engine_error"] == False).all()  # noqa: E712 - a column of Python bools/None
    assert lookahead[["divergence_index", "ar_margin", "arm_margin"]].isna().all().all()
    assert rows.xs("ar", level="arm")[list(MISMATCH)].isna().all().all()
    stats = outcome.summary["arms"]["lookahead"]
    assert stats["mismatches"] == 0 and stats["engine_errors"] == 0 and "arm_margin_max" not in stats


def test_forced_wrong_token_is_flagged_as_an_engine_error(compose_cfg, tmp_path, monkeypatch, caplog):
    """A lookahead arm that emits a bad token at position 3: not a near-tie, so an engine error."""

    def broken(model, prompt, params, budget, **kwargs):
        result = lookahead_generate(model, prompt, params, budget, **kwargs)
        result.tokens[3] = (result.tokens[3] + 7) % 100 + 3
        return result

    # The built-in method looks the engine up when it runs (lade_bench.methods.builtin).
    monkeypatch.setattr(lade_bench.decoding, "lookahead_generate", broken)
    cfg = compose_cfg([*TINY, "mismatch.margin_tolerance=0.5", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    rows = load_rows(outcome.cell_dir)
    first_turn = rows[(rows["arm"] == "lookahead") & (rows["turn"] == 0)].iloc[0]
    assert not first_turn["matches_ar"] and first_turn["divergence_index"] == 3
    assert first_turn["arm_margin"] > 0.5 and first_turn["engine_error"]
    stats = outcome.summary["arms"]["lookahead"]
    assert stats["engine_errors"] >= 1 and stats["arm_margin_max"] > 0.5
    assert any("engine error: lookahead on sample" in r.getMessage() for r in caplog.records)
    assert "ENGINE ERROR" in "\n".join(mismatch_lines(outcome.summary))


def test_a_later_turn_after_a_different_answer_gets_no_margins():
    columns = mismatch_columns(None, [1, 2, 3], [5, 6, 7], [1, 2, 4], [5, 9, 7], tolerance=1.0)
    assert columns == {"divergence_index": 1, "ar_margin": None, "arm_margin": None, "engine_error": None}


def test_tolerance_must_be_a_non_negative_number(compose_cfg):
    with pytest.raises(CellConfigError, match=r"mismatch.margin_tolerance=-1.0 is not allowed"):
        plan_cell(compose_cfg([*TINY, "mismatch.margin_tolerance=-1"]))
