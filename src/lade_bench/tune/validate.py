"""Held-out validation: the search's top-k configurations against AR and prompt lookup on unseen samples.

The search ranks configurations on the probe samples, so the best probe speedup is biased upwards (it
is the maximum of noisy measurements). The top ``tune.top_k`` configurations, declared by that ranking
before any held-out sample is generated, are each run as an ordinary cell (AR, lookahead and the
baselines on the same held-out samples, the runner's loop: paired, alternating order, rows on disk)
in the tune folder. The winner is the top-k configuration with the best held-out speedup: a choice
among k on the held-out samples, so its held-out number still carries a small selection effect
(k candidates, not the whole space); every top-k result is shown beside it.

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
from lade_bench.results import MANIFEST_JSON, CellWriter, build_manifest, load_rows
from lade_bench.runner.execute import CellModel, run_samples
from lade_bench.runner.plan import CellPlan, plan_cell
from lade_bench.runner.provenance import RunIdentity
from lade_bench.tune.search import config_key

CONFIG_YAML = "config.yaml"


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
    """

    params: LookaheadParams
    rank: int | None
    probe_speedup: float
    cell_dir: Any
    arms: dict[str, dict[str, Any]]
    vs_prompt_lookup: dict[str, Any]
    mean_step_tokens: float
    reference: str | None = None

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
    writer = CellWriter(plan.cell_dir)
    writer.write_text(CONFIG_YAML, OmegaConf.to_yaml(plan.cfg, resolve=True))
    writer.write_json(MANIFEST_JSON, _manifest(plan, samples, me))
    run_samples(plan, cell_model, samples, writer, advance, provenance=me.row_columns())
    writer.finalize()
    rows = load_rows(plan.cell_dir)
    records = {rec["arm"]: rec for rec in stats.summarize_cell(rows)}
    return HeldoutResult(
        params=params,
        rank=rank,
        probe_speedup=probe_speedup,
        cell_dir=plan.cell_dir,
        arms=records,
        vs_prompt_lookup=_versus(rows, "lookahead", "prompt_lookup", sampled=plan.sampling.do_sample),
        mean_step_tokens=float(records["lookahead"]["step_tokens_mean"]),
        reference=reference,
    )


def choose_winner(results: Sequence[HeldoutResult]) -> HeldoutResult:
    """The top-k configuration with the best held-out lookahead speedup (ties: the better search rank).

    Reference presets are never chosen: they were not among the search's declared candidates.
    """
    ranked = [(r, r.rank) for r in results if r.rank is not None and math.isfinite(r.speedup)]
    if not ranked:
        raise RuntimeError("no top-k configuration has a held-out speedup (every held-out row failed?)")
    return max(ranked, key=lambda pair: (pair[0].speedup, -pair[1]))[0]


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


def _manifest(plan: CellPlan, samples: Sequence[Sample], me: RunIdentity) -> dict[str, Any]:
    seeds = {"global": plan.cfg.seed, "per_sample": "SeedSequence([seed, heldout_index, turn])", "bootstrap": 0}
    return build_manifest(
        seeds=seeds,
        device=describe_device(plan.device),
        extra={
            "cell_id": plan.cell_id,
            "run": me.as_record(),
            "purpose": "lade_bench.tune held-out validation",
            "samples": {"heldout_ids": [s.sample_id for s in samples]},
            "dtype": plan.semantic["dtype"],
        },
    )
