"""Bad parameters and unsupported models fail with a clear message before any forward pass."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    FalconConfig,
    MistralConfig,
)

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.baselines.jacobi import jacobi_generate
from lade_bench.decoding.core.checks import UnsupportedModelError, position_bias_of
from lade_bench.decoding.core.params import DecodingConfigError, LookaheadParams, SamplingParams
from lade_bench.decoding.drafters.prompt_lookup import PromptLookupSettings, prompt_lookup_generate
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny import tiny_model

from .helpers import ForwardCounter
from .refused_models import POSITION_BIASED, TINY_DECODER, TINY_SPECIAL, tiny_gemma3


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"ngram": 1}, "ngram (N)=1 is not allowed: use an integer >= 2"),
        ({"window": 0}, "window (W)=0 is not allowed: use an integer >= 1"),
        ({"guesses": -1}, "guesses (G)=-1 is not allowed: use an integer >= 0"),
        ({"ngram": 2.5}, "ngram (N)=2.5"),
        ({"prompt_as_reference": "yes"}, "prompt_as_reference='yes'"),
        ({"verification": "tree"}, "verification='tree' is not allowed: use one of flat, trie"),
    ],
)
def test_lookahead_params_reject(kwargs, fragment):
    with pytest.raises(DecodingConfigError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        LookaheadParams(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"do_sample": True, "temperature": 0.0}, "temperature=0.0 is not allowed"),
        ({"do_sample": True, "top_p": 1.5}, r"top_p=1.5 is not allowed: use a number in \(0, 1\]"),
        ({"do_sample": True, "top_k": -3}, "top_k=-3 is not allowed"),
    ],
)
def test_sampling_params_reject(kwargs, fragment):
    with pytest.raises(DecodingConfigError, match=fragment):
        SamplingParams(**kwargs)


@pytest.fixture()
def counted_model():
    model = tiny_model("llama", seed=0)
    counter = ForwardCounter(model)
    yield model, counter
    counter.remove()


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda m: lookahead_generate(m, [1, 2, 3], LookaheadParams(), 0), "max_new_tokens=0 is not allowed"),
        (lambda m: lookahead_generate(m, [], LookaheadParams(), 5), "the prompt is empty"),
        (lambda m: lookahead_generate(m, torch.ones(2, 4, dtype=torch.long), LookaheadParams(), 5), "batch size 2"),
        (lambda m: lookahead_generate(m, [[1, 2], [3, 4]], LookaheadParams(), 5), "a batch of 2 prompts"),
        (lambda m: autoregressive_generate(m, [1, 2], -1), "max_new_tokens=-1"),
        (lambda m: prompt_lookup_generate(m, [1, 2], 5, PromptLookupSettings(num_tokens=0)), "num_tokens=0"),
        (lambda m: jacobi_generate(m, [1, 2], 5, block_size=0), "block_size=0"),
        (lambda m: jacobi_generate(m, [], 5), "the prompt is empty"),
    ],
)
def test_bad_calls_fail_before_forward(counted_model, call, fragment):
    model, counter = counted_model
    with pytest.raises(DecodingConfigError, match=fragment):
        call(model)
    assert counter.calls == 0


def test_flash_attention_is_refused_before_forward(counted_model):
    model, counter = counted_model
    model.config._attn_implementation = "flash_attention_2"
    try:
        with pytest.raises(
            UnsupportedModelError,
            match=r"attn_implementation='flash_attention_2'.*\['eager', 'sdpa', 'flex_attention'\]",
        ):
            lookahead_generate(model, [1, 2, 3], LookaheadParams(), 5)
    finally:
        model.config._attn_implementation = "sdpa"
    assert counter.calls == 0


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        # e.g. Llama 4's chunked local attention: lookahead has no mask for it.
        ({"layer_types": ["chunked_attention", "full_attention"]}, r"layer types \['chunked_attention'\]"),
        ({"use_bidirectional_attention": True}, "attends bidirectionally"),
    ],
)
def test_attention_lookahead_cannot_mask_is_refused_before_forward(overrides, fragment):
    model = tiny_gemma3()
    for key, value in overrides.items():
        setattr(model.config, key, value)
    counter = ForwardCounter(model)
    with pytest.raises(UnsupportedModelError, match=fragment):
        lookahead_generate(model, [1, 2, 3], LookaheadParams(), 5)
    with pytest.raises(UnsupportedModelError, match=fragment):
        jacobi_generate(model, [1, 2, 3], 5)
    assert counter.calls == 0


def test_sliding_layers_without_a_window_size_are_refused():
    model = tiny_gemma3(layer_types=["sliding_attention", "full_attention"])
    model.config.sliding_window = None
    with pytest.raises(UnsupportedModelError, match="sliding_window=None"):
        lookahead_generate(model, [1, 2, 3], LookaheadParams(), 5)


def test_sliding_window_models_are_accepted():
    """Sliding-window families run (exactness: test_exactness.py); only unmaskable attention is refused."""
    config = MistralConfig(num_hidden_layers=1, sliding_window=16, **TINY_DECODER)
    model = AutoModelForCausalLM.from_config(config).eval()
    assert len(lookahead_generate(model, [1, 2, 3], LookaheadParams(), 5).tokens) == 5


@pytest.mark.parametrize(
    ("family", "fragment"),
    [
        ("mpt", r"MptForCausalLM is not supported: it uses ALiBi attention biases \(model_type='mpt'"),
        ("bloom", r"BloomForCausalLM is not supported: it uses ALiBi attention biases \(model_type='bloom'"),
        ("falcon_alibi", r"FalconForCausalLM is not supported: it uses ALiBi .*alibi=True"),
    ],
)
def test_position_biased_models_are_refused_before_forward(family, fragment):
    # Eager attention: MPT and Bloom have no SDPA path, and MPT-eager used to pass the check and then
    # silently differ from generate (Bloom and Falcon-ALiBi crashed inside build_alibi_tensor).
    model = AutoModelForCausalLM.from_config(POSITION_BIASED[family](), attn_implementation="eager").eval()
    counter = ForwardCounter(model)
    with pytest.raises(UnsupportedModelError, match=fragment):
        lookahead_generate(model, [1, 2, 3, 1, 2, 3], LookaheadParams(5, 7, 7), 8)
    with pytest.raises(UnsupportedModelError, match="not supported"):
        jacobi_generate(model, [1, 2, 3], 5)
    assert counter.calls == 0
    assert position_bias_of(model) is not None


def test_rotary_falcon_is_not_mistaken_for_alibi():
    config = FalconConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=4, alibi=False, **TINY_SPECIAL)
    assert position_bias_of(AutoModelForCausalLM.from_config(config)) is None
