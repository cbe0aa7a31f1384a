"""The compiled mode (``compile=true``): static KV caches, static-shape steps, compile time untimed.

Exactness runs on the static-shape paths with torch.compile's ``eager`` backend (dynamo captures
the same fixed-shape graphs; eager kernels keep the grid cheap); one configuration per method also
compiles with inductor (slow lane), the backend the measured runs use.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.core.compiled import CompiledForwards, resolve_compile_mode
from lade_bench.decoding.core.layout import build_step_layout
from lade_bench.decoding.core.masks import full_step_mask, sliding_step_mask
from lade_bench.decoding.core.params import DecodingConfigError, LookaheadParams, SamplingParams
from lade_bench.decoding.core.static_step import lookahead_step_shape, padded_step_mask
from lade_bench.decoding.drafters.prompt_lookup import (
    PromptLookupSettings,
    prompt_lookup_candidate,
    prompt_lookup_generate,
)
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny import tiny_model

from .helpers import assert_trie_accepts_like_flat, repetitive_prompt
from .test_sampling_distribution import ALPHA, LENGTH, SAMPLING, goodness_of_fit, setting  # noqa: F401

# The fast lane runs a global, a hybrid and an all-sliding family; the rest run in the slow lane.
FAST = ("llama", "gemma3", "mistral_sliding")
ARCHITECTURES = [
    *FAST,
    *(pytest.param(arch, marks=pytest.mark.slow) for arch in ("qwen3", "gpt2", "phi3", "gemma2", "qwen2_sliding")),
]
CONFIGS = [
    LookaheadParams(5, 7, 7),
    LookaheadParams(2, 1, 0),
    LookaheadParams(5, 1, 3, prompt_as_reference=False),  # W=1 < N-2: a warm-up step is the largest
    LookaheadParams(4, 3, 12),
]
# The other families run the default and the widest step only: the two edge shapes (no guesses; a
# warm-up step wider than the window's) test the static step's sizing, which no family changes, and
# run on the fast lane's global, hybrid and all-sliding families.
EVERY_FAMILY_CONFIGS = [CONFIGS[0], CONFIGS[3]]
NEW_TOKENS = 40


def _traced() -> CompiledForwards:
    return CompiledForwards(mode="default", cache_block=64, backend="eager")


def _params_id(params: LookaheadParams) -> str:
    return f"N{params.ngram}W{params.window}G{params.guesses}R{int(params.prompt_as_reference)}"


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_static_shape_lookahead_equals_ar_greedy(tiny_models, arch):
    """Also: the static step shape covers every step of the generation (warm-up included)."""
    model = tiny_models[arch]
    compiled = _traced()
    for params in CONFIGS if arch in FAST else EVERY_FAMILY_CONFIGS:
        prompt = repetitive_prompt(21, seed=len(arch) + params.guesses)
        expected = autoregressive_generate(model, prompt, NEW_TOKENS).tokens
        shape = lookahead_step_shape(params.ngram, params.window, params.guesses)
        results = {}
        for layout in ("flat", "trie"):
            result = lookahead_generate(
                model, prompt, replace(params, verification=layout), NEW_TOKENS, compiled=compiled
            )
            assert result.tokens == expected, (arch, _params_id(params), layout)
            assert max(result.step_tokens[1:]) <= shape.tokens, (arch, _params_id(params), layout)
            results[layout] = result
        assert_trie_accepts_like_flat(results["flat"], results["trie"])
        eager = lookahead_generate(model, prompt, params, NEW_TOKENS)
        # Same acceptance as the eager executor: padding changes nothing the loop sees.
        assert results["flat"].accept_lengths == eager.accept_lengths
        assert results["flat"].step_tokens == eager.step_tokens


@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_compiled_ar_and_prompt_lookup_equal_ar_greedy(tiny_models, arch):
    model = tiny_models[arch]
    compiled = _traced()
    prompt = repetitive_prompt(25, seed=len(arch))
    eager_ar = autoregressive_generate(model, prompt, NEW_TOKENS)
    ar = autoregressive_generate(model, prompt, NEW_TOKENS, compiled=compiled)
    assert ar.tokens == eager_ar.tokens
    assert (ar.steps, ar.accept_lengths, ar.step_tokens) == (
        eager_ar.steps,
        eager_ar.accept_lengths,
        eager_ar.step_tokens,
    )
    eager_lookup = prompt_lookup_generate(model, prompt, NEW_TOKENS, PromptLookupSettings(num_tokens=4))
    lookup = prompt_lookup_generate(model, prompt, NEW_TOKENS, PromptLookupSettings(num_tokens=4), compiled=compiled)
    assert lookup.tokens == eager_ar.tokens
    # transformers' candidate rule, replayed: the same tokens per forward as its prompt lookup.
    assert lookup.accept_lengths == eager_lookup.accept_lengths
    assert max(lookup.accept_lengths) > 1, "no candidate was ever accepted: the test proves nothing"


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ngram=st.integers(2, 6),
    window=st.integers(1, 6),
    guesses=st.integers(0, 8),
    prompt_seed=st.integers(0, 10_000),
    prompt_length=st.integers(2, 30),
    budget=st.integers(1, 30),
    eos=st.sampled_from([None, 7]),
)
def test_static_shape_lookahead_is_exact_for_any_shape(
    tiny_models, ngram, window, guesses, prompt_seed, prompt_length, budget, eos
):
    model = tiny_models["qwen3"]
    params = LookaheadParams(ngram, window, guesses)
    prompt = repetitive_prompt(prompt_length, seed=prompt_seed)
    expected = autoregressive_generate(model, prompt, budget, eos_token_id=eos).tokens
    result = lookahead_generate(model, prompt, params, budget, eos_token_id=eos, compiled=_traced())
    assert result.tokens == expected


def test_the_step_shape_is_the_largest_warm_up_or_window_step():
    """The static step's size by enumeration of the warm-up levels; that it covers every step of a
    generation is checked on every run of test_static_shape_lookahead_equals_ar_greedy."""
    brute = max(m * (7 + 5 - 1 - m) for m in range(1, 5)) + 7 * 4  # N=5, W=7, G=7 by enumeration of the warm-up levels
    assert lookahead_step_shape(5, 7, 7).tokens == brute == (7 + 7) * 4


def test_compile_time_is_reported_once_and_never_timed(tiny_models):
    model = tiny_models["llama"]
    compiled = _traced()
    prompt = repetitive_prompt(20, seed=3)
    first = lookahead_generate(model, prompt, LookaheadParams(4, 3, 3), 20, compiled=compiled)
    again = lookahead_generate(model, prompt, LookaheadParams(4, 3, 3), 20, compiled=compiled)
    longer = lookahead_generate(model, prompt * 4, LookaheadParams(4, 3, 3), 20, compiled=compiled)
    assert first.stats["compile_time_s"] > 0
    assert again.stats["compile_time_s"] == 0.0  # same shapes: nothing to compile
    assert longer.stats["compile_time_s"] > 0  # a longer cache is a new shape, compiled untimed
    assert first.tokens == again.tokens


def test_padded_mask_hides_padding_and_keeps_the_real_rows():
    """Real rows see exactly the eager step's mask; padding rows see only themselves."""
    layout = build_step_layout(2, 3, candidates=2, candidate_length=2, dtype=torch.float64, device="cpu")
    position, tokens, length = 9, layout.num_tokens + 4, 40
    for window in (None, 6):
        padded = padded_step_mask(layout, position, tokens, length, window)
        eager = full_step_mask(layout, position, "cpu")
        if window is not None:
            eager = sliding_step_mask(eager, layout, position, window)
        q = layout.num_tokens
        assert torch.equal(padded[0, 0, :q, : position + q], eager[0, 0])
        hidden = torch.finfo(torch.float64).min
        assert bool((padded[0, 0, :q, position + q :] == hidden).all())
        for row in range(q, tokens):
            visible = (padded[0, 0, row] == 0).nonzero().flatten().tolist()
            assert visible == [position + row]


