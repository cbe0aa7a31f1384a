"""The GPU check: its plumbing on the CPU, its refusal without CUDA, and (with -m gpu) the real run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.gpu_check.__main__ import main
from lade_bench.gpu_check.stages import (
    MODEL_NAMES,
    PRESET_NAMES,
    build_arms,
    method_settings,
    model_facts,
    notes,
    other_methods,
    presets,
    prompts_as_chat,
    stage_plan,
)
from lade_bench.methods import get_method
from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.rest_datastore.reference import ensure_reference_datastore
from lade_bench.runner import register_configs

REPO = Path(__file__).resolve().parents[2]


def test_presets_and_prompting_are_what_hydra_composes():
    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
        for name, params in presets().items():
            lookahead = compose("config", overrides=[f"lookahead={name}"]).lookahead
            composed = {key: lookahead[key] for key in ("ngram", "window", "guesses", "prompt_as_reference")}
            assert composed == {key: getattr(params, key) for key in composed}
            assert lookahead.verification == params.verification and lookahead.devices == 1
        for model in MODEL_NAMES:
            assert compose("config", overrides=[f"model={model}"]).model.chat is prompts_as_chat(model)
    assert set(presets()) == set(PRESET_NAMES) and prompts_as_chat("smollm2") != prompts_as_chat("gemma3_270m")


def test_the_time_budget_is_shared_by_work():
    plan = stage_plan(["float16", "bfloat16"], 256, 128)
    assert [s["dtype"] for s in plan] == ["float16", "bfloat16"]
    # float16: AR, every other one-model method and three presets x 256 tokens; bfloat16: AR and paper_7b x 128.
    others = other_methods()
    assert {"prompt_lookup", "token_recycling"} <= set(others) and not {"ar", "lookahead", "assisted"} & set(others)
    assert plan[0]["work"] == (4 + len(others)) * 256 and plan[1]["work"] == 2 * 128
    assert plan[0]["others"] and not plan[1]["others"] and list(plan[1]["presets"]) == ["paper_7b"]
    assert not plan[0]["flex_attention"]
    # The flex_attention arm runs in the first stage only, one more arm's work.
    flex = stage_plan(["float16", "bfloat16"], 256, 128, flex_attention=True)
    assert flex[0]["flex_attention"] and not flex[1]["flex_attention"]
    assert flex[0]["work"] == (5 + len(others)) * 256 and flex[1]["work"] == 2 * 128
    # The compiled pair (AR and lookahead, compiled) runs in the first stage only: two more arms.
    pair = stage_plan(["float16", "bfloat16"], 256, 128, compiled=True)
    assert pair[0]["compiled"] and not pair[1]["compiled"]
    assert pair[0]["work"] == (6 + len(others)) * 256 and pair[1]["work"] == 2 * 128


def test_the_compiled_pair_is_compiled_ar_and_compiled_lookahead_and_exact():
    from lade_bench.gpu_check.stages import compiled_arms
    from lade_bench.models.tiny import tiny_model

    model = tiny_model("llama", init_scale=3.0, seed=7, max_positions=1024)
    arms = compiled_arms(model, [], 10, backend="eager")
    assert list(arms) == ["ar", "lookahead paper_7b compiled (5,15,15)"]
    results = [arm([5, 9, 17, 3, 5, 9, 17, 3]) for arm in arms.values()]
    assert results[0].tokens == results[1].tokens
    assert all(r.stats["compile_time_s"] > 0 for r in results)


@pytest.mark.slow
def test_flex_arm_runs_lookahead_on_the_flex_model(monkeypatch):
    import transformers.integrations.flex_attention as hf_flex
    from torch.nn.attention.flex_attention import flex_attention

    from lade_bench.gpu_check.stages import flex_arm
    from lade_bench.models.tiny import tiny_model

    # Eager flex_attention: the check's fused kernel would compile for tens of seconds on a CPU.
    def eager(q, k, v, training=False, **kw):
        return flex_attention(q, k, v, **kw)

    monkeypatch.setattr(hf_flex, "compile_friendly_flex_attention", eager)
    model = tiny_model("llama", init_scale=3.0, seed=7, attn_implementation="flex_attention")
    label, arm = flex_arm(model, [], 8)
    assert label == "lookahead paper_7b flex_attention (5,15,15)"
    result = arm(list(range(3, 30)))
    assert len(result.tokens) == 8 and result.method == "lookahead"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--profile-repeats", "0", "0 is below 1; give an integer >= 1"),
        ("--profile-warmup", "-1", "-1 is below 0; give an integer >= 0"),
        ("--profile-repeats", "x", "invalid integer value: 'x'"),
        ("--prompts", "0", "0 is below 1; give an integer >= 1"),
        ("--max-new-tokens", "-5", "-5 is below 1; give an integer >= 1"),
        ("--exactness-new-tokens", "0", "0 is below 1; give an integer >= 1"),
        ("--warmup", "-1", "-1 is below 0; give an integer >= 0"),
    ],
)
def test_a_bad_count_is_refused_before_any_model_loads(capsys, option, value, message):
    with pytest.raises(SystemExit) as exited:
        main(["--device", "cpu", option, value])
    assert exited.value.code == 2
    assert f"argument {option}: {message}" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown where CUDA is missing")
def test_without_cuda_it_says_so_and_exits_2(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--prompts", "1"])
    assert exited.value.code == 2
    assert "needs an NVIDIA GPU; --device cpu runs the same steps" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="checks the script where no GPU is present")
def test_script_stops_before_installing_anything_without_a_gpu(tmp_path):
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_check.sh"), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "no NVIDIA GPU or driver here" in done.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_cpu_run_writes_the_table_profile_and_margins(tmp_path):
    """The same steps on the CPU (float32 speed stage, float64 exactness stage), SmolLM2, tiny budgets."""
    # One prompt: every arm of the registry runs on it at each dtype, so the cost grows with each method.
    argv = ["--device", "cpu", "--models", "smollm2", "--dtypes", "float32", "float64", "--prompts", "1"]
    # Three tokens (two in the exactness stage): the prefill's and one or two steps of every method's own
    # drafting and verification; each token costs every arm a SmolLM2 step of up to 120 tokens on the CPU.
    argv += ["--max-new-tokens", "3", "--exactness-new-tokens", "2", "--warmup", "0", "--output", str(tmp_path)]
    # The flex_attention arm's CPU kernel compile would dominate; its plumbing has its own test.
    argv += ["--no-flex-attention"]
    # Likewise inductor's compile of the compiled pair (its arms are tested on a tiny model above).
    argv += ["--no-compiled"]
    # One timed pass per token count: the profile's curve is written either way, in a fraction of the passes.
    argv += ["--profile-repeats", "1", "--profile-warmup", "0"]
    # A budget no loaded machine runs out of: this test checks the steps and files, not their speed.
    argv += ["--time-budget-s", "3600"]
    # A model cache of its own: SmolLM2 as converted (linked), and a small reference datastore where
    # REST's default (`rest.datastore: reference`) finds it (scripts/setup.sh builds the real one).
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "smollm2-135m-instruct").symlink_to(converted_smollm2_dir())
    stdlib = Path(sysconfig.get_path("stdlib"))
    ensure_reference_datastore("smollm2", cache, [stdlib / "textwrap.py"])
    argv += ["--cache-dir", str(cache)]
    out = main(argv)
    report = json.loads((out / "gpu_check.json").read_text())
    arms = [(r["dtype"], r["arm"]) for r in report["summary"]]
    assert arms[:2] == [("float32", "ar"), ("float32", "prompt_lookup")]
    assert {arm for dtype, arm in arms if dtype == "float64"} == {"ar", "lookahead paper_7b (5,15,15)"}
    # float32: AR, every other one-model method of the registry, then lookahead at each preset; float64: 2.
    assert len(arms) == 1 + len(other_methods()) + len(PRESET_NAMES) + 2
    assert [arm for dtype, arm in arms[: 1 + len(other_methods())]] == ["ar", *other_methods()]
    assert "rest" in other_methods() and "skipped" not in report["details"]["smollm2"]["float32"]
    assert all(r["engine_errors"] in (None, 0) for r in report["summary"])
    detail = report["details"]["smollm2"]["float32"]
    assert detail["prompts_done"] == 1 and detail["finite_logits"] and not detail["stopped_early"]
    profile = json.loads((out / detail["device_profile"]).read_text())
    assert 120 in profile["token_counts"]  # paper_7b's step width: (15 + 15) x (5 - 1)
    assert (profile["repeats"], profile["warmup"]) == (1, 0)
    assert profile["model"] == "smollm2-135m-instruct"  # the cells' name: python -m lade_bench.predict matches it
    table = (out / "table.md").read_text()
    assert "| smollm2 | float64 | lookahead paper_7b (5,15,15) | 1 |" in table


def test_a_method_whose_resource_is_missing_is_left_out_with_its_reason(tmp_path):
    """REST without the reference datastore in the model cache: not run, and the table's notes say why."""
    facts = model_facts("smollm2", str(tmp_path), torch.device("cpu"))
    settings, why = method_settings(get_method("rest"), facts)
    assert settings["rest"]["datastore"] == "reference"
    assert why is not None and f"build --reference --model smollm2 --cache-dir {tmp_path}" in why
    skipped: dict[str, str] = {}
    arms = build_arms(None, [], 4, {}, others=True, facts=facts, skipped=skipped)
    assert "rest" not in arms and skipped == {"rest": why} and set(arms) == {"ar", *other_methods()} - {"rest"}
    detail = {"stopped_early": False, "finite_logits": True, "mismatches": [], "skipped": skipped}
    assert notes({"smollm2": {"float16": detail}}, 1.0) == [f"smollm2 float16: rest not run: {why}"]
    assert method_settings(get_method("prompt_lookup"), facts) == ({}, None)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_gpu_run_is_exact_within_tolerance(tmp_path):
    out = main(["--prompts", "2", "--max-new-tokens", "32", "--exactness-new-tokens", "32", "--output", str(tmp_path)])
    report = json.loads((out / "gpu_check.json").read_text())
    assert {r["model"] for r in report["summary"]} == set(MODEL_NAMES)
    assert all(r["engine_errors"] in (None, 0) for r in report["summary"])
