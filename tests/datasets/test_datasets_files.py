"""A broken dataset file is named with its line, whatever its format."""

from __future__ import annotations

import gzip
import json

import pytest

from lade_bench.datasets import DatasetFormatError, load_dataset_samples

GOOD = {"question_id": 1, "category": "writing", "turns": ["Write a haiku."]}


def _write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_corrupt_jsonl_line_names_the_file_and_its_line(tmp_path):
    path = _write_lines(tmp_path / "question.jsonl", [json.dumps(GOOD), "", json.dumps(GOOD)[:-5]])
    with pytest.raises(DatasetFormatError) as info:
        load_dataset_samples("mt_bench", path=str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:3: invalid JSON at column ")
    assert "each line must be one JSON object" in message


def test_corrupt_gzipped_jsonl_line_is_named_too(tmp_path):
    path = tmp_path / "question.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(GOOD) + "\n{not json\n")
    with pytest.raises(DatasetFormatError, match=rf"^{path}:2: invalid JSON"):
        load_dataset_samples("mt_bench", path=str(path))


def test_jsonl_line_that_is_not_an_object(tmp_path):
    path = _write_lines(tmp_path / "question.jsonl", [json.dumps(GOOD), "[1, 2]"])
    with pytest.raises(DatasetFormatError, match=rf"^{path}:2: expected a JSON object, got list"):
        load_dataset_samples("mt_bench", path=str(path))


def test_corrupt_json_file_names_its_line(tmp_path):
    path = tmp_path / "mbpp.json"
    path.write_text('[\n  {"task_id": 1},\n  {"task_id": 2,,}\n]\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=rf"^{path}:3: invalid JSON at column"):
        load_dataset_samples("mbpp", path=str(path))


def test_corrupt_parquet_and_missing_fields_name_the_file(tmp_path):
    path = tmp_path / "gsm8k.parquet"
    path.write_bytes(b"PAR1 not really")
    with pytest.raises(DatasetFormatError, match=rf"^{path}: not a readable parquet file"):
        load_dataset_samples("gsm8k", path=str(path))
    fields = _write_lines(tmp_path / "q.jsonl", [json.dumps({"question_id": 1})])
    with pytest.raises(DatasetFormatError, match=r"q\.jsonl:1: record 0: lacks field\(s\)"):
        load_dataset_samples("mt_bench", path=str(fields))
