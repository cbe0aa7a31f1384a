"""Tiny models of every family the engine refuses, in one place: the refusal tests of each check and
the test that prompt lookup (and every checked method) is refused wherever lookahead is read them."""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import (
    AutoModelForCausalLM,
    BloomConfig,
    CamembertConfig,
    FalconConfig,
    Gemma3TextConfig,
    GPTNeoConfig,
    MambaConfig,
    MptConfig,
    OpenAIGPTConfig,
    PretrainedConfig,
    RobertaConfig,
    RwkvConfig,
    XLMRobertaConfig,
)
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

TINY_SPECIAL = dict(vocab_size=64, bos_token_id=1, eos_token_id=2, pad_token_id=0)
# The sizes of every tiny grouped-query decoder here (and in test_bad_input.py).
TINY_DECODER = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, **TINY_SPECIAL)

POSITION_BIASED: dict[str, Callable[[], PretrainedConfig]] = {
    # ALiBi: biases from each token's index in the input, whatever position_ids say.
    "mpt": lambda: MptConfig(d_model=32, n_heads=4, n_layers=1, expansion_ratio=2, max_seq_len=64, **TINY_SPECIAL),
    "bloom": lambda: BloomConfig(hidden_size=32, n_layer=1, n_head=4, **TINY_SPECIAL),
    "falcon_alibi": lambda: FalconConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, alibi=True, **TINY_SPECIAL
    ),
}

RECURRENT: dict[str, Callable[[], PretrainedConfig]] = {
    "mamba": lambda: MambaConfig(hidden_size=32, state_size=4, num_hidden_layers=1, vocab_size=64),
    "rwkv": lambda: RwkvConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, attention_hidden_size=32, intermediate_size=64
    ),
}

_DOGE = dict(num_hidden_layers=2, max_position_embeddings=256, keep_window_size=8, **TINY_DECODER)


def dory_config(recurrent_kv_cache_mode: str) -> PretrainedConfig:
    """A tiny recurrent-depth Dory: one input, one recurrent (looped twice) and one output layer, the
    outer ones sliding (window 8, so the probe's 16 tokens pass it)."""
    return CONFIG_MAPPING["dory"](
        num_hidden_layers=3,
        n_input_layers=1,
        n_output_layers=1,
        n_recurrent_loops=2,
        recurrent_kv_cache_mode=recurrent_kv_cache_mode,
        head_dim=8,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        max_position_embeddings=256,
        **TINY_DECODER,
    )


# Families that ran silently wrong (or crashed raw) before the checks named their features.
SILENT: dict[str, Callable[[], PretrainedConfig]] = {
    # Local layers window by the index in the input (an 8-token window, so the probe's 16 pass it).
    "gpt_neo_local": lambda: GPTNeoConfig(
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        attention_types=[[["global", "local"], 1]],
        window_size=8,
        max_position_embeddings=256,
        **TINY_SPECIAL,
    ),
    # GPT-1 takes no cache at all.
    "openai_gpt": lambda: OpenAIGPTConfig(n_embd=32, n_layer=2, n_head=4, n_positions=256, **TINY_SPECIAL),
    # Dynamic-mask attention: a top-k over keys once more than keep_window_size are there.
    "doge": lambda: CONFIG_MAPPING["doge"](**_DOGE),
    "doge_moe": lambda: CONFIG_MAPPING["doge"](**_DOGE, is_moe=True, num_experts=16, num_experts_per_tok=2),
    # Recurrent-depth loops that read the last loop's cache: a token's logits depend on which tokens
    # share its forward (issue 64; before it, the engine's config-less cache even ran 'per_loop').
    "dory_last_loop": lambda: dory_config("last_loop"),
}

# What each refusal of SILENT names besides the class and the model type.
SILENT_FEATURES = {
    "gpt_neo_local": ("GPTNeoForCausalLM", "model_type='gpt_neo'", "local attention layers", "window_size=8"),
    "openai_gpt": ("OpenAIGPTLMHeadModel", "model_type='openai-gpt'", "takes no KV cache"),
    "doge": ("DogeForCausalLM", "model_type='doge'", "dynamic-mask attention", "keep_window_size=8"),
    "doge_moe": ("DogeForCausalLM", "model_type='doge'", "dynamic-mask attention", "is_moe=True"),
    "dory_last_loop": ("DoryForCausalLM", "model_type='dory'", "recurrent_kv_cache_mode='last_loop'"),
}

# RoBERTa-style encoders used as decoders: positions from the padding index when left to the model.
ROBERTA_DECODERS: dict[str, Callable[[], PretrainedConfig]] = {
    name: (
        lambda cls=cls: cls(
            vocab_size=64,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=300,
            is_decoder=True,
            bos_token_id=0,
            pad_token_id=1,
            eos_token_id=2,
        )
    )
    for name, cls in (("roberta", RobertaConfig), ("xlm_roberta", XLMRobertaConfig), ("camembert", CamembertConfig))
}


def tiny_gemma3(**overrides) -> torch.nn.Module:
    """A tiny Gemma 3 text model (sliding window 8), with config ``overrides``."""
    config = Gemma3TextConfig(num_hidden_layers=2, head_dim=8, sliding_window=8, **TINY_DECODER, **overrides)
    return AutoModelForCausalLM.from_config(config).eval()


def _gemma3_with(**config_values) -> Callable[[], torch.nn.Module]:
    def build() -> torch.nn.Module:
        model = tiny_gemma3()
        for key, value in config_values.items():
            setattr(model.config, key, value)
        return model

    return build


def build_tiny(config: PretrainedConfig, *, scale: float = 1.0) -> torch.nn.Module:
    """``config``'s causal LM, seeded, weights times ``scale``, in float64, eager attention, eval mode."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    if scale != 1.0:
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() > 1:
                    parameter.mul_(scale)
    return model.to(torch.float64).eval()


# Every model the engine refuses, by name: what "refused wherever lookahead is" runs over.
REFUSED_MODELS: dict[str, Callable[[], torch.nn.Module]] = {
    **{name: (lambda make=make: build_tiny(make())) for name, make in {**POSITION_BIASED, **SILENT}.items()},
    **{name: (lambda make=make: AutoModelForCausalLM.from_config(make()).eval()) for name, make in RECURRENT.items()},
    "gemma3_chunked": _gemma3_with(layer_types=["chunked_attention", "full_attention"]),
    "gemma3_bidirectional": _gemma3_with(use_bidirectional_attention=True),
}
