"""Prompt rendering with a real (offline-built) tokenizer, and the prompt-length filter."""

from __future__ import annotations

import pytest

from lade_bench.datasets import (
    build_messages,
    completion_text,
    filter_by_prompt_length,
    load_dataset_samples,
    render_prompt,
)


@pytest.fixture(scope="module")
def mt_bench():
    return load_dataset_samples("mt_bench", limit=5)


@pytest.fixture(scope="module")
def humaneval():
    return load_dataset_samples("humaneval", limit=3)


def test_chat_prompt_is_the_template_with_generation_prompt(tokenizer, mt_bench):
    sample = mt_bench[0]
    ids = render_prompt(tokenizer, sample, 0, [], chat=True)
    assert ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id  # no double BOS
    assert tokenizer.eos_token_id not in ids
    assert tokenizer.decode(ids) == f"<s><|im_start|>user\n{sample.turns[0]}<|im_end|>\n<|im_start|>assistant\n"


def test_mt_bench_turn_two_contains_the_arms_own_turn_one_answer(tokenizer, mt_bench):
    sample = mt_bench[0]
    answer = "Aloha! Here is my blog post about Hawaii."
    ids = render_prompt(tokenizer, sample, 1, [(sample.turns[0], answer)], chat=True)
    text = tokenizer.decode(ids)
    assert text == (
        f"<s><|im_start|>user\n{sample.turns[0]}<|im_end|>\n"
        f"<|im_start|>assistant\n{answer}<|im_end|>\n"
        f"<|im_start|>user\n{sample.turns[1]}<|im_end|>\n<|im_start|>assistant\n"
    )
    # A different arm's answer gives a different prompt: histories are per arm.
    other = render_prompt(tokenizer, sample, 1, [(sample.turns[0], "Something else.")], chat=True)
    assert other != ids


def test_history_must_match_the_turn(tokenizer, mt_bench):
    sample = mt_bench[0]
    with pytest.raises(ValueError, match="history must hold"):
        render_prompt(tokenizer, sample, 1, [], chat=True)
    with pytest.raises(ValueError, match="not turn 0"):
        render_prompt(tokenizer, sample, 1, [(mt_bench[1].turns[0], "answer")], chat=True)
    with pytest.raises(IndexError):
        render_prompt(tokenizer, sample, 2, [(sample.turns[0], "a"), (sample.turns[1], "b")], chat=True)


def test_system_prompt(tokenizer, mt_bench):
    sample = mt_bench[0]
    messages = build_messages(sample, 0, [], system_prompt="Be brief.")
    assert messages[0] == {"role": "system", "content": "Be brief."}
    text = tokenizer.decode(render_prompt(tokenizer, sample, 0, [], chat=True, system_prompt="Be brief."))
    assert text.startswith("<s><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    assert completion_text(sample, 0, [], system_prompt="Be brief.") == f"Be brief.\n\n{sample.turns[0]}"


def test_completion_prompt_for_code_is_the_raw_code_prefix(tokenizer, tokenizer_no_bos, humaneval):
    sample = humaneval[0]
    ids = render_prompt(tokenizer, sample, 0, [], chat=False)
    # Plain encode of this tokenizer adds BOS and EOS; the prompt keeps the BOS and drops the EOS.
    assert tokenizer.encode("a")[-1] == tokenizer.eos_token_id
    assert ids[0] == tokenizer.bos_token_id and tokenizer.eos_token_id not in ids
    assert tokenizer.decode(ids[1:]) == sample.payload["prompt"]  # trailing newline intact
    # A tokenizer with no BOS convention gets none added.
    assert render_prompt(tokenizer_no_bos, sample, 0, [], chat=False) == ids[1:]


def test_completion_prompt_for_other_tasks_is_the_user_turn(tokenizer_no_bos, mt_bench):
    xsum = load_dataset_samples("xsum", limit=1)[0]
    ids = render_prompt(tokenizer_no_bos, xsum, 0, [], chat=False)
    assert tokenizer_no_bos.decode(ids) == xsum.turns[0]
    sample = mt_bench[0]
    text = tokenizer_no_bos.decode(render_prompt(tokenizer_no_bos, sample, 1, [(sample.turns[0], "A1")], chat=False))
    assert text == f"{sample.turns[0]}\n\nA1\n\n{sample.turns[1]}"


def test_chat_needs_a_template(tokenizer, mt_bench):
    template = tokenizer.chat_template
    try:
        tokenizer.chat_template = None
        with pytest.raises(ValueError, match="chat=False"):
            render_prompt(tokenizer, mt_bench[0], 0, [], chat=True)
    finally:
        tokenizer.chat_template = template


def test_filter_by_prompt_length(tokenizer):
    samples = load_dataset_samples("xsum", limit=20)
    lengths = {s.sample_id: len(render_prompt(tokenizer, s, 0, [], chat=True)) for s in samples}
    cut = sorted(lengths.values())[len(lengths) // 2]
    kept, skipped = filter_by_prompt_length(samples, tokenizer, cut, chat=True)
    assert kept and skipped and len(kept) + len(skipped) == len(samples)
    assert all(lengths[s.sample_id] <= cut for s in kept)
    assert all(lengths[i] > cut for i in skipped)
    assert [s.sample_id for s in kept] == [s.sample_id for s in samples if lengths[s.sample_id] <= cut]
    assert filter_by_prompt_length(samples, tokenizer, max(lengths.values()), chat=True) == (samples, [])


def test_filter_measures_later_turns_too(tokenizer, mt_bench):
    sample = mt_bench[0]
    first = len(render_prompt(tokenizer, sample, 0, [], chat=True))
    second = len(render_prompt(tokenizer, sample, 1, [(sample.turns[0], "")], chat=True))
    assert second > first
    # Turn 1 fits but turn 2 (even with an empty answer) cannot: the sample is skipped.
    assert filter_by_prompt_length([sample], tokenizer, first, chat=True) == ([], [sample.sample_id])
    assert filter_by_prompt_length([sample], tokenizer, second, chat=True) == ([sample], [])
    with pytest.raises(ValueError):
        filter_by_prompt_length([sample], tokenizer, 0, chat=True)
