"""Prompt formats: how a turn is put to a model, by what the model was trained on (issue 63).

* ``chat``: the model's own chat template (an instruct or chat model; ``model.chat=true``).
* ``cued``: a base model's completion format: each user turn after its task's label, each earlier answer
  after its answer cue, and the current turn ending in the answer cue, so that the model continues with
  an answer rather than with more of the question. Without a cue Gemma-3-270M (base) continued
  "Translate German to English: <German>" in German in all 10 committed translation outputs, and MT-Bench's
  turn 2 read "Q1\\n\\nA1\\n\\nQ2".
* ``plain``: the bare turn texts (and earlier answers) joined by blank lines, no label and no cue: every
  base-model cell before issue 63 ran it; kept so those cells keep their meaning and their id.

A code task that gives a ``completion_prefix`` (HumanEval's header and docstring) is continued verbatim
under both completion formats: the model writes the code itself. :data:`CUES` is the one place that
says, per Spec-Bench category or dataset task, what label and cue a turn gets; ``docs/spec_bench.md``
shows them beside Spec-Bench's own template.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lade_bench.datasets.sample import Sample

CHAT = "chat"
CUED = "cued"
PLAIN = "plain"
# What a model without a chat template may use (``model.completion_format``).
COMPLETION_FORMATS: tuple[str, ...] = (CUED, PLAIN)
# Every format a row can record (its ``prompt_format`` column).
PROMPT_FORMATS: tuple[str, ...] = (CHAT, *COMPLETION_FORMATS)
# Separator between pieces of a completion-mode prompt (system text, earlier turns, current turn).
COMPLETION_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Cue:
    """How a ``cued`` prompt frames one task's turns.

    Attributes:
        label: written before each user turn ("Question: "; empty where the turn states its own task).
        answer: written after each user turn; the prompt ends with it, the model's answer follows.
    """

    label: str
    answer: str


# Per Spec-Bench category (``payload["category"]``) first, else per dataset task (``Sample.task``).
CUES: dict[str, Cue] = {
    # Tasks (MT-Bench, Spec-Bench's qa, rag and math_reasoning are chat: a question or a request).
    "chat": Cue("Question: ", "Answer:"),
    "math": Cue("", "Answer:"),  # GSM8K's turn holds its instruction and "Question: ..." already
    "summarization": Cue("", "Summary:"),  # also Spec-Bench's summarization category
    "code": Cue("", "Solution:"),  # only where no completion_prefix is given (MBPP's chat-style turn)
    # Spec-Bench's category whose turn is an instruction in another language, not a question.
    "translation": Cue("", "English:"),  # "Translate German to English: ..."
}


def cue_for(sample: Sample) -> Cue:
    """The label and answer cue of ``sample``'s turns: its category's where :data:`CUES` has one, else its task's."""
    category = sample.payload.get("category") if isinstance(sample.payload, dict) else None
    return CUES.get(str(category)) or CUES[sample.task]


def check_completion_format(value: object, key: str = "model.completion_format") -> str | None:
    """Why ``value`` is no completion format (one line, naming the allowed ones); None when it is one."""
    if value not in COMPLETION_FORMATS:
        return f"{key}={value!r} is not a completion format; use one of {list(COMPLETION_FORMATS)}"
    return None


def prompt_format(chat: bool, completion_format: str) -> str:
    """The format a model's prompts are in: ``chat`` for a chat model, else its completion format."""
    return CHAT if chat else completion_format


def completion_text(
    sample: Sample,
    turn_index: int,
    history: Sequence[tuple[str, str]],
    system_prompt: str | None = None,
    completion_format: str = PLAIN,
) -> str:
    """The raw text a base/code model continues for ``turn_index`` (history checked by the caller).

    ``plain``: the user turn, preceded by any earlier turns and answers, joined by blank lines. ``cued``:
    each turn after its label, each earlier answer after the cue, the prompt ending in the cue
    (:func:`cue_for`). Code tasks with a ``completion_prefix`` use it verbatim, trailing newline
    included, under both.
    """
    problem = check_completion_format(completion_format, "completion_format")
    if problem:
        raise ValueError(problem)
    parts = [system_prompt] if system_prompt else []
    if sample.completion_prefix:
        return COMPLETION_SEPARATOR.join([*parts, *_plain_history(history), sample.completion_prefix])
    if completion_format == PLAIN:
        return COMPLETION_SEPARATOR.join([*parts, *_plain_history(history), sample.turns[turn_index]])
    cue = cue_for(sample)
    for user, assistant in history:
        parts += [f"{cue.label}{user}", f"{cue.answer} {assistant}"]
    parts += [f"{cue.label}{sample.turns[turn_index]}", cue.answer]
    return COMPLETION_SEPARATOR.join(parts)


def _plain_history(history: Sequence[tuple[str, str]]) -> list[str]:
    return [piece for pair in history for piece in pair]
