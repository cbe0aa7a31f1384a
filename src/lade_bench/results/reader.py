"""Load rows and the sweep index into pandas.

Dtypes depend only on the schema, never on the data, so that a column that happens to be all-null
in one cell (or in every cell of a small sweep) has the same dtype as everywhere else and frames
concatenate cleanly:

======================  =========================================
arrow type              pandas dtype
======================  =========================================
string                  ``string`` (``pd.StringDtype()``, missing = ``pd.NA``)
int64                   ``Int64`` (nullable; N/W/G are null for some arms)
bool                    ``boolean`` (nullable; ``passed``, ``matches_ar``)
float64                 ``float64`` (missing = NaN)
list<int32>             ``object`` holding ``numpy.ndarray[int32]`` (``None`` when missing)
======================  =========================================
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lade_bench.results.cell_check import REPAIR_HINT, DamagedCellError, ensure_whole
from lade_bench.results.schema import COLUMNS, ROW_SCHEMA
from lade_bench.results.sweep_index import BASE_FIELDS, INDEX_JSONL, read_index, salvage_index
from lade_bench.results.writer import (
    ROWS_JSONL,
    ROWS_PARQUET,
    SUMMARY_JSON,
    dedupe_rows,
    rows_to_table,
    scan_rows_jsonl,
)

_PANDAS_TYPES = {
    pa.string(): pd.StringDtype(),
    pa.int64(): pd.Int64Dtype(),
    pa.bool_(): pd.BooleanDtype(),
}


def find_cell_dirs(path: str | os.PathLike[str]) -> list[Path]:
    """Cell directories (holding ``rows.parquet`` or ``rows.jsonl``) at or below ``path``, sorted."""
    root = Path(path)
    if _is_cell_dir(root):
        return [root]
    found = {p.parent for name in (ROWS_PARQUET, ROWS_JSONL) for p in root.rglob(name) if p.is_file()}
    return sorted(found)


def load_cell_table(cell_dir: str | os.PathLike[str]) -> pa.Table:
    """One cell's rows as an arrow table with exactly ``ROW_SCHEMA``.

    Prefers ``rows.parquet`` (finalised, de-duplicated); for an unfinalised cell reads ``rows.jsonl``
    tolerantly (a torn last line is ignored) and de-duplicates it the same way ``finalize`` would.
    Checks nothing else: :func:`load_rows` is the reader that refuses a damaged finished cell.

    Raises:
        DamagedCellError: ``rows.parquet`` is not a readable parquet file (named, with what to run).
    """
    cell_dir = Path(cell_dir)
    parquet = cell_dir / ROWS_PARQUET
    if parquet.is_file():
        # select + cast so a file written by this schema version is returned in schema order; a file
        # from another version fails here loudly rather than producing misaligned columns.
        try:
            table = _add_later_columns(pq.read_table(parquet))
        except (OSError, pa.ArrowException) as exc:
            problem = f"not a readable parquet file ({exc})"
            raise DamagedCellError(f"damaged cell: {parquet}: {problem}; {REPAIR_HINT}") from exc
        return table.select(list(ROW_SCHEMA.names)).cast(ROW_SCHEMA)
    jsonl = cell_dir / ROWS_JSONL
    if not jsonl.is_file():
        raise FileNotFoundError(f"{cell_dir} holds neither {ROWS_PARQUET} nor {ROWS_JSONL}")
    return rows_to_table(dedupe_rows(scan_rows_jsonl(jsonl).rows))


def load_rows(path: str | os.PathLike[str], *, verify: bool = True) -> pd.DataFrame:
    """All rows under ``path`` (one cell directory or a whole sweep) as one DataFrame.

    Cells are found recursively and read in sorted directory order, rows in written order. The
    columns and dtypes are the schema's (see the module docstring) even when no cell exists yet.

    Args:
        path: a cell folder or a sweep folder.
        verify: check every finished cell (summary written, or marked done in the index) with
            :func:`~lade_bench.results.cell_check.check_cell` first, so that a cut, garbled or
            deleted file never yields a partial cell as if whole. Only the runner, which is about to
            repair the cell, reads without it.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        DamagedCellError: a finished cell's files are damaged (the message names the file and what to run).
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no results at {root}")
    cells = find_cell_dirs(root)
    if verify:
        done = _done_cell_dirs(root)
        for cell in cells:
            if (cell / SUMMARY_JSON).exists() or cell.resolve() in done:
                ensure_whole(cell)
    tables = [load_cell_table(cell) for cell in cells]
    table = pa.concat_tables(tables) if tables else ROW_SCHEMA.empty_table()
    return _to_pandas(table)


def load_index(sweep_root: str | os.PathLike[str]) -> pd.DataFrame:
    """The sweep index (``index.jsonl``) as a DataFrame, one row per cell.

    Returns an empty frame with the base columns when the sweep has no index yet.

    Raises:
        FileNotFoundError: ``sweep_root`` does not exist.
    """
    root = Path(sweep_root)
    if not root.exists():
        raise FileNotFoundError(f"no sweep at {root}")
    entries = read_index(root)
    if not entries:
        return pd.DataFrame({name: pd.Series(dtype="object") for name in BASE_FIELDS})
    return pd.DataFrame.from_records(entries)


def _done_cell_dirs(path: Path) -> set[Path]:
    """Cell folders the sweep index at ``path`` (a sweep) or beside it (a cell) marks done."""
    done = set()
    for root in (path, path.parent):
        if (root / INDEX_JSONL).is_file():
            entries, _ = salvage_index(root)
            done |= {(root / e["cell_dir"]).resolve() for e in entries if e.get("status") == "done"}
    return done


def _add_later_columns(table: pa.Table) -> pa.Table:
    # A parquet file written before a column was added (Column.added_in) reads it as the value every
    # older row had (Column.before), or as all-null.
    for col in COLUMNS:
        if col.added_in > 1 and col.name not in table.column_names:
            if col.before is None:
                filled = pa.nulls(table.num_rows, col.arrow_type)
            else:
                filled = pa.array([col.before] * table.num_rows, col.arrow_type)
            field = pa.field(col.name, col.arrow_type, nullable=col.nullable != "never")
            table = table.append_column(field, filled)
    return table


def _is_cell_dir(path: Path) -> bool:
    return (path / ROWS_PARQUET).is_file() or (path / ROWS_JSONL).is_file()


def _to_pandas(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas(types_mapper=_PANDAS_TYPES.get)
