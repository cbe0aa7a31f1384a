"""A cell is what it says it ran on: its dataset file and samples are recorded and checked on every resume.

The cell id names a local dataset file by its name only (so committed cells keep their ids); what was
read is recorded in the manifest (``inputs``) and a rerun on another file of that name, the same lines
in another order, or changed questions under the same ids is refused before the model loads, with the
cell's files untouched. A cell that already mixes samples is never shown or skipped as done.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lade_bench.results import load_rows
from lade_bench.results.progress import sweep_progress
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.cell_inputs import CellInputsChangedError
from lade_bench.runner.plan import CellConfigError

from .conftest import FIXTURE_DATA, TINY, interrupt_generation_after
from .test_runner_finalisation import forbid_model_loading

RECORDS = [json.loads(line) for line in (FIXTURE_DATA / "spec_bench_sample.jsonl").read_text().splitlines()]
# The tiny llama in float64, four tokens: the check runs before any model, the model is only the cell's.
ARGS = [*[a for a in TINY if not a.startswith(("dataset.limit", "max_new_tokens"))], "max_new_tokens=4", "warmup=0"]
ARGS += ["dataset=spec_bench"]


def _write(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _cell_files(cell_dir: Path) -> dict[str, bytes]:
    return {name: (cell_dir / name).read_bytes() for name in ("rows.jsonl", "manifest.json", "config.yaml")}


@pytest.fixture
def interrupted(compose_cfg, tmp_path, monkeypatch):
    """(cfg of a cell on a 3-question file, its plan) after a kill once two of its rows were written."""
    data = _write(tmp_path / "data" / "question.jsonl", RECORDS)
    cfg = compose_cfg([*ARGS, f"dataset.path={data}", f"output_root={tmp_path / 'runs'}"])
    interrupt_generation_after(monkeypatch, 2, lambda: run_cell(cfg))  # question 9001's ar and lookahead rows
    plan = plan_cell(cfg)
    assert len(load_rows(plan.cell_dir, verify=False)) == 2
    return data, plan


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            "reversed",
            r"loaded sample ids are the same samples in another order \(position 0: '\S+9001' then, '\S+9003'",
        ),
        ("subset", r"the loaded sample ids differ \(3 recorded, 1 now; gone: \['\S+9002', '\S+9003'\]\)"),
        ("edited", r"the samples' content \(turns, references\) differs"),
    ],
)
def test_a_resume_on_other_samples_is_refused_before_the_model_loads(
    interrupted, compose_cfg, tmp_path, monkeypatch, change, message
):
    data, plan = interrupted
    before = _cell_files(plan.cell_dir)
    if change == "reversed":
        _write(data, RECORDS[::-1])
    elif change == "subset":
        _write(data, RECORDS[:1])
    else:
        _write(data, [{**RECORDS[0], "turns": ["Translate German to English: Die Katze schläft ."]}, *RECORDS[1:]])
    forbid_model_loading(monkeypatch)
    cfg = compose_cfg([*ARGS, f"dataset.path={data}", f"output_root={tmp_path / 'runs'}"])
    assert plan_cell(cfg).cell_id == plan.cell_id  # the id names the file by name: the same cell
    with pytest.raises(CellInputsChangedError, match=message) as refused:
        run_cell(cfg)
    assert f"mv '{plan.cell_dir}' '{plan.cell_dir}.old'" in str(refused.value)
    assert _cell_files(plan.cell_dir) == before  # nothing rewritten: not the rows, manifest or config


def test_the_record_names_the_content_and_the_same_file_elsewhere_resumes(interrupted, compose_cfg, tmp_path):
    data, plan = interrupted
    manifest = json.loads((plan.cell_dir / "manifest.json").read_text())
    inputs = manifest["inputs"]
    ids = [f"translation-{r['question_id']}" for r in RECORDS]
    assert inputs["sample_ids"] == ids
    assert inputs["dataset_file"]["path"] == str(data) and len(inputs["dataset_file"]["sha256"]) == 64
    assert manifest["samples"]["kept_ids"] == ids
    moved = _write(tmp_path / "elsewhere" / "question.jsonl", RECORDS)  # same name and bytes, another folder
    outcome = run_cell(compose_cfg([*ARGS, f"dataset.path={moved}", f"output_root={tmp_path / 'runs'}"]))
    assert outcome.status == "done" and outcome.rows_appended == 4
    assert len(load_rows(plan.cell_dir)) == 6


def test_same_ids_with_other_content_are_refused_even_without_a_file(interrupted, compose_cfg, tmp_path):
    # A wheel or hub dataset has no file of ours to hash: the samples' own digest still tells.
    data, plan = interrupted
    manifest_path = plan.cell_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["inputs"]["dataset_file"] = None
    manifest["inputs"]["samples_sha256"] = "0" * 64
    manifest_path.write_text(json.dumps(manifest))
    cfg = compose_cfg([*ARGS, f"dataset.path={data}", f"output_root={tmp_path / 'runs'}"])
    with pytest.raises(CellInputsChangedError, match="the samples' content .* differs"):
        run_cell(cfg)


def test_an_edited_recorded_order_is_refused_not_overwritten(compose_cfg, tmp_path, monkeypatch):
    # A stateful arm's states follow method_state.sample_order; editing it (or a manifest written before
    # the inputs record, which holds only that order) must not pass silently.
    data = _write(tmp_path / "data" / "question.jsonl", RECORDS)
    tree = ["token_recycling.top_k=2", "token_recycling.tree=[[0],[1],[0,0]]"]
    cfg = compose_cfg([*ARGS, "arms=[ar,token_recycling]", *tree, f"dataset.path={data}", f"output_root={tmp_path}"])
    interrupt_generation_after(monkeypatch, 2, lambda: run_cell(cfg))
    plan = plan_cell(cfg)
    manifest_path = plan.cell_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["inputs"]  # as a manifest written before the record existed
    order = manifest["method_state"]["sample_order"]
    manifest["method_state"]["sample_order"] = [order[1], order[0], order[2]]
    manifest_path.write_text(json.dumps(manifest))
    edited = manifest_path.read_bytes()
    forbid_model_loading(monkeypatch)
    with pytest.raises(CellInputsChangedError, match="sample order of the stateful arms are the same samples"):
        run_cell(cfg)
    assert manifest_path.read_bytes() == edited


def test_a_finished_cell_on_another_file_is_refused_not_skipped(compose_cfg, tmp_path, monkeypatch):
    data = _write(tmp_path / "data" / "question.jsonl", RECORDS[:1])
    cfg = compose_cfg([*ARGS, f"dataset.path={data}", f"output_root={tmp_path}"])
    assert run_cell(cfg).status == "done"
    forbid_model_loading(monkeypatch)
    _write(data, RECORDS)
    with pytest.raises(
        CellInputsChangedError, match=r"cannot resume: the loaded sample ids differ \(1 recorded, 3 now"
    ):
        run_cell(cfg)
    # The same question with a field no sample reads: the samples are the same, the file is not.
    _write(data, [{**RECORDS[0], "note": "edited"}])
    with pytest.raises(CellInputsChangedError, match="cannot resume: dataset file .* has sha256 .* the cell ran on"):
        run_cell(cfg)
    _write(data, RECORDS[:1])
    assert run_cell(cfg).status == "skipped"


def test_a_cell_holding_rows_of_samples_it_did_not_keep_is_never_done(compose_cfg, tmp_path, monkeypatch):
    # Such a cell was made before resumes were checked (or by hand): status must not call it done, the
    # runner must not skip or repair it as if it were, and readers refuse it.
    data = _write(tmp_path / "data" / "question.jsonl", RECORDS[:1])
    cfg = compose_cfg([*ARGS, f"dataset.path={data}", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    rows_path = outcome.cell_dir / "rows.jsonl"
    foreign = [json.loads(line) for line in rows_path.read_text().splitlines()]
    with rows_path.open("a") as handle:
        for row in foreign:
            handle.write(json.dumps({**row, "sample_id": "translation-9002"}) + "\n")
    (cell,) = sweep_progress(tmp_path / "single").cells
    assert cell.state == "damaged"
    assert "more than the 2 its manifest expects" in cell.error and "not repairable" in cell.error
    forbid_model_loading(monkeypatch)
    with pytest.raises(CellConfigError, match="cannot be used: .*move the cell folder aside"):
        run_cell(cfg)
    manifest_path = outcome.cell_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["rows_expected"] = 4  # the count alone cannot hide rows of a sample the cell did not keep
    manifest_path.write_text(json.dumps(manifest))
    (cell,) = sweep_progress(tmp_path / "single").cells
    assert (
        cell.state == "damaged"
        and "rows of 1 sample(s) its manifest did not keep (e.g. ['translation-9002'])" in cell.error
    )


def test_from_the_command_line_a_resume_on_a_reordered_file_is_refused_in_one_line(interrupted, tmp_path, cli_server):
    # As a user meets it: a cell cut short after two rows (in-process: the kill itself is
    # test_runner_cli's), the file rewritten in another order, then the same command line.
    data, plan = interrupted
    before = _cell_files(plan.cell_dir)
    _write(data, RECORDS[::-1])
    args = [*ARGS, f"dataset.path={data}", f"output_root={tmp_path / 'runs'}"]
    refused = cli_server.run(args, cwd=tmp_path, timeout=300)
    output = refused.stdout + refused.stderr
    assert refused.returncode == 2, output[-2000:]
    errors = [line for line in output.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and f"cell {plan.cell_id} cannot resume" in errors[0], output[-2000:]
    assert "another order" in errors[0]
    assert "Traceback" not in output and "loading model" not in output
    assert _cell_files(plan.cell_dir) == before
    (cell,) = sweep_progress(plan.sweep_root).cells
    assert cell.state != "done"


def test_an_unknown_category_is_refused_by_the_plan(compose_cfg, tmp_path):
    cfg = compose_cfg(
        [*ARGS, f"dataset.path={FIXTURE_DATA / 'spec_bench_sample.jsonl'}", "dataset.categories=[poetry]"]
    )
    with pytest.raises(CellConfigError, match=r"unknown category \['poetry'\]; allowed: .*translation"):
        plan_cell(cfg)
