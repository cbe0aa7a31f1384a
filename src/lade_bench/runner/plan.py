"""Turn a composed job config into a validated, typed cell plan, before any data or model is loaded.

Everything that can be wrong with a config (sampling values, arms, attention backend, dataset name,
output names, lock settings, and each arm's own settings) fails here with a message that names the
value and what is allowed, so a bad sweep cell costs milliseconds instead of a model load. The plan
names no method: an arm's own settings are parsed and checked by its registry entry (``Method.parse``
and ``Method.refuse``), only when the arm is in the cell; so are its part of the cell id
(``Method.sections``, ``Method.hashed``) and of the folder name (``Method.name_part``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig, OmegaConf

from lade_bench.datasets import DatasetSpec, category_selection, get_spec
from lade_bench.datasets.prompt_formats import PLAIN
from lade_bench.decoding.core.params import (
    BATCH_INVARIANT_LOAD_ATTENTION,
    BATCH_INVARIANT_STEP_PATH,
    BLOCK_MASK_ATTENTION,
    MASK_CAPABLE_ATTENTION,
    STANDARD_STEP_PATH,
    STEP_PATHS,
    DecodingConfigError,
    SamplingParams,
    validate_max_new_tokens,
)
from lade_bench.methods import (
    PIPELINE_PARALLEL,
    REFERENCE,
    get_method,
    is_registered,
    methods_where,
    sort_methods,
    unknown_method_message,
)
from lade_bench.methods.registry import DEVICES_SETTING, CellFacts, cell_devices
from lade_bench.methods.state import SCOPE_BEFORE, STATE_SECTION, scope_problem
from lade_bench.model_config import embedded_name, tokenizer_source
from lade_bench.results import cell_id
from lade_bench.results.schema import SHAPE_SECTION
from lade_bench.runner.id_compat import ID_COMPAT, IdCompat, leave_out_defaults
from lade_bench.runner.legacy_ids import find_legacy_cell
from lade_bench.runner.locks import LockSettings, LockSettingsError
from lade_bench.runner.plan_parts import CompileOptions, ModelChoice, ProfileSettings, RunCounts

if TYPE_CHECKING:
    import torch

# torch, transformers and the model loaders are imported inside the functions that need them: a bad
# value on the command line is refused before they load (about 1 CPU-s instead of 7).

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")
# Attention a compiled cell may use: flex_attention compiles kernels of its own (a compile inside the
# compile), and flash_attention_2 takes no custom mask (the compiled lookahead step needs one).
COMPILE_ATTENTION = ("sdpa", "eager")


class CellConfigError(ValueError):
    """A config value the runner cannot use (and what to use instead)."""


@dataclass(frozen=True)
class CellPlan:
    """Everything a cell needs that is decided by the config alone, typed and checked once.

    The runner reads the plan, never the composed config: ``cfg`` is kept only to be recorded as it
    was composed (``config.yaml``, the sinks' config).

    Attributes:
        cfg: the composed job config, for the record only.
        arms: decoding methods in config order, ``"ar"`` first.
        settings: config section -> its value as the arms' generate functions get it, for every section
            an arm of the cell reads (``Method.sections``), parsed once (``Method.parse``: e.g.
            lookahead's ``LookaheadParams``) and checked (``Method.refuse``).
        sampling: validated sampling settings.
        device: resolved device (``auto`` already decided).
        dtype: resolved weight dtype.
        semantic: the semantic config hashed into ``cell_id`` (and written to the sweep index).
        cell_id: stable id of the cell.
        sweep_root: ``<output_root>/<sweep_name>`` as an absolute path.
        cell_dir: this cell's folder inside ``sweep_root``.
        dataset_spec: the dataset's registry entry.
        dataset: the ``dataset`` section as composed (checked): what to read of the dataset.
        model: the cell's model (``model`` section and ``model_cache_dir``).
        counts: tokens, repeats, warm-up, seed and the mismatch tolerance.
        facts: the cell's facts each arm's ``Method.refuse`` was asked with.
        sweep_name: the sweep's folder name (``sweep_name``).
        sampling_name: the sampling preset's name (``sampling.name``).
        profile: the device profile's measurement settings (``device_profile``).
        allow_unsandboxed: score code answers even without a sandbox (``sandbox.allow_unsandboxed``).
        compile_options: how a compiled cell (``compile=true``) compiles, its mode resolved for
            ``device`` (``auto`` decided); None: an eager cell.
        devices: the cell's ranks (``DEVICES_SETTING``; 1: one device).
        lock: the cell lock's settings (``cell_lock``).
        legacy_id: the id this cell had before issue 49, when its folder was found under it (see
            ``runner.legacy_ids``); ``cell_id`` is then that id. None: the cell has its current id.
        shape_section: the ``SHAPE_SECTION`` (lookahead) section as composed: the rows' shape columns (the schema's
            always-present ngram/window/guesses) of a cell whose arms parse no ``lookahead`` setting.
        step_path: how the cell's forwards compute their rows (``step_path``): ``standard``, or
            ``batch_invariant`` (every row bit-identical however many share the forward; checked here
            against the device, dtype, attention, compile and devices, and at load on the model).
    """

    cfg: DictConfig
    arms: tuple[str, ...]
    settings: Mapping[str, Any]
    sampling: SamplingParams
    device: torch.device
    dtype: torch.dtype
    semantic: dict[str, Any]
    cell_id: str
    sweep_root: Path
    cell_dir: Path
    dataset_spec: DatasetSpec
    dataset: Any
    model: ModelChoice
    counts: RunCounts
    facts: CellFacts
    sweep_name: str
    sampling_name: str
    profile: ProfileSettings
    allow_unsandboxed: bool = False
    compile_options: CompileOptions | None = None
    devices: int = 1
    lock: LockSettings = LockSettings()
    legacy_id: str | None = None
    shape_section: Any = None
    step_path: str = STANDARD_STEP_PATH

    @property
    def cell_name(self) -> str:
        """The readable part of the cell's folder name (``readable_cell_name``; an old cell's as recorded)."""
        return self.cell_dir.name.removesuffix(f"-{self.cell_id}")

    @property
    def greedy(self) -> bool:
        """True when outputs are deterministic and comparable token by token with AR."""
        return not self.sampling.do_sample

    @property
    def compiled(self) -> bool:
        """True for a compiled cell: every arm runs on a static KV cache with compiled forwards."""
        return self.compile_options is not None

    @property
    def compile_mode(self) -> str | None:
        """The torch.compile mode of a compiled cell, resolved for ``device``; None: an eager cell."""
        return self.compile_options.mode if self.compile_options is not None else None


def plan_cell(cfg: DictConfig) -> CellPlan:
    """Validate ``cfg`` once into a typed plan and derive the cell's identity and folder.

    Raises:
        DecodingConfigError: a sampling or max_new_tokens value out of range, or an arm's setting its
            registry entry's ``parse`` refuses (e.g. lookahead's N, W or G).
        CellConfigError: bad arms, attention backend, counts, model, lock or output settings; an
            arm's setting its ``refuse`` refuses; a compiled cell (``compile=true``) that cannot
            compile (an arm without a compiled mode, several devices, flex or flash attention, an
            unknown or device-less mode); ``step_path=batch_invariant`` where the path is not offered
            (another device or dtype, compile=true, several devices, flex or flash attention); or a
            code dataset where no sandbox can run its answers (and ``sandbox.allow_unsandboxed`` is
            false).
        UnknownDatasetError: ``dataset.name`` is not registered (the message lists valid names).
        ValueError: CUDA requested but unavailable, or an unknown dtype.
    """
    sampling = SamplingParams(
        do_sample=cfg.sampling.do_sample,
        temperature=cfg.sampling.temperature,
        top_k=cfg.sampling.top_k,
        top_p=cfg.sampling.top_p,
    )
    validate_max_new_tokens(cfg.max_new_tokens)
    arms = _validate_arms(cfg.arms, sampling)
    devices = _validate_devices(cell_devices(cfg), arms)
    attention = _enum_value(cfg.attn_implementation)
    step_path = step_path_of(cfg)
    # Before the compile checks: under the batch-invariant path compile=true is refused for its own reason.
    _validate_step_path(step_path, attention, devices, bool(cfg.compile))
    _check_step_path_device(step_path, _enum_value(cfg.device), _enum_value(cfg.dtype))
    if cfg.compile:  # before the per-arm checks: a compiled cell's own limits are the first thing to say
        _validate_compile(cfg.compile_options, arms, devices, attention)
    _validate_attention(attention, arms)
    facts = _cell_facts(cfg, devices, attention)
    cfg = _resolve_sections(cfg, arms, facts)
    settings = _arm_settings(cfg, arms, facts)
    counts = _run_counts(cfg)
    spec = get_spec(cfg.dataset.name)
    _validate_dataset(cfg.dataset, spec)
    _validate_state_scope(cfg, arms, spec)
    model = _model_choice(cfg)
    lock = _lock_settings(cfg.cell_lock)
    allow_unsandboxed = _allow_unsandboxed(cfg)
    _check_sandbox(spec, allow_unsandboxed)
    from lade_bench.models.loading import resolve_device, resolve_dtype
    from lade_bench.runner.ranks import rank_device

    try:
        device = resolve_device(_enum_value(cfg.device))
        dtype = resolve_dtype(_enum_value(cfg.dtype), device)
    except ValueError as err:  # e.g. device=cuda without CUDA: a config mistake, said before any loading
        raise CellConfigError(str(err)) from err
    # Again as resolved: device=auto or dtype=auto may mean what the path is not offered on.
    _check_step_path_device(step_path, device.type, str(dtype).removeprefix("torch."))
    device = rank_device(device, devices)
    compile_mode = _compile_mode(cfg.compile, cfg.compile_options.mode, device)
    options = cfg.compile_options
    compile_options = (
        None if compile_mode is None else CompileOptions(compile_mode, options.cache_block, options.backend)
    )
    semantic = semantic_config(cfg, arms, spec, device.type, str(dtype).removeprefix("torch."), compile_mode)
    identity = cell_id(semantic)
    sweep_root = Path(cfg.output_root).expanduser().resolve() / _plain_name("sweep_name", cfg.sweep_name)
    cell_dir = sweep_root / f"{readable_cell_name(cfg, arms)}-{identity}"
    legacy = find_legacy_cell(cfg, semantic, sweep_root, identity, lambda extra: readable_cell_name(cfg, arms, extra))
    if legacy is not None:
        semantic, identity, cell_dir = legacy.semantic, legacy.cell_id, legacy.cell_dir
    profile = cfg.device_profile
    return CellPlan(
        cfg=cfg,
        arms=arms,
        settings=settings,
        sampling=sampling,
        device=device,
        dtype=dtype,
        semantic=semantic,
        cell_id=identity,
        sweep_root=sweep_root,
        cell_dir=cell_dir,
        dataset_spec=spec,
        dataset=cfg.dataset,
        model=model,
        counts=counts,
        facts=facts,
        sweep_name=cfg.sweep_name,
        sampling_name=cfg.sampling.name,
        profile=ProfileSettings(
            profile.enabled,
            profile.context_tokens,
            profile.warmup,
            profile.repeats,
            # A config recorded before the KV grid existed lacks the key: it measured one context.
            tuple(int(kv) for kv in profile.get("kv_lengths") or ()),
        ),
        allow_unsandboxed=allow_unsandboxed,
        compile_options=compile_options,
        devices=devices,
        lock=lock,
        legacy_id=legacy.cell_id if legacy is not None else None,
        shape_section=cfg[SHAPE_SECTION],
        step_path=step_path,
    )


def launch_identity(cfg: DictConfig) -> str:
    """Which cell a job of a multirun will run, as the machine launching it can tell (``runner.launch_plan``).

    A cell id hashes what the job resolves where it lands (the device kind of ``device: auto``, the
    dtype of ``dtype: auto``, a compiled cell's mode), which a cluster's login node cannot know; this
    hashes the same semantic config (:func:`semantic_config`) with those as configured. Jobs of one
    launch with one identity run one cell (on alike machines): a swept setting no arm reads, or one
    that is no part of a cell's id (``warmup``), does not make a second cell.

    Raises:
        CellConfigError, DecodingConfigError, UnknownDatasetError: bad arms, sampling values or dataset
            name (the job itself refuses them, by name).
    """
    sampling = SamplingParams(
        do_sample=cfg.sampling.do_sample,
        temperature=cfg.sampling.temperature,
        top_k=cfg.sampling.top_k,
        top_p=cfg.sampling.top_p,
    )
    arms = _validate_arms(cfg.arms, sampling)
    cfg = _resolve_sections(cfg, arms, _cell_facts(cfg, cell_devices(cfg), _enum_value(cfg.attn_implementation)))
    compile_mode = _enum_value(cfg.compile_options.mode) if cfg.compile else None
    spec = get_spec(cfg.dataset.name)
    device, dtype = str(_enum_value(cfg.device)), str(_enum_value(cfg.dtype))
    return cell_id(semantic_config(cfg, arms, spec, device, dtype, compile_mode))


def _cell_facts(cfg: DictConfig, devices: int, attention: str) -> CellFacts:
    """The facts about a cell that its arms' ``Method.resolve`` and ``Method.refuse`` are asked with."""
    return CellFacts(
        devices=devices,
        device=_enum_value(cfg.device),
        attn_implementation=attention,
        model_source=_enum_value(cfg.model.source),
        model_name=cfg.model.name,
        compiled=bool(cfg.compile),
        dataset=cfg.dataset.name,
        dataset_path=cfg.dataset.path,
        tokenizer=tokenizer_source(cfg.model),
        model_cache_dir=cfg.model_cache_dir,
        step_path=step_path_of(cfg),
    )


def semantic_config(
    cfg: DictConfig,
    arms: tuple[str, ...],
    spec: DatasetSpec,
    device: str,
    dtype: str,
    compile_mode: str | None = None,
    compat: Sequence[IdCompat] = ID_COMPAT,
) -> dict[str, Any]:
    """The keys that change what a row means (see :mod:`lade_bench.results.cell_id`).

    Left out on purpose: the sweep name, output paths, warm-up and the model cache folder (none of
    them changes a generated token or a timed region). The dataset path enters by file name only,
    so the same file copied elsewhere is the same cell. ``device``: the resolved device kind
    (``cuda``, ``cpu``); ``dtype``: the resolved dtype's name (``float32``); ``compile_mode``: the
    resolved torch.compile mode of a compiled cell (None: eager). A method's config sections enter
    only when the method is among ``arms`` (:func:`arm_sections`). A setting added after cells were
    recorded enters only away from the default those cells ran under: ``compat``, the cell-id
    compatibility table (``runner.id_compat``), says which.
    """
    model = cfg.model
    model_keys = {"name": model.name, "source": _enum_value(model.source), "chat": model.chat}
    model_keys["system_prompt"] = model.system_prompt
    model_keys["chat_template"] = model.chat_template
    # How a base model's turns are put; a chat model's are its template's whatever this says, so it hashes
    # as plain (runner.id_compat: plain, what every cell before the setting ran, is left out).
    model_keys["completion_format"] = model.get("completion_format", PLAIN) if not model.chat else PLAIN
    if model_keys["source"] == "embedded":
        model_keys["embedded"] = embedded_name(model)
    if model_keys["source"] == "hf":
        model_keys.update(name_or_path=model.name_or_path, revision=model.revision)
    if model_keys["source"] == "tiny":
        model_keys.update(
            architecture=model.architecture,
            tiny_seed=model.tiny_seed,
            tiny_init_scale=model.tiny_init_scale,
            max_positions=model.max_positions,
        )
    data = cfg.dataset
    categories = data.get("categories")
    semantic: dict[str, Any] = {
        "model": model_keys,
        "dataset": {
            "name": spec.name,
            "split": data.split or spec.default_split,
            "path": Path(data.path).name if data.path else None,
            "limit": data.limit,
            "shuffle_seed": data.shuffle_seed,
            "max_prompt_tokens": data.max_prompt_tokens,
            "offset": data.offset,
            # get: configs recorded before these keys (the committed cells') lack them.
            "categories": list(categories) if categories is not None else None,
            "per_category_limit": data.get("per_category_limit"),
        },
        "arms": list(arms),
        "sampling": {k: cfg.sampling[k] for k in ("do_sample", "temperature", "top_k", "top_p")},
        "max_new_tokens": cfg.max_new_tokens,
        "repeats": cfg.repeats,
        "seed": cfg.seed,
        "device": device,
        "dtype": dtype,
        "attn_implementation": _enum_value(cfg.attn_implementation),
        # Hashed only away from standard (runner.id_compat): every committed cell ran the standard path.
        "step_path": step_path_of(cfg),
        "devices": cell_devices(cfg),
        "compile": compile_mode is not None,
        # The mode hashed resolved, so `auto` and the mode it means on this device are one cell; the
        # cache block changes the static shapes timed.
        "compile_options": {
            "mode": compile_mode,
            "cache_block": cfg.compile_options.cache_block,
            "backend": cfg.compile_options.backend,
        },
    }
    semantic.update(arm_sections(cfg, arms))
    state = semantic.get(STATE_SECTION)
    if isinstance(state, dict) and state.get("scope") == "benchmark":
        # Under the benchmark scope the warm-up runs on the carried state, so it changes every row after it;
        # under cell scope it runs on fresh states and changes no row (warm-up stays out of the id).
        semantic[STATE_SECTION] = {**state, "warmup": cfg.warmup, "warmup_new_tokens": cfg.warmup_new_tokens}
    return leave_out_defaults(semantic, compat)


def arm_sections(cfg: DictConfig, arms: Sequence[str]) -> dict[str, Any]:
    """The config sections the ``arms`` read (``Method.sections``), as hashed into the cell id.

    A section no arm reads is left out, so that changing it does not split one cell into two. Each
    section is what its method's ``Method.hashed`` keeps of it (all of it without one).
    """
    hashed: dict[str, Any] = {}
    for arm in arms:
        method = get_method(arm)
        for section in method.sections:
            # Enums as their words: a section may hold a model config (the assisted arm's draft).
            value = cast(dict[str, Any], OmegaConf.to_container(cfg[section], enum_to_str=True))
            hashed.setdefault(section, method.hashed(section, value) if method.hashed is not None else value)
    return hashed


def readable_cell_name(cfg: DictConfig, arms: Sequence[str] | None = None, extra: Sequence[str] = ()) -> str:
    """Folder-name prefix a person can read, e.g. ``smollm2-135m-instruct-mt_bench-N5W7G7ref-greedy``.

    Each arm whose entry has a ``Method.name_part`` adds it (lookahead: its shape), in registration
    order; ``arms`` defaults to ``cfg.arms`` (unregistered names ignored). ``extra``: parts placed
    where the arms' go (the name of a cell recorded before issue 49, ``runner.legacy_ids``). Only a
    convenience: the id after it is what identifies the cell, and every parameter is also a column of
    every row.
    """
    names = [_enum_value(a) for a in (cfg.arms if arms is None else arms)]
    methods = [get_method(a) for a in sort_methods(a for a in names if is_registered(a))]
    named = [m.name_part(cfg[m.own_section]) for m in methods if m.name_part is not None]
    parts = [cfg.model.name.split("/")[-1], cfg.dataset.name, *named, *extra, cfg.sampling.name]
    devices = cell_devices(cfg)
    if devices > 1:
        parts.append(f"{devices}dev")
    if cfg.compile:
        parts.append("compiled")
    if step_path_of(cfg) == BATCH_INVARIANT_STEP_PATH:
        parts.append("bi")
    return _SAFE_NAME.sub("_", "-".join(str(p) for p in parts))


def _validate_arms(listed: Sequence[Any], sampling: SamplingParams) -> tuple[str, ...]:
    arms = tuple(_enum_value(a) for a in listed)
    unknown = [a for a in arms if not is_registered(a)]
    if unknown:
        raise CellConfigError(f"arms={list(arms)}: {unknown_method_message(unknown[0])}")
    if len(set(arms)) != len(arms):
        raise CellConfigError(f"arms={list(arms)} lists an arm twice; list each once")
    if REFERENCE not in arms:
        raise CellConfigError(
            f"arms={list(arms)} lacks {REFERENCE!r}: every speedup is measured against it; add {REFERENCE}"
        )
    arms = (REFERENCE, *[a for a in arms if a != REFERENCE])
    greedy_only = [a for a in arms if get_method(a).greedy_only]
    if greedy_only and sampling.do_sample:
        raise CellConfigError(f"the {greedy_only[0]} arm is greedy-only; drop it from arms or use sampling=greedy")
    return arms


def _resolve_sections(cfg: DictConfig, arms: tuple[str, ...], facts: CellFacts) -> DictConfig:
    """``cfg`` with each arm's own section resolved by its entry (``Method.resolve``, e.g. REST's
    ``datastore: reference`` -> a folder), so the cell records, hashes, refuses and runs what the word
    names; ``cfg`` itself when nothing changes (a copy otherwise: the caller's config is left as given)."""
    for arm in arms:
        method = get_method(arm)
        if method.resolve is None:
            continue
        value = cast(dict[str, Any], OmegaConf.to_container(cfg[method.own_section], enum_to_str=True))
        resolved = method.resolve(value, facts)
        if resolved != value:
            cfg = cast(DictConfig, OmegaConf.merge(cfg, {method.own_section: resolved}))
    return cfg


def _arm_settings(cfg: DictConfig, arms: tuple[str, ...], facts: CellFacts) -> dict[str, Any]:
    """Each arm's sections parsed once by its entry (``Method.parse``), then its ``Method.refuse`` asked
    with those settings and the cell's facts (never the config itself)."""
    settings: dict[str, Any] = {}
    for arm in arms:
        method = get_method(arm)
        for section in method.sections:
            if section not in settings:
                value = cfg[section]
                settings[section] = method.parse(section, value) if method.parse is not None else value
        # Exactly what its generate gets (``runner.arms.method_settings``): its own sections.
        own = {section: settings[section] for section in method.sections}
        why = method.refuse(own, facts) if method.refuse is not None else None
        if why:
            raise CellConfigError(why)
    return settings


def _validate_compile(options: DictConfig, arms: tuple[str, ...], devices: int, attention: str) -> None:
    """What a compiled cell refuses, said before any model loads (the device check is :func:`_compile_mode`)."""
    from lade_bench.decoding.core.compiled import COMPILE_BACKENDS, COMPILE_MODES

    can_compile = methods_where(lambda m: m.compiles)
    cannot = [a for a in arms if not get_method(a).compiles]
    if cannot:
        which = f"the arms that can are {list(can_compile)}" if can_compile else "no registered arm can yet"
        raise CellConfigError(
            f"compile=true: the {cannot[0]} arm has no compiled mode ({which}); "
            f"drop {cannot[0]} from arms={list(arms)}, or set compile=false"
        )
    if devices != 1:
        raise CellConfigError(
            f"compile=true runs on one device, not {DEVICES_SETTING}={devices!r}; "
            f"set {DEVICES_SETTING}=1, or compile=false"
        )
    if attention not in COMPILE_ATTENTION:
        raise CellConfigError(
            f"compile=true cannot use attn_implementation={attention!r} (flex_attention compiles kernels of its "
            f"own, flash_attention_2 takes no custom mask); use one of {list(COMPILE_ATTENTION)}, or compile=false"
        )
    if options.mode not in COMPILE_MODES:
        raise CellConfigError(f"compile_options.mode={options.mode!r} is not allowed: use one of {list(COMPILE_MODES)}")
    if options.backend not in COMPILE_BACKENDS:
        raise CellConfigError(
            f"compile_options.backend={options.backend!r} is not allowed: use one of {list(COMPILE_BACKENDS)}"
        )
    block = options.cache_block
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise CellConfigError(f"compile_options.cache_block={block!r} is not allowed: use an integer >= 1")


def _compile_mode(compile_cell: bool, mode: str, device: torch.device) -> str | None:
    """The torch.compile mode of a compiled cell on ``device``; None for an eager cell.

    Raises:
        CellConfigError: a mode that captures CUDA graphs on a device without CUDA.
    """
    if not compile_cell:
        return None
    from lade_bench.decoding.core.compiled import resolve_compile_mode

    try:
        return resolve_compile_mode(mode, device)
    except DecodingConfigError as err:
        raise CellConfigError(f"compile_options.mode={mode!r} on {device.type}: {err}") from err


def _validate_attention(attention: str, arms: tuple[str, ...]) -> None:
    needs_mask = [a for a in arms if get_method(a).custom_mask]
    if needs_mask and attention not in MASK_CAPABLE_ATTENTION:
        raise CellConfigError(
            f"attn_implementation={attention!r} cannot take the custom attention mask the {needs_mask} arm(s) "
            f"need; use one of {list(MASK_CAPABLE_ATTENTION)}, or arms=[ar] for a FlashAttention AR baseline"
        )
    # Every arm (AR too) loads the model with it, so a torch without flex_attention fails them all.
    if attention in BLOCK_MASK_ATTENTION and not _flex_attention_available():
        allowed = [a for a in MASK_CAPABLE_ATTENTION if a not in BLOCK_MASK_ATTENTION]
        raise CellConfigError(
            f"attn_implementation={attention!r} needs torch.nn.attention.flex_attention, which this torch lacks; "
            f"upgrade torch or use one of {allowed}"
        )


def step_path_of(cfg: DictConfig) -> str:
    """The cell's ``step_path`` as a word (``standard`` where a config recorded before the setting lacks it)."""
    return str(_enum_value(cfg.get("step_path", STANDARD_STEP_PATH)))


def _validate_step_path(step_path: str, attention: str, devices: int, compiled: bool) -> None:
    """What ``step_path=batch_invariant`` refuses in the config alone (device and dtype: the next check)."""
    if step_path not in STEP_PATHS:  # a plain config (a tool's, a record's); Hydra's schema refuses it earlier
        raise CellConfigError(f"step_path={step_path!r} is not allowed: use one of {', '.join(STEP_PATHS)}")
    if step_path != BATCH_INVARIANT_STEP_PATH:
        return
    if compiled:
        raise CellConfigError(
            "step_path=batch_invariant runs eager forwards, not compile=true (compiled kernels are not the ones "
            "its load-time check measures); set compile=false, or step_path=standard"
        )
    if devices != 1:
        raise CellConfigError(
            f"step_path=batch_invariant runs on one device, not {DEVICES_SETTING}={devices!r} (its check "
            f"measures one device's kernels); set {DEVICES_SETTING}=1, or step_path=standard"
        )
    if attention not in BATCH_INVARIANT_LOAD_ATTENTION:
        allowed = list(BATCH_INVARIANT_LOAD_ATTENTION)
        raise CellConfigError(
            f"step_path=batch_invariant runs its own attention (the model loads with one of {allowed}, then the "
            f"path replaces it), not attn_implementation={attention!r}; use one of {allowed}, or step_path=standard"
        )


def _check_step_path_device(step_path: str, device: str, dtype: str) -> None:
    """``step_path=batch_invariant`` on a device or dtype it is not offered on, refused in one line.

    Called with the configured words (``device=cuda`` is refused whether or not this machine has CUDA;
    an ``auto`` word is left to the second call) and again with the resolved ones.
    """
    if step_path != BATCH_INVARIANT_STEP_PATH or "auto" in (device, dtype):
        return
    # torch: only for a batch-invariant cell (the plan imports it next anyway, to resolve the device).
    from lade_bench.decoding.core.batch_invariant import supported_message

    why = supported_message(device, dtype)
    if why:
        raise CellConfigError(why)


def _flex_attention_available() -> bool:
    from lade_bench.decoding.core.checks import flex_attention_available  # torch: only for a flex_attention cell

    return flex_attention_available()


def _validate_devices(devices: Any, arms: tuple[str, ...]) -> int:
    """The cell's rank count, checked: an integer >= 1, and above 1 only with an arm that uses the ranks."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise CellConfigError(
            f"{DEVICES_SETTING}={devices!r} is not allowed: use an integer >= 1 (ranks under torchrun)"
        )
    # The arms that use the devices: those running on every rank, and pipeline-parallel AR (rank 0
    # spreads its layers over the devices the ranks share).
    every_rank = methods_where(lambda m: m.every_rank or PIPELINE_PARALLEL in m.models)
    if devices > 1 and not set(every_rank) & set(arms):
        raise CellConfigError(
            f"{DEVICES_SETTING}={devices} is used only by the arms {list(every_rank)}, and arms={list(arms)} "
            f"has none of them; add one, or set {DEVICES_SETTING}=1"
        )
    return devices


def _lock_settings(section: DictConfig) -> LockSettings:
    try:
        return LockSettings.from_config(section)
    except LockSettingsError as err:  # a config mistake, said before anything is written
        raise CellConfigError(str(err)) from err


def _allow_unsandboxed(cfg: DictConfig) -> bool:
    """``sandbox.allow_unsandboxed`` (False where a plain config has no ``sandbox`` section)."""
    return bool(OmegaConf.select(cfg, "sandbox.allow_unsandboxed", default=False))


def _check_sandbox(spec: DatasetSpec, allow_unsandboxed: bool) -> None:
    # A code dataset's answers are executed: without bubblewrap, stop now rather than after generating.
    from lade_bench.runner.scoring import check_code_sandbox
    from lade_bench.sandbox import SandboxUnavailableError

    try:
        check_code_sandbox(spec, allow_unsandboxed)
    except SandboxUnavailableError as exc:
        raise CellConfigError(f"dataset {spec.name!r} runs the generated code: {exc}") from exc


def _run_counts(cfg: DictConfig) -> RunCounts:
    """The counts of ``cfg``, each checked (``max_new_tokens`` is checked first, by the engine's rule)."""
    counts = RunCounts(
        max_new_tokens=cfg.max_new_tokens,
        repeats=cfg.repeats,
        warmup=cfg.warmup,
        warmup_new_tokens=cfg.warmup_new_tokens,
        seed=cfg.seed,
        margin_tolerance=cfg.mismatch.margin_tolerance,
    )
    minimums = {"repeats": 1, "warmup": 0, "warmup_new_tokens": 1}
    for name, minimum in minimums.items():
        value = getattr(counts, name)
        if value < minimum:
            raise CellConfigError(f"{name}={value!r} is not allowed: use an integer >= {minimum}")
    if not counts.margin_tolerance >= 0:  # also rejects NaN
        raise CellConfigError(
            f"mismatch.margin_tolerance={counts.margin_tolerance!r} is not allowed: use a number of logits >= 0"
        )
    return counts


def _validate_dataset(data: DictConfig, spec: DatasetSpec) -> None:
    try:  # get: configs recorded before these keys lack them
        categories = data.get("categories")
        category_selection(spec, list(categories) if categories is not None else None, data.get("per_category_limit"))
    except ValueError as err:
        raise CellConfigError(str(err)) from err
    if data.limit is not None and data.limit < 1:
        raise CellConfigError(f"dataset.limit={data.limit!r} is not allowed: use an integer >= 1, or null for all")
    if data.offset < 0:
        raise CellConfigError(f"dataset.offset={data.offset!r} is not allowed: use an integer >= 0 (0: none dropped)")
    if data.max_prompt_tokens is not None and data.max_prompt_tokens < 1:
        raise CellConfigError(f"dataset.max_prompt_tokens={data.max_prompt_tokens!r}: use an integer >= 1 or null")


def _validate_state_scope(cfg: DictConfig, arms: tuple[str, ...], spec: DatasetSpec) -> None:
    """``method_state.scope`` (``methods.state.scope_problem``): a bad value in any cell; what the benchmark
    scope needs (warm, every group) only in a cell with a state that learns, since a stateless cell, or
    REST's static datastore, carries nothing the scope could reach."""
    section = cfg.get(STATE_SECTION)
    # get: configs recorded before the setting lack it, and ran per cell.
    scope = _enum_value(section.get("scope", SCOPE_BEFORE)) if section is not None else SCOPE_BEFORE
    learns = any(get_method(arm).state == "cell" and not get_method(arm).static_state for arm in arms)
    if scope == SCOPE_BEFORE or (not learns and scope_problem(scope, None, None, spec.name) is None):
        return
    categories, selected = cfg.dataset.get("categories"), None
    if categories is not None and spec.categories is not None:  # checked by _validate_dataset already
        every = {category for members in spec.categories.values() for category in members}
        selected = None if category_selection(spec, list(categories), None) == every else list(categories)
    mode = _enum_value(section.mode) if section is not None else None
    problem = scope_problem(scope, mode, selected, spec.name, cfg.dataset.shuffle_seed)
    if problem:
        raise CellConfigError(problem)


def _model_choice(cfg: DictConfig) -> ModelChoice:
    """The cell's model, checked (``model_config_problem``) before anything loads."""
    from lade_bench.models.loading import model_config_problem

    model = cfg.model
    problem = model_config_problem(model, "model")
    if problem:
        raise CellConfigError(problem)
    # get: a recorded config from before the setting (issue 63) lacks it; its base model ran plain.
    completion = model.get("completion_format", PLAIN)
    return ModelChoice(model, model.name, model.chat, model.system_prompt, cfg.model_cache_dir, completion)


def _plain_name(key: str, value: str) -> str:
    if not value or _SAFE_NAME.search(value) or value in (".", ".."):
        raise CellConfigError(f"{key}={value!r} must be a plain folder name (letters, digits, '.', '_', '-')")
    return value


def _enum_value(value: Any) -> Any:
    # Structured configs hand back Enum members; plain DictConfigs (tests, tools) hand back strings.
    return value.value if isinstance(value, Enum) else value
