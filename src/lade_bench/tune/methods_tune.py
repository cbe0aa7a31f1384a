"""One tune of methods' budgets end to end (``python -m lade_bench.tune tune.methods=[...]``).

In order, failing fast: every value is checked before the model loads (the methods and their budget values,
each candidate through the method's own checks, the run settings through the runner's ``plan_cell``); then
the samples (search split first, held-out after it, never overlapping), the model, a two-dimensional device
profile (reused from ``tune.profile_from`` or the tune folder, else measured), the SEARCH (every candidate
on the search samples as ordinary cells, its speedup predicted by the step-cost model, the winners declared
and recorded before any held-out sample runs: ``budget_search``), and the HELD-OUT CHECK: AR with every
method at its authors' defaults in one cell and at its tuned settings in another, on held-out samples the
search never saw, timed as ordinary cells, with paired intervals and the step-cost prediction beside. The
tuned leaderboard (``leaderboard``) and the record are written atomically. ``tune.search_from`` reuses an
earlier tune's search record (its winners and profile): only the held-out check runs. A killed tune resumes:
cells keep their rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig
from rich.console import Console

from lade_bench.methods import REFERENCE, get_method
from lade_bench.methods.budget import candidate_key, plain
from lade_bench.profiling.device_profile import device_kind, kind_slug
from lade_bench.results.atomic import atomic_write_json
from lade_bench.runner.cell import load_cell_model, profile_key
from lade_bench.runner.console import progress_bar
from lade_bench.runner.execute import CellModel, count_units
from lade_bench.runner.plan import CellPlan, plan_cell
from lade_bench.runner.provenance import RunIdentity
from lade_bench.runner.samples import fit_samples, load_samples
from lade_bench.tune.budget_search import (
    candidate_evidence,
    candidate_record,
    declared_winner,
    method_candidates,
    method_cell_config,
    rank_candidates,
    search_rounds,
)
from lade_bench.tune.config import TuneConfigError, TuneSettings
from lade_bench.tune.leaderboard import heldout_methods, write_leaderboard
from lade_bench.tune.profile import obtain_surface
from lade_bench.tune.tuner import (
    check_sample_count,
    print_outcome_lines,
    record_run_fields,
    run_in_tune_folder,
    safe_name,
    split_fitted,
)
from lade_bench.tune.validate import run_tune_cell

SEARCH_RECORD = "methods_search.json"  # the search: candidates, predictions, declared winners (before held-out)
RECORD = "methods_record.json"  # the whole tune: the search's record plus the held-out check
SEARCH_DIR = "search"  # sweep folder of the search cells, inside the tune folder
HELDOUT_DIR = "heldout"  # sweep folder of the held-out cells
RECORD_VERSION = 1
# What must match for a search record to be reused by another tune (tune.search_from).
_SAME_TUNE_KEYS = ("run", "methods", "candidates", "search_sample_ids", "heldout_sample_ids")


@dataclass(frozen=True)
class MethodsOutcome:
    """Where a methods tune's outputs went and its declared winners (method -> candidate key)."""

    tune_dir: Path
    search_record: Path
    record: Path | None  # None: tune.search_only stopped before the held-out check
    leaderboard: Path | None
    winners: dict[str, str]


@dataclass(frozen=True)
class _Prepared:
    """Everything decided before the model loads."""

    settings: TuneSettings
    defaults_plan: CellPlan
    candidates: dict[str, list[dict[str, Any]]]
    defaults: dict[str, dict[str, Any]]  # method -> its section at the defaults (budget settings only)
    tune_dir: Path
    source: dict[str, Any] | None


