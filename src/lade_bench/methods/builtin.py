"""The built-in methods: AR, lookahead, prompt lookup, Jacobi and tensor-parallel AR.

Registration order below is the reading order of every table and figure (AR first). The engine is
imported inside each function, not at the top: the registry is read by the plan checks and the
row schema, which must not wait for torch (a typo on the command line is reported in a second).
"""

from __future__ import annotations

from typing import Any

from lade_bench.methods.registry import (
    REFERENCE,
    TENSOR_PARALLEL,
    GenerationRequest,
    Method,
    Settings,
    register,
)


def _engine_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """What every engine call takes besides the model, prompt and budget."""
    return {"eos_token_id": list(request.stop_ids), "seed": request.seed}


def generate_ar(request: GenerationRequest) -> Any:
    """Plain autoregressive decoding (transformers' ``generate``): the reference of every speedup."""
    from lade_bench.decoding import autoregressive_generate

    return autoregressive_generate(
        request.model, request.prompt_ids, request.max_new_tokens, sampling=request.sampling, **_engine_kwargs(request)
    )


def generate_lookahead(request: GenerationRequest) -> Any:
    """Lookahead decoding with the cell's N, W, G (``settings["lookahead"]``, a ``LookaheadParams``)."""
    from lade_bench.decoding import lookahead_generate

    return lookahead_generate(
        request.model,
        request.prompt_ids,
        request.settings["lookahead"],
        request.max_new_tokens,
        sampling=request.sampling,
        parallel=request.parallel,
        **_engine_kwargs(request),
    )


def generate_prompt_lookup(request: GenerationRequest) -> Any:
    """transformers' prompt lookup decoding (``settings["prompt_lookup"]``: num_tokens, max_ngram_size)."""
    from lade_bench.decoding import prompt_lookup_generate

    return prompt_lookup_generate(
        request.model,
        request.prompt_ids,
        request.max_new_tokens,
        sampling=request.sampling,
        **request.section("prompt_lookup"),
        **_engine_kwargs(request),
    )


def generate_jacobi(request: GenerationRequest) -> Any:
    """Jacobi decoding without an n-gram pool, greedy (``settings["jacobi"]``: block_size)."""
    from lade_bench.decoding import jacobi_generate

    return jacobi_generate(
        request.model,
        request.prompt_ids,
        request.max_new_tokens,
        **request.section("jacobi"),
        **_engine_kwargs(request),
    )


def generate_ar_tp(request: GenerationRequest) -> Any:
    """Autoregressive decoding of the tensor-parallel shard (every rank runs it)."""
    from lade_bench.decoding import autoregressive_generate

    model = request.models[TENSOR_PARALLEL]
    return autoregressive_generate(
        model, request.prompt_ids, request.max_new_tokens, sampling=request.sampling, **_engine_kwargs(request)
    )


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
        headroom=lambda s: s["prompt_lookup"].num_tokens + 1,
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
        headroom=lambda s: s["jacobi"].block_size + 1,
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
