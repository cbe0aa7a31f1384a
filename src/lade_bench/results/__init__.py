"""Row schema, append-only cell writer, sweep index and reader: the per-sample table is the product.

Layout of a sweep on disk::

    <sweep_root>/
      index.jsonl, index.parquet      one entry per cell (sweep_index)
      <cell dir>/
        rows.jsonl                    append-only, fsynced per row (CellWriter.append)
        rows.parquet                  de-duplicated, written atomically (CellWriter.finalize)
        summary.json, manifest.json   atomic side files (CellWriter.write_json)

Everything a report shows is recomputable from the rows; summary.json and the index are caches.
"""

from lade_bench.results.cell_id import canonical_json, cell_id
from lade_bench.results.manifest import build_manifest, git_state, package_versions
from lade_bench.results.reader import find_cell_dirs, load_cell_table, load_index, load_rows
from lade_bench.results.schema import (
    CLOCK_COLUMNS,
    COLUMN_NAMES,
    COLUMNS,
    KEY_COLUMNS,
    ROW_SCHEMA,
    SCHEMA_VERSION,
    Column,
    Row,
    row_key,
    validate_row,
)
from lade_bench.results.sweep_index import is_cell_done, read_index, update_index
from lade_bench.results.writer import (
    CONFIG_YAML,
    MANIFEST_JSON,
    ROWS_JSONL,
    ROWS_PARQUET,
    SUMMARY_JSON,
    CellWriter,
    scan_rows_jsonl,
)

__all__ = [
    "CLOCK_COLUMNS",
    "COLUMNS",
    "CONFIG_YAML",
    "COLUMN_NAMES",
    "KEY_COLUMNS",
    "MANIFEST_JSON",
    "ROWS_JSONL",
    "ROWS_PARQUET",
    "ROW_SCHEMA",
    "SCHEMA_VERSION",
    "SUMMARY_JSON",
    "CellWriter",
    "Column",
    "Row",
    "build_manifest",
    "canonical_json",
    "cell_id",
    "find_cell_dirs",
    "git_state",
    "is_cell_done",
    "load_cell_table",
    "load_index",
    "load_rows",
    "package_versions",
    "read_index",
    "row_key",
    "scan_rows_jsonl",
    "update_index",
    "validate_row",
]


def __getattr__(name: str):
    """``ARMS``: the registered method names, read when asked so that a method registered later counts."""
    if name == "ARMS":
        from lade_bench.methods import method_names

        return method_names()
    raise AttributeError(f"module 'lade_bench.results' has no attribute {name!r}")
