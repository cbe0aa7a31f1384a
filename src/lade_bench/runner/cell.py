"""Run one cell end to end: plan, data, model, generation, scoring, files, sinks, index.

Order matters for failing fast: the plan (all value checks) and the dataset (paths, availability)
come before the model is loaded, so a bad value or a missing file costs no model load.

Order matters for surviving a kill too. Finalisation writes, each atomically and in this order:
``rows.parquet``, ``summary.json``, the sinks' outputs (W&B run, ``figures/``), and last the
"done" status in the sweep index. ``summary.json`` means "every row is generated": a rerun that
finds it loads no model and only redoes what is missing (the parquet, a sink whose output is
incomplete), then marks the cell done. A cell is skipped only when the index says done and every
durable sink's output is complete; temp files a kill left behind are deleted on the way.

A finished cell (summary written, or marked done) is verified on every rerun
(``lade_bench.results.cell_check``): what is derived from the rows (parquet, summary, sinks'
outputs) is rebuilt without the model; cut, garbled or missing rows, or an unreadable manifest,
reopen the cell (the readable rows are kept, the damaged files set aside as ``<name>.damaged``) and
the missing rows are generated again. A cell is never "done" over damaged rows.

Many jobs may run one sweep at once (Slurm, Ray, two terminals): a cell is run by the job that holds
its lock (``lade_bench.runner.locks``), from the first write to the last, and every write checks that
the lock is still held. A job that finds a cell owned by another live job skips it (or waits,
``cell_lock.when_owned``); the device profile is measured by one job per profile key (device kind,
model, dtype, attention implementation). Every row,
the manifest and the index name the run that wrote them (``lade_bench.runner.provenance``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from lade_bench.datasets import Sample
from lade_bench.decoding.core.compiled import CompiledForwards
from lade_bench.decoding.core.params import BATCH_INVARIANT_ATTENTION, BATCH_INVARIANT_STEP_PATH
from lade_bench.models.loading import describe_device
from lade_bench.profiling.device_profile import (
    EAGER,
    PROFILES_DIR,
    ProfileKey,
    device_kind,
    device_processor,
    has_profile,
    publish_profile,
    sweep_profile,
)
from lade_bench.results import (
    CONFIG_YAML,
    MANIFEST_JSON,
    ROWS_PARQUET,
    SUMMARY_JSON,
    CellWriter,
    build_manifest,
    is_cell_done,
    load_rows,
    update_index,
)
from lade_bench.results.atomic import remove_temp_files
from lade_bench.results.cell_check import Damage, check_cell, read_json_object
from lade_bench.results.manifest import earlier_runs, runs_named_by_rows
from lade_bench.results.sweep_index import salvage_index
from lade_bench.results.sweep_layout import cell_lock_path, profile_lock_path
from lade_bench.results.sweep_plan import job_key, record_job
from lade_bench.results.writer import ROWS_JSONL, salvage_rows_jsonl, write_rows_jsonl
from lade_bench.runner.cell_inputs import check_resume_inputs, inputs_record
from lade_bench.runner.cell_model import CellModel
from lade_bench.runner.conditions import finish_conditions, start_conditions
from lade_bench.runner.console import progress_bar
from lade_bench.runner.execute import count_pending_rows, count_units, run_samples
from lade_bench.runner.locks import LockLostError, LockSettings, Ownership, claim
from lade_bench.runner.method_state import state_record
from lade_bench.runner.plan import CellConfigError, CellPlan, plan_cell
from lade_bench.runner.provenance import RunIdentity, current_run, label_slurm_job, launch_command
from lade_bench.runner.ranks import Ranks
from lade_bench.runner.roles import load_roles, roles_to_load
from lade_bench.runner.rows import shape_columns
from lade_bench.runner.run_log import run_log
from lade_bench.runner.samples import SampleSet, fit_samples, load_samples
from lade_bench.runner.sinks import Sink, incomplete_sinks, is_durable
from lade_bench.runner.summary import summarize_cell
from lade_bench.runner.sweep_tidy import tidy_sweep
from lade_bench.stats import mode_label

log = logging.getLogger(__name__)

FIGURES_DIR = "figures"
# Summary fields the sweep index already has (as its own status or as semantic-config columns).
_IDENTITY_FIELDS: tuple[str, ...] = ("status", "cell_id", "sweep", "model", "dataset")
_IDENTITY_FIELDS += ("ngram", "window", "guesses", "prompt_as_reference", "verification")


@dataclass(frozen=True)
class CellOutcome:
    """What :func:`run_cell` did.

    Attributes:
        status: "done" (ran, resumed, or completed the finalisation of an interrupted run),
            "skipped" (an earlier run finished it, outputs included) or "busy" (another live job
            runs it; with ``cell_lock.when_owned=skip``).
        cell_dir: the cell's folder.
        summary: the cell summary (read back from ``summary.json`` when skipped or completed; ``{}``
            when busy).
        rows_appended: rows generated by this call (0 when skipped, completed or busy).
    """

    status: str
    cell_dir: Path
    summary: dict[str, Any]
    rows_appended: int = 0


def run_cell(
    cfg: DictConfig | CellPlan,
    sinks: Sequence[Sink] = (),
    run: RunIdentity | None = None,
    ranks: Ranks | None = None,
) -> CellOutcome:
    """Run (or resume, complete, or skip) the cell ``cfg`` describes and hand its results to ``sinks``.

    The composed config is turned into its typed plan once, here (or by the caller, who passes the
    plan); everything below reads the plan.

    Args:
        cfg: the composed job config, or its plan (:func:`plan_cell`) when the caller made it already.
        sinks: where the finished cell is handed on (see ``lade_bench.runner.sinks``).
        run: who runs it (recorded in the lock, rows, manifest and index); None: this process, now.
        ranks: on a multi-device cell, rank 0's handle on the other ranks (see ``runner.ranks``).

    Raises:
        DecodingConfigError, CellConfigError, UnknownDatasetError: bad values, before any loading.
        FileNotFoundError, DatasetUnavailableError: the dataset cannot be read, before the model loads.
        LockLostError: another job took the cell over while this one was silent; nothing more written.
        Whatever a sink raised, after marking the cell failed (its rows and summary stay; a rerun
        retries only the incomplete sinks).
    """
    plan = cfg if isinstance(cfg, CellPlan) else plan_cell(cfg)
    # Read before taking the lock, so that a missing dataset file fails before anything is written.
    samples = None if _looks_finished(plan) else load_samples(plan)
    me = run or current_run()
    tidy_sweep(plan.sweep_root)
    _record_hydra_job(plan)
    ownership = claim(
        cell_lock_path(plan.sweep_root, plan.cell_id),
        me,
        plan.lock,
        f"cell {plan.cell_dir.name}",
        cell_id=plan.cell_id,
        cell_dir=plan.cell_dir.name,
    )
    if ownership is None:
        return CellOutcome("busy", plan.cell_dir, {})
    label_slurm_job(me, plan.cell_name)
    try:
        with run_log(plan.cell_dir, me.run_id):
            return _run_owned_cell(plan, sinks, me, ownership, samples, ranks)
    finally:
        ownership.release()


def _run_owned_cell(
    plan: CellPlan,
    sinks: Sequence[Sink],
    me: RunIdentity,
    ownership: Ownership,
    samples: list[Sample] | None,
    ranks: Ranks | None = None,
) -> CellOutcome:
    """The cell, run by the job that holds its lock (every write checks it still does)."""
    # This job owns the cell, so temp files in its folder are leftovers of a kill.
    for folder in (plan.cell_dir, plan.cell_dir / FIGURES_DIR):
        for leftover in remove_temp_files(folder):
            log.info("removed %s, left by an interrupted run", leftover)
    if _looks_finished(plan):  # also when another job finished it while we waited
        if plan.dataset.path:
            # A local file is cheap to read: a finished cell named with another file's content is not
            # "already done" (wheel and hub datasets are not read again just to skip a done cell).
            samples = load_samples(plan)  # kept: a reopened cell below resumes on these
            check_resume_inputs(plan, inputs_record(plan, samples), _readable_manifest(plan), ())
        damage = check_cell(plan.cell_dir, required=(SUMMARY_JSON, MANIFEST_JSON))
        for found in damage:
            log.warning("damaged: %s", found.describe())
        unrepairable = [found for found in damage if found.remedy == "restart"]
        if unrepairable:
            raise CellConfigError(f"cell {plan.cell_id} cannot be used: {unrepairable[0].describe()}")
        if not any(found.remedy == "regenerate" for found in damage):
            return _complete_finished_cell(plan, sinks, ownership, damage)
        _reopen(plan, damage, ownership)
    if samples is None:
        samples = load_samples(plan)
    writer = CellWriter(plan.cell_dir, guard=ownership.ensure_held)
    # Before anything is written or loaded: a resume on other samples would mix two sample sets.
    inputs = inputs_record(plan, samples)
    stored = writer.read_rows()
    check_resume_inputs(plan, inputs, _readable_manifest(plan), (row["sample_id"] for row in stored))
    log.info("cell %s: results go to %s (run %s)", plan.cell_id, plan.cell_dir, me.run_id)
    writer.write_text(CONFIG_YAML, OmegaConf.to_yaml(plan.cfg, resolve=True))
    update_index(
        plan.sweep_root,
        plan.cell_id,
        status="running",
        cell_dir=plan.cell_dir,
        config=plan.semantic,
        run=me.as_record(),
    )
    loaded = False
    try:
        # Before the model loads: the load average is the machine's, and the resume gap ends now.
        conditions = start_conditions(plan.cell_dir / ROWS_JSONL)
        cell_model = _load_model(plan, ranks)
        loaded = True
        _profile_device_once(plan, cell_model, me)
        assert cell_model.model is not None  # rank 0 always loads the full replica (load_cell_model)
        sample_set = fit_samples(plan, samples, cell_model.model, cell_model.tokenizer)
        manifest = _manifest(
            plan, sample_set, len(samples), inputs, stored, me, ranks, conditions, cell_model.invariance
        )
        writer.write_json(MANIFEST_JSON, manifest)
        appended = _generate(plan, cell_model, sample_set, writer, me)
        # The end snapshot, into this run's manifest (not a new run: previous_runs stays as it is).
        writer.write_json(MANIFEST_JSON, {**manifest, "timing_conditions": finish_conditions(conditions)})
        del cell_model  # drop the weights now: the next cell of a sweep loads its own into this process
        writer.finalize()
        rows = load_rows(plan.cell_dir, verify=False)
        summary = _cell_summary(plan, sample_set, rows)
        writer.write_json(SUMMARY_JSON, summary)  # from here on, a rerun only completes the outputs
    except BaseException as exc:  # KeyboardInterrupt too: the index must not claim the cell is running
        if isinstance(exc, LockLostError) or not ownership.handle.is_held():
            raise  # the cell is another job's now: its index entry and sinks are not ours to touch
        message = _failure_message(exc)
        _mark_failed(plan, message)
        # Not on Ctrl-C (the user wants out, not a W&B upload), nor before the model loaded (a model that
        # cannot be had offline): such a cell has no result to show, the index and the job's error say
        # what to fix, and a W&B run of it would outlive the fix.
        if isinstance(exc, Exception) and loaded:
            _report_failure(plan, sinks, message)
        raise
    ownership.ensure_held()
    _publish(plan, sinks, summary, rows)
    return CellOutcome("done", plan.cell_dir, summary, appended)


def _failure_message(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):  # how submitit stops a job it has requeued after a preemption or time limit
        return (
            f"stopped by SystemExit({exc.code}) (e.g. a scheduler's preemption or time limit); "
            "a requeued job or a rerun resumes the cell"
        )
    return f"{type(exc).__name__}: {exc}"[:500]


def _record_hydra_job(plan: CellPlan) -> None:
    """Tell the sweep plan which cell this Hydra job runs (what ``python -m lade_bench.status`` matches)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():  # called outside a Hydra job (a test, a notebook)
        return
    key = job_key(HydraConfig.get().overrides.task)
    record_job(plan.sweep_root, key, plan.cell_id, plan.cell_dir.name)


