"""Held-out validation: the search's top-k configurations against AR and prompt lookup on unseen samples.

The search ranks configurations on the probe samples, so the best probe speedup is biased upwards (it
is the maximum of noisy measurements). The top ``tune.top_k`` configurations, declared by that ranking
before any held-out sample is generated, are each run as an ordinary cell (AR, lookahead and the
baselines on the same held-out samples, the runner's loop: paired, alternating order, rows on disk)
in the tune folder.

The winner is never picked on the samples its number is reported on (:func:`declare_winner`), by the
rule ``tune.winner`` fixes before the tune runs:

* ``search_rank_1``: the search's rank 1, declared before validation; its held-out number is an
  honest estimate (nothing was chosen on those samples). The other top-k run beside it and are
  reported as not selected.
* ``split_heldout``: the held-out samples are split in two (the first half, rounded up, selects; the
  rest reports): the top-k configuration with the best speedup on the selection half wins, and every
  configuration's number is reported on the other half only.

Each cell is resumable like a run's (rows already on disk are not generated again), and the tune
folder is a sweep folder: ``python -m lade_bench.report <tune folder>`` reports the held-out cells.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import pandas as pd
from omegaconf import DictConfig, OmegaConf, open_dict

from lade_bench import stats
from lade_bench.datasets import Sample
from lade_bench.decoding import LookaheadParams
from lade_bench.models.loading import describe_device
from lade_bench.results import CONFIG_YAML, MANIFEST_JSON, ROWS_JSONL, CellWriter, build_manifest, load_rows
from lade_bench.results.manifest import earlier_runs
from lade_bench.runner.conditions import finish_conditions, start_conditions
from lade_bench.runner.execute import CellModel, count_pending_rows, run_samples
from lade_bench.runner.plan import CellPlan, plan_cell
from lade_bench.runner.provenance import RunIdentity
from lade_bench.tune.config import SEARCH_RANK_1, SPLIT_HELDOUT, WINNER_RULES
from lade_bench.tune.search import config_key


def cell_config(cfg: DictConfig, params: LookaheadParams, arms: Sequence[str], sweep_root: Any) -> DictConfig:
    """The run config of one cell of the tune: ``params`` as the lookahead group, in the tune folder.

    Args:
        cfg: the composed tune config.
        params: the lookahead configuration.
        arms: the cell's arms (``ar`` first).
        sweep_root: the tune folder; cells land inside it as in a sweep folder.
    """
    cell = OmegaConf.create(cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)))
    with open_dict(cell):
        cell.pop("tune", None)
        cell.pop("hydra", None)
        cell.lookahead = {
            "ngram": params.ngram,
            "window": params.window,
            "guesses": params.guesses,
            "prompt_as_reference": params.prompt_as_reference,
            "verification": params.verification,
            "devices": 1,  # the tuner measures one device
        }
        cell.arms = list(arms)
        cell.output_root = str(sweep_root.parent)
        cell.sweep_name = sweep_root.name
    return cell


@dataclass
class HeldoutResult:
    """One top-k configuration on the held-out samples.

    Attributes:
        params: the configuration.
        rank: its rank in the search (1 = best probe speedup); None for a reference preset.
        probe_speedup: its probe speedup (NaN for a reference preset the search did not measure).
        cell_dir: the cell folder holding its rows.
        arms: ``stats.summarize_cell`` records per arm (speedup, interval or the reason there is
            none, n, compression ...), keyed by arm.
        vs_prompt_lookup: lookahead's speedup over prompt lookup on the same samples (a paired
            ratio; NaN without that baseline), with its interval or the reason there is none.
        mean_step_tokens: lookahead's mean input tokens per decode step on the held-out samples.
        reference: the preset's name when this is a reference preset run for comparison.
        rows: the cell's rows (every held-out sample), from which a split's halves are summarised.
    """

    params: LookaheadParams
    rank: int | None
    probe_speedup: float
    cell_dir: Any
    arms: dict[str, dict[str, Any]]
    vs_prompt_lookup: dict[str, Any]
    mean_step_tokens: float
    reference: str | None = None
    rows: pd.DataFrame | None = None

    @property
    def key(self) -> str:
        """:func:`config_key` of the configuration."""
        return config_key(self.params)

    @property
    def speedup(self) -> float:
        """Lookahead's held-out speedup over AR."""
        return float(self.arms["lookahead"]["speedup"])


