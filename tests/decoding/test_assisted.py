"""The assisted arm's engine: draft-model speculative decoding through transformers' assisted generation.

Greedy output equals AR's token for token; ``steps``/``accept_lengths``/``step_tokens`` count the
target's forwards like every method; the draft's forwards and time are in ``stats``. Pairs share a
vocabulary (a copy of the target: every proposal accepted; another random model: few accepted).
"""

from __future__ import annotations

import copy
import re

import pytest
import torch

from lade_bench.decoding import DecodingConfigError, SamplingParams
from lade_bench.decoding.baselines.assisted import DraftCacheGuard, assisted_generate, pair_draft
from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
from lade_bench.models.tiny import tiny_model

VOCAB = 64


@pytest.fixture(scope="module")
def pair():
    target = tiny_model("llama", vocab_size=VOCAB, seed=0, init_scale=3.0)
    return {
        "copy": (target, copy.deepcopy(target)),  # proposes exactly the target's tokens
        "other": (target, tiny_model("qwen2", vocab_size=VOCAB, seed=1, init_scale=3.0)),
    }


def _prompts():
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(3, VOCAB, (length,), generator=generator).tolist() for length in (5, 20, 37)]


def _check_counts(result):
    assert len(result.accept_lengths) == result.steps == len(result.step_tokens)
    assert sum(result.accept_lengths) == len(result.tokens)
    assert all(n >= 1 for n in result.accept_lengths)
    assert result.stats["draft_forwards"] >= 0 and result.stats["draft_time_s"] >= 0


@pytest.mark.parametrize("draft_kind", ["copy", "other"])
@pytest.mark.parametrize(("tokens", "threshold"), [(1, 0.0), (4, 0.0), (6, 0.4)])
def test_greedy_equals_ar_and_counts_the_target_forwards(pair, draft_kind, tokens, threshold):
    target, draft = pair[draft_kind]
    for prompt in _prompts():
        reference = autoregressive_generate(target, prompt, 30)
        result = assisted_generate(
            target, prompt, draft, 30, num_assistant_tokens=tokens, assistant_confidence_threshold=threshold
        )
        assert result.tokens == reference.tokens
        _check_counts(result)
        assert result.method == "assisted"
        if draft_kind == "copy" and threshold == 0.0:
            # Every proposal is accepted: each target forward emits the draft's tokens plus its own.
            assert max(result.accept_lengths) == tokens + 1
            assert result.steps < reference.steps or tokens == 1
            assert result.stats["draft_forwards"] >= result.steps - 1
        assert result.stats["draft_forwards"] > 0


def test_stop_id_and_a_budget_of_one(pair):
    target, draft = pair["copy"]
    prompt = _prompts()[1]
    reference = autoregressive_generate(target, prompt, 30)
    stop = reference.tokens[9]
    expected = autoregressive_generate(target, prompt, 30, eos_token_id=stop).tokens
    result = assisted_generate(target, prompt, draft, 30, eos_token_id=stop, assistant_confidence_threshold=0.0)
    assert result.tokens == expected and result.tokens[-1] == stop
    _check_counts(result)
    single = assisted_generate(target, prompt, draft, 1)
    assert single.tokens == reference.tokens[:1] and single.steps == 1 and single.accept_lengths == [1]


def test_the_draft_keeps_its_own_generation_config(pair):
    target, draft = pair["copy"]
    saved = draft.generation_config
    assisted_generate(target, _prompts()[0], draft, 5, num_assistant_tokens=3)
    assert draft.generation_config is saved


def test_bad_settings_name_the_value_and_the_allowed_ones(pair):
    target, draft = pair["copy"]
    prompt = _prompts()[0]
    cases = [
        ({"num_assistant_tokens": 0}, "num_assistant_tokens=0"),
        ({"num_assistant_tokens_schedule": "heuristic"}, "'constant', 'heuristic_transient'"),
        ({"assistant_confidence_threshold": 1.5}, "[0, 1)"),
        ({"assistant_lookbehind": 0}, "assistant_lookbehind=0"),
    ]
    for kwargs, message in cases:
        with pytest.raises(DecodingConfigError, match=re.escape(message)):
            assisted_generate(target, prompt, draft, 5, **kwargs)