def _looks_finished(plan: CellPlan) -> bool:
    """True once every row was generated: ``summary.json`` written, or the index marking the cell done."""
    if (plan.cell_dir / SUMMARY_JSON).exists():
        return True
    entries = salvage_index(plan.sweep_root)[0]
    return any(e["cell_id"] == plan.cell_id and e.get("status") == "done" for e in entries)


def _readable_manifest(plan: CellPlan) -> dict[str, Any] | None:
    """The cell's manifest, or None where there is none or it cannot be read (then set aside as damaged)."""
    try:
        return read_json_object(plan.cell_dir / MANIFEST_JSON)
    except (OSError, ValueError):
        return None


def _reopen(plan: CellPlan, damage: Sequence[Damage], ownership: Ownership) -> None:
    """Turn a finished cell with damaged rows or manifest back into an unfinished one that resumes.

    Each damaged file is kept as ``<name>.damaged``; the readable rows of a damaged ``rows.jsonl``
    are written back (the others are generated again); the summary and parquet go, as they describe
    rows that are no longer all there. Sinks log the cell again when it is done.
    """
    ownership.ensure_held()
    for found in damage:
        if found.path.exists():
            os.replace(found.path, found.path.with_name(f"{found.path.name}.damaged"))
        if found.path.name == ROWS_JSONL and found.path.with_name(f"{ROWS_JSONL}.damaged").exists():
            rows, dropped = salvage_rows_jsonl(found.path.with_name(f"{ROWS_JSONL}.damaged"))
            write_rows_jsonl(found.path, rows)
            log.warning("cell %s: kept %d readable row(s), dropped %d line(s)", plan.cell_id, len(rows), len(dropped))
    for name in (SUMMARY_JSON, ROWS_PARQUET):
        with contextlib.suppress(FileNotFoundError):
            (plan.cell_dir / name).unlink()
    log.warning("cell %s reopened: its missing rows are generated again (%s)", plan.cell_id, plan.cell_dir)


