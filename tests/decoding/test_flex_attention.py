"""Lookahead under attn_implementation="flex_attention": its BlockMask is the float mask, and the
output is exactly AR greedy's.

The exactness tests run float64 models, which the fused (inductor) flex_attention kernel does not
take on CPU (it accepts float32/16 only), so they run torch's eager flex_attention: the same
``mask_mod`` and ``BlockMask``, applied by the unfused reference implementation (the
``eager_flex`` fixture swaps transformers' compiled wrapper for it). The model's own prefill masks
are still transformers' compiled ``create_block_mask``. ``test_fused_kernel_on_cpu`` runs the
default, compiled path once, in float32.
"""

from __future__ import annotations

import zlib
from dataclasses import replace

import pytest
import torch
from torch.nn.attention.flex_attention import create_mask, flex_attention

from lade_bench.decoding import UnsupportedModelError, check_custom_mask_support
from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.core import checks as checks_module
from lade_bench.decoding.core.branch import BRANCH_BUILDERS
from lade_bench.decoding.core.checks import LayerAttention
from lade_bench.decoding.core.flex_masks import step_block_mask, step_mask_mod
from lade_bench.decoding.core.layout import build_branch_layout
from lade_bench.decoding.core.masks import StepMasks, full_step_mask, sliding_step_mask
from lade_bench.decoding.core.params import VERIFICATION_LAYOUTS, LookaheadParams
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny import TINY_ARCHITECTURES, tiny_model, tiny_model_from_config

from .helpers import assert_trie_accepts_like_flat, repetitive_prompt

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

NEW_TOKENS = 32


@pytest.fixture
def eager_flex(monkeypatch):
    """transformers' flex_attention path with torch's eager (unfused) flex_attention in place of the
    compiled one: float64 on CPU, and no kernel compile per test."""
    import transformers.integrations.flex_attention as hf_flex

    def eager(query, key, value, training=False, **kwargs):
        return flex_attention(query, key, value, **kwargs)

    monkeypatch.setattr(hf_flex, "compile_friendly_flex_attention", eager)


def _flex_model(arch: str, dtype: torch.dtype = torch.float64) -> torch.nn.Module:
    # From the config directly: tiny_model runs Gemma 2 eager because SDPA lacks its logit
    # soft-capping, which flex_attention has (a score_mod beside our BlockMask).
    config = TINY_ARCHITECTURES[arch](128, 512)
    return tiny_model_from_config(
        config, seed=7, dtype=dtype, attn_implementation="flex_attention", init_scale=3.0, eager_experts=False
    )


def _layouts():
    """Step layouts: warm-up (one level), flat and trie branches with shared prefixes, no branch."""
    candidates = [(5, 6, 7), (5, 6, 9), (8, 1, 2), (5, 4, 4)]
    for levels, columns, kind, count in [(1, 5, "flat", 0), (3, 4, "flat", 4), (3, 4, "trie", 4), (4, 7, "trie", 3)]:
        branch = BRANCH_BUILDERS[kind](candidates[:count], 0)
        yield build_branch_layout(levels, columns, branch.tree.parents, branch.paths, torch.float64, "cpu")


