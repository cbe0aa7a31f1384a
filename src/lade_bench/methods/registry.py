"""The method registry: one entry per decoding method ("arm"), and the lookups everything else uses.

A method is what ``arms=[...]`` names and what the ``arm`` column of a row holds. Its entry says how
to run it (``generate``) and what it needs (capabilities). The runner's plan checks and dispatch,
the row schema, the report's order, labels and colours, the tuner's baselines, ``bench`` and
``gpu_check`` all read the entries here; none of them lists methods itself. Registration order is
the reading order of tables and figures. ``docs/adding_a_method.md`` is the step-by-step guide.

No torch here: the plan checks and the row schema read the registry, and a tool that only reads
rows should not pay for the engine's imports.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lade_bench.decoding.core.params import STANDARD_STEP_PATH
from lade_bench.methods.state import STATE_LIFETIMES, STATE_SECTION, state_text

# Model roles a method can run (``Method.models``); the runner loads each role a cell's arms need.
REPLICA = "replica"  # the full model on this rank's device
TENSOR_PARALLEL = "tensor_parallel"  # a tensor-parallel shard over every rank (transformers' tp_plan)
DRAFT = "draft"  # the draft of speculative decoding (``assistant.model``), paired with the replica
PIPELINE_PARALLEL = "pipeline_parallel"  # the full model's layers split over cuda:0..K-1 in rank 0's process

# The baseline every speedup is measured against and every greedy output is compared with.
REFERENCE = "ar"
# AR on the model's standard step path, timed beside a batch-invariant cell's AR (issue 68): a cell with
# both computes every speedup against the faster of the two (``stats.speedup_baseline``).
STANDARD_PATH_REFERENCE = "ar_standard"

# The number of ranks (devices) of a cell, shared by every multi-device method (``every_rank``, the
# pipeline-parallel role). It lives in the ``lookahead`` section because lookahead parallelism came
# first; read it through :func:`cell_devices`, so no reader names that method.
DEVICES_SETTING = "lookahead.devices"

Settings = Mapping[str, Any]
_NAME = re.compile(r"[a-z][a-z0-9_]*")


class UnknownMethodError(ValueError):
    """A method name that is not registered (the message lists the registered ones)."""


@dataclass(frozen=True)
class GenerationRequest:
    """One generation, as a method's ``generate`` receives it.

    Attributes:
        models: model role -> model (``REPLICA`` always when the method runs it; see ``Method.models``);
            ``DRAFT`` holds a ``lade_bench.decoding.baselines.assisted.Draft`` (the draft and, when its vocabulary
            differs from the target's, both tokenizers).
        prompt_ids: the rendered prompt, ``[prompt_len]`` token ids.
        max_new_tokens: most tokens to generate.
        stop_ids: ids that end the generation (emitted, then stop).
        seed: the (sample, turn) seed, the same for every arm of a unit.
        sampling: the cell's ``SamplingParams`` (None: greedy).
        settings: config section -> value for the sections the method reads (``Method.sections``):
            ``cfg.<section>`` as composed (read by attribute), ``lookahead`` as ``LookaheadParams``. A
            section absent here means the engine's defaults (``bench`` and ``gpu_check`` give only
            ``lookahead``).
        parallel: the rank group of a multi-device cell (lookahead parallelism); None on one device.
        compiled: the cell's ``lade_bench.decoding.core.compiled.CompiledForwards`` when it runs compiled
            (``compile=true``: static KV cache, compiled forwards); None: eager. Only methods with
            ``Method.compiles`` get one (the plan refuses the others in a compiled cell).
        state: the persistent state of a method whose state lives across a cell's requests
            (``Method.state == "cell"``), built by ``Method.new_state`` and carried by the runner; None:
            the method builds a fresh one (cold: ``bench``, ``gpu_check``, a direct call). See
            ``lade_bench.methods.state``.
    """

    models: Mapping[str, Any]
    prompt_ids: Sequence[int]
    max_new_tokens: int
    stop_ids: Sequence[int] = ()
    seed: int = 0
    sampling: Any = None
    settings: Settings = field(default_factory=dict)
    parallel: Any = None
    compiled: Any = None
    state: Any = None

    @property
    def model(self) -> Any:
        """The full model (role ``REPLICA``)."""
        return self.models[REPLICA]

    def section(self, name: str) -> dict[str, Any]:
        """A config section as keyword arguments for the engine (empty: the engine's defaults)."""
        value = self.settings.get(name)
        if value is None:
            return {}
        return dict(value.items()) if isinstance(value, Mapping) else dict(vars(value))


@dataclass(frozen=True)
class CellFacts:
    """The facts about a cell, beyond a method's own sections, that a ``Method.refuse`` may need.

    Built once by the runner's plan from the checked config (the plan's ``CellPlan.facts``); the
    words are as configured, before ``auto`` is resolved.

    Attributes:
        devices: the cell's ranks (``DEVICES_SETTING``), already checked to be an integer >= 1.
        device: the configured device word: ``auto``, ``cpu`` or ``cuda``.
        attn_implementation: the attention backend word, e.g. ``sdpa``.
        model_source: where the model comes from: ``embedded``, ``tiny`` or ``hf``.
        model_name: the model's name (``model.name``).
        compiled: the cell runs compiled forwards (``compile=true``).
        dataset: the dataset's registered name (``dataset.name``).
        dataset_path: the dataset file as configured (``dataset.path``); None: the dataset's default source.
        tokenizer: where the model's tokenizer comes from, one word known before loading
            (``models.loading.tokenizer_source``): models with the same word tokenize alike.
        model_cache_dir: the model cache (``model_cache_dir``), where resources built for a model live
            (REST's reference datastore); None: unknown.
        step_path: the cell's step path (``step_path``): ``standard`` or ``batch_invariant``.
    """

    devices: int = 1
    device: str = "auto"
    attn_implementation: str = "sdpa"
    model_source: str = "embedded"
    model_name: str = ""
    compiled: bool = False
    dataset: str = ""
    dataset_path: str | None = None
    tokenizer: str = ""
    model_cache_dir: str | None = None
    step_path: str = STANDARD_STEP_PATH


@dataclass(frozen=True)
class Method:
    """One decoding method and what it needs.

    Attributes:
        name: the ``arms=[...]`` value and the ``arm`` column (lowercase, digits, ``_``).
        generate: ``generate(GenerationRequest) -> DecodeResult``; times itself (device-synchronised
            ``wall_time_s``) and counts every forward pass (see the guide for the contract).
        label: display name in tables and figure legends.
        color: matplotlib colour, the same in every figure.
        custom_mask: runs forwards under a custom 4D attention mask and position ids (needs an
            attention backend that takes one, and a model that supports it).
        every_rank: with ``lookahead.devices`` > 1 its generations run on every rank (rank 0 asks).
        supports_sampling: False for a greedy-only method (refused by a sampling cell).
        sections: config sections it reads (``cfg.<section>``): passed in ``settings`` and hashed
            into the cell id when the method is among a cell's arms.
        config: the schema of the method's own config section ``cfg.<name>``: a dataclass whose field
            defaults are the section's defaults, stated here and nowhere else (not in ``conf/``);
            ``runner.config_schema.register_configs`` adds it to the run's schema, and ``<name>`` is
            added to ``sections``. None: the method has no section of its own.
        config_section: the name of that section when it is not the method's name (None: ``<name>``):
            only for a section recorded under another name before it moved onto the entry (assisted's
            ``assistant``), so its cells keep their ids and its overrides keep working.
        headroom: settings -> positions past the prompt and new tokens one forward may reach (the
            context budget of a prompt keeps that much room); None: the tokens one forward feeds
            (``reach(settings).inputs``), or 0 without a reach.
        reach: settings -> ``ForwardReach`` for the position-limit checks (None: plain decoding).
        models: model roles it runs (``REPLICA``, ``TENSOR_PARALLEL``, ``DRAFT``, ``PIPELINE_PARALLEL``);
            the cell loads each.
        tuner_baseline: ``tune.baselines`` may name it (validated on the tuner's held-out samples).
        refuse: ``refuse(settings, cell) -> str | None``: why a cell cannot run the method (None: it
            can), asked by the plan before any data or model loads, only when the method is among the
            cell's arms. ``settings`` is what its generate gets (section -> value, parsed by ``parse``);
            ``cell`` is the cell's :class:`CellFacts` (devices, device, attention, model). It reads
            nothing else: no composed config.
        resolve: (its own section ``cfg.<name>`` as a plain dict, the cell's :class:`CellFacts`) -> that
            section with each word that names a resource of the cell replaced by what it names (REST's
            ``reference`` datastore: its folder for the cell's tokenizer in the model cache); a word it
            cannot resolve stays, for ``refuse`` to explain. The plan resolves before anything else reads
            the section (the cell records, hashes, refuses and runs the resolved value); ``bench`` and
            ``gpu_check`` through :func:`resolve_settings`. None: nothing to resolve.
        scaling_label: its legend in the speedup-vs-devices figure (None: not drawn there).
        compiles: it has a compiled mode (static KV cache, compiled forward; ``compile=true``): its
            generate honours ``GenerationRequest.compiled``. A compiled cell refuses the others.
        model_checks: the engine's model checks (``lade_bench.decoding.model_checks.support.check_model_support``)
            run on its model before its first forward (:func:`run_generation`, and the runner when it
            loads the model), so it never reaches a model the engine refuses for another method.
            False only for the autoregressive reference arms: they are the model's own ``generate``.
        state: its state's lifetime, one of ``methods.state.STATE_LIFETIMES``: ``"none"`` (stateless),
            ``"request"`` (within one generation) or ``"cell"`` (across a cell's requests, carried by the
            runner in ``GenerationRequest.state``; the method then also reads the ``method_state``
            section, added to ``sections``, so warm or cold enters the id of its cells only).
        new_state: settings -> an empty state (``requests_seen``, ``size()``); required for ``"cell"``.
        static_state: a ``"cell"`` state that no request changes (REST's datastore: loaded once, only
            read). It is carried like any other, but there is nothing warm or cold about it: the console
            and the report label its rows ``static`` (``methods.state.state_text``).
        parse: (section, ``cfg.<section>`` as composed) -> the typed value its generate gets in
            ``settings`` (e.g. lookahead's ``LookaheadParams``); it may raise the engine's
            ``DecodingConfigError`` on a bad value. None: the composed section as it is. The plan
            parses each section once, only when the method is among the cell's arms.
        hashed: (section, the section as a plain dict) -> what of it enters the cell id (None: all of
            it), e.g. a datastore by its content hash. A key hashed only away from the default older
            cells ran under is an entry of the cell-id compatibility table (``runner/id_compat.py``).
        name_part: its own section as composed (``cfg[own_section]``) -> this method's part of the
            cell folder's readable name (e.g. lookahead's ``N5W7G7ref``); None: it adds nothing. Only
            methods among the cell's arms name it.
        describe: its own section as recorded (a plain dict; a cell recorded before a setting existed
            lacks that key, and the function reads it as the value such cells ran under) -> the label of
            the configuration that ran, e.g. ``SAM-Decoding (Token Recycling tree)``: what tables name a
            row, so a leaderboard says which configuration of a method it measured. None: ``label``.
        needs_resource: its default settings draft from a resource built for the model before the run
            (REST's reference datastore), refused until it is: a cell of every method
            (:func:`every_method_arms`, ``+sweep=spec_bench``'s every-method cell) leaves it out, and it
            runs in a cell of its own.
        budget: the settings of its own section that size its drafts and the candidate values of each
            (``methods.budget.Budget``), searched by ``python -m lade_bench.tune tune.methods=[...]``;
            None: nothing to tune that way (lookahead has its own tuner).
        exact: its greedy output must equal AR's token for token: the exactness grid checks it, and a
            row whose ``matches_ar`` is false is a flaw the status reports. False only for a timing
            reference run on other numerics (``ar_standard``: AR on the standard step path in a
            batch-invariant cell): its ``matches_ar`` is recorded as it is, never required, and cells of
            every method (:func:`every_method_arms`) leave it out.
    """

    name: str
    generate: Callable[[GenerationRequest], Any]
    label: str
    color: str
    custom_mask: bool = False
    every_rank: bool = False
    supports_sampling: bool = True
    sections: tuple[str, ...] = ()
    headroom: Callable[[Settings], int] | None = None
    reach: Callable[[Settings], Any] | None = None
    models: tuple[str, ...] = (REPLICA,)
    tuner_baseline: bool = False
    refuse: Callable[[Settings, CellFacts], str | None] | None = None
    resolve: Callable[[dict[str, Any], CellFacts], dict[str, Any]] | None = None
    scaling_label: str | None = None
    compiles: bool = False
    model_checks: bool = True
    state: str = "none"
    new_state: Callable[[Settings], Any] | None = None
    static_state: bool = False
    parse: Callable[[str, Any], Any] | None = None
    hashed: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    name_part: Callable[[Any], str] | None = None
    config: type | None = None
    config_section: str | None = None
    describe: Callable[[Mapping[str, Any]], str] | None = None
    needs_resource: bool = False
    budget: Any = None  # a methods.budget.Budget (not imported here: the registry stays import-light)
    exact: bool = True

    def __post_init__(self) -> None:
        if self.config is not None:
            if not (isinstance(self.config, type) and dataclasses.is_dataclass(self.config)):
                raise ValueError(f"method {self.name!r}: config={self.config!r} is not a dataclass (its schema)")
            if self.own_section not in self.sections:
                object.__setattr__(self, "sections", (*self.sections, self.own_section))
        if self.state not in STATE_LIFETIMES:
            raise ValueError(f"method {self.name!r}: state={self.state!r} is not one of {list(STATE_LIFETIMES)}")
        if self.state == "cell":
            if self.new_state is None:
                raise ValueError(f"method {self.name!r}: state='cell' needs new_state (settings -> an empty state)")
            if STATE_SECTION not in self.sections:
                object.__setattr__(self, "sections", (*self.sections, STATE_SECTION))
        elif self.static_state:
            raise ValueError(
                f"method {self.name!r}: static_state=True needs state='cell' (a state carried across requests)"
            )

    @property
    def own_section(self) -> str:
        """The name of the method's own config section (``config_section``, else its name)."""
        return self.config_section or self.name

    @property
    def greedy_only(self) -> bool:
        """True when the method cannot sample."""
        return not self.supports_sampling

    def context_headroom(self, settings: Settings) -> int:
        """Positions past the prompt and the new tokens that the method's forwards may take up."""
        if self.headroom is not None:
            return self.headroom(settings)
        return self.reach(settings).inputs if self.reach is not None else 0


_REGISTRY: dict[str, Method] = {}


def register(method: Method, *, replace: bool = False) -> Method:
    """Add ``method`` to the registry (after the others: the reading order) and return it.

    Raises:
        ValueError: a malformed name, a name already registered (unless ``replace``), or a colour
            another method already has (every figure tells methods apart by colour).
    """
    if not _NAME.fullmatch(method.name):
        raise ValueError(f"method name {method.name!r}: use lowercase letters, digits and '_', a letter first")
    if method.name in _REGISTRY and not replace:
        raise ValueError(f"method {method.name!r} is already registered; pass replace=True to redefine it")
    taken = {other.color.lower(): other.name for other in _REGISTRY.values() if other.name != method.name}
    if method.color.lower() in taken:
        raise ValueError(
            f"method {method.name!r}: color {method.color!r} is already {taken[method.color.lower()]!r}'s; pick one "
            f"no method has (taken: {sorted(taken)})"
        )
    _REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method (a test's toy method); unknown names are ignored."""
    _REGISTRY.pop(name, None)


def method_names() -> tuple[str, ...]:
    """Registered names in registration order (AR first): the order of every table and figure."""
    return tuple(_REGISTRY)


def registered_methods() -> tuple[Method, ...]:
    """Registered entries in registration order."""
    return tuple(_REGISTRY.values())


def is_registered(name: str) -> bool:
    """True when ``name`` is a registered method."""
    return name in _REGISTRY


def get_method(name: str) -> Method:
    """The entry of ``name``.

    Raises:
        UnknownMethodError: listing the registered names and, when one is close, a "did you mean".
    """
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownMethodError(unknown_method_message(name)) from None


def unknown_method_message(name: Any, allowed: Iterable[str] | None = None) -> str:
    """``'<name>' is not a decoding method; expected one of [...]`` plus a "did you mean" when one is close."""
    names = list(method_names() if allowed is None else allowed)
    close = difflib.get_close_matches(str(name), names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{name!r} is not a decoding method{hint}; expected one of [{', '.join(names)}]"


def methods_where(predicate: Callable[[Method], bool]) -> tuple[str, ...]:
    """Names of the registered methods for which ``predicate`` holds, in registration order."""
    return tuple(m.name for m in _REGISTRY.values() if predicate(m))


def every_method_arms() -> tuple[str, ...]:
    """The arms of a cell of every method, in reading order: each registered method that runs on one
    model (:func:`runs_on_one_model`), needs no resource built beforehand (``Method.needs_resource``) and
    must equal AR (``Method.exact``: not a timing reference such as ``ar_standard``).

    ``+sweep=spec_bench``'s every-method cell reads it (``conf/spec_bench/every_method.yaml``, through
    the ``lade_bench_every_method`` resolver), so a method registered later joins that cell unnamed.
    """
    return methods_where(lambda m: runs_on_one_model(m) and not m.needs_resource and m.exact)


def must_match_ar(name: str) -> bool:
    """True when ``name``'s greedy rows must equal AR's (``Method.exact``); an unregistered name (rows of
    another version) is held to it, as every method then was."""
    method = _REGISTRY.get(name)
    return method is None or method.exact


def method_label(name: str) -> str:
    """Display name of a method; the name itself for one not registered (rows of another version)."""
    method = _REGISTRY.get(name)
    return method.label if method is not None else name


def configuration_label(name: str, section: Mapping[str, Any] | None) -> str:
    """The label of the configuration of ``name`` that ran with its own section ``section`` (as recorded
    in the cell's config; None where the cell has none): ``Method.describe``'s words, else the label."""
    method = _REGISTRY.get(name)
    if method is None or method.describe is None or section is None:
        return method_label(name)
    return method.describe(section)


def method_state_text(name: str, mode: str | None, low: Any, high: Any, scope: str | None = None) -> str:
    """The State column of a method's rows (``methods.state.state_text``; ``scope``: the cell's
    ``method_state.scope``, shown after the mode); a method not registered (rows of another version) is
    read as one whose state learns, so its rows' warmth still shows."""
    method = _REGISTRY.get(name)
    lifetime, static = ("cell", False) if method is None else (method.state, method.static_state)
    return state_text(lifetime, static, mode, low, high, scope)


def method_color(name: str) -> str | None:
    """Colour of a method; None (matplotlib's next colour) for one not registered."""
    method = _REGISTRY.get(name)
    return method.color if method is not None else None


def method_rank(name: str) -> int:
    """Position of ``name`` in registration order; one past the last for an unregistered name."""
    names = list(_REGISTRY)
    return names.index(name) if name in _REGISTRY else len(names)


def sort_methods(names: Iterable[str]) -> list[str]:
    """``names`` in registration order; unregistered names last, alphabetically."""
    return sorted(names, key=lambda name: (method_rank(name), name))


def cell_devices(cfg: Any) -> Any:
    """The cell's number of ranks (``DEVICES_SETTING`` of the composed config), as composed (unchecked)."""
    section, key = DEVICES_SETTING.split(".")
    return cfg[section][key]


def method_config_sections() -> dict[str, type]:
    """Section name -> schema dataclass of every registered method that declares one (``Method.config``)."""
    return {m.own_section: m.config for m in _REGISTRY.values() if m.config is not None}


def runs_on_one_model(method: Method) -> bool:
    """True when the method needs nothing but the full model on one device (what bench and gpu_check load)."""
    return method.models == (REPLICA,)


def _compiles(method: Method) -> bool:
    return method.compiles


def bind_method(
    name: str,
    model: Any,
    max_new_tokens: int,
    stop_ids: Sequence[int] = (),
    settings: Settings | None = None,
    compiled: Any = None,
) -> Callable[[Sequence[int]], Any]:
    """``run(prompt_ids) -> DecodeResult``: method ``name``, greedy, on ``model`` alone (bench, gpu_check).

    Args:
        name: a registered method that needs only the full model (:func:`runs_on_one_model`).
        model: the model.
        max_new_tokens: budget of every generation.
        stop_ids: ids that end a generation.
        settings: the config sections it reads (absent ones: the engine's defaults).
        compiled: a ``CompiledForwards`` to run it compiled (``Method.compiles``); None: eager.

    Raises:
        UnknownMethodError: ``name`` is not registered.
        ValueError: the method needs more than one model on one device (e.g. tensor-parallel AR), or
            it has no compiled mode and ``compiled`` was given.
    """
    method = get_method(name)
    if not runs_on_one_model(method):
        allowed = methods_where(runs_on_one_model)
        raise ValueError(
            f"method {name!r} runs the model roles {list(method.models)}, not one model on one device; "
            f"here use one of [{', '.join(allowed)}]"
        )
    if compiled is not None and not method.compiles:
        raise ValueError(
            f"method {name!r} has no compiled mode; compiled runs use one of [{', '.join(methods_where(_compiles))}]"
        )
    fixed = dict(settings or {})
    stops = list(stop_ids)

    def run(prompt_ids: Sequence[int]) -> Any:
        request = GenerationRequest(
            {REPLICA: model}, prompt_ids, max_new_tokens, stops, settings=fixed, compiled=compiled
        )
        return run_generation(method, request)

    return run


def resolve_settings(name: str, settings: Settings | None, facts: CellFacts) -> dict[str, Any]:
    """``settings`` as method ``name`` runs them on a model of ``facts`` outside a cell (bench, gpu_check).

    Its own section, when it resolves words (``Method.resolve``), is given in full (the engine's
    defaults under the keys ``settings`` leaves out) and resolved; other sections stay as given.
    """
    method = get_method(name)
    resolved = dict(settings or {})
    if method.resolve is None or method.config is None:
        return resolved
    given = resolved.get(method.own_section) or {}
    section = dataclasses.asdict(method.config())
    section.update(dict(given.items()) if isinstance(given, Mapping) else vars(given))
    resolved[method.own_section] = method.resolve(section, facts)
    return resolved


def run_generation(method: Method, request: GenerationRequest) -> Any:
    """``method.generate(request)``, after the engine's model checks when the method has them.

    Every caller of a method's generate (the runner, ``bench``, ``gpu_check``) goes through here, so
    a newly registered method is checked like the built-in ones without doing anything itself. The
    checks keep their verdict per model, so every call after the first costs a dictionary look-up.
    """
    if method.model_checks and REPLICA in request.models:
        from lade_bench.decoding.model_checks.support import check_model_support

        check_model_support(request.models[REPLICA], custom_mask=method.custom_mask)
    return method.generate(request)
