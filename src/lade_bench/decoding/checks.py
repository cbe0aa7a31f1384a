"""Input and model checks that run before any forward pass."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence

import torch
from transformers import PreTrainedModel

from lade_bench.decoding.params import DecodingConfigError

# Attention implementations that honour an arbitrary 4D additive mask with explicit position ids.
MASK_CAPABLE_ATTENTION = ("eager", "sdpa")

# transformers families whose attention always adds ALiBi biases (Falcon only with alibi=True, which
# the config flag check catches). ALiBi is computed from each token's index in the input, not from
# position_ids, so lookahead's reordered tokens would get wrong biases.
ALIBI_MODEL_TYPES = ("bloom", "mpt")


class UnsupportedModelError(ValueError):
    """The model cannot run lookahead decoding exactly (and why)."""


def prompt_ids_as_list(input_ids: Sequence[int] | torch.Tensor) -> list[int]:
    """Normalise a single prompt (list, 1D tensor or 1 x L tensor) to a list of ids.

    Raises:
        DecodingConfigError: for an empty prompt or a batch of more than one sequence.
    """
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() == 2:
            if input_ids.shape[0] != 1:
                raise DecodingConfigError(
                    f"batch size {input_ids.shape[0]} is not supported: lookahead decoding runs one "
                    "sequence at a time (batch size 1), like the paper's experiments"
                )
            input_ids = input_ids[0]
        elif input_ids.dim() != 1:
            raise DecodingConfigError(
                f"input_ids has shape {tuple(input_ids.shape)}: use a list of ids, a 1D tensor or a 1 x L tensor"
            )
        ids = [int(t) for t in input_ids.tolist()]
    else:
        ids = list(input_ids)
        if ids and isinstance(ids[0], (list, tuple)):
            raise DecodingConfigError(f"a batch of {len(ids)} prompts is not supported: pass one prompt (batch size 1)")
        ids = [int(t) for t in ids]
    if not ids:
        raise DecodingConfigError("the prompt is empty: give at least one token id")
    return ids


def eos_set(eos_token_id: int | Iterable[int] | None) -> frozenset[int]:
    """EOS ids as a set (``None`` means: never stop early)."""
    if eos_token_id is None:
        return frozenset()
    if isinstance(eos_token_id, int):
        return frozenset([eos_token_id])
    return frozenset(int(t) for t in eos_token_id)


def check_custom_mask_support(model: torch.nn.Module) -> None:
    """Raise UnsupportedModelError unless ``model`` can take lookahead's custom 4D mask exactly."""
    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            f"{type(model).__name__} is an encoder-decoder model: lookahead decoding supports decoder-only models"
        )
    bias = position_bias_of(model)
    if bias is not None:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not supported: {bias}. Lookahead gives the window and candidate "
            "tokens position ids that differ from their place in the input, so the output would differ "
            "from the model's own decoding. Supported: models whose positions come from position_ids "
            "(rotary or learned absolute: Llama, Qwen, Mistral, Gemma, Phi, GPT-2, GPT-NeoX, ...)"
        )
    impl = getattr(config, "_attn_implementation", None) or "eager"
    if impl not in MASK_CAPABLE_ATTENTION:
        raise UnsupportedModelError(
            f"attn_implementation={impl!r} cannot take a custom 4D attention mask; lookahead needs one of "
            f"{list(MASK_CAPABLE_ATTENTION)} (FlashAttention still serves the autoregressive baseline)"
        )
    window = sliding_window_of(config)
    if window is not None:
        raise UnsupportedModelError(
            f"sliding-window attention (sliding_window={window}) is not supported: lookahead's custom mask "
            "would let tokens attend beyond the window, so the output would differ from the model's own "
            "decoding. Allowed: sliding_window=None (set it to None if your sequences never exceed it)"
        )


def sliding_window_of(config: object) -> int | None:
    """The sliding window a config actually applies, or None when attention is global."""
    layer_types = getattr(config, "layer_types", None) or ()
    window = getattr(config, "sliding_window", None)
    if getattr(config, "use_sliding_window", True) is False:
        window = None
    if window is None and any("sliding" in str(t) for t in layer_types):
        window = getattr(config, "sliding_window", None) or -1
    return window


def position_bias_of(model: torch.nn.Module) -> str | None:
    """Why ``model``'s positions would not follow the ``position_ids`` it is given, or None when they do.

    Two cases: ALiBi attention biases (Bloom, MPT, Falcon with ``alibi=True``), and a transformers
    model whose ``forward`` takes no ``position_ids`` at all (it derives positions from the input or
    keeps a recurrent state: Mamba, RWKV, ...). Wrappers that are not a ``PreTrainedModel`` (e.g. a
    PEFT model) are judged by their config only, since their ``forward`` hides the argument list.
    """
    config = model.config
    model_type = getattr(config, "model_type", None)
    attn_config = getattr(config, "attn_config", None)
    if getattr(config, "alibi", False) is True or getattr(attn_config, "alibi", False) is True:
        return f"it uses ALiBi attention biases (model_type={model_type!r}, alibi=True)"
    if model_type in ALIBI_MODEL_TYPES:
        return f"it uses ALiBi attention biases (model_type={model_type!r} always does)"
    if isinstance(model, PreTrainedModel) and "position_ids" not in inspect.signature(model.forward).parameters:
        return f"its forward() takes no position_ids (model_type={model_type!r} computes positions itself)"
    return None
