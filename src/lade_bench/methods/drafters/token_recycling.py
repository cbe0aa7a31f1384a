"""Token Recycling's declaration; the engine is ``lade_bench.decoding.drafters.token_recycling``.

Its adjacency matrix persists across a cell's requests (the paper's setting): ``request.state`` is the
cell's ``RecyclingState`` (warm), without one a fresh matrix (cold).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lade_bench.decoding.drafters.token_recycling import (
    AUTHORS_LOOP,
    TOKEN_RECYCLING_TREE,
    TREE_TEMPLATES,
    WHOLE_PROMPT_LOOP,
    TokenRecyclingSettings,
    new_recycling_state,
    token_recycling_generate,
    token_recycling_reach,
)
from lade_bench.methods.budget import Budget, subtree
from lade_bench.methods.drafter_method import declare_drafter

# The tree: the authors' 80-node template and smaller ones cut from it (its nodes with every rank below r,
# at most d deep: 32 nodes r<4 d<=3, 19 nodes r<2 d<=4, 12 nodes r<3 d<=2, a 6-token chain r<1), so a
# device whose step cost grows past ~16 tokens can trade draft width for step cost.
_AUTHORS_TREE = TREE_TEMPLATES[TOKEN_RECYCLING_TREE]
BUDGET = Budget(
    {
        "tree": (
            TOKEN_RECYCLING_TREE,
            subtree(_AUTHORS_TREE, 4, 3),
            subtree(_AUTHORS_TREE, 2, 4),
            subtree(_AUTHORS_TREE, 3, 2),
            subtree(_AUTHORS_TREE, 1, 6),
        )
    }
)

# The words naming each deviation from the authors' loop in a label.
PREFILL_REFRESH_WORDS = "+ prefill refresh"
WHOLE_PROMPT_WORDS = "whole-prompt prefill"


def describe_token_recycling(section: Mapping[str, Any]) -> str:
    """The label of the Token Recycling configuration a cell recorded (``Method.describe``).

    ``Token Recycling`` at the authors' loop; each deviation named: ``Token Recycling (+ prefill
    refresh)``, ``Token Recycling (whole-prompt prefill)``, both for our loop before issue 65. A section
    recorded before a setting existed (every Token Recycling cell committed before issue 65) lacks its key
    and ran our earlier loop: the prefill's logits refreshing the matrix, the whole prompt prefilled.
    """
    deviations = []
    if section.get("prefill_refresh", True):
        deviations.append(PREFILL_REFRESH_WORDS)
    if section.get("loop", WHOLE_PROMPT_LOOP) != AUTHORS_LOOP:
        deviations.append(WHOLE_PROMPT_WORDS)
    return "Token Recycling" + (f" ({', '.join(deviations)})" if deviations else "")


DRAFTER = declare_drafter(
    "token_recycling",
    label="Token Recycling",
    color="#e377c2",
    custom_mask=True,  # its draft is the template's tree
    settings=TokenRecyclingSettings,
    engine=token_recycling_generate,
    reach=token_recycling_reach,
    new_state=new_recycling_state,
    describe=describe_token_recycling,  # "Token Recycling" at the authors' loop, each deviation named
    after="ar_pp",
    budget=BUDGET,
)
