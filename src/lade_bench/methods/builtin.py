"""The built-in methods that are not drafters: AR, AR on the standard step path (a batch-invariant cell's
timing reference), lookahead, Jacobi, tensor-parallel AR, assisted, pipeline-parallel AR; and the
registration of every built-in, the drafters found by discovery
(``lade_bench.methods.drafters``: prompt lookup, Token Recycling, SuffixDecoding, SAM-Decoding, PIA, REST).

Registration order is the reading order of every table and figure (AR first): the order below, each
drafter placed after the method its declaration names (``after``). The engine is
imported inside each function, not at the top: the registry is read by the plan checks and the
row schema, which must not wait for torch (a typo on the command line is reported in a second).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lade_bench.decoding.core.params import BATCH_INVARIANT_STEP_PATH, JACOBI_BLOCK_SIZE
from lade_bench.methods.assisted import ASSISTED_SECTION, AssistantConfig
from lade_bench.methods.drafters import discover_drafters, in_reading_order
from lade_bench.methods.registry import (
    DRAFT,
    PIPELINE_PARALLEL,
    REFERENCE,
    REPLICA,
    STANDARD_PATH_REFERENCE,
    TENSOR_PARALLEL,
    CellFacts,
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

    return _decode(autoregressive_generate, request, sampling=request.sampling, compiled=request.compiled)


def generate_ar_standard(request: GenerationRequest) -> Any:
    """AR with the model on its standard step path for the generation (``batch_invariant.standard_path``):
    a batch-invariant cell's plain bfloat16 AR, timed beside the path's AR on the same samples."""
    from lade_bench.decoding.core.batch_invariant import standard_path

    # The switch happens outside the generation's own clock (the engine times itself).
    with standard_path(request.model):
        return generate_ar(request)


def _refuse_ar_standard(settings: Settings, cell: CellFacts) -> str | None:
    if cell.step_path != BATCH_INVARIANT_STEP_PATH:
        return (
            f"the {STANDARD_PATH_REFERENCE} arm times AR on the standard step path beside a "
            f"step_path={BATCH_INVARIANT_STEP_PATH} cell's AR; with step_path={cell.step_path} it is the "
            f"{REFERENCE} arm: drop it, or set step_path={BATCH_INVARIANT_STEP_PATH}"
        )
    return None


def generate_lookahead(request: GenerationRequest) -> Any:
    """Lookahead decoding with the cell's N, W, G (``settings["lookahead"]``, a ``LookaheadParams``)."""
    from lade_bench.decoding import lookahead_generate

    params = request.settings["lookahead"]
    return _decode(
        lookahead_generate,
        request,
        params,
        sampling=request.sampling,
        parallel=request.parallel,
        compiled=request.compiled,
    )


def generate_jacobi(request: GenerationRequest) -> Any:
    """Jacobi decoding without an n-gram pool, greedy (``settings["jacobi"]``: block_size)."""
    from lade_bench.decoding import jacobi_generate

    return _decode(jacobi_generate, request, **request.section("jacobi"))


@dataclass
class JacobiConfig:
    """Section ``jacobi``: its default is the engine's (``decoding.core.params``, which says why)."""

    block_size: int = JACOBI_BLOCK_SIZE


def generate_ar_tp(request: GenerationRequest) -> Any:
    """Autoregressive decoding of the tensor-parallel shard (every rank runs it)."""
    from lade_bench.decoding import autoregressive_generate

    return _decode(autoregressive_generate, request, model=request.models[TENSOR_PARALLEL], sampling=request.sampling)


# The keys of the ``assistant`` section that are draft-length settings (the rest, ``model``, picks the draft).
ASSISTANT_SETTINGS = (
    "num_assistant_tokens",
    "num_assistant_tokens_schedule",
    "assistant_confidence_threshold",
    "assistant_lookbehind",
    "target_lookbehind",
)


