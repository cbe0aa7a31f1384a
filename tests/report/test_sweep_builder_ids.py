"""The synthetic sweeps of the report tests follow the runner's id and name rule (issue 49): a cell
without a lookahead arm neither hashes nor names a lookahead shape."""

from __future__ import annotations

from dataclasses import replace

from lade_bench.results import cell_id

from .sweep_builder import CELLS, CellSpec, cell_folder_name, semantic_config


def test_a_synthetic_cell_without_lookahead_neither_hashes_nor_names_its_shape():
    without = CellSpec("toy_sum", 3, 3, 3, arms=("ar", "prompt_lookup"))
    assert "lookahead" not in semantic_config(without) and "prompt_lookup" in semantic_config(without)
    assert cell_folder_name(without) == "tiny-llama-toy_sum-greedy"
    # Another lookahead shape is the same cell when no arm runs lookahead, and another when one does.
    assert cell_id(semantic_config(without)) == cell_id(semantic_config(replace(without, ngram=5, window=7)))
    with_lookahead = CELLS[0]
    assert "lookahead" in with_lookahead.arms
    assert semantic_config(with_lookahead)["lookahead"] == {
        "ngram": 3,
        "window": 1,
        "guesses": 1,
        "prompt_as_reference": True,
    }
    assert cell_folder_name(with_lookahead) == "tiny-llama-toy_sum-N3W1G1ref-greedy"
    assert cell_id(semantic_config(with_lookahead)) != cell_id(semantic_config(replace(with_lookahead, ngram=5)))
