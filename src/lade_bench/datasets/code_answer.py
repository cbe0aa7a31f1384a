"""From a model's answer to the code a test harness runs (a code task's ``DatasetSpec.code``).

Chat models are asked for a ```python block (see the dataset prompts), so the first fenced block is
the code; an unclosed fence (the answer hit ``max_new_tokens``) still yields what was written.
Completion-mode models continue the prompt's code, and their continuation is cut at the usual
HumanEval/Codex stop sequences, where a new top-level statement starts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lade_bench.datasets.sample import Sample

# Codex/HumanEval stop sequences: a new top-level block means the function is finished.
STOP_SEQUENCES = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert ")
_FENCE = re.compile(r"```[ \t]*(?:python|py|Python|python3)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def fenced_code(text: str) -> str | None:
    """Content of the first fenced code block in ``text`` (closed or not), or None if there is none."""
    match = _FENCE.search(text)
    return match.group(1) if match else None


def truncate_at_stop(text: str) -> str:
    """Cut a completion-mode continuation where the first stop sequence starts."""
    cut = len(text)
    for stop in STOP_SEQUENCES:
        index = text.find(stop)
        if index != -1:
            cut = min(cut, index)
    return text[:cut]


def completion_code(text: str, sample: Sample, *, chat: bool, continues_prefix: bool) -> str:
    """The code to test for one answer.

    Args:
        text: the decoded answer.
        sample: its sample (``completion_prefix`` is the code a completion-mode model continued).
        chat: the prompt was a chat turn (code is expected in a fenced block).
        continues_prefix: the harness itself puts the prefix in front of the code (HumanEval's
            ``prompt + completion``); otherwise the prefix is prepended here for completion mode.

    Returns:
        For a fenced answer, the block; for other chat answers, the whole text (some models reply
        with bare code); in completion mode, the continuation cut at a stop sequence, with the
        prefix in front unless the harness adds it.
    """
    block = fenced_code(text)
    if block is not None:
        return block
    if chat:
        return text
    body = truncate_at_stop(text)
    return body if continues_prefix else sample.completion_prefix + body


@dataclass(frozen=True)
class CodeAnswer:
    """How a code task reads the code out of an answer (see :func:`completion_code`).

    Attributes:
        continues_prefix: the task's harness itself puts ``completion_prefix`` in front of the code
            (HumanEval's ``prompt + completion``); False: a completion-mode answer gets the prefix
            prepended here, so the harness receives whole definitions (MBPP, ClassEval).
    """

    continues_prefix: bool

    def extract(self, text: str, sample: Sample, *, chat: bool) -> str:
        """The code to test for one decoded answer ``text`` (chat or completion mode)."""
        return completion_code(text, sample, chat=chat, continues_prefix=self.continues_prefix)
