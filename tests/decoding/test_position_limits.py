"""Position-dependent rotary scaling and attention temperature tuning: exact below the threshold,
refused before the first forward where a generation could reach it.

Tiny float64 models with tiny thresholds: Phi-3 with LongRoPE (original_max_position_embeddings=48),
Qwen3 with dynamic NTK scaling (max_position_embeddings=48) and Llama 4 text with temperature tuning
on a NoPE layer (no chunked attention). The prompt is 20 tokens; lookahead runs N=4, W=5, G=5, whose
window reaches W+N-3 = 6 positions past the last accepted token and feeds (N-1)(W+G) = 30 tokens.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
)

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.baselines.jacobi import jacobi_generate
from lade_bench.decoding.core.checks import UnsupportedModelError, recurrent_layers_of
from lade_bench.decoding.core.params import LookaheadParams
from lade_bench.decoding.drafters.prompt_lookup import PromptLookupSettings, prompt_lookup_generate
from lade_bench.decoding.lookahead import lookahead as lookahead_module
from lade_bench.decoding.lookahead.hf_generate import lookahead_custom_generate
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny_position_scaled import (
    dynamic_qwen3_config,
    longrope_phi3_config,
    tiny_position_scaled_model,
    tuned_llama4_config,
)

from .helpers import ForwardCounter, no_cache_greedy, repetitive_prompt
from .refused_models import RECURRENT

PROMPT = repetitive_prompt(20, seed=3)
PARAMS = LookaheadParams(4, 5, 5)
BLOCK = 5  # Jacobi block size and prompt lookup num_tokens: 5 positions past the last accepted token


def _longrope() -> torch.nn.Module:
    return tiny_position_scaled_model(longrope_phi3_config(48))


def _dynamic() -> torch.nn.Module:
    return tiny_position_scaled_model(dynamic_qwen3_config(48))


def _temperature_tuned(floor_scale: int) -> torch.nn.Module:
    return tiny_position_scaled_model(tuned_llama4_config(floor_scale))


@pytest.fixture(scope="module")
def scaled_models() -> dict[str, torch.nn.Module]:
    return {"longrope": _longrope(), "dynamic": _dynamic()}


def _lookahead(layout: str):
    return lambda model, budget: lookahead_generate(model, PROMPT, replace(PARAMS, verification=layout), budget)


METHODS = {
    "lookahead_flat": _lookahead("flat"),
    "lookahead_trie": _lookahead("trie"),
    "jacobi": lambda model, budget: jacobi_generate(model, PROMPT, budget, block_size=BLOCK),
    "prompt_lookup": lambda model, budget: prompt_lookup_generate(
        model, PROMPT, budget, PromptLookupSettings(num_tokens=BLOCK)
    ),
}

# The most new tokens each method may generate after the 20-token prompt: the longest forward,
# prompt + max_new_tokens - 1 + reach, must stay within 48 (LongRoPE: the long factors start past
# it) or 47 (dynamic: the frequencies are rescaled from 48 on, and only reset by a shorter forward).
LIMITS = {
    ("longrope", "lookahead_flat"): 23,
    ("longrope", "lookahead_trie"): 23,
    ("longrope", "jacobi"): 24,
    ("longrope", "prompt_lookup"): 24,
    ("dynamic", "lookahead_flat"): 22,
    ("dynamic", "lookahead_trie"): 22,
    ("dynamic", "jacobi"): 23,
    ("dynamic", "prompt_lookup"): 23,
}
FEATURES = {
    "longrope": ("Phi3ForCausalLM", "model_type='phi3'", "LongRoPE", "original_max_position_embeddings=48"),
    "dynamic": ("Qwen3ForCausalLM", "model_type='qwen3'", "dynamic NTK", "max_position_embeddings=48"),
}


@pytest.mark.parametrize(("scaling", "method"), sorted(LIMITS))
def test_rotary_scaling_is_exact_up_to_the_threshold_and_refused_past_it(scaled_models, scaling, method):
    model = scaled_models[scaling]
    most = LIMITS[scaling, method]
    reference = autoregressive_generate(model, PROMPT, most)
    assert METHODS[method](model, most).tokens == reference.tokens
    counter = ForwardCounter(model)
    with pytest.raises(UnsupportedModelError) as refused:
        METHODS[method](model, most + 1)
    counter.remove()
    assert counter.calls == 0
    message = str(refused.value)
    for fragment in (*FEATURES[scaling], f"max_new_tokens <= {most} for this 20-token prompt", "autoregressive"):
        assert fragment in message


@pytest.mark.parametrize("scaling", ["longrope", "dynamic"])
def test_plain_decoding_below_the_threshold_is_the_no_cache_loop(scaled_models, scaling):
    """What "exact" means for these models: below the threshold transformers' cached greedy decoding
    equals a loop that recomputes the whole sequence every token (unscaled or short-factor rotary),
    and the methods above equal it; past it the two need not agree, so nothing else runs there."""
    model = scaled_models[scaling]
    assert autoregressive_generate(model, PROMPT, 22).tokens == no_cache_greedy(model, PROMPT, 22)


@pytest.mark.parametrize("scaling", ["longrope", "dynamic"])
@pytest.mark.parametrize("method", ["lookahead_flat", "jacobi"])
def test_past_the_threshold_the_output_really_differs(scaled_models, monkeypatch, scaling, method):
    """Without the refusal the methods would be silently wrong here (the threshold is the real one)."""
    from lade_bench.decoding.baselines import jacobi as jacobi_module

    model = scaled_models[scaling]
    monkeypatch.setattr(lookahead_module, "check_position_limits", lambda *args: None)
    monkeypatch.setattr(jacobi_module, "check_position_limits", lambda *args: None)
    reference = autoregressive_generate(model, PROMPT, 40)
    assert METHODS[method](model, 40).tokens != reference.tokens


def test_custom_generate_refuses_past_the_threshold(scaled_models):
    model = scaled_models["longrope"]
    prompt = torch.tensor([PROMPT])
    with pytest.raises(UnsupportedModelError, match="LongRoPE"):
        model.generate(prompt, custom_generate=lookahead_custom_generate, max_new_tokens=24, lookahead=PARAMS)


def test_temperature_tuning_refuses_lookahead_past_floor_scale():
    model = _temperature_tuned(floor_scale=4)
    counter = ForwardCounter(model)
    for layout in ("flat", "trie"):
        with pytest.raises(UnsupportedModelError) as refused:
            lookahead_generate(model, PROMPT, replace(PARAMS, verification=layout), 10)
        message = str(refused.value)
        for fragment in ("Llama4ForCausalLM", "model_type='llama4_text'", "attn_temperature_tuning", "floor_scale=4"):
            assert fragment in message
        assert "a prompt shorter than 20 tokens" in message
    assert counter.calls == 0


def test_temperature_tuning_really_changes_lookahead_past_floor_scale(monkeypatch):
    model = _temperature_tuned(floor_scale=4)
    monkeypatch.setattr(lookahead_module, "check_position_limits", lambda *args: None)
    assert lookahead_generate(model, PROMPT, PARAMS, 40).tokens != autoregressive_generate(model, PROMPT, 40).tokens


def test_temperature_tuning_keeps_in_order_methods_exact_past_floor_scale():
    """Jacobi and prompt lookup feed tokens in order, so index + cache length is each one's position."""
    model = _temperature_tuned(floor_scale=4)
    reference = autoregressive_generate(model, PROMPT, 40)
    assert jacobi_generate(model, PROMPT, 40, block_size=BLOCK).tokens == reference.tokens
    assert prompt_lookup_generate(model, PROMPT, 40, PromptLookupSettings(num_tokens=BLOCK)).tokens == reference.tokens


