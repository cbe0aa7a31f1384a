"""Each default is stated once and tuned presets live in the user's folder (the wheel: tests/test_packaging.py).

Where a value lives: the run's settings in ``conf/settings.yaml`` (its schema fields are MISSING), the
engine's settings in ``lade_bench.decoding.core.params`` (the schema reads them; group files state only
what they change), the tuner's in ``conf/tune.yaml``. These tests fail when a value is stated twice.
"""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from lade_bench.conf import PACKAGE_CONF_DIR, user_conf_dir
from lade_bench.decoding.core.params import LookaheadParams, SamplingParams
from lade_bench.runner.config_schema import run_schema
from lade_bench.tune.config import TuneConfig, register_tune_configs, tune_settings


def _leaves(node: dict, prefix: str = "") -> dict[str, object]:
    """Dotted key -> value of every leaf of a YAML mapping (lists are leaves)."""
    out: dict[str, object] = {}
    for key, value in node.items():
        if isinstance(value, dict) and value:
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _is_missing(schema, dotted: str) -> bool:
    parent, _, leaf = dotted.rpartition(".")
    return OmegaConf.is_missing(OmegaConf.select(schema, parent) if parent else schema, leaf)


def _yaml(name: str) -> dict:
    return yaml.safe_load((PACKAGE_CONF_DIR / name).read_text())


def test_the_run_schema_states_no_value_that_settings_yaml_states():
    # The schema with every registered method's own section (Method.config): their defaults live in
    # those dataclasses, so settings.yaml stating one is a value stated twice.
    schema = OmegaConf.structured(run_schema())
    settings = {k: v for k, v in _leaves(_yaml("settings.yaml")).items() if not k.startswith("defaults")}
    assert "max_new_tokens" in settings and "wandb.n_boot" in settings
    restated = [key for key in settings if not _is_missing(schema, key)]
    assert restated == [], f"stated in settings.yaml and again in the schema: {restated}"


def test_the_tune_schema_states_no_value_and_tune_yaml_restates_no_run_setting():
    tune_yaml = _yaml("tune.yaml")
    schema = OmegaConf.structured(TuneConfig)
    tune_keys = _leaves(tune_yaml["tune"])
    assert "trials" in tune_keys and "space.ngram" in tune_keys
    assert [k for k in tune_keys if not _is_missing(schema, k)] == []
    settings = _leaves(_yaml("settings.yaml"))
    run_keys = {k: v for k, v in _leaves(tune_yaml).items() if not k.startswith(("tune.", "hydra.", "defaults"))}
    same = [k for k, v in run_keys.items() if k in settings and settings[k] == v]
    assert same == [], f"tune.yaml repeats settings.yaml's value of {same}"


def test_group_options_state_only_what_they_change_from_the_engine():
    lookahead_defaults = dataclasses.asdict(LookaheadParams()) | {"devices": 1}
    # N, W, G and prompt-as-reference name a preset; anything else equal to the engine's is a restatement.
    for path in (PACKAGE_CONF_DIR / "lookahead").glob("*.yaml"):
        values = yaml.safe_load(path.read_text()) or {}
        extra = {k: v for k, v in values.items() if k not in ("ngram", "window", "guesses", "prompt_as_reference")}
        assert not {k for k, v in extra.items() if lookahead_defaults[k] == v}, path
    sampling_defaults = dataclasses.asdict(SamplingParams())
    for path in (PACKAGE_CONF_DIR / "sampling").glob("*.yaml"):
        values = yaml.safe_load(path.read_text())
        extra = {k: v for k, v in values.items() if k not in ("name", "do_sample", "temperature")}
        assert not {k for k, v in extra.items() if sampling_defaults[k] == v}, path


def test_the_default_lookahead_is_the_engines(compose_cfg):
    composed = compose_cfg([]).lookahead
    assert {k: composed[k] for k in dataclasses.asdict(LookaheadParams())} == dataclasses.asdict(LookaheadParams())
    assert _yaml("lookahead/default.yaml") == {}


@pytest.fixture
def compose_cfg():
    from lade_bench.runner import register_configs

    register_configs()

    def _compose(overrides: list[str], name: str = "config"):
        with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
            return compose(name, overrides=list(overrides))

    return _compose


def test_a_preset_in_the_users_folder_is_found_by_name_and_is_where_the_tuner_writes(
    tmp_path, monkeypatch, compose_cfg
):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert user_conf_dir() == tmp_path / ".config" / "lade_bench"
    preset = user_conf_dir() / "lookahead" / "tuned" / "my-device.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text("ngram: 3\nwindow: 2\nguesses: 4\nprompt_as_reference: false\nverification: trie\n")
    lookahead = compose_cfg(["lookahead=tuned/my-device"]).lookahead
    assert (lookahead.ngram, lookahead.window, lookahead.guesses, lookahead.verification) == (3, 2, 4, "trie")
    # The shipped presets still win their own names and still load.
    assert compose_cfg(["lookahead=paper_7b"]).lookahead.window == 15
    register_tune_configs()
    tune_cfg = compose_cfg(["lookahead=tuned/my-device"], name="tune")
    assert tune_settings(tune_cfg).preset_conf_dir == user_conf_dir()


@dataclasses.dataclass
class _ToySectionConfig:
    depth: int = 3
    label: str = "toy"


def test_a_methods_section_comes_from_its_registry_entry_alone(compose_cfg):
    from lade_bench.methods import Method, register, unregister
    from lade_bench.runner import register_configs

    def generate(request):
        raise AssertionError("never run")

    register(Method("zz_sectioned", generate, label="Toy", color="#000002", config=_ToySectionConfig))
    try:
        register_configs()  # after the method registers, as run.py does after importing your methods
        assert compose_cfg([]).zz_sectioned == {"depth": 3, "label": "toy"}
        assert compose_cfg(["zz_sectioned.depth=5"]).zz_sectioned.depth == 5
        with pytest.raises(Exception, match="zz_sectioned.depth"):
            compose_cfg(["zz_sectioned.depth=deep"])
        register_tune_configs()
        assert compose_cfg([], name="tune").zz_sectioned.depth == 3
        register(Method("seed", generate, label="Seed", color="#000003", config=_ToySectionConfig))
        with pytest.raises(ValueError, match=r"methods \['seed'\] declare a config section named like a run setting"):
            run_schema()
    finally:
        unregister("zz_sectioned")
        unregister("seed")
        register_tune_configs()  # the run's and tune's schemas without the toy
    assert "zz_sectioned" not in compose_cfg([])


def test_help_lists_the_registered_methods():
    from lade_bench.methods import method_names
    from lade_bench.runner import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
        header = compose("config", return_hydra_config=True).hydra.help.header
    assert f"Methods (arms=[ar,...], AR first): {', '.join(method_names())}\n" in header
