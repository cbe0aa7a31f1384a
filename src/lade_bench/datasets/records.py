"""Records to samples, every record checked when the dataset loads (before any model does).

A bad record anywhere in a custom ``dataset.path`` file must not surface as a traceback from a
loader, nor be run in a shape nobody meant (``turns`` given as a string would otherwise be run as
one turn per character), nor be found only after the model has loaded. Each loader states its
fields and which of them carry the id and the prompt text; :func:`build_samples` checks every
record against them and reports every bad one by file and line, with what is wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lade_bench.datasets._sources import DatasetFormatError, Located
from lade_bench.datasets.sample import Sample

# Enough to see the pattern of a systematically wrong file without drowning the terminal.
_MAX_REPORTED = 10


def build_samples(
    records: Sequence[Located],
    source: str,
    fields: Sequence[str],
    make: Callable[[dict[str, Any], int], Sample],
    *,
    id_field: str | None = None,
    text_fields: Sequence[str] = (),
    prompt_fields: Sequence[str] = (),
    turns_field: str | None = None,
) -> list[Sample]:
    """Check every record, then build its sample with ``make(record, index)``.

    Args:
        records: ``(where, record)`` pairs (see ``_sources.read_located_records`` and ``locate``).
        source: the file or hub split they came from (named when there are none).
        fields: fields every record must have.
        make: builds one sample from a checked record and its index in the file.
        id_field: the field holding the sample id: not null, a string or an integer, unique.
        text_fields: fields that become prompt text after an instruction: strings. A blank one is
            kept (the prompt still has the instruction; XSum's upstream test split has one such
            document, and dropping it would change every XSum cell's samples).
        prompt_fields: fields prompted as they are (a code model's completion prefix): non-blank strings.
        turns_field: a field holding the user turns as they are prompted: a non-empty list of
            non-blank strings.

    Raises:
        DatasetFormatError: one line per bad record (the first few), each naming file, line and problem;
            or a dataset without records.
    """
    if not records:
        raise DatasetFormatError(f"{source}: holds no records (an empty file?); nothing could be measured")
    samples, problems = [], []
    first_seen: dict[str, str] = {}
    for index, (where, record) in enumerate(records):
        problem = _problem(record, fields, id_field, text_fields, prompt_fields, turns_field)
        if problem is None:
            try:
                sample = make(record, index)
            except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            else:
                if sample.sample_id in first_seen:
                    problem = f"duplicate sample id {sample.sample_id!r} (first at {first_seen[sample.sample_id]})"
                else:
                    first_seen[sample.sample_id] = where
                    samples.append(sample)
        if problem is not None:
            problems.append(f"{where}: {problem}")
    if problems:
        shown = problems[:_MAX_REPORTED]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise DatasetFormatError(f"{source}: {len(problems)} bad record(s):\n  " + "\n  ".join(shown) + more)
    return samples


def _problem(
    record: dict[str, Any],
    fields: Sequence[str],
    id_field: str | None,
    text_fields: Sequence[str],
    prompt_fields: Sequence[str],
    turns_field: str | None,
) -> str | None:
    """What is wrong with one record, or None."""
    missing = [f for f in fields if f not in record]
    if missing:
        return f"lacks field(s) {missing}; expected fields {list(fields)}, found {sorted(record)}"
    if id_field is not None:
        value = record[id_field]
        if value is None or (isinstance(value, str) and not value.strip()):
            return f"{id_field} is {'null' if value is None else 'blank'}; every record needs a unique id"
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            return f"{id_field} must be a string or an integer, got {type(value).__name__} {value!r}"
    for name in (*text_fields, *prompt_fields):
        value = record[name]
        if not isinstance(value, str):
            return f"{name} must be a string, got {type(value).__name__}"
        if name in prompt_fields and not value.strip():
            return f"{name} is blank; a prompt needs text"
    if turns_field is not None:
        turns = record[turns_field]
        if not isinstance(turns, list) or not turns:
            got = "an empty list" if isinstance(turns, list) else f"{type(turns).__name__} {_short(turns)}"
            return f"{turns_field} must be a non-empty list of strings (one per user turn), got {got}"
        for number, turn in enumerate(turns):
            if not isinstance(turn, str):
                return f"{turns_field}[{number}] must be a string, got {type(turn).__name__}"
            if not turn.strip():
                return f"{turns_field}[{number}] is blank; a prompt needs text"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
