"""The ar_pp arm's placement: decoder layers split over K devices as Accelerate balances them, no GPU needed."""

from __future__ import annotations

import pytest
from transformers import LlamaConfig, Qwen2Config

from lade_bench.models.pipeline import (
    PipelineParallelError,
    decoder_layer_names,
    device_of,
    layers_per_device,
    meta_model,
    pipeline_device_map,
)

CONFIGS = {
    "llama": LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=12, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=False,
    ),
    "qwen2_tied": Qwen2Config(
        vocab_size=256, hidden_size=64, intermediate_size=160, num_hidden_layers=9, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=True,
    ),
}  # fmt: skip


def _bytes(model, device_map, device):
    return sum(
        p.numel() * p.element_size() for name, p in model.named_parameters() if device_of(name, device_map) == device
    )


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("devices", [2, 3, 4])
def test_layers_are_contiguous_balanced_and_ends_sit_on_the_first_and_last_device(name, devices):
    model = meta_model(CONFIGS[name])
    device_map = pipeline_device_map(model, devices)
    spread = layers_per_device(model, device_map)
    # Every device holds a contiguous run of layers, in device order, covering them all.
    assert sorted(spread) == list(range(devices))
    assert [layer for device in range(devices) for layer in spread[device]] == list(
        range(len(decoder_layer_names(model)))
    )
    assert all(run == list(range(run[0], run[-1] + 1)) for run in spread.values())
    assert device_of("model.embed_tokens", device_map) == 0
    assert device_of("model.norm", device_map) == devices - 1
    assert device_of("lm_head", device_map) == devices - 1
    # Balanced by parameter bytes: no device holds more than its share plus one layer's worth.
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    layer = max(sum(p.numel() * p.element_size() for p in m.parameters()) for m in model.model.layers)
    embedding = model.model.embed_tokens.weight.numel() * model.model.embed_tokens.weight.element_size()
    for device in range(devices):
        assert _bytes(model, device_map, device) <= total / devices + max(layer, embedding)


def test_a_config_is_planned_like_its_meta_model():
    config = CONFIGS["llama"]
    assert pipeline_device_map(config, 3) == pipeline_device_map(meta_model(config), 3)


def test_impossible_pipelines_are_refused():
    with pytest.raises(PipelineParallelError, match="integer >= 2"):
        pipeline_device_map(CONFIGS["llama"], 1)
    with pytest.raises(PipelineParallelError, match="9 decoder layer"):
        pipeline_device_map(CONFIGS["qwen2_tied"], 10)
