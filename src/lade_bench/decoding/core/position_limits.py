"""Position-dependent model features that a method's wider forwards would trigger early.

Some models compute more than rotary angles from a forward's positions:

- LongRoPE (``rope_type="longrope"``: Phi-3, Phi-3.5, PhiMoE) switches every row of a forward from
  the short to the long factors once the forward's largest position id reaches past
  ``original_max_position_embeddings``; transformers' generation then recomputes the whole cache.
- Dynamic NTK scaling (``rope_type="dynamic"``) rescales the frequencies from the largest position id
  seen once it passes ``max_position_embeddings``, and only resets them on a shorter forward.
- Llama 4 attention temperature tuning (``attn_temperature_tuning`` on NoPE layers) scales each
  query by a factor taken from its index in the input plus the cache length, not from its
  position id; the factor is exactly 1 below ``floor_scale``.

Lookahead, Jacobi and prompt lookup place tokens beyond the committed sequence (and lookahead puts
them out of order), so near these thresholds they would use other frequencies or temperatures than
plain decoding. No rotary state is patched here: a generation is allowed when no forward it can run
reaches a threshold (then every row uses exactly what plain decoding uses, the unscaled
frequencies, the short factors and a temperature of 1) and refused before its first forward when
one could.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lade_bench.decoding.core.checks import UnsupportedModelError
from lade_bench.decoding.core.params import LookaheadParams


@dataclass(frozen=True)
class ForwardReach:
    """How far one decoding method's forwards reach beyond the committed sequence.

    Attributes:
        method: the method's name, for messages.
        positions: the largest position id a forward gives any token, minus the position of ``cur``
            (the newest committed token, which plain decoding feeds alone).
        inputs: the most tokens one forward feeds on top of the cache (cur included).
        in_order: every forward's tokens sit at consecutive positions equal to the cache length plus
            their index in the input (a plain causal block: Jacobi, prompt lookup); False when rows
            are reordered (lookahead's window levels and candidates).
        narrower: which of the method's settings shrink the reach, for messages.
    """

    method: str
    positions: int
    inputs: int
    in_order: bool
    narrower: str


def lookahead_reach(params: LookaheadParams) -> ForwardReach:
    """Reach of a lookahead step: window rows up to W+N-3 past cur, candidates up to N-1."""
    candidate_depth = params.ngram - 1 if params.guesses else 0
    return ForwardReach(
        method="lookahead decoding",
        # The prefill's W+N-3 guesses sit right after the prompt: no farther than a step's window.
        positions=max(params.window + params.ngram - 3, candidate_depth),
        inputs=params.tokens_per_step,
        in_order=False,
        narrower="a smaller window W or n-gram size N",
    )


def jacobi_reach(block_size: int) -> ForwardReach:
    """Reach of a Jacobi step: cur and ``block_size`` guesses in order."""
    return ForwardReach("Jacobi decoding", block_size, block_size + 1, True, "a smaller block_size")


def prompt_lookup_reach(num_tokens: int) -> ForwardReach:
    """Reach of a prompt lookup step: the newest token and up to ``num_tokens`` copied candidates."""
    return ForwardReach("prompt lookup decoding", num_tokens, num_tokens + 1, True, "a smaller num_tokens")


@dataclass(frozen=True)
class PositionThreshold:
    """A length past which a model's forward computes differently.

    Attributes:
        feature: what changes there, for messages.
        limit: the longest allowed sequence a forward may see (its largest position id + 1, or for
            index-based features the largest cache length + input index + 1).
        by_index: the feature reads input indices (temperature tuning), not position ids.
    """

    feature: str
    limit: int
    by_index: bool


def position_thresholds(model: torch.nn.Module) -> list[PositionThreshold]:
    """The position-dependent features of ``model`` (its text decoder's config), possibly none."""
    config: Any = model.config  # a transformers config (nn.Module attributes are typed as tensors)
    if hasattr(config, "get_text_config"):
        config = config.get_text_config(decoder=True)
    thresholds = [_rope_threshold(config, rope) for rope in _rope_parameter_sets(config)]
    tuning = _temperature_tuning_threshold(config)
    return [t for t in [*thresholds, tuning] if t is not None]


def _rope_parameter_sets(config: Any) -> list[dict]:
    """The rope parameter dicts of a config: one, or one per layer type (Gemma 3, OLMo 3, ...)."""
    rope = getattr(config, "rope_parameters", None)
    if not isinstance(rope, dict):
        return []
    if all(isinstance(value, dict) for value in rope.values()) and rope:
        return list(rope.values())
    return [rope]


def _rope_threshold(config: Any, rope: dict) -> PositionThreshold | None:
    rope_type = str(rope.get("rope_type", rope.get("type", "default")))
    if rope_type == "longrope":
        # The rotary embedding reads the rope parameters' value, Phi-3's generation the config's.
        key = "original_max_position_embeddings"
        limits = (rope.get(key), getattr(config, key, None))
        limit = min(int(value) for value in limits if value is not None)
        return PositionThreshold(
            f"LongRoPE (rope_type='longrope') switches to its long factors past "
            f"original_max_position_embeddings={limit}",
            limit,
            by_index=False,
        )
    if "dynamic" in rope_type:
        limit = int(config.max_position_embeddings)
        # transformers rescales past max_position_embeddings and puts the unscaled frequencies back
        # only on a forward strictly shorter than it, so the limit keeps one position of margin.
        return PositionThreshold(
            f"dynamic NTK scaling (rope_type={rope_type!r}) rescales its frequencies from "
            f"max_position_embeddings={limit} on",
            limit - 1,
            by_index=False,
        )
    return None


def _temperature_tuning_threshold(config: Any) -> PositionThreshold | None:
    if not getattr(config, "attn_temperature_tuning", False):
        return None
    use_rope = getattr(config, "no_rope_layers", None)
    if use_rope is not None and all(use_rope):  # the tuning only acts on NoPE layers
        return None
    floor_scale = int(config.floor_scale)
    # The scale is log1p(floor((i + 1) / floor_scale)) * attn_scale + 1, exactly 1 while i + 1 < floor_scale.
    return PositionThreshold(
        f"attention temperature tuning (attn_temperature_tuning=True on NoPE layers) scales queries "
        f"by their index in the input plus the cache length, not their position id, from "
        f"floor_scale={floor_scale} on",
        floor_scale - 1,
        by_index=True,
    )


def _applicable(model: torch.nn.Module, reach: ForwardReach) -> list[tuple[PositionThreshold, int]]:
    """Each threshold that ``reach`` can run into, with how far past the committed sequence it reaches."""
    found = []
    for threshold in position_thresholds(model):
        if threshold.by_index and reach.in_order:
            continue  # input index + cache length is the position id: exactly plain decoding
        found.append((threshold, max(reach.positions, reach.inputs - 1) if threshold.by_index else reach.positions))
    return found


def longest_allowed_prompt(model: torch.nn.Module, max_new_tokens: int, reach: ForwardReach) -> int | None:
    """The longest prompt :func:`check_position_limits` allows with this budget (possibly < 1).

    None when no position-dependent feature applies (any prompt length is exact).
    """
    limits = [threshold.limit - extent - max_new_tokens + 1 for threshold, extent in _applicable(model, reach)]
    return min(limits) if limits else None


def check_position_limits(model: torch.nn.Module, prompt_length: int, max_new_tokens: int, reach: ForwardReach) -> None:
    """Raise UnsupportedModelError when a forward of this generation could reach a threshold.

    The last forward starts from at most ``prompt_length + max_new_tokens - 1`` committed tokens (one
    token is still to come), so its sequence is at most that plus the method's reach long.
    """
    committed = prompt_length + max_new_tokens - 1
    for threshold, extent in _applicable(model, reach):
        longest = committed + extent
        if longest <= threshold.limit:
            continue
        most_new = threshold.limit - extent - prompt_length + 1
        shorter = []
        if most_new >= 1:
            shorter.append(f"max_new_tokens <= {most_new} for this {prompt_length}-token prompt")
        elif prompt_length > 1:
            shorter.append(f"a prompt shorter than {prompt_length} tokens")
        model_type = getattr(model.config, "model_type", None)
        raise UnsupportedModelError(
            f"{type(model).__name__} (model_type={model_type!r}) cannot run {reach.method} exactly here: "
            f"{threshold.feature}, and this generation's forwards could reach sequence length {longest} "
            f"(prompt {prompt_length} + max_new_tokens {max_new_tokens} - 1 + {extent} tokens past the "
            f"last accepted one), beyond the {threshold.limit} where every row still computes as in plain "
            f"decoding. Allowed: {', '.join([*shorter, reach.narrower])}, or the autoregressive baseline"
        )
