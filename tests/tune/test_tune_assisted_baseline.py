"""A method with a second model is a tuner baseline like any other: the held-out cells load its draft."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lade_bench.results import load_rows
from lade_bench.tune.tuner import run_tune

from .conftest import TINY_TUNE, compose_tune, tmp_outputs


@pytest.mark.slow
def test_the_assisted_arm_runs_beside_ar_and_lookahead_on_the_heldout_samples(tmp_path):
    overrides = [
        *TINY_TUNE,
        *tmp_outputs(tmp_path),
        "tune.trials=2",
        "tune.top_k=1",
        "tune.prune=false",
        "tune.reference_presets=[]",
        "tune.baselines=[assisted]",
        "model@assistant.model=tiny_gpt2",  # shares the tiny llama's vocabulary
        "assistant.num_assistant_tokens=3",
    ]
    outcome = run_tune(compose_tune(overrides))
    record = json.loads(outcome.record.read_text())
    (heldout,) = record["heldout"]
    assert heldout["arms"]["assisted"]["matches_ar"] == 1.0
    rows = load_rows(heldout["cell_dir"])
    assert set(rows["arm"]) == {"ar", "lookahead", "assisted"} and rows["error"].isna().all()
    assert (rows.loc[rows["arm"] == "assisted", "draft_forwards"] > 0).all()
    # Held-out cells are timed, so they record their timing conditions as a runner cell does.
    conditions = json.loads((Path(heldout["cell_dir"]) / "manifest.json").read_text())["timing_conditions"]
    assert conditions["cpu_affinity_count"] >= 1 and conditions["end"]["load_average"] is not None
