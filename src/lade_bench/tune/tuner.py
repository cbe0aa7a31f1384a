"""One tune end to end: checks, samples, model, device profile, search, held-out validation, outputs.

Order matters for failing fast: every config value (the tune section, the run settings through the
runner's own ``plan_cell``, the dataset, the preset file) is checked before the model loads. The
tune folder is locked (``runner.locks``) for the whole run, so two tunes never write one folder,
and every output is written atomically; a killed tune resumes from its study and its held-out rows.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from lade_bench.conf import search_dirs
from lade_bench.decoding import LookaheadParams
from lade_bench.profiling.device_profile import describe_device, device_kind, kind_slug, step_cost
from lade_bench.report.figures import TUNE_FIGURE, save_figure
from lade_bench.report.tune_figure import draw_tune_figure
from lade_bench.results.atomic import remove_temp_files
from lade_bench.runner.cell import load_cell_model, profile_key  # the runner's own loading and checks, not a copy
from lade_bench.runner.console import progress_bar
from lade_bench.runner.execute import CellModel, count_units
from lade_bench.runner.locks import LockSettings, claim
from lade_bench.runner.plan import CellPlan, plan_cell
from lade_bench.runner.provenance import RunIdentity, current_run
from lade_bench.runner.samples import fit_samples, load_samples
from lade_bench.stats import MIN_CI_UNITS
from lade_bench.tune.config import TuneConfigError, TuneSettings, tune_settings
from lade_bench.tune.outputs import (
    check_preset_writable,
    heldout_records,
    preset_path,
    write_heldout_table,
    write_preset,
    write_record,
)
from lade_bench.tune.probe import build_units, measure_config, warm_up_arm
from lade_bench.tune.profile import obtain_profile
from lade_bench.tune.search import (
    PRUNED_PRIOR,
    SearchSettings,
    ar_token_time,
    best_speedup,
    config_key,
    evaluated,
    open_study,
    recover_interrupted,
    run_search,
    search_rank,
)
from lade_bench.tune.search_record import check_same_tune, declared_top_k, load_search_record, search_part
from lade_bench.tune.validate import (
    SPLIT_HELDOUT,
    HeldoutResult,
    WinnerChoice,
    cell_config,
    declare_winner,
    validate_config,
)

log = logging.getLogger(__name__)

LOCK_NAME = "tune.lock"
# The identity fields known only once the model has filtered the samples.
_SAMPLE_ID_FIELDS = ("probe_sample_ids", "heldout_sample_ids")
FIGURES_DIR = "figures"
T = TypeVar("T")


@dataclass(frozen=True)
class TuneOutcome:
    """Where a tune's outputs went and what it found.

    Attributes:
        tune_dir: the tune folder (study, record, held-out cells, table, figure).
        record: ``tune_record.json``.
        preset: the preset file.
        table: ``heldout.md``.
        figure: the figure's PNG.
        winner: the winner's configuration key.
        stopped: why the search stopped (``trials``, ``space exhausted``, ``timeout``).
    """

    tune_dir: Path
    record: Path
    preset: Path
    table: Path
    figure: Path
    winner: str
    stopped: str


@dataclass(frozen=True)
class _Prepared:
    """Everything decided before the model loads."""

    settings: TuneSettings
    base_plan: CellPlan
    tune_dir: Path
    preset: Path
    arms: tuple[str, ...]
    source: dict[str, Any] | None  # the earlier tune's record whose search is reused (tune.search_from)


def prepare(cfg: DictConfig) -> _Prepared:
    """Check every value and derive the tune folder and preset path; loads neither data nor model.

    Raises:
        TuneConfigError, CellConfigError, DecodingConfigError, UnknownDatasetError: a bad value, named.
    """
    settings = tune_settings(cfg)
    arms = ("ar", "lookahead", *settings.baselines)
    space, references = settings.space, list(settings.references.values())
    # The widest configuration run (space and reference presets): the prompt-length filter leaves room
    # for its window, so every configuration runs on the same samples.
    widest = LookaheadParams(
        max([*space.ngram, *(p.ngram for p in references)]),
        max([*space.window, *(p.window for p in references)]),
        max([*space.guesses, *(p.guesses for p in references)]),
        space.prompt_as_reference[0],
        space.verification[0],
    )
    # The runner's own checks (model, dataset, sampling, arms, sandbox, device) on a cell of the tune;
    # this plan writes nothing (its folder is never created).
    base_plan = plan_cell(cell_config(cfg, widest, arms, settings.output_root.resolve() / "_check"))
    model_name = safe_name(cfg.model.name.split("/")[-1])
    device = kind_slug(device_kind(base_plan.device))
    name = settings.name or f"{device}-{model_name}-{base_plan.dataset_spec.name}"
    tune_dir = settings.output_root.resolve() / name
    preset = preset_path(settings.preset_conf_dir, settings.preset_name or f"{device}-{model_name}")
    check_preset_writable(preset, tune_dir, settings.overwrite_preset)
    source = None
    if settings.search_from is not None:
        source = load_search_record(settings.search_from)
        # Everything but the sample ids is known now; those are checked once the model has filtered them.
        static = _identity(cfg, base_plan, settings, [], [])
        check_same_tune(source, static, [key for key in static if key not in _SAMPLE_ID_FIELDS])
    return _Prepared(settings, base_plan, tune_dir, preset, arms, source)


def run_tune(cfg: DictConfig, console: Console | None = None) -> Any:
    """Run (or resume) the tune ``cfg`` describes; see the package docstring for what it writes.

    Returns a :class:`TuneOutcome` (lookahead), or ``methods_tune.MethodsOutcome`` when ``tune.methods``
    names methods with a declared budget.
    """
    console = console or Console(stderr=True)
    settings = tune_settings(cfg)
    if settings.tunes_budgets:  # every other method: its declared budget, searched with the step-cost model
        from lade_bench.tune.methods_tune import run_methods_tune

        return run_methods_tune(cfg, settings, console)
    prep = prepare(cfg)
    settings, plan = prep.settings, prep.base_plan
    samples = load_samples(plan)  # a missing dataset file fails here, before the model loads
    check_sample_count(
        settings,
        len(samples),
        f"dataset {plan.dataset_spec.name!r} gives {len(samples)} sample(s) (dataset.limit={cfg.dataset.limit}, "
        f"dataset.offset={cfg.dataset.offset})",
        "lower them or raise dataset.limit",
    )
    return run_in_tune_folder(cfg, prep.tune_dir, lambda me: _run_locked(cfg, prep, samples, me, console))


def check_sample_count(settings: TuneSettings, count: int, found: str, fix: str | None = None) -> None:
    """Refuse ``count`` samples fewer than the tune's search and held-out splits need together.

    Raises:
        TuneConfigError: ``found`` (what gave too few), the number needed and, where given, ``fix``.
    """
    needed = settings.probe_samples + settings.heldout_samples
    if count < needed:
        message = f"{found}; tune.probe_samples + tune.heldout_samples = {needed}"
        raise TuneConfigError(f"{message}: {fix}" if fix else message)


def split_fitted(settings: TuneSettings, kept: list) -> tuple[list, list]:
    """The search (probe) and held-out samples, in order, from those that fit the model's context.

    Raises:
        TuneConfigError: fewer fit than the two splits need.
    """
    check_sample_count(settings, len(kept), f"only {len(kept)} sample(s) fit the model's context")
    needed = settings.probe_samples + settings.heldout_samples
    return kept[: settings.probe_samples], kept[settings.probe_samples : needed]


def run_in_tune_folder(cfg: DictConfig, tune_dir: Path, run: Callable[[RunIdentity], T]) -> T:
    """``run`` (given this process's run identity) holding the tune folder's lock, after removing the
    temporary files an interrupted run left there; two tunes never write one folder.

    Raises:
        TuneConfigError: another live process holds the folder's lock.
    """
    me = current_run()
    tune_dir.mkdir(parents=True, exist_ok=True)
    ownership = claim(tune_dir / LOCK_NAME, me, LockSettings.from_config(cfg.cell_lock), f"tune {tune_dir}")
    if ownership is None:
        raise TuneConfigError(f"another live process is running the tune in {tune_dir}; wait for it or pick tune.name")
    try:
        for leftover in remove_temp_files(tune_dir):
            log.info("removed %s, left by an interrupted run", leftover)
        return run(me)
    finally:
        ownership.release()


def _run_locked(cfg: DictConfig, prep: _Prepared, samples: list, me: RunIdentity, console: Console) -> TuneOutcome:
    settings, plan, tune_dir = prep.settings, prep.base_plan, prep.tune_dir
    console.print(f"tune folder: {tune_dir} (run {me.run_id})", markup=False, highlight=False)
    cell_model = load_cell_model(plan, None)
    assert cell_model.model is not None  # single device (ranks None): the full replica is loaded
    kept = fit_samples(plan, samples, cell_model.model, cell_model.tokenizer).samples
    probe, heldout = split_fitted(settings, kept)
    identity = _identity(cfg, plan, settings, probe, heldout)
    if prep.source is not None:
        check_same_tune(prep.source, identity)
        base = _record_base(cfg, plan, settings, identity, prep.source["profile"], probe, heldout)
        assert settings.search_from is not None  # a source is loaded only from it
        searched = {**base, **search_part(prep.source, settings.search_from)}
        top = declared_top_k(prep.source, settings.top_k)
        console.print(
            f"search reused from {searched['search_from']['record']} (no search runs); held-out validation of its "
            f"declared top-{len(top)}: " + ", ".join(f"{config_key(p)} ({s:.3f}x on the probe)" for p, s in top)
        )
    else:
        searched, top = _search(cfg, prep, cell_model, probe, heldout, identity, console)
    results = _validate(cfg, prep, top, cell_model, heldout, me)
    choice = declare_winner(results, settings.winner, [s.sample_id for s in heldout])
    winner = choice.winner
    records = heldout_records(results, choice)
    record = {
        **searched,
        "heldout": records,
        "winner": winner.key,
        "winner_rule": choice.rule,
        "selection_sample_ids": list(choice.selection_ids),
        "report_sample_ids": list(choice.report_ids),
        "winner_selection": _selection_text(settings, choice, len(top)),
        "preset": str(prep.preset),
    }
    record_path = write_record(tune_dir, record)
    table_md, _ = write_heldout_table(tune_dir, records, _table_preamble(record, choice), choice.rule)
    header = _preset_header(record, choice, records)
    prep.preset.parent.mkdir(parents=True, exist_ok=True)
    write_preset(prep.preset, winner, header, tune_dir)
    png, _ = save_figure(draw_tune_figure(record), tune_dir / FIGURES_DIR, TUNE_FIGURE)
    outcome = TuneOutcome(tune_dir, record_path, prep.preset, table_md, png, winner.key, str(record["stopped"]))
    _print_outcome(console, outcome, record, choice, settings.preset_conf_dir)
    return outcome


def _search(
    cfg: DictConfig, prep: _Prepared, cell_model: CellModel, probe: list, heldout: list, identity, console: Console
) -> tuple[dict[str, Any], list[tuple[LookaheadParams, float]]]:
    """Run (or resume) the search; the record's search fields and the declared top-k, best first."""
    settings, plan, tune_dir = prep.settings, prep.base_plan, prep.tune_dir
    assert cell_model.model is not None  # single device: the full replica is loaded
    study = open_study(tune_dir, identity, settings.sampler_seed)
    for key in recover_interrupted(study):
        console.print(f"resuming: {key} was interrupted by a kill; measuring it again first")
    profile, origin = obtain_profile(
        cell_model.model,
        profile_key(plan),
        tune_dir,
        settings.space,
        settings.profile_from,
        cfg.device_profile,
        also=list(settings.references.values()),
        aliases=[str(cfg.model.name_or_path)] if cfg.model.get("name_or_path") else [],
    )
    console.print(f"device profile: {origin}", markup=False, highlight=False)
    units = build_units(plan, cell_model, probe, range(len(probe)))
    warm_up_arm(plan, cell_model, units[0], "ar")
    base = _record_base(cfg, plan, settings, identity, profile, probe, heldout)

    def measure(params: LookaheadParams, after_unit):
        trial_plan = plan_cell(cell_config(cfg, params, ("ar", "lookahead"), tune_dir))
        return measure_config(trial_plan, cell_model, units, after_unit)

    search = SearchSettings(
        space=settings.space,
        profile=profile,
        trials=settings.trials,
        timeout_s=settings.timeout_s,
        prune=settings.prune,
        seed=settings.sampler_seed,
        prune_after_units=settings.prune_after_units,
    )
    stopped = _search_with_progress(study, search, measure, lambda s: write_record(tune_dir, _record(base, s, profile)))
    top = _top_k(study, settings.top_k)
    if not top:
        raise RuntimeError("the search measured no configuration (every one was pruned or failed); see the record")
    console.print(
        f"search stopped ({stopped}); held-out validation of the pre-declared top-{len(top)}: "
        + ", ".join(f"{config_key(p)} ({s:.3f}x on the probe)" for p, s in top)
    )
    return {**_record(base, study, profile), "stopped": stopped}, top


def _search_with_progress(study, search: SearchSettings, measure, write) -> str:
    """:func:`run_search` under a progress bar: configurations evaluated, best so far, time left."""
    columns = (
        TextColumn("[bold]search"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    total = min(search.trials, search.space.size())
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task(_best_text(study), total=total, completed=min(len(evaluated(study)), total))
        # The remaining-time estimate would count the resumed configurations as instant: restart it.
        progress.reset(task, total=total, completed=min(len(evaluated(study)), total), description=_best_text(study))

        def on_trial(current) -> None:
            write(current)
            progress.update(task, completed=min(len(evaluated(current)), total), description=_best_text(current))

        write(study)
        return run_search(study, search, measure, on_trial)


def _best_text(study) -> str:
    best = best_speedup(study)
    if best is None:
        return "best: none measured yet"
    top = max((e for e in evaluated(study) if not e.pruned), key=lambda e: e.speedup)
    pruned = sum(e.pruned for e in evaluated(study))
    return f"best {best:.3f}x {top.key}, {pruned} pruned"


def _top_k(study, k: int) -> list[tuple[LookaheadParams, float]]:
    measured = [e for e in evaluated(study) if not e.pruned and math.isfinite(e.speedup)]
    measured.sort(key=lambda e: search_rank(e.speedup, e.trial.number))
    return [(e.params, e.speedup) for e in measured[:k]]


def _validate(cfg, prep: _Prepared, top, cell_model: CellModel, heldout: list, me: RunIdentity) -> list[HeldoutResult]:
    units = count_units(heldout, cfg.repeats) * (len(top) + len(prep.settings.references))
    results: list[HeldoutResult] = []
    with progress_bar(units, f"held-out (top-{len(top)}, {len(heldout)} samples)") as advance:
        for rank, (params, probe_speedup) in enumerate(top, start=1):
            key = config_key(params)

            def step(what: str, key: str = key) -> None:
                advance(f"{key} {what}")

            cell = (cfg, params, rank, probe_speedup, cell_model, heldout, prep.arms, prep.tune_dir, me)
            results.append(validate_config(*cell, step))
        for name, params in prep.settings.references.items():

            def reference_step(what: str, name: str = name) -> None:
                advance(f"{name} {what}")

            reference_cell = (cfg, params, None, math.nan, cell_model, heldout, prep.arms, prep.tune_dir, me)
            results.append(validate_config(*reference_cell, reference_step, reference=name))
    return results


def _identity(cfg: DictConfig, plan: CellPlan, settings: TuneSettings, probe: list, heldout: list) -> dict[str, Any]:
    """What makes two runs the same tune (a resumed study must match it)."""
    semantic = dict(plan.semantic)
    semantic.pop("lookahead", None)
    semantic.pop("arms", None)
    return {
        "run": semantic,
        "device_kind": device_kind(plan.device),
        "space": {k: list(v) for k, v in settings.space.choices().items()},
        "probe_sample_ids": [s.sample_id for s in probe],
        "heldout_sample_ids": [s.sample_id for s in heldout],
        "top_k": settings.top_k,
        "baselines": list(settings.baselines),
        "reference_presets": {name: config_key(p) for name, p in settings.references.items()},
        "warmup": cfg.warmup,
        "warmup_new_tokens": cfg.warmup_new_tokens,
    }


def record_run_fields(cfg: DictConfig, plan: CellPlan) -> dict[str, Any]:
    """What a tune's record says it ran: model, dataset, sampling, new-token budget and the device."""
    return {
        "model": cfg.model.name,
        "dataset": plan.dataset_spec.name,
        "sampling": cfg.sampling.name,
        "max_new_tokens": cfg.max_new_tokens,
        "device": describe_device(plan.device),
    }


def _record_base(cfg, plan: CellPlan, settings: TuneSettings, identity, profile, probe, heldout) -> dict[str, Any]:
    return {
        "identity": identity,
        **record_run_fields(cfg, plan),
        "device_kind": device_kind(plan.device),
        "probe_sample_ids": [s.sample_id for s in probe],
        "heldout_sample_ids": [s.sample_id for s in heldout],
        "top_k": settings.top_k,
        "trials_target": settings.trials,
        "prune": settings.prune,
        "profile": profile,
        "config": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
    }


def _record(base: dict[str, Any], study, profile) -> dict[str, Any]:
    """The record as of now: every evaluated configuration with its bound, probe numbers and fate."""
    configurations = []
    for e in evaluated(study):
        attrs = e.trial.user_attrs
        probe = attrs.get("probe")
        cost = None
        if probe and _finite(probe.get("mean_step_tokens")) and _finite(probe.get("ar_time_per_token")):
            cost = step_cost(profile, probe["mean_step_tokens"], probe["ar_time_per_token"])
        configurations.append(
            {
                "trial": e.trial.number,
                "config": e.key,
                "ngram": e.params.ngram,
                "window": e.params.window,
                "guesses": e.params.guesses,
                "prompt_as_reference": e.params.prompt_as_reference,
                "verification": e.params.verification,
                "pruned": e.pruned,
                "pruned_by": attrs.get("pruned_by"),
                "best_before": attrs.get("best_before"),
                "prior_bound": attrs.get("prior_bound"),
                "measured_bound": attrs.get("measured_bound"),
                "probe_speedup": None if e.pruned else e.speedup,
                "step_cost": cost,
                "probe": probe,
                "started_utc": e.trial.datetime_start.isoformat() if e.trial.datetime_start else None,
                "seconds": (e.trial.datetime_complete - e.trial.datetime_start).total_seconds()
                if e.trial.datetime_complete and e.trial.datetime_start
                else None,
            }
        )
    pruned = [c for c in configurations if c["pruned"]]
    search = {
        "evaluated": len(configurations),
        "measured": len(configurations) - len(pruned),
        "pruned_unmeasured": sum(c["pruned_by"] == PRUNED_PRIOR for c in pruned),
        "pruned_while_measuring": sum(c["pruned_by"] != PRUNED_PRIOR for c in pruned),
        "best_probe_speedup": best_speedup(study),
        "ar_time_per_token": ar_token_time(study),
    }
    return {**base, "search": search, "configurations": configurations}


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))


def _selection_text(settings: TuneSettings, choice: WinnerChoice, k: int) -> str:
    """How the winner was declared and what its number means, in a reader's words."""
    references = ", ".join(settings.references)
    compared = (
        f" The reference presets ({references}) ran on the same samples for comparison only." if references else ""
    )
    against = f"AR{' and ' + ', '.join(settings.baselines) if settings.baselines else ''}"
    intervals = f" Intervals are paired bootstraps over samples, shown only from {MIN_CI_UNITS} samples up."
    if choice.rule == SPLIT_HELDOUT:
        return (
            f"The top-{k} configurations by probe speedup (declared by the search before any held-out sample ran) "
            f"were each run against {against} on the held-out samples the search never saw. Rule "
            f"tune.winner={SPLIT_HELDOUT}: the winner is the one with the best speedup on the selection half "
            f"({len(choice.selection_ids)} samples: {', '.join(map(str, choice.selection_ids))}); every number "
            f"reported is on the other half only ({len(choice.report_ids)} samples: "
            f"{', '.join(map(str, choice.report_ids))}), which the choice never looked at.{intervals}{compared}"
        )
    return (
        f"The winner is the search's rank 1 (rule tune.winner={choice.rule}, fixed in the config before the tune "
        f"ran), declared before any held-out sample ran; the held-out samples ({len(choice.report_ids)}, never "
        f"seen by the search) measure it, choose nothing, so its held-out number carries no selection. The other "
        f"{k - 1} of the top-{k} ran on the same samples against {against} and are reported beside it as not "
        f"selected.{intervals}{compared}"
    )


def _table_preamble(record: dict[str, Any], choice: WinnerChoice) -> str:
    search = record["search"]
    lines = [
        f"# Tuned lookahead: {record['model']} on {record['dataset']} ({record['device']})",
        "",
        f"Search: {search['evaluated']} configurations on {len(record['probe_sample_ids'])} probe samples "
        f"({search['measured']} measured, {search['pruned_unmeasured']} pruned unmeasured, "
        f"{search['pruned_while_measuring']} stopped by the bound); sampling {record['sampling']}, "
        f"{record['max_new_tokens']} new tokens.",
        *(["", _reuse_note(record)] if record.get("search_from") else []),
        "",
        record["winner_selection"],
        "",
        f"Probe samples: {', '.join(map(str, record['probe_sample_ids']))}. "
        f"Held-out samples: {', '.join(map(str, record['heldout_sample_ids']))}.",
    ]
    if choice.winner_speedup < 1:
        lines += [
            "",
            f"Lookahead loses to AR on the {_reported_samples(choice)} here: the declared winner runs at "
            f"{choice.winner_speedup:.3f}x of AR.",
        ]
    for line in _references_ahead(record, choice):
        lines += ["", line]
    return "\n".join(lines)


def _reuse_note(record: dict[str, Any]) -> str:
    """Where a reused search came from, in a reader's words (``tune.search_from``)."""
    reuse = record["search_from"]
    return (
        f"The search is an earlier tune's, reused (tune.search_from: {Path(reuse['record']).name}, sha256 "
        f"{reuse['sha256'][:12]}): its configurations, probe numbers and device profile are that tune's; only the "
        "held-out validation ran in this tune."
    )


def _reported_samples(choice: WinnerChoice) -> str:
    """Which samples a reported number is on, in words."""
    if choice.rule == SPLIT_HELDOUT:
        return f"report half of the held-out samples (n={len(choice.report_ids)})"
    return "held-out samples"


def _references_ahead(record: dict[str, Any], choice: WinnerChoice) -> list[str]:
    """Sentences naming the reference presets that did better than the winner on the reported samples."""
    out = []
    for rec in record["heldout"]:
        speed = rec["arms"]["lookahead"].get("speedup")
        if rec["reference"] and speed is not None and speed > choice.winner_speedup:
            out.append(
                f"The reference preset {rec['reference']} ({rec['config']}) did better on the "
                f"{_reported_samples(choice)} ({speed:.3f}x vs {choice.winner_speedup:.3f}x); it was not a candidate "
                "of the search."
            )
    return out


def _preset_header(record: dict[str, Any], choice: WinnerChoice, records: list[dict[str, Any]]) -> list[str]:
    from lade_bench.tune.outputs import format_speedup

    mine = next(r for r in records if r["winner"])
    k = sum(r["rank_in_search"] is not None for r in records)
    if choice.rule == SPLIT_HELDOUT:
        declared = (
            f"winner among the top-{k}, picked on {len(choice.selection_ids)} of the "
            f"{len(record['heldout_sample_ids'])} held-out samples (tune.winner={SPLIT_HELDOUT}) and reported on "
            f"the other {len(choice.report_ids)}."
        )
        where = "on the report half"
    else:
        declared = (
            f"declared winner: search rank {mine['rank_in_search']} (tune.winner={choice.rule}), before "
            f"validation; validated with the other {k - 1} of the top-{k} on {len(record['heldout_sample_ids'])} "
            "held-out samples."
        )
        where = "on the held-out samples"
    header = [
        f"Tuned by `python -m lade_bench.tune` for {record['model']} on {record['dataset']},",
        f"device {record['device']}, sampling {record['sampling']}, {record['max_new_tokens']} new tokens.",
        f"Search: {record['search']['evaluated']} configurations on {len(record['probe_sample_ids'])} probe samples"
        + (" (an earlier tune's, reused: tune.search_from)" if record.get("search_from") else "")
        + "; "
        + declared,
        f"Declared winner's speedup over AR {where}: {format_speedup(mine['arms']['lookahead'])}.",
    ]
    if "prompt_lookup" in mine["arms"]:
        header.append(f"Prompt lookup on the same samples: {format_speedup(mine['arms']['prompt_lookup'])}.")
    if choice.winner_speedup < 1:
        header.append("Lookahead LOSES to AR here: plain AR (or prompt lookup, if faster) is the better choice.")
    header.append("Every configuration evaluated: tune_record.json; held-out table: heldout.md (tune folder below).")
    return header


def _print_outcome(
    console: Console, outcome: TuneOutcome, record: dict[str, Any], choice: WinnerChoice, conf_dir: Path
) -> None:
    """What was found and where every output went (plain text: paths hold characters rich would parse)."""
    from lade_bench.tune.outputs import format_speedup

    winner = choice.winner
    n_heldout = len(record["heldout_sample_ids"])
    lines = [f"held-out validation on {n_heldout} samples (reported: {_reported_samples(choice)}):"]
    for rec in record["heldout"]:
        arms = rec["arms"]
        parts = [f"held-out vs AR {format_speedup(arms['lookahead'])}"]
        if rec.get("selection_speedup") is not None:
            parts.insert(0, f"selection half {rec['selection_speedup']:.3f}x")
        if "prompt_lookup" in arms:
            parts.append(f"prompt lookup vs AR {format_speedup(arms['prompt_lookup'])}")
        if rec["reference"]:
            label = f"{rec['reference']} = {rec['config']} (reference preset)"
        else:
            label = f"{rec['config']}{' (declared winner)' if rec['winner'] else ' (not selected)'}"
            parts.insert(0, f"probe {rec['probe_speedup']:.3f}x")
        lines.append(f"  {label}: " + "; ".join(parts))
    lines.append(f"winner: {winner.key}. {record['winner_selection']}")
    if choice.winner_speedup < 1:
        lines.append(
            f"lookahead loses to AR here: the winner runs at {choice.winner_speedup:.3f}x of AR on the "
            f"{_reported_samples(choice)}"
        )
    lines += _references_ahead(record, choice)
    usage = f"python -m lade_bench.run lookahead=tuned/{outcome.preset.stem}"
    # A folder Hydra does not search by itself must be added to its search path.
    if conf_dir.resolve() not in [d.resolve() for d in search_dirs()]:
        usage += f" 'hydra.searchpath=[file://{conf_dir.resolve()}]'"
    lines += [
        f"preset: {outcome.preset}",
        f"  use it as: {usage}",
        f"record of every configuration: {outcome.record}",
        f"held-out table: {outcome.table} (and .csv)",
        f"figure: {outcome.figure} (and .pdf)",
    ]
    print_outcome_lines(console, lines, outcome.tune_dir)


def print_outcome_lines(console: Console, lines: list[str], heldout_dir: Path) -> None:
    """A finished tune's lines, then the command that reports its held-out cells, as plain text (paths and
    commands are printed as they are: no markup, no highlighting, no wrapping inside them)."""
    for line in [*lines, f"report of the held-out cells: python -m lade_bench.report {heldout_dir}"]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def safe_name(text: str) -> str:
    """``text`` with every run of characters unsafe in a folder or file name replaced by ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)
