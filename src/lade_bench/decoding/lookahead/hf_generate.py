"""Lookahead decoding through transformers' own ``generate`` (the 5.x ``custom_generate`` hook).

Usage::

    model.generate(input_ids, custom_generate=lookahead_custom_generate, max_new_tokens=128,
                   do_sample=False, lookahead=LookaheadParams(5, 7, 7))

``generate`` prepares the inputs and the generation config, then calls this function; the return
value is what ``generate`` returns: the prompt followed by the new tokens, shape (1, L + new), or a
``GenerateDecoderOnlyOutput`` holding them when ``return_dict_in_generate=True``.

The same loop is shipped as a transformers custom generation folder (``custom_generate/generate.py``,
loadable by path or from the Hub): ``lade_bench.custom_generate_path()``.
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
from transformers.generation.utils import GenerateDecoderOnlyOutput

from lade_bench.decoding.core.params import DecodingConfigError, LookaheadParams, SamplingParams, require_int
from lade_bench.decoding.lookahead.lookahead import lookahead_generate

# Processors that lookahead reproduces itself (from the generation config); anything else would
# change the target distribution in ways the verification branch does not model.
_SUPPORTED_PROCESSORS = (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

# Per-token outputs of return_dict_in_generate: lookahead verifies several tokens per forward and
# keeps none of these, so asking for one is refused rather than answered with None.
_PER_TOKEN_OUTPUTS = ("output_scores", "output_logits", "output_attentions", "output_hidden_states")


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
) -> torch.LongTensor | GenerateDecoderOnlyOutput:
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
    require_int("lookahead_seed", lookahead_seed, minimum=0)
    _check_generation_config(generation_config)
    # generate drops an all-ones mask before calling here, so any mask left marks padding.
    attention_mask = model_kwargs.get("attention_mask")
    if attention_mask is not None and not bool((attention_mask == 1).all()):
        raise DecodingConfigError(
            "attention_mask with padding (zeros) is not supported: lookahead decoding runs one unpadded "
            "prompt; pass the prompt without padding (allowed: no mask or an all-ones mask)"
        )
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
    sequences = torch.cat([input_ids, new_tokens], dim=-1)
    if generation_config.return_dict_in_generate:
        return GenerateDecoderOnlyOutput(sequences=sequences)  # type: ignore[arg-type]  # int64, as the ids
    return sequences  # type: ignore[return-value]  # int64, as the ids


def _check_generation_config(generation_config: GenerationConfig) -> None:
    """Refuse generation settings lookahead would otherwise ignore silently (beams, per-token outputs)."""
    if (generation_config.num_beams or 1) != 1:
        raise DecodingConfigError(
            f"num_beams={generation_config.num_beams!r} is not supported by lookahead decoding: "
            "use num_beams=1 (greedy, or sampling with do_sample=True)"
        )
    if generation_config.return_dict_in_generate:
        requested = [name for name in _PER_TOKEN_OUTPUTS if getattr(generation_config, name, False)]
        if requested:
            raise DecodingConfigError(
                f"{', '.join(f'{name}=True' for name in requested)} is not supported by lookahead decoding "
                "(it verifies several tokens per forward and keeps no per-token outputs): with "
                "return_dict_in_generate=True the output holds `sequences` only; set these to False"
            )