def test_temperature_tuning_allows_lookahead_below_floor_scale():
    # 20 + 31 - 1 + 29 = 79 = floor_scale - 1: the last index still gets a temperature of exactly 1.
    model = _temperature_tuned(floor_scale=80)
    reference = autoregressive_generate(model, PROMPT, 31)
    for layout in ("flat", "trie"):
        assert METHODS[f"lookahead_{layout}"](model, 31).tokens == reference.tokens
    with pytest.raises(UnsupportedModelError, match="max_new_tokens <= 31 for this 20-token prompt"):
        lookahead_generate(model, PROMPT, PARAMS, 32)


@pytest.mark.parametrize("family", sorted(RECURRENT))
def test_recurrent_models_are_refused_for_their_state(family):
    model = AutoModelForCausalLM.from_config(RECURRENT[family]()).eval()
    counter = ForwardCounter(model)
    for run in (lambda: lookahead_generate(model, PROMPT, PARAMS, 8), lambda: jacobi_generate(model, PROMPT, 8)):
        with pytest.raises(UnsupportedModelError, match="cannot be rolled back after a rejected guess"):
            run()
    assert counter.calls == 0


@pytest.mark.parametrize(
    "model_type",
    ["jamba", "bamba", "falcon_h1", "zamba2", "granitemoehybrid", "qwen3_next", "minimax", "recurrent_gemma", "xlstm"],
)
def test_hybrid_and_recurrent_configs_are_told_about_their_state(model_type):
    """Judged from the config alone (these models are too large to build here by default)."""
    assert "recurrent" in recurrent_layers_of(SimpleNamespace(config=AutoConfig.for_model(model_type)))


@pytest.mark.parametrize("model_type", ["llama", "gemma3_text", "smollm3", "llama4_text"])
def test_attention_models_have_no_recurrent_layers(model_type):
    assert recurrent_layers_of(SimpleNamespace(config=AutoConfig.for_model(model_type))) is None
