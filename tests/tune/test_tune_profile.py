"""Reusing a device profile: only one of the tune's key (device kind, model, dtype, attention) that covers it."""

from __future__ import annotations

import json

import pytest
import torch

from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import PROFILE_JSON, ProfileKey, device_kind, key_profile_path, publish_profile
from lade_bench.tune.config import SearchSpace, TuneConfigError
from lade_bench.tune.profile import obtain_profile

SPACE = SearchSpace(ngram=(3, 5), window=(1, 7), guesses=(1, 7), prompt_as_reference=(True,), verification=("flat",))
CPU = torch.device("cpu")


KEY = ProfileKey(device_kind(CPU), "tiny-llama", "float64", "sdpa")


def _profile(kind: str, largest: int, model: str = "tiny-llama", legacy: bool = False) -> dict:
    counts = [1, 2, 4, 8, 16, 32, largest]
    curve = {"token_counts": counts, "forward_time_s": [1e-3 * k for k in counts]}
    if legacy:  # version 1: per device kind, the model's name_or_path, no attention implementation
        return {**curve, "version": 1, "device_kind": kind, "model": f"/models/{model}", "dtype": KEY.dtype}
    return {**curve, "version": 2, **ProfileKey(kind, model, KEY.dtype, KEY.attn_implementation).as_record()}


def test_profile_from_a_sweep_folder_is_reused_and_copied_into_the_tune_folder(tmp_path):
    sweep = tmp_path / "sweep"
    for model in ("tiny-llama", "tiny-qwen2"):  # two models' profiles: the tune takes its own
        publish_profile(sweep, _profile(device_kind(CPU), 64 if model == "tiny-llama" else 32, model))
    tune_dir = tmp_path / "tune"
    profile, origin = obtain_profile(None, KEY, tune_dir, SPACE, sweep, settings=None)  # no model: nothing measured
    assert origin == f"reused {key_profile_path(sweep, KEY)}" and profile["token_counts"][-1] == 64
    assert json.loads(key_profile_path(tune_dir, KEY).read_text()) == profile


def test_a_legacy_profile_serves_only_its_own_model(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / PROFILE_JSON).write_text(json.dumps(_profile(device_kind(CPU), 64, legacy=True)))
    profile, _ = obtain_profile(None, KEY, tmp_path / "tune", SPACE, sweep, settings=None)
    assert profile["version"] == 1 and (tmp_path / "tune" / PROFILE_JSON).is_file()  # copied, still legacy
    other = ProfileKey(KEY.device_kind, "tiny-qwen2", KEY.dtype, KEY.attn_implementation)
    with pytest.raises(TuneConfigError, match="holds no device profile of tiny-qwen2"):
        obtain_profile(None, other, tmp_path / "tune2", SPACE, sweep, settings=None)


@pytest.mark.parametrize(
    ("kind", "largest", "model", "expected"),
    [
        ("cuda NVIDIA H200", 64, "tiny-llama", "describes tiny-llama .* on cuda NVIDIA H200, not"),
        (None, 64, "tiny-qwen2", "describes tiny-qwen2"),
        (None, 32, "tiny-llama", "covers 1..32 tokens per forward pass, not 1..56"),  # (7 + 7)(5 - 1) = 56
    ],
)
def test_profile_from_that_cannot_serve_the_tune_is_refused(tmp_path, kind, largest, model, expected):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile(kind or device_kind(CPU), largest, model)))
    with pytest.raises(TuneConfigError, match=expected):
        obtain_profile(None, KEY, tmp_path / "tune", SPACE, path, settings=None)


def test_reference_presets_steps_must_be_covered_too(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile(device_kind(CPU), 64)))
    paper_7b = LookaheadParams(5, 15, 15)  # (15 + 15)(5 - 1) = 120 tokens per step
    with pytest.raises(TuneConfigError, match="not 1..120"):
        obtain_profile(None, KEY, tmp_path / "tune", SPACE, path, settings=None, also=[paper_7b])
