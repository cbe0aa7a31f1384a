"""PIA's declaration; the engine is ``lade_bench.decoding.drafters.pia`` (which cites the paper and the
authors' code and states the defaults).

Its trie of output n-grams persists across a cell's requests (the authors keep it across requests):
``request.state`` is the cell's ``PiaState`` (warm), without one a fresh trie (cold). Its tables' label
says when a cell ran our earlier draft rule instead of the authors' (``describe_pia``).
"""

from collections.abc import Mapping
from typing import Any

from lade_bench.decoding.drafters.pia import (
    PIA_BRANCH_LENGTH,
    PIA_DECODING_LENGTH,
    PiaSettings,
    new_pia_state,
    pia_generate,
    pia_reach,
)
from lade_bench.methods.budget import Budget
from lade_bench.methods.drafter_method import declare_drafter

LABEL = "PIA (Ant trie lookahead)"
# The decoding length (draft nodes per step, cur included: the authors' 64, down to 8) and the branch
# length (deepest draft node: the authors' 12, and 4).
BUDGET = Budget({"decoding_length": (8, 16, 32, PIA_DECODING_LENGTH), "branch_length": (4, PIA_BRANCH_LENGTH)})


def describe_pia(section: Mapping[str, Any]) -> str:
    """The label of the PIA configuration a cell ran, from its recorded ``pia`` section.

    The plain label at the authors' rule; ``draft_earlier_prompts`` false says so. A cell recorded before
    the key existed lacks it and ran without those nodes (our rule then).
    """
    if section.get("draft_earlier_prompts", False):
        return LABEL
    return "PIA (Ant trie lookahead, earlier prompts not drafted)"


DRAFTER = declare_drafter(
    "pia",
    label=LABEL,
    color="#8c6d31",
    custom_mask=True,  # its draft is a multi-branch tree
    settings=PiaSettings,
    engine=pia_generate,
    reach=pia_reach,
    new_state=new_pia_state,
    describe=describe_pia,  # our earlier draft rule named where a cell ran it
    after="sam_decoding",
    budget=BUDGET,
)
