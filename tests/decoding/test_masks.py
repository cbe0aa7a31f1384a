"""Step masks per layer type: which models get which masks, and the sliding-window rule on position ids."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers import Gemma3Config, LlamaConfig, MistralConfig, Qwen2Config

from lade_bench.decoding.core.checks import LayerAttention, layer_attention_of
from lade_bench.decoding.core.layout import build_step_layout
from lade_bench.decoding.core.masks import StepMasks

SMALL = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (LlamaConfig(**SMALL), LayerAttention(None, None)),
        (MistralConfig(sliding_window=8, **SMALL), LayerAttention(8, None)),
        (MistralConfig(sliding_window=None, **SMALL), LayerAttention(None, None)),
        (Qwen2Config(use_sliding_window=False, sliding_window=8, **SMALL), LayerAttention(None, None)),
        (
            Qwen2Config(use_sliding_window=True, sliding_window=8, num_hidden_layers=2, max_window_layers=1, **SMALL),
            LayerAttention(8, ("full_attention", "sliding_attention")),
        ),
        # A composite model is judged by its text decoder's config.
        (
            Gemma3Config(text_config=dict(num_hidden_layers=6, sliding_window=16, head_dim=8, **SMALL)),
            LayerAttention(16, ("full_attention", "sliding_attention")),
        ),
    ],
    ids=["llama", "mistral_sliding", "mistral_global", "qwen2_off", "qwen2_hybrid", "gemma3_composite"],
)
def test_layer_attention_of(config, expected):
    assert layer_attention_of(SimpleNamespace(config=config)) == expected


def _brute_force_sliding(full: torch.Tensor, positions: list[int], window: int) -> torch.Tensor:
    """The rule spelled out: query at position i sees key at position j only when i - j < window."""
    expected = full.clone()
    for row, i in enumerate(positions[-full.shape[2] :]):
        for col, j in enumerate(positions):
            if i - j >= window:
                expected[0, 0, row, col] = torch.finfo(full.dtype).min
    return expected


@pytest.mark.parametrize("window", [1, 3, 8, 40])
def test_sliding_mask_follows_position_ids(window):
    layout = build_step_layout(levels=3, columns=4, candidates=2, candidate_length=3, dtype=torch.float64, device="cpu")
    position = 20
    masks = StepMasks(LayerAttention(window, ("full_attention", "sliding_attention")), "cpu").build(layout, position)
    full, sliding = masks["full_attention"], masks["sliding_attention"]
    assert full.shape == sliding.shape == (1, 1, layout.num_tokens, position + layout.num_tokens)
    positions = list(range(position)) + (layout.position_offsets + position).tolist()
    assert torch.equal(sliding, _brute_force_sliding(full, positions, window))
    # Every query still sees itself (so no row is fully masked), and the full mask is untouched.
    step = sliding[0, 0, :, position:]
    assert torch.all(step.diagonal() == 0)
    assert torch.equal(full[0, 0, :, :position], torch.zeros(layout.num_tokens, position, dtype=torch.float64))


def test_masks_by_kind_of_model():
    layout = build_step_layout(levels=2, columns=3, candidates=1, candidate_length=2, dtype=torch.float32, device="cpu")
    single = StepMasks(LayerAttention(4, None), "cpu").build(layout, 10)
    assert isinstance(single, torch.Tensor) and (single == torch.finfo(torch.float32).min).any()
    assert isinstance(StepMasks(LayerAttention(None, None), "cpu").build(layout, 10), torch.Tensor)
    only_sliding = StepMasks(LayerAttention(4, ("sliding_attention",)), "cpu").build(layout, 10)
    assert list(only_sliding) == ["sliding_attention"]
    # Short sequences: no query is a window away from anything, so the sliding mask is the full one.
    short = StepMasks(LayerAttention(64, ("full_attention", "sliding_attention")), "cpu").build(layout, 10)
    assert short["sliding_attention"] is short["full_attention"]