def generate_assisted(request: GenerationRequest) -> Any:
    """Draft-model speculative decoding, transformers' assisted generation (``settings["assistant"]``).

    ``models[DRAFT]`` is a ``lade_bench.decoding.baselines.assisted.Draft`` (universal assisted decoding when
    its vocabulary differs from the target's); a section missing from ``settings`` means
    transformers' default draft settings.
    """
    from lade_bench.decoding.baselines.assisted import assisted_generate

    section = request.section(ASSISTED_SECTION)
    draft_settings = {key: section[key] for key in ASSISTANT_SETTINGS if key in section}
    return _decode(assisted_generate, request, request.models[DRAFT], sampling=request.sampling, **draft_settings)


def generate_ar_pp(request: GenerationRequest) -> Any:
    """Autoregressive decoding of the pipeline-parallel model (layers over cuda:0..K-1, rank 0 only)."""
    from lade_bench.decoding import autoregressive_generate

    model = request.models[PIPELINE_PARALLEL]
    return _decode(autoregressive_generate, request, model=model, sampling=request.sampling)


def _lookahead_reach(settings: Settings) -> Any:
    from lade_bench.decoding.core.position_limits import lookahead_reach

    return lookahead_reach(settings["lookahead"])


def _jacobi_reach(settings: Settings) -> Any:
    from lade_bench.decoding.core.position_limits import jacobi_reach

    return jacobi_reach(settings["jacobi"].block_size)


def _parse_lookahead(section: str, value: Any) -> Any:
    """``cfg.lookahead`` as the engine's ``LookaheadParams`` (its checks of N, W, G and the layout)."""
    from lade_bench.decoding import LookaheadParams

    return LookaheadParams(
        ngram=value.ngram,
        window=value.window,
        guesses=value.guesses,
        prompt_as_reference=value.prompt_as_reference,
        verification=value.get("verification", "flat"),
    )


def _hashed_lookahead(section: str, value: dict[str, Any]) -> dict[str, Any]:
    """The lookahead section as hashed into the cell id: all of it but ``devices``, the cell's rank count
    (``cell_devices``), hashed at the top level. Which keys old cells lacked (``verification`` at ``flat``)
    is the cell-id compatibility table's to say (``runner/id_compat.py``), applied by the plan.
    """
    return {key: item for key, item in value.items() if key != "devices"}


def _lookahead_name(la: Any) -> str:
    """``N5W7G7ref`` from the composed ``lookahead`` section (``ref``: prompt as reference; a layout
    other than flat appended, e.g. ``trie``)."""
    shape = f"N{la.ngram}W{la.window}G{la.guesses}" + ("ref" if la.prompt_as_reference else "")
    return shape + ("" if la.get("verification", "flat") == "flat" else str(la.verification))


def _refuse_lookahead(settings: Settings, cell: CellFacts) -> str | None:
    verification = settings["lookahead"].verification
    if cell.devices > 1 and verification != "flat":
        return (
            f"lookahead.verification={verification!r} is not supported with lookahead.devices={cell.devices} "
            "(candidates are split over ranks as flat chains); allowed: 'flat'"
        )
    return None


def _settings_below(settings: Settings, section: str, minimum: int, *keys: str) -> str | None:
    """A message for the first ``<section>.<key>`` that is not an integer >= ``minimum`` (None: all are)."""
    for key in keys:
        value = getattr(settings[section], key)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            return f"{section}.{key}={value!r} is not allowed: use an integer >= {minimum}"
    return None


def _refuse_jacobi(settings: Settings, cell: CellFacts) -> str | None:
    return _settings_below(settings, "jacobi", 1, "block_size")


