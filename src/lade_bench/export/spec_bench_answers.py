"""Spec-Bench's answer files, out of a sweep's rows and back in.

Spec-Bench (hemingkx/Spec-Bench, ``evaluation/eval.py``) writes one JSONL line per question::

    {"question_id", "category", "answer_id", "model_id",
     "choices": [{"index", "turns", "decoding_steps", "new_tokens", "wall_time", "accept_lengths"}]}

with one entry per turn in ``turns`` (the text), ``decoding_steps``, ``new_tokens`` and ``wall_time``
(seconds), and ``accept_lengths`` the tokens accepted per step over all turns. Its ``speed.py`` reads
``choices[0]``: per question ``sum(new_tokens) / sum(wall_time)``, averaged over a category's
questions, method over baseline; ``equal.py`` compares the ``turns`` texts with the baseline's.

Our rows map onto it one to one: a row is one (sample, turn, arm, repeat); ``choices[i]`` is repeat
``i``; ``decoding_steps`` is the row's forward passes, the prefill included, and ``accept_lengths`` its
tokens per forward, the prefill's first token included, which is Spec-Bench's own count (its
baseline reports ``step = new_tokens`` and ``accept_lengths = [1] * new_tokens``); a forward that emitted
nothing (Token Recycling's authors' prefill of ``prompt[:-1]``) is in neither, as their own loop counts it.

One file per (model, arm, kind of cell): cells of one sweep that ran the same arms at the same
settings (the lookahead shape counted only where lookahead is among them) are one kind, e.g. the
``spec_bench`` sweep's every-method cells of its six groups, so that a file spans Spec-Bench's
categories as its own files do. The file is named ``<model>-<arm>[-<lookahead shape>]-<cell id>``:
the shape only in a lookahead arm's name, and the id of the kind's first cell (the cells' folders end
in their ids; each record's ``answer_id`` names its own cell), shared by every arm of those cells, so
a method's file and the AR file it is compared with end alike and two kinds never share a name.

Reading (:func:`read_answer_file`) checks every record against Spec-Bench's question file
(``spec_bench_records``) and refuses a malformed file with one line naming the file, the line and the
field.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.datasets.spec_bench import parse_sample_id
from lade_bench.export.spec_bench_records import Questions, RecordError, check_record
from lade_bench.methods import get_method, is_registered
from lade_bench.results import load_rows
from lade_bench.results.atomic import atomic_write_text
from lade_bench.results.schema import SHAPE_SECTION
from lade_bench.stats import cell_attributes, ok_rows

DATASET = "spec_bench"
# The row columns besides the shape that set what a cell's answers are (with its arms): cells equal in
# them and in their arms are one kind of cell, exported together.
_KIND_COLUMNS = ("model", "max_new_tokens", "do_sample", "temperature", "top_p", "top_k", "compiled", "compile_mode")


class AnswerFileError(ValueError):
    """A sweep that cannot be written as answer files, or an answer file that cannot be read."""


@dataclass(frozen=True)
class AnswerSet:
    """The answers of one (model, method) in Spec-Bench's format.

    Attributes:
        model_id: ``<model>-<arm>[-<lookahead shape>]-<cell id>`` (the file is ``<model_id>.jsonl``);
            a file read in keeps the ``model_id`` its records give.
        records: one per question, sorted by ``question_id`` (as Spec-Bench's ``reorg_answer_file``).
        arm: the arm whose rows the set holds (``answer_records``); None for a file read in.
    """

    model_id: str
    records: list[dict[str, Any]]
    arm: str | None = None


def lookahead_setting(attributes: dict[str, Any]) -> str | None:
    """``n5-w7-g7`` (``-pool`` with the prompt as reference) of a cell; None: no lookahead shape."""
    shape = [attributes.get(k) for k in ("ngram", "window", "guesses")]
    known = [v for v in shape if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if len(known) != len(shape):
        return None
    ngram, window, guesses = (int(v) for v in known)
    return f"n{ngram}-w{window}-g{guesses}" + ("-pool" if attributes.get("prompt_as_reference") else "")


def split_settings(rows: pd.DataFrame) -> pd.Series:
    """Per row, the lookahead setting of its cell where its (model, method) ran under several, else None.

    What tells two answer files (and two leaderboard entries) of one (model, method) apart: the
    ``spec_bench`` sweep's AR runs in both of its cells, and lookahead at two settings.
    """
    settings = {}
    for (sweep, cell_id), cell_rows in rows.groupby(["sweep", "cell_id"], sort=False):
        settings[(sweep, cell_id)] = lookahead_setting(cell_attributes(cell_rows))
    setting = pd.Series([settings[key] for key in zip(rows["sweep"], rows["cell_id"], strict=True)], index=rows.index)
    several = setting.fillna("").groupby([rows["model"], rows["arm"]]).transform("nunique") > 1
    return setting.where(several, None)


def reads_shape(arm: str) -> bool:
    """Whether ``arm`` runs on the lookahead shape the rows' shape columns hold (its own config section)."""
    return is_registered(arm) and get_method(arm).own_section == SHAPE_SECTION


def cell_kinds(rows: pd.DataFrame) -> pd.Series:
    """Per row, the id of the first cell of its kind: the cells of its sweep with the same arms, settings
    (:data:`_KIND_COLUMNS`) and, where one of those arms reads it, lookahead shape.

    The shape columns are filled in every row, also in a cell whose arms never read them (REST's), so
    they tell cells apart only where an arm reads them.
    """
    kinds: dict[tuple[str, str], tuple[Any, ...]] = {}
    for (sweep, cell_id), cell_rows in rows.groupby(["sweep", "cell_id"], sort=True):
        attributes = cell_attributes(cell_rows)
        arms = tuple(sorted(cell_rows["arm"].unique()))
        shape = lookahead_setting(attributes) if any(reads_shape(a) for a in arms) else None
        settings = tuple(str(cell_rows[c].iloc[0]) if c in cell_rows else "" for c in _KIND_COLUMNS)
        kinds[(sweep, cell_id)] = (sweep, arms, shape, settings)
    first: dict[tuple[Any, ...], str] = {}
    for key, kind in kinds.items():  # sorted by (sweep, cell id): a kind's first cell is its lowest id
        first.setdefault(kind, key[1])
    tags = {key: first[kind] for key, kind in kinds.items()}
    return pd.Series([tags[key] for key in zip(rows["sweep"], rows["cell_id"], strict=True)], index=rows.index)


def answer_set_name(model: str, arm: str, kind: str, attributes: dict[str, Any]) -> str:
    """``<model>-<arm>[-<lookahead shape>]-<cell id>``: the shape only where ``arm`` runs on it."""
    shape = lookahead_setting(attributes) if reads_shape(arm) else None
    return "-".join(part for part in (model, arm, shape, kind) if part)


def answer_records(rows: pd.DataFrame) -> list[AnswerSet]:
    """Spec-Bench answer sets of every (model, arm, kind of cell) in ``rows`` (the ``spec_bench`` rows only).

    A question enters a method's file with the repeats whose every turn is error-free (Spec-Bench
    writes no timing for a failed turn).

    Raises:
        AnswerFileError: no spec_bench rows, or one file would hold a question twice (two cells of one
            kind that asked the same question, e.g. settings the rows do not record: export them apart).
    """
    rows = rows[rows["dataset"] == DATASET]
    if rows.empty:
        raise AnswerFileError(f"no rows of dataset {DATASET!r} to export")
    rows = rows.assign(_kind=cell_kinds(rows))
    sets = []
    for (model, arm, kind), part in rows.groupby(["model", "arm", "_kind"], sort=True):
        first_cell = part[part["cell_id"] == kind]
        first_cell = first_cell[
            first_cell["sweep"] == first_cell["sweep"].iloc[0]
        ]  # one cell, were an id in two sweeps
        name = answer_set_name(str(model), str(arm), str(kind), cell_attributes(first_cell))
        sets.append(AnswerSet(name, _question_records(part, name), str(arm)))
    return sets


# The columns a question record is made of (and those that find its rows): grouping only these, not every
# column of the rows, is most of what an export of a sweep costs.
_RECORD_COLUMNS = [
    "cell_id",
    "sample_id",
    "repeat",
    "turn",
    "error",
    "output_text",
    "decode_steps",
    "accept_lengths",
    "new_tokens",
    "wall_time_s",
]


def _question_records(rows: pd.DataFrame, model_id: str) -> list[dict[str, Any]]:
    rows = rows[_RECORD_COLUMNS]
    good = ok_rows(rows)
    # Whether every turn of a (cell, sample, repeat) is error-free, as a dict: one look-up per repeat below.
    fine = rows["error"].isna().groupby([rows["cell_id"], rows["sample_id"], rows["repeat"]]).all()
    complete = dict(zip(fine.index, fine.tolist(), strict=True))
    # Each (cell, sample)'s rows in the rows' order, its samples in order of first appearance (a pandas
    # grouping per sample and repeat cost a frame each; a sweep's export holds thousands of them).
    samples: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for row in good.to_dict("records"):
        if not any(pd.isna(row[key]) for key in ("cell_id", "sample_id", "repeat")):  # as a grouping drops them
            samples.setdefault((row["cell_id"], row["sample_id"]), []).append(row)
    records: dict[int, dict[str, Any]] = {}
    for (cell_id, sample_id), sample_rows in samples.items():
        category, question_id = parse_sample_id(sample_id)
        if question_id in records:
            raise AnswerFileError(
                f"{model_id}: question {question_id} comes from two cells of one kind "
                f"({records[question_id]['answer_id']} and {cell_id}-{sample_id}); export them apart"
            )
        choices = []
        for repeat in sorted({row["repeat"] for row in sample_rows}):
            if not complete[(cell_id, sample_id, repeat)]:
                continue
            turns = sorted((row for row in sample_rows if row["repeat"] == repeat), key=lambda row: row["turn"])
            choices.append(
                {
                    "index": int(repeat),
                    "turns": [str(t["output_text"]) for t in turns],
                    "decoding_steps": [int(t["decode_steps"]) - _silent_forwards(t["accept_lengths"]) for t in turns],
                    "new_tokens": [int(t["new_tokens"]) for t in turns],
                    "wall_time": [float(t["wall_time_s"]) for t in turns],
                    "accept_lengths": [int(a) for t in turns for a in t["accept_lengths"] if a > 0],
                }
            )
        if choices:
            records[question_id] = {
                "question_id": question_id,
                "category": category,
                "answer_id": f"{cell_id}-{sample_id}",
                "model_id": model_id,
                "choices": choices,
            }
    return [records[q] for q in sorted(records)]


def _silent_forwards(accept_lengths: Any) -> int:
    """Forwards of a row that emitted nothing: Token Recycling's authors' prefill of ``prompt[:-1]``
    (``draft_tree``'s ``hold_last_prompt_token``). Their loop (Spec-Bench's ``inference_recycling.py``)
    counts neither a step nor an accepted length for it, so the export leaves it out of both."""
    return sum(1 for a in accept_lengths if a == 0)


def write_answer_files(sweep: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[Path]:
    """Write ``<out>/<model_id>.jsonl`` for every (model, arm, kind of cell) of a sweep folder or archive.

    Returns:
        The files written, sorted.
    """
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for answer_set in answer_records(load_rows(sweep)):
        path = out_dir / f"{answer_set.model_id}.jsonl"
        atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in answer_set.records))
        written.append(path)
    return sorted(written)


