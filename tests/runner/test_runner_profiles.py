"""Device profiles per (device kind, model, dtype, attention): two models in one sweep get two, each cell its own.

One sweep of one cell per model, the tiny Llama and the tiny Qwen2 (float64, one question, a few tokens),
run in-process one after the other as the basic launcher runs a multirun's cells on one torch thread, each
profile measured by the runner (over its KV-length grid); then the report, the tuner and
``python -m lade_bench.predict`` are asked for the profile of each.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from hydra import compose, initialize_config_dir

from lade_bench import stats
from lade_bench.profiling.device_profile import (
    ProfileKey,
    device_kind,
    device_processor,
    load_profiles,
    profile_measures_kv,
)
from lade_bench.report.step_cost_check import check_sweep
from lade_bench.report.sweep import load_sweep
from lade_bench.results import load_rows
from lade_bench.runner import run_cell
from lade_bench.stats.step_cost import predicted_speedup, prediction_basis
from lade_bench.tune.config import SearchSpace, TuneConfigError
from lade_bench.tune.profile import obtain_profile

from .conftest import CONF_DIR, TINY

# A real two-model sweep with its device profiles serves the module: the slow lane.
pytestmark = pytest.mark.slow

PROFILED = ["device_profile.enabled=true", "device_profile.warmup=0", "device_profile.repeats=1"]
PROFILED += ["device_profile.context_tokens=8", "warmup=0", "max_new_tokens=6"]
# A small KV grid (with the context, 8, 64 and 1024 tokens) that spans the question's prompt and output.
PROFILED += ["device_profile.kv_lengths=[64,1024]"]
MODELS = {"tiny-llama": "tiny_llama", "tiny-qwen2": "tiny_qwen2"}


@pytest.fixture(scope="module")
def two_model_sweep(tmp_path_factory):
    """The sweep folder of one cell per tiny model, each with its device profile measured by the runner."""
    out = tmp_path_factory.mktemp("profiles") / "runs"
    shared = [*[a for a in TINY if not a.startswith("model=")], *PROFILED, f"output_root={out}"]
    sweep_dirs = set()
    # One thread, whatever the worker has: the rows and the profile are then 1-thread runs (predict's test).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for model in MODELS.values():
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
                cfg = compose("config", overrides=[*shared, f"model={model}"])
            outcome = run_cell(cfg)
            assert outcome.summary is not None
            sweep_dirs.add(outcome.cell_dir.parent)
    finally:
        torch.set_num_threads(threads)
    assert sweep_dirs == {out / "single"}  # both cells in one sweep, the one a multirun without +sweep fills
    return out / "single"


def _key(model: str) -> ProfileKey:
    cpu = torch.device("cpu")
    return ProfileKey(device_kind(cpu), model, "float64", "sdpa", processor=device_processor(cpu))


def test_two_models_get_two_profiles_and_each_cell_records_its_key(two_model_sweep):
    stored = load_profiles(two_model_sweep)
    assert sorted(s.key.model for s in stored if s.key) == sorted(MODELS) and not any(s.legacy for s in stored)
    assert not (two_model_sweep / "device_profile.json").exists()
    assert {s.key for s in stored} == {_key(m) for m in MODELS}
    for manifest in two_model_sweep.glob("*/manifest.json"):
        key = json.loads(manifest.read_text())["device_profile_key"]
        assert key in [_key(m).as_record() for m in MODELS]


def test_the_report_predicts_each_cell_from_its_own_models_profile(two_model_sweep):
    sweep = load_sweep(two_model_sweep, n_boot=50)
    assert len(sweep.cell_profiles) == 2
    models = {str(r["cell_id"]): str(r["model"]) for r in sweep.rows[["cell_id", "model"]].to_dict("records")}
    for (_, cell_id), found in sweep.cell_profiles.items():
        assert found.key is not None and found.key.model == models[cell_id]
    check = check_sweep(sweep)
    assert set(check["model"]) == set(MODELS) and (check["not_predicted"] == "").all()
    for rec in check.to_dict("records"):
        assert rec["model"] in rec["profile"]  # the profile file names the cell's own model
    # A cell whose model has no profile gets no prediction (not the other model's curve).
    qwen = next(s for s in sweep.profiles if s.key and s.key.model == "tiny-qwen2")
    only_qwen = {k: v for k, v in sweep.cell_profiles.items() if v is qwen}
    unmatched = check_sweep(dataclasses.replace(sweep, cell_profiles=only_qwen))
    assert set(unmatched.loc[unmatched["not_predicted"] == "", "model"]) == {"tiny-qwen2"}


def test_the_tuner_reuses_the_profile_of_its_own_model_from_the_sweep(two_model_sweep, tmp_path):
    space = SearchSpace(ngram=(2,), window=(1,), guesses=(1,), prompt_as_reference=(True,), verification=("flat",))
    for model in MODELS:
        profile, origin = obtain_profile(None, _key(model), tmp_path / model, space, two_model_sweep, settings=None)
        assert profile["model"] == model and origin.startswith("reused ")
    with pytest.raises(TuneConfigError, match="holds no device profile of tiny-gpt2"):
        obtain_profile(None, _key("tiny-gpt2"), tmp_path / "gpt2", space, two_model_sweep, settings=None)


def test_one_thread_runs_are_predicted_from_their_one_thread_profile_over_its_kv_grid(two_model_sweep, tmp_path):
    """``python -m lade_bench.predict`` on the sweep, each model from the 1-thread profile the runner measured
    for it: every predicted speedup is ``stats.step_cost``'s on the paired rows, read over the profile's KV
    grid (not at its one context), and AR's rows carry the forward time the model adds their outside time from."""
    stored = {s.key.model: s for s in load_profiles(two_model_sweep) if s.key}
    out = tmp_path / "predicted"
    command = [sys.executable, "-m", "lade_bench.predict", str(two_model_sweep), "--out", str(out), "--n-boot", "50"]
    done = subprocess.run(
        [*command, "--profile", *(str(s.path) for s in stored.values())], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {(out / 'leaderboard.csv').resolve()}" in done.stdout
    table = pd.read_csv(out / "leaderboard.csv", dtype={"cell_id": str})
    rows = load_rows(two_model_sweep)
    for manifest in two_model_sweep.glob("*/manifest.json"):
        assert json.loads(manifest.read_text())["device_profile_key"]["device_kind"].endswith("(1 threads)")
    for model, found in stored.items():
        profile = found.profile
        assert profile["threads"] == 1 and profile_measures_kv(profile) and len(profile["kv_lengths"]) >= 3
        one_context = {k: v for k, v in profile.items() if k not in ("kv_lengths", "forward_time_grid_s")}
        paired = stats.common_rows(rows[rows["model"] == model])
        ar = paired[paired["arm"] == "ar"].sort_values(list(stats.PAIR_KEY))
        assert ar["forward_time_s"].notna().all() and (ar["forward_time_s"] <= ar["wall_time_s"]).all()
        assert prediction_basis(paired.to_dict("records"), profile)["rows_without_outside_time"] == 0
        arms = sorted(set(paired["arm"]) - {"ar"})
        assert arms
        for arm in arms:
            mine = paired[paired["arm"] == arm].sort_values(list(stats.PAIR_KEY))
            (rec,) = table[(table["model"] == model) & (table["arm"] == arm)].to_dict("records")
            expected = predicted_speedup(mine, ar, profile)
            assert rec["predicted_speedup"] == pytest.approx(expected, rel=1e-9)
            assert expected != predicted_speedup(mine, ar, one_context)  # the grid was read, not one context
            assert rec["kv_measured"] and rec["rows_without_outside_time"] == 0
            heading = f"predicted for {profile['device_kind']} from {found.path} ({model}, float64, 1 threads, "
            assert rec["heading"].startswith(heading) and rec["heading"].endswith("), not measured")
