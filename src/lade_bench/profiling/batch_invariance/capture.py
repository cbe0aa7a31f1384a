"""The real inputs of every op of one decoder layer, taken from a forward of a real prompt.

The account (:mod:`.account`) feeds each op what the model itself fed it: forward hooks on the
layer's linear layers and norms, the rotary embedding, the final norm and the LM head record their
inputs (and the query/key/value projections their outputs) while the whole prompt runs once through
the model. Hooks, not a copy of the model's code, so the same capture serves any transformers
decoder whose layer names its parts as Llama and Gemma-3 do.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lade_bench.models.pipeline import decoder_layer_names


@dataclass(frozen=True)
class LayerInputs:
    """What one decoder layer's ops received in a forward of a whole prompt (batch 1).

    Attributes:
        layer: the decoder layer's index.
        row_ops: op name -> (the module, its input): the layer's linear layers and norms, the
            model's final norm and LM head, each applied to rows of its input on its own.
        query, key, value: (1, heads, tokens, head size) query and key before the rotary embedding
            (after Gemma-3's query/key norms), value as the attention reads it.
        rotary: the model's rotary embedding module, and the arguments it was called with for this
            layer (hidden states, position ids, then any layer type).
        apply_rotary: the layer's own ``apply_rotary_pos_emb`` (query, key, cos, sin).
        attention: the attention layer (its ``scaling``, ``sliding_window`` and softcap are read).
    """

    layer: int
    row_ops: dict[str, tuple[nn.Module, torch.Tensor]]
    query: torch.Tensor
    key: torch.Tensor
    value: torch.Tensor
    rotary: tuple[nn.Module, tuple[Any, ...]]
    apply_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    attention: Any

    @property
    def tokens(self) -> int:
        """How many prompt tokens were captured."""
        return int(self.query.shape[2])


def layer_count(model: nn.Module) -> int:
    """How many decoder layers ``model`` has."""
    return len(decoder_layer_names(model))


def capture_layer_inputs(model: nn.Module, input_ids: torch.Tensor, layer: int) -> LayerInputs:
    """Run ``input_ids`` (1-D) through ``model`` once and keep what decoder layer ``layer``'s ops received.

    Raises:
        ValueError: ``layer`` is not one of the model's layer indices (names the allowed range).
    """
    names = decoder_layer_names(model)
    if not 0 <= layer < len(names):
        raise ValueError(f"layer={layer} is not a decoder layer of this model; use 0..{len(names) - 1}")
    block = model.get_submodule(names[layer])
    attention: Any = block.get_submodule("self_attn")
    # The ops applied row by row: every linear layer and norm of the layer, the final norm, the LM head.
    watched = {
        name: module
        for name, module in block.named_modules()
        if name and (isinstance(module, nn.Linear) or type(module).__name__.endswith("Norm"))
    }
    # transformers' models: typed Any, their submodules are found by name at run time.
    causal_lm: Any = model
    watched["final_norm"] = causal_lm.get_decoder().norm
    watched["lm_head"] = causal_lm.get_output_embeddings()
    inputs: dict[str, torch.Tensor] = {}
    outputs: dict[str, torch.Tensor] = {}
    rotary_calls: list[tuple[tuple[Any, ...], Any]] = []
    layer_embeddings: list[Any] = []

    def keep(name: str) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
            inputs[name] = args[0].detach()
            outputs[name] = output.detach()

        return hook

    def keep_rotary(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        rotary_calls.append(((*args, *kwargs.values()), output))

    def keep_embeddings(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        layer_embeddings.append(kwargs.get("position_embeddings", args[1] if len(args) > 1 else None))

    rotary_module = causal_lm.get_decoder().rotary_emb
    handles = [module.register_forward_hook(keep(name)) for name, module in watched.items()]
    handles.append(rotary_module.register_forward_hook(keep_rotary, with_kwargs=True))
    handles.append(attention.register_forward_pre_hook(keep_embeddings, with_kwargs=True))
    try:
        with torch.no_grad():
            model(input_ids=input_ids[None], use_cache=False)
    finally:
        for handle in handles:
            handle.remove()
    # The rotary call whose (cos, sin) this layer received: Gemma-3 computes one per layer type.
    cos = layer_embeddings[0][0]
    rotary_args = next(args for args, output in rotary_calls if torch.equal(output[0], cos))
    head_size = int(attention.head_dim)

    def heads(projection: str) -> torch.Tensor:
        # The attention's own reshape: (1, tokens, heads * head size) -> (1, heads, tokens, head size).
        out = outputs[f"self_attn.{projection}"]
        return out.view(*out.shape[:-1], -1, head_size).transpose(1, 2)

    query = outputs["self_attn.q_norm"] if "self_attn.q_norm" in outputs else heads("q_proj")
    key = outputs["self_attn.k_norm"] if "self_attn.k_norm" in outputs else heads("k_proj")
    return LayerInputs(
        layer=layer,
        row_ops={name: (watched[name], inputs[name]) for name in watched},
        query=query,
        key=key,
        value=heads("v_proj"),
        rotary=(rotary_module, rotary_args),
        # The layer's own module's rotary application (Llama's and Gemma-3's share the signature).
        apply_rotary=sys.modules[type(attention).__module__].apply_rotary_pos_emb,
        attention=attention,
    )
