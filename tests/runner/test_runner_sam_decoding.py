"""SAM-Decoding in the plan: bad settings refused before anything loads, naming them; its section
binds only its own cells; a backend without custom masks refused for its fallback tree."""

from __future__ import annotations

import pytest

from lade_bench.runner import plan_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sam_decoding.n_predicts=1"], "sam_decoding.n_predicts=1 is not allowed: use an integer >= 2"),
        (["sam_decoding.len_threshold=0"], "sam_decoding.len_threshold=0 is not allowed: use an integer >= 1"),
        (["sam_decoding.tree=2.2.3"], r"sam_decoding.tree='2.2.3' is not a known template"),
        (["sam_decoding.tree=[[0],[9]]"], r"sam_decoding.tree node 1 \[9\]: rank 9 is not in \[0, top_k=8\)"),
        (["attn_implementation=flash_attention_2"], "flash_attention_2"),
    ],
)
def test_bad_settings_are_refused_in_the_plan_naming_them(compose_cfg, overrides, message):
    with pytest.raises(CellConfigError, match=message):
        plan_cell(compose_cfg([*TINY, "arms=[ar,sam_decoding]", *overrides]))


def test_its_section_binds_only_its_cells_and_a_tree_of_token_recycling_is_allowed(compose_cfg):
    other = plan_cell(compose_cfg([*TINY, "arms=[ar,lookahead]", "sam_decoding.n_predicts=1"]))
    assert "sam_decoding" not in other.arms
    mine = plan_cell(compose_cfg([*TINY, "arms=[ar,sam_decoding]", "sam_decoding.tree=2.2.2"]))
    assert mine.arms == ("ar", "sam_decoding")
