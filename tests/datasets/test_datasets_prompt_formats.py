"""A base model's completion format with an answer cue per task (issue 63): what a ``cued`` prompt says,
turn by turn, beside the ``plain`` format every base-model cell before it ran (MT-Bench's turn 2 as
"Q1\\n\\nA1\\n\\nQ2", no cue) and the chat template; the registry covers every task and Spec-Bench
category, and a bad format is refused naming the allowed ones."""

from __future__ import annotations

import pytest

from lade_bench.datasets import TASKS, Sample, completion_text, load_dataset_samples, render_prompt
from lade_bench.datasets.prompt_formats import COMPLETION_FORMATS, CUES, cue_for, prompt_format
from lade_bench.datasets.spec_bench import CATEGORIES


def _spec_bench(category: str, *turns: str) -> Sample:
    return Sample(sample_id=f"{category}-1", turns=turns, reference=None, task="chat", payload={"category": category})


def test_mt_bench_turn_two_gets_labels_and_an_answer_cue(tokenizer_no_bos):
    sample = load_dataset_samples("mt_bench", limit=1)[0]
    history = [(sample.turns[0], "A1")]
    cued = render_prompt(tokenizer_no_bos, sample, 1, history, chat=False, completion_format="cued")
    assert tokenizer_no_bos.decode(cued) == (
        f"Question: {sample.turns[0]}\n\nAnswer: A1\n\nQuestion: {sample.turns[1]}\n\nAnswer:"
    )
    # plain is the format before issue 63, still the default of the function (and of recorded configs).
    plain = render_prompt(tokenizer_no_bos, sample, 1, history, chat=False, completion_format="plain")
    assert plain == render_prompt(tokenizer_no_bos, sample, 1, history, chat=False)
    assert tokenizer_no_bos.decode(plain) == f"{sample.turns[0]}\n\nA1\n\n{sample.turns[1]}"


def test_each_task_and_spec_bench_category_has_its_cue():
    translation = _spec_bench("translation", "Translate German to English: Guten Morgen.")
    assert completion_text(translation, 0, [], completion_format="cued") == (
        "Translate German to English: Guten Morgen.\n\nEnglish:"
    )
    summary = _spec_bench("summarization", "Summarize: a long article.")
    assert completion_text(summary, 0, [], completion_format="cued") == "Summarize: a long article.\n\nSummary:"
    qa = _spec_bench("qa", "who wrote hamlet")
    assert completion_text(qa, 0, [], system_prompt="Be brief.", completion_format="cued") == (
        "Be brief.\n\nQuestion: who wrote hamlet\n\nAnswer:"
    )
    math = Sample(sample_id="0", turns=("Solve it.\n\nQuestion: 2+2?",), reference="4", task="math")
    assert completion_text(math, 0, [], completion_format="cued") == "Solve it.\n\nQuestion: 2+2?\n\nAnswer:"
    # Every task and every Spec-Bench category resolves to a cue.
    assert set(TASKS) <= set(CUES)
    for category in CATEGORIES:
        assert cue_for(_spec_bench(category, "x")).answer.endswith(":")


def test_a_code_prefix_is_continued_verbatim_in_either_completion_format(tokenizer_no_bos):
    sample = load_dataset_samples("humaneval", limit=1)[0]
    for fmt in COMPLETION_FORMATS:
        ids = render_prompt(tokenizer_no_bos, sample, 0, [], chat=False, completion_format=fmt)
        assert tokenizer_no_bos.decode(ids) == sample.payload["prompt"]


def test_the_format_a_model_gets_and_a_bad_one_refused():
    assert (prompt_format(True, "plain"), prompt_format(False, "cued"), prompt_format(False, "plain")) == (
        "chat",
        "cued",
        "plain",
    )
    sample = _spec_bench("qa", "q")
    with pytest.raises(ValueError, match=r"^completion_format='fancy' is not a completion format; use one of "):
        completion_text(sample, 0, [], completion_format="fancy")
