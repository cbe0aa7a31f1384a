"""The target distribution for sampling: transformers' own warpers, in generate's order."""

from __future__ import annotations

import torch
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from lade_bench.decoding.core.params import SamplingParams


def build_warpers(sampling: SamplingParams) -> LogitsProcessorList:
    """Temperature, top-k and top-p warpers exactly as ``model.generate`` builds them."""
    warpers = LogitsProcessorList()
    if sampling.temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(sampling.temperature))
    if sampling.top_k != 0:
        warpers.append(TopKLogitsWarper(top_k=sampling.top_k, min_tokens_to_keep=1))
    if sampling.top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p=sampling.top_p, min_tokens_to_keep=1))
    return warpers


def warped_probabilities(logits: torch.Tensor, warpers: LogitsProcessorList) -> torch.Tensor:
    """Softmax of the warped logits; ``logits`` is (V,) and the result a fresh float32 (V,) tensor."""
    # The warpers (temperature, top-k, top-p) read only the scores, never the input ids.
    scores = warpers(None, logits.float()[None, :].clone())  # type: ignore[arg-type]
    return torch.softmax(scores, dim=-1)[0]
