"""The warm-state protocol in a real cell: a stateful arm's state carried across samples, or not."""

from __future__ import annotations

import json

from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, run_cell

from .conftest import TINY, interrupt_generation_after

# Two MT-Bench questions of two turns each: four requests per (arm, repeat), in the recorded order. A
# three-node template keeps the forwards small (the protocol is under test here, not the paper's tree).
TREE = ["token_recycling.top_k=2", "token_recycling.tree=[[0],[1],[0,0]]"]
STATEFUL = [*TINY, "arms=[ar,token_recycling]", "dataset.limit=2", "warmup=0", *TREE]


def _in_order(cell_dir):
    """Token Recycling's rows in the manifest's sample order (then turn, repeat), and that order."""
    manifest = json.loads((cell_dir / "manifest.json").read_text())
    order = manifest["method_state"]["sample_order"]
    rows = load_rows(cell_dir)
    recycling = rows[rows["arm"] == "token_recycling"].copy()
    recycling["position"] = recycling["sample_id"].map(order.index)
    return recycling.sort_values(["repeat", "position", "turn"]), manifest


def test_a_warm_cell_carries_each_repeats_state_across_samples_in_the_recorded_order(compose_cfg, tmp_path):
    outcome = run_cell(compose_cfg([*STATEFUL, "repeats=2", f"output_root={tmp_path}"]))
    rows, manifest = _in_order(outcome.cell_dir)
    assert manifest["method_state"]["mode"] == "warm" and manifest["method_state"]["arms"] == ["token_recycling"]
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


def test_a_cold_cell_gives_each_sample_a_fresh_state(compose_cfg, tmp_path):
    outcome = run_cell(compose_cfg([*STATEFUL, "method_state.mode=cold", f"output_root={tmp_path}"]))
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
