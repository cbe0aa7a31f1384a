"""Registry behaviour: names, errors, splits, ids."""

from __future__ import annotations

import json

import pytest

from lade_bench.datasets import (
    TASKS,
    Sample,
    UnknownDatasetError,
    available_datasets,
    get_spec,
    load_dataset_samples,
)
from lade_bench.datasets.registry import discover_specs


def test_the_datasets_are_the_modules_that_declare_a_spec_and_cover_every_task():
    # conf/dataset/ holds one file per registered dataset (tests/runner/test_runner_configs.py), so a
    # module without its config file, or a config file without its module, fails there.
    specs = discover_specs("lade_bench.datasets")
    assert available_datasets() == sorted(spec.name for spec in specs) and all(get_spec(s.name) is s for s in specs)
    assert {get_spec(n).task for n in available_datasets()} == set(TASKS)


def test_discovery_takes_every_module_with_a_spec_and_nothing_else(tmp_path, monkeypatch):
    package = tmp_path / "toy_datasets"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("SPEC = 'not a DatasetSpec'\n")
    base = available_datasets()[0]
    for name in ("beta", "alpha"):
        (package / f"{name}.py").write_text(
            "import dataclasses\nfrom lade_bench.datasets import get_spec\n"
            f"SPEC = dataclasses.replace(get_spec({base!r}), name={name!r})\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert [spec.name for spec in discover_specs("toy_datasets")] == ["alpha", "beta"]


def test_unknown_name_lists_valid_names_and_suggests_one():
    name = max(available_datasets(), key=len)
    with pytest.raises(UnknownDatasetError) as info:
        load_dataset_samples(name[:-1])
    message = str(info.value)
    assert f"Did you mean {name!r}?" in message
    assert f"Valid names: {', '.join(available_datasets())}." in message
    with pytest.raises(UnknownDatasetError, match="Valid names") as info:
        load_dataset_samples("imagenet")
    assert "Did you mean" not in str(info.value)


def test_missing_path_is_named(tmp_path):
    missing = tmp_path / "nope" / "gsm8k_test.jsonl"
    with pytest.raises(FileNotFoundError, match="gsm8k_test.jsonl.*does not exist"):
        load_dataset_samples("gsm8k", path=str(missing))
    with pytest.raises(FileNotFoundError, match="is a directory"):
        load_dataset_samples("gsm8k", path=str(tmp_path))


def test_split_rules(fixtures_dir):
    with pytest.raises(ValueError, match="has split"):
        load_dataset_samples("humaneval", split="train")
    with pytest.raises(ValueError, match="single split"):
        load_dataset_samples("mbpp", path=str(fixtures_dir / "mbpp_sample.jsonl"), split="train")
    # Naming the default split explicitly is fine (configs may always carry it).
    assert len(load_dataset_samples("mbpp", path=str(fixtures_dir / "mbpp_sample.jsonl"), split="test")) == 5


def test_bad_limit():
    with pytest.raises(ValueError, match="limit"):
        load_dataset_samples("mt_bench", limit=-1)


def test_bad_offset_names_the_value_and_the_range():
    with pytest.raises(ValueError, match="offset must be >= 0, got -1"):
        load_dataset_samples("mt_bench", offset=-1)
    with pytest.raises(ValueError, match=r"offset=80 leaves no sample of its 80; use 0\.\.79"):
        load_dataset_samples("mt_bench", offset=80)


def test_wrong_schema_names_file_record_and_fields(fixtures_dir):
    # A CNN/DM file given as MBPP: the first record lacks MBPP's fields.
    with pytest.raises(ValueError, match=r"cnn_dailymail_sample.jsonl:1: record 0: lacks field\(s\) \['task_id'"):
        load_dataset_samples("mbpp", path=str(fixtures_dir / "cnn_dailymail_sample.jsonl"))


def test_duplicate_ids_are_refused(tmp_path):
    row = {"id": "1", "document": "Some text.", "summary": "Text."}
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match=r"dup.jsonl:2: record 1: duplicate sample id .1. \(first at .*dup.jsonl:1"):
        load_dataset_samples("xsum", path=str(path))


def test_sample_validation_and_immutability():
    sample = Sample(sample_id="x", turns=["hi"], reference=None, task="chat")
    assert sample.turns == ("hi",) and sample.payload == {} and sample.completion_prefix == ""
    with pytest.raises(AttributeError):
        sample.reference = "y"  # type: ignore[misc]
    with pytest.raises(ValueError, match="task"):
        Sample(sample_id="x", turns=("hi",), reference=None, task="vision")
    with pytest.raises(ValueError, match="turns"):
        Sample(sample_id="x", turns=(), reference=None, task="chat")
