"""The per-sample row schema: one row per (cell, sample, turn, arm, repeat).

``COLUMNS`` below is the only place a column is declared. The pyarrow schema, the ``Row`` TypedDict,
the validation in :func:`validate_row` and the reader's dtypes are all derived from it, so adding a
column is a one-line change here (plus bumping ``SCHEMA_VERSION``).

Nullability has three levels because an errored row has no output to measure:

* ``"never"``: identity columns; a row without them cannot be attributed to anything.
* ``"on_error"``: efficiency and text columns; null only when ``error`` is set, so a crashed sample is
  recorded (and not silently retried forever) without inventing numbers that would pollute
  ``sum(t_ar) / sum(t_lade)``.
* ``"always"``: quality columns (a dataset has ROUGE *or* pass *or* accuracy, not all) and the
  lookahead shape (N, W, G mean nothing for some arms' cells).

Every column must be present as a key even when its value is ``None``: a misspelt or forgotten key is
then an error instead of a silent null. The one exception is reading old results: a column added in a
later schema version (``Column.added_in``) is filled in rows written before it existed
(:func:`upgrade_row` for JSON lines, ``lade_bench.results.reader`` for parquet files), with null or,
where every older row had one known value, with that value (``Column.before``: ``compiled`` is false,
since every cell before version 6 ran eager).

Float columns may hold NaN (``DecodeResult.forward_time_s`` uses NaN for "not measured"); the JSONL
crash log keeps NaN via Python's ``json`` ``NaN`` token and parquet stores it as a float NaN, so a
value round-trips exactly.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import numpy as np
import pyarrow as pa

from lade_bench.decoding.core.params import STANDARD_STEP_PATH
from lade_bench.methods import is_registered, unknown_method_message
from lade_bench.methods.state import SCOPE_BEFORE

# Bump when a column is added, removed or changes type; recorded in the manifest and parquet metadata
# so that old result folders can be recognised.
SCHEMA_VERSION = 14

# The config section whose values fill the shape columns (ngram, window, guesses, prompt_as_reference,
# verification) of every row, also in a cell whose arms do not read it.
SHAPE_SECTION = "lookahead"

# Uniquely identifies a row inside one cell; with ``cell_id`` it identifies a row in a sweep.
KEY_COLUMNS: tuple[str, ...] = ("sample_id", "turn", "arm", "repeat")

Nullability = Literal["never", "on_error", "always"]
Kind = Literal["str", "int", "float", "bool", "int_list"]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

_ARROW_TYPES: dict[str, pa.DataType] = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "bool": pa.bool_(),
    "int_list": pa.list_(pa.int32()),
}
_PY_TYPES: dict[str, Any] = {"str": str, "int": int, "float": float, "bool": bool, "int_list": list[int]}


@dataclass(frozen=True)
class Column:
    """One column of the row table.

    Attributes:
        name: column name, also the key in a row dict.
        kind: value kind; maps to one arrow type (``int`` -> int64, ``int_list`` -> list<int32>).
        nullable: when ``None`` is allowed (see the module docstring).
        group: ``identity`` / ``provenance`` / ``efficiency`` / ``quality`` / ``text``; for humans and reports.
        doc: meaning and unit.
        added_in: the schema version that added the column; rows from before it read it as ``before``.
        before: the value of the column in rows written before ``added_in`` (None: null). Only for a
            column whose value every older row is known to have had (older cells were all eager).
    """

    name: str
    kind: Kind
    nullable: Nullability
    group: str
    doc: str
    added_in: int = 1
    before: Any = None

    @property
    def arrow_type(self) -> pa.DataType:
        """The pyarrow type of the column."""
        return _ARROW_TYPES[self.kind]


COLUMNS: tuple[Column, ...] = (
    # --- identity ---
    Column("cell_id", "str", "never", "identity", "stable hash of the cell's semantic config"),
    Column("sweep", "str", "never", "identity", "sweep name"),
    Column("model", "str", "never", "identity", "model id or path"),
    Column("dataset", "str", "never", "identity", "dataset name"),
    Column("sample_id", "str", "never", "identity", "dataset sample id (string even if numeric)"),
    Column("turn", "int", "never", "identity", "0-based turn of a multi-turn sample"),
    Column("arm", "str", "never", "identity", "decoding method, a name in lade_bench.methods"),
    Column("repeat", "int", "never", "identity", "0-based timing repeat"),
    Column("ngram", "int", "always", "identity", "lookahead N (n-gram size) of the cell"),
    Column("window", "int", "always", "identity", "lookahead W (window width) of the cell"),
    Column("guesses", "int", "always", "identity", "lookahead G (verified candidates) of the cell"),
    Column("prompt_as_reference", "bool", "never", "identity", "n-gram pool seeded from the prompt"),
    Column(
        "verification",
        "str",
        "always",
        "identity",
        "lookahead verification layout, flat or trie; null before v4 (flat)",
        4,
    ),
    # The cell's mode (compile=true): every arm of a cell runs in it, so it is also the row's.
    Column(
        "compiled",
        "bool",
        "never",
        "identity",
        "compiled cell (static KV cache, torch.compile'd forwards) or eager; false before v6 (all eager)",
        6,
        before=False,
    ),
    Column("compile_mode", "str", "always", "identity", "torch.compile mode resolved for the device; null: eager", 6),
    # The cell's step path (step_path): every arm of a cell runs on it, and the runner writes it on every row
    # (nullable as state_scope is, for rows built column by column); every cell before version 11 ran standard.
    Column(
        "step_path",
        "str",
        "always",
        "identity",
        "the cell's step path: standard, or batch_invariant (every row bit-identical however many share a forward)",
        11,
        before=STANDARD_STEP_PATH,
    ),
    # How the turn was put to the model (lade_bench.datasets.prompt_formats): chat template, cued or plain
    # completion. Not known for older rows: a base model's cells ran plain, a chat model's chat.
    Column(
        "prompt_format",
        "str",
        "always",
        "identity",
        "the prompt format: chat (the model's chat template), cued (task label and answer cue) or plain "
        "(bare turns); null before v13",
        13,
    ),
    # The budget, so "how many outputs stopped at it instead of ending by themselves" comes from rows alone.
    Column("max_new_tokens", "int", "always", "identity", "the cell's most new tokens per turn; null before v7", 7),
    Column("do_sample", "bool", "never", "identity", "sampling (true) or greedy (false)"),
    Column("temperature", "float", "never", "identity", "sampling temperature"),
    Column("top_p", "float", "never", "identity", "nucleus sampling threshold"),
    Column("top_k", "int", "never", "identity", "top-k cut-off, 0 = off"),
    Column("seed", "int", "never", "identity", "RNG seed of this row's generation"),
    # --- provenance (which run of the cell produced the row; null in rows written before version 2) ---
    Column("run_id", "str", "always", "provenance", "the run of the cell that wrote this row (manifest, index)", 2),
    Column("job_id", "str", "always", "provenance", "scheduler job of that run (Slurm, submitit, Ray); null: none", 2),
    Column("host", "str", "always", "provenance", "host name of the machine that timed this row", 2),
    # --- efficiency ---
    Column("prompt_tokens", "int", "on_error", "efficiency", "prompt length in token ids"),
    Column("new_tokens", "int", "on_error", "efficiency", "generated token ids (prompt excluded)"),
    Column("decode_steps", "int", "on_error", "efficiency", "forward passes, prefill included"),
    Column("wall_time_s", "float", "on_error", "efficiency", "generation wall time, s, synchronised"),
    Column("forward_time_s", "float", "on_error", "efficiency", "time inside forward calls, s; NaN if n/a"),
    Column("accept_lengths", "int_list", "on_error", "efficiency", "tokens emitted per forward pass"),
    Column("tokens_per_s", "float", "on_error", "efficiency", "new_tokens / wall_time_s"),
    Column("compression_ratio", "float", "on_error", "efficiency", "new_tokens / decode_steps"),
    Column(
        "step_tokens", "int_list", "always", "efficiency", "input tokens per forward pass, prefill first; null: n/a", 4
    ),
    # A draft model's share of the work (the assisted arm): decode_steps counts the target's forwards only.
    Column("draft_forwards", "int", "always", "efficiency", "forward passes of the draft model; null: no draft", 5),
    Column(
        "draft_time_s", "float", "always", "efficiency", "time in draft forwards, s, synchronised; null: no draft", 5
    ),
    # Compile time is measured on untimed runs and reported here, never inside wall_time_s.
    Column(
        "compile_time_s",
        "float",
        "always",
        "efficiency",
        "untimed compile/warm-up runs before this row's timed generation, s (0: shapes already compiled); "
        "null: eager cell",
        6,
    ),
    # Why a method wins or loses on a device: tokens accepted per step against the tokens a step feeds
    # (its cost on the device profile). Over the decode steps, the prefill excluded (Spec-Bench's tau).
    Column("mean_accepted", "float", "always", "efficiency", "tokens emitted per decode step (tau); null: none", 8),
    Column(
        "mean_draft_width",
        "float",
        "always",
        "efficiency",
        "input tokens per decode step (1 for AR); null: step_tokens not counted, or no decode step",
        8,
    ),
    # How warm a carried state was at the row's start (lade_bench.methods.state); null: a stateless arm.
    Column("state_requests_seen", "int", "always", "efficiency", "requests its state learnt from before", 8),
    Column("state_size", "int", "always", "efficiency", "entries its state held at the start", 8),
    # How far the cell's carried states reach (method_state.scope): every row of the cell says it, as the
    # shape columns do; every cell before version 10 ran per cell.
    Column(
        "state_scope",
        "str",
        "always",
        "identity",
        "method_state.scope of the cell: cell, or benchmark (one state over every group, Spec-Bench's)",
        10,
        before=SCOPE_BEFORE,
    ),
    # --- quality ---
    Column("rouge1", "float", "always", "quality", "ROUGE-1 F1 against the reference"),
    Column("rouge2", "float", "always", "quality", "ROUGE-2 F1 against the reference"),
    Column("rougeL", "float", "always", "quality", "ROUGE-L F1 against the reference"),
    Column("rougeLsum", "float", "always", "quality", "ROUGE-Lsum F1 against the reference"),
    Column("passed", "bool", "always", "quality", "completion passed its unit tests"),
    Column("accuracy", "float", "always", "quality", "task accuracy of this completion, 0..1"),
    # Spec-Bench's reference-scored tasks (lade_bench.metrics.text_match); null before v9.
    Column("bleu", "float", "always", "quality", "sacrebleu sentence BLEU against the references, 0-100", 9),
    # Corpus BLEU of any set of rows is sacrebleu's from these summed (metrics.text_match.corpus_bleu): a mean
    # of sentence BLEU is not BLEU. Null before v14.
    Column(
        "bleu_stats",
        "int_list",
        "always",
        "quality",
        "sacrebleu BLEU counts of this sentence: hypothesis and reference length, 1-4-gram matches, 1-4-grams",
        14,
    ),
    Column("chrf", "float", "always", "quality", "sacrebleu sentence chrF against the references, 0-100", 9),
    Column("exact_match", "float", "always", "quality", "normalised answer equals a gold answer (SQuAD), 0/1", 9),
    Column("token_f1", "float", "always", "quality", "best SQuAD token F1 over the gold answers, 0..1", 9),
    Column("matches_ar", "bool", "always", "quality", "token ids equal the paired AR row (greedy, non-AR)"),
    # --- greedy mismatches (null in rows written before version 3) ---
    Column("divergence_index", "int", "always", "quality", "first output position differing from AR; null if equal", 3),
    Column(
        "ar_margin", "float", "always", "quality", "there: AR token's logit minus the best other (small: a near-tie)", 3
    ),
    Column("arm_margin", "float", "always", "quality", "there: AR token's logit minus this row's token's logit", 3),
    Column("engine_error", "bool", "always", "quality", "mismatch with arm_margin > mismatch.margin_tolerance", 3),
    # --- text health (lade_bench.metrics.text_health, from output_ids; null before v12 or on error) ---
    Column(
        "repeated_4gram_share",
        "float",
        "always",
        "text",
        "share of the output's token 4-grams repeating an earlier one (1 - distinct_4); NaN: under 4 tokens",
        12,
    ),
    Column("distinct_4", "float", "always", "text", "distinct token 4-grams over all of them; NaN: under 4 tokens", 12),
    Column(
        "loop_start",
        "int",
        "always",
        "text",
        "token index where the output's final exact loop starts (>= 2 periods, >= 16 tokens); null: no loop",
        12,
    ),
    Column("at_cap", "bool", "always", "text", "stopped at max_new_tokens, the last token no stop id", 12),
    # --- text ---
    Column("output_ids", "int_list", "on_error", "text", "generated token ids"),
    Column("output_text", "str", "on_error", "text", "decoded output"),
    Column("error", "str", "always", "text", "error message if the generation failed, else null"),
)

# Where a greedy row first differs from its AR pair and the logit margins there (lade_bench.decoding.core.divergence).
MISMATCH_COLUMNS: tuple[str, ...] = ("divergence_index", "ar_margin", "arm_margin", "engine_error")

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
COLUMNS_BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
# The row columns read from a clock: two runs of the same cell differ in these (and in the
# provenance group) and in nothing else, which is what launcher and resume checks compare.
CLOCK_COLUMNS: tuple[str, ...] = ("wall_time_s", "forward_time_s", "tokens_per_s", "draft_time_s", "compile_time_s")

ROW_SCHEMA: pa.Schema = pa.schema(
    [pa.field(c.name, c.arrow_type, nullable=c.nullable != "never") for c in COLUMNS],
    metadata={"lade_bench.schema_version": str(SCHEMA_VERSION)},
)

# Functional form so the TypedDict cannot drift from COLUMNS; static checkers see it as an opaque
# TypedDict, which is an acceptable price for a single source of truth.
Row = TypedDict(  # type: ignore[misc]  # noqa: UP013 - the class syntax cannot be built from COLUMNS
    "Row",
    {c.name: (_PY_TYPES[c.kind] if c.nullable == "never" else _PY_TYPES[c.kind] | None) for c in COLUMNS},
)

assert set(KEY_COLUMNS) <= set(COLUMN_NAMES)
assert set(CLOCK_COLUMNS) <= set(COLUMN_NAMES)


def row_key(row: Mapping[str, Any]) -> tuple[str, int, str, int]:
    """Return the in-cell identity ``(sample_id, turn, arm, repeat)`` of a row."""
    return (row["sample_id"], row["turn"], row["arm"], row["repeat"])


def upgrade_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row read from disk with the columns added after it was written filled in (``Column.before``).

    Only columns that a later schema version added are filled (null, or the value every older row
    had); any other missing key stays missing, so :func:`validate_row` still names it.
    """
    upgraded = dict(row)
    for col in COLUMNS:
        if col.added_in > 1 and col.name not in upgraded:
            upgraded[col.name] = col.before
    return upgraded