def _complete_finished_cell(
    plan: CellPlan, sinks: Sequence[Sink], ownership: Ownership, damage: Sequence[Damage] = ()
) -> CellOutcome:
    """Skip a cell whose rows and summary an earlier run wrote, after completing what it left out.

    A kill during finalisation can leave the parquet, a sink's output (a W&B run cut short, figures)
    or the index's "done" missing; they are redone from the files on disk, without the model, and so
    are a damaged parquet or summary (``damage``, all of them rebuildable from the rows).
    """
    rebuild = {found.path.name for found in damage}
    writer = CellWriter(plan.cell_dir, guard=ownership.ensure_held)
    has_parquet = (plan.cell_dir / ROWS_PARQUET).is_file() and ROWS_PARQUET not in rebuild
    if SUMMARY_JSON in rebuild:
        summary = None
    else:
        summary = read_json_object(plan.cell_dir / SUMMARY_JSON)
    pending = incomplete_sinks(sinks, plan.cell_dir)
    if has_parquet and summary is not None and not pending and is_cell_done(plan.sweep_root, plan.cell_id):
        _mark_done(plan, summary)  # changes nothing, unless a kill left the index parquet behind
        log.info("cell %s already done, skipped (delete its folder to rerun): %s", plan.cell_id, plan.cell_dir)
        return CellOutcome("skipped", plan.cell_dir, summary)
    log.info(
        "cell %s: rows and summary are on disk; completing what an interrupted run left out%s",
        plan.cell_id,
        "".join(f", {sink!r}" for sink in pending)
        + ("" if has_parquet else ", rows.parquet")
        + ("" if summary is not None else ", summary.json"),
    )
    if not has_parquet:
        writer.finalize()
    rows = load_rows(plan.cell_dir, verify=False)
    if summary is None:
        summary = _rebuilt_summary(plan, rows)
        writer.write_json(SUMMARY_JSON, summary)
    # Complete durable sinks are not logged twice; the others (console) show the finished cell.
    again = [sink for sink in sinks if not is_durable(sink) or sink in pending]
    ownership.ensure_held()
    _publish(plan, again, summary, rows)
    return CellOutcome("done", plan.cell_dir, summary)


