"""SuffixDecoding's declaration; the engine is ``lade_bench.decoding.drafters.suffix_decoding``.

Its global suffix tree over earlier outputs persists across a cell's requests (the paper's setting):
``request.state`` is the cell's ``SuffixDecodingState`` (warm), without one a fresh tree (cold).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lade_bench.decoding.core.params import MASK_CAPABLE_ATTENTION
from lade_bench.decoding.drafters.suffix_decoding import (
    SUFFIX_MAX_SPEC_FACTOR,
    SUFFIX_MAX_TREE_DEPTH,
    VLLM_SUFFIX_MAX_CACHED_REQUESTS,
    VLLM_SUFFIX_MAX_SPEC_TOKENS,
    VLLM_SUFFIX_MAX_TREE_DEPTH,
    SuffixSettings,
    new_suffix_state,
    suffix_decoding_generate,
    suffix_decoding_reach,
)
from lade_bench.methods.budget import Budget
from lade_bench.methods.drafter_method import declare_drafter
from lade_bench.methods.registry import CellFacts

# The tree depth (vLLM's 24 and the plugin's 64) and the draft length per matched token (the plugin's 1.0,
# half and twice it).
BUDGET = Budget(
    {
        "max_tree_depth": (VLLM_SUFFIX_MAX_TREE_DEPTH, SUFFIX_MAX_TREE_DEPTH),
        "max_spec_factor": (SUFFIX_MAX_SPEC_FACTOR / 2, SUFFIX_MAX_SPEC_FACTOR, SUFFIX_MAX_SPEC_FACTOR * 2),
    }
)


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


def describe_suffix_decoding(section: Mapping[str, Any]) -> str:
    """The label of the SuffixDecoding configuration a cell recorded (``Method.describe``): ``SuffixDecoding``
    at the defaults of the authors' plugin (ArcticInference), else the values that differ, e.g.
    ``SuffixDecoding (depth 24, 10,000 requests, width 24)`` for vLLM's, which every cell before issue 65 ran.

    A section lacking a key (none committed does: all six keys are recorded since the arm exists) is read
    at vLLM's values, the defaults until issue 65.
    """
    plugin = SuffixSettings()
    depth = section.get("max_tree_depth", VLLM_SUFFIX_MAX_TREE_DEPTH)
    requests = section.get("max_cached_requests", VLLM_SUFFIX_MAX_CACHED_REQUESTS)
    width = section.get("max_spec_tokens", VLLM_SUFFIX_MAX_SPEC_TOKENS)
    factor = section.get("max_spec_factor", plugin.max_spec_factor)
    prob = section.get("min_token_prob", plugin.min_token_prob)
    differ = [
        f"depth {depth}" if depth != plugin.max_tree_depth else "",
        ("no global tree" if requests == 0 else f"{requests:,} requests")
        if requests != plugin.max_cached_requests
        else "",
        f"width {width}" if width != plugin.max_spec_tokens else "",
        f"factor {factor:g}" if factor != plugin.max_spec_factor else "",
        f"min prob {prob:g}" if prob != plugin.min_token_prob else "",
        "tree" if section.get("use_tree_spec", plugin.use_tree_spec) != plugin.use_tree_spec else "",
    ]
    named = ", ".join(part for part in differ if part)
    return f"SuffixDecoding ({named})" if named else "SuffixDecoding"


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
    # "SuffixDecoding" at the plugin's defaults, "SuffixDecoding (depth 24, 10,000 requests, width 24)" at vLLM's
    describe=describe_suffix_decoding,
    after="token_recycling",
    budget=BUDGET,
)
