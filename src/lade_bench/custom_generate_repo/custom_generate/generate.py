"""Lookahead decoding (LADE) as a transformers custom generation method.

transformers runs this file for ``model.generate(custom_generate=<the folder holding it>,
trust_remote_code=True, ...)``, from a local path (``lade_bench.custom_generate_path()``) or a Hub
repository holding the same folder. It is deliberately thin: lade_bench's engine
(``lade_bench.decoding.lookahead_generate``, reached through ``hf_generate.lookahead_custom_generate``)
does the decoding; this file maps ``generate``'s arguments onto it and refuses the ones it cannot
honour. Greedy output is token-identical to plain ``model.generate(do_sample=False)``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationMixin

from lade_bench.decoding.core.params import DecodingConfigError, LookaheadParams
from lade_bench.decoding.lookahead.hf_generate import lookahead_custom_generate

# generate() keyword -> LookaheadParams field. Keywords left out keep LookaheadParams' own defaults,
# so the defaults are stated in one place only.
LOOKAHEAD_KWARGS = {
    "lookahead_n": "ngram",
    "lookahead_w": "window",
    "lookahead_g": "guesses",
    "lookahead_prompt_as_reference": "prompt_as_reference",
    "lookahead_verification": "verification",
}


def generate(
    model: Any,
    inputs: torch.Tensor | None = None,
    generation_config: Any = None,
    logits_processor: Any = None,
    stopping_criteria: Any = None,
    *,
    streamer: Any = None,
    assistant_model: Any = None,
    lookahead_seed: int = 0,
    **kwargs: Any,
) -> Any:
    """Generate with lookahead decoding; called by transformers with ``generate``'s own arguments.

    Args:
        model: the decoder-only model ``generate`` was called on (eager or SDPA attention).
        inputs: the prompt ids, 1 x L (batch size 1); ``input_ids=`` in ``kwargs`` works too.
        generation_config: as for ``generate``; its ``max_new_tokens`` / ``max_length``,
            ``eos_token_id``, ``do_sample``, ``temperature``, ``top_k``, ``top_p`` and
            ``return_dict_in_generate`` are honoured, and ``generate``'s keyword overrides apply.
        logits_processor: only temperature / top-k / top-p warpers (lookahead reproduces them itself).
        stopping_criteria: not supported (refused): lookahead stops at EOS and the length limit.
        streamer: not supported (refused here, before ``generate`` would feed it the prompt).
        assistant_model: not supported (refused): lookahead needs no draft model.
        lookahead_seed: seeds the window initialisation and every sampling draw.
        **kwargs: ``lookahead_n`` (N), ``lookahead_w`` (W), ``lookahead_g`` (G),
            ``lookahead_prompt_as_reference``, ``lookahead_verification`` ("flat" or "trie"); the
            rest go to ``generate`` (``max_new_tokens``, ``do_sample``, ``attention_mask``, ...); the
            engine refuses what it cannot honour there (beams, a batch, padding).

    Returns:
        What ``generate`` returns: a 1 x (L + new) tensor of the prompt and the new ids, or a
        ``GenerateDecoderOnlyOutput`` holding it as ``sequences`` with ``return_dict_in_generate``.
    """
    params = lookahead_params(kwargs)
    input_ids = inputs if inputs is not None else kwargs.pop("input_ids", None)
    check_single_prompt(input_ids, kwargs)
    # transformers would accept these and then never consult them on the lookahead path: refuse.
    if stopping_criteria:  # an empty StoppingCriteriaList is the same as none
        raise DecodingConfigError(
            "stopping_criteria is not supported by lookahead decoding: leave it unset (it stops at EOS "
            "and at max_new_tokens / max_length)"
        )
    if streamer is not None:
        raise DecodingConfigError("streamer is not supported by lookahead decoding: leave it unset")
    if assistant_model is not None:
        raise DecodingConfigError(
            "assistant_model is not supported by lookahead decoding (it drafts from its own n-gram pool): "
            "leave it unset"
        )
    # GenerationMixin.generate, not model.generate: a model loaded from a repo holding this folder
    # has its generate replaced by this function, and calling it would recurse.
    return GenerationMixin.generate(
        model,
        input_ids,
        generation_config,
        logits_processor,
        custom_generate=lookahead_custom_generate,
        lookahead=params,
        lookahead_seed=lookahead_seed,
        **kwargs,
    )


def lookahead_params(kwargs: dict[str, Any]) -> LookaheadParams:
    """Pop the ``lookahead_*`` keywords from ``kwargs`` into LookaheadParams (unset: its defaults).

    Raises:
        DecodingConfigError: for an unknown ``lookahead_*`` keyword or a value LookaheadParams refuses.
    """
    if "lookahead" in kwargs:
        # hf_generate's callable takes a LookaheadParams object under this name; this folder's
        # interface is the plain keywords, and taking both would leave two sources of N, W, G.
        raise DecodingConfigError(
            f"lookahead= is not an argument of this custom generation folder: use {sorted(LOOKAHEAD_KWARGS)}"
        )
    unknown = sorted(k for k in kwargs if k.startswith("lookahead_") and k not in LOOKAHEAD_KWARGS)
    if unknown:
        raise DecodingConfigError(
            f"unknown lookahead argument(s) {unknown}: allowed are {sorted(LOOKAHEAD_KWARGS)} and lookahead_seed"
        )
    given = {keyword: kwargs.pop(keyword) for keyword in list(kwargs) if keyword in LOOKAHEAD_KWARGS}
    for keyword, value in given.items():
        # Each field is validated on its own, so trying them one at a time names the bad keyword
        # (LookaheadParams' message names its field: ngram, window, ...).
        try:
            LookaheadParams(**{LOOKAHEAD_KWARGS[keyword]: value})
        except DecodingConfigError as error:
            raise DecodingConfigError(f"{keyword}={value!r} is not allowed ({error})") from error
    return LookaheadParams(**{LOOKAHEAD_KWARGS[keyword]: value for keyword, value in given.items()})


def check_single_prompt(input_ids: torch.Tensor | None, kwargs: dict[str, Any]) -> None:
    """Refuse a prompt given as embeddings, or none at all (the engine decodes token ids).

    Raises:
        DecodingConfigError: for inputs_embeds or no prompt.
    """
    if kwargs.get("inputs_embeds") is not None:
        raise DecodingConfigError(
            "inputs_embeds is not supported by lookahead decoding: pass the prompt as input_ids (1 x L)"
        )
    if input_ids is None:
        raise DecodingConfigError("no prompt given: pass input_ids of shape 1 x L (batch size 1)")
    # A batch of several prompts is refused by the engine itself (checks.prompt_ids_as_list).
