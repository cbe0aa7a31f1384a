"""Greedy mismatches: where a row first leaves its AR pair, the logit margins there, and the verdict.

Runs after the group's generations and scoring, never inside a timed region, and only for greedy
non-AR rows whose ids differ from the AR row's (one extra forward each, see
``lade_bench.decoding.core.divergence``). A mismatch whose token sits more than ``mismatch.margin_tolerance``
logits below AR's is flagged ``engine_error``: half-precision noise flips near-ties, not clear wins.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from lade_bench.datasets import Sample, render_prompt
from lade_bench.decoding.core.divergence import divergence_margins, first_divergence
from lade_bench.runner.plan import CellPlan

log = logging.getLogger(__name__)


def mismatch_columns(
    model, ar_prompt: Sequence[int], ar_ids: Sequence[int], prompt: Sequence[int], ids: Sequence[int], tolerance: float
) -> dict[str, Any]:
    """The mismatch columns of a greedy non-AR row (``lade_bench.results.schema.MISMATCH_COLUMNS``).

    Equal ids: no divergence, ``engine_error`` false. Different ids after the same prompt: the first
    divergent position, both margins and the verdict. Different prompts (a later turn built on an
    earlier answer that already differed): the position only; margins and verdict stay null, since the
    two outputs do not continue the same text.
    """
    if list(ids) == list(ar_ids):
        return {"divergence_index": None, "ar_margin": None, "arm_margin": None, "engine_error": False}
    if list(prompt) != list(ar_prompt):
        index = first_divergence(ar_ids, ids)
        return {"divergence_index": index, "ar_margin": None, "arm_margin": None, "engine_error": None}
    divergence = divergence_margins(model, ar_prompt, ar_ids, ids)
    assert divergence is not None  # same prompt, different outputs: they diverge somewhere
    return {
        "divergence_index": divergence.index,
        "ar_margin": divergence.ar_margin,
        "arm_margin": divergence.other_margin,
        "engine_error": divergence.exceeds(tolerance),
    }


def record_mismatches(
    plan: CellPlan,
    model,
    tokenizer,
    sample: Sample,
    turn: int,
    history: Mapping[str, list[tuple[str, str]]],
    rows: dict[str, dict[str, Any]],
    new_arms: Sequence[str],
) -> None:
    """Fill the mismatch columns of this group's new greedy non-AR rows (AR row and error rows untouched)."""
    ar = rows["ar"]
    if not plan.greedy or ar["error"] is not None:
        return
    tolerance = plan.counts.margin_tolerance
    prompts: dict[str, list[int]] = {}

    def prompt_of(arm: str) -> list[int]:
        if arm not in prompts:
            model = plan.model
            prompts[arm] = render_prompt(
                tokenizer,
                sample,
                turn,
                history[arm],
                chat=model.chat,
                system_prompt=model.system_prompt,
                completion_format=model.completion_format,
            )
        return prompts[arm]

    for arm in new_arms:
        row = rows[arm]
        if arm == "ar" or row["error"] is not None:
            continue
        row.update(
            mismatch_columns(model, prompt_of("ar"), ar["output_ids"], prompt_of(arm), row["output_ids"], tolerance)
        )
        if row["engine_error"]:
            log.error(
                "engine error: %s on sample %s turn %d leaves AR at token %d with token %d %.3g logits below "
                "AR's (tolerance %.3g): not a near-tie, the engine is wrong",
                arm,
                sample.sample_id,
                turn,
                row["divergence_index"],
                row["output_ids"][row["divergence_index"]],
                row["arm_margin"],
                tolerance,
            )