@settings(max_examples=200, deadline=None)
@given(
    sequence=st.lists(st.integers(0, 5), min_size=2, max_size=40),
    num_tokens=st.integers(1, 6),
    max_ngram=st.integers(1, 4),
    extra=st.integers(1, 10),
)
def test_prompt_lookup_candidate_is_transformers_rule(sequence, num_tokens, max_ngram, extra):
    max_length = len(sequence) + extra
    generator = PromptLookupCandidateGenerator(
        eos_token_id=torch.tensor([4]), num_output_tokens=num_tokens, max_matching_ngram_size=max_ngram,
        max_length=max_length,
    )  # fmt: skip
    ids = torch.tensor([sequence])
    proposed, _ = generator.get_candidates(ids)
    expected = proposed[0, len(sequence) :].tolist()
    assert prompt_lookup_candidate(sequence, num_tokens, max_ngram, frozenset({4}), max_length) == expected


def test_static_shape_sampling_draws_what_eager_lookahead_draws(setting):  # noqa: F811
    """Same seed, same draws: the static-shape step gives the same logits and the loop consumes the
    generator identically, so the eager path's distribution test covers it."""
    model, prompt, _, _ = setting
    params = LookaheadParams(ngram=3, window=2, guesses=8)
    compiled = _traced()
    for seed in range(60):
        eager = lookahead_generate(model, prompt, params, LENGTH, sampling=SAMPLING, seed=seed)
        static = lookahead_generate(model, prompt, params, LENGTH, sampling=SAMPLING, seed=seed, compiled=compiled)
        assert (static.tokens, static.accept_lengths) == (eager.tokens, eager.accept_lengths)


