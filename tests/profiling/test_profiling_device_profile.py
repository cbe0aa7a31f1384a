"""The forward-time curve: measured on a tiny model, stored, interpolated, refused outside its range."""

from __future__ import annotations

import pytest

from lade_bench.models import tiny_model
from lade_bench.profiling.device_profile import (
    default_token_counts,
    forward_time_at,
    load_profile,
    measure_forward_curve,
    record_device_profile,
    save_profile,
)


@pytest.fixture(scope="module")
def model():
    return tiny_model("llama", seed=3)


def test_default_token_counts_cover_every_shape():
    counts = default_token_counts([(5, 7, 7), (3, 1, 1)], largest=64)
    assert counts[0] == 1 and 64 in counts
    assert (7 + 7) * 4 in counts and (1 + 1) * 2 in counts
    assert counts == sorted(set(counts))


def test_measure_forward_curve(model):
    profile = measure_forward_curve(model, [4, 1, 2, 4], context_tokens=16, warmup=1, repeats=2, model_name="tiny")
    assert profile["token_counts"] == [1, 2, 4]
    assert len(profile["forward_time_s"]) == 3 and all(t > 0 for t in profile["forward_time_s"])
    assert profile["model"] == "tiny" and profile["device"].startswith("cpu")
    assert profile["dtype"] == "float64" and profile["context_tokens"] == 16


def test_measure_rejects_bad_arguments(model):
    with pytest.raises(ValueError, match=">= 1"):
        measure_forward_curve(model, [0, 2])
    with pytest.raises(ValueError, match="positions"):
        measure_forward_curve(model, [1, 600], context_tokens=16)


def test_save_load_and_interpolate(tmp_path, model):
    assert load_profile(tmp_path) is None
    path = record_device_profile(model, tmp_path, [(3, 2, 2)], context_tokens=8, warmup=0, repeats=1)
    assert path.name == "device_profile.json"
    profile = load_profile(tmp_path)
    assert 8 in profile["token_counts"]
    handmade = {"token_counts": [1, 3], "forward_time_s": [1.0, 2.0]}
    save_profile(tmp_path, handmade)
    assert load_profile(tmp_path) == handmade
    assert forward_time_at(handmade, 2) == pytest.approx(1.5)
    assert forward_time_at(handmade, 3) == 2.0
    with pytest.raises(ValueError, match="covers 1..3"):
        forward_time_at(handmade, 4)
