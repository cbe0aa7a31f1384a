"""``compile=true``: the plan's refusals, the cell id, one CompiledForwards per cell, the mode in rows and files.

The built-in arms run compiled with ``compile_options.backend=eager`` (dynamo captures the static-shape
graphs and runs them with eager kernels), which keeps the cells cheap; inductor's kernels are tested
with the engine (tests/decoding/test_compiled.py).
"""

from __future__ import annotations

import json

import pytest

from lade_bench.decoding.core.compiled import COMPILE_MODES
from lade_bench.methods import methods_where
from lade_bench.profiling import device_profile
from lade_bench.results import cell_id, load_rows
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY

# The id the TINY cell had before the switch existed: eager cells must keep it to resume (the `compile`
# entry of the cell-id compatibility table, runner/id_compat.py).
TINY_EAGER_CELL_ID = "966c046789a5f56f"


@pytest.fixture
def arms():
    """The registry's own arms (the fixture name is kept for the tests' signatures)."""
    return None


def test_compile_is_off_by_default_and_true_composes_on_the_command_line(compose_cfg, run_cli):
    cfg = compose_cfg([])
    assert cfg.compile is False and (cfg.compile_options.mode, cfg.compile_options.cache_block) == ("auto", 256)
    done = run_cli("--cfg", "job", "compile=true", "compile_options.mode=default")
    assert done.returncode == 0, done.stderr
    assert "compile: true" in done.stdout and "mode: default" in done.stdout


def test_an_eager_cell_keeps_the_cell_id_it_had_before_the_switch(compose_cfg):
    eager = plan_cell(compose_cfg(TINY))
    assert not eager.compiled and eager.compile_mode is None
    assert "compile" not in eager.semantic and "compile_options" not in eager.semantic
    assert eager.cell_id == TINY_EAGER_CELL_ID
    # compile_options mean nothing to an eager cell: changing them does not split it.
    assert plan_cell(compose_cfg([*TINY, "compile_options.cache_block=64"])).cell_id == TINY_EAGER_CELL_ID


def test_a_compiled_cell_has_its_own_id_with_the_mode_resolved_for_the_device(compose_cfg, arms):
    compiled = plan_cell(compose_cfg([*TINY, "compile=true"]))
    assert compiled.compiled and compiled.compile_mode == "default"  # auto on a CPU
    assert compiled.semantic["compile"] is True
    assert compiled.semantic["compile_options"] == {"mode": "default", "cache_block": 256, "backend": "inductor"}
    assert compiled.cell_id not in (TINY_EAGER_CELL_ID, "") and compiled.cell_id == cell_id(compiled.semantic)
    assert compiled.cell_dir.name.endswith(f"-compiled-{compiled.cell_id}")
    # auto and the mode it means here are one experiment; another cache block is another.
    assert plan_cell(compose_cfg([*TINY, "compile=true", "compile_options.mode=default"])).cell_id == compiled.cell_id
    assert plan_cell(compose_cfg([*TINY, "compile=true", "compile_options.cache_block=64"])).cell_id != compiled.cell_id


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["arms=[ar,jacobi]"],
            "compile=true: the jacobi arm has no compiled mode (the arms that can are "
            "['ar', 'lookahead', 'prompt_lookup']); drop jacobi from arms=['ar', 'jacobi'], or set compile=false",
        ),
        (["lookahead.devices=2"], "compile=true runs on one device, not lookahead.devices=2; set lookahead.devices=1"),
        (
            ["attn_implementation=flex_attention", "arms=[ar]"],
            "compile=true cannot use attn_implementation='flex_attention'",
        ),
        (
            ["attn_implementation=flash_attention_2", "arms=[ar]"],
            "cannot use attn_implementation='flash_attention_2' (flex_attention compiles kernels of its own, "
            "flash_attention_2 takes no custom mask); use one of ['sdpa', 'eager'], or compile=false",
        ),
        (
            ["compile_options.mode=fast"],
            f"compile_options.mode='fast' is not allowed: use one of {list(COMPILE_MODES)}",
        ),
        (["compile_options.cache_block=0"], "compile_options.cache_block=0 is not allowed: use an integer >= 1"),
        (
            ["compile_options.backend=tvm"],
            "compile_options.backend='tvm' is not allowed: use one of ['inductor', 'eager']",
        ),
        (["compile_options.mode=reduce-overhead"], "compile_options.mode='reduce-overhead' on cpu: "),
        (["compile_options.mode=max-autotune"], "captures CUDA graphs, which cpu has not"),
    ],
)
def test_a_compiled_cell_that_cannot_compile_is_refused_by_the_plan(compose_cfg, arms, overrides, message):
    with pytest.raises(CellConfigError) as info:
        plan_cell(compose_cfg([*TINY, "compile=true", *overrides]))
    assert message in str(info.value)


