"""The built-in methods: AR, lookahead, prompt lookup, Jacobi and tensor-parallel AR.

Registration order below is the reading order of every table and figure (AR first). The engine is
imported inside each function, not at the top: the registry is read by the plan checks and the
row schema, which must not wait for torch (a typo on the command line is reported in a second).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lade_bench.methods.registry import (
    REFERENCE,
    TENSOR_PARALLEL,
    GenerationRequest,
    Method,
    Settings,
    register,
)


def _decode(
    engine: Callable[..., Any], request: GenerationRequest, *params: Any, model: Any = None, **kwargs: Any
) -> Any:
    """``engine(model, prompt_ids, *params, max_new_tokens, ...)`` plus the stop ids and seed every engine takes."""
    model = request.model if model is None else model
    stops = list(request.stop_ids)
    return engine(
        model, request.prompt_ids, *params, request.max_new_tokens, eos_token_id=stops, seed=request.seed, **kwargs
    )


def generate_ar(request: GenerationRequest) -> Any:
    """Plain autoregressive decoding (transformers' ``generate``): the reference of every speedup."""
    from lade_bench.decoding import autoregressive_generate

    return _decode(autoregressive_generate, request, sampling=request.sampling)


def generate_lookahead(request: GenerationRequest) -> Any:
    """Lookahead decoding with the cell's N, W, G (``settings["lookahead"]``, a ``LookaheadParams``)."""
    from lade_bench.decoding import lookahead_generate

    params = request.settings["lookahead"]
    return _decode(lookahead_generate, request, params, sampling=request.sampling, parallel=request.parallel)


def generate_prompt_lookup(request: GenerationRequest) -> Any:
    """transformers' prompt lookup decoding (``settings["prompt_lookup"]``: num_tokens, max_ngram_size)."""
    from lade_bench.decoding import prompt_lookup_generate

    return _decode(prompt_lookup_generate, request, sampling=request.sampling, **request.section("prompt_lookup"))


def generate_jacobi(request: GenerationRequest) -> Any:
    """Jacobi decoding without an n-gram pool, greedy (``settings["jacobi"]``: block_size)."""
    from lade_bench.decoding import jacobi_generate

    return _decode(jacobi_generate, request, **request.section("jacobi"))


def generate_ar_tp(request: GenerationRequest) -> Any:
    """Autoregressive decoding of the tensor-parallel shard (every rank runs it)."""
    from lade_bench.decoding import autoregressive_generate

    return _decode(autoregressive_generate, request, model=request.models[TENSOR_PARALLEL], sampling=request.sampling)


def _lookahead_reach(settings: Settings) -> Any:
    from lade_bench.decoding.position_limits import lookahead_reach

    return lookahead_reach(settings["lookahead"])


def _jacobi_reach(settings: Settings) -> Any:
    from lade_bench.decoding.position_limits import jacobi_reach

    return jacobi_reach(settings["jacobi"].block_size)


def _prompt_lookup_reach(settings: Settings) -> Any:
    from lade_bench.decoding.position_limits import prompt_lookup_reach

    return prompt_lookup_reach(settings["prompt_lookup"].num_tokens)


def _devices(cfg: Any) -> int:
    return cfg.lookahead.devices


def _refuse_lookahead(cfg: Any) -> str | None:
    devices, verification = _devices(cfg), cfg.lookahead.get("verification", "flat")
    if devices > 1 and verification != "flat":
        return (
            f"lookahead.verification={verification!r} is not supported with lookahead.devices={devices} "
            "(candidates are split over ranks as flat chains); allowed: 'flat'"
        )
    return None


def _refuse_ar_tp(cfg: Any) -> str | None:
    if _devices(cfg) < 2:
        return (
            "the ar_tp arm (tensor-parallel AR) needs lookahead.devices >= 2 ranks under torchrun; "
            "with one device it is the ar arm"
        )
    source = cfg.model.source
    if getattr(source, "value", source) == "tiny":  # an Enum in a structured config, a str in a plain one
        return (
            "the ar_tp arm loads a checkpoint with transformers' tp_plan='auto', which a tiny random "
            "model has not; use model=smollm2 or a model.source=hf model"
        )
    return None


BUILTIN_METHODS: tuple[Method, ...] = (
    Method(REFERENCE, generate_ar, label="AR", color="#7f7f7f"),
    Method(
        "lookahead",
        generate_lookahead,
        label="Lookahead",
        color="#1f77b4",
        custom_mask=True,
        every_rank=True,
        sections=("lookahead",),
        headroom=lambda s: s["lookahead"].ngram + s["lookahead"].window,
        reach=_lookahead_reach,
        refuse=_refuse_lookahead,
        scaling_label="LP: lookahead parallelism",
    ),
    Method(
        "prompt_lookup",
        generate_prompt_lookup,
        label="Prompt lookup",
        color="#ff7f0e",
        sections=("prompt_lookup",),
        reach=_prompt_lookup_reach,
        tuner_baseline=True,
    ),
    Method(
        "jacobi",
        generate_jacobi,
        label="Jacobi",
        color="#2ca02c",
        custom_mask=True,
        supports_sampling=False,
        sections=("jacobi",),
        reach=_jacobi_reach,
        tuner_baseline=True,
    ),
    Method(
        "ar_tp",
        generate_ar_tp,
        label="AR, tensor parallel",
        color="#d62728",
        every_rank=True,
        models=(TENSOR_PARALLEL,),
        refuse=_refuse_ar_tp,
        scaling_label="TP: tensor-parallel AR",
    ),
)


def register_builtin_methods() -> None:
    """Register the built-in methods (idempotent: the package does it on import)."""
    for method in BUILTIN_METHODS:
        register(method, replace=True)
