"""Row factory and DataFrame helpers for the results tests (uniquely named: tests have no packages)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from lade_bench.results import COLUMNS

BASE_ROW: dict[str, Any] = {
    "cell_id": "0123456789abcdef",
    "sweep": "unit",
    "model": "tiny-random",
    "dataset": "mtbench",
    "sample_id": "s0",
    "turn": 0,
    "arm": "lookahead",
    "repeat": 0,
    "ngram": 5,
    "window": 7,
    "guesses": 7,
    "prompt_as_reference": True,
    "verification": "flat",
    "compiled": False,
    "compile_mode": None,
    "max_new_tokens": 16,
    "do_sample": False,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "seed": 1234,
    "run_id": "20250101T000000-0badcafe",
    "job_id": None,
    "host": "node1",
    "prompt_tokens": 12,
    "new_tokens": 4,
    "decode_steps": 2,
    "wall_time_s": 0.5,
    "forward_time_s": 0.4,
    "accept_lengths": [1, 3],
    "tokens_per_s": 8.0,
    "compression_ratio": 2.0,
    "step_tokens": [16, 9],
    "draft_forwards": None,
    "draft_time_s": None,
    "compile_time_s": None,
    "mean_accepted": 3.0,
    "mean_draft_width": 9.0,
    "state_requests_seen": None,
    "state_size": None,
    "state_scope": "cell",
    "step_path": "standard",
    "prompt_format": "chat",
    "rouge1": None,
    "rouge2": None,
    "rougeL": None,
    "rougeLsum": None,
    "passed": None,
    "accuracy": None,
    "bleu": None,
    "bleu_stats": None,
    "chrf": None,
    "exact_match": None,
    "token_f1": None,
    "matches_ar": True,
    "divergence_index": None,
    "ar_margin": None,
    "arm_margin": None,
    "engine_error": None,
    "repeated_4gram_share": 0.0,
    "distinct_4": 1.0,
    "loop_start": None,
    "at_cap": False,
    "output_ids": [11, 12, 13, 14],
    "output_text": "héllo wörld",
    "error": None,
}


def make_row(**overrides: Any) -> dict[str, Any]:
    row = {k: (list(v) if isinstance(v, list) else v) for k, v in BASE_ROW.items()}
    unknown = set(overrides) - set(row)
    assert not unknown, f"test bug: unknown override(s) {unknown}"
    row.update(overrides)
    return row


def to_python(value: Any) -> Any:
    """A DataFrame cell as the plain Python value a row dict would hold."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.ndarray):
        return [int(x) for x in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def frame_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {col: to_python(val) for col, val in zip(df.columns, rec, strict=True)} for rec in df.itertuples(index=False)
    ]


def assert_rows_equal(
    actual: list[dict[str, Any]], expected: list[dict[str, Any]], *, from_pandas: bool = False
) -> None:
    """Exact equality (NaN == NaN); ``from_pandas``: a float64 column shows a null as NaN."""
    float_columns = {c.name for c in COLUMNS if c.kind == "float"}
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected, strict=True):
        assert list(got) == list(want)
        for key in want:
            a, b = got[key], want[key]
            if from_pandas and b is None and key in float_columns:
                b = math.nan
            if isinstance(b, float) and math.isnan(b):
                assert isinstance(a, float) and math.isnan(a), key
            else:
                assert a == b and type(a) is type(b), (key, a, b)
