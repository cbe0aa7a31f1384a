"""The baselines decode exactly as our config says, whatever the checkpoint's generation config asks.

``model.generate`` fills every field a passed ``GenerationConfig`` leaves unset from
``model.generation_config``; a checkpoint with penalties or bans there would change the AR arm but
not lookahead. These tests give a model such a generation config and check that nothing leaks in.
"""

from __future__ import annotations

import pytest
import torch

from lade_bench.decoding import (
    LookaheadParams,
    SamplingParams,
    autoregressive_generate,
    lookahead_generate,
    prompt_lookup_generate,
)
from lade_bench.models.tiny import tiny_model

PROMPT = [5, 6, 7, 8, 5, 6, 7, 8, 9, 10, 11, 5, 6]
NEW_TOKENS = 30


def manual_greedy(model: torch.nn.Module, prompt: list[int], count: int) -> list[int]:
    """Plain argmax decoding without cache or generate: the definition of greedy."""
    ids = torch.tensor([prompt])
    out: list[int] = []
    with torch.no_grad():
        for _ in range(count):
            token = int(model(ids).logits[0, -1].argmax())
            out.append(token)
            ids = torch.cat([ids, torch.tensor([[token]])], dim=1)
    return out


@pytest.fixture(scope="module")
def clean_model():
    return tiny_model("llama", init_scale=3.0, seed=7)


@pytest.fixture(scope="module")
def meddling_model(clean_model):
    """Same weights; its generation config asks for every processor that would alter decoding."""
    model = tiny_model("llama", init_scale=3.0, seed=7)
    reference = manual_greedy(clean_model, PROMPT, NEW_TOKENS)
    config = model.generation_config
    config.do_sample = True  # the checkpoint asks to sample; our config says greedy
    config.temperature = 0.3
    config.top_k = 3
    config.top_p = 0.5
    config.min_p = 0.2
    config.repetition_penalty = 1.8
    config.encoder_repetition_penalty = 1.5
    config.no_repeat_ngram_size = 2
    config.min_length = len(PROMPT) + NEW_TOKENS  # would ban EOS
    config.min_new_tokens = NEW_TOKENS
    config.bad_words_ids = [[reference[2]]]
    config.suppress_tokens = [reference[4]]
    config.begin_suppress_tokens = [reference[0]]
    config.sequence_bias = {(reference[6],): -50.0}
    config.eos_token_id = [reference[8]]  # a checkpoint EOS we did not ask for
    return model


def test_meddling_config_would_change_plain_generate(meddling_model, clean_model):
    """Guard: the checkpoint's settings really alter ``generate`` when they are allowed in."""
    prompt = torch.tensor([PROMPT])
    leaked = meddling_model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS)
    assert leaked[0, len(PROMPT) :].tolist() != manual_greedy(clean_model, PROMPT, NEW_TOKENS)


def test_ar_greedy_ignores_the_checkpoint_generation_config(meddling_model, clean_model):
    reference = manual_greedy(clean_model, PROMPT, NEW_TOKENS)
    result = autoregressive_generate(meddling_model, PROMPT, NEW_TOKENS)
    assert result.tokens == reference
    assert lookahead_generate(meddling_model, PROMPT, LookaheadParams(4, 4, 4), NEW_TOKENS).tokens == reference


def test_prompt_lookup_ignores_the_checkpoint_generation_config(meddling_model, clean_model):
    reference = manual_greedy(clean_model, PROMPT, NEW_TOKENS)
    assert prompt_lookup_generate(meddling_model, PROMPT, NEW_TOKENS).tokens == reference


def test_ar_sampling_ignores_the_checkpoint_generation_config(meddling_model, clean_model):
    sampling = SamplingParams(do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
    clean = autoregressive_generate(clean_model, PROMPT, NEW_TOKENS, sampling=sampling, seed=3)
    meddled = autoregressive_generate(meddling_model, PROMPT, NEW_TOKENS, sampling=sampling, seed=3)
    assert meddled.tokens == clean.tokens


def test_checkpoint_generation_config_is_restored_after_the_call(meddling_model):
    before = meddling_model.generation_config
    autoregressive_generate(meddling_model, PROMPT, 3)
    assert meddling_model.generation_config is before
    assert before.repetition_penalty == 1.8