def test_the_refusal_lists_the_arms_the_registry_says_can_compile(compose_cfg, arms):
    assert methods_where(lambda m: m.compiles) == ("ar", "lookahead", "prompt_lookup")
    with pytest.raises(CellConfigError, match=r"the assisted arm has no compiled mode"):
        plan_cell(compose_cfg([*TINY, "compile=true", "arms=[ar,lookahead,assisted]"]))


def test_the_same_settings_plan_without_compile(compose_cfg, arms):
    """Each refusal above is the compiled mode's: the eager cell with the same settings plans."""
    for overrides in (["arms=[ar,jacobi]"], ["compile_options.mode=fast"], ["compile_options.mode=max-autotune"]):
        assert not plan_cell(compose_cfg([*TINY, *overrides])).compiled


def test_a_compiled_cell_shares_one_compiled_forwards_and_records_its_mode_and_compile_times(
    compose_cfg, tmp_path, arms
):
    # cache_block=1: every prompt length is a shape of its own, so turn 1 (a longer prompt) is new.
    overrides = [
        *TINY,
        "compile=true",
        "compile_options.cache_block=1",
        "compile_options.backend=eager",
        "arms=[ar,lookahead,prompt_lookup]",
    ]
    outcome = run_cell(compose_cfg([*overrides, "warmup=1", f"output_root={tmp_path}"]))

    rows = load_rows(outcome.cell_dir)
    assert rows["error"].isna().all() and rows["compiled"].all() and set(rows["compile_mode"]) == {"default"}
    # The warm-up compiled turn 0's shapes (same prompt and budget) on the cell's one CompiledForwards,
    # so turn 0's rows paid nothing.
    assert (rows.loc[rows["turn"] == 0, "compile_time_s"] == 0.0).all()
    assert (rows.loc[rows["turn"] == 1, "compile_time_s"] > 0.0).all()
    assert rows.loc[rows["arm"] != "ar", "matches_ar"].all()

    manifest = json.loads((outcome.cell_dir / "manifest.json").read_text())
    assert (manifest["compiled"], manifest["compile_mode"]) == (True, "default")
    assert outcome.summary["mode"] == "compiled (default)"
    turn_1 = rows.loc[(rows["turn"] == 1) & (rows["arm"] == "lookahead"), "compile_time_s"].sum()
    assert outcome.summary["arms"]["lookahead"]["compile_time_s"] == pytest.approx(turn_1)


def test_an_eager_cell_passes_no_compiled_forwards_and_says_eager(compose_cfg, tmp_path, arms):
    outcome = run_cell(compose_cfg([*TINY, "warmup=1", f"output_root={tmp_path}"]))
    rows = load_rows(outcome.cell_dir)
    assert not rows["compiled"].any()
    assert rows["compile_mode"].isna().all() and rows["compile_time_s"].isna().all()
    manifest = json.loads((outcome.cell_dir / "manifest.json").read_text())
    assert (manifest["compiled"], manifest["compile_mode"]) == (False, None)
    assert outcome.summary["mode"] == "eager" and outcome.summary["arms"]["ar"]["compile_time_s"] is None


def test_a_compiled_cell_measures_and_records_a_compiled_device_profile(compose_cfg, tmp_path, monkeypatch):
    # The curve up to 2 tokens plus the cell's step width, not up to 256: each token count is a compile
    # of its own, and what is checked here is the compiled profile's key and record, not its x range.
    full_range = device_profile.default_token_counts
    monkeypatch.setattr(device_profile, "default_token_counts", lambda shapes, largest: full_range(shapes, largest=2))
    overrides = [
        *TINY,
        "compile=true",
        "compile_options.backend=eager",
        "arms=[ar,lookahead]",
        "device_profile.enabled=true",
        "device_profile.repeats=1",
        "device_profile.warmup=0",
        f"output_root={tmp_path}",
    ]
    outcome = run_cell(compose_cfg(overrides))
    manifest = json.loads((outcome.cell_dir / "manifest.json").read_text())
    assert manifest["device_profile_key"]["compile_mode"] == "default"
    profiles = list((outcome.cell_dir.parent / "device_profiles").glob("*.json"))
    assert len(profiles) == 1 and "--compiled-default--cpu-" in profiles[0].name  # the mode, then the CPU
    profile = json.loads(profiles[0].read_text())
    assert profile["compile_mode"] == "default" and len(profile["forward_time_s"]) == len(profile["token_counts"])
