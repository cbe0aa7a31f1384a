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
baseline reports ``step = new_tokens`` and ``accept_lengths = [1] * new_tokens``). One file per
(model, method); a (model, method) measured in cells of more than one lookahead setting (the
``spec_bench`` sweep's AR runs in both of its cells) gets one file per setting, named by it, so that
every method file has the AR file of its own cells to be compared with.
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

from lade_bench.datasets.spec_bench import CATEGORIES, parse_sample_id
from lade_bench.results import load_rows
from lade_bench.results.atomic import atomic_write_text
from lade_bench.stats import cell_attributes, ok_rows

DATASET = "spec_bench"
CHOICE_LISTS = ("turns", "decoding_steps", "new_tokens", "wall_time")


class AnswerFileError(ValueError):
    """A sweep that cannot be written as answer files, or an answer file that cannot be read."""


@dataclass(frozen=True)
class AnswerSet:
    """The answers of one (model, method) in Spec-Bench's format.

    Attributes:
        model_id: ``<model>-<arm>`` or ``<model>-<arm>-<setting>`` (the file is ``<model_id>.jsonl``).
        records: one per question, sorted by ``question_id`` (as Spec-Bench's ``reorg_answer_file``).
    """

    model_id: str
    records: list[dict[str, Any]]


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


def answer_records(rows: pd.DataFrame) -> list[AnswerSet]:
    """Spec-Bench answer sets of every (model, method) in ``rows`` (the ``spec_bench`` rows only).

    A question enters a method's file with the repeats whose every turn is error-free (Spec-Bench
    writes no timing for a failed turn).

    Raises:
        AnswerFileError: no spec_bench rows, or one file would hold a question twice (two cells of the
            same model, method and lookahead setting, e.g. two output lengths: export them apart).
    """
    rows = rows[rows["dataset"] == DATASET]
    if rows.empty:
        raise AnswerFileError(f"no rows of dataset {DATASET!r} to export")
    rows = rows.assign(_setting=split_settings(rows).fillna(""))
    sets = []
    for (model, arm, setting), part in rows.groupby(["model", "arm", "_setting"], sort=True):
        name = f"{model}-{arm}" + (f"-{setting}" if setting else "")
        sets.append(AnswerSet(name, _question_records(part, name)))
    return sets


def _question_records(rows: pd.DataFrame, model_id: str) -> list[dict[str, Any]]:
    good = ok_rows(rows)
    complete = rows.groupby(["cell_id", "sample_id", "repeat"])["error"].apply(lambda e: e.isna().all())
    records: dict[int, dict[str, Any]] = {}
    for (cell_id, sample_id), sample_rows in good.groupby(["cell_id", "sample_id"], sort=False):
        category, question_id = parse_sample_id(sample_id)
        if question_id in records:
            raise AnswerFileError(
                f"{model_id}: question {question_id} comes from two cells ({records[question_id]['answer_id']} and "
                f"{cell_id}); export the sweeps apart"
            )
        choices = []
        for repeat, turns in sample_rows.groupby("repeat", sort=True):
            if not complete.loc[(cell_id, sample_id, repeat)]:
                continue
            turns = turns.sort_values("turn")
            choices.append(
                {
                    "index": int(repeat),
                    "turns": [str(t) for t in turns["output_text"]],
                    "decoding_steps": [int(s) for s in turns["decode_steps"]],
                    "new_tokens": [int(n) for n in turns["new_tokens"]],
                    "wall_time": [float(t) for t in turns["wall_time_s"]],
                    "accept_lengths": [int(a) for lengths in turns["accept_lengths"] for a in lengths],
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


def write_answer_files(sweep: str | os.PathLike[str], out: str | os.PathLike[str]) -> list[Path]:
    """Write ``<out>/<model_id>.jsonl`` for every (model, method) of a sweep folder or archive.

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


def read_answer_file(path: str | os.PathLike[str]) -> AnswerSet:
    """Read a Spec-Bench answer file (ours or one a Spec-Bench user published), every line checked.

    Raises:
        AnswerFileError: naming the file and line of the first bad record (not JSON, a missing field, a
            category Spec-Bench does not have, per-turn lists of unequal lengths, a non-positive total
            wall time), or a file without records or with several model ids.
    """
    file = Path(path)
    records = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            _check_record(record)
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as why:
            raise AnswerFileError(f"{file}:{number}: not a Spec-Bench answer record: {why}") from None
        records.append(record)
    if not records:
        raise AnswerFileError(f"{file}: no answer records")
    model_ids = sorted({str(r.get("model_id", file.stem)) for r in records})
    if len(model_ids) > 1:
        raise AnswerFileError(f"{file}: holds several model ids {model_ids}; one file is one (model, method)")
    return AnswerSet(model_ids[0], sorted(records, key=lambda r: r["question_id"]))


def _check_record(record: dict[str, Any]) -> None:
    if not isinstance(record["question_id"], int):
        raise TypeError(f"question_id must be an integer, got {record['question_id']!r}")
    if record["category"] not in CATEGORIES:
        raise ValueError(f"category {record['category']!r} is not one of Spec-Bench's: {', '.join(CATEGORIES)}")
    choices = record["choices"]
    if not isinstance(choices, list) or not choices:
        raise ValueError("choices must be a non-empty list")
    for choice in choices:
        lengths = {name: len(choice[name]) for name in CHOICE_LISTS}
        if len(set(lengths.values())) != 1 or not lengths["turns"]:
            raise ValueError(f"per-turn lists must have one entry per turn, got lengths {lengths}")
        if sum(choice["wall_time"]) <= 0:
            raise ValueError("the turns' wall_time sums to zero")
        if not isinstance(choice["accept_lengths"], list):
            raise TypeError("accept_lengths must be a list")


def questions(answer_set: AnswerSet, categories: Iterable[str]) -> list[dict[str, Any]]:
    """The records of ``answer_set`` whose category is in ``categories``."""
    wanted = set(categories)
    return [r for r in answer_set.records if r["category"] in wanted]