def _rebuilt_summary(plan: CellPlan, rows) -> dict[str, Any]:
    """The summary an earlier run wrote, recomputed from the rows and the samples its manifest recorded."""
    samples = read_json_object(plan.cell_dir / MANIFEST_JSON).get("samples") or {}
    kept = SampleSet([], list(samples.get("skipped_ids") or []), samples.get("max_prompt_tokens"))
    return _cell_summary(plan, kept, rows)


def _publish(plan: CellPlan, sinks: Sequence[Sink], summary: dict[str, Any], rows) -> None:
    """Hand the finished cell to the sinks, then mark it done: the last thing a cell writes."""
    try:
        for sink in sinks:
            sink(sink_config(plan), summary, rows, plan.cell_dir)
    except BaseException as exc:  # the index must not claim the cell done (nor running) without its outputs
        message = f"sink failed, rerun to retry it: {type(exc).__name__}: {exc}"[:500]
        _mark_failed(plan, message)
        raise
    _mark_done(plan, summary)


def _mark_failed(plan: CellPlan, message: str) -> None:
    """Record the failure in the index, unless that too fails: then the cell's own error is what matters.

    (Out of space, the index cannot be written either; the index then still says running, and the
    status shows the cell interrupted, which a rerun resumes just the same.)
    """
    try:
        update_index(plan.sweep_root, plan.cell_id, cell_dir=plan.cell_dir, status="failed", error=message)
    except OSError as err:
        log.warning("could not record the failure of cell %s in the index: %s", plan.cell_id, err)


