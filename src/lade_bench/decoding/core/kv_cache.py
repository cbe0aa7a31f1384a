"""The engine's KV cache: built as ``generate`` builds it, and kept to exactly the accepted tokens.

Every engine forward (lookahead's executors, every draft-tree method, Jacobi, the compiled static
steps and the model probe) runs on a cache from :func:`engine_cache`, the one place a cache is made.
After a multi-branch forward, :func:`commit_accepted` keeps exactly the accepted tokens' keys/values.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Cache, DynamicCache
from transformers.cache_utils import DummyLayer, DynamicLayer, DynamicSlidingWindowLayer, StaticLayer

from lade_bench.decoding.core.params import UnsupportedModelError

# Layer kinds of generate's cache whose entries the engine keeps whole (one entry per token fed,
# every layer the same length): a sliding layer's window is applied by the masks instead of by
# trimming, which the step commit could not undo (see masks.py).
_ENTRY_LAYERS = (DynamicLayer, DynamicSlidingWindowLayer)


def generate_cache(model: torch.nn.Module) -> DynamicCache:
    """The cache ``model.generate`` builds by default (``GenerationMixin._prepare_cache_for_generation``).

    ``DynamicCache(config=<the text decoder's config>)``: one layer per decoder layer, of the kind the
    config's layer types give, created up front. Some models read that structure in their forward
    (a recurrent-depth model appends layers of its own to a cache of exactly ``num_hidden_layers``
    layers), so a cache built otherwise can make the same forward compute something else.
    """
    model_config: Any = model.config  # a transformers config (nn.Module attributes type as tensors)
    return DynamicCache(config=model_config.get_text_config(decoder=True))


def engine_cache(model: torch.nn.Module, static_length: int | None = None) -> Cache:
    """The cache every engine forward runs on: ``generate``'s layers, each keeping every entry.

    The layers are those of :func:`generate_cache`, in order, with each attention layer replaced by a
    whole one (a ``DynamicLayer``, or a ``StaticLayer`` of ``static_length`` positions for the
    compiled static-shape steps): sliding-window layers keep every entry too, so that all layers
    have one length and a step's commit is the same for every layer; the masks hide what a local
    layer must not see. Layers that hold no entries (``DummyLayer``: KV-sharing consumers) stay.

    Raises:
        UnsupportedModelError: generate's cache has a layer kind whose entries the engine cannot
            keep whole and crop (a linear-attention state, say), naming the layer and its kind.
    """
    cache = generate_cache(model)
    layers: list[Any] = []
    for index, layer in enumerate(cache.layers):
        if isinstance(layer, DummyLayer):
            layers.append(DummyLayer())
        elif type(layer) in _ENTRY_LAYERS:
            layers.append(DynamicLayer() if static_length is None else StaticLayer(max_cache_len=static_length))
        else:
            raise UnsupportedModelError(
                f"{type(model).__name__} is not supported: layer {index} of the cache generate builds for it is a "
                f"{type(layer).__name__}, not one of {[kind.__name__ for kind in _ENTRY_LAYERS]}: the engine keeps "
                "one key/value entry per token fed and crops rejected guesses, which this layer's state does not "
                "allow. Use the autoregressive baseline for this model"
            )
    if static_length is not None:
        return Cache(layers=layers)
    cache.layers = layers
    return cache


def entry_layers(cache: Cache) -> list[Any]:
    """The layers of ``cache`` that hold per-token entries (``keys``/``values`` tensors once filled).

    Layers that hold none (transformers' ``DummyLayer``: KV-sharing consumers, and read-only views a
    model adds to its own cache) have nothing to move, crop or reposition.
    """
    return [layer for layer in cache.layers if not isinstance(layer, DummyLayer)]


def commit_accepted(cache: Cache, cur_position: int, step_tokens: int, kept_offsets: list[int]) -> None:
    """Reduce the cache to prefix + cur + the accepted guesses, in order.

    After a step the cache holds ``cur_position`` accepted entries plus all ``step_tokens`` inputs of
    the step, cur first. Accepted guesses sit at ``kept_offsets`` (relative to cur) and must end up
    right after cur. They are moved in place (:func:`move_accepted`) and the rest is cut off, so no
    full-cache copy happens here. Every layer holding entries must hold the same ones (an
    :func:`engine_cache`: sliding-window layers are not trimmed, their masks hide what they must not see).
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
    source = torch.tensor(kept_offsets, device=entry_layers(cache)[0].keys.device) + cur_position
    target = slice(cur_position + 1, cur_position + 1 + kept)
    for layer in entry_layers(cache):
        layer.keys[:, :, target] = layer.keys.index_select(2, source)
        layer.values[:, :, target] = layer.values.index_select(2, source)


def pack_entries(cache: Cache, positions: list[int]) -> torch.Tensor:
    """The keys and values at ``positions`` of every layer, flattened into one tensor (to send)."""
    parts = []
    for layer in entry_layers(cache):
        index = torch.tensor(positions, device=layer.keys.device)
        parts.append(layer.keys.index_select(2, index).flatten())
        parts.append(layer.values.index_select(2, index).flatten())
    return torch.cat(parts)


def empty_entries(cache: Cache, count: int) -> torch.Tensor:
    """A buffer of the size :func:`pack_entries` gives for ``count`` positions (to receive into)."""
    size = 0
    for layer in entry_layers(cache):
        for tensor in (layer.keys, layer.values):
            batch, heads, _, dim = tensor.shape
            size += batch * heads * count * dim
    first = entry_layers(cache)[0].keys
    return torch.empty(size, dtype=first.dtype, device=first.device)


def replace_tail(cache: Cache, position: int, packed: torch.Tensor, count: int) -> None:
    """Make the cache hold its first ``position`` entries followed by the ``count`` packed ones.

    ``packed`` comes from :func:`pack_entries` (possibly on another rank). Written in place when the
    cache is long enough (the usual case after a step), so no full-cache copy happens.
    """
    offset = 0
    for layer in entry_layers(cache):
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
