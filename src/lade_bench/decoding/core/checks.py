"""Input and model checks that run before any forward pass."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import PreTrainedModel
from transformers.utils import is_torch_flex_attn_available

# The attention names and UnsupportedModelError live in params (no torch), so that a plan checks the
# names, and a job catches the error, before torch loads.
from lade_bench.decoding.core.params import BATCH_INVARIANT_ATTENTION, DecodingConfigError
from lade_bench.decoding.core.params import BLOCK_MASK_ATTENTION as BLOCK_MASK_ATTENTION
from lade_bench.decoding.core.params import MASK_CAPABLE_ATTENTION as MASK_CAPABLE_ATTENTION
from lade_bench.decoding.core.params import UnsupportedModelError as UnsupportedModelError

# transformers families whose attention always adds ALiBi biases (Falcon only with alibi=True, which
# the config flag check catches). ALiBi is computed from each token's index in the input, not from
# position_ids, so lookahead's reordered tokens would get wrong biases.
ALIBI_MODEL_TYPES = ("bloom", "mpt")

# Entries of ``config.layer_types`` whose attention lookahead masks exactly (one mask per type).
SUPPORTED_LAYER_TYPES = ("full_attention", "sliding_attention")

# Layer kinds that carry a recurrent state (SSM, linear attention, short convolutions), as
# transformers names them in ``layer_types``, ``layers_block_type`` or ``block_types``.
RECURRENT_LAYER_TYPES = ("linear_attention", "mamba", "hybrid", "recurrent", "conv")

# Recurrent families whose config lists no layer kinds at all.
RECURRENT_MODEL_TYPES = ("rwkv", "xlstm")


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
                    f"sequence at a time, like the paper's experiments; pass input_ids of shape 1 x L "
                    f"(got {tuple(input_ids.shape)}; allowed batch size: 1)"
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
    """Raise UnsupportedModelError unless ``model`` can take lookahead's custom 4D mask exactly.

    :func:`check_model_structure` plus the attention implementation (one that takes a custom mask).
    Reads the config and the forward signature only: no forward pass.
    """
    check_model_structure(model)
    check_attention_implementation(attention_implementation_of(model))


def check_model_structure(model: torch.nn.Module) -> None:
    """Raise UnsupportedModelError when what ``model`` is (config, forward signature) breaks exactness.

    The same for every decoding method that verifies drafted tokens (``lade_bench.decoding.model_checks.support``
    adds the behavioural probe). Each message names the model type and the feature.
    """
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            f"{type(model).__name__} is an encoder-decoder model: lookahead decoding supports decoder-only models"
        )
    recurrent = recurrent_layers_of(model)
    if recurrent is not None:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not supported: {recurrent}. Guessed tokens fed through such a layer "
            "update its recurrent state in place, and that state cannot be rolled back after a rejected "
            "guess (a KV cache can be cropped; a state cannot), so the output would differ from the "
            "model's own decoding. Supported: attention-only decoders; use the autoregressive baseline "
            "for this model"
        )
    cacheless = missing_cache_of(model)
    if cacheless is not None:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not supported: {cacheless}. Every method continues a KV cache "
            "(drafted tokens are verified on top of the accepted ones and the rejected ones cropped); a "
            "cache passed to this model would be silently dropped. Use the autoregressive baseline"
        )
    bias = position_bias_of(model)
    if bias is not None:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not supported: {bias}. Lookahead gives the window and candidate "
            "tokens position ids that differ from their place in the input, so the output would differ "
            "from the model's own decoding. Supported: models whose positions come from position_ids "
            "(rotary or learned absolute: Llama, Qwen, Mistral, Gemma, Phi, GPT-2, GPT-NeoX, ...)"
        )
    mixing = input_dependent_attention_of(model)
    if mixing is not None:
        raise UnsupportedModelError(
            f"{type(model).__name__} is not supported: {mixing}. A row's logits would then depend on "
            "where it sits in the input and on the other tokens fed with it (drafted or masked ones), "
            "so the output would differ from the model's own decoding. Use the autoregressive baseline"
        )
    layer_attention_of(model)


def attention_implementation_of(model: torch.nn.Module) -> str:
    """The attention implementation ``model`` runs (``config._attn_implementation``; unset means eager)."""
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    return str(getattr(config, "_attn_implementation", None) or "eager")


def flex_attention_available() -> bool:
    """Whether this torch has ``torch.nn.attention.flex_attention`` in a version transformers uses."""
    return bool(is_torch_flex_attn_available())


def check_attention_implementation(implementation: str) -> None:
    """Raise UnsupportedModelError unless lookahead can give ``implementation`` its step mask here.

    flex_attention also needs a torch that ships ``torch.nn.attention.flex_attention``.
    """
    if implementation not in MASK_CAPABLE_ATTENTION and implementation != BATCH_INVARIANT_ATTENTION:
        raise UnsupportedModelError(
            f"attn_implementation={implementation!r} cannot take lookahead's custom attention mask; lookahead "
            f"needs one of {list(MASK_CAPABLE_ATTENTION)} (FlashAttention still serves the autoregressive baseline)"
        )
    if implementation in BLOCK_MASK_ATTENTION and not flex_attention_available():
        raise UnsupportedModelError(
            f"attn_implementation={implementation!r} needs torch.nn.attention.flex_attention, which torch "
            f"{torch.__version__} lacks (or transformers does not use): upgrade torch, or use one of "
            f"{[i for i in MASK_CAPABLE_ATTENTION if i not in BLOCK_MASK_ATTENTION]}"
        )


@dataclass(frozen=True)
class LayerAttention:
    """How a model's layers attend, as far as lookahead's step masks are concerned.

    Attributes:
        sliding_window: how far back a local (sliding-window) layer sees: a query at position i sees
            keys at positions j with ``i - j < sliding_window`` (transformers' rule). None: every
            layer attends to the whole sequence.
        mask_keys: the layer types when the model takes one mask per type (transformers' hybrid
            models read ``attention_mask={"full_attention": ..., "sliding_attention": ...}``);
            None when one mask serves every layer (global models, and Mistral-style models whose
            every layer slides).
    """

    sliding_window: int | None
    mask_keys: tuple[str, ...] | None


def layer_attention_of(model: torch.nn.Module) -> LayerAttention:
    """Which masks ``model``'s layers need; UnsupportedModelError for attention lookahead cannot mask.

    Supported: global attention, sliding-window attention on every layer (Mistral, Mixtral,
    Starcoder2, Phi-3 with ``sliding_window`` set) and hybrids of the two declared in
    ``config.layer_types`` (Gemma 2/3, Qwen2/3 with ``use_sliding_window``). Composite models (Gemma 3
    with vision, say) are judged by their text decoder's config, where their layer types live.
    """
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    if getattr(config, "use_bidirectional_attention", False) or getattr(config, "is_causal", True) is False:
        raise UnsupportedModelError(
            f"{type(model).__name__} attends bidirectionally (use_bidirectional_attention/is_causal): "
            "lookahead decoding needs a causal decoder"
        )
    layer_types = tuple(str(t) for t in (getattr(config, "layer_types", None) or ()))
    unknown = sorted(set(layer_types) - set(SUPPORTED_LAYER_TYPES))
    if unknown:
        raise UnsupportedModelError(
            f"layer types {unknown} (config.layer_types) are not supported: lookahead builds masks for "
            f"{list(SUPPORTED_LAYER_TYPES)} only, so other layers would see the wrong tokens"
        )
    if layer_types:
        if "sliding_attention" not in layer_types:
            return LayerAttention(None, None)
        return LayerAttention(_window_size(config), tuple(sorted(set(layer_types))))
    if sliding_window_of(config) is None:
        return LayerAttention(None, None)
    return LayerAttention(_window_size(config), None)


def _window_size(config: Any) -> int:
    window = getattr(config, "sliding_window", None)
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise UnsupportedModelError(
            f"the model has sliding-window layers but sliding_window={window!r}: lookahead needs the "
            "window size (an integer >= 1) to mask those layers exactly"
        )
    return window


def sliding_window_of(config: Any) -> int | None:
    """The sliding window a config actually applies, or None when attention is global."""
    layer_types = getattr(config, "layer_types", None) or ()
    window = getattr(config, "sliding_window", None)
    if getattr(config, "use_sliding_window", True) is False:
        window = None
    if window is None and any("sliding" in str(t) for t in layer_types):
        window = getattr(config, "sliding_window", None) or -1
    return window


def recurrent_layers_of(model: torch.nn.Module) -> str | None:
    """Which recurrent (SSM, linear-attention, convolution) layers ``model`` has, or None when none.

    Read from the layer kinds the text decoder's config lists (Mamba, Mamba2, Jamba, Bamba,
    Falcon-H1, Zamba, GraniteMoeHybrid, LFM2, Qwen3-Next, MiniMax, RecurrentGemma, ...) and, for
    families that list none, from the model type (RWKV, xLSTM).
    """
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    model_type = getattr(config, "model_type", None)
    for field in ("layer_types", "layers_block_type", "block_types"):
        kinds = sorted({str(k) for k in (getattr(config, field, None) or ()) if str(k) in RECURRENT_LAYER_TYPES})
        if kinds:
            return f"its layers {kinds} (config.{field}, model_type={model_type!r}) keep a recurrent state"
    if model_type in RECURRENT_MODEL_TYPES:
        return f"it is a recurrent model (model_type={model_type!r}) with no attention cache"
    return None


def position_bias_of(model: torch.nn.Module) -> str | None:
    """Why ``model``'s positions would not follow the ``position_ids`` it is given, or None when they do.

    Two cases: ALiBi attention biases (Bloom, MPT, Falcon with ``alibi=True``), and a transformers
    model whose ``forward`` takes no ``position_ids`` at all (it derives positions from the input;
    recurrent models, which take none either, are told their own reason by ``recurrent_layers_of``
    first). Wrappers that are not a ``PreTrainedModel`` (e.g. a
    PEFT model) are judged by their config only, since their ``forward`` hides the argument list.
    """
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    model_type = getattr(config, "model_type", None)
    attn_config = getattr(config, "attn_config", None)
    if getattr(config, "alibi", False) is True or getattr(attn_config, "alibi", False) is True:
        return f"it uses ALiBi attention biases (model_type={model_type!r}, alibi=True)"
    if model_type in ALIBI_MODEL_TYPES:
        return f"it uses ALiBi attention biases (model_type={model_type!r} always does)"
    if isinstance(model, PreTrainedModel) and "position_ids" not in inspect.signature(model.forward).parameters:
        return f"its forward() takes no position_ids (model_type={model_type!r} computes positions itself)"
    return None


def missing_cache_of(model: torch.nn.Module) -> str | None:
    """Why ``model`` takes no KV cache, or None when its forward takes one.

    A transformers model whose ``forward`` has neither ``cache`` nor ``past_key_values`` (GPT-1,
    ``openai-gpt``) recomputes the whole input every call; wrappers that are not a
    ``PreTrainedModel`` are not judged (their forward hides the argument list).
    """
    if not isinstance(model, PreTrainedModel):
        return None
    parameters = inspect.signature(model.forward).parameters
    if "cache" in parameters or "past_key_values" in parameters:
        return None
    model_type = getattr(model.config, "model_type", None)
    return f"its forward() takes no KV cache (no cache/past_key_values argument, model_type={model_type!r})"


def input_dependent_attention_of(model: torch.nn.Module) -> str | None:
    """Which attention of ``model`` depends on input indices or on the other tokens fed, or None.

    Three features, read from the config whatever the model is called: local layers that apply their
    window by the index in the input rather than by position id (GPT-Neo's ``attention_layers``
    with ``"local"``), dynamic-mask attention that picks each query's keys by a top-k over all
    keys, masked ones included (Doge's ``keep_window_size``; its mixture-of-experts variant also
    routes with information from the other tokens of a forward), and recurrent-depth loops that read
    the cache only the last loop writes (Dory's ``recurrent_kv_cache_mode="last_loop"``: a token sees
    the tokens of its own forward at an earlier loop's keys and values and the cached ones at the
    last loop's, so its logits depend on which tokens share its forward, and ``generate`` feeds one).
    """
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    model_type = getattr(config, "model_type", None)
    for field in ("attention_layers", "attention_types"):
        kinds = _flat_strings(getattr(config, field, None))
        if "local" in kinds:
            window = getattr(config, "window_size", None)
            return (
                f"its local attention layers (config.{field} has 'local', window_size={window}, "
                f"model_type={model_type!r}) apply their window by the index in the input, not by position id"
            )
    if getattr(config, "recurrent_kv_cache_mode", None) == "last_loop":
        return (
            f"its recurrent loops before the last read the cache only the last loop writes "
            f"(config.recurrent_kv_cache_mode='last_loop', model_type={model_type!r}): a token reads the tokens "
            "of its own forward at an earlier loop's keys and values and the cached ones at the last loop's, "
            "while generate feeds one token per forward ('per_loop' keeps a cache per loop and is exact)"
        )
    keep = getattr(config, "keep_window_size", None)
    if keep is not None:
        moe = getattr(config, "is_moe", False)
        router = ", and its expert router (is_moe=True) mixes the tokens of one forward" if moe else ""
        return (
            f"its dynamic-mask attention (config.keep_window_size={keep}, model_type={model_type!r}) picks "
            f"each query's keys by a top-k over every key, masked ones included{router}"
        )
    return None


def _flat_strings(value: Any) -> set[str]:
    """Every string inside a nested list/tuple config value (GPT-Neo nests its layer kinds)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, (list, tuple)):
        return set().union(*(_flat_strings(item) for item in value)) if value else set()
    return set()
