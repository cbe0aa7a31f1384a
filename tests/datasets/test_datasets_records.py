"""Every malformed record of a custom dataset file is named by file and line when the dataset loads."""

from __future__ import annotations

import json

import pytest

from lade_bench.datasets import DatasetFormatError, load_dataset_samples

GOOD = {"question_id": 1, "category": "writing", "turns": ["Write a haiku."]}


def _file(tmp_path, *records, name="question.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"turns": []}, "turns must be a non-empty list of strings (one per user turn), got an empty list"),
        ({"turns": "Write a haiku."}, "turns must be a non-empty list of strings (one per user turn), got str"),
        ({"turns": ["ok", 3]}, "turns[1] must be a string, got int"),
        ({"turns": [""]}, "turns[0] is blank; a prompt needs text"),
        ({"turns": ["  \n"]}, "turns[0] is blank; a prompt needs text"),
        ({"question_id": None}, "question_id is null; every record needs a unique id"),
        ({"question_id": [1]}, "question_id must be a string or an integer, got list"),
        ({"question_id": 1}, "duplicate sample id '1' (first at "),
    ],
)
def test_each_bad_mt_bench_record_is_named_with_its_line(tmp_path, bad, problem):
    path = tmp_path / "question.jsonl"
    # Line 2 is blank on purpose: the line named is the file's, not the record's index.
    path.write_text(json.dumps(GOOD) + "\n\n" + json.dumps({**GOOD, "question_id": 2, **bad}) + "\n")
    with pytest.raises(DatasetFormatError) as info:
        load_dataset_samples("mt_bench", path=str(path))
    assert f"{path}:3: record 1: {problem}" in str(info.value)


def test_every_bad_record_is_listed_and_the_good_ones_are_not(tmp_path):
    path = _file(tmp_path, GOOD, {**GOOD, "question_id": None}, {**GOOD, "question_id": 3, "turns": []})
    with pytest.raises(DatasetFormatError) as info:
        load_dataset_samples("mt_bench", path=str(path))
    message = str(info.value)
    assert message.startswith(f"{path}: 2 bad record(s):")
    assert f"{path}:2: record 1: question_id is null" in message and f"{path}:3: record 2: turns" in message
    assert f"{path}:1:" not in message


def test_an_empty_file_is_refused_when_loading(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n")
    with pytest.raises(DatasetFormatError, match=r"empty\.jsonl: holds no records"):
        load_dataset_samples("mt_bench", path=str(path))


def test_wrong_types_and_blank_code_prompts_in_other_datasets(tmp_path):
    xsum = _file(tmp_path, {"id": "a", "document": 7, "summary": "s"}, name="xsum.jsonl")
    with pytest.raises(DatasetFormatError, match=r"xsum\.jsonl:1: record 0: document must be a string, got int"):
        load_dataset_samples("xsum", path=str(xsum))
    problem = {"task_id": "H/0", "prompt": " ", "canonical_solution": "", "test": "", "entry_point": "f"}
    humaneval = _file(tmp_path, problem, name="he.jsonl")
    with pytest.raises(DatasetFormatError, match=r"he\.jsonl:1: record 0: prompt is blank"):
        load_dataset_samples("humaneval", path=str(humaneval))
    gsm8k = _file(tmp_path, {"question": "1+1?", "answer": "no number line"}, name="gsm8k.jsonl")
    with pytest.raises(DatasetFormatError, match=r"gsm8k\.jsonl:1: record 0: ValueError: GSM8K answer has no"):
        load_dataset_samples("gsm8k", path=str(gsm8k))
