"""bfloat16 and float16 on a CPU (``dtype=``): cells run, every mismatch with AR is reported with its margins.

A lookahead step's kernels are not AR's one-token step, so in half precision near-ties can flip, on a
CPU as on a GPU; the runner reports each flip (``divergence_index``, ``ar_margin``, ``arm_margin``)
and calls it an engine error only past ``mismatch.margin_tolerance``.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from lade_bench.results import load_rows
from lade_bench.runner import run_cell

from .conftest import QUIET, TINY


def _assert_mismatches_reported(rows) -> None:
    greedy = rows[rows["arm"] != "ar"]
    for _, row in greedy.iterrows():
        if bool(row["matches_ar"]):
            assert pd.isna(row["divergence_index"])
        else:
            assert int(row["divergence_index"]) >= 0
            if row["turn"] == 0:  # same prompt as AR's row: both margins are measured
                ar_margin, arm_margin = float(row["ar_margin"]), float(row["arm_margin"])
                # The margins come from one uncached reference forward, whose half-precision kernels
                # are not AR's one-token step's: at a near-tie it may rank another token first, so
                # ar_margin can be slightly negative (seen on one host: -0.0625). What always holds:
                # the arm's token is at best the runner-up, so its gap is at least AR's lead.
                assert not (pd.isna(ar_margin) or pd.isna(arm_margin))
                assert ar_margin <= arm_margin
                assert bool(row["engine_error"]) == (float(row["arm_margin"]) > 1.0)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_tiny_cell_runs_in_half_precision_on_the_cpu(compose_cfg, tmp_path, dtype):
    overrides = [*TINY, f"dtype={dtype}", "arms=[ar,lookahead,prompt_lookup]", f"output_root={tmp_path}"]
    outcome = run_cell(compose_cfg(overrides))
    rows = load_rows(outcome.cell_dir)
    assert rows["error"].isna().all() and len(rows) == 6
    manifest = json.loads((outcome.cell_dir / "manifest.json").read_text())
    assert json.dumps(manifest).count(dtype) >= 1
    _assert_mismatches_reported(rows)


@pytest.mark.slow
def test_smollm2_in_bfloat16_on_the_cpu_reports_its_mismatches_with_margins(compose_cfg, tmp_path):
    """The embedded model in bfloat16 on the CPU: every mismatch reported with its margins, no engine errors."""
    # One question, 3 tokens, no warm-up: a CPU without native bf16 matmuls (the 2-core AMD CI host)
    # spends about 2 s per SmolLM2 forward, and its flips come at the first tokens (2026-12-06: both
    # turns of question 81 diverged at index 0 or 1, with 32 tokens as with 8), which 3 tokens cover.
    overrides = [
        "model=smollm2", "dtype=bfloat16", "device=cpu", "dataset.limit=1", "max_new_tokens=3", "warmup=0",
        "arms=[ar,lookahead]", f"output_root={tmp_path}", *QUIET,
    ]  # fmt: skip
    rows = load_rows(run_cell(compose_cfg(overrides)).cell_dir)
    assert rows["error"].isna().all() and len(rows) == 4
    # Whether bf16 flips a near-tie here depends on the CPU's kernels: an AMD EPYC (AVX-512 BF16)
    # diverged on these rows, an Intel Xeon with AMX BF16 matched AR on all of them (2026-12-02). So
    # this checks that each flip that happens is reported with consistent margins and none is an
    # engine error; tests/runner/test_runner_mismatch.py forces a flip on every host.
    _assert_mismatches_reported(rows)
    assert not rows["engine_error"].fillna(False).astype(bool).any()
