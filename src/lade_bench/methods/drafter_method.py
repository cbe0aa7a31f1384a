"""A drafter's declaration: a few lines that build its whole registry entry from its engine.

A drafting method (prompt lookup, Token Recycling, SuffixDecoding, SAM-Decoding, PIA, REST) is its engine
file in ``lade_bench.decoding.drafters`` plus one declaration in ``lade_bench.methods.drafters``::

    DRAFTER = declare_drafter(
        "pia", label="PIA (Ant trie lookahead)", color="#8c6d31", custom_mask=True,
        settings=PiaSettings, engine=pia_generate, reach=pia_reach, new_state=new_pia_state,
    )

The engine's settings are one frozen dataclass that checks itself (raising ``DecodingConfigError`` naming the
bad value and the allowed ones); its fields are the config section ``cfg.<name>``, their defaults the
section's. The engine function takes ``(model, prompt_ids, max_new_tokens, settings, *, eos_token_id, seed,
sampling)``, plus ``state`` when the method keeps one across a cell's requests and ``compiled`` when it has a
compiled mode. :func:`declare_drafter` builds the ``Method`` (generate, reach, refuse, new_state, the section's
schema) from those pieces and checks them against each other, so no hook can be forgotten: an engine that
takes a ``state`` needs ``new_state`` (and the method's state is then ``"cell"``), one that takes
``compiled`` is declared ``compiles=True``, and neither can be declared without the other.

The engine modules import torch inside their functions: declaring imports no torch, so the registry stays
cheap to read.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lade_bench.decoding.core.params import DecodingConfigError
from lade_bench.methods.budget import Budget
from lade_bench.methods.registry import CellFacts, GenerationRequest, Method, Settings
from lade_bench.methods.state import use_state

# Keyword arguments every drafter engine takes after (model, prompt_ids, max_new_tokens, settings).
ENGINE_KEYWORDS = ("eos_token_id", "seed", "sampling")
# The engine's keyword for the cell's state (``new_state`` declared) and for the compiled forwards (``compiles``).
STATE_KEYWORD = "state"
COMPILED_KEYWORD = "compiled"

Refusal = Callable[[Any, CellFacts], "str | None"]


@dataclass(frozen=True, eq=False)
class DrafterDeclaration:
    """A declared drafter: its engine pieces and the registry entry built from them.

    Attributes:
        name: the method's name, its ``arms=[...]`` value and its config section.
        settings: the engine's frozen settings dataclass (the section's schema and its checks).
        engine: the engine function (see the module docstring for its arguments).
        engine_reach: settings -> the deepest and largest draft (a ``ForwardReach``).
        empty_state: settings -> an empty per-cell state; None: the method keeps no state across requests.
        refusals: more reasons a cell cannot run it, each ``(settings, cell) -> message | None``, asked
            after the settings check themselves.
        after: the method it follows in the reading order of tables and figures (None: after every
            built-in, by name).
        method: the registry entry (built on construction).
    """

    name: str
    settings: type
    engine: Callable[..., Any]
    engine_reach: Callable[[Any], Any]
    empty_state: Callable[[Any], Any] | None
    refusals: tuple[Refusal, ...]
    after: str | None
    entry: dict[str, Any] = field(repr=False)
    method: Method = field(init=False, repr=False)

    def __post_init__(self) -> None:
        stateful = self.empty_state is not None
        method = Method(
            self.name,
            self.generate,
            config=section_schema(self.settings),
            reach=self.reach,
            refuse=self.refuse,
            state="cell" if stateful else "none",
            new_state=self.new_state if stateful else None,
            **self.entry,
        )
        object.__setattr__(self, "method", method)

    def parse(self, settings: Settings) -> Any:
        """The cell's section as the engine's checked settings (absent: the defaults).

        Raises:
            DecodingConfigError: a value the settings refuse (the message names it and what is allowed).
        """
        value = settings.get(self.name)
        if isinstance(value, self.settings):
            return value
        return self.settings(**GenerationRequest({}, (), 1, settings=settings).section(self.name))

    def reach(self, settings: Settings) -> Any:
        """How far the cell's drafts reach (``Method.reach``)."""
        return self.engine_reach(self.parse(settings))

    def new_state(self, settings: Settings) -> Any:
        """An empty per-cell state shaped by the cell's section (``Method.new_state``)."""
        assert self.empty_state is not None  # Method.new_state is set only for a stateful drafter
        return self.empty_state(self.parse(settings))

    def refuse(self, settings: Settings, cell: CellFacts) -> str | None:
        """Why the cell cannot run the method (a setting out of range, then each declared refusal), or None."""
        try:
            parsed = self.parse(settings)
        except DecodingConfigError as err:
            return str(err)
        for refusal in self.refusals:
            why = refusal(parsed, cell)
            if why:
                return why
        return None

    def generate(self, request: GenerationRequest) -> Any:
        """The engine on the request, with the cell's state when the method keeps one (``request.state``:
        warm; without one a fresh state: cold; its warmth recorded by ``use_state``)."""
        settings = self.parse(request.settings)
        keywords: dict[str, Any] = {
            "eos_token_id": list(request.stop_ids),
            "seed": request.seed,
            "sampling": request.sampling,
        }
        if self.method.compiles:
            keywords[COMPILED_KEYWORD] = request.compiled

        def run(**more: Any) -> Any:
            return self.engine(request.model, request.prompt_ids, request.max_new_tokens, settings, **keywords, **more)

        if self.empty_state is None:
            return run()
        empty_state = self.empty_state
        return use_state(request.state, lambda: empty_state(settings), lambda state: run(state=state))