def _mark_done(plan: CellPlan, summary: dict[str, Any]) -> None:
    update_index(
        plan.sweep_root,
        plan.cell_id,
        cell_dir=plan.cell_dir,
        status="done",
        config=plan.semantic,
        summary=index_summary(summary),
    )


def sink_config(plan: CellPlan) -> dict[str, Any]:
    """The cell config as sinks get it: plain, resolved, enums as strings, plus the cell id."""
    config = cast(dict[str, Any], OmegaConf.to_container(plan.cfg, resolve=True, enum_to_str=True))
    return {**config, "cell_id": plan.cell_id}


def _report_failure(plan: CellPlan, sinks: Sequence[Sink], message: str) -> None:
    # Sinks learn about failed cells too (a dashboard should show them), but a sink failing here
    # must not hide the cell's own error, which the caller re-raises.
    if not sinks:
        return
    try:
        rows = load_rows(plan.cell_dir, verify=False)  # the schema's empty frame when no row was written
    except Exception:
        log.exception("cannot read the rows of the failed cell %s for the sinks", plan.cell_id)
        return
    summary = {"status": "failed", "error": message, "cell_id": plan.cell_id, "results_dir": str(plan.cell_dir)}
    for sink in sinks:
        try:
            sink(sink_config(plan), summary, rows, plan.cell_dir)
        except OSError as exc:  # often the cell's own error again (a full disk): one line, not a traceback
            log.warning("sink %r could not report the failed cell %s: %s", sink, plan.cell_id, exc)
        except Exception:
            log.exception("sink %r failed while reporting the failed cell %s", sink, plan.cell_id)


def index_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary numbers worth a column in the sweep index.

    Histograms, paths and id lists stay in summary.json; identity fields are already index columns
    (from the semantic config).
    """
    top = {k: v for k, v in summary.items() if k not in (*_IDENTITY_FIELDS, "results_dir", "skipped_ids")}
    arms = summary["arms"].items()
    top["arms"] = {arm: {k: v for k, v in stats.items() if k != "accept_length_histogram"} for arm, stats in arms}
    return top


def _load_model(plan: CellPlan, ranks: Ranks | None = None) -> CellModel:
    """Rank 0's model(s); on a multi-device cell the other ranks are told to load theirs too."""
    if ranks is None:
        return load_cell_model(plan, None)
    roles = roles_to_load(plan, ranks)
    cell_model = CellModel(ranks=ranks, compiled=compiled_forwards(plan))
    load_roles(plan, cell_model, ranks, roles[:1])  # the full replica (registered first)
    # Only now (the embedded checkpoint is converted) do the followers start loading from the cache.
    ranks.request(["load"])
    return load_roles(plan, cell_model, ranks, roles[1:])


def load_cell_model(plan: CellPlan, ranks: Ranks | None) -> CellModel:
    """The model(s) this rank needs: each registered role (``runner.roles``) an arm running here needs,
    and a compiled cell's compiled forwards."""
    cell_model = CellModel(ranks=ranks, compiled=compiled_forwards(plan))
    return load_roles(plan, cell_model, ranks, roles_to_load(plan, ranks))


