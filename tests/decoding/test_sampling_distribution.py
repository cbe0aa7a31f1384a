"""Lookahead sampling draws from the same distribution as AR sampling (goodness-of-fit tests).

The reference distribution is exact: a tiny model with an 8-token vocabulary has only 8**3 = 512
three-token continuations, so each one's probability under the warped (temperature, top-p) model is
computed by enumeration. Draws are then tested with Pearson's chi-square at ALPHA, over bins of
sequences grouped (by the exact probabilities alone, never the draws) until each bin expects at
least MIN_EXPECTED draws. Seeds are fixed, so the test is deterministic.

The tests run in float64 and cover bfloat16 on the batch-invariant step path (issue 68) too: the
path changes only the forward's numerics, none of the sampling and verification code tested here,
and it makes every row's logits bit-identical to the same row alone, so the distribution each
verified position is drawn from is exactly the one AR's one-token step computes (the property the
path checks at load, ``batch_invariant.check_batch_invariance``). What these tests check, that
verification draws from the model's own distributions, then holds on the path unchanged; a bfloat16
rerun here could not tell the paths apart (their distributions differ by rounding, far below what
any feasible number of draws resolves), so none is added to the suite's CPU budget.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import stats

from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.decoding.core import verify
from lade_bench.decoding.core.params import LookaheadParams, SamplingParams
from lade_bench.decoding.core.sampling import build_warpers, warped_probabilities
from lade_bench.decoding.lookahead.lookahead import lookahead_generate
from lade_bench.models.tiny import tiny_model

ALPHA = 1e-3
MIN_EXPECTED = 10
VOCAB = 8
LENGTH = 3
SAMPLING = SamplingParams(do_sample=True, temperature=1.0, top_p=0.95)
# N=3 and G=8 with a prompt full of bigrams: most steps verify several drafts, often all of them.
PARAMS = LookaheadParams(ngram=3, window=2, guesses=8)


@pytest.fixture(scope="module")
def setting():
    model = tiny_model("llama", vocab_size=VOCAB, seed=3, init_scale=1.5)
    prompt = torch.randint(3, VOCAB, (40,), generator=torch.Generator().manual_seed(0)).tolist()
    warpers = build_warpers(SAMPLING)
    prefix_distribution = {}
    with torch.no_grad():
        for prefix in itertools.chain.from_iterable(itertools.product(range(VOCAB), repeat=n) for n in range(LENGTH)):
            logits = model(torch.tensor([prompt + list(prefix)])).logits[0, -1]
            prefix_distribution[prefix] = warped_probabilities(logits, warpers).double().numpy()
    sequences = list(itertools.product(range(VOCAB), repeat=LENGTH))
    exact = np.array([np.prod([prefix_distribution[s[:i]][s[i]] for i in range(LENGTH)]) for s in sequences])
    return model, prompt, sequences, exact / exact.sum()


def goodness_of_fit(draws: list[tuple[int, ...]], sequences, exact) -> float:
    """p-value of Pearson's chi-square test of ``draws`` against the exact distribution."""
    index = {s: i for i, s in enumerate(sequences)}
    observed = np.zeros(len(sequences))
    for draw in draws:
        observed[index[draw]] += 1
    expected = exact * len(draws)
    bin_of = np.empty(len(sequences), dtype=int)
    current, filled = 0, 0.0
    for i in np.argsort(-expected, kind="stable"):
        bin_of[i] = current
        filled += expected[i]
        if filled >= MIN_EXPECTED:
            current, filled = current + 1, 0.0
    if filled:  # fold an underfilled last bin into the previous one
        bin_of[bin_of == current] = max(current - 1, 0)
    observed_bins = np.bincount(bin_of, weights=observed)
    expected_bins = np.bincount(bin_of, weights=expected)
    assert len(observed_bins) >= 20, "too few draws for a meaningful test"
    return float(stats.chisquare(observed_bins, expected_bins).pvalue)


def lookahead_draws(model, prompt, count: int) -> tuple[list[tuple[int, ...]], int]:
    draws, multi_token_steps = [], 0
    for seed in range(count):
        result = lookahead_generate(model, prompt, PARAMS, LENGTH, sampling=SAMPLING, seed=seed)
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    return draws, multi_token_steps


def test_ar_sampling_matches_the_exact_distribution(setting):
    """Validates the enumeration (and warping) against transformers' own sampler."""
    model, prompt, sequences, exact = setting
    draws = [
        tuple(autoregressive_generate(model, prompt, LENGTH, sampling=SAMPLING, seed=s).tokens) for s in range(800)
    ]
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


