"""Tiny randomly initialised models of several architectures, for CPU tests (token-id level API).

They are real transformers model classes with small configs: exactly the code paths (attention,
rotary/absolute positions, caches) that full-size checkpoints of the same family run.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    Cohere2Config,
    CohereConfig,
    DeepseekV2Config,
    DeepseekV3Config,
    Exaone4Config,
    Gemma2Config,
    Gemma3TextConfig,
    GemmaConfig,
    Glm4Config,
    GPT2Config,
    GPTNeoXConfig,
    GptOssConfig,
    GraniteConfig,
    LlamaConfig,
    MistralConfig,
    MixtralConfig,
    Olmo2Config,
    Olmo3Config,
    OlmoeConfig,
    Phi3Config,
    PhiConfig,
    PretrainedConfig,
    Qwen2Config,
    Qwen2MoeConfig,
    Qwen3Config,
    Qwen3MoeConfig,
    SmolLM3Config,
    StableLmConfig,
    Starcoder2Config,
)

# Special ids inside the tiny vocabulary (the configs' defaults point past it).
# Typed as Any: they are splatted into configs whose keyword types differ (mypy checks each one).
_SPECIAL: dict[str, Any] = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
_COMMON: dict[str, Any] = dict(
    hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, **_SPECIAL
)


def _llama(vocab: int, positions: int) -> PretrainedConfig:
    return LlamaConfig(vocab_size=vocab, max_position_embeddings=positions, num_key_value_heads=2, **_COMMON)


def _qwen2(vocab: int, positions: int) -> PretrainedConfig:
    return Qwen2Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        use_sliding_window=False,
        **_COMMON,
    )


def _qwen3(vocab: int, positions: int) -> PretrainedConfig:
    return Qwen3Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        head_dim=8,
        use_sliding_window=False,
        **_COMMON,
    )


def _mistral(vocab: int, positions: int) -> PretrainedConfig:
    return MistralConfig(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        sliding_window=None,
        **_COMMON,
    )


def _phi3(vocab: int, positions: int) -> PretrainedConfig:
    return Phi3Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        original_max_position_embeddings=positions,
        num_key_value_heads=2,
        sliding_window=None,
        **_COMMON,
    )


def _gpt2(vocab: int, positions: int) -> PretrainedConfig:
    return GPT2Config(vocab_size=vocab, n_positions=positions, n_embd=32, n_layer=2, n_head=4, n_inner=64, **_SPECIAL)


def _gpt_neox(vocab: int, positions: int) -> PretrainedConfig:
    return GPTNeoXConfig(vocab_size=vocab, max_position_embeddings=positions, **_COMMON)


def _olmo2(vocab: int, positions: int) -> PretrainedConfig:
    return Olmo2Config(vocab_size=vocab, max_position_embeddings=positions, num_key_value_heads=2, **_COMMON)


def _granite(vocab: int, positions: int) -> PretrainedConfig:
    # Granite's residual/attention/logit multipliers are exercised at their (non-1) defaults.
    return GraniteConfig(vocab_size=vocab, max_position_embeddings=positions, num_key_value_heads=2, **_COMMON)


def _stablelm(vocab: int, positions: int) -> PretrainedConfig:
    return StableLmConfig(vocab_size=vocab, max_position_embeddings=positions, num_key_value_heads=2, **_COMMON)


def _gemma(vocab: int, positions: int) -> PretrainedConfig:
    # Gemma v1: global attention only (Gemma 2/3 interleave sliding-window layers: see below).
    return GemmaConfig(
        vocab_size=vocab, max_position_embeddings=positions, num_key_value_heads=2, head_dim=8, **_COMMON
    )


# Sliding-window families. Their windows are tiny (8-16 tokens) so that test prompts and generations
# run far past them: local layers must then see only their window, and a wrong mask shows at once.
def _gemma2(vocab: int, positions: int) -> PretrainedConfig:
    # Alternating local/global layers with attention-logit and final-logit soft-capping.
    return Gemma2Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=12,
        layer_types=["sliding_attention", "full_attention"],
        **_COMMON,
    )


def _gemma3(vocab: int, positions: int) -> PretrainedConfig:
    # Gemma 3 text model (what Gemma-3-270M is): local layers with their own rope base, QK norms.
    return Gemma3TextConfig(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"],
        **_COMMON,
    )


def _mistral_sliding(vocab: int, positions: int) -> PretrainedConfig:
    # Every layer slides (no layer_types): the model takes a single mask.
    return MistralConfig(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        sliding_window=8,
        **_COMMON,
    )


def _qwen2_sliding(vocab: int, positions: int) -> PretrainedConfig:
    # Qwen2's own hybrid: layers from max_window_layers on slide.
    return Qwen2Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        use_sliding_window=True,
        sliding_window=16,
        max_window_layers=1,
        **_COMMON,
    )


def _cohere(vocab: int, positions: int) -> PretrainedConfig:
    return CohereConfig(vocab_size=vocab, max_position_embeddings=positions, num_key_value_heads=2, **_COMMON)


def _phi(vocab: int, positions: int) -> PretrainedConfig:
    # Phi-1/2: partial rotary embedding and a parallel attention/MLP block.
    return PhiConfig(vocab_size=vocab, max_position_embeddings=positions, **_COMMON)


def _starcoder2(vocab: int, positions: int) -> PretrainedConfig:
    return Starcoder2Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        sliding_window=None,
        **_COMMON,
    )


_MOE: dict[str, Any] = dict(num_key_value_heads=2, num_experts_per_tok=2, **_COMMON)


def _qwen2_moe(vocab: int, positions: int) -> PretrainedConfig:
    return Qwen2MoeConfig(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_experts=4,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        use_sliding_window=False,
        **_MOE,
    )


def _mixtral(vocab: int, positions: int) -> PretrainedConfig:
    return MixtralConfig(
        vocab_size=vocab, max_position_embeddings=positions, num_local_experts=4, sliding_window=None, **_MOE
    )


def _olmoe(vocab: int, positions: int) -> PretrainedConfig:
    return OlmoeConfig(vocab_size=vocab, max_position_embeddings=positions, num_experts=4, **_MOE)


def _qwen3_moe(vocab: int, positions: int) -> PretrainedConfig:
    return Qwen3MoeConfig(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_experts=4,
        moe_intermediate_size=32,
        head_dim=8,  # type: ignore[call-arg]  # taken through the config's **kwargs
        **_MOE,
    )


# DeepSeek's multi-head latent attention: low-rank keys/values, and queries split into a rotary and
# a position-free part; the first layer dense, the second routed with a shared expert.
_MLA: dict[str, Any] = dict(
    kv_lora_rank=16,
    qk_nope_head_dim=8,
    qk_rope_head_dim=8,
    v_head_dim=8,
    n_routed_experts=4,
    n_shared_experts=1,
    moe_intermediate_size=32,
    first_k_dense_replace=1,
    num_experts_per_tok=2,
    num_key_value_heads=4,
    **_COMMON,
)


def _deepseek_v2(vocab: int, positions: int) -> PretrainedConfig:
    return DeepseekV2Config(vocab_size=vocab, max_position_embeddings=positions, q_lora_rank=None, **_MLA)


def _deepseek_v3(vocab: int, positions: int) -> PretrainedConfig:
    # Low-rank queries too, and group-limited routing.
    return DeepseekV3Config(
        vocab_size=vocab, max_position_embeddings=positions, q_lora_rank=16, n_group=2, topk_group=1, **_MLA
    )


def _smollm3(vocab: int, positions: int) -> PretrainedConfig:
    # Every second layer has no rotary embedding (NoPE). Untied embeddings: tied ones make the tiny
    # random model repeat one token, which would test nothing.
    return SmolLM3Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        no_rope_layer_interval=2,
        tie_word_embeddings=False,
        **_COMMON,
    )


def _glm4(vocab: int, positions: int) -> PretrainedConfig:
    # Partial rotary embedding (half of each head) and sandwich norms.
    return Glm4Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        num_key_value_heads=2,
        head_dim=8,
        tie_word_embeddings=False,
        **_COMMON,
    )


_LOCAL_GLOBAL: dict[str, Any] = dict(
    sliding_window=8, layer_types=["sliding_attention", "full_attention"], num_key_value_heads=2
)


def _exaone4(vocab: int, positions: int) -> PretrainedConfig:
    return Exaone4Config(vocab_size=vocab, max_position_embeddings=positions, **_LOCAL_GLOBAL, **_COMMON)


def _cohere2(vocab: int, positions: int) -> PretrainedConfig:
    # Local layers with rotary, global layers without; a logit scale of 1 and untied embeddings
    # keep the tiny random model from repeating one token.
    return Cohere2Config(
        vocab_size=vocab,
        max_position_embeddings=positions,
        logit_scale=1.0,
        head_dim=8,  # type: ignore[call-arg]  # taken through the config's **kwargs
        tie_word_embeddings=False,
        **_LOCAL_GLOBAL,
        **_COMMON,
    )


def _gpt_oss(vocab: int, positions: int) -> PretrainedConfig:
    # Attention sinks, routed experts and static YaRN scaling (exact at every length).
    return GptOssConfig(
        vocab_size=vocab,
        max_position_embeddings=positions,
        head_dim=8,
        num_local_experts=4,
        num_experts_per_tok=2,
        rope_parameters={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": positions // 4,
            "beta_fast": 32.0,
            "beta_slow": 1.0,
            "rope_theta": 150000.0,
        },
        **_LOCAL_GLOBAL,
        **_COMMON,
    )


def _olmo3(vocab: int, positions: int) -> PretrainedConfig:
    # One rope parameter set per layer type.
    return Olmo3Config(vocab_size=vocab, max_position_embeddings=positions, **_LOCAL_GLOBAL, **_COMMON)


TINY_ARCHITECTURES = {
    "llama": _llama,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "mistral": _mistral,
    "phi3": _phi3,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "olmo2": _olmo2,
    "granite": _granite,
    "stablelm": _stablelm,
    "gemma": _gemma,
    "cohere": _cohere,
    "phi": _phi,
    "starcoder2": _starcoder2,
    "qwen2_moe": _qwen2_moe,
    "mixtral": _mixtral,
    "olmoe": _olmoe,
    "gemma2": _gemma2,
    "gemma3": _gemma3,
    "mistral_sliding": _mistral_sliding,
    "qwen2_sliding": _qwen2_sliding,
    "qwen3_moe": _qwen3_moe,
    "deepseek_v2": _deepseek_v2,
    "deepseek_v3": _deepseek_v3,
    "smollm3": _smollm3,
    "glm4": _glm4,
    "exaone4": _exaone4,
    "cohere2": _cohere2,
    "gpt_oss": _gpt_oss,
    "olmo3": _olmo3,
}

# Families with sliding-window (local) attention layers, all with windows of 8-16 tokens.
SLIDING_WINDOW_ARCHITECTURES = (
    "gemma2",
    "gemma3",
    "mistral_sliding",
    "qwen2_sliding",
    "exaone4",
    "cohere2",
    "gpt_oss",
    "olmo3",
)

# transformers has no SDPA path for Gemma 2 (attention-logit soft-capping) nor GPT-OSS (attention
# sinks): they always run eager.
EAGER_ONLY_ARCHITECTURES = ("gemma2", "gpt_oss")

# Mixture-of-experts families. Their experts run with transformers' "eager" implementation: the
# default grouped matmul has no float64 kernel on CPU, and float64 is what exactness tests use.
MOE_ARCHITECTURES = ("qwen2_moe", "mixtral", "olmoe", "qwen3_moe", "deepseek_v2", "deepseek_v3", "gpt_oss")


def tiny_model(
    architecture: str,
    *,
    vocab_size: int = 128,
    max_positions: int = 512,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    attn_implementation: str = "sdpa",
    init_scale: float = 1.0,
) -> torch.nn.Module:
    """A randomly initialised causal LM of ``architecture`` (one of TINY_ARCHITECTURES), in eval mode.

    float64 is the default because exactness tests compare argmaxes: at float32 the 1e-7 differences
    between a multi-branch forward and single-token decoding can flip a near tie in a random model.
    ``init_scale`` multiplies all weights; larger values give peakier next-token distributions, which
    makes n-gram guesses (and so the verification paths) hit more often. The families in
    EAGER_ONLY_ARCHITECTURES run eager attention whatever ``attn_implementation`` says.
    """
    if architecture not in TINY_ARCHITECTURES:
        raise ValueError(f"unknown tiny architecture {architecture!r}; allowed: {sorted(TINY_ARCHITECTURES)}")
    config = TINY_ARCHITECTURES[architecture](vocab_size, max_positions)
    if architecture in EAGER_ONLY_ARCHITECTURES:
        attn_implementation = "eager"
    return tiny_model_from_config(
        config,
        seed=seed,
        dtype=dtype,
        attn_implementation=attn_implementation,
        init_scale=init_scale,
        eager_experts=architecture in MOE_ARCHITECTURES,
    )


def tiny_model_from_config(
    config: PretrainedConfig,
    *,
    seed: int,
    dtype: torch.dtype,
    attn_implementation: str,
    init_scale: float,
    eager_experts: bool,
) -> torch.nn.Module:
    """The causal LM of a (tiny) ``config``, seeded, weights times ``init_scale``, in ``dtype`` and eval mode.

    ``eager_experts`` runs mixture-of-experts layers with transformers' "eager" implementation (the
    grouped matmul has no float64 kernel on CPU).
    """
    extra = {"experts_implementation": "eager"} if eager_experts else {}
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation, **extra)
    if init_scale != 1.0:
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() > 1:
                    parameter.mul_(init_scale)
    return model.to(dtype).eval()