@pytest.mark.parametrize("position", [0, 9, 150])  # 150: the cache alone spans more than one 128-block
@pytest.mark.parametrize("window", [None, 1, 6, 300])
def test_block_mask_equals_float_mask(position, window):
    for layout in _layouts():
        q = layout.num_tokens
        expected = full_step_mask(layout, position, "cpu")
        if window is not None:
            expected = sliding_step_mask(expected, layout, position, window)
        visible = expected[0, 0] == 0
        dense = create_mask(step_mask_mod(layout, position, window), 1, 1, q, position + q, device="cpu")
        assert torch.equal(dense[0, 0], visible)
        # The block summary: a 128 x 128 block is skipped exactly when nothing in it is visible, and
        # marked full (mask_mod not evaluated) only when everything in it is.
        block_mask = step_block_mask(layout, position, window, "cpu")
        assert block_mask.shape == (1, 1, q, position + q)
        size = block_mask.BLOCK_SIZE
        padded = torch.zeros(-(-q // size[0]) * size[0], -(-(position + q) // size[1]) * size[1], dtype=torch.bool)
        padded[:q, : position + q] = visible
        blocks = padded.unflatten(0, (-1, size[0])).unflatten(2, (-1, size[1]))
        assert torch.equal(block_mask.to_dense()[0, 0].bool(), blocks.any(dim=3).any(dim=1))


def test_hybrid_models_get_one_block_mask_per_layer_type():
    layout = next(iter(_layouts()))
    attention = LayerAttention(4, ("full_attention", "sliding_attention"))
    masks = StepMasks(attention, "cpu", "flex_attention").build(layout, 20)
    assert set(masks) == {"full_attention", "sliding_attention"}
    q = layout.num_tokens
    full = create_mask(masks["full_attention"].mask_mod, 1, 1, q, 20 + q, device="cpu")
    sliding = create_mask(masks["sliding_attention"].mask_mod, 1, 1, q, 20 + q, device="cpu")
    assert torch.equal(full, full_step_mask(layout, 20, "cpu") == 0)
    assert torch.equal(sliding, sliding_step_mask(full_step_mask(layout, 20, "cpu"), layout, 20, 4) == 0)
    # The float form is untouched for the other implementations.
    assert isinstance(StepMasks(attention, "cpu", "sdpa").build(layout, 20)["full_attention"], torch.Tensor)


SHAPES = [
    LookaheadParams(5, 7, 7),
    LookaheadParams(4, 5, 1, prompt_as_reference=False),
    LookaheadParams(3, 1, 2),
]


@pytest.mark.slow
@pytest.mark.parametrize("params", SHAPES, ids=lambda p: f"N{p.ngram}W{p.window}G{p.guesses}")
def test_flex_lookahead_equals_ar_greedy_llama(eager_flex, params):
    _assert_equals_ar("llama", params)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen3", "gemma2", "gemma3", "mistral_sliding"])
def test_flex_lookahead_equals_ar_greedy_other_families(eager_flex, arch):
    """GQA with q/k norms; hybrid local/global with soft-capping; hybrid; every layer sliding."""
    _assert_equals_ar(arch, LookaheadParams(5, 7, 7))


def _assert_equals_ar(arch: str, params: LookaheadParams) -> None:
    model = _flex_model(arch)
    prompt = repetitive_prompt(40, seed=zlib.crc32(arch.encode()) % 1000)
    # The reference is the SDPA (eager for Gemma 2) model with the same weights, decoding one token
    # at a time under its own causal masks.
    reference = autoregressive_generate(tiny_model(arch, init_scale=3.0, seed=7), prompt, NEW_TOKENS)
    results = {}
    for layout in VERIFICATION_LAYOUTS:
        result = lookahead_generate(model, prompt, replace(params, verification=layout), NEW_TOKENS, seed=3)
        results[layout] = result
        assert result.tokens == reference.tokens, layout
    assert_trie_accepts_like_flat(results["flat"], results["trie"])
    assert max(results["flat"].accept_lengths) > 1 or params.guesses == 0


@pytest.mark.slow
def test_flex_ar_equals_sdpa_ar(eager_flex):
    """The AR arm under flex_attention: the model's own (compiled) causal BlockMasks, same tokens."""
    prompt = repetitive_prompt(40, seed=5)
    reference = autoregressive_generate(tiny_model("gemma3", init_scale=3.0, seed=7), prompt, NEW_TOKENS)
    assert autoregressive_generate(_flex_model("gemma3"), prompt, NEW_TOKENS).tokens == reference.tokens


def test_flex_model_passes_the_support_check():
    check_custom_mask_support(_flex_model("llama"))


def test_flex_refused_without_flex_attention_in_torch(monkeypatch):
    monkeypatch.setattr(checks_module, "flex_attention_available", lambda: False)
    with pytest.raises(UnsupportedModelError) as info:
        check_custom_mask_support(_flex_model("llama"))
    assert "attn_implementation='flex_attention'" in str(info.value) and "['eager', 'sdpa']" in str(info.value)


def test_flash_attention_still_refused():
    with pytest.raises(UnsupportedModelError, match="'flash_attention_2'.*'flex_attention'"):
        checks_module.check_attention_implementation("flash_attention_2")


# The fused test's head size. Inductor's CPU flex_attention kernel (seen on torch 2.13, AVX2) returns
# wrong attention, NaN at times, for head sizes 8 and 16 at some sequence lengths and not others,
# changing from call to call: plain torch reproduces it (compiled flex_attention against SDPA, causal
# BlockMask, no transformers or lookahead). Head sizes 32, 64, 128 and 256 agree with SDPA to 1e-6,
# and real models use 64 (SmolLM2) or more (Gemma 3: 256), so the fused test runs a real head size;
# the tiny models' head size 8 would test that kernel defect, not lookahead.
FUSED_HEAD_DIM = 64


@pytest.mark.slow
def test_fused_kernel_on_cpu():
    """The default path: transformers' torch.compile'd flex_attention (inductor's CPU kernel), float32.

    Lookahead under the fused kernel gives AR greedy's tokens, both AR's under SDPA and AR's under the
    same fused kernel (the step mask is the only difference between the two flex runs).
    """
    config = TINY_ARCHITECTURES["llama"](128, 512)
    config.head_dim = FUSED_HEAD_DIM

    def build(attention: str) -> torch.nn.Module:
        return tiny_model_from_config(
            config, seed=7, dtype=torch.float32, attn_implementation=attention, init_scale=3.0, eager_experts=False
        )

    fused = build("flex_attention")
    prompt = repetitive_prompt(40, seed=11)
    reference = autoregressive_generate(build("sdpa"), prompt, 24)
    assert autoregressive_generate(fused, prompt, 24).tokens == reference.tokens
    result = lookahead_generate(fused, prompt, LookaheadParams(4, 3, 3), 24, seed=3)
    assert result.tokens == reference.tokens