def validate_config(
    cfg: DictConfig,
    params: LookaheadParams,
    rank: int | None,
    probe_speedup: float,
    cell_model: CellModel,
    samples: Sequence[Sample],
    arms: Sequence[str],
    sweep_root: Any,
    me: RunIdentity,
    advance: Callable[[str], None] = lambda _: None,
    reference: str | None = None,
) -> HeldoutResult:
    """Run (or resume) the held-out cell of one configuration and summarise it.

    ``reference`` names a preset run for comparison (not a candidate); a top-k configuration has a
    ``rank`` instead.
    """
    plan = plan_cell(cell_config(cfg, params, arms, sweep_root))
    rows = run_tune_cell(plan, cell_model, samples, me, advance)
    return heldout_result(params, rank, probe_speedup, plan.cell_dir, rows, reference)


def run_tune_cell(
    plan: CellPlan,
    cell_model: CellModel,
    samples: Sequence[Sample],
    me: RunIdentity,
    advance: Callable[[str], None] = lambda _: None,
    purpose: str = "lade_bench.tune held-out validation",
    samples_key: str = "heldout_ids",
) -> pd.DataFrame:
    """Run (or resume) one cell of a tune as the runner runs a cell (rows on disk, config, manifest with its
    timing conditions) and return its rows; a cell with every row already on disk is only read.

    ``purpose`` and ``samples_key`` say in the manifest what the cell is for and which of the tune's
    samples it ran (the held-out ones, or a search's).
    """
    writer = CellWriter(plan.cell_dir)
    # A resumed tune whose cell has every row leaves its manifest alone: a new one would claim this
    # run (its commit, machine, load) for rows an earlier run timed.
    if count_pending_rows(plan, samples, writer.done_keys()) > 0:
        writer.write_text(CONFIG_YAML, OmegaConf.to_yaml(plan.cfg, resolve=True))
        # Timing conditions as the runner records them: the held-out numbers are timed too.
        conditions = start_conditions(plan.cell_dir / ROWS_JSONL)
        manifest = {**_manifest(plan, samples, me, purpose, samples_key), "timing_conditions": conditions}
        writer.write_json(MANIFEST_JSON, manifest)
        run_samples(plan, cell_model, samples, writer, advance, provenance=me.row_columns())
        writer.write_json(MANIFEST_JSON, {**manifest, "timing_conditions": finish_conditions(conditions)})
    writer.finalize()
    return load_rows(plan.cell_dir)


def heldout_result(
    params: LookaheadParams,
    rank: int | None,
    probe_speedup: float,
    cell_dir: Any,
    rows: pd.DataFrame,
    reference: str | None = None,
) -> HeldoutResult:
    """One configuration's held-out numbers from its cell's rows (the run's, or a committed archive's)."""
    records = {rec["arm"]: rec for rec in stats.summarize_cell(rows)}
    sampled = bool(rows["do_sample"].astype(bool).any()) if len(rows) else False
    return HeldoutResult(
        params=params,
        rank=rank,
        probe_speedup=probe_speedup,
        cell_dir=cell_dir,
        arms=records,
        vs_prompt_lookup=_versus(rows, "lookahead", "prompt_lookup", sampled=sampled),
        mean_step_tokens=float(records["lookahead"]["step_tokens_mean"]),
        reference=reference,
        rows=rows,
    )


@dataclass(frozen=True)
class WinnerChoice:
    """The declared winner, by which rule, and every configuration's numbers on the samples reported.

    Attributes:
        rule: ``tune.winner`` (see :data:`WINNER_RULES`).
        winner: the declared winner (a top-k configuration, never a reference preset).
        selection_ids: the held-out samples the choice looked at (none for ``search_rank_1``).
        report_ids: the held-out samples every reported number comes from.
        selection_speedup: lookahead's speedup on ``selection_ids`` per configuration key
            (``split_heldout`` only; empty otherwise).
        reported: per configuration key (reference presets included), the ``stats.summarize_cell``
            records per arm on ``report_ids``, and ``vs_prompt_lookup`` on them.
    """

    rule: str
    winner: HeldoutResult
    selection_ids: tuple[str, ...]
    report_ids: tuple[str, ...]
    selection_speedup: dict[str, float]
    reported: dict[str, dict[str, dict[str, Any]]]
    reported_vs_prompt_lookup: dict[str, dict[str, Any]]

    @property
    def winner_speedup(self) -> float:
        """The declared winner's lookahead speedup over AR on the reported samples."""
        return float(self.reported[self.winner.key]["lookahead"]["speedup"])


