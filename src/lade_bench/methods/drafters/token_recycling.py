"""Token Recycling's declaration; the engine is ``lade_bench.decoding.drafters.token_recycling``.

Its adjacency matrix persists across a cell's requests (the paper's setting): ``request.state`` is the
cell's ``RecyclingState`` (warm), without one a fresh matrix (cold).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lade_bench.decoding.drafters.token_recycling import (
    AUTHORS_LOOP,
    WHOLE_PROMPT_LOOP,
    TokenRecyclingSettings,
    new_recycling_state,
    token_recycling_generate,
    token_recycling_reach,
)
from lade_bench.methods.drafter_method import declare_drafter

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
)
