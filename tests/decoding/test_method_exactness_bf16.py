"""The exactness grid in bfloat16 on the batch-invariant step path (issue 68).

On a CPU in bfloat16 a row computed alone (AR's one-token step) and the same row inside a wider
step round differently, so on the standard path a method's greedy output leaves AR's at a near-tie
(``test_divergence.py``). On the batch-invariant path (``decoding.core.batch_invariant``) every row is
bit-identical however many rows share the forward, so every registered method must again emit AR's
tokens exactly. The methods are the float grid's (``test_method_exactness.METHODS``: a method
registered later inherits this grid too), each with the settings a cell composed from the configs
gives it; the cases are tiny bfloat16 models whose prompts hold such near-ties (the standard path's
lookahead leaves AR on them, checked below through ``standard_path``, so this grid would fail there).

Cheaper than the float grid (the suite is over its CPU budget): five architectures with one prompt
each, the config's defaults only (the float grid covers the halved settings, stops and budgets).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lade_bench.decoding import LookaheadParams, autoregressive_generate, lookahead_generate
from lade_bench.decoding.core import batch_invariant
from lade_bench.methods import STANDARD_PATH_REFERENCE, get_method
from lade_bench.models.loading import tokenizer_source
from lade_bench.models.tiny import tiny_model
from lade_bench.runner import register_configs

from .grid_resources import GRID_RESOURCES
from .helpers import no_cache_greedy, repetitive_prompt
from .test_method_exactness import METHODS, _assert_counts, _compose, _method_id, _run, settings_of

# (architecture, prompt seed): tiny bfloat16 models (init scale 1, seed 7: flat, with near-ties) on a
# prompt where, on this project's CPUs, the standard path's wider steps flip a near-tie (llama 14 and
# gemma3 10 are test_divergence.py's cases; qwen3 adds QK-norm, mistral_sliding a sliding window, gemma2
# soft-capped logits). Every other tiny architecture gets the path and one lookahead run below.
CASES = (("llama", 14), ("gemma3", 10), ("qwen3", 0), ("mistral_sliding", 10), ("gemma2", 3))
PROMPT_LEN, NEW_TOKENS = 30, 48


def _case_id(case: tuple[str, int]) -> str:
    return f"{case[0]}-{case[1]}"


@pytest.fixture(scope="module")
def on_path():
    """arch -> (bfloat16 tiny model on the batch-invariant path, its prompt, AR's tokens on the path).

    AR on the path is also checked against the no-cache argmax loop (every forward over the whole
    sequence): with rows batch-invariant, a row's logits do not depend on the rows beside it.
    """
    cases = {}
    for arch, prompt_seed in CASES:
        model = tiny_model(arch, init_scale=1.0, seed=7, dtype=torch.bfloat16)
        batch_invariant.enable(model)
        prompt = repetitive_prompt(PROMPT_LEN, seed=prompt_seed)
        reference = autoregressive_generate(model, prompt, NEW_TOKENS).tokens
        assert reference == no_cache_greedy(model, prompt, NEW_TOKENS), f"AR is not the no-cache argmax ({arch})"
        cases[arch] = (model, prompt, reference)
    return cases


@pytest.fixture(scope="module")
def resources(on_path, tmp_path_factory):
    """Method name -> the overrides naming what its cells need, built from these runs (drafts accepted)."""
    register_configs()
    runs = [prompt + reference for _, prompt, reference in on_path.values()]
    tokenizer = tokenizer_source(_compose([]).model)
    folder = tmp_path_factory.mktemp("grid_resources_bf16")
    return {name: tuple(build(runs, folder / name, tokenizer)) for name, build in GRID_RESOURCES.items()}


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("method", METHODS, ids=_method_id)
def test_method_equals_ar_greedy_in_bfloat16_on_the_path(on_path, resources, method, case):
    model, prompt, reference = on_path[case[0]]
    settings = settings_of(method.name, "defaults", resources.get(method.name, ()))
    result = _run(method, model, prompt, NEW_TOKENS, settings)
    assert result.tokens == reference
    _assert_counts(result, NEW_TOKENS, PROMPT_LEN)
    if method.name in resources:  # a resource built from this very run: exact *with* accepted drafts
        assert max(result.accept_lengths[1:]) > 1, result.accept_lengths


def test_the_cases_break_exactness_on_the_standard_path(on_path):
    """The grid's cases are ones the standard path gets wrong: there, lookahead (the cell defaults) leaves
    AR on some of them, so the grid above passes because of the path, not because of easy prompts."""
    lookahead = get_method("lookahead")
    leaves = []
    for arch, (model, prompt, _) in on_path.items():
        with batch_invariant.standard_path(model):
            standard_ar = autoregressive_generate(model, prompt, NEW_TOKENS).tokens
            result = _run(lookahead, model, prompt, NEW_TOKENS, settings_of("lookahead", "defaults"))
        if result.tokens != standard_ar:
            leaves.append(arch)
    assert leaves, "no case of the grid flips a near-tie on the standard path"


def test_the_standard_path_is_restored_and_left(on_path):
    """``standard_path`` runs the attention the model was loaded with and the linears' own forwards, and
    puts the path back on exit: the model's AR tokens are the path's again afterwards."""
    model, prompt, reference = on_path["llama"]
    with batch_invariant.standard_path(model) as standard:
        assert standard is model and model.config._attn_implementation == "sdpa"
        assert all("forward" not in m.__dict__ for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert model.config._attn_implementation == batch_invariant.ATTENTION_NAME
    assert all("forward" in m.__dict__ for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert autoregressive_generate(model, prompt, NEW_TOKENS).tokens == reference


def test_the_ar_standard_arm_runs_ar_on_the_standard_path_and_leaves_the_path_on(on_path):
    """``ar_standard`` (a batch-invariant cell's timing reference) emits what AR emits on the standard
    path, here not the path's tokens (a near-tie flips), and the model is on the path again after it."""
    model, prompt, reference = on_path["llama"]
    with batch_invariant.standard_path(model):
        standard = autoregressive_generate(model, prompt, NEW_TOKENS).tokens
    result = _run(get_method(STANDARD_PATH_REFERENCE), model, prompt, NEW_TOKENS, {})
    assert result.tokens == standard != reference
    assert autoregressive_generate(model, prompt, NEW_TOKENS).tokens == reference


@st.composite
def _prompts(draw) -> list[int]:
    """Prompts of 1..60 tokens, often a short repeated motif (so lookahead's pool gets hits)."""
    length = draw(st.integers(1, 60))
    motif = draw(st.lists(st.integers(3, 127), min_size=1, max_size=8))
    noise = draw(st.lists(st.integers(3, 127), min_size=length, max_size=length))
    return [motif[i % len(motif)] for i in range(length)] if draw(st.booleans()) else noise


@pytest.mark.slow
@settings(
    # 12 examples: the grid above runs the fixed cases; this adds random prompts, budgets and lookahead
    # shapes and layouts on the sliding-window model (its masks have the most gaps to compact).
    max_examples=12,
    deadline=None,
    derandomize=True,  # CI must not flake on a new example every run
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ngram=st.integers(2, 6),
    window=st.integers(1, 8),
    guesses=st.integers(0, 8),
    prompt_as_reference=st.booleans(),
    verification=st.sampled_from(["flat", "trie"]),
    prompt=_prompts(),
    max_new_tokens=st.integers(1, 40),
)
def test_lookahead_equals_ar_in_bfloat16_on_the_path(
    on_path, ngram, window, guesses, prompt_as_reference, verification, prompt, max_new_tokens
):
    model = on_path["mistral_sliding"][0]
    params = LookaheadParams(ngram, window, guesses, prompt_as_reference, verification=verification)
    reference = autoregressive_generate(model, prompt, max_new_tokens).tokens
    assert lookahead_generate(model, prompt, params, max_new_tokens).tokens == reference


@pytest.mark.parametrize("arch", ["deepseek_v3", "phi3", "deepseek_v2"])
def test_the_path_runs_the_other_layer_kinds_exactly(arch):
    """Value heads narrower than query heads (DeepSeek's latent attention), phi3's fused projections and
    deepseek_v2's narrow layers (whose kernels agree on most rows but not all: each shape's chunk is measured on
    many draws where a draw is cheap) run on the path with lookahead equal to AR."""
    model = tiny_model(arch, init_scale=1.0, seed=7, dtype=torch.bfloat16)
    report = batch_invariant.enable(model)
    assert report is not None and report.attention_cases > 0
    prompt = repetitive_prompt(PROMPT_LEN, seed=14)
    ar = autoregressive_generate(model, prompt, 24).tokens
    assert lookahead_generate(model, prompt, LookaheadParams(5, 7, 7), 24).tokens == ar


def test_gpt2s_conv1d_layers_are_measured_and_checked_like_linear_ones():
    """GPT-2's attention and MLP are transformers Conv1D layers (one addmm over the rows), not nn.Linear: the
    path measures and checks them too. The tiny model's 32 -> 32 Conv1D rounds some rows differently in wider
    GEMMs on some draws (on the AMX Xeon, 2026-12-07: refused), so the check either passes with Conv1D shapes in
    its report or refuses naming a Conv1D shape; it never leaves them out."""
    model = tiny_model("gpt2", init_scale=1.0, seed=7, dtype=torch.bfloat16)
    layers = [module for _, module in batch_invariant.row_gemm_layers(model)]
    assert {type(m).__name__ for m in layers} == {"Conv1D", "Linear"}
    try:
        report = batch_invariant.check_batch_invariance(model)
    except batch_invariant.BatchInvarianceError as refusal:
        assert "bfloat16 Conv1D (" in str(refusal)
    else:
        assert "Conv1D" in report.linear_kinds
