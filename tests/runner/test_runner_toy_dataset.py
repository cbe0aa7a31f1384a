"""A dataset defined in a test alone (spec, JSONL, Hydra config) runs a real cell and fills its quality column.

This is the recipe of docs/adding_a_dataset.md with nothing added to the package: the config file
lives in ``tmp_path/conf/dataset/`` and reaches Hydra through ``hydra.searchpath``, the spec is
registered for the test only, and the runner, scorer and sandbox check read the spec.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from lade_bench.datasets import (
    CodeAnswer,
    DatasetSpec,
    Prompt,
    Sample,
    register_dataset,
    unregister_dataset,
)
from lade_bench.datasets.records import build_samples
from lade_bench.results import load_rows
from lade_bench.runner import CellConfigError, plan_cell, run_cell

from .conftest import TINY

NAME = "toy_echo"
RECORDS = [{"uid": "a", "word": "apple"}, {"uid": "b", "word": "banana"}]
# The dataset group's keys (runner/config_schema.py DatasetConfig), as every conf/dataset/*.yaml has them.
CONFIG = """\
# A test-only dataset: repeat one word.
name: toy_echo
split: null  # the file is the only split
path: {path}  # the JSONL the test writes
shuffle_seed: null  # file order
max_prompt_tokens: null  # the model's context decides
"""


def _prompt(row: Mapping[str, Any]) -> Prompt:
    return Prompt(turns=(f"Repeat this word: {row['word']}",))


def _load(path: Path | None, split: str) -> list[Sample]:
    located = [(f"{path}:{n}", json.loads(line)) for n, line in enumerate(path.read_text().splitlines(), 1)]

    def make(row: dict, index: int) -> Sample:
        return Sample(sample_id=row["uid"], turns=_prompt(row).turns, reference=row["word"], task="chat")

    return build_samples(located, str(path), ("uid", "word"), make, id_field="uid", text_fields=("word",))


@pytest.fixture
def toy_dataset(tmp_path):
    """Register ``toy_echo`` (config under ``tmp_path/conf``) for one test; yields that conf folder and the scores."""
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    conf = tmp_path / "conf"
    (conf / "dataset").mkdir(parents=True)
    (conf / "dataset" / f"{NAME}.yaml").write_text(CONFIG.format(path=data))
    scored: list[tuple[str, str]] = []

    def score(answer: str, sample: Sample, allow_unsandboxed: bool) -> dict[str, Any]:
        scored.append((sample.sample_id, answer))
        return {"accuracy": float(sample.reference in answer)}

    spec = DatasetSpec(
        name=NAME,
        load=_load,
        prompt=_prompt,
        task="chat",
        scorer=score,
        quality_columns=("accuracy",),
        runs_code=False,
        config=NAME,
        source="a JSONL written by the test",
        local_format="JSONL: uid, word",
    )
    register_dataset(spec, conf_dir=conf)
    try:
        yield conf, scored
    finally:
        unregister_dataset(spec.name)


def _overrides(conf: Path) -> list[str]:
    return [*TINY, "dataset.limit=2", f"dataset={NAME}", f"hydra.searchpath=[file://{conf}]"]


def test_a_test_only_dataset_runs_a_cell_and_fills_its_quality_column(compose_cfg, tmp_path, toy_dataset):
    conf, scored = toy_dataset
    overrides = _overrides(conf)
    outcome = run_cell(compose_cfg([*overrides, f"output_root={tmp_path / 'runs'}"]))
    rows = load_rows(outcome.cell_dir)
    assert set(rows["dataset"]) == {NAME} and sorted(set(rows["sample_id"])) == ["a", "b"]
    assert rows["error"].isna().all()
    assert rows["accuracy"].notna().all() and rows["passed"].isna().all() and rows["rouge1"].isna().all()
    # The scorer saw every arm's decoded answer, and its column reached each arm's summary.
    assert sorted(scored) == sorted(zip(rows["sample_id"], rows["output_text"], strict=True))
    for arm in ("ar", "lookahead"):
        assert "accuracy" in outcome.summary["arms"][arm]


def test_the_plan_refuses_a_code_dataset_without_a_sandbox(compose_cfg, tmp_path, toy_dataset, monkeypatch):
    from lade_bench.sandbox import bubblewrap

    conf, _ = toy_dataset
    monkeypatch.setattr(bubblewrap, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    cfg = compose_cfg([*_overrides(conf), f"output_root={tmp_path / 'runs'}"])
    assert plan_cell(cfg).dataset_spec.name == NAME  # runs no code: no sandbox needed
    # The same dataset declaring that its answers run as code: refused before any model loads.
    code_spec = dataclasses.replace(unregister_dataset(NAME), runs_code=True, code=CodeAnswer(continues_prefix=False))
    register_dataset(code_spec, conf_dir=conf)
    with pytest.raises(CellConfigError, match=rf"dataset '{NAME}' runs the generated code: .*bwrap"):
        plan_cell(cfg)


def test_a_scorer_that_reads_the_ending_is_told_which_outputs_the_cap_cut(compose_cfg, tmp_path, toy_dataset):
    # Issue 63: a final-answer scorer must know an output cut at max_new_tokens (no credit from its last
    # number); the runner tells it from the row's own at_cap, for every arm.
    conf, _ = toy_dataset
    told: list[tuple[str, bool]] = []

    def score(answer: str, sample: Sample, allow_unsandboxed: bool, *, ended: bool) -> dict[str, Any]:
        told.append((answer, ended))
        return {"accuracy": float(ended)}

    register_dataset(dataclasses.replace(unregister_dataset(NAME), scorer=score, reads_ending=True), conf_dir=conf)
    overrides = [*_overrides(conf), "max_new_tokens=6", f"output_root={tmp_path / 'runs'}"]
    rows = load_rows(run_cell(compose_cfg(overrides)).cell_dir)
    assert rows["at_cap"].any()  # the tiny model's gibberish runs to a 6-token cap
    assert sorted(told) == sorted(zip(rows["output_text"], ~rows["at_cap"].astype(bool), strict=True))
    assert rows["accuracy"].tolist() == (~rows["at_cap"].astype(bool)).astype(float).tolist()
