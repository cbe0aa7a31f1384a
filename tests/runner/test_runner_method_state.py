"""The warm-state protocol in a real cell: a stateful arm's state carried across samples, or not."""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch

from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.console import console_summary_sink
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY, console_states, interrupt_generation_after

# Two MT-Bench questions of two turns each: four requests per (arm, repeat), in the recorded order. A
# three-node template keeps the forwards small (the protocol is under test here, not the paper's tree).
TREE = ["token_recycling.top_k=2", "token_recycling.tree=[[0],[1],[0,0]]"]
STATEFUL = [*TINY, "arms=[ar,token_recycling]", "dataset.limit=2", "warmup=0", *TREE]
# Prompts shorter than this run out of memory at their first decode step (after the prefill has taught
# the state): of the cell's four prompts (53, 87, 78 and 108 tokens) only the first sample's first turn.
SHORT_PROMPT = 60
# The columns a Token Recycling row's state decides: how it decoded and how warm its state was.
STATE_DEPENDENT = ["sample_id", "turn", "output_ids", "decode_steps", "accept_lengths"]
STATE_DEPENDENT += ["state_requests_seen", "state_size"]


def _in_order(cell_dir):
    """Token Recycling's rows in the manifest's sample order (then turn, repeat), and that order."""
    manifest = json.loads((cell_dir / "manifest.json").read_text())
    order = manifest["method_state"]["sample_order"]
    rows = load_rows(cell_dir)
    recycling = rows[rows["arm"] == "token_recycling"].copy()
    recycling["position"] = recycling["sample_id"].map(order.index)
    return recycling.sort_values(["repeat", "position", "turn"]), manifest


def test_a_warm_cell_carries_each_repeats_state_across_samples_in_the_recorded_order(compose_cfg, tmp_path, capsys):
    outcome = run_cell(compose_cfg([*STATEFUL, "repeats=2", f"output_root={tmp_path}"]), sinks=[console_summary_sink])
    # The end-of-run table says how warm each arm's state ran: AR carries none.
    assert console_states(capsys.readouterr().out) == {"ar": "-", "token_recycling": "warm per cell 0-3"}
    rows, manifest = _in_order(outcome.cell_dir)
    assert manifest["method_state"]["mode"] == "warm" and manifest["method_state"]["arms"] == ["token_recycling"]
    assert manifest["method_state"]["scope"] == "cell" and "warmup" not in manifest["method_state"]
    assert len(manifest["method_state"]["sample_order"]) == 2
    assert rows["error"].isna().all() and rows["matches_ar"].all()  # float64: exact whatever the state
    for repeat in (0, 1):  # each repeat has its own state, which learnt from the same earlier requests
        mine = rows[rows["repeat"] == repeat]
        assert mine["state_requests_seen"].tolist() == list(range(4))
        sizes = mine["state_size"].tolist()
        assert sizes[0] == 0 and sizes == sorted(sizes) and sizes[-1] > 0
    first, second = (rows[rows["repeat"] == r]["state_size"].tolist() for r in (0, 1))
    assert first == second
    all_rows = load_rows(outcome.cell_dir)
    ar = all_rows[all_rows["arm"] == "ar"]
    assert ar["state_requests_seen"].isna().all() and ar["state_size"].isna().all()
    # Every arm's tau and width per decode step, from its accept_lengths and step_tokens.
    assert (ar["mean_accepted"] == 1.0).all() and (ar["mean_draft_width"] == 1.0).all()
    assert (rows["mean_draft_width"] == 4.0).all()  # the template's three nodes and cur
    assert (rows["mean_accepted"] >= 1.0).all()


def test_a_cold_cell_gives_each_sample_a_fresh_state(compose_cfg, tmp_path, capsys):
    cfg = compose_cfg([*STATEFUL, "method_state.mode=cold", f"output_root={tmp_path}"])
    outcome = run_cell(cfg, sinks=[console_summary_sink])
    assert console_states(capsys.readouterr().out)["token_recycling"] == "cold per cell 0-1"
    rows, manifest = _in_order(outcome.cell_dir)
    assert manifest["method_state"]["mode"] == "cold"
    assert rows["state_requests_seen"].tolist() == rows["turn"].tolist() == [0, 1] * 2
    assert (rows[rows["turn"] == 0]["state_size"] == 0).all()
    assert rows["matches_ar"].all()


def test_warm_or_cold_enters_the_cell_id_only_of_cells_with_a_stateful_arm(compose_cfg, tmp_path):
    def cell_id(*overrides):
        return plan_cell(compose_cfg([*TINY, f"output_root={tmp_path}", *overrides])).cell_id

    stateful = "arms=[ar,token_recycling]"
    assert cell_id(stateful) != cell_id(stateful, "method_state.mode=cold")
    assert cell_id("arms=[ar,lookahead]") == cell_id("arms=[ar,lookahead]", "method_state.mode=cold")
    plan = plan_cell(compose_cfg([*TINY, f"output_root={tmp_path}"]))
    assert "method_state" not in plan.semantic