def prepare_methods(cfg: DictConfig, settings: TuneSettings) -> _Prepared:
    """Check the methods tune: the run settings (the defaults cell's plan), every candidate through its
    method's own checks, the profile's KV grid; loads neither data nor model.

    Raises:
        TuneConfigError, CellConfigError, DecodingConfigError, UnknownDatasetError: a bad value, named.
    """
    arms = (REFERENCE, *settings.methods)
    root = settings.output_root.resolve()
    defaults_plan = plan_cell(method_cell_config(cfg, arms, {}, root / "_check"))
    candidates = method_candidates(settings.budgets)
    defaults: dict[str, dict[str, Any]] = {}
    for name, listed in candidates.items():
        method = get_method(name)
        section = dict(defaults_plan.settings[method.own_section])
        defaults[name] = {setting: plain(section.get(setting)) for setting in settings.budgets[name]}
        for candidate in listed:
            values = {**section, **{k: plain(v) for k, v in candidate.items()}}
            assert method.refuse is not None  # a method with a budget is a declared drafter
            why = method.refuse({method.own_section: values}, defaults_plan.facts)
            if why:
                raise TuneConfigError(f"tune.budgets.{name}: candidate {candidate_key(candidate)} is refused: {why}")
    if settings.profile_from is None and not list(cfg.device_profile.kv_lengths):
        raise TuneConfigError(
            "device_profile.kv_lengths=[] measures one context only; the step-cost search reads every step at its "
            "KV length: give lengths (e.g. [8, 64, 256, 1024, 2048]) or tune.profile_from a two-dimensional profile"
        )
    model_name = safe_name(cfg.model.name.split("/")[-1])
    device = kind_slug(device_kind(defaults_plan.device))
    name = settings.name or f"{device}-{model_name}-{defaults_plan.dataset_spec.name}-methods"
    source = _load_search_record(settings.search_from) if settings.search_from is not None else None
    return _Prepared(settings, defaults_plan, candidates, defaults, root / name, source)


def run_methods_tune(cfg: DictConfig, settings: TuneSettings, console: Console) -> MethodsOutcome:
    """Run (or resume) the methods tune ``cfg`` describes; see the module docstring for what it writes."""
    prep = prepare_methods(cfg, settings)
    plan = prep.defaults_plan
    samples = load_samples(plan)  # a missing dataset file fails here, before the model loads
    check_sample_count(
        settings,
        len(samples),
        f"dataset {plan.dataset_spec.name!r} gives {len(samples)} sample(s)",
        "lower them or select more samples (dataset.limit, per_category_limit)",
    )
    if settings.interleave_groups:
        samples = _interleaved(plan, samples)
    return run_in_tune_folder(cfg, prep.tune_dir, lambda me: _run_locked(cfg, prep, samples, me, console))


def _run_locked(cfg: DictConfig, prep: _Prepared, samples: list, me: RunIdentity, console: Console) -> MethodsOutcome:
    settings, plan, tune_dir = prep.settings, prep.defaults_plan, prep.tune_dir
    console.print(f"tune folder: {tune_dir} (run {me.run_id})", markup=False, highlight=False)
    rounds = search_rounds(prep.candidates)
    # Each round's cell runs AR and the methods that have an i-th candidate, nothing else.
    round_plans = [plan_cell(method_cell_config(cfg, (REFERENCE, *r), r, tune_dir / SEARCH_DIR)) for r in rounds]
    cell_model = load_cell_model(plan, None)
    assert cell_model.model is not None  # single device: the full replica is loaded
    kept = list(samples)
    for each in [plan, *round_plans]:  # every cell's samples are the same: those every configuration fits
        kept = fit_samples(each, kept, cell_model.model, cell_model.tokenizer).samples
    search, heldout = split_fitted(settings, kept)
    identity = _identity(cfg, plan, prep, search, heldout)
    search_path = tune_dir / SEARCH_RECORD
    if prep.source is not None:
        _check_same_tune(prep.source, identity, settings.search_from)
        record = {**prep.source, "search_from": str(settings.search_from)}
        atomic_write_json(search_path, prep.source)
        console.print(f"search reused from {settings.search_from} (no search runs)", markup=False, highlight=False)
    elif search_path.is_file():  # a resumed tune: its winners were declared before the kill; never again
        record = _load_search_record(search_path)
        _check_same_tune(record, identity, search_path)
        console.print(f"search already declared in {search_path}; resuming", markup=False, highlight=False)
    else:
        record, _ = _search(cfg, prep, cell_model, round_plans, rounds, search, identity, me, console)
        atomic_write_json(search_path, record)  # declared before any held-out sample runs
    profile = record["profile"]
    winners = {name: record["winners"][name]["settings"] for name in settings.methods}
    if settings.search_only:
        keys = {n: record["winners"][n]["key"] for n in settings.methods}
        for name, key in keys.items():
            predicted = record["winners"][name]["predicted_speedup"]
            console.print(f"  {name}: declared {key} (predicted {predicted:.3f}x)", markup=False, highlight=False)
        console.print(
            f"search declared in {search_path} (tune.search_only: no held-out check ran)", markup=False, highlight=False
        )
        return MethodsOutcome(tune_dir, search_path, None, None, keys)
    heldout_part = _heldout(cfg, prep, winners, cell_model, heldout, profile, me)
    full = {**record, "heldout": heldout_part, "finished_utc": _now()}
    record_path = tune_dir / RECORD
    atomic_write_json(record_path, full)
    md, _ = write_leaderboard(tune_dir, full)
    outcome = MethodsOutcome(
        tune_dir, search_path, record_path, md, {n: record["winners"][n]["key"] for n in settings.methods}
    )
    _print_outcome(console, outcome, full)
    return outcome


