"""Quality scoring of finished rows, after generation and outside every timed region.

Which metric applies is the dataset's own declaration (``DatasetSpec.scorer``): ROUGE for
summarisation, unit tests for code (always inside ``lade_bench.sandbox``'s bubblewrap sandbox,
never in this process), final-number accuracy for GSM8K, nothing for an ``Unscored`` dataset
(MT-Bench, judged by an LLM elsewhere).
"""

from __future__ import annotations

from typing import Any

from lade_bench.datasets import DatasetSpec, Sample, Unscored, get_spec


def check_code_sandbox(spec: DatasetSpec, allow_unsandboxed: bool) -> None:
    """Refuse, before any model loads, a dataset whose answers would run where no sandbox can hold them.

    Raises:
        SandboxUnavailableError: ``spec.runs_code``, bubblewrap is missing and ``allow_unsandboxed``
            is False (the message says how to install it).
    """
    if spec.runs_code:
        from lade_bench.sandbox import require_sandbox

        require_sandbox(allow_unsandboxed)


def score_output(
    dataset: str, text: str, sample: Sample, *, chat: bool, allow_unsandboxed: bool = False, ended: bool = True
) -> dict[str, Any]:
    """Quality columns for one answer: ``{}`` for an ``Unscored`` dataset (MT-Bench).

    Args:
        dataset: registry name of the dataset.
        text: the decoded answer.
        sample: the sample it answers.
        chat: whether the prompt was a chat turn (changes how code is read out of the answer).
        allow_unsandboxed: ``sandbox.allow_unsandboxed``: run code answers even without bubblewrap.
        ended: the output ended by itself (False: cut at the ``max_new_tokens`` cap,
            ``metrics.text_health.hit_cap``, a row's ``at_cap``); passed to a scorer whose spec ``reads_ending``.

    Returns:
        Exactly the dataset's ``quality_columns`` (rouge*, passed, accuracy).

    Raises:
        SandboxUnavailableError: a code answer, no sandbox, and ``allow_unsandboxed`` is False.
        ValueError: the scorer returned other columns than its spec declares.
    """
    spec = get_spec(dataset)
    if isinstance(spec.scorer, Unscored):
        return {}
    answer = spec.code.extract(text, sample, chat=chat) if spec.code is not None else text
    if spec.reads_ending:
        scores = spec.scorer(answer, sample, allow_unsandboxed, ended=ended)
    else:
        scores = spec.scorer(answer, sample, allow_unsandboxed)
    if sorted(scores) != sorted(spec.quality_columns):
        # A silent mismatch would leave a declared column null, or write one the report never reads.
        raise ValueError(
            f"dataset {dataset!r}: scorer returned columns {sorted(scores)}, "
            f"its spec declares quality_columns {sorted(spec.quality_columns)}"
        )
    return scores
