"""Token Recycling's parts: the tree template, the adjacency matrix's refresh, the breadth-first draft."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lade_bench.decoding import DecodingConfigError
from lade_bench.decoding.drafters.token_recycling import (
    TOKEN_RECYCLING_TOP_K,
    TOKEN_RECYCLING_TREE,
    RecyclingState,
    tree_template,
)


def test_the_paper_template_has_80_nodes_of_depth_6_each_after_its_parent():
    template = tree_template(TOKEN_RECYCLING_TREE, TOKEN_RECYCLING_TOP_K)
    assert (template.size, template.depth) == (80, 6)
    # Nodes per depth in the authors' "2.2.2" (model/recycling/tree_template_.py).
    assert [len(nodes) for nodes, _, _ in template.layers] == [8, 21, 25, 15, 8, 3]
    assert template.parents[0] == -1
    for node, path in enumerate(template.paths, start=1):
        parent = template.parents[node]
        assert 0 <= parent < node
        assert (template.paths[parent - 1] if parent else ()) == path[:-1]


def _state_with(rows: dict[int, list[int]], vocab: int = 32, top_k: int = 3) -> RecyclingState:
    """A state whose row ``t`` has the successors ``rows[t]`` (best first), set through ``refresh``."""
    state = RecyclingState(top_k)
    ids = list(rows)
    logits = torch.zeros(len(ids), vocab, dtype=torch.float64)
    for i, successors in enumerate(rows.values()):
        for rank, token in enumerate(successors):
            logits[i, token] = 10.0 - rank
    state.refresh(ids, logits)
    return state


def test_refresh_writes_each_fed_token_row_with_its_top_k_and_the_last_position_wins():
    state = _state_with({4: [7, 9, 1], 5: [2, 3, 8]})
    assert state.adjacency is not None
    assert state.adjacency[4].tolist() == [7, 9, 1] and state.adjacency[5].tolist() == [2, 3, 8]
    assert state.size() == 2
    logits = torch.zeros(2, 32)
    logits[0, 11], logits[1, 12] = 5.0, 5.0
    state.refresh([4, 4], logits)  # token 4 fed twice: its row is the second position's
    assert state.adjacency[4, 0] == 12
    assert state.size() == 2


def test_refresh_refuses_rows_that_do_not_match_and_another_vocabulary():
    state = RecyclingState(2)
    with pytest.raises(ValueError, match="3 input ids for 2 logits rows"):
        state.refresh([1, 2, 3], torch.zeros(2, 10))
    state.refresh([1], torch.zeros(1, 10))
    with pytest.raises(ValueError, match="vocabulary of 10 tokens and the model's logits have 12"):
        state.refresh([1], torch.zeros(1, 12))


def test_the_draft_expands_the_template_breadth_first_through_the_matrix():
    template = tree_template([[0], [1], [0, 0], [0, 2], [1, 0], [0, 2, 1]], 3)
    state = _state_with({4: [7, 9, 1], 7: [2, 3, 8], 9: [5, 6, 0], 8: [13, 14, 15]})
    tokens = state.expand(4, template).tolist()
    # root 4; (0)=adj[4][0]=7; (1)=9; (0,0)=adj[7][0]=2; (0,2)=adj[7][2]=8; (1,0)=adj[9][0]=5; (0,2,1)=adj[8][1]=14
    assert tokens == [4, 7, 9, 2, 8, 5, 14]
    assert template.parents == (-1, 0, 0, 1, 1, 2, 4)


def test_an_empty_state_drafts_token_zero_like_the_authors_zero_matrix():
    template = tree_template([[0], [0, 0]], 2)
    assert RecyclingState(2).expand(6, template).tolist() == [6, 0, 0]
    assert RecyclingState(2).size() == 0


@pytest.mark.parametrize(
    ("tree", "top_k", "message"),
    [
        ("2.2.3", 8, r"token_recycling.tree='2.2.3' is not a known template; use one of \['2.2.2'\]"),
        ([], 8, "token_recycling.tree is empty"),
        ([[0], [8]], 8, r"node 1 \[8\]: rank 8 is not in \[0, top_k=8\)"),
        ([[0], [0]], 8, r"node 1 \[0\] repeats an earlier node"),
        ([[0, 1], [0]], 8, r"node 0 \[0, 1\] comes before its parent \[0\]"),
        ([[0], []], 8, "node 1 is the empty path"),
        ("2.2.2", 0, "token_recycling.top_k=0 is not allowed: use an integer >= 1"),
        ("2.2.2", 4, r"rank 4 is not in \[0, top_k=4\)"),  # the paper's template needs k = 8
    ],
)
def test_a_bad_template_is_refused_naming_the_node(tree, top_k, message):
    with pytest.raises(DecodingConfigError, match=message):
        tree_template(tree, top_k)


def test_the_prefill_refreshes_the_prompt_rows_aligned_with_the_prompt_end():
    from lade_bench.decoding.drafters.token_recycling import TokenRecyclingDrafter

    state = RecyclingState(1)
    drafter = TokenRecyclingDrafter(state, tree_template([[0]], 1))
    logits = torch.zeros(1, 2, 16)
    logits[0, 0, 3], logits[0, 1, 9] = 1.0, 1.0
    drafter.prefill_observer([5, 6, 7])(logits)  # two rows: the prompt's last two positions
    assert state.adjacency is not None
    assert state.adjacency[6, 0] == 3 and state.adjacency[7, 0] == 9 and state.size() == 2
    assert np.count_nonzero(state.adjacency[5]) == 0


def test_the_configuration_label_names_each_deviation_from_the_authors_loop():
    import dataclasses
    import json
    from pathlib import Path

    import yaml

    from lade_bench.decoding.drafters.token_recycling import TokenRecyclingSettings
    from lade_bench.methods.registry import configuration_label

    assert configuration_label("token_recycling", dataclasses.asdict(TokenRecyclingSettings())) == "Token Recycling"
    # Every committed cell recorded its section before the settings existed: it ran our earlier loop.
    cells = Path(__file__).resolve().parents[2] / "paper_figures/spec_bench/rows/spec_bench/cells.json"
    recorded = [yaml.safe_load(cell["config_text"]) for cell in json.loads(cells.read_text())]
    sections = [config["token_recycling"] for config in recorded if "token_recycling" in config["arms"]]
    assert sections and {configuration_label("token_recycling", s) for s in sections} == {
        "Token Recycling (+ prefill refresh, whole-prompt prefill)"
    }
    defaults = dataclasses.asdict(TokenRecyclingSettings())
    assert configuration_label("token_recycling", {**defaults, "prefill_refresh": True}) == (
        "Token Recycling (+ prefill refresh)"
    )
    assert configuration_label("token_recycling", {**defaults, "loop": "whole_prompt_prefill"}) == (
        "Token Recycling (whole-prompt prefill)"
    )