def test_pairing_decides_shared_or_universal_and_refuses_what_cannot_work():
    target = tiny_model("llama", vocab_size=VOCAB, seed=0)
    smaller = tiny_model("qwen2", vocab_size=VOCAB - 8, seed=1)
    with pytest.raises(DecodingConfigError, match="needs both tokenizers"):
        pair_draft(target, smaller)
    assert not pair_draft(target, copy.deepcopy(target)).universal

    class Tokenizer:
        def __init__(self, vocab):
            self.vocab = vocab

        def get_vocab(self):
            return self.vocab

    shared = Tokenizer({"a": 0, "b": 1})
    assert not pair_draft(target, copy.deepcopy(target), shared, Tokenizer({"a": 0, "b": 1})).universal
    other = Tokenizer({"b": 0, "a": 1})
    assert pair_draft(target, smaller, shared, other).universal
    with pytest.raises(DecodingConfigError, match="both models have 64 ids"):
        pair_draft(target, copy.deepcopy(target), shared, other)
    universal = pair_draft(target, smaller, shared, other)
    with pytest.raises(DecodingConfigError, match="use sampling=greedy"):
        assisted_generate(target, [1, 2, 3], universal, 4, sampling=SamplingParams(do_sample=True))


def test_the_cache_guard_drops_states_of_tokens_the_next_round_replaced():
    """A draft round whose input rewrote a token the cache already holds (universal assisted decoding's
    re-tokenisation does this) must not reuse that token's state: the guarded round equals a cold one."""
    draft = tiny_model("llama", vocab_size=VOCAB, seed=1, init_scale=3.0)
    settings = {"do_sample": False, "return_dict_in_generate": True}
    prompt = torch.tensor([[5, 6, 7, 8, 9]])
    unguarded = draft.generate(input_ids=prompt, max_new_tokens=4, **settings)
    replaced = unguarded.sequences.clone()
    replaced[:, 6] = (replaced[:, 6] + 1) % VOCAB  # the cache holds positions 0-7: position 6 is stale now
    cold = draft.generate(input_ids=replaced.clone(), max_new_tokens=3, **settings).sequences
    stale = draft.generate(input_ids=replaced.clone(), cache=unguarded.cache, max_new_tokens=3, **settings).sequences
    assert not torch.equal(stale, cold)  # what the guard exists for: the stale state changes the proposals
    with DraftCacheGuard(draft) as guard:
        first = draft.generate(input_ids=prompt, max_new_tokens=4, **settings)
        warm = draft.generate(input_ids=replaced.clone(), cache=first.cache, max_new_tokens=3, **settings).sequences
    assert torch.equal(warm, cold) and guard.crops == 1
    assert "generate" not in vars(draft)  # the wrapper is gone after the block


@pytest.mark.slow
def test_gemma_with_a_smollm2_draft_survives_a_cache_longer_than_the_next_round(gemma3, smollm2):
    """The real pair on the XSum article whose assisted run failed in the issue-22 sweep (transformers
    rolled the draft's cache back in target tokens: the draft's next round got 0 tokens to prefill):
    with the guard it completes and equals AR token for token."""
    from lade_bench.datasets import xsum
    from lade_bench.datasets.prompts import render_prompt

    (target, target_tokenizer), (draft, draft_tokenizer) = gemma3, smollm2
    sample = next(s for s in xsum.load(None, "test") if s.sample_id == "36177725")
    prompt = render_prompt(target_tokenizer, sample, 0, [], chat=False)
    paired = pair_draft(target, draft, target_tokenizer, draft_tokenizer)
    assert paired.universal
    eos, new_tokens = target_tokenizer.eos_token_id, 16  # without the guard: fails at 16, not yet at 12
    result = assisted_generate(target, prompt, paired, new_tokens, eos_token_id=eos)
    reference = autoregressive_generate(target, prompt, new_tokens, eos_token_id=eos)
    assert result.tokens == reference.tokens
    _check_counts(result)


def test_generate_arms_record_the_time_inside_the_target_forwards(pair):
    """AR and assisted run through ``generate``: a forward hook pair times the target's forwards, so the
    step-cost model can add the time outside them (generate's bookkeeping, the draft's forwards) to their
    predicted time. The draft's forwards lie outside the target's, so both fit in the wall time."""
    target, draft = pair["other"]
    prompt = _prompts()[1]
    ar = autoregressive_generate(target, prompt, 30)
    assisted = assisted_generate(target, prompt, draft, 30)
    assert 0 < ar.forward_time_s <= ar.wall_time_s
    assert 0 < assisted.forward_time_s
    assert assisted.forward_time_s + assisted.stats["draft_time_s"] <= assisted.wall_time_s
