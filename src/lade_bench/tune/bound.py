"""The speedup a lookahead configuration can reach at most on a device, from its forward-time curve.

A lookahead step that emits ``a`` tokens and feeds ``k`` input tokens costs at least the forward
time ``t(k)``; AR spends ``a * tau`` on the same tokens, with ``tau`` AR's time per token. So

    speedup <= a * tau / t(k)

with ``t`` from the device profile: the bound ignores the host-side cost of the window and the pool,
which only lowers the real speedup. The issue's form takes ``tau = t(1)``, one profiled one-token
forward pass; the tuner takes ``tau`` as AR's *measured* wall time per generated token on the probe
samples (prefill included), which also holds AR's own per-step host overhead (``model.generate``'s
logits processing, cache bookkeeping) and so is never below ``t(1)``. With ``t(1)`` alone the bound
would fall below the real speedup wherever that overhead is not negligible (small models, fast GPUs)
and prune configurations that can win. Without an AR measurement yet, ``t(1)`` is used (the first
configuration has nothing to beat, so it is never pruned with it). The tuner uses the bound twice:

* before measuring a configuration (:func:`prior_bound`): every step accepts the most it can (N
  tokens) at the fewest input tokens that allow it (the window and one candidate). No steady-state
  step does better, so a configuration whose prior bound is at or below the best speedup measured so
  far is skipped unmeasured;
* while measuring (:func:`measured_bound`): ``a`` and ``k`` are the accepted tokens per step and the
  input tokens per step measured on the probe units so far. This is the issue's bound, evaluated on
  the probe's own acceptance; a configuration whose bound on its first units is at or below the best
  measured speedup stops early (Optuna's pruning). It is an estimate from the units seen, not a
  guarantee for the units not yet seen.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import step_cost


def speedup_bound(
    accepted_per_step: float, step_tokens: float, profile: Mapping[str, Any], token_time_s: float | None = None
) -> float:
    """``accepted_per_step * tau / t(step_tokens)``: the most speedup such steps can give.

    Args:
        accepted_per_step: tokens emitted per forward pass (the compression ratio), > 0.
        step_tokens: input tokens per forward pass, >= 1.
        profile: the device profile (``token_counts``, ``forward_time_s``).
        token_time_s: ``tau``, AR's measured time per token; None: ``t(1)``.

    Raises:
        ValueError: a non-positive or non-finite input, or ``step_tokens`` outside the profile.
    """
    if not (math.isfinite(accepted_per_step) and accepted_per_step > 0):
        raise ValueError(f"accepted_per_step={accepted_per_step!r} must be a finite number > 0")
    if not (math.isfinite(step_tokens) and step_tokens >= 1):
        raise ValueError(f"step_tokens={step_tokens!r} must be a finite number >= 1")
    return accepted_per_step / step_cost(profile, step_tokens, token_time_s)


def window_tokens(params: LookaheadParams) -> int:
    """Input tokens of a steady-state step without any candidate: the window, ``W (N - 1)``."""
    return params.window * (params.ngram - 1)


def prior_bound(params: LookaheadParams, profile: Mapping[str, Any], token_time_s: float | None = None) -> float:
    """The bound before any measurement, from the configuration's shape alone.

    A steady-state step that emits more than one token verified a candidate: it fed the window and
    at least one candidate's N - 1 tokens, ``(W + 1)(N - 1)``, and emitted at most N tokens (N - 1
    verified tokens plus the model's own next one). A step without a hit emits one token and feeds at
    least the window. The speedup, a ratio of sums over steps, is at most the best of these per-step
    ratios: ``max(N tau / t((W + 1)(N - 1)), tau / t(W (N - 1)))`` (only the second with G = 0).
    """
    window = max(window_tokens(params), 1)
    no_hit = speedup_bound(1.0, float(window), profile, token_time_s)
    if params.guesses == 0:
        return no_hit
    hit = speedup_bound(float(params.ngram), float(window + params.ngram - 1), profile, token_time_s)
    return max(hit, no_hit)


def measured_bound(
    new_tokens: int,
    steps: int,
    decode_step_tokens: int,
    decode_steps: int,
    profile: Mapping[str, Any],
    token_time_s: float | None = None,
) -> float:
    """The bound from measured counts: accepted tokens per step and mean input tokens per decode step.

    Args:
        new_tokens: tokens generated, summed over the units measured.
        steps: forward passes (prefill included), summed likewise: ``new_tokens / steps`` is the
            compression ratio the report shows.
        decode_step_tokens: input tokens of the decode steps (prefill excluded), summed.
        decode_steps: decode steps (forward passes after the prefill), summed.
        profile: the device profile.
        token_time_s: ``tau``, AR's measured time per token on the same units; None: ``t(1)``.
    """
    if steps < 1 or new_tokens < 1:
        raise ValueError(f"need at least one step and one token, got steps={steps}, new_tokens={new_tokens}")
    mean_tokens = decode_step_tokens / decode_steps if decode_steps > 0 else 1.0
    return speedup_bound(new_tokens / steps, max(mean_tokens, 1.0), profile, token_time_s)


def should_prune(bound: float, best: float | None) -> bool:
    """True when a configuration bounded by ``bound`` cannot beat the best measured speedup ``best``."""
    return best is not None and math.isfinite(best) and bound <= best
