"""Multi-device cells: torchrun end to end (lookahead parallelism + tensor-parallel AR on 2 gloo ranks),
and the checks that refuse a bad multi-device config before anything loads (SmolLM2's 9 heads and 2 ranks)."""

from __future__ import annotations

import json
import os

import pytest
import torch
from transformers import AutoTokenizer

from lade_bench.decoding.lookahead.parallel import LookaheadParallelError
from lade_bench.methods import PIPELINE_PARALLEL, methods_where
from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.models.loading import TensorParallelError, load_tensor_parallel
from lade_bench.models.tiny import tiny_model
from lade_bench.report.figures import speedup_vs_devices
from lade_bench.report.sweep import load_sweep
from lade_bench.results import load_rows, read_index, scan_rows_jsonl
from lade_bench.runner import execute as execute_module
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.plan import CellConfigError
from lade_bench.runner.ranks import RanksError, join_ranks

from .conftest import QUIET, TINY


def _tiny_checkpoint(folder):
    """The runner's tiny llama (SmolLM2 tokenizer, float64) saved as a checkpoint, which tensor
    parallelism loads from (``model.source=hf``): 4 heads and 2 key/value heads split over 2 ranks."""
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2_dir())
    model = tiny_model("llama", vocab_size=len(tokenizer), max_positions=4096, seed=0, init_scale=3.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_torchrun_cell_runs_lookahead_parallel_and_tensor_parallel_ar_exactly(tmp_path, cli_server):
    """The documented command on 2 gloo ranks: both multi-device arms equal AR; only rank 0 wrote,
    and the manifest names the ranks."""
    runs = tmp_path / "runs"
    checkpoint = _tiny_checkpoint(tmp_path / "tiny-llama-checkpoint")
    # `python -m torch.distributed.run ...`: the launcher forked from the CLI server (torch imported once);
    # its two ranks are processes of their own, as torchrun starts them.
    args = [
        "--standalone", "--nproc-per-node", "2", "-m", "lade_bench.run",
        "model=tiny_llama", "model.source=hf", f"model.name_or_path={checkpoint}", "dtype=float64",
        "lookahead.devices=2", "lookahead.window=3", "arms=[ar,lookahead,ar_tp]",
        "dataset.limit=1", "max_new_tokens=12", "warmup=0", "distributed.timeout_s=120",
        f"output_root={runs}", *QUIET,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    result = cli_server.run(args, cwd=tmp_path, env=env, module="torch.distributed.run", timeout=400)
    assert result.returncode == 0, result.stderr[-4000:]

    sweep = runs / "single"
    (entry,) = read_index(sweep)
    assert entry["status"] == "done" and entry["devices"] == 2
    cell = sweep / entry["cell_dir"]
    assert cell.name.startswith("tiny-llama-mt_bench-N5W3G7ref-greedy-2dev-")
    rows = load_rows(cell)
    assert sorted(rows["arm"]) == ["ar", "ar", "ar_tp", "ar_tp", "lookahead", "lookahead"]  # 2 turns
    assert rows["error"].isna().all()
    others = rows[rows["arm"] != "ar"]
    assert others["matches_ar"].all()
    assert (others["new_tokens"] == 12).all()
    assert rows[rows["arm"] == "lookahead"]["accept_lengths"].map(max).max() > 1  # guesses were accepted
    manifest = json.loads((cell / "manifest.json").read_text())
    assert manifest["parallel"] == {"world_size": 2, "backend": "gloo"}
    # Rank 1 wrote nothing into the output tree: one Hydra folder, one run log.
    assert len(list((sweep / "_hydra").iterdir())) == 1
    assert len(list((cell / "logs").iterdir())) == 1
    assert not list(tmp_path.glob("multirun.yaml")) and not list(tmp_path.glob("outputs"))

    # The report's scaling figure draws both arms at 2 devices from these real rows.
    figure = speedup_vs_devices(load_sweep(sweep))
    lines = {line.get_label(): list(line.get_xdata()) for line in figure.axes[0].get_lines()}
    assert lines["LP: lookahead parallelism"] == [2] and lines["TP: tensor-parallel AR"] == [2]


def test_devices_enter_the_cell_id_only_above_one(compose_cfg):
    """Cells recorded before lookahead parallelism existed keep their ids (and resume): the ``devices``
    entry of the cell-id compatibility table (``runner/id_compat.py``)."""
    single = plan_cell(compose_cfg(TINY))
    assert "devices" not in single.semantic and "devices" not in single.semantic["lookahead"]
    double = plan_cell(compose_cfg([*TINY, "lookahead.devices=2"]))
    assert double.semantic["devices"] == 2 and double.cell_id != single.cell_id
    assert double.cell_dir.name.endswith(f"-2dev-{double.cell_id}")


def _uses_devices(method) -> bool:
    """The methods that use a cell's ranks: those on every rank and pipeline-parallel AR's role."""
    return method.every_rank or PIPELINE_PARALLEL in method.models


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["lookahead.devices=0"], "lookahead.devices=0 is not allowed: use an integer >= 1"),
        (["lookahead.devices=2", "arms=[ar]"], f"used only by the arms {list(methods_where(_uses_devices))}"),
        (["arms=[ar,ar_tp]"], "the ar_tp arm (tensor-parallel AR) needs lookahead.devices >= 2"),
        (["arms=[ar,ar_tp]", "lookahead.devices=2"], "a tiny random model has not; use model=smollm2"),
        (["lookahead.devices=2", "lookahead.verification=trie"], "'trie' is not supported with lookahead.devices=2"),
    ],
)
def test_bad_multi_device_configs_are_refused_by_the_plan(compose_cfg, overrides, message):
    with pytest.raises(CellConfigError) as info:
        plan_cell(compose_cfg([*TINY, *overrides]))
    assert message in str(info.value)


