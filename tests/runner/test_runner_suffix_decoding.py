"""SuffixDecoding in a real cell: exact against AR, its global suffix tree warmed by the samples before."""

from __future__ import annotations

import json

import pytest

from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY


def test_a_cell_matches_ar_and_its_global_tree_holds_the_newest_outputs(compose_cfg, tmp_path):
    # Two MT-Bench questions of two turns: four requests, in the recorded order; the global tree keeps
    # two outputs, so it evicts in the cell.
    cfg = compose_cfg(
        [
            *TINY,
            "arms=[ar,suffix_decoding]",
            "dataset.limit=2",
            "warmup=0",
            "suffix_decoding.max_cached_requests=2",
            f"output_root={tmp_path}",
        ]
    )
    outcome = run_cell(cfg)
    manifest = json.loads((outcome.cell_dir / "manifest.json").read_text())
    assert manifest["method_state"]["arms"] == ["suffix_decoding"]
    order = manifest["method_state"]["sample_order"]
    rows = load_rows(outcome.cell_dir)
    assert rows["error"].isna().all() and rows[rows["arm"] != "ar"]["matches_ar"].all()
    suffix = rows[rows["arm"] == "suffix_decoding"].copy()
    suffix["position"] = suffix["sample_id"].map(order.index)
    suffix = suffix.sort_values(["position", "turn"])
    assert suffix["state_requests_seen"].tolist() == [0, 1, 2, 3]
    # Warmth at each request's start: the output tokens of the (at most two) requests before it.
    outputs = suffix["new_tokens"].tolist()
    assert suffix["state_size"].tolist() == [0, outputs[0], outputs[0] + outputs[1], outputs[1] + outputs[2]]
    assert (suffix["mean_accepted"] >= 1.0).all() and (suffix["mean_draft_width"] >= 1.0).all()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["suffix_decoding.max_tree_depth=0"], "suffix_decoding.max_tree_depth=0 is not allowed: use an integer >= 1"),
        (["suffix_decoding.min_token_prob=2.0"], "suffix_decoding.min_token_prob=2.0 is not allowed"),
        (
            ["suffix_decoding.use_tree_spec=true", "attn_implementation=flash_attention_2"],
            "suffix_decoding.use_tree_spec=true feeds a tree under a custom attention mask",
        ),
    ],
)
def test_bad_settings_are_refused_in_the_plan_naming_them(compose_cfg, overrides, message):
    with pytest.raises(CellConfigError, match=message):
        plan_cell(compose_cfg([*TINY, "arms=[ar,suffix_decoding]", *overrides]))


def test_a_chain_runs_on_any_attention_backend_and_a_bad_setting_binds_only_its_cells(compose_cfg):
    chain = plan_cell(compose_cfg([*TINY, "arms=[ar,suffix_decoding]", "attn_implementation=flash_attention_2"]))
    assert chain.arms == ("ar", "suffix_decoding")
    other = plan_cell(compose_cfg([*TINY, "arms=[ar,lookahead]", "suffix_decoding.max_tree_depth=0"]))
    assert "suffix_decoding" not in other.arms
