"""The decoding engine: pure functions of (model, prompt ids, parameters), no Hydra and no file I/O.

Every method returns a :class:`DecodeResult` with the generated ids and per-step statistics, counted
the same way for all of them (``steps`` = forward passes, prefill included). How lookahead runs the
model is an executor behind the public seam of ``executor.py`` (:class:`StepExecutor`).
"""

from lade_bench.decoding.autoregressive import autoregressive_generate, prompt_lookup_generate
from lade_bench.decoding.checks import (
    BLOCK_MASK_ATTENTION,
    MASK_CAPABLE_ATTENTION,
    UnsupportedModelError,
    check_custom_mask_support,
    flex_attention_available,
)
from lade_bench.decoding.executor import ForwardRecord, StepExecutor, StepInput, StepOutput
from lade_bench.decoding.jacobi import jacobi_generate
from lade_bench.decoding.lookahead import lookahead_generate
from lade_bench.decoding.params import (
    VERIFICATION_LAYOUTS,
    DecodeResult,
    DecodingConfigError,
    LookaheadParams,
    SamplingParams,
)

__all__ = [
    "BLOCK_MASK_ATTENTION",
    "MASK_CAPABLE_ATTENTION",
    "VERIFICATION_LAYOUTS",
    "DecodeResult",
    "DecodingConfigError",
    "ForwardRecord",
    "LookaheadParams",
    "SamplingParams",
    "StepExecutor",
    "StepInput",
    "StepOutput",
    "UnsupportedModelError",
    "autoregressive_generate",
    "check_custom_mask_support",
    "flex_attention_available",
    "jacobi_generate",
    "lookahead_generate",
    "prompt_lookup_generate",
]
