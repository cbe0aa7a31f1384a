"""Property-based exactness: any (N, W, G), prompt, length and EOS gives AR greedy's tokens, with
flat and trie verification alike (the trie accepting exactly as flat, never feeding more tokens)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.core.params import LookaheadParams
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny import SLIDING_WINDOW_ARCHITECTURES, TINY_ARCHITECTURES

from .helpers import assert_trie_accepts_like_flat


@st.composite
def prompts(draw) -> list[int]:
    """Prompts of 1..200 tokens, often built from a short repeated motif (so the pool gets hits)."""
    length = draw(st.integers(1, 200))
    motif = draw(st.lists(st.integers(3, 127), min_size=1, max_size=12))
    noise = draw(st.lists(st.integers(3, 127), min_size=length, max_size=length))
    use_motif = draw(st.booleans())
    return [motif[i % len(motif)] for i in range(length)] if use_motif else noise


@pytest.mark.slow
@settings(
    # 20: the fixed shapes, layouts, stops and budgets of every architecture run in test_exactness.py and
    # test_method_exactness.py; this one adds random prompts, lengths and N/W/G on random families.
    max_examples=20,
    deadline=None,
    derandomize=True,  # CI must not flake on a new example every run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    arch=st.sampled_from(sorted(TINY_ARCHITECTURES)),
    ngram=st.integers(2, 8),
    window=st.integers(1, 16),
    guesses=st.integers(0, 16),
    prompt_as_reference=st.booleans(),
    prompt=prompts(),
    max_new_tokens=st.integers(1, 200),
    eos_index=st.one_of(st.none(), st.integers(0, 199)),
    seed=st.integers(0, 2**16),
)
def test_lookahead_greedy_matches_ar(
    tiny_models, arch, ngram, window, guesses, prompt_as_reference, prompt, max_new_tokens, eos_index, seed
):
    model = tiny_models[arch]
    params = LookaheadParams(ngram, window, guesses, prompt_as_reference)
    eos = None
    if eos_index is not None:
        # Take EOS from the free-running output, so that it really occurs mid-run.
        free_run = autoregressive_generate(model, prompt, max_new_tokens).tokens
        eos = free_run[min(eos_index, len(free_run) - 1)]
    reference = autoregressive_generate(model, prompt, max_new_tokens, eos_token_id=eos)
    result = lookahead_generate(model, prompt, params, max_new_tokens, eos_token_id=eos, seed=seed)
    assert result.tokens == reference.tokens
    assert len(result.tokens) <= max_new_tokens
    assert sum(result.accept_lengths) == len(result.tokens)
    assert all(1 <= n <= ngram for n in result.accept_lengths)
    trie_params = replace(params, verification="trie")
    trie = lookahead_generate(model, prompt, trie_params, max_new_tokens, eos_token_id=eos, seed=seed)
    assert_trie_accepts_like_flat(result, trie)


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    arch=st.sampled_from(SLIDING_WINDOW_ARCHITECTURES),
    ngram=st.integers(2, 8),
    window=st.integers(1, 16),
    guesses=st.integers(0, 16),
    prompt_as_reference=st.booleans(),
    prompt=prompts(),
    max_new_tokens=st.integers(20, 96),
    seed=st.integers(0, 2**16),
)
def test_sliding_window_lookahead_greedy_matches_ar(
    tiny_models, arch, ngram, window, guesses, prompt_as_reference, prompt, max_new_tokens, seed
):
    """Sliding windows of 8-16 tokens: prompts up to 200 and generations up to 96 run far past them."""
    model = tiny_models[arch]
    params = LookaheadParams(ngram, window, guesses, prompt_as_reference)
    reference = autoregressive_generate(model, prompt, max_new_tokens)
    result = lookahead_generate(model, prompt, params, max_new_tokens, seed=seed)
    assert result.tokens == reference.tokens
    assert sum(result.accept_lengths) == len(result.tokens)
    trie = lookahead_generate(model, prompt, replace(params, verification="trie"), max_new_tokens, seed=seed)
    assert_trie_accepts_like_flat(result, trie)
