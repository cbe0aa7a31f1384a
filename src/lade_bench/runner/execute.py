"""The measured part of a cell: every arm on every (sample, turn, repeat), rows appended as produced.

Fairness rules (after Spec-Bench and nanoGPT's benchmark discipline):

* all arms share the model, the prompt ids and the seed of a (sample, turn);
* the arm order flips between consecutive (sample, repeat) groups, so slow drift (thermal, clocks,
  caches) falls on every arm alike;
* only the generation is timed (by the engine); rendering, decoding to text and scoring are not;
* a multi-turn sample prompts each arm with its own earlier answers (MT-Bench turn 2).

Resume: keys already in ``rows.jsonl`` are not generated again; their stored ``output_text``
supplies the history a later turn needs. The rows of one (sample, turn, repeat) are appended together
once scored, so a kill loses at most that group (the sample in flight).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from lade_bench.datasets import Sample, render_prompt
from lade_bench.decoding import DecodingConfigError, UnsupportedModelError
from lade_bench.decoding.parallel import LookaheadParallelError
from lade_bench.results import CellWriter, row_key
from lade_bench.runner.arms import generate
from lade_bench.runner.mismatch import record_mismatches
from lade_bench.runner.plan import CellPlan
from lade_bench.runner.ranks import PARALLEL_ARMS, Ranks, RanksError
from lade_bench.runner.rows import derive_seed, error_row, identity, result_row
from lade_bench.runner.scoring import allow_unsandboxed, score_output

log = logging.getLogger(__name__)

# Errors that say the configuration or the model cannot work at all: retrying per sample would only
# record the same failure for every row, so they end the cell instead. A failed exchange between
# ranks too: the ranks are out of step, and no later generation could line up across them.
_FATAL = (DecodingConfigError, UnsupportedModelError, LookaheadParallelError, RanksError)


@dataclass
class CellModel:
    """What generation needs besides the plan: the loaded model(s), tokenizer, stop ids and ranks.

    Attributes:
        model: the full model on this rank's device (every arm but ar_tp runs it).
        tokenizer: its tokenizer.
        stop_ids: EOS ids that end a turn.
        ranks: this process's place in a multi-device cell (None: single device).
        tp_model: the tensor-parallel shard the ar_tp arm runs (None without that arm).
    """

    model: torch.nn.Module | None
    tokenizer: Any
    stop_ids: list[int]
    ranks: Ranks | None = None
    tp_model: torch.nn.Module | None = None


def arm_order(arms: Sequence[str], position: int) -> list[str]:
    """Arms in config order on even positions and reversed on odd ones (AR first, then last)."""
    return list(arms) if position % 2 == 0 else list(reversed(arms))


def count_units(samples: Sequence[Sample], repeats: int) -> int:
    """Number of (sample, turn, repeat) groups: the progress total."""
    return sum(len(s.turns) for s in samples) * repeats


def count_pending_rows(plan: CellPlan, samples: Sequence[Sample], done: set) -> int:
    """How many rows the cell still has to produce."""
    total = 0
    for sample in samples:
        for turn in range(len(sample.turns)):
            for repeat in range(plan.cfg.repeats):
                total += sum((sample.sample_id, turn, arm, repeat) not in done for arm in plan.arms)
    return total


def warm_up(plan: CellPlan, cell_model: CellModel, sample: Sample) -> None:
    """Untimed generations of every arm on ``sample``'s first turn, so no arm pays one-off costs."""
    cfg = plan.cfg
    prompt = render_prompt(
        cell_model.tokenizer, sample, 0, [], chat=cfg.model.chat, system_prompt=cfg.model.system_prompt
    )
    budget = min(cfg.warmup_new_tokens, cfg.max_new_tokens)
    for _ in range(cfg.warmup):
        for arm in plan.arms:
            generate(arm, cell_model, prompt, plan, seed=cfg.seed, max_new_tokens=budget)


def run_samples(
    plan: CellPlan,
    cell_model: CellModel,
    samples: Sequence[Sample],
    writer: CellWriter,
    advance: Callable[[str], None] = lambda _: None,
    provenance: Mapping[str, Any] | None = None,
) -> int:
    """Generate, score and append every missing row of the cell; returns the number of rows appended.

    Args:
        plan: the cell plan.
        cell_model: model, tokenizer and stop ids.
        samples: the cell's samples (already filtered by prompt length), in order.
        writer: the cell's writer; its existing rows are skipped and reused as history.
        advance: called once per (sample, turn, repeat) group with a short description (progress).
        provenance: the run's columns (``run_id``, ``job_id``, ``host``) added to every new row.
    """
    loop = _SampleLoop(plan, cell_model, writer, provenance or {})
    for index, sample in enumerate(samples):
        loop.run_sample(index, sample, advance)
    return loop.appended