def split_heldout_ids(heldout_ids: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(selection, report)`` halves of the held-out samples: the first half (rounded up), then the rest.

    The held-out samples are already a seeded random draw (``dataset.shuffle_seed``), so their order
    carries no information; a split by position is fixed before any held-out row exists.

    Raises:
        ValueError: fewer than 2 samples (a half would be empty).
    """
    ids = tuple(heldout_ids)
    if len(ids) < 2:
        raise ValueError(f"tune.winner={SPLIT_HELDOUT} needs at least 2 held-out samples, got {len(ids)}")
    middle = (len(ids) + 1) // 2
    return ids[:middle], ids[middle:]


def declare_winner(results: Sequence[HeldoutResult], rule: str, heldout_ids: Sequence[str]) -> WinnerChoice:
    """The winner by ``rule`` (see the module docstring), never chosen on the samples it is reported on.

    Args:
        results: every held-out cell (top-k configurations by rank, then reference presets).
        rule: ``search_rank_1`` or ``split_heldout``.
        heldout_ids: the held-out sample ids, in their drawn order.

    Raises:
        ValueError: ``rule`` is not one of :data:`WINNER_RULES`.
        RuntimeError: the declared winner (or, for a split, every candidate) has no speedup (every
            held-out row failed?).
    """
    candidates = sorted((r for r in results if r.rank is not None), key=lambda r: r.rank or 0)
    if not candidates:
        raise RuntimeError("no top-k configuration was validated")
    if rule == SEARCH_RANK_1:
        winner = candidates[0]
        if not math.isfinite(winner.speedup):
            raise RuntimeError(
                f"the declared winner {winner.key} (search rank 1) has no held-out speedup (every held-out row failed?)"
            )
        reported = {r.key: r.arms for r in results}
        versus = {r.key: r.vs_prompt_lookup for r in results}
        return WinnerChoice(rule, winner, (), tuple(heldout_ids), {}, reported, versus)
    if rule != SPLIT_HELDOUT:
        raise ValueError(f"tune.winner={rule!r} is not allowed; use one of {list(WINNER_RULES)}")
    selection_ids, report_ids = split_heldout_ids(heldout_ids)
    selection = {r.key: _on_samples(r, selection_ids)[0]["lookahead"]["speedup"] for r in candidates}
    finite = [r for r in candidates if math.isfinite(selection[r.key])]
    if not finite:
        raise RuntimeError("no top-k configuration has a speedup on the selection half of the held-out samples")
    # Ties go to the better search rank (candidates are in rank order and max keeps the first).
    winner = max(finite, key=lambda r: selection[r.key])
    halves = {r.key: _on_samples(r, report_ids) for r in results}
    reported = {key: arms for key, (arms, _) in halves.items()}
    versus = {key: vs for key, (_, vs) in halves.items()}
    return WinnerChoice(rule, winner, selection_ids, report_ids, selection, reported, versus)


def _on_samples(result: HeldoutResult, sample_ids: Sequence[str]) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """The cell's per-arm records and lookahead-vs-prompt-lookup on ``sample_ids`` only."""
    rows = result.rows if result.rows is not None else load_rows(result.cell_dir)
    part = rows[rows["sample_id"].astype(str).isin([str(s) for s in sample_ids])]
    sampled = bool(part["do_sample"].astype(bool).any()) if len(part) else False
    records = {rec["arm"]: rec for rec in stats.summarize_cell(part)}
    return records, _versus(part, "lookahead", "prompt_lookup", sampled=sampled)


def _versus(rows: pd.DataFrame, arm: str, baseline: str, *, sampled: bool) -> dict[str, Any]:
    """``arm``'s speedup over ``baseline`` on the samples where every arm of the cell succeeded."""
    if baseline in set(rows["arm"]):
        estimate = stats.speedup_estimate(stats.common_rows(rows), arm, sampled=sampled, baseline=baseline)
    else:
        estimate = stats.Estimate(math.nan, math.nan, math.nan, 0, 0, f"no {baseline} arm")
    return {
        "speedup": estimate.value,
        "ci_low": estimate.low,
        "ci_high": estimate.high,
        "n_units": estimate.n_units,
        "note": estimate.note,
    }


def _manifest(
    plan: CellPlan, samples: Sequence[Sample], me: RunIdentity, purpose: str, samples_key: str
) -> dict[str, Any]:
    seeds = {"global": plan.counts.seed, "per_sample": "SeedSequence([seed, heldout_index, turn])", "bootstrap": 0}
    return build_manifest(
        seeds=seeds,
        device=describe_device(plan.device),
        extra={
            "cell_id": plan.cell_id,
            "run": me.as_record(),
            "purpose": purpose,
            "samples": {samples_key: [s.sample_id for s in samples]},
            "dtype": plan.semantic["dtype"],
            # As a run's manifest: eager or compiled, and the torch.compile mode resolved for the device.
            "compiled": plan.compiled,
            "compile_mode": plan.compile_mode,
            # A held-out cell resumed after a kill: the runs that timed its earlier rows.
            "previous_runs": earlier_runs(plan.cell_dir / MANIFEST_JSON),
        },
    )
