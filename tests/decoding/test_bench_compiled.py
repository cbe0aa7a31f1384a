"""The bench's compiled mode and its step-cost curves per (dtype, compile), on tiny models."""

from __future__ import annotations

import pytest
import torch

from lade_bench.bench import build_arms, main, render_step_costs, step_cost_curves
from lade_bench.decoding import CompiledForwards, LookaheadParams
from lade_bench.models.tiny import tiny_model
from lade_bench.profiling.processor import processor_identity, processor_label


def test_step_cost_curves_cover_every_dtype_and_mode():
    def load(dtype: torch.dtype) -> torch.nn.Module:
        return tiny_model("llama", dtype=dtype, seed=1)

    curves = step_cost_curves(load, ["float32", "bfloat16"], ["eager", "compiled"], [1, 4, 8], 16, backend="eager")
    assert [(c["dtype"], c["compile_mode"]) for c in curves] == [
        ("float32", "eager"), ("float32", "default"), ("bfloat16", "eager"), ("bfloat16", "default"),
    ]  # fmt: skip
    assert all(c["token_counts"] == [1, 4, 8] and min(c["forward_time_s"]) > 0 for c in curves)
    # Each curve names the CPU it was measured on: another machine's curves are not this one's.
    assert {c["processor"] for c in curves} == {processor_label(processor_identity())}
    table = render_step_costs(curves, "t")
    assert [column.header for column in table.columns][1:] == [
        "float32 eager", "float32 default", "bfloat16 eager", "bfloat16 default",
    ]  # fmt: skip
    assert table.row_count == 3


def test_compiled_bench_arms_match_ar_and_report_their_compile_time():
    model = tiny_model("llama", init_scale=3.0, seed=7)
    compiled = CompiledForwards(mode="default", cache_block=64, backend="eager")
    arms = build_arms(model, None, 12, [LookaheadParams(3, 2, 2)], ["ar", "prompt_lookup", "lookahead"], compiled)
    prompt = [5, 9, 17, 3, 5, 9, 17, 3]
    results = {name: arm(prompt) for name, arm in arms.items()}
    assert len({tuple(r.tokens) for r in results.values()}) == 1
    assert all(r.stats["compile_time_s"] > 0 for r in results.values())


def test_compile_refuses_a_method_without_a_compiled_mode(capsys):
    with pytest.raises(SystemExit):
        main(["--compile", "--methods", "ar", "jacobi"])
    assert "['jacobi'] have no compiled mode" in capsys.readouterr().err
