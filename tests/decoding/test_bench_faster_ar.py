"""The bench on the batch-invariant step path (issue 68): with ``ar_standard`` beside the path's AR, every
speedup is against the faster of the two (``stats.speedup_baseline``), and the table says which."""

from __future__ import annotations

import pytest
import torch

from lade_bench.bench import build_arms, render_table, run_benchmark, summarise
from lade_bench.decoding import LookaheadParams
from lade_bench.decoding.core import batch_invariant
from lade_bench.models.tiny import tiny_model

PROMPTS = [[5, 9, 17, 3, 5, 9, 17, 3], [7, 2, 7, 2, 11, 4]]


def test_every_speedup_is_against_the_faster_ar_and_the_table_names_it():
    model = tiny_model("llama", init_scale=1.0, seed=7, dtype=torch.bfloat16)
    batch_invariant.enable(model)
    arms = build_arms(model, None, 6, [LookaheadParams(3, 2, 2)], ["ar", "ar_standard", "lookahead"])
    results = run_benchmark(arms, PROMPTS, warmup=0)
    rows = {row.arm: row for row in summarise(results)}
    times = {arm: sum(r.wall_time_s for r in runs) for arm, runs in results.items()}
    # The lower summed wall time (greedy); a tie keeps AR.
    faster = "ar_standard" if times["ar_standard"] < times["ar"] else "ar"
    assert {row.speedup_baseline for row in rows.values()} == {faster}
    for arm, row in rows.items():
        assert row.speedup_vs_ar == pytest.approx(times[faster] / times[arm], rel=1e-12)
    assert rows[faster].speedup_vs_ar == 1.0
    # Exactness is still against the path's AR, whichever AR was faster.
    assert rows["lookahead N=3 W=2 G=2"].matches_ar == 1.0
    headers = [column.header for column in render_table(list(rows.values()), "t").columns]
    assert headers[2] == f"speedup vs {faster}"
