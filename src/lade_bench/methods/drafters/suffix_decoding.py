"""SuffixDecoding's declaration; the engine is ``lade_bench.decoding.drafters.suffix_decoding``.

Its global suffix tree over earlier outputs persists across a cell's requests (the paper's setting):
``request.state`` is the cell's ``SuffixDecodingState`` (warm), without one a fresh tree (cold).
"""

from __future__ import annotations

from lade_bench.decoding.core.params import MASK_CAPABLE_ATTENTION
from lade_bench.decoding.drafters.suffix_decoding import (
    SuffixSettings,
    new_suffix_state,
    suffix_decoding_generate,
    suffix_decoding_reach,
)
from lade_bench.methods.drafter_method import declare_drafter
from lade_bench.methods.registry import CellFacts


def tree_needs_a_mask(settings: SuffixSettings, cell: CellFacts) -> str | None:
    """A tree draft (``use_tree_spec``) on an attention backend that takes no custom mask, named with the way out."""
    attention = cell.attn_implementation
    if settings.use_tree_spec and attention not in MASK_CAPABLE_ATTENTION:
        return (
            f"suffix_decoding.use_tree_spec=true feeds a tree under a custom attention mask, which "
            f"attn_implementation={attention!r} cannot take; use one of {list(MASK_CAPABLE_ATTENTION)}, "
            "or suffix_decoding.use_tree_spec=false (a chain, fed with the model's own mask)"
        )
    return None


DRAFTER = declare_drafter(
    "suffix_decoding",
    label="SuffixDecoding",
    color="#bcbd22",
    # A chain (the default) is fed with the model's own mask; a tree's mask is refused in the plan on a
    # backend without custom masks (tree_needs_a_mask) and checked on the model by the engine.
    custom_mask=False,
    settings=SuffixSettings,
    engine=suffix_decoding_generate,
    reach=suffix_decoding_reach,
    new_state=new_suffix_state,
    refusals=(tree_needs_a_mask,),
    after="token_recycling",
)