def read_answer_file(path: str | os.PathLike[str], questions: Questions) -> AnswerSet:
    """Read a Spec-Bench answer file (ours or one a Spec-Bench user published), every line checked.

    Args:
        path: the JSONL file.
        questions: Spec-Bench's question file (``spec_bench_records.read_questions``), which every
            record is checked against.

    Raises:
        AnswerFileError: one line naming the file, the line and the full field path of the first fault:
            a line that is not JSON, a record that is not an object, a missing field or one of the wrong
            type (``spec_bench_records.check_record``), a question not in the question file or asked
            twice, a number of turns other than its question's, a second model id; or a file that
            cannot be read or holds no records.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as why:
        raise AnswerFileError(f"{file}: cannot be read as a UTF-8 text file ({why})") from None
    records: list[dict[str, Any]] = []
    first_line: dict[int, int] = {}
    model_id: tuple[str, int] | None = None
    # Split on newlines only: str.splitlines would also cut a turn's text at U+2028, which JSON allows raw.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as why:
            raise AnswerFileError(
                f"{where}: not JSON ({why.msg}, column {why.colno}); one JSON object a line"
            ) from None
        try:
            check_record(record, questions)
        except RecordError as why:
            raise AnswerFileError(f"{where}: {why}") from None
        question_id = record["question_id"]
        if question_id in first_line:
            raise AnswerFileError(
                f"{where}: question_id: question {question_id} again (first on line {first_line[question_id]}); "
                "one record per question"
            )
        first_line[question_id] = number
        this_id = record.get("model_id", file.stem)
        if model_id is None:
            model_id = (this_id, number)
        elif this_id != model_id[0]:
            raise AnswerFileError(
                f"{where}: model_id: {this_id!r}, but line {model_id[1]} has {model_id[0]!r}; "
                "one file is one (model, method)"
            )
        records.append(record)
    if model_id is None:
        raise AnswerFileError(
            f"{file}: no answer records (an empty file); Spec-Bench writes one JSON line per question"
        )
    return AnswerSet(model_id[0], sorted(records, key=lambda r: r["question_id"]))


def questions(answer_set: AnswerSet, categories: Iterable[str]) -> list[dict[str, Any]]:
    """The records of ``answer_set`` whose category is in ``categories``."""
    wanted = set(categories)
    return [r for r in answer_set.records if r["category"] in wanted]
