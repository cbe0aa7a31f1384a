"""The forward-time curve: measured on a tiny model, keyed, stored, matched, interpolated, refused outside its range."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from lade_bench.models import tiny_model
from lade_bench.profiling.device_profile import (
    PROFILES_DIR,
    ProfileKey,
    default_token_counts,
    device_kind,
    device_processor,
    forward_time_at,
    has_profile,
    key_profile_path,
    kind_profile_path,
    load_profile,
    load_profiles,
    matching_profile,
    measure_forward_curve,
    measure_forward_surface,
    profile_key,
    profile_measures_kv,
    publish_profile,
    record_device_profile,
    repair_profile,
    same_device_kind,
    save_profile,
)
from lade_bench.profiling.processor import processor_identity, processor_label


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


def test_measure_forward_surface_measures_each_fitting_kv_length(model):
    positions = model.config.max_position_embeddings
    wanted = [4, 32, positions]  # the last cannot hold a 4-token step beside it and is left out
    profile = measure_forward_surface(model, [1, 4], wanted, context_tokens=16, warmup=0, repeats=1)
    assert profile["kv_lengths"] == [4, 16, 32] and profile_measures_kv(profile)
    assert [len(row) for row in profile["forward_time_grid_s"]] == [2, 2, 2]
    assert profile["forward_time_grid_s"][1] == profile["forward_time_s"] and profile["context_tokens"] == 16
    assert forward_time_at(profile, 2, 24) > 0
    with pytest.raises(ValueError, match="4..32 tokens, not 40"):
        forward_time_at(profile, 2, 40)


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


def _key(model_name: str = "tiny-llama", dtype: str = "float64") -> ProfileKey:
    cpu = torch.device("cpu")
    return ProfileKey(device_kind(cpu), model_name, dtype, "sdpa", processor=device_processor(cpu))


def test_a_measured_profile_states_its_key_and_is_published_under_it(tmp_path, model):
    profile = measure_forward_curve(
        model, [1, 2], context_tokens=8, warmup=0, repeats=1, model_name="tiny-llama", attn_implementation="sdpa"
    )
    key = profile_key(profile)
    assert key == _key(dtype=profile["dtype"]) and profile["version"] == 2
    path = publish_profile(tmp_path, profile)
    assert path == key_profile_path(tmp_path, key) and has_profile(tmp_path, key)
    assert not has_profile(tmp_path, _key("tiny-qwen2", profile["dtype"]))
    (stored,) = load_profiles(tmp_path)
    assert stored.key == key and not stored.legacy and "tiny-llama" in stored.label()
    with pytest.raises(ValueError, match="without a complete key"):
        publish_profile(tmp_path, {"version": 1, "device_kind": "cpu", "token_counts": [1]})


def test_keys_of_two_models_give_two_files_and_each_matches_its_own(tmp_path):
    curve = {"version": 2, "token_counts": [1, 2], "forward_time_s": [1.0, 1.5]}
    for name in ("tiny-llama", "tiny-qwen2"):
        publish_profile(tmp_path, {**curve, **_key(name).as_record()})
    stored = load_profiles(tmp_path)
    assert len(stored) == 2 and len({s.path for s in stored}) == 2
    assert matching_profile(stored, _key("tiny-qwen2")).key == _key("tiny-qwen2")
    assert matching_profile(stored, _key("tiny-llama")).key == _key("tiny-llama")
    assert matching_profile(stored, _key("tiny-gpt2")) is None  # no curve borrowed from another model
    assert matching_profile(stored, _key("tiny-llama", "float32")) is None


def test_a_legacy_profile_serves_only_its_own_model_and_dtype_and_says_so(tmp_path):
    legacy = {
        "version": 1,
        "token_counts": [1, 2],
        "forward_time_s": [1.0, 1.5],
        "device_kind": device_kind(torch.device("cpu")),
        "model": "/cache/models/tiny-llama",  # version 1 recorded the checkpoint's name_or_path
        "dtype": "float64",
    }
    save_profile(tmp_path, legacy)
    kind_profile_path(tmp_path, legacy["device_kind"]).parent.mkdir()
    kind_profile_path(tmp_path, legacy["device_kind"]).write_text(json.dumps(legacy))
    (stored,) = load_profiles(tmp_path)  # the sweep's copy of the kind's file is listed once
    assert stored.legacy and stored.label().startswith("legacy per-device-kind profile")
    assert matching_profile([stored], _key("tiny-llama")) is stored
    assert matching_profile([stored], _key("tiny-qwen2")) is None
    assert matching_profile([stored], _key("tiny-llama", "float32")) is None
    # An older manifest describes the CPU without the machine word: the same kind.
    manifest_kind = "cpu " + legacy["device_kind"].split(" ", 2)[2]  # "cpu (N threads)"
    assert same_device_kind(legacy["device_kind"], manifest_kind)
    assert not same_device_kind(legacy["device_kind"], "cpu (999 threads)")
    assert matching_profile([stored], ProfileKey(manifest_kind, "tiny-llama", "float64", "unrecorded")) is stored
    assert not has_profile(tmp_path, _key("tiny-llama"))  # a rerun measures the keyed profile its cells need


def test_damaged_profiles_are_named_then_set_aside(tmp_path):
    (tmp_path / PROFILES_DIR).mkdir()
    damaged = tmp_path / PROFILES_DIR / "x--y--z--w.json"
    damaged.write_text("{garbage")
    with pytest.raises(ValueError, match="x--y--z--w.json is damaged"):
        load_profiles(tmp_path)
    assert repair_profile(tmp_path) == [damaged]
    assert load_profiles(tmp_path) == [] and damaged.with_name("x--y--z--w.json.damaged").is_file()


def test_a_compiled_curve_is_keyed_apart_from_the_eager_one(tmp_path, model):
    from lade_bench.decoding.core.compiled import CompiledForwards

    compiled = CompiledForwards(mode="default", cache_block=32, backend="eager")
    profile = measure_forward_curve(model, [1, 3], context_tokens=16, warmup=0, repeats=2, compiled=compiled)
    eager = measure_forward_curve(model, [1, 3], context_tokens=16, warmup=0, repeats=2)
    assert profile["compile_mode"] == "default" and eager["compile_mode"] == "eager"
    compiled_key, eager_key = profile_key(profile), profile_key(eager)
    assert compiled_key.compile_mode == "default" and eager_key.compile_mode == "eager"
    assert key_profile_path(tmp_path, compiled_key) != key_profile_path(tmp_path, eager_key)
    assert "compiled default" in compiled_key.describe()
    # Eager keys keep their pre-compile file names, and a record without the field is eager.
    legacy_v2 = {k: v for k, v in eager_key.as_record().items() if k != "compile_mode"}
    assert ProfileKey.from_record(legacy_v2) == eager_key
    assert eager_key.slug().count("--") == 4 and compiled_key.slug().count("--") == 5  # processor included


def test_a_cpu_curve_is_keyed_by_its_processor_and_never_serves_another_cpu(tmp_path, model):
    profile = measure_forward_curve(model, [1, 2], context_tokens=8, warmup=0, repeats=1, model_name="tiny-llama")
    here = profile_key(profile)
    assert profile["processor"] == processor_label(processor_identity()) == here.processor != ""
    assert here.processor in here.describe()
    publish_profile(tmp_path, profile)
    (stored,) = load_profiles(tmp_path)
    # A later sitting of the same sweep on a machine with another CPU (same word, same threads).
    elsewhere = dataclasses.replace(here, processor="Other CPU (GenuineIntel 6/85/7; avx2 avx512f)")
    assert elsewhere.slug() != here.slug() and not has_profile(tmp_path, elsewhere)
    assert matching_profile([stored], elsewhere) is None and matching_profile([stored], here) is stored
    # Keys recorded before the processor was keyed (committed sweeps) keep their file names and match
    # each other, not a keyed one.
    before = {k: v for k, v in here.as_record().items() if k != "processor"}
    unkeyed = ProfileKey.from_record(before)
    assert unkeyed.processor == "" and unkeyed != here
    assert unkeyed.slug() == here.slug().rsplit("--", 1)[0]
    assert device_processor(torch.device("meta")) == ""  # an accelerator's kind names the chip itself
