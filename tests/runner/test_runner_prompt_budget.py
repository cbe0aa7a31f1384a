"""The runner's prompt budget keeps every arm below position-dependent thresholds (LongRoPE here)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from lade_bench.decoding import LookaheadParams, UnsupportedModelError
from lade_bench.models.tiny import tiny_model
from lade_bench.models.tiny_position_scaled import longrope_phi3_config, tiny_position_scaled_model
from lade_bench.runner.plan_parts import RunCounts
from lade_bench.runner.samples import prompt_budget


def _plan(arms: list[str], max_new_tokens: int, max_prompt_tokens: int | None = None) -> SimpleNamespace:
    # The plan's parsed sections (CellPlan.settings), as the runner hands them to each method.
    settings = {
        "lookahead": LookaheadParams(4, 5, 5),
        "jacobi": SimpleNamespace(block_size=5),
        "prompt_lookup": SimpleNamespace(num_tokens=10),
    }
    dataset = SimpleNamespace(max_prompt_tokens=max_prompt_tokens)
    return SimpleNamespace(dataset=dataset, counts=RunCounts(max_new_tokens), arms=arms, settings=settings)


@pytest.fixture(scope="module")
def longrope_phi3() -> torch.nn.Module:
    # original_max_position_embeddings=48, max_position_embeddings=192
    return tiny_position_scaled_model(longrope_phi3_config(48))


def test_budget_stops_each_arm_short_of_the_long_factors(longrope_phi3):
    # 48 - (W+N-3 = 6) - 2 turns x 8 tokens + 1 for lookahead; 48 - 10 - 16 + 1 for prompt lookup.
    assert prompt_budget(_plan(["ar", "lookahead"], 8), longrope_phi3, 2) == 27
    assert prompt_budget(_plan(["ar", "lookahead", "prompt_lookup"], 8), longrope_phi3, 2) == 23
    assert prompt_budget(_plan(["ar", "lookahead"], 8, max_prompt_tokens=100), longrope_phi3, 2) == 27
    assert prompt_budget(_plan(["ar", "lookahead"], 8, max_prompt_tokens=10), longrope_phi3, 2) == 10
    # The plain baseline alone is transformers' own decoding: only the context applies.
    assert prompt_budget(_plan(["ar"], 8), longrope_phi3, 2) == 192 - 16


def test_budget_refuses_when_no_prompt_fits(longrope_phi3):
    with pytest.raises(UnsupportedModelError, match="LongRoPE.*original_max_position_embeddings=48"):
        prompt_budget(_plan(["ar", "lookahead"], 50), longrope_phi3, 1)


def test_models_without_position_thresholds_keep_the_context_budget():
    model = tiny_model("llama", max_positions=128)
    assert prompt_budget(_plan(["ar", "lookahead"], 8), model, 2) == 128 - 16 - (4 + 5)
