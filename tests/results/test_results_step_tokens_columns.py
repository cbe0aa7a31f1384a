"""The verification-layout and step-token columns (schema version 4): round trip, and null in older rows."""

from __future__ import annotations

import json

from lade_bench.results import SCHEMA_VERSION, CellWriter, load_rows
from lade_bench.results.schema import COLUMNS_BY_NAME

from .results_helpers import make_row

ADDED = ("verification", "step_tokens")


def test_columns_are_declared_in_version_4():
    assert SCHEMA_VERSION >= 4
    assert all(COLUMNS_BY_NAME[name].added_in == 4 for name in ADDED)


def test_a_trie_row_round_trips(tmp_path):
    writer = CellWriter(tmp_path / "cell")
    writer.append(make_row(verification="trie", step_tokens=[16, 7]))
    writer.finalize()
    back = load_rows(tmp_path / "cell").iloc[0]
    assert back["verification"] == "trie"
    assert list(back["step_tokens"]) == [16, 7]


def test_rows_written_before_version_4_read_them_as_null(tmp_path):
    cell = tmp_path / "cell"
    writer = CellWriter(cell)
    writer.append(make_row())
    writer.finalize()
    # Rewrite the JSON line as an older version wrote it (no v4 columns), drop the parquet.
    line = json.loads((cell / "rows.jsonl").read_text())
    for name in ADDED:
        del line[name]
    (cell / "rows.jsonl").write_text(json.dumps(line) + "\n")
    (cell / "rows.parquet").unlink()
    rows = load_rows(cell)
    assert rows[list(ADDED)].isna().all().all()
