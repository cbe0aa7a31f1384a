"""The decoding engine: functions of (model, prompt ids, parameters); no Hydra, and it writes no file.

Every method returns a :class:`DecodeResult` with the generated ids and per-step statistics, counted
the same way for all of them (``steps`` = forward passes, prefill included). How lookahead runs the
model is an executor behind the public seam of ``core/executor.py`` (:class:`StepExecutor`).

Rooms, lowest first; a room imports only from rooms below it (``tests/test_layout.py`` keeps it so):

* ``core/``: the shared step machinery (parameters and results, executor, forward, KV cache, masks and
  layouts, verification, emission, timing, position limits, compiled steps, capability checks);
* ``model_checks/``: the probe every drafting method runs on the model before its first step;
* ``lookahead/``: lookahead decoding's window, pool, loop, shards and ``generate()`` front;
* ``drafters/``: the draft-tree seam and the methods that draft on it (prompt lookup, Token Recycling,
  SuffixDecoding, REST, SAM-Decoding, PIA);
* ``baselines/``: autoregressive, assisted generation and Jacobi decoding.

The one file the engine reads is a drafter's datastore (REST's, SAM-Decoding's static corpus), through
``lade_bench.rest_datastore.reader``: the one ``lade_bench`` module outside ``decoding/`` the engine
imports, itself importing none on import. Building, resolving and leak-checking datastores live on that
package's other side, which the engine never imports (``tests/test_layout.py`` keeps both so).

The names below load on first use (PEP 562): ``lade_bench.decoding.core.params`` and the registry's plan
checks import no torch, and the config schema reads the engine's defaults from ``params`` without
waiting for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lade_bench.decoding.baselines.autoregressive import autoregressive_generate
    from lade_bench.decoding.baselines.jacobi import jacobi_generate
    from lade_bench.decoding.core.checks import (
        BLOCK_MASK_ATTENTION,
        MASK_CAPABLE_ATTENTION,
        UnsupportedModelError,
        check_custom_mask_support,
        flex_attention_available,
    )
    from lade_bench.decoding.core.executor import ForwardRecord, StepExecutor, StepInput, StepOutput
    from lade_bench.decoding.core.params import (
        VERIFICATION_LAYOUTS,
        DecodeResult,
        DecodingConfigError,
        LookaheadParams,
        SamplingParams,
    )
    from lade_bench.decoding.drafters.draft_tree import (
        Drafter,
        DraftTree,
        TreeStep,
        draft_reach,
        draft_tree_generate,
        verify_tree_greedy,
    )
    from lade_bench.decoding.drafters.prompt_lookup import prompt_lookup_generate
    from lade_bench.decoding.lookahead.lookahead import lookahead_generate

# Public name -> the module that defines it.
_EXPORTS = {
    "autoregressive_generate": "lade_bench.decoding.baselines.autoregressive",
    "prompt_lookup_generate": "lade_bench.decoding.drafters.prompt_lookup",
    "BLOCK_MASK_ATTENTION": "lade_bench.decoding.core.checks",
    "MASK_CAPABLE_ATTENTION": "lade_bench.decoding.core.checks",
    "flex_attention_available": "lade_bench.decoding.core.checks",
    "UnsupportedModelError": "lade_bench.decoding.core.checks",
    "check_custom_mask_support": "lade_bench.decoding.core.checks",
    "COMPILE_MODES": "lade_bench.decoding.core.compiled",
    "CompiledForwards": "lade_bench.decoding.core.compiled",
    "DraftTree": "lade_bench.decoding.drafters.draft_tree",
    "Drafter": "lade_bench.decoding.drafters.draft_tree",
    "TreeStep": "lade_bench.decoding.drafters.draft_tree",
    "draft_reach": "lade_bench.decoding.drafters.draft_tree",
    "draft_tree_generate": "lade_bench.decoding.drafters.draft_tree",
    "verify_tree_greedy": "lade_bench.decoding.drafters.draft_tree",
    "ForwardRecord": "lade_bench.decoding.core.executor",
    "StepExecutor": "lade_bench.decoding.core.executor",
    "StepInput": "lade_bench.decoding.core.executor",
    "StepOutput": "lade_bench.decoding.core.executor",
    "jacobi_generate": "lade_bench.decoding.baselines.jacobi",
    "lookahead_generate": "lade_bench.decoding.lookahead.lookahead",
    "VERIFICATION_LAYOUTS": "lade_bench.decoding.core.params",
    "DecodeResult": "lade_bench.decoding.core.params",
    "DecodingConfigError": "lade_bench.decoding.core.params",
    "LookaheadParams": "lade_bench.decoding.core.params",
    "SamplingParams": "lade_bench.decoding.core.params",
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
