"""The attention mask(s) of one lookahead step, per layer type (full and sliding-window layers).

Every layer sees the committed cache (``position`` entries, the accepted tokens at positions
0..position-1, in order) and then the step's own block (``layout.mask_block``). A sliding-window
layer additionally sees only keys within its window of each query: the query at position id i sees
the key at position j only if ``i - j < sliding_window``, measured on position ids, so a window or
candidate token sees exactly what the same token would see in autoregressive decoding.

The cache keeps every entry on every layer (``kv_cache.engine_cache``: no per-layer trimming), so
all layers share one cache length and ``kv_cache.commit_accepted`` is the same for both kinds; the
sliding layers' older entries are simply masked out.

The mask's form follows the model's attention implementation: a 4D additive float mask for eager
and SDPA, a flex_attention ``BlockMask`` (``flex_masks.py``, the same visibility as a function)
for ``flex_attention``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import torch

from lade_bench.decoding.core.checks import BLOCK_MASK_ATTENTION, LayerAttention
from lade_bench.decoding.core.flex_masks import step_block_mask
from lade_bench.decoding.core.layout import StepLayout

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

# What a step passes as ``attention_mask``: one mask for every layer, or one per layer type.
StepMask = Union[torch.Tensor, "BlockMask", dict[str, torch.Tensor], dict[str, "BlockMask"]]

FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"


class StepMasks:
    """Builds each step's mask, or one mask per layer type for hybrid models, in the model's form."""

    def __init__(self, attention: LayerAttention, device: torch.device | str, implementation: str = "sdpa") -> None:
        """Masks for a model whose layers attend as ``attention`` says, on ``device``.

        ``implementation``: the model's ``config._attn_implementation``; those in
        ``BLOCK_MASK_ATTENTION`` (flex_attention) get ``BlockMask``s, the others float masks.
        """
        self._attention = attention
        self._device = device
        self._block_masks = implementation in BLOCK_MASK_ATTENTION

    def build(self, layout: StepLayout, position: int) -> StepMask:
        """The ``attention_mask`` argument of a step whose cur token sits at ``position``.

        Returns:
            a (1, 1, q, position + q) additive float mask (or ``BlockMask`` for flex_attention), or
            for hybrid models a dict from layer type to such a mask (transformers' models take one
            mask per entry of ``config.layer_types``).
        """
        if self._block_masks:
            return self._build_block_masks(layout, position)
        full = full_step_mask(layout, position, self._device)
        window = self._attention.sliding_window
        if window is None:
            return full
        sliding = sliding_step_mask(full, layout, position, window)
        keys = self._attention.mask_keys
        if keys is None:
            return sliding
        by_type = {FULL_ATTENTION: full, SLIDING_ATTENTION: sliding}
        return {key: by_type[key] for key in keys}

    def _build_block_masks(self, layout: StepLayout, position: int) -> BlockMask | dict[str, BlockMask]:
        """``build``'s result as flex_attention ``BlockMask``s (one per layer type that needs one)."""
        window = self._attention.sliding_window
        keys = self._attention.mask_keys
        if keys is None:
            return step_block_mask(layout, position, window, self._device)
        windows = {FULL_ATTENTION: None, SLIDING_ATTENTION: window}
        return {key: step_block_mask(layout, position, windows[key], self._device) for key in keys}


def full_step_mask(layout: StepLayout, position: int, device: torch.device | str) -> torch.Tensor:
    """(1, 1, q, position + q) additive mask: the whole cache is visible, then the step block."""
    q = layout.num_tokens
    mask = torch.zeros((1, 1, q, position + q), dtype=layout.mask_block.dtype, device=device)
    mask[0, 0, :, position:] = layout.mask_block
    return mask


def sliding_step_mask(full: torch.Tensor, layout: StepLayout, position: int, window: int) -> torch.Tensor:
    """``full`` further restricted to keys less than ``window`` positions behind each query.

    Returns ``full`` itself when no query is ``window`` or more positions past the first token: the
    restriction would then mask nothing.
    """
    if int(layout.position_offsets.max()) + position < window:
        return full
    too_far = ~layout.within_window(position, window)
    return full.masked_fill(too_far.to(full.device)[None, None], torch.finfo(full.dtype).min)
