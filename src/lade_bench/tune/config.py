"""The tuner's config: the run's schema plus a ``tune`` section, and its checks before any model loads.

``conf/tune.yaml`` composes the same groups as ``conf/config.yaml`` (``model=``, ``dataset=``,
``sampling=``, ``device=`` ...) onto :class:`TuneRootConfig`, a subclass of the run's schema, so every
run setting means the same here and a typo fails at composition. :func:`tune_settings` turns the
``tune`` section into checked :class:`TuneSettings`; every value that cannot work (an empty search
space, N < 2, a held-out set smaller than the top-k ...) fails there, naming the value and what is
allowed, before the dataset or the model is read.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf

from lade_bench.conf import PresetError, lookahead_preset, user_conf_dir
from lade_bench.decoding import DecodingConfigError, LookaheadParams
from lade_bench.decoding.core.params import VERIFICATION_LAYOUTS
from lade_bench.methods import get_method, methods_where, unknown_method_message
from lade_bench.methods.budget import BudgetError, budget_values
from lade_bench.runner.config_schema import LadeBenchConfig, register_configs, run_schema

# The values of tune.winner (see tune.validate.declare_winner); here, as tune.validate imports this module.
SEARCH_RANK_1 = "search_rank_1"
# The method the Optuna search tunes (tune.methods' default); every other method is tuned by its budget.
LOOKAHEAD = "lookahead"
SPLIT_HELDOUT = "split_heldout"
WINNER_RULES = (SEARCH_RANK_1, SPLIT_HELDOUT)

TUNE_SCHEMA_NAME = "lade_bench_tune_schema"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


class TuneConfigError(ValueError):
    """A ``tune.*`` value the tuner cannot use (the message names it and what is allowed)."""


@dataclass
class SearchSpaceConfig:
    """Schema of ``tune.space``: the values the search may pick for each lookahead setting."""

    ngram: list[int] = MISSING
    window: list[int] = MISSING
    guesses: list[int] = MISSING
    prompt_as_reference: list[bool] = MISSING
    verification: list[str] = MISSING


@dataclass
class TuneConfig:
    """Schema of ``tune``: types only; ``conf/tune.yaml`` states each value and its default.

    Attributes:
        name: folder of this tune under ``output_root`` (null: ``<device kind>-<model>-<dataset>``).
        output_root: where tune folders go (the study, the record, the held-out cells, the figure).
        preset_name: file name of the preset (null: ``<device kind>-<model>``).
        preset_conf_dir: a Hydra config folder; the preset goes to its ``lookahead/tuned/``
            (null: the user's config folder, ``lade_bench.conf.user_conf_dir()``, which Hydra searches,
            so ``lookahead=tuned/<preset_name>`` finds it; another folder is found by adding it to
            ``hydra.searchpath``).
        overwrite_preset: replace a preset file that another tune folder wrote.
        trials: distinct configurations to evaluate (pruned ones included).
        timeout_s: stop the search after this many seconds (null: no limit); resumable.
        probe_samples: samples the search measures every configuration on.
        heldout_samples: further samples, never seen by the search, for the validation.
        top_k: best configurations of the search that the held-out validation runs.
        winner: how the winner is declared (``tune.validate.WINNER_RULES``): ``search_rank_1``
            (the search's best, before validation) or ``split_heldout`` (the best of the top-k on
            one half of the held-out samples, reported on the other half).
        prune: skip configurations whose speedup bound cannot beat the best measured so far.
        prune_after_units: probe units (sample turns) measured before the bound from the measured
            acceptance may stop a configuration (the prior bound needs none).
        sampler_seed: seed of Optuna's TPE sampler.
        baselines: arms besides AR that the held-out validation also runs (prompt lookup).
        reference_presets: ``lookahead`` presets (e.g. ``paper_7b``) also run on the held-out samples,
            beside the top-k, for comparison; never candidates for the winner.
        profile_from: a device profile JSON file, or a sweep folder holding one of the tune's
            profile key (device kind, model, dtype, attention implementation, compile mode, CPU), to
            reuse; null: the tune folder's own, measured once.
        search_from: an earlier tune's ``tune_record.json`` (or its tune folder) whose search to reuse:
            no search runs, its top-k go to the held-out validation (``lade_bench.tune.search_record``);
            null: search.
        space: the search space.
        methods: the methods tuned: ``[lookahead]`` (its N, W, G, this module's search), or methods that
            declare a budget (``Method.budget``), each searched with the step-cost model
            (``lade_bench.tune.methods_tune``).
        budgets: method -> setting -> values replacing that setting's declared candidates.
        interleave_groups: order the samples one per category group in turn before the search and
            held-out samples are taken (Spec-Bench's six groups), so each split covers every group.
        search_only: a budget tune stops once its search is declared (``methods_search.json``), before
            the held-out check (which a later run, or ``tune.search_from``, does).
    """

    name: str | None = MISSING
    output_root: str = MISSING
    preset_name: str | None = MISSING
    preset_conf_dir: str | None = MISSING
    overwrite_preset: bool = MISSING
    trials: int = MISSING
    timeout_s: float | None = MISSING
    probe_samples: int = MISSING
    heldout_samples: int = MISSING
    top_k: int = MISSING
    winner: str = MISSING
    prune: bool = MISSING
    prune_after_units: int = MISSING
    sampler_seed: int = MISSING
    baselines: list[str] = MISSING
    reference_presets: list[str] = MISSING
    profile_from: str | None = MISSING
    search_from: str | None = MISSING
    space: SearchSpaceConfig = field(default_factory=SearchSpaceConfig)
    methods: list[str] = MISSING
    budgets: dict[str, Any] = MISSING
    interleave_groups: bool = MISSING
    search_only: bool = MISSING


@dataclass
class TuneRootConfig(LadeBenchConfig):
    """The whole tune config: every run setting plus ``tune``."""

    tune: TuneConfig = field(default_factory=TuneConfig)


def register_tune_configs() -> None:
    """Store the run's schema and the tune schema in Hydra's ConfigStore (idempotent)."""
    register_configs()
    # With the registered methods' own sections, as the run's schema has them.
    ConfigStore.instance().store(name=TUNE_SCHEMA_NAME, node=run_schema(TuneRootConfig))


@dataclass(frozen=True)
class SearchSpace:
    """The checked search space: allowed values per lookahead setting, in config order."""

    ngram: tuple[int, ...]
    window: tuple[int, ...]
    guesses: tuple[int, ...]
    prompt_as_reference: tuple[bool, ...]
    verification: tuple[str, ...]

    def choices(self) -> dict[str, tuple]:
        """``{setting: allowed values}`` (the Optuna distributions are categorical over these)."""
        return {
            "ngram": self.ngram,
            "window": self.window,
            "guesses": self.guesses,
            "prompt_as_reference": self.prompt_as_reference,
            "verification": self.verification,
        }

    def size(self) -> int:
        """Number of distinct configurations."""
        size = 1
        for values in self.choices().values():
            size *= len(values)
        return size

    def largest_step(self) -> int:
        """Most input tokens a step of any configuration carries, ``(W + G)(N - 1)`` at the maxima."""
        return (max(self.window) + max(self.guesses)) * (max(self.ngram) - 1)

    def all_params(self) -> list[LookaheadParams]:
        """Every configuration of the space (for tests and small grids)."""
        keys = list(self.choices())
        return [
            LookaheadParams(**dict(zip(keys, combo, strict=True)))
            for combo in itertools.product(*self.choices().values())
        ]


@dataclass(frozen=True)
class TuneSettings:
    """The checked ``tune`` section (see :class:`TuneConfig` for each field)."""

    name: str | None
    output_root: Path
    preset_name: str | None
    preset_conf_dir: Path
    overwrite_preset: bool
    trials: int
    timeout_s: float | None
    probe_samples: int
    heldout_samples: int
    top_k: int
    winner: str
    prune: bool
    prune_after_units: int
    sampler_seed: int
    baselines: tuple[str, ...]
    references: dict[str, LookaheadParams]
    profile_from: Path | None
    search_from: Path | None
    space: SearchSpace
    methods: tuple[str, ...] = (LOOKAHEAD,)
    budgets: dict[str, dict[str, tuple[Any, ...]]] = field(default_factory=dict)
    interleave_groups: bool = False
    search_only: bool = False

    @property
    def tunes_budgets(self) -> bool:
        """True when the tune searches methods' declared budgets (not lookahead's N, W, G)."""
        return self.methods != (LOOKAHEAD,)


PRESET_SUBDIR = ("lookahead", "tuned")


def tune_settings(cfg: DictConfig) -> TuneSettings:
    """Check the ``tune`` section of a composed tune config.

    Raises:
        TuneConfigError: a count below its minimum, an empty or invalid search-space list, an
            unknown baseline arm, a top-k larger than what the search can rank, a bad name, or a
            ``profile_from`` or ``search_from`` that does not exist.
    """
    tune = cfg.tune
    minimums = {"trials": 1, "probe_samples": 1, "heldout_samples": 1, "top_k": 1, "prune_after_units": 1}
    for key, minimum in minimums.items():
        value = tune[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise TuneConfigError(f"tune.{key}={value!r} is not allowed: use an integer >= {minimum}")
    if tune.timeout_s is not None and not tune.timeout_s > 0:
        raise TuneConfigError(f"tune.timeout_s={tune.timeout_s!r} is not allowed: use a number of seconds > 0, or null")
    space = _search_space(tune.space)
    if tune.top_k > space.size():
        raise TuneConfigError(
            f"tune.top_k={tune.top_k} exceeds the {space.size()} configuration(s) of tune.space; lower top_k"
        )
    if tune.winner not in WINNER_RULES:
        raise TuneConfigError(f"tune.winner={tune.winner!r} is not allowed; use one of {list(WINNER_RULES)}")
    if tune.winner == SPLIT_HELDOUT and tune.heldout_samples < 2:
        raise TuneConfigError(
            f"tune.winner={SPLIT_HELDOUT} splits the held-out samples in two halves: tune.heldout_samples="
            f"{tune.heldout_samples} is too few, use >= 2 (20 keeps 10 per half, the fewest an interval needs)"
        )
    baselines = tuple(str(arm) for arm in tune.baselines)
    # Arms the held-out validation may compare besides AR and the tuned lookahead (Method.tuner_baseline).
    allowed = methods_where(lambda m: m.tuner_baseline)
    for arm in baselines:
        if arm not in allowed:
            raise TuneConfigError(f"tune.baselines: {arm!r} is not allowed; use any of {list(allowed)} (or [])")
    if len(set(baselines)) != len(baselines):
        raise TuneConfigError(f"tune.baselines={list(baselines)} lists an arm twice")
    for key in ("name", "preset_name"):
        value = tune[key]
        if value is not None and (not value or _SAFE_NAME.search(value) or value in (".", "..")):
            raise TuneConfigError(f"tune.{key}={value!r} must be a plain file name (letters, digits, '.', '_', '-')")
    profile_from = Path(tune.profile_from).expanduser() if tune.profile_from else None
    if profile_from is not None and not profile_from.exists():
        raise TuneConfigError(
            f"tune.profile_from={tune.profile_from!r} does not exist (a device profile JSON file, or a sweep folder)"
        )
    search_from = Path(tune.search_from).expanduser() if tune.search_from else None
    if search_from is not None and not search_from.exists():
        raise TuneConfigError(
            f"tune.search_from={tune.search_from!r} does not exist (an earlier tune's tune_record.json, or its "
            "tune folder; null to search)"
        )
    methods, budgets = _methods(tune)
    return TuneSettings(
        name=tune.name,
        output_root=Path(tune.output_root).expanduser(),
        preset_name=tune.preset_name,
        preset_conf_dir=Path(tune.preset_conf_dir).expanduser() if tune.preset_conf_dir else user_conf_dir(),
        overwrite_preset=bool(tune.overwrite_preset),
        trials=int(tune.trials),
        timeout_s=None if tune.timeout_s is None else float(tune.timeout_s),
        probe_samples=int(tune.probe_samples),
        heldout_samples=int(tune.heldout_samples),
        top_k=int(tune.top_k),
        winner=str(tune.winner),
        prune=bool(tune.prune),
        prune_after_units=int(tune.prune_after_units),
        sampler_seed=int(tune.sampler_seed),
        baselines=baselines,
        references=_reference_presets(list(tune.reference_presets)),
        profile_from=profile_from,
        search_from=search_from,
        space=space,
        methods=methods,
        budgets=budgets,
        interleave_groups=bool(tune.interleave_groups),
        search_only=bool(tune.search_only),
    )


def _methods(tune: DictConfig) -> tuple[tuple[str, ...], dict[str, dict[str, tuple[Any, ...]]]]:
    """The checked ``tune.methods`` and ``tune.budgets``: lookahead alone, or methods that declare a budget,
    each override a setting of its budget (``methods.budget.budget_values``)."""
    listed = [str(m) for m in tune.methods]
    tunable = methods_where(lambda m: m.budget is not None)
    allowed = [LOOKAHEAD, *tunable]
    if not listed:
        raise TuneConfigError(f"tune.methods is empty: list {LOOKAHEAD} or any of {list(tunable)}")
    if len(set(listed)) != len(listed):
        raise TuneConfigError(f"tune.methods={listed} lists a method twice")
    for name in listed:
        if name not in allowed:
            raise TuneConfigError(f"tune.methods: {unknown_method_message(name, allowed)} (those that can be tuned)")
    if LOOKAHEAD in listed and len(listed) > 1:
        raise TuneConfigError(
            f"tune.methods={listed}: {LOOKAHEAD} is tuned on its own (its N, W, G search); run it as "
            f"tune.methods=[{LOOKAHEAD}] and the others in another tune"
        )
    given = dict(tune.budgets or {})
    budgets: dict[str, dict[str, tuple[Any, ...]]] = {}
    for name, overrides in given.items():
        if name not in listed or name == LOOKAHEAD:
            raise TuneConfigError(
                f"tune.budgets.{name}: {name!r} is not among the tuned methods {listed}; give budgets of those only"
            )
        plain_overrides = OmegaConf.to_container(overrides) if isinstance(overrides, DictConfig) else overrides
        if not isinstance(plain_overrides, dict):
            raise TuneConfigError(f"tune.budgets.{name}={overrides!r} must map budget settings to lists of values")
        try:
            budgets[name] = budget_values(
                name, get_method(name).budget, {str(k): v for k, v in plain_overrides.items()}
            )
        except BudgetError as err:
            raise TuneConfigError(str(err)) from err
    for name in listed:
        if name != LOOKAHEAD and name not in budgets:
            budgets[name] = budget_values(name, get_method(name).budget)
    return tuple(listed), budgets


def _reference_presets(names: list[str]) -> dict[str, LookaheadParams]:
    """The named ``lookahead=`` presets (``tuned/<name>`` too) as one-device params."""
    if len(set(names)) != len(names):
        raise TuneConfigError(f"tune.reference_presets={names} lists a preset twice")
    try:
        return {name: lookahead_preset(name) for name in names}
    except PresetError as err:
        raise TuneConfigError(f"tune.reference_presets: {err}") from err


def _search_space(space: DictConfig) -> SearchSpace:
    values: dict[str, tuple] = {}
    for key in ("ngram", "window", "guesses", "prompt_as_reference", "verification"):
        listed = list(space[key])
        if not listed:
            raise TuneConfigError(f"tune.space.{key} is empty: list at least one value")
        if len(set(listed)) != len(listed):
            raise TuneConfigError(f"tune.space.{key}={listed} lists a value twice")
        values[key] = tuple(listed)
    for value in values["verification"]:
        if value not in VERIFICATION_LAYOUTS:
            raise TuneConfigError(
                f"tune.space.verification: {value!r} is not allowed; use any of {list(VERIFICATION_LAYOUTS)}"
            )
    # One configuration per extreme is enough: the checks are per value (N >= 2, W >= 1, G >= 0).
    try:
        for n in values["ngram"]:
            LookaheadParams(ngram=n)
        for w in values["window"]:
            LookaheadParams(window=w)
        for g in values["guesses"]:
            LookaheadParams(guesses=g)
    except DecodingConfigError as err:
        raise TuneConfigError(f"tune.space: {err}") from err
    return SearchSpace(**values)
