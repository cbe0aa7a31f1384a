"""Reusing a device profile: only one of the same device kind that covers the search space's widest step."""

from __future__ import annotations

import json

import pytest
import torch

from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import PROFILE_JSON, device_kind
from lade_bench.tune.config import SearchSpace, TuneConfigError
from lade_bench.tune.profile import obtain_profile

SPACE = SearchSpace(ngram=(3, 5), window=(1, 7), guesses=(1, 7), prompt_as_reference=(True,), verification=("flat",))
CPU = torch.device("cpu")


def _profile(kind: str, largest: int) -> dict:
    counts = [1, 2, 4, 8, 16, 32, largest]
    return {"token_counts": counts, "forward_time_s": [1e-3 * k for k in counts], "device_kind": kind}


def test_profile_from_a_sweep_folder_is_reused_and_copied_into_the_tune_folder(tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / PROFILE_JSON).write_text(json.dumps(_profile(device_kind(CPU), 64)))
    tune_dir = tmp_path / "tune"
    profile, origin = obtain_profile(None, CPU, tune_dir, SPACE, sweep, settings=None)  # no model: nothing measured
    assert origin == f"reused {sweep / PROFILE_JSON}" and profile["token_counts"][-1] == 64
    assert json.loads((tune_dir / PROFILE_JSON).read_text()) == profile


@pytest.mark.parametrize(
    ("kind", "largest", "expected"),
    [
        ("cuda NVIDIA H200", 64, "describes 'cuda NVIDIA H200'"),
        (None, 32, "covers 1..32 tokens per forward pass, not 1..56"),  # (7 + 7)(5 - 1) = 56
    ],
)
def test_profile_from_that_cannot_serve_the_tune_is_refused(tmp_path, kind, largest, expected):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile(kind or device_kind(CPU), largest)))
    with pytest.raises(TuneConfigError, match=expected):
        obtain_profile(None, CPU, tmp_path / "tune", SPACE, path, settings=None)


def test_reference_presets_steps_must_be_covered_too(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(_profile(device_kind(CPU), 64)))
    paper_7b = LookaheadParams(5, 15, 15)  # (15 + 15)(5 - 1) = 120 tokens per step
    with pytest.raises(TuneConfigError, match="not 1..120"):
        obtain_profile(None, CPU, tmp_path / "tune", SPACE, path, settings=None, also=[paper_7b])
