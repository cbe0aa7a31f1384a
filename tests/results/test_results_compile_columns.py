"""Schema 6: every row says its cell's mode (eager or compiled) and a compiled row its compile time.

Rows written before the columns existed (schema < 6) came from eager cells only, so they read as
``compiled`` false, with no compile mode and no compile time.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lade_bench.results import ROW_SCHEMA, SCHEMA_VERSION, CellWriter, load_rows
from lade_bench.results.schema import COLUMNS_BY_NAME, upgrade_row, validate_row

from .results_helpers import make_row

ADDED = ("compiled", "compile_mode", "compile_time_s")


def _compiled_row(**overrides):
    return make_row(**{"compiled": True, "compile_mode": "default", "compile_time_s": 12.5, **overrides})


def test_the_mode_columns_are_added_in_version_6_and_compiled_is_never_null():
    assert SCHEMA_VERSION >= 6
    assert all(COLUMNS_BY_NAME[name].added_in == 6 for name in ADDED)
    assert not ROW_SCHEMA.field("compiled").nullable
    assert ROW_SCHEMA.field("compile_time_s").type == pa.float64()
    with pytest.raises(ValueError, match="'compiled' must not be null"):
        validate_row(make_row(compiled=None))


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (make_row(compile_mode="default"), "'compile_mode' must be null in an eager row"),
        (make_row(compile_time_s=0.0), "'compile_time_s' must be null in an eager row"),
        (make_row(compiled=True), "'compile_mode' must not be null in a compiled row"),
    ],
)
def test_a_row_whose_mode_columns_disagree_is_refused(row, message):
    with pytest.raises(ValueError, match=message):
        validate_row(row)


def test_compiled_rows_round_trip_and_an_errored_compiled_row_has_no_compile_time(tmp_path):
    writer = CellWriter(tmp_path)
    writer.append(_compiled_row(arm="ar", matches_ar=None))
    failed = {name: None for name in ("new_tokens", "decode_steps", "wall_time_s", "output_ids", "output_text")}
    writer.append(_compiled_row(sample_id="s1", compile_time_s=None, error="boom", matches_ar=None, **failed))
    writer.finalize()
    rows = load_rows(tmp_path)
    assert rows["compiled"].tolist() == [True, True]
    assert rows["compile_mode"].tolist() == ["default", "default"]
    assert rows["compile_time_s"].iloc[0] == 12.5 and rows["compile_time_s"].isna().iloc[1]


def test_old_jsonl_rows_read_as_eager_beside_new_compiled_ones(tmp_path):
    old = {k: v for k, v in make_row(sample_id="s0").items() if k not in ADDED}
    assert upgrade_row(old)["compiled"] is False
    assert upgrade_row(old)["compile_mode"] is None and upgrade_row(old)["compile_time_s"] is None
    (tmp_path / "rows.jsonl").write_text(json.dumps(old) + "\n")
    writer = CellWriter(tmp_path)
    writer.append(_compiled_row(sample_id="s1"))
    writer.finalize()
    rows = load_rows(tmp_path)
    assert rows["compiled"].tolist() == [False, True]
    assert rows["compile_mode"].isna().tolist() == [True, False]


def test_an_old_parquet_file_reads_as_eager_not_as_unknown(tmp_path):
    old_schema = pa.schema([field for field in ROW_SCHEMA if field.name not in ADDED])
    old_rows = [{k: v for k, v in make_row(sample_id=s).items() if k not in ADDED} for s in ("s0", "s1")]
    pq.write_table(pa.Table.from_pylist(old_rows, schema=old_schema), tmp_path / "rows.parquet")
    rows = load_rows(tmp_path)
    assert list(rows.columns) == ROW_SCHEMA.names
    # False, not NA: "eager" is known for every row written before the switch existed.
    assert rows["compiled"].tolist() == [False, False] and not rows["compiled"].isna().any()
    assert rows["compile_mode"].isna().all() and rows["compile_time_s"].isna().all()