def validate_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``row`` against ``COLUMNS`` and return a normalised copy in column order.

    Normalisation turns numpy scalars into Python ones, ints into floats for float columns and tuples
    into lists, so that the JSON line and the parquet value are the same whatever the caller passed.

    Raises:
        ValueError: naming the column(s) that are missing, unknown, null when they may not be, of the
            wrong type, or out of range.
    """
    if not isinstance(row, Mapping):
        raise ValueError(f"a row must be a mapping of column -> value, got {type(row).__name__}")
    missing = [name for name in COLUMN_NAMES if name not in row]
    if missing:
        raise ValueError(f"row is missing column(s): {', '.join(missing)}")
    unknown = [str(name) for name in row if name not in COLUMNS_BY_NAME]
    if unknown:
        raise ValueError(f"row has unknown column(s): {', '.join(sorted(unknown))}")

    error = row["error"]
    out: dict[str, Any] = {}
    for col in COLUMNS:
        value = row[col.name]
        if value is None:
            if col.nullable == "never" or (col.nullable == "on_error" and error is None):
                why = "" if col.nullable == "never" else " unless 'error' is set"
                raise ValueError(f"column {col.name!r} must not be null{why}")
            out[col.name] = None
            continue
        out[col.name] = _coerce(col, value)

    if not is_registered(out["arm"]):
        raise ValueError(f"column 'arm': {unknown_method_message(out['arm'])}")
    for name in ("matches_ar", *MISMATCH_COLUMNS):
        if out[name] is not None and (out["arm"] == "ar" or out["do_sample"]):
            raise ValueError(
                f"column {name!r} must be null for the AR arm and for sampled rows "
                "(token equality with AR is only defined for greedy non-AR arms)"
            )
    _check_mode(out)
    return out


def _check_mode(row: Mapping[str, Any]) -> None:
    """A compiled row names its compile mode; an eager row has neither a mode nor a compile time."""
    if row["compiled"] and row["compile_mode"] is None:
        raise ValueError("column 'compile_mode' must not be null in a compiled row (compiled true)")
    for name in ("compile_mode", "compile_time_s"):
        if not row["compiled"] and row[name] is not None:
            raise ValueError(f"column {name!r} must be null in an eager row (compiled false)")


def _coerce(col: Column, value: Any) -> Any:
    def bad(expected: str) -> ValueError:
        return ValueError(f"column {col.name!r}: expected {expected}, got {type(value).__name__} {_short(value)}")

    if col.kind == "str":
        if not isinstance(value, str):
            raise bad("str")
        return value
    if col.kind == "bool":
        # numpy.bool_ is not a bool subclass but is what a comparison of numpy values yields.
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        raise bad("bool")
    if col.kind == "int":
        if _is_int(value):
            return int(value)
        raise bad("int")
    if col.kind == "float":
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise bad("float")
        return float(value)
    if col.kind == "int_list":
        if isinstance(value, (str, bytes, Mapping)) or not hasattr(value, "__iter__"):
            raise bad("list of int")
        items = list(value)
        for i, item in enumerate(items):
            if not _is_int(item):
                raise ValueError(
                    f"column {col.name!r}: element {i} is {type(item).__name__} {_short(item)}, expected int"
                )
            if not _INT32_MIN <= int(item) <= _INT32_MAX:
                raise ValueError(f"column {col.name!r}: element {i} = {item} does not fit in int32")
        return [int(item) for item in items]
    raise AssertionError(f"unhandled kind {col.kind}")  # pragma: no cover


def _is_int(value: Any) -> bool:
    return not isinstance(value, bool) and not isinstance(value, np.bool_) and isinstance(value, numbers.Integral)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
