"""The decoding engine: pure functions of (model, prompt ids, parameters), no Hydra and no file I/O.

Every method returns a :class:`DecodeResult` with the generated ids and per-step statistics, counted
the same way for all of them (``steps`` = forward passes, prefill included). How lookahead runs the
model is an executor behind the public seam of ``executor.py`` (:class:`StepExecutor`).


The names below load on first use (PEP 562): ``lade_bench.decoding.params`` and the registry's plan
checks import no torch, and the config schema reads the engine's defaults from ``params`` without
waiting for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lade_bench.decoding.autoregressive import autoregressive_generate, prompt_lookup_generate
    from lade_bench.decoding.checks import (
        BLOCK_MASK_ATTENTION,
        MASK_CAPABLE_ATTENTION,
        UnsupportedModelError,
        check_custom_mask_support,
        flex_attention_available,
    )
    from lade_bench.decoding.draft_tree import (
        Drafter,
        DraftTree,
        TreeStep,
        draft_reach,
        draft_tree_generate,
        verify_tree_greedy,
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

# Public name -> the module that defines it.
_EXPORTS = {
    "autoregressive_generate": "lade_bench.decoding.autoregressive",
    "prompt_lookup_generate": "lade_bench.decoding.autoregressive",
    "BLOCK_MASK_ATTENTION": "lade_bench.decoding.checks",
    "MASK_CAPABLE_ATTENTION": "lade_bench.decoding.checks",
    "flex_attention_available": "lade_bench.decoding.checks",
    "UnsupportedModelError": "lade_bench.decoding.checks",
    "check_custom_mask_support": "lade_bench.decoding.checks",
    "COMPILE_MODES": "lade_bench.decoding.compiled",
    "CompiledForwards": "lade_bench.decoding.compiled",
    "DraftTree": "lade_bench.decoding.draft_tree",
    "Drafter": "lade_bench.decoding.draft_tree",
    "TreeStep": "lade_bench.decoding.draft_tree",
    "draft_reach": "lade_bench.decoding.draft_tree",
    "draft_tree_generate": "lade_bench.decoding.draft_tree",
    "verify_tree_greedy": "lade_bench.decoding.draft_tree",
    "ForwardRecord": "lade_bench.decoding.executor",
    "StepExecutor": "lade_bench.decoding.executor",
    "StepInput": "lade_bench.decoding.executor",
    "StepOutput": "lade_bench.decoding.executor",
    "jacobi_generate": "lade_bench.decoding.jacobi",
    "lookahead_generate": "lade_bench.decoding.lookahead",
    "VERIFICATION_LAYOUTS": "lade_bench.decoding.params",
    "DecodeResult": "lade_bench.decoding.params",
    "DecodingConfigError": "lade_bench.decoding.params",
    "LookaheadParams": "lade_bench.decoding.params",
    "SamplingParams": "lade_bench.decoding.params",
}

__all__ = [
    "BLOCK_MASK_ATTENTION",
    "COMPILE_MODES",
    "CompiledForwards",
    "DecodeResult",
    "DecodingConfigError",
    "DraftTree",
    "Drafter",
    "ForwardRecord",
    "LookaheadParams",
    "MASK_CAPABLE_ATTENTION",
    "SamplingParams",
    "StepExecutor",
    "StepInput",
    "StepOutput",
    "TreeStep",
    "UnsupportedModelError",
    "VERIFICATION_LAYOUTS",
    "autoregressive_generate",
    "check_custom_mask_support",
    "draft_reach",
    "draft_tree_generate",
    "flex_attention_available",
    "jacobi_generate",
    "lookahead_generate",
    "prompt_lookup_generate",
    "verify_tree_greedy",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first access (module ``__getattr__``, PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
