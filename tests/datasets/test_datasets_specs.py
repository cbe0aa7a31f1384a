"""Task specs: every registered dataset declares a scorer (or Unscored), its config and its code handling."""

from __future__ import annotations

import dataclasses
import json

import pytest
from omegaconf import OmegaConf

from lade_bench.datasets import (
    CodeAnswer,
    DatasetSpecError,
    Unscored,
    available_datasets,
    config_file,
    get_spec,
    register_dataset,
)
from lade_bench.datasets.scorers import score_rouge
from lade_bench.results import COLUMNS

QUALITY_COLUMNS = {c.name for c in COLUMNS if c.group == "quality"}


@pytest.mark.parametrize("name", available_datasets())
def test_every_registered_dataset_declares_a_scorer_or_unscored(name):
    spec = get_spec(name)
    if isinstance(spec.scorer, Unscored):
        assert spec.scorer.reason.strip() and spec.quality_columns == ()
    else:
        assert callable(spec.scorer), f"{name} declares no scorer"
        assert spec.quality_columns, f"{name} has a scorer but no quality columns"
        assert set(spec.quality_columns) <= QUALITY_COLUMNS, f"{name}: not quality columns of the row schema"


@pytest.mark.parametrize("name", available_datasets())
def test_every_registered_dataset_has_its_config_file(name):
    spec = get_spec(name)
    path = config_file(spec)
    assert path.is_file(), f"{name}: {path} is missing"
    assert OmegaConf.load(path).name == name


def test_code_datasets_say_how_their_answer_is_read_and_are_scored():
    specs = [get_spec(n) for n in available_datasets()]
    assert any(s.runs_code for s in specs) and any(isinstance(s.scorer, Unscored) for s in specs)
    for spec in specs:
        if spec.runs_code:
            assert isinstance(spec.code, CodeAnswer) and not isinstance(spec.scorer, Unscored), spec.name
    # HumanEval's answer is the body of the function its prompt opens (the prompt is part of the program).
    assert get_spec("humaneval").code == CodeAnswer(continues_prefix=True)


def _spec(**changes):
    """A complete spec (XSum's), with ``changes`` applied."""
    return dataclasses.replace(get_spec("xsum"), **{"name": "toy", **changes})


@pytest.mark.parametrize("scorer", [None, "rouge", 3])
def test_a_spec_without_a_scorer_fails_naming_the_dataset(scorer):
    with pytest.raises(DatasetSpecError, match=r"dataset 'toy': declares no scorer .*Unscored\("):
        _spec(scorer=scorer)


def test_incomplete_specs_are_refused_with_the_field_to_fill():
    with pytest.raises(DatasetSpecError, match="Unscored needs a reason"):
        _spec(scorer=Unscored("  "), quality_columns=())
    with pytest.raises(DatasetSpecError, match=r"is Unscored but declares quality columns \['rouge1'"):
        _spec(scorer=Unscored("judged elsewhere"))
    with pytest.raises(DatasetSpecError, match="has a scorer but declares no quality_columns"):
        _spec(quality_columns=())
    with pytest.raises(DatasetSpecError, match=r"runs_code=True needs code=CodeAnswer"):
        _spec(runs_code=True)
    with pytest.raises(DatasetSpecError, match="quality_columns must be a tuple of column names, got 'accuracy'"):
        _spec(quality_columns="accuracy")
    with pytest.raises(DatasetSpecError, match="task 'vision' is not one of"):
        _spec(task="vision")
    assert _spec(scorer=score_rouge).name == "toy"  # the complete one is fine


def test_registration_refuses_a_missing_config_file_and_a_taken_name(tmp_path):
    with pytest.raises(DatasetSpecError, match=r"dataset 'toy': its config file .*dataset/toy_missing.yaml is missing"):
        register_dataset(_spec(config="toy_missing"))
    with pytest.raises(DatasetSpecError, match=r"dataset 'toy': its config file .*is missing"):
        register_dataset(_spec(), conf_dir=tmp_path)  # xsum.yaml is not under this folder
    with pytest.raises(DatasetSpecError, match="'xsum' is already registered"):
        register_dataset(get_spec("xsum"))
    assert "toy" not in available_datasets()


@pytest.mark.parametrize("name", ["mbpp", "cnn_dailymail"])
def test_the_loader_prompts_each_record_with_the_specs_prompt(fixtures_dir, name):
    path = fixtures_dir / f"{name}_sample.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    spec = get_spec(name)
    samples = spec.load(path, spec.default_split)
    assert [(s.turns, s.completion_prefix) for s in samples] == [
        (p.turns, p.completion_prefix) for p in map(spec.prompt, records)
    ]