@pytest.mark.slow
def test_lookahead_sampling_matches_the_exact_distribution(setting):
    model, prompt, sequences, exact = setting
    draws, multi_token_steps = lookahead_draws(model, prompt, 2000)
    # Guard against a vacuous pass: verification must really have accepted drafts often.
    assert multi_token_steps > 300
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


@pytest.mark.slow
def test_prompt_lookup_sampling_matches_the_exact_distribution(setting):
    """Eager prompt lookup samples on the draft-tree seam (``draft_tree.verify_tree_sampling``: draw at
    each node, follow the child holding the draw); its draws must follow AR sampling's distribution."""
    from lade_bench.decoding.drafters.prompt_lookup import PromptLookupSettings, prompt_lookup_generate

    model, prompt, sequences, exact = setting
    draws, multi_token_steps = [], 0
    for seed in range(800):
        result = prompt_lookup_generate(
            model, prompt, LENGTH, PromptLookupSettings(num_tokens=2, max_ngram_size=1), sampling=SAMPLING, seed=seed
        )
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    assert multi_token_steps > 30  # candidates were accepted, not only rejected
    assert goodness_of_fit(draws, sequences, exact) > ALPHA


def _verifier_without_residual(distribution, drafts, generator):
    """A classic bug: rejected drafts keep their mass, so the fallback draw is not from the residual."""
    for draft in dict.fromkeys(drafts):
        if float(torch.rand((), generator=generator)) < float(distribution[draft]):
            return draft
    return None


@pytest.mark.slow
def test_the_goodness_of_fit_test_catches_a_broken_verifier(setting, monkeypatch):
    model, prompt, sequences, exact = setting
    monkeypatch.setattr(verify, "_accept_one_draft", _verifier_without_residual)
    draws, _ = lookahead_draws(model, prompt, 2000)
    assert goodness_of_fit(draws, sequences, exact) < ALPHA


def test_trie_verification_draws_what_flat_draws(setting, tiny_models):
    """Same seed, same draws: the trie reads every draft's distribution from a row with the same
    context as the flat chain's, and verification tries drafts and updates the residual in the
    same order, so it consumes the generator identically. Flat is distribution-tested above."""
    model, prompt, _, _ = setting
    cases = [(model, prompt, PARAMS, SAMPLING, LENGTH, range(100))]
    wide = SamplingParams(do_sample=True, temperature=0.7, top_k=20)
    for arch in ("qwen3", "gemma3"):
        long_prompt = torch.randint(3, 40, (60,), generator=torch.Generator().manual_seed(1)).tolist()
        cases.append((tiny_models[arch], long_prompt, LookaheadParams(4, 3, 12), wide, 40, range(6)))
    merged_steps = 0
    for case_model, case_prompt, params, sampling, length, seeds in cases:
        for seed in seeds:
            flat = lookahead_generate(case_model, case_prompt, params, length, sampling=sampling, seed=seed)
            trie_params = replace(params, verification="trie")
            trie = lookahead_generate(case_model, case_prompt, trie_params, length, sampling=sampling, seed=seed)
            assert (trie.tokens, trie.accept_lengths) == (flat.tokens, flat.accept_lengths), (params, seed)
            merged_steps += sum(t < f for t, f in zip(trie.step_tokens, flat.step_tokens, strict=True))
    assert merged_steps > 50


@pytest.mark.slow
def test_assisted_sampling_matches_the_exact_distribution(setting):
    """transformers' speculative sampling with a draft model (the assisted arm) keeps the target's
    distribution; the draft is another random model, so proposals are often rejected and the residual
    draw is exercised."""
    from lade_bench.decoding.baselines.assisted import assisted_generate

    model, prompt, sequences, exact = setting
    draft = tiny_model("llama", vocab_size=VOCAB, seed=5, init_scale=1.5)
    draws, multi_token_steps = [], 0
    for seed in range(800):
        result = assisted_generate(
            model, prompt, draft, LENGTH, sampling=SAMPLING, seed=seed, num_assistant_tokens=2,
            assistant_confidence_threshold=0.0,
        )  # fmt: skip
        draws.append(tuple(result.tokens))
        multi_token_steps += sum(n > 1 for n in result.accept_lengths)
    assert multi_token_steps > 100  # drafts were accepted, not only rejected
    assert goodness_of_fit(draws, sequences, exact) > ALPHA
