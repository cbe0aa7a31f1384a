"""Device profiles per (device kind, model, dtype, attention): two models in one sweep get two, each cell its own.

One sweep of one cell per model, the tiny Llama and the tiny Qwen2 (float64, one question, a few tokens),
run in-process one after the other as the basic launcher runs a multirun's cells, each profile measured by
the runner; then the report and the tuner are asked for the profile of each.
"""

from __future__ import annotations

import json

import pytest
import torch
from hydra import compose, initialize_config_dir

from lade_bench.profiling.device_profile import ProfileKey, device_kind, device_processor, load_profiles
from lade_bench.report import aggregate
from lade_bench.report.sweep import load_sweep
from lade_bench.runner import run_cell
from lade_bench.tune.config import SearchSpace, TuneConfigError
from lade_bench.tune.profile import obtain_profile

from .conftest import CONF_DIR, TINY

# A real two-model sweep with its device profiles serves the module: the slow lane.
pytestmark = pytest.mark.slow

PROFILED = ["device_profile.enabled=true", "device_profile.warmup=0", "device_profile.repeats=1"]
PROFILED += ["device_profile.context_tokens=8", "warmup=0", "max_new_tokens=6"]
MODELS = {"tiny-llama": "tiny_llama", "tiny-qwen2": "tiny_qwen2"}


@pytest.fixture(scope="module")
def two_model_sweep(tmp_path_factory):
    """The sweep folder of one cell per tiny model, each with its device profile measured by the runner."""
    out = tmp_path_factory.mktemp("profiles") / "runs"
    shared = [*[a for a in TINY if not a.startswith("model=")], *PROFILED, f"output_root={out}"]
    sweep_dirs = set()
    for model in MODELS.values():
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[*shared, f"model={model}"])
        outcome = run_cell(cfg)
        assert outcome.summary is not None
        sweep_dirs.add(outcome.cell_dir.parent)
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
    predicted = aggregate.predicted_speedups(sweep.summary, sweep.cell_profiles)
    assert len(predicted) == 2
    for rec in predicted.to_dict("records"):
        assert rec["model"] in rec["profile"]  # the label names the cell's own model
    # A cell whose model has no profile gets no prediction (not the other model's curve).
    qwen = next(s for s in sweep.profiles if s.key and s.key.model == "tiny-qwen2")
    only_qwen = {k: v for k, v in sweep.cell_profiles.items() if v is qwen}
    assert list(aggregate.predicted_speedups(sweep.summary, only_qwen)["model"]) == ["tiny-qwen2"]


def test_the_tuner_reuses_the_profile_of_its_own_model_from_the_sweep(two_model_sweep, tmp_path):
    space = SearchSpace(ngram=(2,), window=(1,), guesses=(1,), prompt_as_reference=(True,), verification=("flat",))
    for model in MODELS:
        profile, origin = obtain_profile(None, _key(model), tmp_path / model, space, two_model_sweep, settings=None)
        assert profile["model"] == model and origin.startswith("reused ")
    with pytest.raises(TuneConfigError, match="holds no device profile of tiny-gpt2"):
        obtain_profile(None, _key("tiny-gpt2"), tmp_path / "gpt2", space, two_model_sweep, settings=None)
