"""The embedded SmolLM2: offline conversion, and exact lookahead on real chat prompts."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest
import torch

from lade_bench import bench
from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.decoding import LookaheadParams, autoregressive_generate, lookahead_generate
from lade_bench.decoding.lookahead.hf_generate import lookahead_custom_generate
from tests.decoding.helpers import assert_trie_accepts_like_flat

pytestmark = pytest.mark.slow


def test_converted_model_has_the_documented_shape(smollm2):
    model, tokenizer = smollm2
    assert type(model).__name__ == "LlamaForCausalLM"
    assert model.config.num_hidden_layers == 30 and model.config.hidden_size == 576
    assert model.config.vocab_size == 49152 and len(tokenizer) == 49152
    assert tokenizer.chat_template and tokenizer.eos_token_id is not None
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6


def test_greedy_story_is_coherent_text(smollm2):
    model, tokenizer = smollm2
    ids = tokenizer("Once upon a time, there was a little", add_special_tokens=False)["input_ids"]
    result = autoregressive_generate(model, ids, 8)
    assert "girl named" in tokenizer.decode(result.tokens)


@pytest.fixture(scope="module")
def chat_prompts(smollm2):
    _, tokenizer = smollm2
    samples = load_dataset_samples("mt_bench", limit=2)
    return [render_prompt(tokenizer, sample, 0, [], chat=True) for sample in samples]


@pytest.fixture(scope="module")
def generated(smollm2, chat_prompts):
    """Greedy generation of 32 tokens on chat prompt ``index``, AR (``params=None``) or lookahead;
    memoised, so tests comparing two methods share the runs."""
    model, tokenizer = smollm2
    done = {}

    def generate(params: LookaheadParams | None, index: int):
        if (params, index) not in done:
            prompt, eos = chat_prompts[index], tokenizer.eos_token_id
            done[params, index] = (
                autoregressive_generate(model, prompt, 32, eos_token_id=eos)
                if params is None
                else lookahead_generate(model, prompt, params, 32, eos_token_id=eos)
            )
        return done[params, index]

    return generate


@pytest.mark.parametrize(
    "params",
    [
        LookaheadParams(5, 7, 7),
        LookaheadParams(5, 7, 7, verification="trie"),
        LookaheadParams(2, 3, 3),
        LookaheadParams(4, 5, 2, prompt_as_reference=False),
    ],
    ids=lambda p: f"N{p.ngram}W{p.window}G{p.guesses}R{int(p.prompt_as_reference)}-{p.verification}",
)
def test_lookahead_equals_ar_greedy_on_mt_bench_prompts(smollm2, chat_prompts, generated, params):
    _, tokenizer = smollm2
    for index in range(len(chat_prompts)):
        reference = generated(None, index)
        assert generated(params, index).tokens == reference.tokens, tokenizer.decode(reference.tokens)


def test_trie_accepts_like_flat_with_fewer_tokens_on_mt_bench_prompts(chat_prompts, generated):
    flat_params = LookaheadParams(5, 7, 7)
    fed = {"flat": 0, "trie": 0}
    for index in range(len(chat_prompts)):
        flat, trie = generated(flat_params, index), generated(replace(flat_params, verification="trie"), index)
        assert_trie_accepts_like_flat(flat, trie)
        fed["flat"] += sum(flat.step_tokens[1:])
        fed["trie"] += sum(trie.step_tokens[1:])
    # Real text: the pool's continuations of a token often share their first tokens.
    assert fed["trie"] < fed["flat"]


def test_lookahead_through_transformers_generate(smollm2, chat_prompts):
    model, _ = smollm2
    prompt = torch.tensor([chat_prompts[0]])
    kwargs = dict(attention_mask=torch.ones_like(prompt), max_new_tokens=24, do_sample=False)
    reference = model.generate(prompt, **kwargs)
    result = model.generate(
        prompt, custom_generate=lookahead_custom_generate, lookahead=LookaheadParams(4, 4, 4), **kwargs
    )
    assert result.tolist() == reference.tolist()


def test_bench_command_runs_and_reports(tmp_path):
    """The benchmark command end to end (its speed numbers are reported, not asserted)."""
    path = bench.main(
        ["--prompts", "1", "--max-new-tokens", "8", "--lookahead", "3,2,2", "3,2,2,trie", "--warmup", "0"]
        + ["--output", str(tmp_path)]
    )
    report = json.loads(path.read_text())
    arms = {row["arm"]: row for row in report["summary"]}
    assert set(arms) == {"ar", "prompt_lookup", "lookahead N=3 W=2 G=2", "lookahead N=3 W=2 G=2 trie"}
    assert all(row["matches_ar"] == 1.0 for row in arms.values())
    assert arms["ar"]["compression_ratio"] == 1.0 and arms["ar"]["tokens_per_step"] == 1.0
    assert 0.0 <= arms["lookahead N=3 W=2 G=2"]["outside_forward_share"] < 1.0
    flat, trie = arms["lookahead N=3 W=2 G=2"], arms["lookahead N=3 W=2 G=2 trie"]
    assert trie["compression_ratio"] == flat["compression_ratio"]
    assert 1.0 < trie["tokens_per_step"] <= flat["tokens_per_step"]


@pytest.mark.parametrize(
    ("text", "fragment"), [("5,7", "use N,W,G"), ("5,7,7,tree", "verification 'tree' is not allowed")]
)
def test_bench_rejects_a_bad_lookahead_argument(text, fragment):
    with pytest.raises(argparse.ArgumentTypeError, match=fragment):
        bench.parse_lookahead(text)
    assert bench.parse_lookahead("5,7,7,trie") == LookaheadParams(5, 7, 7, verification="trie")
