"""The step mask(s) as flex_attention ``BlockMask``s: the visibility of ``masks.py``, given as a function.

``attn_implementation="flex_attention"`` cannot read an additive float mask as a mask (transformers
turns a plain tensor into a score_mod that adds it to every score: correct, but dense, so no block
is ever skipped). It takes a ``BlockMask`` instead: a ``mask_mod(b, h, q_idx, kv_idx) -> bool`` plus
the block-level summary ``create_block_mask`` derives from it (which 128 x 128 blocks are empty,
full or partial), so the fused kernel skips empty blocks and evaluates ``mask_mod`` only in partial
ones.

The ``mask_mod`` here reads exactly the visibility the 4D float mask encodes, as a (q, position + q)
boolean table: key ``kv_idx < position`` is a cache entry, visible to every query; key
``position + j`` is step token j, visible to query i iff ``layout.visible[i, j]``; on a
sliding-window layer, additionally only keys less than ``window`` position ids behind the query.
``tests/decoding/test_flex_attention.py`` checks the two forms agree element for element.

Why a table and not index arithmetic on the (q, q) block: a ``mask_mod`` that derives the key's
step index from ``kv_idx - position`` trips inductor's CPU flex_attention template once shapes turn
dynamic (torch 2.13: C++ compile error, ``cur_qSplitSize4`` undeclared), while a plain table lookup
compiles there (the CUDA kernel is not yet checked on a GPU here). The table is as large as the
float mask SDPA gets, in bools; its shape changes every step, which the compiled kernel absorbs
as dynamic shapes (no recompile per step), and the step's position is read from the table, never
closed over as a Python constant (which the compiled kernel would guard on and recompile for).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from lade_bench.decoding.core.layout import StepLayout

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def step_visibility(layout: StepLayout, position: int, window: int | None) -> torch.Tensor:
    """(q, position + q) bool: which keys (the cache, then the step) each step token attends to.

    ``window``: the sliding window of a local layer (query at position id i sees key j only if
    ``i - j < window``), or None for a global layer.
    """
    visible = layout.visible
    q = layout.num_tokens
    table = torch.ones((q, position + q), dtype=torch.bool, device=visible.device)
    table[:, position:] = visible
    if window is None:
        return table
    return table & layout.within_window(position, window).to(visible.device)


def step_mask_mod(layout: StepLayout, position: int, window: int | None) -> MaskMod:
    """The ``mask_mod`` of a step whose cur token sits at ``position``: a lookup in ``step_visibility``."""
    table = step_visibility(layout, position, window)

    def mask_mod(batch: torch.Tensor, head: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor) -> torch.Tensor:
        return table[q_idx, kv_idx]

    return mask_mod


def step_block_mask(layout: StepLayout, position: int, window: int | None, device: torch.device | str) -> BlockMask:
    """The ``BlockMask`` of one step on one layer type, (1, 1, q, position + q) like the float mask.

    Built eagerly (``create_block_mask`` without ``_compile``): the step's lengths change every step,
    and compiling the mask builder would recompile it for new shapes, while the eager build is a
    handful of vectorised operations over the (q, position + q) grid.
    """
    from torch.nn.attention.flex_attention import create_block_mask

    q = layout.num_tokens
    return create_block_mask(
        step_mask_mod(layout, position, window), B=None, H=None, Q_LEN=q, KV_LEN=position + q, device=device
    )
