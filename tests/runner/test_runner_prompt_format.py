"""The prompt format as a cell setting (issue 63): a base model's ``model.completion_format`` (cued in the
shipped base-model configs, plain in recorded ones), refused in one line before any model loads when it
is no format, in the cell id only away from plain (every committed cell keeps its id), and on every row
(``prompt_format``, schema 13; older rows read null). A real command-line cell renders its prompts cued."""

from __future__ import annotations

import logging

import pytest
from omegaconf import OmegaConf

from lade_bench.datasets import load_dataset_samples, render_prompt
from lade_bench.models.loading import load_tokenizer
from lade_bench.results import SCHEMA_VERSION, load_rows
from lade_bench.results.schema import COLUMNS_BY_NAME, upgrade_row
from lade_bench.runner.job import CONFIG_ERROR_EXIT, run_job
from lade_bench.runner.plan import plan_cell
from lade_bench.runner.rows import identity

from ..results.results_helpers import make_row
from .conftest import TINY

BASE = [*TINY, "model.chat=false"]


def test_the_shipped_base_models_are_cued_and_chat_models_chat(compose_cfg, tmp_path):
    for model in ("gemma3_270m", "llama_68m", "llama_160m"):
        assert compose_cfg([f"model={model}"]).model.completion_format == "cued"
    chat = plan_cell(compose_cfg([*TINY, f"output_root={tmp_path}"]))
    assert chat.model.prompt_format == "chat" and "completion_format" not in chat.semantic["model"]


def test_a_bad_completion_format_is_refused_in_one_line_before_any_model_loads(compose_cfg, caplog, tmp_path):
    cfg = compose_cfg([*BASE, "model.completion_format=fancy", f"output_root={tmp_path / 'runs'}"])
    with caplog.at_level(logging.INFO, logger="lade_bench"), pytest.raises(SystemExit) as exited:
        run_job(cfg)
    assert exited.value.code == CONFIG_ERROR_EXIT
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert errors == ["model.completion_format='fancy' is not a completion format; use one of ['cued', 'plain']"]
    assert "loading model" not in caplog.text and not (tmp_path / "runs").exists()


def test_the_format_enters_the_id_only_away_from_plain_and_every_row(compose_cfg, tmp_path):
    def plan(*overrides):
        return plan_cell(compose_cfg([*BASE, f"output_root={tmp_path}", *overrides]))

    plain, cued = plan("model.completion_format=plain"), plan("model.completion_format=cued")
    # A config recorded before the setting (every committed cell's) lacks the key: the same cell as plain.
    recorded = OmegaConf.to_container(plain.cfg)
    del recorded["model"]["completion_format"]
    old = plan_cell(OmegaConf.create(recorded))
    assert old.cell_id == plain.cell_id and "completion_format" not in plain.semantic["model"]
    assert cued.cell_id != plain.cell_id and cued.semantic["model"]["completion_format"] == "cued"
    assert (old.model.prompt_format, plain.model.prompt_format, cued.model.prompt_format) == ("plain", "plain", "cued")
    assert identity(cued, "81", 0, "ar", 0, 1)["prompt_format"] == "cued"
    # A chat model's format is its template whatever the completion setting says: one cell.
    chat = [
        plan_cell(compose_cfg([*TINY, f"output_root={tmp_path}", f"model.completion_format={f}"]))
        for f in ("cued", "plain")
    ]
    assert chat[0].cell_id == chat[1].cell_id


def test_rows_written_before_the_column_read_null():
    assert SCHEMA_VERSION >= 13 and COLUMNS_BY_NAME["prompt_format"].added_in == 13
    old = {k: v for k, v in make_row(sample_id="s0").items() if k != "prompt_format"}
    assert upgrade_row(old)["prompt_format"] is None


def test_from_the_command_line_a_base_model_cell_is_prompted_cued(run_cli, tmp_path, compose_cfg):
    done = run_cli(*BASE, "model.completion_format=cued", "arms=[ar,prompt_lookup]")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = load_rows(next((tmp_path / "runs").rglob("rows.parquet")).parent)
    assert set(rows["prompt_format"]) == {"cued"}
    # The prompt each row records the length of is the cued one (turn 1: the question after its label, the cue).
    cfg = compose_cfg([*BASE, f"output_root={tmp_path}"])
    tokenizer = load_tokenizer(cfg.model, cache_dir=cfg.model_cache_dir)
    sample = load_dataset_samples("mt_bench", limit=1)[0]
    cued = render_prompt(tokenizer, sample, 0, [], chat=False, completion_format="cued")
    plain = render_prompt(tokenizer, sample, 0, [], chat=False, completion_format="plain")
    first = rows[(rows["turn"] == 0) & (rows["arm"] == "ar")]
    assert first["prompt_tokens"].tolist() == [len(cued)] and len(cued) > len(plain)
    assert tokenizer.decode(cued, skip_special_tokens=True).endswith("\n\nAnswer:")
