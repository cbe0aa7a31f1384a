"""The committed measured-effect JSONs (docs/engine_bench/*_effect.json and kin): one check that each
configuration's summary is recomputed from its own rows (``stats.profile_replay.configuration_summary``) and
that every output it counts equals AR's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.stats.profile_replay import configuration_summary


def check_configuration_summaries(effect: dict, profile_path: Callable[[dict], Path]) -> list[dict]:
    """Assert every configuration's committed summary is its rows' (each paired with its AR row's step widths,
    on the device profile ``profile_path(configuration)`` names) and all its outputs equal AR's; returns the
    configurations, for the caller's own checks of labels and counts."""
    for configuration in effect["configurations"]:
        rows = pd.DataFrame(configuration["rows"])
        profile = json.loads(profile_path(configuration).read_text())
        assert configuration["summary"] == pytest.approx(configuration_summary(rows, rows["ar_step_tokens"], profile))
        assert configuration["summary"]["matches_ar"] == 1.0, configuration["label"]
    return list(effect["configurations"])
