"""Build result rows (``lade_bench.results.schema``) from a plan, a sample key and a generation."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np

from lade_bench.decoding import DecodeResult
from lade_bench.methods.state import REQUESTS_SEEN_STAT, STATE_SIZE_STAT
from lade_bench.metrics.text_health import text_health
from lade_bench.results import COLUMN_NAMES
from lade_bench.results.schema import SHAPE_SECTION
from lade_bench.runner.method_state import state_scope
from lade_bench.runner.plan import CellPlan


def derive_seed(global_seed: int, sample_index: int, turn: int) -> int:
    """Seed of one (sample, turn), shared by every arm and repeat: a hash of the three numbers.

    A hash rather than ``global_seed + sample_index`` so that neighbouring global seeds do not share
    most of their per-sample seeds. Fits in 31 bits (a valid torch seed and int column everywhere).
    """
    state = np.random.SeedSequence([global_seed, sample_index, turn]).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


def shape_columns(plan: CellPlan) -> dict[str, Any]:
    """The lookahead-shape columns every row and the summary of a cell have (the schema's "always").

    The lookahead arm's parsed settings when it is in the cell; otherwise the composed section as the
    plan kept it (no arm used it, and it is neither hashed nor checked).
    """
    la = plan.settings.get(SHAPE_SECTION, plan.shape_section)
    return {
        "ngram": la.ngram,
        "window": la.window,
        "guesses": la.guesses,
        "prompt_as_reference": la.prompt_as_reference,
        "verification": getattr(la, "verification", "flat"),
    }


def identity(plan: CellPlan, sample_id: str, turn: int, arm: str, repeat: int, seed: int) -> dict[str, Any]:
    """The identity columns of one row; N/W/G, the mode (eager or compiled) and the step path are the cell's, on
    every arm's row."""
    sampling = plan.sampling
    return {
        "cell_id": plan.cell_id,
        "sweep": plan.sweep_name,
        "model": plan.model.name,
        "dataset": plan.dataset_spec.name,
        "sample_id": sample_id,
        "turn": turn,
        "arm": arm,
        "repeat": repeat,
        **shape_columns(plan),
        "compiled": plan.compiled,
        "compile_mode": plan.compile_mode,
        "step_path": plan.step_path,
        "prompt_format": plan.model.prompt_format,
        "max_new_tokens": plan.counts.max_new_tokens,
        "do_sample": sampling.do_sample,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "seed": seed,
        "state_scope": state_scope(plan),
    }


def result_row(
    ids: dict[str, Any], prompt_tokens: int, result: DecodeResult, text: str, stop_ids: Collection[int]
) -> dict[str, Any]:
    """A full row for a finished generation; quality columns start empty (filled by scoring).

    ``stop_ids``: the ids that end a turn (``CellModel.stop_ids``), which tell an output that stopped at
    the cell's budget from one that ended by itself there (the ``at_cap`` column).
    """
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(ids)
    row.update(
        prompt_tokens=prompt_tokens,
        # Counted from the generated ids, never by re-tokenising the decoded text.
        new_tokens=result.new_tokens,
        decode_steps=result.steps,
        wall_time_s=result.wall_time_s,
        forward_time_s=result.forward_time_s,
        accept_lengths=list(result.accept_lengths),
        tokens_per_s=result.tokens_per_s,
        compression_ratio=result.compression_ratio,
        step_tokens=None if result.step_tokens is None else list(result.step_tokens),
        # Only a method with a draft model reports these (DecodeResult.stats); null for the others.
        draft_forwards=int(result.stats["draft_forwards"]) if "draft_forwards" in result.stats else None,
        draft_time_s=result.stats.get("draft_time_s"),
        # A compiled generation reports its untimed compile runs (CompiledForwards.run); eager ones nothing.
        compile_time_s=result.stats.get("compile_time_s"),
        **decode_step_means(result),
        **state_warmth(result),
        # Every arm's output measured the same way (repetition, a final loop, the cap): issue 63.
        **text_health(result.tokens, ids["max_new_tokens"], stop_ids),
        output_ids=list(result.tokens),
        output_text=text,
    )
    return row


def decode_step_means(result: DecodeResult) -> dict[str, float | None]:
    """``mean_accepted`` (Spec-Bench's tau) and ``mean_draft_width``: tokens emitted and fed per decode
    step, the prefill excluded; the same count for every method, from its ``accept_lengths`` and
    ``step_tokens`` (None where there is no decode step, or no ``step_tokens``)."""
    accepted = result.accept_lengths[1:]
    fed = [] if result.step_tokens is None else result.step_tokens[1:]
    return {
        "mean_accepted": sum(accepted) / len(accepted) if accepted else None,
        "mean_draft_width": sum(fed) / len(fed) if fed else None,
    }


def state_warmth(result: DecodeResult) -> dict[str, int | None]:
    """How warm a stateful method's state was at the request's start (``methods.state.use_state``); None
    for a stateless method."""
    seen, size = result.stats.get(REQUESTS_SEEN_STAT), result.stats.get(STATE_SIZE_STAT)
    return {
        "state_requests_seen": None if seen is None else int(seen),
        "state_size": None if size is None else int(size),
    }


def error_row(ids: dict[str, Any], prompt_tokens: int | None, message: str) -> dict[str, Any]:
    """A row for a generation that failed: identity and the error, no invented numbers."""
    row = dict.fromkeys(COLUMN_NAMES)
    row.update(ids)
    row.update(prompt_tokens=prompt_tokens, error=message)
    return row
