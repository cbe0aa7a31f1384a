"""CUDA checks of the engine (skipped without a GPU; CI has none, GPU users run them with -m gpu)."""

from __future__ import annotations

import pytest
import torch

from lade_bench.decoding import LookaheadParams, SamplingParams, autoregressive_generate, lookahead_generate
from lade_bench.models.tiny import tiny_model

from .helpers import repetitive_prompt

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("arch", ["llama", "qwen3", "gpt2"])
def test_lookahead_greedy_equals_ar_on_cuda(arch):
    model = tiny_model(arch, init_scale=3.0, seed=7).to("cuda")
    prompt = repetitive_prompt(60, seed=1)
    reference = autoregressive_generate(model, prompt, 100)
    result = lookahead_generate(model, prompt, LookaheadParams(5, 7, 7), 100)
    assert result.tokens == reference.tokens
    assert result.forward_time_s <= result.wall_time_s


def test_lookahead_sampling_runs_on_cuda():
    model = tiny_model("llama", seed=3).to("cuda")
    sampling = SamplingParams(do_sample=True, temperature=1.0, top_p=0.9)
    result = lookahead_generate(model, repetitive_prompt(40, seed=2), LookaheadParams(4, 4, 4), 50, sampling=sampling)
    assert len(result.tokens) == 50 and sum(result.accept_lengths) == 50
