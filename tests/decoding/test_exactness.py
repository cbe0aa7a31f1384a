"""Lookahead greedy emits exactly AR greedy's tokens for every N/W/G shape and verification layout,
on every tiny architecture.

Every registered method's exactness over the main architectures (lookahead, prompt lookup and Jacobi
included, at their config's settings) is tests/decoding/test_method_exactness.py; here are the shapes
that only lookahead has (N=2, W=1, G=0, G>W, no prompt reference), both verification layouts (flat
chains and the token trie: the two accept identically and the trie never feeds more tokens in any
step), eager attention, and every other tiny family, plus Jacobi's block of one.
"""

from __future__ import annotations

import itertools
import zlib
from dataclasses import replace

import pytest

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.baselines.jacobi import jacobi_generate
from lade_bench.decoding.core.params import VERIFICATION_LAYOUTS, LookaheadParams
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny import SLIDING_WINDOW_ARCHITECTURES, TINY_ARCHITECTURES, tiny_model

from .helpers import assert_trie_accepts_like_flat, repetitive_prompt

CONFIGS = [
    LookaheadParams(5, 7, 7),
    LookaheadParams(2, 1, 0),  # N=2 crashes the official code
    LookaheadParams(2, 4, 3),
    LookaheadParams(3, 1, 2, prompt_as_reference=False),  # W=1: minimal lookahead
    LookaheadParams(4, 5, 1),  # G=1: tiny verification
    LookaheadParams(7, 3, 12),
    LookaheadParams(5, 7, 0, prompt_as_reference=False),  # no verification at all
]

# Every shape runs on a global-attention family with rotary positions, one with learned positions,
# and two sliding-window ones (the shapes decide how far the window's rows reach past the sliding
# window); the other families run two shapes each, so that a transformers upgrade breaking one of them
# is caught. test_method_exactness.py runs lookahead at the config's settings on the main families.
FULL_GRID_ARCHITECTURES = ("llama", "gpt2")
FULL_GRID_SLIDING_ARCHITECTURES = ("gemma3", "mistral_sliding")
WIDER_ARCHITECTURES = sorted(
    set(TINY_ARCHITECTURES) - set(FULL_GRID_ARCHITECTURES) - set(FULL_GRID_SLIDING_ARCHITECTURES)
)
WIDER_CONFIGS = [
    LookaheadParams(2, 4, 3),
    LookaheadParams(4, 5, 1, prompt_as_reference=False),
]


def _params_id(params: LookaheadParams) -> str:
    return f"N{params.ngram}W{params.window}G{params.guesses}R{int(params.prompt_as_reference)}"


@pytest.mark.parametrize("arch", FULL_GRID_ARCHITECTURES)
@pytest.mark.parametrize("params", CONFIGS, ids=_params_id)
def test_lookahead_greedy_equals_ar_greedy(tiny_models, arch, params):
    _assert_lookahead_equals_ar(tiny_models[arch], arch, params)


@pytest.mark.parametrize("arch", WIDER_ARCHITECTURES)
@pytest.mark.parametrize("params", WIDER_CONFIGS, ids=_params_id)
def test_wider_architectures_equal_ar_greedy(tiny_models, arch, params):
    _assert_lookahead_equals_ar(tiny_models[arch], arch, params)


@pytest.mark.parametrize("arch", WIDER_ARCHITECTURES)
def test_wider_architectures_with_eager_attention(arch):
    model = tiny_model(arch, init_scale=3.0, seed=7, attn_implementation="eager")
    _assert_lookahead_equals_ar(model, arch, LookaheadParams(4, 5, 5))


@pytest.mark.parametrize("arch", FULL_GRID_SLIDING_ARCHITECTURES)
@pytest.mark.parametrize("params", CONFIGS, ids=_params_id)
def test_sliding_window_families_equal_ar_greedy(tiny_models, arch, params):
    """Windows of 8-16 tokens: the 40-token prompt and 80 new tokens run far past them."""
    window = tiny_models[arch].config.sliding_window
    assert window <= 16
    _assert_lookahead_equals_ar(tiny_models[arch], arch, params)


@pytest.mark.parametrize("arch", FULL_GRID_SLIDING_ARCHITECTURES)
def test_sliding_window_families_with_eager_attention(arch):
    model = tiny_model(arch, init_scale=3.0, seed=5, attn_implementation="eager")
    _assert_lookahead_equals_ar(model, arch, LookaheadParams(6, 9, 6))


def test_sliding_window_layers_really_are_masked(tiny_models, monkeypatch):
    """Without the window restriction (every layer masked like a global one) the output differs."""
    from lade_bench.decoding.core import masks

    model = tiny_models["gemma3"]
    prompt = repetitive_prompt(40, seed=1)
    reference = autoregressive_generate(model, prompt, 60)
    monkeypatch.setattr(masks, "sliding_step_mask", lambda full, layout, position, window: full)
    assert lookahead_generate(model, prompt, LookaheadParams(5, 7, 7), 60).tokens != reference.tokens


