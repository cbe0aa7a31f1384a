"""Keeping exactly the accepted tokens' keys/values after a multi-branch forward pass."""

from __future__ import annotations

from typing import Any

import torch
from transformers import Cache, DynamicCache


def _layers(cache: Cache) -> list[Any]:
    # Attention layers, each with ``keys``/``values`` tensors once filled; transformers types the
    # list as every layer kind (linear-attention ones have no keys), which lookahead refuses anyway.
    return list(cache.layers)


def commit_accepted(cache: DynamicCache, cur_position: int, step_tokens: int, kept_offsets: list[int]) -> None:
    """Reduce the cache to prefix + cur + the accepted guesses, in order.

    After a step the cache holds ``cur_position`` accepted entries plus all ``step_tokens`` inputs of
    the step, cur first. Accepted guesses sit at ``kept_offsets`` (relative to cur) and must end up
    right after cur. They are moved in place (:func:`move_accepted`) and the rest is cut off, so no
    full-cache copy happens here. Every layer must hold the same entries (a config-less
    ``DynamicCache``: sliding-window layers are not trimmed, their masks hide what they must not see).
    """
    move_accepted(cache, cur_position, kept_offsets)
    surplus = step_tokens - 1 - len(kept_offsets)
    if surplus:
        cache.crop(-surplus)


def move_accepted(cache: Cache, cur_position: int, kept_offsets: list[int]) -> None:
    """Move the accepted guesses' entries (at ``kept_offsets`` past cur) to right after cur, in place.

    Only k entries per layer are copied. Entries past the accepted ones are left as they are: a
    dynamic cache crops them (:func:`commit_accepted`), a static cache masks them until the next step
    overwrites them.
    """
    kept = len(kept_offsets)
    if not kept or kept_offsets == list(range(1, kept + 1)):
        return
    source = torch.tensor(kept_offsets, device=_layers(cache)[0].keys.device) + cur_position
    target = slice(cur_position + 1, cur_position + 1 + kept)
    for layer in _layers(cache):
        layer.keys[:, :, target] = layer.keys.index_select(2, source)
        layer.values[:, :, target] = layer.values.index_select(2, source)


def pack_entries(cache: DynamicCache, positions: list[int]) -> torch.Tensor:
    """The keys and values at ``positions`` of every layer, flattened into one tensor (to send)."""
    parts = []
    for layer in _layers(cache):
        index = torch.tensor(positions, device=layer.keys.device)
        parts.append(layer.keys.index_select(2, index).flatten())
        parts.append(layer.values.index_select(2, index).flatten())
    return torch.cat(parts)


def empty_entries(cache: DynamicCache, count: int) -> torch.Tensor:
    """A buffer of the size :func:`pack_entries` gives for ``count`` positions (to receive into)."""
    size = 0
    for layer in _layers(cache):
        for tensor in (layer.keys, layer.values):
            batch, heads, _, dim = tensor.shape
            size += batch * heads * count * dim
    first = _layers(cache)[0].keys
    return torch.empty(size, dtype=first.dtype, device=first.device)


def replace_tail(cache: DynamicCache, position: int, packed: torch.Tensor, count: int) -> None:
    """Make the cache hold its first ``position`` entries followed by the ``count`` packed ones.

    ``packed`` comes from :func:`pack_entries` (possibly on another rank). Written in place when the
    cache is long enough (the usual case after a step), so no full-cache copy happens.
    """
    offset = 0
    for layer in cache.layers:
        for name in ("keys", "values"):
            tensor = getattr(layer, name)
            batch, heads, length, dim = tensor.shape
            size = batch * heads * count * dim
            entries = packed[offset : offset + size].view(batch, heads, count, dim)
            offset += size
            if length >= position + count:
                tensor[:, :, position : position + count] = entries
                tensor = tensor[:, :, : position + count]
            else:
                tensor = torch.cat([tensor[:, :, :position], entries], dim=2)
            setattr(layer, name, tensor)
