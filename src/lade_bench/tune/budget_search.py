"""The step-cost search of methods' budgets: candidates, the cells that run them, their predicted speedups, the winner.

Every method here is exact, so the tokens a candidate feeds and accepts per step do not depend on timing:
each candidate runs on the search samples through the runner's own generation code (ordinary cells,
rows on disk), and its speedup over AR is PREDICTED from those rows on the tune's device profile by the
one step-cost model (``stats.step_cost.predicted_speedup``), not timed. The candidates are the grid of
each method's declared budget (``Method.budget``); round ``i`` is one cell holding AR and every method's
``i``-th candidate, so AR runs once per round, not once per candidate (a method's section is its own,
so the candidates of different methods in one cell do not touch each other). The winner of a method is
its best prediction (ties: the earlier candidate, the authors' defaults listed where declared), declared
before any held-out sample runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pandas as pd
from omegaconf import DictConfig, OmegaConf, open_dict

from lade_bench import stats
from lade_bench.methods import REFERENCE, get_method
from lade_bench.methods.budget import candidate_grid, candidate_key, plain
from lade_bench.stats.step_cost import predicted_speedup, prediction_basis
from lade_bench.stats.units import PAIR_KEY


def method_cell_config(
    cfg: DictConfig, arms: Sequence[str], sections: Mapping[str, Mapping[str, Any]], sweep_root: Any
) -> DictConfig:
    """The run config of one cell of a budget tune: ``arms`` (AR first), each method's section updated with its
    candidate values (``sections``: method -> setting -> value), in the sweep folder ``sweep_root``."""
    cell = OmegaConf.create(cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)))
    with open_dict(cell):
        cell.pop("tune", None)
        cell.pop("hydra", None)
        for name, values in sections.items():
            own = get_method(name).own_section
            for setting, value in values.items():
                cell[own][setting] = plain(value)
        cell.arms = list(arms)
        cell.output_root = str(sweep_root.parent)
        cell.sweep_name = sweep_root.name
    return cell


def method_candidates(budgets: Mapping[str, Mapping[str, Sequence[Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Method -> its candidates (setting -> value), the grid of its budget values."""
    return {name: candidate_grid(values) for name, values in budgets.items()}


def search_rounds(candidates: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[dict[str, dict[str, Any]]]:
    """Round ``i``: method -> its ``i``-th candidate, for every method that has one (one cell per round)."""
    rounds = max((len(c) for c in candidates.values()), default=0)
    return [{name: dict(c[i]) for name, c in candidates.items() if i < len(c)} for i in range(rounds)]


def paired_rows(rows: pd.DataFrame, arm: str, sample_ids: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The arm's and AR's error-free rows on ``sample_ids``, paired unit by unit in the same order.

    Only the units where every arm of the cell succeeded count (``stats.common_rows``), as every measured
    number of a cell does.
    """
    paired = stats.common_rows(rows)
    paired = paired[paired["sample_id"].astype(str).isin([str(s) for s in sample_ids])]
    keys = [k for k in PAIR_KEY if k in paired.columns]
    arm_rows = paired[paired["arm"] == arm].sort_values(keys).reset_index(drop=True)
    ar_rows = paired[paired["arm"] == REFERENCE].sort_values(keys).reset_index(drop=True)
    common = arm_rows[keys].merge(ar_rows[keys], on=keys)
    arm_rows = arm_rows.merge(common, on=keys).sort_values(keys).reset_index(drop=True)
    ar_rows = ar_rows.merge(common, on=keys).sort_values(keys).reset_index(drop=True)
    return arm_rows, ar_rows


def candidate_evidence(
    rows: pd.DataFrame, arm: str, sample_ids: Sequence[str], profile: Mapping[str, Any]
) -> dict[str, Any]:
    """What one candidate's search rows say: its predicted speedup over AR on ``profile`` (step-cost model),
    the paired units it rests on, its mean step width and tokens per step, and how many outputs equal AR's.

    Raises:
        ValueError: a step outside the profile's measured range (``forward_time_at`` names it).
    """
    arm_rows, ar_rows = paired_rows(rows, arm, sample_ids)
    if arm_rows.empty:
        return {"predicted_speedup": None, "units": 0, "note": "no paired row (every row failed?)"}
    decode_widths = [w for steps in arm_rows["step_tokens"] for w in list(steps)[1:]]
    accepted = [a for lengths in arm_rows["accept_lengths"] for a in list(lengths)[1:]]
    return {
        "predicted_speedup": predicted_speedup(arm_rows, ar_rows, profile),
        "units": len(arm_rows),
        "samples": int(arm_rows["sample_id"].nunique()),
        "mean_step_tokens": float(sum(decode_widths) / len(decode_widths)) if decode_widths else math.nan,
        "tokens_per_step": float(sum(accepted) / len(accepted)) if accepted else math.nan,
        "outputs_equal_ar": int(arm_rows["matches_ar"].astype(bool).sum()) if "matches_ar" in arm_rows else None,
        "basis": prediction_basis(arm_rows.to_dict("records"), profile),
    }


def rank_candidates(evaluated: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The candidates of one method best prediction first (ties: declaration order), each with its rank;
    a candidate without a prediction last."""

    def order(item: tuple[int, Mapping[str, Any]]) -> tuple[float, int]:
        index, candidate = item
        value = candidate.get("predicted_speedup")
        return (-value if value is not None and math.isfinite(value) else math.inf, index)

    ranked = sorted(enumerate(evaluated), key=order)
    return [{**candidate, "rank": rank} for rank, (_, candidate) in enumerate(ranked, start=1)]


def declared_winner(ranked: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The method's winner: the top prediction (``rank_candidates``' first).

    Raises:
        RuntimeError: no candidate has a prediction.
    """
    top = ranked[0] if ranked else None
    if top is None or top.get("predicted_speedup") is None:
        raise RuntimeError("no candidate of the method has a predicted speedup (every search row failed?)")
    return dict(top)


def candidate_record(name: str, index: int, candidate: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict:
    """One candidate as the record keeps it: its key, values (plain), whether it is the authors' defaults."""
    return {
        "method": name,
        "index": index,
        "key": candidate_key(candidate),
        "settings": {k: plain(v) for k, v in candidate.items()},
        "defaults": all(plain(defaults.get(k)) == plain(v) for k, v in candidate.items()),
    }
