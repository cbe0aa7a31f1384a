"""Row provenance columns (schema version 2): written by new runs, read as null from older results."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lade_bench.results import COLUMN_NAMES, ROW_SCHEMA, SCHEMA_VERSION, CellWriter, load_rows, validate_row
from lade_bench.results.schema import COLUMNS_BY_NAME

PROVENANCE = ("run_id", "job_id", "host")


def _old_row(make_row) -> dict:
    row = make_row()
    for name in PROVENANCE:
        del row[name]
    return row


def test_provenance_columns_are_declared_as_added_in_version_2():
    assert SCHEMA_VERSION >= 2
    assert all(
        COLUMNS_BY_NAME[name].added_in == 2 and COLUMNS_BY_NAME[name].group == "provenance" for name in PROVENANCE
    )


def test_a_fresh_row_still_needs_every_key(make_row):
    with pytest.raises(ValueError, match="missing column.*run_id"):
        validate_row(_old_row(make_row))


def test_old_jsonl_rows_read_with_null_provenance_and_append_beside_new_ones(tmp_path, make_row):
    cell = tmp_path / "cell"
    cell.mkdir()
    old = _old_row(make_row)
    (cell / "rows.jsonl").write_text(json.dumps(old) + "\n")
    writer = CellWriter(cell)
    new = make_row(sample_id="s1") | {"run_id": "r2", "job_id": "1234_5", "host": "node7"}
    writer.append(dict.fromkeys(COLUMN_NAMES) | new)  # columns added after this test stay null
    writer.finalize()
    rows = load_rows(cell)
    assert rows["run_id"].isna().tolist() == [True, False] and rows["job_id"].tolist()[1] == "1234_5"


def test_old_parquet_files_read_with_null_provenance(tmp_path, make_row):
    cell = tmp_path / "cell"
    cell.mkdir()
    old_schema = pa.schema([field for field in ROW_SCHEMA if field.name not in PROVENANCE])
    pq.write_table(pa.Table.from_pylist([_old_row(make_row)], schema=old_schema), cell / "rows.parquet")
    rows = load_rows(cell)
    assert list(rows.columns) == ROW_SCHEMA.names
    assert rows[list(PROVENANCE)].isna().all().all() and rows["seed"].tolist() == [1234]
