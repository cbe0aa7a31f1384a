"""Quality scoring of finished rows, after generation and outside every timed region.

Which metric applies is decided by the dataset: ROUGE for summarisation, unit tests for code
(HumanEval, MBPP and ClassEval, always inside ``lade_bench.sandbox``'s bubblewrap sandbox,
never in this process), final-number accuracy for GSM8K, nothing for MT-Bench (judged by an LLM
elsewhere).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lade_bench.datasets import Sample
from lade_bench.runner.code_text import completion_code

Scorer = Callable[[str, Sample, bool, bool], dict[str, Any]]
# Datasets whose answers are executed as code (scored in the sandbox).
CODE_DATASETS = frozenset({"humaneval", "mbpp", "classeval"})


def allow_unsandboxed(cfg: Any) -> bool:
    """The config's ``sandbox.allow_unsandboxed`` (False where the key is absent)."""
    from omegaconf import OmegaConf

    return bool(OmegaConf.select(cfg, "sandbox.allow_unsandboxed", default=False))


def check_code_sandbox(dataset: str, allow_unsandboxed: bool) -> None:
    """Refuse, before any model loads, a dataset whose answers would run where no sandbox can hold them.

    Raises:
        SandboxUnavailableError: ``dataset`` executes generated code, bubblewrap is missing and
            ``allow_unsandboxed`` is False (the message says how to install it).
    """
    if dataset in CODE_DATASETS:
        from lade_bench.sandbox import require_sandbox

        require_sandbox(allow_unsandboxed)


def _rouge(text: str, sample: Sample, chat: bool, allow_unsandboxed: bool) -> dict[str, Any]:
    from lade_bench.metrics.rouge import rouge_scores

    return rouge_scores(text, sample.reference or "")


def _gsm8k(text: str, sample: Sample, chat: bool, allow_unsandboxed: bool) -> dict[str, Any]:
    from lade_bench.metrics.task_accuracy import gsm8k_correct

    return {"accuracy": float(gsm8k_correct(text, sample.payload["answer"]))}


def _humaneval(text: str, sample: Sample, chat: bool, allow_unsandboxed: bool) -> dict[str, Any]:
    from lade_bench.metrics.humaneval_exec import score_humaneval

    code = completion_code(text, sample, chat=chat, continues_prefix=True)
    return {"passed": score_humaneval(sample.payload, [code], allow_unsandboxed=allow_unsandboxed)[0]}


def _mbpp(text: str, sample: Sample, chat: bool, allow_unsandboxed: bool) -> dict[str, Any]:
    from lade_bench.metrics.code_tasks import score_mbpp

    code = completion_code(text, sample, chat=chat, continues_prefix=False)
    return {"passed": score_mbpp(code, sample.payload, allow_unsandboxed=allow_unsandboxed).passed}


def _classeval(text: str, sample: Sample, chat: bool, allow_unsandboxed: bool) -> dict[str, Any]:
    from lade_bench.metrics.code_tasks import score_classeval

    code = completion_code(text, sample, chat=chat, continues_prefix=False)
    return {"passed": score_classeval(code, sample.payload, allow_unsandboxed=allow_unsandboxed).passed}


# By dataset name rather than task: the three code sets need three different harnesses.
SCORERS: dict[str, Scorer] = {
    "xsum": _rouge,
    "cnn_dailymail": _rouge,
    "gsm8k": _gsm8k,
    "humaneval": _humaneval,
    "mbpp": _mbpp,
    "classeval": _classeval,
}


def score_output(
    dataset: str, text: str, sample: Sample, *, chat: bool, allow_unsandboxed: bool = False
) -> dict[str, Any]:
    """Quality columns for one answer: ``{}`` for datasets without an automatic metric (MT-Bench).

    Args:
        dataset: registry name of the dataset.
        text: the decoded answer.
        sample: the sample it answers.
        chat: whether the prompt was a chat turn (changes how code is read out of the answer).
        allow_unsandboxed: ``sandbox.allow_unsandboxed``: run code answers even without bubblewrap.

    Returns:
        A subset of the row's quality columns (rouge*, passed, accuracy).

    Raises:
        SandboxUnavailableError: a code answer, no sandbox, and ``allow_unsandboxed`` is False.
    """
    scorer = SCORERS.get(dataset)
    return scorer(text, sample, chat, allow_unsandboxed) if scorer else {}
