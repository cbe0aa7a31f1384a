import pandas as pd
import pytest

from lade_bench.results import COLUMN_NAMES, CellWriter, find_cell_dirs, load_rows, update_index

EXPECTED_DTYPES = {
    "cell_id": pd.StringDtype(),
    "turn": pd.Int64Dtype(),
    "ngram": pd.Int64Dtype(),
    "prompt_as_reference": pd.BooleanDtype(),
    "matches_ar": pd.BooleanDtype(),
    "passed": pd.BooleanDtype(),
    "wall_time_s": "float64",
    "rouge1": "float64",
    "accept_lengths": "object",
    "error": pd.StringDtype(),
}


def _sweep(tmp_path, make_row):
    """One finalised cell and one unfinalised cell with a torn last line."""
    done = CellWriter(tmp_path / "model=a" / "cell1")
    for sid in ("x", "y"):
        done.append(make_row(cell_id="1" * 16, sample_id=sid, passed=True))
    done.finalize()
    update_index(tmp_path, "1" * 16, cell_dir=done.cell_dir, status="done")

    running = CellWriter(tmp_path / "model=b" / "cell2")
    running.append(make_row(cell_id="2" * 16, sample_id="x", arm="ar", matches_ar=None, ngram=None))
    running.append(make_row(cell_id="2" * 16, sample_id="x", arm="ar", matches_ar=None, ngram=None, seed=9))
    with open(running.rows_path, "ab") as handle:
        handle.write(b'{"cell_id": "22')
    return done, running


def test_sweep_with_finalised_and_unfinalised_cells(tmp_path, make_row):
    done, running = _sweep(tmp_path, make_row)
    assert find_cell_dirs(tmp_path) == [done.cell_dir, running.cell_dir]
    df = load_rows(tmp_path)
    assert list(df.columns) == list(COLUMN_NAMES)
    assert list(zip(df["cell_id"], df["sample_id"], strict=True)) == [
        ("1" * 16, "x"),
        ("1" * 16, "y"),
        ("2" * 16, "x"),
    ]
    assert df.loc[2, "seed"] == 9, "unfinalised cell de-duplicated like finalize (last wins)"
    assert df.loc[2, "ngram"] is pd.NA and df.loc[0, "passed"] == True  # noqa: E712 - pandas boolean
    for column, dtype in EXPECTED_DTYPES.items():
        assert df[column].dtype == dtype, column
    pd.testing.assert_frame_equal(load_rows(running.cell_dir), df.iloc[[2]].reset_index(drop=True))
    assert len(load_rows(done.cell_dir)) == 2
    assert not (tmp_path / "model=b" / "cell2" / "rows.parquet").exists(), "reading never writes"


def test_dtypes_do_not_depend_on_data_or_source(tmp_path, make_row):
    _sweep(tmp_path, make_row)
    finalised = load_rows(tmp_path / "model=a" / "cell1")
    unfinalised = load_rows(tmp_path / "model=b" / "cell2")  # ngram/passed all null, read from jsonl
    (tmp_path / "model=c").mkdir()  # a cell folder before its first row
    empty = load_rows(tmp_path / "model=c")
    assert len(empty) == 0 and list(empty.columns) == list(COLUMN_NAMES)
    assert finalised.dtypes.equals(unfinalised.dtypes)
    assert finalised.dtypes.equals(empty.dtypes)


def test_missing_path_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_rows(tmp_path / "nope")
