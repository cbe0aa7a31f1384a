"""One Spec-Bench answer record checked field by field against its question, each fault named by its path.

Spec-Bench's ``evaluation/eval.py`` writes per question ``question_id``, ``category``, ``answer_id``,
``model_id`` and ``choices``; each choice holds one entry per turn in ``turns`` (the text),
``decoding_steps``, ``new_tokens`` and ``wall_time`` (seconds), and ``accept_lengths`` over all turns.
A record is checked against Spec-Bench's question file: its id is a question there, its category is
that question's, and every choice has as many turns as the question (the question file is itself
checked against the dataset's rule, ``datasets.spec_bench.turn_count``, as it loads). A fault is a
:class:`RecordError` whose text starts with the full field path, e.g. ``choices[0].wall_time``.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lade_bench.datasets import DatasetFormatError, DatasetUnavailableError, load_dataset_samples

# One entry per turn in each of these; accept_lengths runs over all turns.
CHOICE_LISTS = ("turns", "decoding_steps", "new_tokens", "wall_time")
CHOICE_FIELDS = (*CHOICE_LISTS, "accept_lengths")
_JSON_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


class RecordError(ValueError):
    """A field of one answer record that is not what Spec-Bench writes: ``<field path>: <what is wrong>``."""


class QuestionFileError(ValueError):
    """The question file answer records are checked against cannot be read (the message says why)."""


@dataclass(frozen=True)
class Questions:
    """Spec-Bench's question file as answer records are checked against it.

    Attributes:
        path: the file.
        shapes: per question id, its category and number of turns.
    """

    path: Path
    shapes: dict[int, tuple[str, int]]


def read_questions(path: str | os.PathLike[str]) -> Questions:
    """Spec-Bench's ``question.jsonl`` at ``path``, read (and checked) as the ``spec_bench`` dataset reads it.

    Raises:
        QuestionFileError: the file is missing or malformed (the dataset's own message, file and line).
    """
    try:
        samples = load_dataset_samples("spec_bench", path=str(path))
    except (OSError, DatasetFormatError, DatasetUnavailableError) as why:
        # The dataset lists several bad records a line each; here they are one line, as every refusal.
        raise QuestionFileError(f"question file {path}: " + "; ".join(str(why).split("\n"))) from None
    shapes = {int(s.payload["question_id"]): (str(s.payload["category"]), len(s.turns)) for s in samples}
    return Questions(Path(path), shapes)


def check_record(record: Any, questions: Questions) -> None:
    """Check one parsed JSON line as a Spec-Bench answer record to a question of ``questions``.

    Raises:
        RecordError: the first fault, named by its full field path (``choices[0].wall_time``): not an
            object, a missing field, a field of the wrong type, a question id not in the question
            file, a category other than its question's, a choice whose number of turns is not its
            question's, per-turn lists of unequal lengths, a negative or non-finite number, or turns
            whose wall times sum to zero.
    """
    if not isinstance(record, dict):
        raise RecordError(f"record: a JSON object expected, got {_kind(record)}")
    question_id = _field(record, "question_id", "", _is_int, "an integer")
    category = _field(record, "category", "", lambda v: isinstance(v, str), "a string")
    for optional in ("answer_id", "model_id"):
        if optional in record and not isinstance(record[optional], str):
            raise RecordError(f"{optional}: a string expected, got {_kind(record[optional])}")
    if question_id not in questions.shapes:
        ids = sorted(questions.shapes)
        raise RecordError(
            f"question_id: {question_id} is not a question of {questions.path} (its ids: {ids[0]}-{ids[-1]})"
        )
    asked, n_turns = questions.shapes[question_id]
    if category != asked:
        raise RecordError(f"category: {category!r}, but question {question_id} of {questions.path} is {asked!r}")
    choices = _field(record, "choices", "", lambda v: isinstance(v, list) and bool(v), "a non-empty array")
    for index, choice in enumerate(choices):
        _check_choice(choice, f"choices[{index}]", question_id, category, n_turns)


def _check_choice(choice: Any, path: str, question_id: int, category: str, n_turns: int) -> None:
    if not isinstance(choice, dict):
        raise RecordError(f"{path}: a JSON object expected, got {_kind(choice)}")
    turns = _field(choice, "turns", path, lambda v: isinstance(v, list), "an array")
    if len(turns) != n_turns:
        raise RecordError(
            f"{path}.turns: {len(turns)} turn(s) for question {question_id} ({category}), expected {n_turns} "
            f"(Spec-Bench's {category} questions have {n_turns})"
        )
    element_rules = {
        "turns": (lambda v: isinstance(v, str), "a string"),
        "decoding_steps": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
        "new_tokens": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
        "wall_time": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0 (seconds)"),
        "accept_lengths": (lambda v: _is_number(v) and v >= 0, "a finite number >= 0"),
    }
    for name in CHOICE_FIELDS:
        values = _field(choice, name, path, lambda v: isinstance(v, list), "an array")
        if name in CHOICE_LISTS and len(values) != n_turns:
            raise RecordError(f"{path}.{name}: {len(values)} entries, expected one per turn ({n_turns})")
        good, wanted = element_rules[name]
        for position, value in enumerate(values):
            if not good(value):
                raise RecordError(f"{path}.{name}[{position}]: {wanted} expected, got {_shown(value)}")
    if sum(choice["wall_time"]) <= 0:
        raise RecordError(f"{path}.wall_time: the turns' times sum to zero; speed.py divides by it")


def _field(obj: dict[str, Any], name: str, parent: str, good: Any, wanted: str) -> Any:
    """``obj[name]``, refused by its path (``parent.name``) when missing or not ``wanted``."""
    path = f"{parent}.{name}" if parent else name
    if name not in obj:
        raise RecordError(f"{path}: missing ({wanted} expected)")
    if not good(obj[name]):
        raise RecordError(f"{path}: {wanted} expected, got {_shown(obj[name])}")
    return obj[name]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _shown(value: Any) -> str:
    """``a string "abc"``: the value's JSON kind and (cut short) its JSON text."""
    return _kind(value) if value is None else f"{_kind(value)} {json.dumps(value, ensure_ascii=False)[:40]}"


def _kind(value: Any) -> str:
    """The JSON kind of a parsed value, as a person reading the file sees it."""
    if _is_int(value):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return _JSON_KINDS.get(type(value), type(value).__name__)