def test_devices_must_match_the_processes_torchrun_launched(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with pytest.raises(RanksError, match=r"lookahead.devices=2 but 1 process\(es\) were launched .*"
                       r"torchrun --nproc-per-node 2 -m lade_bench.run"):  # fmt: skip
        join_ranks(2, torch.device("cpu"), timeout_s=5)
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(RanksError, match="lookahead.devices=1 but 4 process"):
        join_ranks(1, torch.device("cpu"), timeout_s=5)


def test_tensor_parallel_refuses_a_split_of_attention_heads(compose_cfg):
    """SmolLM2's 9 heads cannot go to 2 ranks: refused before any weight is loaded or any group joined."""
    cfg = compose_cfg(["model=smollm2"])
    with pytest.raises(TensorParallelError, match="9 attention heads and 3 key/value heads cannot be split over 2"):
        load_tensor_parallel(cfg.model, torch.float32, "sdpa", 2, cache_dir=cfg.model_cache_dir)


def test_a_failed_exchange_between_ranks_ends_the_cell_leaving_whole_rows(compose_cfg, tmp_path, monkeypatch):
    """LookaheadParallelError is not recorded as an error row (the ranks are out of step): the cell
    fails, rows already on disk are whole (sample, turn) groups, and a rerun completes it."""
    cfg = compose_cfg([*TINY, "dataset.limit=2", "warmup=0", f"output_root={tmp_path}"])
    original = execute_module.generate
    calls = {"lookahead": 0}

    def peer_lost_on_third_lookahead(arm, *args, **kwargs):
        if arm == "lookahead":
            calls["lookahead"] += 1
            if calls["lookahead"] == 3:
                raise LookaheadParallelError("rank 0/2: all_gather #7 of a parallel lookahead generation failed")
        return original(arm, *args, **kwargs)

    monkeypatch.setattr(execute_module, "generate", peer_lost_on_third_lookahead)
    with pytest.raises(LookaheadParallelError):
        run_cell(cfg)
    plan = plan_cell(cfg)
    (entry,) = read_index(plan.sweep_root)
    assert entry["status"] == "failed" and entry["error"].startswith("LookaheadParallelError: rank 0/2")
    assert not (plan.cell_dir / "summary.json").exists()
    rows = scan_rows_jsonl(plan.cell_dir / "rows.jsonl").rows
    assert len(rows) == 4 and all(row["error"] is None for row in rows)  # two whole (sample, turn) groups

    monkeypatch.setattr(execute_module, "generate", original)
    outcome = run_cell(cfg)
    assert outcome.status == "done" and outcome.rows_appended == 4