@pytest.mark.slow
def test_static_prompt_lookup_sampling_matches_the_exact_distribution(setting):  # noqa: F811
    model, prompt, sequences, exact = setting
    compiled = _traced()
    draws, multi_token_steps = [], 0
    for seed in range(800):
        result = prompt_lookup_generate(
            model, prompt, LENGTH, PromptLookupSettings(2, 1), sampling=SAMPLING, seed=seed, compiled=compiled
        )
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    assert multi_token_steps > 30  # candidates were accepted, not only rejected
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


@pytest.mark.slow
def test_inductor_compiled_arms_equal_ar_greedy():
    """The measured backend: inductor-generated kernels, one small configuration per method."""
    model = tiny_model("llama", init_scale=3.0, seed=7)
    compiled = CompiledForwards(mode="default", cache_block=64)
    prompt = repetitive_prompt(20, seed=5)
    expected = autoregressive_generate(model, prompt, 30).tokens
    for run in (
        lambda: autoregressive_generate(model, prompt, 30, compiled=compiled),
        lambda: lookahead_generate(model, prompt, LookaheadParams(4, 3, 3), 30, compiled=compiled),
        lambda: prompt_lookup_generate(model, prompt, 30, PromptLookupSettings(num_tokens=3), compiled=compiled),
    ):
        first, second = run(), run()
        assert first.tokens == second.tokens == expected
        assert first.stats["compile_time_s"] > 0 and second.stats["compile_time_s"] == 0.0
        assert math.isfinite(second.wall_time_s)


def test_compiled_mode_refusals(tiny_models):
    model = tiny_models["llama"]
    with pytest.raises(DecodingConfigError, match="'turbo' is not one of"):
        CompiledForwards(mode="turbo")
    with pytest.raises(DecodingConfigError, match="backend 'tvm'"):
        CompiledForwards(backend="tvm")
    with pytest.raises(DecodingConfigError, match="CUDA graphs"):
        resolve_compile_mode("reduce-overhead", torch.device("cpu"))
    assert resolve_compile_mode("auto", torch.device("cpu")) == "default"
    assert resolve_compile_mode("auto", torch.device("cuda")) == "reduce-overhead"
    flex = tiny_model("llama", attn_implementation="flex_attention")
    with pytest.raises(DecodingConfigError, match="attn_implementation in \\['sdpa', 'eager'\\], not 'flex_attention'"):
        lookahead_generate(flex, [1, 2, 3], LookaheadParams(3, 2, 2), 5, compiled=_traced())
    with pytest.raises(DecodingConfigError, match="not 'flex_attention'"):
        prompt_lookup_generate(flex, [1, 2, 3], 5, compiled=_traced())
    assert lookahead_generate(model, [1, 2, 3], LookaheadParams(3, 2, 2), 5, sampling=SamplingParams()).tokens
