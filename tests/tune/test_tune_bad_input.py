"""Bad tune values fail with a message naming the value and what is allowed, before any model loads."""

from __future__ import annotations

import re

import pytest
from hydra.errors import ConfigCompositionException

from lade_bench.decoding import DecodingConfigError
from lade_bench.methods import methods_where
from lade_bench.tune.config import TuneConfigError
from lade_bench.tune.tuner import prepare

from .conftest import TINY_TUNE, compose_tune, tmp_outputs

_TUNER_BASELINES = methods_where(lambda m: m.tuner_baseline)


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("tune.trials=0", r"tune.trials=0 is not allowed: use an integer >= 1"),
        ("tune.space.ngram=[1,3]", r"tune.space: ngram \(N\)=1 is not allowed: use an integer >= 2"),
        ("tune.space.window=[]", r"tune.space.window is empty"),
        ("tune.space.guesses=[2,2]", r"lists a value twice"),
        ("tune.space.verification=[flat,tree]", r"'tree' is not allowed; use any of \['flat', 'trie'\]"),
        ("tune.top_k=100", r"tune.top_k=100 exceeds the 72 configuration\(s\) of tune.space"),
        # The allowed baselines are the registry's (Method.tuner_baseline), listed in registration order.
        ("tune.baselines=[medusa]", re.escape(f"'medusa' is not allowed; use any of {list(_TUNER_BASELINES)}")),
        ("tune.profile_from=/nonexistent/profile.json", r"does not exist"),
        (
            "tune.search_from=/nonexistent/tune_record.json",
            r"tune.search_from='/nonexistent/tune_record.json' does not",
        ),
        ("tune.name=a/b", r"must be a plain file name"),
        ("tune.winner=best", r"tune.winner='best' is not allowed; use one of \['search_rank_1', 'split_heldout'\]"),
        ("tune.timeout_s=0", r"tune.timeout_s=0.0 is not allowed"),
        ("tune.reference_presets=[paper_70b]", r"'paper_70b' is not a lookahead preset; use any of \[.*'paper_7b'"),
    ],
)
def test_bad_tune_value_is_named(tmp_path, override, expected):
    with pytest.raises(TuneConfigError, match=expected):
        prepare(compose_tune([*TINY_TUNE, *tmp_outputs(tmp_path), override]))


def test_a_split_of_one_heldout_sample_is_refused(tmp_path):
    overrides = [*TINY_TUNE, *tmp_outputs(tmp_path), "tune.winner=split_heldout", "tune.heldout_samples=1"]
    with pytest.raises(TuneConfigError, match=r"tune.winner=split_heldout splits .*heldout_samples=1 is too few"):
        prepare(compose_tune(overrides))


def test_run_settings_are_checked_by_the_runner_before_loading(tmp_path):
    with pytest.raises(DecodingConfigError, match="max_new_tokens=0"):
        prepare(compose_tune([*TINY_TUNE, *tmp_outputs(tmp_path), "max_new_tokens=0"]))


def test_misspelled_tune_key_fails_at_composition(tmp_path):
    with pytest.raises(ConfigCompositionException, match="trails"):
        compose_tune([*TINY_TUNE, "tune.trails=3"])


def test_preset_of_another_tune_is_not_overwritten(tmp_path):
    overrides = [*TINY_TUNE, *tmp_outputs(tmp_path), "tune.preset_name=mine"]
    preset = prepare(compose_tune(overrides)).preset
    preset.parent.mkdir(parents=True)
    preset.write_text("# written by hand\nngram: 4\n")
    with pytest.raises(TuneConfigError, match="tune.overwrite_preset=true"):
        prepare(compose_tune(overrides))
    assert preset.read_text() == "# written by hand\nngram: 4\n"
    assert prepare(compose_tune([*overrides, "tune.overwrite_preset=true"])).preset == preset


@pytest.mark.slow
def test_cli_too_few_samples_is_a_one_line_error_before_the_model_loads(tmp_path, cli_server):
    # `python -m lade_bench.tune`, forked from the CLI server (tests/runner/cli_server.py): no interpreter start.
    args = [*TINY_TUNE, *tmp_outputs(tmp_path), "dataset.limit=3"]
    done = cli_server.run(args, cwd=tmp_path, module="lade_bench.tune", timeout=300)
    printed = done.stdout + done.stderr  # Hydra logs to stdout
    assert done.returncode == 2, printed[-2000:]
    assert "gives 3 sample(s)" in printed and "tune.probe_samples + tune.heldout_samples = 4" in printed
    assert "loading model" not in printed and "Traceback" not in printed
    # Nothing but Hydra's own log folder was written.
    assert [p.name for p in (tmp_path / "tunes").iterdir()] == ["_hydra"]
