"""Parameter and result types shared by every decoding method.

Validation lives here so that bad values fail before any model is loaded or any forward pass runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# Attention implementations that honour lookahead's arbitrary step mask with explicit position ids:
# eager and SDPA as a 4D additive float mask, flex_attention as a BlockMask (see masks.py). The
# FlashAttention kernels take only causal/sliding masks, so they cannot.
MASK_CAPABLE_ATTENTION = ("eager", "sdpa", "flex_attention")

# Those of them that take the mask as a flex_attention BlockMask rather than a float tensor.
BLOCK_MASK_ATTENTION = ("flex_attention",)

# The batch-invariant step path's attention (``core.batch_invariant``): not a config value of its own
# (``step_path=batch_invariant`` selects it) but what such a model runs, taking the float mask.
BATCH_INVARIANT_ATTENTION = "lade_batch_invariant"

# A cell's step path (``step_path``): ``standard`` runs the model's own kernels; ``batch_invariant``
# (``core.batch_invariant``) makes every row of a forward bit-identical however many rows share it.
# Every cell recorded before the setting ran the standard path.
STANDARD_STEP_PATH = "standard"
BATCH_INVARIANT_STEP_PATH = "batch_invariant"
STEP_PATHS = (STANDARD_STEP_PATH, BATCH_INVARIANT_STEP_PATH)
# Attention a batch-invariant cell may be configured with: the model loads with it, then the path
# replaces it with its own (flex_attention's BlockMasks and FlashAttention take another mask form).
BATCH_INVARIANT_LOAD_ATTENTION = ("sdpa", "eager")


class DecodingConfigError(ValueError):
    """A decoding parameter has a value outside its allowed range."""


class UnsupportedModelError(ValueError):
    """The model cannot run lookahead decoding exactly (and why)."""


# How a lookahead step lays out its G candidates: "flat" feeds each one as its own N-1-token chain
# (the paper's layout); "trie" merges their shared prefixes into a token trie (same acceptance).
VERIFICATION_LAYOUTS: tuple[str, ...] = ("flat", "trie")


# The baselines' defaults, stated here once: the engine's keyword defaults and the config schema read them.
# Candidate tokens copied from the prompt per step: the prompt-lookup-decoding reference value.
PROMPT_LOOKUP_NUM_TOKENS = 10
PROMPT_LOOKUP_MAX_NGRAM = 2  # longest n-gram matched against the prompt (transformers' default)
JACOBI_BLOCK_SIZE = 7  # guessed tokens per Jacobi step: the default window W=7, for a like-for-like ablation
# The assisted arm's draft settings: transformers' own defaults, so the arm measures its assisted
# generation as shipped (docs/assisted.md).
ASSISTED_NUM_TOKENS = 20  # most draft tokens per target forward
ASSISTED_SCHEDULE = "constant"  # heuristic_transient carries state across generations (refused)
ASSISTED_CONFIDENCE_THRESHOLD = 0.4  # the draft stops once its top probability is below this (0: off)
ASSISTED_LOOKBEHIND = 10  # universal assisted decoding: tokens re-encoded to align the tokenisations


@dataclass(frozen=True)
class LookaheadParams:
    """Shape of the lookahead window and verification branch.

    Attributes:
        ngram: N, the n-gram size; the window has N-1 levels. Allowed: N >= 2.
        window: W, the number of parallel Jacobi columns. Allowed: W >= 1.
        guesses: G, the most candidates verified per step and the per-key pool cap. Allowed: G >= 0
            (G = 0 disables verification: one token per step).
        prompt_as_reference: seed the n-gram pool with the prompt's n-grams and feed accepted output
            n-grams back into it.
        verification: layout of the verification branch, one of ``VERIFICATION_LAYOUTS``: ``"flat"``
            (G independent chains, the paper's) or ``"trie"`` (shared prefixes fed once; the same
            accepted tokens and step count, never more input tokens).

    The defaults are the official README setting (also the paper's for 33B models): a balanced window
    and verification branch that works on most GPUs. On a CPU every extra input token costs real time,
    so lookahead can be slower than AR there even with compression > 1 (``lookahead=cpu_small``); GPU
    runs of 7B models should use the paper's (``lookahead=paper_7b``: W=15, G=15). Prompt as
    reference is on (paper: 1.78x -> 1.88x on MT-Bench). ``conf/lookahead/default.yaml`` is these
    values: the config schema reads them from here.
    """

    ngram: int = 5
    window: int = 7
    guesses: int = 7
    prompt_as_reference: bool = True
    verification: str = "flat"

    def __post_init__(self) -> None:
        require_int("ngram (N)", self.ngram, minimum=2)
        require_int("window (W)", self.window, minimum=1)
        require_int("guesses (G)", self.guesses, minimum=0)
        if not isinstance(self.prompt_as_reference, bool):
            raise DecodingConfigError(
                f"prompt_as_reference={self.prompt_as_reference!r} is not allowed: use true or false"
            )
        if not isinstance(self.verification, str) or self.verification not in VERIFICATION_LAYOUTS:
            raise DecodingConfigError(
                f"verification={self.verification!r} is not allowed: use one of {', '.join(VERIFICATION_LAYOUTS)}"
            )

    @property
    def tokens_per_step(self) -> int:
        """Most input tokens of one steady-state step: (W + G) * (N - 1) (the flat layout's count;
        a trie step feeds at most this many)."""
        return (self.window + self.guesses) * (self.ngram - 1)


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings; ``do_sample=False`` means greedy and ignores the rest.

    The warping (temperature, then top-k, then top-p) is transformers' own, so lookahead sampling and
    ``model.generate`` sample from the same distribution.
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.do_sample, bool):
            raise DecodingConfigError(f"do_sample={self.do_sample!r} is not allowed: use true or false")
        if (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, (int, float))
            or not math.isfinite(self.temperature)
            or self.temperature <= 0
        ):
            raise DecodingConfigError(
                f"temperature={self.temperature!r} is not allowed: use a finite number > 0 "
                "(for greedy decoding set do_sample=false instead of temperature 0)"
            )
        require_int("top_k", self.top_k, minimum=0)
        if isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float)) or not (0 < self.top_p <= 1):
            raise DecodingConfigError(f"top_p={self.top_p!r} is not allowed: use a number in (0, 1]")


@dataclass
class DecodeResult:
    """What every decoding method returns for one prompt.

    Step counting (identical for every method): ``steps`` counts every forward pass of the model for
    this generation, the prefill included. Autoregressive decoding therefore has ``steps ==
    len(tokens)`` and a compression ratio of exactly 1.0, and ``accept_lengths`` (tokens emitted by
    each forward pass, prefill first) sums to ``len(tokens)``. Every forward emits at least one token,
    except a prefill that holds back the prompt's last token for the first decode step (Token
    Recycling's authors' loop, ``draft_tree_generate(hold_last_prompt_token=True)``): it emits none (0).

    Attributes:
        tokens: generated token ids (prompt excluded), EOS included when it was produced.
        steps: forward passes, prefill included.
        accept_lengths: tokens emitted per forward pass, in order; ``len == steps``.
        wall_time_s: wall-clock time of the whole generation (prefill + decode), device-synchronised.
        forward_time_s: part of ``wall_time_s`` spent inside model forward calls (every method; the
            ``model.generate`` arms time the target's forwards with a forward hook pair; ``nan`` for
            compiled AR, whose forwards run where no hook reaches, and in rows recorded before).
        method: name of the method that produced it.
        stats: method-specific counters (e.g. pool hit rate).
        step_tokens: input tokens of each forward pass, aligned with ``accept_lengths`` (prefill
            first: the prompt (its last token held back, see above), plus the window's first level for
            lookahead); ``None`` when not counted.
            What a step costs on a compute-bound device grows with this number.
    """

    tokens: list[int]
    steps: int
    accept_lengths: list[int]
    wall_time_s: float
    forward_time_s: float = float("nan")
    method: str = ""
    stats: dict[str, float] = field(default_factory=dict)
    step_tokens: list[int] | None = None

    @property
    def new_tokens(self) -> int:
        """Number of generated tokens."""
        return len(self.tokens)

    @property
    def compression_ratio(self) -> float:
        """New tokens per forward pass."""
        return self.new_tokens / self.steps if self.steps else float("nan")

    @property
    def mean_decode_step_tokens(self) -> float:
        """Mean input tokens per forward after the prefill (NaN when not counted or no such step)."""
        if not self.step_tokens or len(self.step_tokens) < 2:
            return float("nan")
        decode = self.step_tokens[1:]
        return sum(decode) / len(decode)

    @property
    def tokens_per_s(self) -> float:
        """Generated tokens per second of wall time."""
        return self.new_tokens / self.wall_time_s if self.wall_time_s > 0 else float("nan")


def validate_max_new_tokens(max_new_tokens: int) -> None:
    """Raise DecodingConfigError unless ``max_new_tokens`` is an int >= 1."""
    require_int("max_new_tokens", max_new_tokens, minimum=1)


def require_int(name: str, value: object, minimum: int) -> None:
    """Raise DecodingConfigError naming ``name`` unless ``value`` is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DecodingConfigError(f"{name}={value!r} is not allowed: use an integer >= {minimum}")


def truncate_at_stop(accepted: list[int], budget: int, stop_ids: frozenset[int]) -> tuple[list[int], bool]:
    """Cut a step's accepted tokens at the remaining ``budget`` and after the first stop id.

    Returns the tokens to emit and whether generation is over (budget used up or a stop id emitted).
    """
    kept = accepted[:budget]
    for i, token in enumerate(kept):
        if token in stop_ids:
            return kept[: i + 1], True
    return kept, len(kept) >= budget