def test_a_resumed_cell_replays_its_stored_rows_into_the_state(compose_cfg, tmp_path, monkeypatch):
    cfg = compose_cfg([*STATEFUL, f"output_root={tmp_path}"])
    interrupt_generation_after(monkeypatch, 3, lambda: run_cell(cfg))  # the first sample's two turns stored
    outcome = run_cell(cfg)
    rows, _ = _in_order(outcome.cell_dir)
    # The same warmth as an uninterrupted run: the stored generations were replayed into the state.
    assert rows["state_requests_seen"].tolist() == list(range(4))
    assert rows["matches_ar"].all()


def _out_of_memory_on_short_prompts(monkeypatch) -> None:
    """Token Recycling fails on short prompts as an out-of-memory would, at the first decode step; each
    message counts the failures, as a real one carries figures of the moment (free memory, a pid)."""
    from lade_bench.decoding.drafters.token_recycling import TokenRecyclingDrafter

    propose, failures = TokenRecyclingDrafter.propose, itertools.count(1)

    def propose_or_fail(self, context):
        if len(context) < SHORT_PROMPT:
            raise torch.OutOfMemoryError(f"injected failure {next(failures)} at {len(context)} tokens")
        return propose(self, context)

    monkeypatch.setattr(TokenRecyclingDrafter, "propose", propose_or_fail)


def _state_dependent(rows) -> list[tuple]:
    """``STATE_DEPENDENT`` of each row, lists as lists and missing values as None."""

    def plain(value):
        if isinstance(value, (list, tuple, np.ndarray)):
            return [int(v) for v in value]
        return None if pd.isna(value) else value

    return [tuple(map(plain, row)) for row in rows[STATE_DEPENDENT].itertuples(index=False)]


def test_a_cell_resumed_after_a_failed_generation_replays_the_failure_into_the_state(
    compose_cfg, tmp_path, monkeypatch
):
    _out_of_memory_on_short_prompts(monkeypatch)
    # The prefill's logits refresh the matrix (not the authors' default), so the failed request teaches it.
    stateful = [*STATEFUL, "token_recycling.prefill_refresh=true"]
    whole, _ = _in_order(run_cell(compose_cfg([*stateful, f"output_root={tmp_path / 'whole'}"])).cell_dir)
    # The first sample's first turn failed (its second was then not generated); the next request's
    # state counts the failed one and holds what its prefill taught.
    assert whole["error"].notna().tolist() == [True, True, False, False]
    assert whole["error"].iloc[0].startswith("OutOfMemoryError: injected failure")
    assert whole["state_requests_seen"].iloc[2] == 1 and whole["state_size"].iloc[2] > 0

    cfg = compose_cfg([*stateful, f"output_root={tmp_path / 'resumed'}"])
    interrupt_generation_after(monkeypatch, 2, lambda: run_cell(cfg))  # killed right after the failure
    resumed, _ = _in_order(run_cell(cfg).cell_dir)
    assert resumed["error"].notna().tolist() == [True, True, False, False]
    assert _state_dependent(resumed) == _state_dependent(whole)


def test_a_resume_whose_stored_output_was_edited_is_refused_before_any_row_is_written(
    compose_cfg, tmp_path, monkeypatch
):
    cfg = compose_cfg([*STATEFUL, f"output_root={tmp_path}"])
    interrupt_generation_after(monkeypatch, 2, lambda: run_cell(cfg))  # the first sample's first turn stored
    rows_file = next(tmp_path.glob("*/*/rows.jsonl"))
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    edited = next(row for row in rows if row["arm"] == "token_recycling")
    stored_ids = list(edited["output_ids"])
    edited["output_ids"][-1] += 1
    rows_file.write_text("".join(json.dumps(row) + "\n" for row in rows))
    before = rows_file.read_bytes()
    cell_dir = rows_file.parent
    message = (
        rf"cell {edited['cell_id']} cannot resume: replaying its stored row of sample {edited['sample_id']} "
        rf"turn 0 arm token_recycling repeat 0 into the token_recycling state gave another result: output_ids "
        rf"is {re.escape(repr(edited['output_ids']))} in the stored row, {re.escape(repr(stored_ids))} replayed\. "
        rf".*mv '{re.escape(str(cell_dir))}' '{re.escape(str(cell_dir))}\.old'"
    )
    with pytest.raises(CellConfigError, match=message):  # runner.replay.ReplayMismatchError
        run_cell(cfg)
    assert rows_file.read_bytes() == before
