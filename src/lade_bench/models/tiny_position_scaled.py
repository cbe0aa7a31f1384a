"""Tiny random models whose forward depends on how far its positions reach, with tiny thresholds.

LongRoPE Phi-3, dynamic-NTK Qwen3 and Llama 4 text with attention temperature tuning (no chunked
attention), for the tests of ``lade_bench.decoding.core.position_limits``: each threshold is a
constructor argument, so short test generations cross it.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Llama4TextConfig, Phi3Config, PretrainedConfig, Qwen3Config

from lade_bench.models.tiny import tiny_model_from_config

_SMALL: dict[str, Any] = dict(  # Any: splatted into configs of differing keyword types
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)


def longrope_phi3_config(original_max_positions: int) -> PretrainedConfig:
    """Phi-3 with LongRoPE: long factors far from the short ones, so switching early shows."""
    rope = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "short_factor": [1.0] * 4,  # head_dim 8: one factor per rotary frequency
        "long_factor": [1.0, 3.0, 9.0, 27.0],
        "original_max_position_embeddings": original_max_positions,
    }
    return Phi3Config(
        max_position_embeddings=4 * original_max_positions,
        original_max_position_embeddings=original_max_positions,
        rope_parameters=rope,
        sliding_window=None,
        **_SMALL,
    )


def dynamic_qwen3_config(max_positions: int) -> PretrainedConfig:
    """Qwen3 with dynamic NTK scaling from ``max_positions`` on."""
    rope = {"rope_type": "dynamic", "factor": 8.0, "rope_theta": 10000.0}
    return Qwen3Config(
        max_position_embeddings=max_positions, head_dim=8, rope_parameters=rope, use_sliding_window=False, **_SMALL
    )


def tuned_llama4_config(floor_scale: int) -> PretrainedConfig:
    """Llama 4 text, no chunked attention, temperature tuning on a NoPE first layer."""
    # NoPE on layer 0, so the tuning also shapes layer 1's cached keys, and a strong attn_scale.
    return Llama4TextConfig(
        attention_chunk_size=None,
        attn_temperature_tuning=True,
        floor_scale=floor_scale,
        attn_scale=4.0,
        no_rope_layers=[0, 1],
        head_dim=8,
        num_local_experts=2,
        intermediate_size_mlp=64,
        **_SMALL,
    )


def tiny_position_scaled_model(config: PretrainedConfig, *, seed: int = 7) -> torch.nn.Module:
    """A float64 SDPA model of one of the configs above, weights x3 so guesses get accepted."""
    return tiny_model_from_config(
        config, seed=seed, dtype=torch.float64, attn_implementation="sdpa", init_scale=3.0, eager_experts=True
    )
