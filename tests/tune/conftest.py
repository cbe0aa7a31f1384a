"""Fixtures for the tuner tests: the real tune config composed by Hydra, the tiny model, tmp output folders."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from lade_bench.conf import PACKAGE_CONF_DIR
from lade_bench.tune.config import register_tune_configs

REPO = Path(__file__).resolve().parents[2]
CONF_DIR = PACKAGE_CONF_DIR  # the top-level conf/ (the package lade_bench.conf)
# The tiny run every tune test starts from: the tiny llama in float64 (exact argmaxes), 8 new tokens,
# MT-Bench (two turns per sample), a short device profile.
TINY_RUN = [
    "model=tiny_llama",
    "dtype=float64",
    "device=cpu",
    "max_new_tokens=8",
    "warmup_new_tokens=4",
    "device_profile.warmup=0",
    "device_profile.repeats=1",
    "device_profile.context_tokens=16",
]
# A tiny, fast tune of that run. Output folders are set per test (never the checkout's conf/).
TINY_TUNE = [
    *TINY_RUN,
    "tune.probe_samples=2",
    "tune.heldout_samples=2",
    "tune.top_k=2",
    "tune.prune_after_units=2",
    "tune.reference_presets=[cpu_small]",
    # A small space whose widest step keeps the profile short.
    "tune.space.ngram=[2,3,4]",
    "tune.space.window=[1,2,3]",
    "tune.space.guesses=[1,2]",
]


@pytest.fixture(scope="session", autouse=True)
def _schemas_registered():
    register_tune_configs()


def compose_tune(overrides: list[str]):
    """The config ``python -m lade_bench.tune OVERRIDES`` would build, composed in-process."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("tune", overrides=list(overrides))


def tmp_outputs(root: Path) -> list[str]:
    """Overrides that send the records and the preset under ``root``."""
    return [f"tune.output_root={root / 'tunes'}", f"tune.preset_conf_dir={root / 'conf'}"]
