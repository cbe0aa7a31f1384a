"""``model=gemma3_270m``: the second embedded model runs as a cell, offline, with raw completion prompts."""

from __future__ import annotations

import pytest

from lade_bench.runner import plan_cell, run_cell

from .conftest import QUIET

pytestmark = pytest.mark.slow


def test_model_option_selects_the_embedded_gemma(compose_cfg):
    cfg = compose_cfg(["model=gemma3_270m"])
    assert cfg.model.source.value == "embedded" and cfg.model.embedded == "gemma3_270m"
    assert cfg.model.chat is False
    smollm2 = plan_cell(compose_cfg([])).semantic["model"]
    assert "embedded" not in smollm2  # SmolLM2 cells keep their ids (runner/id_compat.py's table)
    assert plan_cell(cfg).semantic["model"]["embedded"] == "gemma3_270m"


def test_gemma_cell_runs_offline(compose_cfg, tmp_path):
    overrides = ["model=gemma3_270m", "device=cpu", "dataset.limit=1", "max_new_tokens=4", "warmup=0", *QUIET]
    outcome = run_cell(compose_cfg([*overrides, "lookahead=cpu_small", f"output_root={tmp_path}"]))
    summary = outcome.summary
    assert summary["model"] == "gemma3-270m" and summary["status"] == "done"
    assert summary["arms"]["lookahead"]["matches_ar"] == 1.0