def compiled_forwards(plan: CellPlan) -> CompiledForwards | None:
    """The compiled forwards of a compiled cell (``compile=true``), created once per cell; None: eager.

    It lives as long as the cell's models (a ``CellModel`` field), through the warm-up and every
    timed generation, so each shape compiles once per cell and every arm shares the compiled steps.
    """
    options = plan.compile_options
    if options is None:
        return None
    return CompiledForwards(mode=options.mode, cache_block=options.cache_block, backend=options.backend)


def profile_key(plan: CellPlan) -> ProfileKey:
    """The device profile a cell's speedups are predicted from: its device kind, model, dtype, attention,
    compile mode (a compiled cell's forwards cost what compiled forwards cost) and, on a CPU, the
    processor it runs on (a resumed sweep's later cells may run on another machine's CPU).

    A batch-invariant cell's attention is the path's (``lade_batch_invariant``): its forwards cost what
    the path's cost, so they are not priced on a standard cell's profile, nor it on theirs."""
    batch_invariant = plan.step_path == BATCH_INVARIANT_STEP_PATH
    return ProfileKey(
        device_kind=device_kind(plan.device),
        model=plan.model.name,
        dtype=str(plan.semantic["dtype"]),
        attn_implementation=BATCH_INVARIANT_ATTENTION if batch_invariant else plan.facts.attn_implementation,
        compile_mode=plan.compile_mode or EAGER,
        processor=device_processor(plan.device),
    )


def _profile_device_once(plan: CellPlan, cell_model: CellModel, me: RunIdentity) -> None:
    """Measure the forward-time curve unless the sweep has one for this cell's profile key.

    Done before any timed generation, on the model the cell runs, so the curve describes exactly
    the device, model, dtype and attention behind the cell's speedups. Of several jobs needing one
    key, the one holding the key's lock measures; the others go on with their cells (never waiting).
    """
    settings = plan.profile
    key = profile_key(plan)
    if not settings.enabled or has_profile(plan.sweep_root, key):
        return
    only_one = LockSettings(plan.lock.heartbeat_s, plan.lock.stale_after_s, when_owned="skip")
    lock = profile_lock_path(plan.sweep_root, key.slug())
    ownership = claim(lock, me, only_one, f"device profile of {key.describe()}")
    if ownership is None:
        return
    try:
        # Under the key's lock, a profile temp file is a leftover of a job killed while saving one
        # (temp names carry the final name, so only this key's are removed).
        for leftover in remove_temp_files(plan.sweep_root / PROFILES_DIR, [f"{key.slug()}.json"]):
            log.info("removed %s, left by an interrupted run", leftover)
        if has_profile(plan.sweep_root, key):  # measured by another job while we looked
            return
        columns = shape_columns(plan)
        shape = (columns["ngram"], columns["window"], columns["guesses"])
        log.info("measuring forward time vs new tokens for %s (once per sweep and profile key)", key.describe())
        assert cell_model.model is not None  # rank 0 always loads the full replica (load_cell_model)
        profile = sweep_profile(
            cell_model.model,
            [shape],
            kv_lengths=settings.kv_lengths,
            context_tokens=settings.context_tokens,
            warmup=settings.warmup,
            repeats=settings.repeats,
            model_name=key.model,
            attn_implementation=key.attn_implementation,
            compiled=cell_model.compiled,
        )
        ownership.ensure_held()
        log.info("device profile: %s", publish_profile(plan.sweep_root, profile))
    finally:
        ownership.release()


def _generate(plan: CellPlan, cell_model: CellModel, sample_set: SampleSet, writer: CellWriter, me: RunIdentity) -> int:
    samples = sample_set.samples
    todo = count_pending_rows(plan, samples, writer.done_keys())
    if todo == 0:
        return 0
    total = count_units(samples, plan.counts.repeats)
    log.info("%d sample(s), %d row(s) to generate (arms: %s)", len(samples), todo, ", ".join(plan.arms))
    with progress_bar(total, plan.cell_name) as advance:
        return run_samples(plan, cell_model, samples, writer, advance, provenance=me.row_columns())


