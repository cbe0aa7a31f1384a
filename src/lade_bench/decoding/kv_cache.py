"""Keeping exactly the accepted tokens' keys/values after a multi-branch forward pass."""

from __future__ import annotations

import torch
from transformers import DynamicCache


def commit_accepted(cache: DynamicCache, cur_position: int, step_tokens: int, kept_offsets: list[int]) -> None:
    """Reduce the cache to prefix + cur + the accepted guesses, in order.

    After a step the cache holds ``cur_position`` accepted entries plus all ``step_tokens`` inputs of
    the step, cur first. Accepted guesses sit at ``kept_offsets`` (relative to cur) and must end up
    right after cur. They are moved in place (only k entries per layer are copied) and the rest is
    cut off, so no full-cache copy happens here. Every layer must hold the same entries (a config-less
    ``DynamicCache``: sliding-window layers are not trimmed, their masks hide what they must not see).
    """
    kept = len(kept_offsets)
    contiguous = kept_offsets == list(range(1, kept + 1))
    if kept and not contiguous:
        source = torch.tensor(kept_offsets, device=cache.layers[0].keys.device) + cur_position
        target = slice(cur_position + 1, cur_position + 1 + kept)
        for layer in cache.layers:
            layer.keys[:, :, target] = layer.keys.index_select(2, source)
            layer.values[:, :, target] = layer.values.index_select(2, source)
    surplus = step_tokens - 1 - kept
    if surplus:
        cache.crop(-surplus)