def _refuse_ar_tp(settings: Settings, cell: CellFacts) -> str | None:
    if cell.devices < 2:
        return (
            "the ar_tp arm (tensor-parallel AR) needs lookahead.devices >= 2 ranks under torchrun; "
            "with one device it is the ar arm"
        )
    if cell.model_source == "tiny":
        return (
            "the ar_tp arm loads a checkpoint with transformers' tp_plan='auto', which a tiny random "
            "model has not; use model=smollm2 or a model.source=hf model"
        )
    return None


def _refuse_assisted(settings: Settings, cell: CellFacts) -> str | None:
    from lade_bench.decoding.baselines.assisted import validate_assistant_settings
    from lade_bench.decoding.core.params import DecodingConfigError
    from lade_bench.models.loading import model_config_problem

    section = settings[ASSISTED_SECTION]
    if section.model is None:
        return (
            "the assisted arm needs a draft model: pick one from the model group with "
            "model@assistant.model=NAME (e.g. llama_68m for a Llama-2 target, tiny_gpt2 for a tiny one)"
        )
    problem = model_config_problem(section.model, "assistant.model")
    if problem:
        return problem
    try:
        validate_assistant_settings(**{key: getattr(section, key) for key in ASSISTANT_SETTINGS})
    except DecodingConfigError as err:
        return str(err)
    return None


def _refuse_ar_pp(settings: Settings, cell: CellFacts) -> str | None:
    import torch

    devices = cell.devices
    if devices < 2:
        return (
            "the ar_pp arm (pipeline-parallel AR) splits the layers over lookahead.devices >= 2 CUDA devices; "
            f"lookahead.devices={devices} is the ar arm"
        )
    if cell.device == "cpu":
        return "the ar_pp arm splits the layers over CUDA devices; device=cpu has none: use device=cuda or auto"
    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible < devices:
        return (
            f"the ar_pp arm needs lookahead.devices={devices} CUDA devices visible to rank 0, and {visible} "
            f"are visible here; run it on a machine with {devices} GPUs, or drop ar_pp from arms"
        )
    return None


BUILTIN_METHODS: tuple[Method, ...] = (
    Method(REFERENCE, generate_ar, label="AR", color="#7f7f7f", compiles=True, model_checks=False),
    Method(
        STANDARD_PATH_REFERENCE,
        generate_ar_standard,
        label="AR, standard path",
        color="#c7c7c7",
        refuse=_refuse_ar_standard,
        model_checks=False,
        # A timing reference on other numerics: its matches_ar is recorded, never required.
        exact=False,
    ),
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
        compiles=True,
        parse=_parse_lookahead,
        hashed=_hashed_lookahead,
        name_part=_lookahead_name,
    ),
    Method(
        "jacobi",
        generate_jacobi,
        label="Jacobi",
        color="#2ca02c",
        custom_mask=True,
        supports_sampling=False,
        config=JacobiConfig,
        reach=_jacobi_reach,
        refuse=_refuse_jacobi,
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
        model_checks=False,
    ),
    Method(
        "assisted",
        generate_assisted,
        label="Assisted (draft model)",
        color="#9467bd",
        config=AssistantConfig,
        config_section=ASSISTED_SECTION,
        # A target forward verifies up to num_assistant_tokens candidates past the sequence.
        headroom=lambda s: s[ASSISTED_SECTION].num_assistant_tokens,
        models=(REPLICA, DRAFT),
        # Held-out validation runs ordinary cells, which load the draft like any run.
        tuner_baseline=True,
        refuse=_refuse_assisted,
    ),
    Method(
        "ar_pp",
        generate_ar_pp,
        label="AR, pipeline parallel",
        color="#8c564b",
        models=(PIPELINE_PARALLEL,),
        refuse=_refuse_ar_pp,
        scaling_label="PP: pipeline-parallel AR",
        model_checks=False,
    ),
)


def register_builtin_methods() -> None:
    """Register the built-in methods and the drafters found by discovery, in reading order (idempotent:
    the package does it on import)."""
    for method in in_reading_order(BUILTIN_METHODS, discover_drafters()):
        register(method, replace=True)