def _manifest(
    plan: CellPlan,
    sample_set: SampleSet,
    loaded: int,
    inputs: dict[str, Any],
    stored: Sequence[dict[str, Any]],
    me: RunIdentity,
    ranks: Ranks | None = None,
    conditions: dict[str, Any] | None = None,
    invariance: Any = None,
) -> dict[str, Any]:
    # A manifest set aside as damaged takes its runs' records with it; the rows still name the runs
    # that timed them, so their provenance is carried over from there rather than lost.
    previous = earlier_runs(plan.cell_dir / MANIFEST_JSON) or runs_named_by_rows(stored)
    seeds = {"global": plan.counts.seed, "per_sample": "SeedSequence([seed, sample_index, turn])", "bootstrap": 0}
    if plan.dataset.shuffle_seed is not None:
        seeds["dataset_shuffle"] = plan.dataset.shuffle_seed
    return build_manifest(
        seeds=seeds,
        device=describe_device(plan.device),
        extra={
            "cell_id": plan.cell_id,
            "run": me.as_record(),
            "rows_expected": count_units(sample_set.samples, plan.counts.repeats) * len(plan.arms),
            "command": launch_command(),  # the user's, also when a scheduler's job runner started this process
            "overrides": _hydra_overrides(),
            "dtype": plan.semantic["dtype"],
            # Eager or compiled, and the torch.compile mode `compile_options.mode` means on this device.
            "compiled": plan.compiled,
            "compile_mode": plan.compile_mode,
            # Which device profile predicts this cell (the report matches it against device_profiles/).
            "device_profile_key": profile_key(plan).as_record(),
            # What else the machine was doing while this run timed the cell (runner.conditions).
            "timing_conditions": conditions,
            # Ranks of a multi-device cell (lookahead parallelism, tensor-parallel AR); 1 and no backend otherwise.
            "parallel": ranks.describe() if ranks is not None else {"world_size": 1, "backend": None},
            # What the cell ran on (dataset file sha256, loaded sample ids in order, their content digest):
            # every later run compares it before resuming (runner.cell_inputs).
            "inputs": inputs,
            "samples": {
                "loaded": loaded,
                "kept": len(sample_set.samples),
                "kept_ids": [sample.sample_id for sample in sample_set.samples],
                "skipped_ids": sample_set.skipped_ids,
                "max_prompt_tokens": sample_set.max_prompt_tokens,
            },
            "previous_runs": previous,
            # Warm or cold, and the sample order stateful arms' states followed (None: no such arm).
            "method_state": state_record(plan, sample_set.samples),
            # Standard or batch-invariant, and what the batch-invariant path's load-time check ran.
            "step_path": step_path_record(plan, invariance),
        },
    )


def step_path_record(plan: CellPlan, invariance: Any) -> dict[str, Any]:
    """The manifest's ``step_path``: the cell's path and, on the batch-invariant one, what its load-time check
    ran on this device (every linear shape's measured row chunk and the row counts compared through it, the
    attention cases), all rows identical."""
    check = None
    if invariance is not None:
        check = {
            "linear_shapes": [list(shape) for shape in invariance.linear_shapes],
            "linear_kinds": list(invariance.linear_kinds),
            "linear_chunks": list(invariance.linear_chunks),
            "linear_row_counts": list(invariance.linear_row_counts),
            "attention_cases": invariance.attention_cases,
        }
    return {"path": plan.step_path, "check": check}


def _cell_summary(plan: CellPlan, sample_set: SampleSet, rows) -> dict[str, Any]:
    return {
        "status": "done",
        "cell_id": plan.cell_id,
        "cell_name": plan.cell_name,
        "sweep": plan.sweep_name,
        "model": plan.model.name,
        "dataset": plan.dataset_spec.name,
        **shape_columns(plan),
        "compiled": plan.compiled,
        "compile_mode": plan.compile_mode,
        "mode": mode_label(plan.compiled, plan.compile_mode),
        "sampling": plan.sampling_name,
        "skipped_samples": len(sample_set.skipped_ids),
        "skipped_ids": sample_set.skipped_ids,
        "max_prompt_tokens": sample_set.max_prompt_tokens,
        "results_dir": str(plan.cell_dir),
        **summarize_cell(rows),
    }


def _hydra_overrides() -> list[str] | None:
    from hydra.core.hydra_config import HydraConfig

    # Outside a Hydra job (a test or notebook calling run_cell directly) there are no overrides.
    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else None
