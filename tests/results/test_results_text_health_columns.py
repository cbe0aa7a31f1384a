"""Schema 12: every row records its text health (repeated-4-gram share, distinct-4, loop start, at cap);
rows written before read the four columns as null."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from lade_bench.metrics.text_health import TEXT_HEALTH_COLUMNS
from lade_bench.results import ROW_SCHEMA, SCHEMA_VERSION, CellWriter, load_rows
from lade_bench.results.schema import COLUMNS_BY_NAME, upgrade_row, validate_row

from .results_helpers import make_row


def test_the_columns_are_added_in_version_12_and_round_trip(tmp_path):
    assert SCHEMA_VERSION >= 12
    assert all(COLUMNS_BY_NAME[name].added_in == 12 for name in TEXT_HEALTH_COLUMNS)
    writer = CellWriter(tmp_path)
    looped = dict(repeated_4gram_share=0.75, distinct_4=0.25, loop_start=3, at_cap=True)
    writer.append(make_row(sample_id="s0", **looped))
    writer.append(make_row(sample_id="s1"))  # clean: no loop (null), not at the cap
    writer.finalize()
    rows = load_rows(tmp_path).sort_values("sample_id")
    first, second = rows.to_dict("records")
    assert {c: first[c] for c in TEXT_HEALTH_COLUMNS} == looped
    assert rows["loop_start"].isna().tolist() == [False, True]
    assert (second["repeated_4gram_share"], second["distinct_4"], bool(second["at_cap"])) == (0.0, 1.0, False)


def test_rows_written_before_the_columns_read_them_as_null(tmp_path):
    old = {k: v for k, v in make_row(sample_id="s0").items() if k not in TEXT_HEALTH_COLUMNS}
    upgraded = upgrade_row(old)
    assert all(upgraded[c] is None for c in TEXT_HEALTH_COLUMNS)
    validate_row(upgraded)
    # An old parquet file, and an old JSON line beside a new row in one cell.
    old_schema = pa.schema([field for field in ROW_SCHEMA if field.name not in TEXT_HEALTH_COLUMNS])
    pq.write_table(pa.Table.from_pylist([old], schema=old_schema), tmp_path / "rows.parquet")
    assert load_rows(tmp_path)[list(TEXT_HEALTH_COLUMNS)].isna().all(axis=None)
    (tmp_path / "rows.parquet").unlink()
    (tmp_path / "rows.jsonl").write_text(json.dumps(old) + "\n")
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="s1", at_cap=True))
    writer.finalize()
    rows = load_rows(tmp_path).sort_values("sample_id")
    assert rows["at_cap"].isna().tolist() == [True, False] and bool(rows["at_cap"].iloc[1])