class _SampleLoop:
    """State shared across samples: stored rows (for resume), whether warm-up ran, rows appended."""

    def __init__(
        self, plan: CellPlan, cell_model: CellModel, writer: CellWriter, provenance: Mapping[str, Any]
    ) -> None:
        self.plan = plan
        self.provenance = dict(provenance)
        self.cell_model = cell_model
        self.writer = writer
        self.stored = {row_key(row): row for row in writer.read_rows()}
        self.warmed = plan.cfg.warmup == 0
        self.appended = 0

    def run_sample(self, index: int, sample: Sample, advance: Callable[[str], None]) -> None:
        """Every turn and repeat of one sample; later turns see each arm's own repeat-0 answers."""
        arms = self.plan.arms
        history: dict[str, list[tuple[str, str]]] = {arm: [] for arm in arms}
        failed_turn: dict[str, int] = {}
        for turn in range(len(sample.turns)):
            seed = derive_seed(self.plan.cfg.seed, index, turn)
            first: dict[str, dict[str, Any]] = {}
            for repeat in range(self.plan.cfg.repeats):
                position = index + repeat
                rows = self._group(sample, turn, repeat, seed, arm_order(arms, position), history, failed_turn)
                first = first or rows
                suffix = f" repeat {repeat}" if self.plan.cfg.repeats > 1 else ""
                advance(f"sample {sample.sample_id} turn {turn}{suffix}")
            for arm in arms:
                if first[arm]["error"] is not None:
                    failed_turn.setdefault(arm, turn)
                else:
                    history[arm].append((sample.turns[turn], first[arm]["output_text"]))

    def _group(
        self,
        sample: Sample,
        turn: int,
        repeat: int,
        seed: int,
        order: list[str],
        history: dict[str, list[tuple[str, str]]],
        failed_turn: dict[str, int],
    ) -> dict[str, dict[str, Any]]:
        rows, new_arms = {}, []
        for arm in order:
            key = (sample.sample_id, turn, arm, repeat)
            if key in self.stored:
                rows[arm] = self.stored[key]
                continue
            if not self.warmed:
                warm_up(self.plan, self.cell_model, sample)
                self.warmed = True
            ids = {**identity(self.plan, sample.sample_id, turn, arm, repeat, seed), **self.provenance}
            if arm in failed_turn:
                rows[arm] = error_row(ids, None, f"turn {failed_turn[arm]} of this sample failed for {arm}")
            else:
                rows[arm] = _generate_row(self.plan, self.cell_model, sample, turn, history[arm], arm, ids)
            new_arms.append(arm)
        _score_new(self.plan, sample, rows, new_arms)
        # Untimed: one extra forward per greedy mismatch, for its logit margins.
        model, tokenizer = self.cell_model.model, self.cell_model.tokenizer
        record_mismatches(self.plan, model, tokenizer, sample, turn, history, rows, new_arms)
        # AR first: a kill between two appends never leaves a non-AR row without its AR pair on disk.
        for arm in self.plan.arms:
            if arm in new_arms:
                self.writer.append(rows[arm])
                self.appended += 1
        return rows


def _generate_row(
    plan: CellPlan,
    cell_model: CellModel,
    sample: Sample,
    turn: int,
    history: list[tuple[str, str]],
    arm: str,
    ids: dict[str, Any],
) -> dict[str, Any]:
    cfg = plan.cfg
    prompt = render_prompt(
        cell_model.tokenizer, sample, turn, history, chat=cfg.model.chat, system_prompt=cfg.model.system_prompt
    )
    try:
        result = generate(arm, cell_model, prompt, plan, ids["seed"])
    except _FATAL:
        raise
    except Exception as exc:  # e.g. out of memory on one long sample: record it and go on
        if cell_model.ranks is not None and arm in PARALLEL_ARMS:
            raise  # the other ranks are mid-generation: no later generation could line up with theirs
        log.warning("%s on sample %s turn %d failed: %s", arm, sample.sample_id, turn, exc)
        if plan.device.type == "cuda":
            torch.cuda.empty_cache()
        return error_row(ids, len(prompt), f"{type(exc).__name__}: {exc}")
    text = cell_model.tokenizer.decode(result.tokens, skip_special_tokens=True)
    return result_row(ids, len(prompt), result, text)


def _score_new(plan: CellPlan, sample: Sample, rows: dict[str, dict[str, Any]], new_arms: list[str]) -> None:
    ar = rows["ar"]
    for arm in new_arms:
        row = rows[arm]
        if row["error"] is not None:
            continue
        row.update(
            score_output(
                plan.dataset_spec.name,
                row["output_text"],
                sample,
                chat=plan.cfg.model.chat,
                allow_unsandboxed=allow_unsandboxed(plan.cfg),
            )
        )
        if arm != "ar" and plan.greedy and ar["error"] is None:
            row["matches_ar"] = list(row["output_ids"]) == list(ar["output_ids"])