def declare_drafter(
    name: str,
    *,
    label: str,
    color: str,
    custom_mask: bool,
    settings: type,
    engine: Callable[..., Any],
    reach: Callable[[Any], Any],
    new_state: Callable[[Any], Any] | None = None,
    static_state: bool = False,
    refusals: Sequence[Refusal] = (),
    resolve: Callable[[dict[str, Any], CellFacts], dict[str, Any]] | None = None,
    hashed: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
    compiles: bool = False,
    supports_sampling: bool = True,
    tuner_baseline: bool = True,
    needs_resource: bool = False,
    describe: Callable[[Mapping[str, Any]], str] | None = None,
    after: str | None = None,
    budget: Budget | None = None,
) -> DrafterDeclaration:
    """Declare a drafter: its whole registry entry, built from its engine (``Method`` says what each field does).

    Args:
        name: the method's name (``arms=[...]``, the ``arm`` column) and its config section ``cfg.<name>``.
        label: its name in tables and legends.
        color: its colour in every figure (one no other method has: ``register`` refuses a taken one).
        custom_mask: its forwards feed a tree under a custom 4D mask (a chain-only drafter: False).
        settings: the engine's settings, a frozen dataclass that checks itself on construction.
        engine: ``engine(model, prompt_ids, max_new_tokens, settings, *, eos_token_id, seed, sampling)``,
            plus ``state`` (with ``new_state``) and ``compiled`` (with ``compiles``).
        reach: settings -> the engine's ``ForwardReach`` (``draft_tree.draft_reach``).
        new_state: settings -> an empty state kept across a cell's requests (``requests_seen``,
            ``size()``); given exactly when the engine takes ``state``.
        static_state: that state is never changed by a request (REST's datastore: labelled ``static``).
        refusals: more reasons a cell cannot run it, ``(settings, cell) -> message | None``, asked by the
            plan after the settings checked themselves.
        resolve: ``Method.resolve`` (a word of the section naming a resource of the cell's model).
        hashed: ``Method.hashed`` (what of the section enters the cell id).
        compiles: it has a compiled mode; given exactly when the engine takes ``compiled``.
        supports_sampling: False for a greedy-only drafter.
        tuner_baseline: ``tune.baselines`` may name it.
        needs_resource: ``Method.needs_resource`` (its defaults need a resource built beforehand).
        describe: ``Method.describe`` (its section as recorded -> the label of the configuration that ran).
        after: the method it follows in tables and figures (None: after every built-in, by name).
        budget: ``Method.budget``: the settings' fields that size its drafts and the values the tuner
            searches (each must be a field of ``settings``).

    Raises:
        ValueError: ``settings`` is not a frozen dataclass, a budget setting that is not one of its fields,
            ``static_state`` without ``new_state``, or the engine's arguments disagree with ``new_state`` /
            ``compiles`` (each named with the fix).
    """
    if not (isinstance(settings, type) and dataclasses.is_dataclass(settings)):
        raise ValueError(f"drafter {name!r}: settings={settings!r} is not a dataclass (the engine's settings)")
    if not settings.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise ValueError(
            f"drafter {name!r}: settings={settings.__name__} is not frozen; declare it @dataclass(frozen=True), "
            "so a checked value cannot change after its check"
        )
    fields = [f.name for f in dataclasses.fields(settings)]
    if budget is not None and any(setting not in fields for setting in budget.values):
        raise ValueError(f"drafter {name!r}: budget settings {list(budget.values)} must be fields of {fields}")
    if static_state and new_state is None:
        raise ValueError(f"drafter {name!r}: static_state=True needs new_state (settings -> the state, loaded once)")
    keywords = set(inspect.signature(engine).parameters)
    missing = [k for k in ENGINE_KEYWORDS if k not in keywords]
    if missing:
        raise ValueError(f"drafter {name!r}: its engine {engine.__name__} takes no {missing}; see ENGINE_KEYWORDS")
    for keyword, declared, hook in (
        (STATE_KEYWORD, new_state is not None, "new_state (settings -> an empty state)"),
        (COMPILED_KEYWORD, compiles, "compiles=True"),
    ):
        if keyword in keywords and not declared:
            raise ValueError(f"drafter {name!r}: its engine {engine.__name__} takes {keyword!r}; declare {hook}")
        if declared and keyword not in keywords:
            raise ValueError(
                f"drafter {name!r} declares {hook}, but its engine {engine.__name__} takes no {keyword!r}: "
                f"give the engine a {keyword!r} keyword or drop the declaration"
            )
    entry = {
        "label": label,
        "color": color,
        "custom_mask": custom_mask,
        "supports_sampling": supports_sampling,
        "tuner_baseline": tuner_baseline,
        "compiles": compiles,
        "static_state": static_state,
        "resolve": resolve,
        "hashed": hashed,
        "needs_resource": needs_resource,
        "describe": describe,
        "budget": budget,
    }
    return DrafterDeclaration(name, settings, engine, reach, new_state, tuple(refusals), after, entry)


def section_schema(settings: type) -> type:
    """The config section's schema: the settings' fields, types and defaults in a plain (unfrozen) dataclass.

    OmegaConf makes a frozen dataclass's node read-only, so no override could set it; the copy keeps the
    class name, which Hydra's type errors quote.
    """
    hints = typing.get_type_hints(settings)
    fields = []
    for spec in dataclasses.fields(settings):
        if spec.default is not dataclasses.MISSING:
            default = dataclasses.field(default=spec.default)
        else:
            default = dataclasses.field(default_factory=spec.default_factory)
        fields.append((spec.name, hints[spec.name], default))
    schema = dataclasses.make_dataclass(settings.__name__, fields)
    schema.__module__ = settings.__module__
    schema.__qualname__ = settings.__qualname__
    schema.__doc__ = settings.__doc__
    return schema
