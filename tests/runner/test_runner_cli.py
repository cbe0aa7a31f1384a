"""The user's exact commands: sweeps, resume after SIGKILL, SmolLM2, bad input.

Forked from the CLI server (cli_server.py: the CLI's own code from Hydra's entry point on, the
interpreter's start and imports paid once); the refusals that depend on what the process imports (or on
variables read at import time) run a real ``python -m lade_bench.run``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from lade_bench.results import load_rows, read_index, scan_rows_jsonl

from .conftest import QUIET, TINY

pytestmark = pytest.mark.slow


def test_ablation_wg_sweep_runs_end_to_end_with_its_sinks_and_resumes(run_cli, tmp_path):
    # The real sinks of a sweep too: one offline W&B run per cell, and the device curve once per sweep.
    sinks = ["wandb.mode=offline", "device_profile.warmup=0", "device_profile.repeats=1"]
    tiny = [a for a in TINY if a not in QUIET]
    args = ["+sweep=ablation_wg", *tiny, *sinks, "lookahead.window=1,3", "lookahead.guesses=1"]
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    sweep_root = tmp_path / "runs" / "ablation_wg"
    index = read_index(sweep_root)
    assert len(index) == 2 and all(entry["status"] == "done" for entry in index)
    assert {entry["lookahead.window"] for entry in index} == {1, 3}
    assert all(entry["lookahead.guesses"] == 1 and entry["lookahead.ngram"] == 5 for entry in index)
    assert (sweep_root / "index.parquet").is_file()
    for entry in index:
        cell_dir = sweep_root / entry["cell_dir"]
        for name in ("rows.parquet", "summary.json", "manifest.json", "config.yaml"):
            assert (cell_dir / name).is_file(), name
        rows = load_rows(cell_dir)
        # MT-Bench: one question, two turns, both arms each
        assert sorted(zip(rows["turn"], rows["arm"], strict=True)) == [
            (0, "ar"),
            (0, "lookahead"),
            (1, "ar"),
            (1, "lookahead"),
        ]
        assert entry["summary.arms.lookahead.speedup"] > 0
        assert entry["summary.arms.lookahead.matches_ar"] == 1.0
    assert first.stdout.count("results: ") == 2
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "multirun").exists()
    (path,) = (sweep_root / "device_profiles").glob("*.json")  # one model: one profile key
    profile = json.loads(path.read_text())
    assert len(profile["token_counts"]) == len(profile["forward_time_s"]) > 2
    assert profile["model"] == "tiny-llama" and profile["dtype"] == "float64"
    assert len(list((sweep_root / "wandb").glob("offline-run-*"))) == 2
    assert "wandb sync" in first.stdout + first.stderr

    again = run_cli(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (again.stdout + again.stderr).count("already done, skipped") == 2
    # Skipped without work, whatever the machine's load: no model loaded, no row generated.
    assert "rows to generate" not in again.stdout + again.stderr
    assert "loading model" not in again.stdout + again.stderr
    for entry in index:
        assert len(load_rows(sweep_root / entry["cell_dir"])) == 4


def test_sigkill_mid_cell_then_rerun_completes(run_cli, cli_server, tmp_path):
    # W&B and the device profile off: a kill during their steps has its own tests
    # (test_runner_kill_finalisation, test_runner_damage); this one is about the rows.
    args = ["model=tiny_llama", "device=cpu", "dataset.limit=4", "max_new_tokens=32", *QUIET]
    process = cli_server.start([*args, f"output_root={tmp_path / 'runs'}"], cwd=tmp_path, output=Path(os.devnull))
    try:
        deadline = time.monotonic() + 120
        rows_file = None
        while time.monotonic() < deadline and process.poll() is None:
            found = list((tmp_path / "runs" / "single").glob("*/rows.jsonl"))
            if found and scan_rows_jsonl(found[0]).rows:
                rows_file = found[0]
                break
            time.sleep(0.02)
        assert rows_file is not None and process.poll() is None, "the run ended before it could be killed"
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
    survived = scan_rows_jsonl(rows_file).rows  # readable after the kill
    assert 1 <= len(survived) < 16
    assert read_index(tmp_path / "runs" / "single")[0]["status"] == "running"

    rerun = run_cli(*args)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = load_rows(rows_file.parent)
    keys = list(zip(rows["sample_id"], rows["turn"], rows["arm"], rows["repeat"], strict=True))
    assert len(keys) == len(set(keys)) == 4 * 2 * 2
    by_key = rows.set_index(["sample_id", "turn", "arm"])
    for row in survived:
        assert by_key.loc[(row["sample_id"], row["turn"], row["arm"]), "wall_time_s"] == row["wall_time_s"]
    assert read_index(tmp_path / "runs" / "single")[0]["status"] == "done"


def test_default_command_on_smollm2_matches_ar(run_cli, tmp_path):
    # The default command (embedded SmolLM2, MT-Bench, greedy), shortened to one question and 8 tokens
    # (the plumbing of the default model; its exactness over prompts and shapes is tests/models/test_embedded).
    # A generous limit: the embedded model's first conversion and a loaded machine can take minutes.
    result = run_cli("dataset.limit=1", "max_new_tokens=8", "warmup_new_tokens=4", *QUIET, timeout=1200)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = load_rows(tmp_path / "runs" / "single")
    assert set(rows["model"]) == {"smollm2-135m-instruct"} and len(rows) == 4
    lookahead = rows[rows["arm"] == "lookahead"]
    assert lookahead["matches_ar"].astype(bool).all()
    assert rows["new_tokens"].min() > 0
    assert "results: " in result.stdout and "speedup" in result.stdout
    assert "=AR" in result.stdout and "100%" in result.stdout


def test_a_bad_value_exits_cleanly_before_loading(run_cli, tmp_path):
    # Through the real command line: Hydra's entry point, exit status 2, one line, no traceback. The
    # other bad values go through the same job function in-process (test_runner_job_errors).
    # PYTHONPROFILEIMPORTTIME (python -X importtime) lists every module the process imported: a refused
    # command must not pay for torch and transformers (about 6 of its 7 CPU-seconds).
    result = run_cli(*TINY, "lookahead.ngram=1", env={"PYTHONPROFILEIMPORTTIME": "1"})
    output = result.stdout + result.stderr
    assert result.returncode == 2
    assert "ngram (N)=1 is not allowed: use an integer >= 2" in output
    assert "loading model" not in output and "Traceback" not in output
    listing = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    imported = {line.rsplit("|", 1)[-1].strip() for line in listing}
    assert "omegaconf" in imported  # the listing is there, so the next check means something
    assert not imported & {"torch", "transformers"}
    assert not list((tmp_path / "runs").glob("single/*/rows.jsonl"))


def test_unreachable_hub_dataset_says_how_to_use_a_local_copy(run_cli, tmp_path):
    # The hub client reads these at import time; an empty HF_HOME means no cached copy either.
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    result = run_cli(*TINY, "dataset=gsm8k", env=offline)
    output = result.stdout + result.stderr
    assert result.returncode == 2
    assert "cannot load dataset 'gsm8k'" in output and "dataset.path=" in output
    assert "loading model" not in output


def test_a_hub_model_offline_fails_the_cell_and_leaves_no_wandb_run(run_cli, tmp_path):
    # Issue 64: +sweep=ablation_wg's own model (meta-llama/Llama-2-7b-chat-hf on the hub) cannot be had
    # offline. The cell fails as it loads its model; with real offline W&B, a cell that never loaded its
    # model must leave no W&B run (nor a record of one): nothing to sync for a cell that never ran.
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    args = ["+sweep=ablation_wg", "lookahead.window=1", "lookahead.guesses=1", "dataset.limit=1", "device=cpu"]
    result = run_cli(*args, "wandb.mode=offline", env=offline)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "cannot load model 'llama2-7b-chat'" in output and "Traceback" not in output
    sweep_root = tmp_path / "runs" / "ablation_wg"
    (entry,) = read_index(sweep_root)
    assert entry["status"] == "failed" and "cannot load model" in entry["error"]  # the status still says why
    assert list(sweep_root.rglob("offline-run-*")) == [] and list(sweep_root.rglob("wandb_run.json")) == []
    assert "wandb sync" not in output