def _search(
    cfg: DictConfig,
    prep: _Prepared,
    cell_model: CellModel,
    round_plans: Sequence[CellPlan],
    rounds: Sequence[dict[str, dict[str, Any]]],
    search: list,
    identity: dict[str, Any],
    me: RunIdentity,
    console: Console,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run (or resume) every search cell, predict each candidate, declare each method's winner."""
    settings, plan = prep.settings, prep.defaults_plan
    assert cell_model.model is not None
    largest = 1
    for name, listed in prep.candidates.items():
        method = get_method(name)
        section = dict(plan.settings[method.own_section])
        for candidate in listed:
            reach = method.reach({method.own_section: {**section, **candidate}}) if method.reach else None
            largest = max(largest, reach.inputs if reach is not None else 1)
    profile, origin = obtain_surface(
        cell_model.model,
        profile_key(plan),
        prep.tune_dir,
        largest,
        settings.profile_from,
        cfg.device_profile,
        aliases=[str(cfg.model.name_or_path)] if cfg.model.get("name_or_path") else [],
    )
    console.print(f"device profile: {origin}", markup=False, highlight=False)
    ids = [s.sample_id for s in search]
    per_round = count_units(search, cfg.repeats)
    evaluated: dict[str, list[dict[str, Any]]] = {name: [] for name in prep.candidates}
    count = sum(len(c) for c in prep.candidates.values())
    title = f"search ({count} candidates in {len(rounds)} cells, {len(ids)} samples)"
    with progress_bar(per_round * len(rounds), title) as advance:
        for index, (round_plan, chosen) in enumerate(zip(round_plans, rounds, strict=True)):

            def step(what: str, index: int = index) -> None:
                advance(f"cell {index + 1}/{len(rounds)} {what}")

            purpose = "lade_bench.tune budget search"
            rows = run_tune_cell(round_plan, cell_model, search, me, step, purpose, "search_ids")
            for name, candidate in chosen.items():
                entry = candidate_record(name, index, candidate, prep.defaults[name])
                try:
                    evidence = candidate_evidence(rows, name, ids, profile)
                except ValueError as err:  # a step outside the profile: say which and how to fix it
                    raise TuneConfigError(f"the search of {name} ({entry['key']}) cannot be predicted: {err}") from err
                evaluated[name].append({**entry, **evidence, "cell": round_plan.cell_dir.name})
    ranked = {name: rank_candidates(items) for name, items in evaluated.items()}
    winners = {name: declared_winner(items) for name, items in ranked.items()}
    record = {
        "version": RECORD_VERSION,
        "identity": identity,
        **record_run_fields(cfg, plan),
        "methods": list(settings.methods),
        "search_sample_ids": ids,
        "heldout_sample_ids": identity["heldout_sample_ids"],
        "profile_origin": origin,
        "profile": profile,
        "rule": "the winner of each method is its best predicted speedup on the search samples (step-cost model), "
        "ties to the earlier candidate; declared before any held-out sample ran",
        "candidates": ranked,
        "winners": winners,
        "declared_utc": _now(),
    }
    return record, profile


def _heldout(
    cfg: DictConfig,
    prep: _Prepared,
    winners: dict[str, dict[str, Any]],
    cell_model: CellModel,
    heldout: list,
    profile: dict[str, Any],
    me: RunIdentity,
) -> dict[str, Any]:
    """AR with every method at its defaults, then at its tuned settings, as ordinary cells on the held-out
    samples; per method and configuration the measured speedup with its paired interval and the prediction."""
    plan, root = prep.defaults_plan, prep.tune_dir / HELDOUT_DIR
    plans = {
        "defaults": plan_cell(method_cell_config(cfg, plan.arms, {}, root)),
        "tuned": plan_cell(method_cell_config(cfg, plan.arms, winners, root)),
    }
    ids = [s.sample_id for s in heldout]
    distinct = {p.cell_dir: p for p in plans.values()}  # tuned = defaults for every method: one cell
    units = count_units(heldout, cfg.repeats) * len(distinct)
    cell_rows: dict[Path, pd.DataFrame] = {}
    with progress_bar(units, f"held-out ({len(distinct)} cells, {len(ids)} samples)") as advance:
        for cell_dir, cell_plan in distinct.items():
            cell_rows[cell_dir] = run_tune_cell(cell_plan, cell_model, heldout, me, advance)
    rows = {which: cell_rows[p.cell_dir] for which, p in plans.items()}
    configured = {"defaults": prep.defaults, "tuned": winners}
    return {
        "sample_ids": ids,
        "cells": {k: p.cell_dir.name for k, p in plans.items()},
        "methods": heldout_methods(rows, prep.settings.methods, ids, profile, configured),
    }


def _identity(cfg: DictConfig, plan: CellPlan, prep: _Prepared, search: list, heldout: list) -> dict[str, Any]:
    """What makes two runs the same methods tune (a reused search must match it)."""
    semantic = dict(plan.semantic)
    semantic.pop("arms", None)
    for name in prep.settings.methods:
        semantic.pop(get_method(name).own_section, None)
    return json.loads(
        json.dumps(
            {
                "run": semantic,
                "device_kind": device_kind(plan.device),
                "methods": list(prep.settings.methods),
                "candidates": {n: [candidate_key(c) for c in cs] for n, cs in prep.candidates.items()},
                "search_sample_ids": [s.sample_id for s in search],
                "heldout_sample_ids": [s.sample_id for s in heldout],
                "warmup": cfg.warmup,
                "warmup_new_tokens": cfg.warmup_new_tokens,
            },
            default=str,
        )
    )


def _load_search_record(path: Path) -> dict[str, Any]:
    """The search record ``tune.search_from`` names (the file, or a tune folder holding one)."""
    file = path / SEARCH_RECORD if path.is_dir() else path
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise TuneConfigError(f"tune.search_from={str(path)!r}: no readable {SEARCH_RECORD} there ({err})") from err
    if not isinstance(record, dict) or "winners" not in record or "identity" not in record:
        raise TuneConfigError(f"tune.search_from={str(path)!r} is not a methods search record ({SEARCH_RECORD})")
    return record


def _check_same_tune(source: dict[str, Any], identity: dict[str, Any], path: Path | None) -> None:
    """Refuse a reused search whose run settings, methods, candidates or samples differ from this tune's."""
    for key in _SAME_TUNE_KEYS:
        if source["identity"].get(key) != identity.get(key):
            raise TuneConfigError(
                f"{str(path)!r} is another tune's search: its {key} is "
                f"{source['identity'].get(key)!r}, this tune's {identity.get(key)!r}; use the same settings or another "
                "tune.name"
            )


def _interleaved(plan: CellPlan, samples: list) -> list:
    """The samples one per category group in turn (each group's in their order): a split's first k cover
    the groups evenly (``tune.interleave_groups``)."""
    groups = plan.dataset_spec.categories
    if not groups:
        raise TuneConfigError(
            f"tune.interleave_groups=true: dataset {plan.dataset_spec.name!r} has no category groups; set it to false"
        )
    group_of = {category: group for group, members in groups.items() for category in members}
    queues: dict[str, list] = {group: [] for group in groups}
    for sample in samples:
        queues[group_of[sample.payload["category"]]].append(sample)
    out = []
    while any(queues.values()):
        for queue in queues.values():
            if queue:
                out.append(queue.pop(0))
    return out


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def tuned_overrides(record: dict[str, Any]) -> list[str]:
    """The ``python -m lade_bench.run`` overrides that run every method at its tuned settings."""
    out = []
    for name, winner in record["winners"].items():
        own = get_method(name).own_section
        for setting, value in winner["settings"].items():
            out.append(f"{own}.{setting}={json.dumps(plain(value), separators=(',', ':'))}")
    return out


def _print_outcome(console: Console, outcome: MethodsOutcome, record: dict[str, Any]) -> None:
    """What was found and where every output went (plain text)."""
    from lade_bench.tune.leaderboard import speedup_text

    lines = [f"held-out check on {len(record['heldout']['sample_ids'])} samples:"]
    for name, per in record["heldout"]["methods"].items():
        winner = record["winners"][name]
        lines.append(
            f"  {name}: defaults ({per['defaults']['key']}) {speedup_text(per['defaults'])}; tuned ({winner['key']}, "
            f"search prediction {winner['predicted_speedup']:.3f}x) {speedup_text(per['tuned'])}"
        )
    lines += [
        "tuned settings: python -m lade_bench.run " + " ".join(tuned_overrides(record)),
        f"search record (candidates, predictions, declared winners): {outcome.search_record}",
        f"record: {outcome.record}",
        f"tuned leaderboard: {outcome.leaderboard} (and .csv)",
    ]
    print_outcome_lines(console, lines, outcome.tune_dir / HELDOUT_DIR)
