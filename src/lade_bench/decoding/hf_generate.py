"""Lookahead decoding through transformers' own ``generate`` (the 5.x ``custom_generate`` hook).

Usage::

    model.generate(input_ids, custom_generate=lookahead_custom_generate, max_new_tokens=128,
                   do_sample=False, lookahead=LookaheadParams(5, 7, 7))

``generate`` prepares the inputs and the generation config, then calls this function; the return
value is what ``generate`` returns: the prompt followed by the new tokens, shape (1, L + new).
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig
from transformers.generation.logits_process import (
    LogitsProcessorList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from lade_bench.decoding.lookahead import lookahead_generate
from lade_bench.decoding.params import DecodingConfigError, LookaheadParams, SamplingParams

# Processors that lookahead reproduces itself (from the generation config); anything else would
# change the target distribution in ways the verification branch does not model.
_SUPPORTED_PROCESSORS = (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)


def lookahead_custom_generate(
    model: torch.nn.Module,
    input_ids: torch.LongTensor,
    logits_processor: LogitsProcessorList,
    stopping_criteria,
    generation_config: GenerationConfig,
    synced_gpus: bool = False,
    streamer=None,
    lookahead: LookaheadParams | None = None,
    lookahead_seed: int = 0,
    **model_kwargs,
) -> torch.LongTensor:
    """Decoding loop for ``model.generate(custom_generate=...)``; see the module docstring.

    Args:
        lookahead: N, W, G and prompt-as-reference (defaults to ``LookaheadParams()``).
        lookahead_seed: seeds the window initialisation and sampling draws.
    """
    unsupported = [type(p).__name__ for p in logits_processor if not isinstance(p, _SUPPORTED_PROCESSORS)]
    if unsupported:
        raise DecodingConfigError(
            f"logits processors {unsupported} are not supported by lookahead decoding; "
            f"allowed: {[cls.__name__ for cls in _SUPPORTED_PROCESSORS]} (temperature, top_k, top_p)"
        )
    if streamer is not None:
        raise DecodingConfigError("streamer is not supported by lookahead decoding: use streamer=None")
    prompt_length = input_ids.shape[-1]
    max_new_tokens = generation_config.max_new_tokens
    if max_new_tokens is None:
        max_new_tokens = generation_config.max_length - prompt_length
    sampling = SamplingParams(
        do_sample=bool(generation_config.do_sample),
        temperature=generation_config.temperature if generation_config.temperature is not None else 1.0,
        top_k=generation_config.top_k or 0,
        top_p=generation_config.top_p if generation_config.top_p is not None else 1.0,
    )
    result = lookahead_generate(
        model,
        input_ids,
        lookahead or LookaheadParams(),
        max_new_tokens,
        sampling=sampling,
        eos_token_id=generation_config.eos_token_id,
        seed=lookahead_seed,
    )
    new_tokens = torch.tensor([result.tokens], dtype=input_ids.dtype, device=input_ids.device)
    return torch.cat([input_ids, new_tokens], dim=-1)  # type: ignore[return-value]  # int64, as the ids
