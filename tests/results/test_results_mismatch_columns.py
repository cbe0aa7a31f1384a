"""The greedy-mismatch columns (schema version 3): where set, and read back as null from older rows."""

from __future__ import annotations

import json

import pytest

from lade_bench.results import SCHEMA_VERSION, CellWriter, load_rows, validate_row
from lade_bench.results.schema import COLUMNS_BY_NAME

from .results_helpers import make_row

MISMATCH = ("divergence_index", "ar_margin", "arm_margin", "engine_error")


def test_columns_are_declared_in_version_3():
    assert SCHEMA_VERSION >= 3
    assert all(COLUMNS_BY_NAME[name].added_in == 3 for name in MISMATCH)


def test_a_mismatching_row_round_trips(tmp_path):
    row = make_row(matches_ar=False, divergence_index=7, ar_margin=0.01, arm_margin=0.02, engine_error=False)
    writer = CellWriter(tmp_path / "cell")
    writer.append(row)
    writer.finalize()
    back = load_rows(tmp_path / "cell").iloc[0]
    assert (back["divergence_index"], back["ar_margin"], back["arm_margin"]) == (7, 0.01, 0.02)
    assert back["engine_error"] == False  # noqa: E712


@pytest.mark.parametrize("column", MISMATCH)
@pytest.mark.parametrize("where", [{"arm": "ar", "matches_ar": None}, {"do_sample": True, "matches_ar": None}])
def test_only_greedy_non_ar_rows_carry_them(column, where):
    value = {"divergence_index": 1, "ar_margin": 0.1, "arm_margin": 0.1, "engine_error": False}[column]
    with pytest.raises(ValueError, match=f"column '{column}' must be null for the AR arm"):
        validate_row(make_row(**where, **{column: value}))


def test_rows_written_before_version_3_read_them_as_null(tmp_path):
    cell = tmp_path / "cell"
    writer = CellWriter(cell)
    writer.append(make_row())
    writer.finalize()
    # Rewrite the JSON line as an older version wrote it (no mismatch columns), drop the parquet.
    line = json.loads((cell / "rows.jsonl").read_text())
    for name in MISMATCH:
        del line[name]
    (cell / "rows.jsonl").write_text(json.dumps(line) + "\n")
    (cell / "rows.parquet").unlink()
    rows = load_rows(cell)
    assert rows[list(MISMATCH)].isna().all().all()