def test_full_grid_and_wider_lists_cover_every_tiny_architecture():
    listed = set(FULL_GRID_ARCHITECTURES) | set(WIDER_ARCHITECTURES) | set(FULL_GRID_SLIDING_ARCHITECTURES)
    assert listed == set(TINY_ARCHITECTURES)
    assert set(FULL_GRID_SLIDING_ARCHITECTURES) <= set(SLIDING_WINDOW_ARCHITECTURES)


@pytest.mark.parametrize("arch", sorted(set(SLIDING_WINDOW_ARCHITECTURES) - set(FULL_GRID_SLIDING_ARCHITECTURES)))
def test_wider_sliding_families_run_past_their_window(tiny_models, arch):
    """Their local layers only matter when the 40-token prompt and 80 new tokens run past the window."""
    assert tiny_models[arch].config.sliding_window <= 16


def _assert_lookahead_equals_ar(model, arch: str, params: LookaheadParams) -> None:
    prompt = repetitive_prompt(40, seed=zlib.crc32(arch.encode()) % 1000)
    reference = autoregressive_generate(model, prompt, 80)
    results = {}
    for layout in VERIFICATION_LAYOUTS:
        result = results[layout] = lookahead_generate(model, prompt, replace(params, verification=layout), 80, seed=3)
        assert result.tokens == reference.tokens, layout
        assert sum(result.accept_lengths) == len(result.tokens) == 80
        assert result.steps == len(result.accept_lengths) == len(result.step_tokens)
        assert all(1 <= n <= params.ngram for n in result.accept_lengths)
    assert_trie_accepts_like_flat(results["flat"], results["trie"])


def test_lookahead_actually_accepts_guesses(tiny_models):
    """The exactness tests above would be trivial if no guess were ever accepted, or (for the trie)
    if no two candidates ever shared a prefix."""
    accepted_multi, merged_steps = 0, 0
    for arch, model in tiny_models.items():
        prompt = repetitive_prompt(40, seed=zlib.crc32(arch.encode()) % 1000)
        result = lookahead_generate(model, prompt, LookaheadParams(5, 7, 7), 80)
        accepted_multi += sum(n > 1 for n in result.accept_lengths)
        assert result.compression_ratio >= 1.0
        trie = lookahead_generate(model, prompt, LookaheadParams(5, 7, 7, verification="trie"), 80)
        merged_steps += sum(t < f for t, f in zip(trie.step_tokens, result.step_tokens, strict=True))
    assert accepted_multi > 20
    assert merged_steps > 20


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_both_mask_capable_attention_implementations(attn):
    model = tiny_model("llama", init_scale=3.0, seed=1, attn_implementation=attn)
    prompt = repetitive_prompt(30, seed=5)
    reference = autoregressive_generate(model, prompt, 60)
    assert lookahead_generate(model, prompt, LookaheadParams(4, 5, 5), 60).tokens == reference.tokens


@pytest.mark.parametrize("block", [1, 9])
def test_jacobi_equals_ar_greedy_at_extreme_blocks(tiny_models, block):
    """A block of one (plain AR in Jacobi's loop) and one longer than the config's; the config's own
    block (and a halved one) runs on every main family in test_method_exactness.py."""
    model = tiny_models["phi3"]
    prompt = repetitive_prompt(25, seed=11)
    reference = autoregressive_generate(model, prompt, 50)
    result = jacobi_generate(model, prompt, 50, block_size=block)
    assert result.tokens == reference.tokens
    assert sum(result.accept_lengths) == 50 and result.steps == len(result.accept_lengths)


def test_ar_counts_one_step_per_token(tiny_models):
    result = autoregressive_generate(tiny_models["llama"], [5, 6, 7], 17)
    assert result.steps == 17 and result.accept_lengths == [1] * 17 and result.compression_ratio == 1.0


def test_eos_mid_run_truncates_exactly_for_every_shape_and_layout(tiny_models):
    """Every method's stop at a mid-run id, on three families, is in test_method_exactness.py; here
    every lookahead shape and verification layout stops there too."""
    model = tiny_models["gpt_neox"]
    prompt = repetitive_prompt(30, seed=4)
    free_run = autoregressive_generate(model, prompt, 60).tokens
    eos = free_run[37]
    reference = autoregressive_generate(model, prompt, 60, eos_token_id=eos)
    assert reference.tokens[-1] == eos and len(reference.tokens) <= 38
    for params, layout in itertools.product(CONFIGS, VERIFICATION_LAYOUTS):
        result = lookahead_generate(model, prompt, replace(params, verification=layout), 60, eos_token_id=eos)
        assert result.tokens == reference.tokens, (params, layout)
    assert jacobi_generate(model, prompt, 60, eos_token_id=eos, block_size=5).tokens == reference.tokens


def test_same_seed_same_run(tiny_models):
    model = tiny_models["qwen2"]
    prompt = repetitive_prompt(30, seed=9)
    a = lookahead_generate(model, prompt, LookaheadParams(4, 6, 6), 50, seed=123)
    b = lookahead_generate(model, prompt, LookaheadParams(4, 6, 6), 50, seed=123)
    assert a.tokens == b.tokens and a.accept_lengths == b.accept_lengths
