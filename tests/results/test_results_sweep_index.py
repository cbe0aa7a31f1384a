import json
import math
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from lade_bench.results import CellWriter, is_cell_done, load_index, read_index, update_index

CONFIG = {"model": "tiny", "lookahead": {"ngram": 5, "window": 7, "guesses": 7}, "seed": 0}


def test_lifecycle_and_is_cell_done(tmp_path):
    cell_dir = tmp_path / "cells" / "c1"
    entry = update_index(tmp_path, "c1", cell_dir=cell_dir, status="running", config=CONFIG)
    assert entry["cell_dir"] == "cells/c1" and entry["lookahead.ngram"] == 5 and entry["status"] == "running"
    assert not is_cell_done(tmp_path, "c1")

    update_index(tmp_path, "c1", cell_dir="cells/c1", status="done", summary={"speedup": {"mean": 1.8}})
    assert not is_cell_done(tmp_path, "c1"), "summary.json missing: not done"
    CellWriter(cell_dir).write_json("summary.json", {"speedup": 1.8})
    assert is_cell_done(tmp_path, "c1")
    assert not is_cell_done(tmp_path, "other")

    (entry,) = read_index(tmp_path)
    assert entry["lookahead.window"] == 7, "config kept when not given again"
    assert entry["summary.speedup.mean"] == 1.8

    update_index(tmp_path, "c1", cell_dir=cell_dir, status="running")  # forced rerun
    (entry,) = read_index(tmp_path)
    assert not any(k.startswith("summary.") for k in entry), "stale summary dropped"
    assert not is_cell_done(tmp_path, "c1")

    update_index(tmp_path, "c1", cell_dir=cell_dir, status="failed", error="OOM")
    assert read_index(tmp_path)[0]["error"] == "OOM"
    update_index(tmp_path, "c1", cell_dir=cell_dir, status="running")
    assert read_index(tmp_path)[0]["error"] is None


def test_update_is_idempotent(tmp_path):
    args = dict(cell_dir=tmp_path / "c1", status="done", config=CONFIG, summary={"speedup": 1.5, "ci": math.nan})
    first = update_index(tmp_path, "c1", **args)
    before = (tmp_path / "index.jsonl").read_bytes()
    assert json.dumps(update_index(tmp_path, "c1", **args)) == json.dumps(first)  # NaN-safe equality
    assert (tmp_path / "index.jsonl").read_bytes() == before
    update_index(tmp_path, "c2", cell_dir=tmp_path / "c2", status="running", config={**CONFIG, "seed": 1})
    update_index(tmp_path, "c1", **args)
    assert [e["cell_id"] for e in read_index(tmp_path)] == ["c1", "c2"]


def test_parquet_copy_and_load_index(tmp_path):
    update_index(tmp_path, "c1", cell_dir="c1", status="done", config={"top_k": 0}, summary={"speedup": 1.5})
    update_index(tmp_path, "c2", cell_dir="c2", status="running", config={"top_k": "auto", "extra": [1, 2]})
    table = pq.read_table(tmp_path / "index.parquet")
    assert table.num_rows == 2 and {"cell_id", "top_k", "extra", "summary.speedup"} <= set(table.column_names)
    assert table.column("top_k").to_pylist() == ["0", '"auto"']  # mixed types kept as JSON text
    df = load_index(tmp_path)
    assert list(df["cell_id"]) == ["c1", "c2"] and df.loc[0, "summary.speedup"] == 1.5
    (tmp_path / "fresh").mkdir()
    empty = load_index(tmp_path / "fresh")  # a sweep with no index yet
    assert len(empty) == 0 and {"cell_id", "status"} <= set(empty.columns)


def test_concurrent_updates_are_not_lost(tmp_path):
    def run(i):
        for status in ("running", "done"):
            update_index(tmp_path, f"c{i}", cell_dir=f"c{i}", status=status, config={"i": i})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(run, range(16)))
    entries = read_index(tmp_path)
    assert sorted(e["cell_id"] for e in entries) == sorted(f"c{i}" for i in range(16))
    assert {e["status"] for e in entries} == {"done"}
    assert [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()] == entries


@pytest.mark.parametrize(
    "kwargs",
    [
        {"status": "finished"},
        {"status": "done", "error": "x"},
        {"status": "done", "cell_dir": "../elsewhere"},
        {"status": "done", "cell_dir": "."},
        {"status": "done", "config": {"status": "x"}},
    ],
)
def test_bad_updates_are_rejected(tmp_path, kwargs):
    kwargs = {"cell_dir": "c1", **kwargs}
    with pytest.raises(ValueError):
        update_index(tmp_path, "c1", **kwargs)
    assert read_index(tmp_path) == []


def test_an_update_repairs_a_parquet_left_behind_and_removes_temp_leftovers(tmp_path):
    args = dict(cell_dir=tmp_path / "c1", status="done", config=CONFIG, summary={"speedup": 1.5})
    update_index(tmp_path, "c1", cell_dir=tmp_path / "c1", status="running", config=CONFIG)
    stale = (tmp_path / "index.parquet").read_bytes()
    update_index(tmp_path, "c1", **args)
    # A kill between the jsonl and the parquet: old parquet, plus the temp files of the cut writes.
    (tmp_path / "index.parquet").write_bytes(stale)
    leftovers = [tmp_path / ".index.parquet.0123456789ab.tmp", tmp_path / ".index.jsonl.abcdef012345.tmp"]
    for leftover in leftovers:
        leftover.write_bytes(b"half")
    other = tmp_path / ".device_profile.json.0123456789ab.tmp"  # not the index's: left alone
    other.write_bytes(b"{")
    jsonl = (tmp_path / "index.jsonl").read_bytes()

    update_index(tmp_path, "c1", **args)  # the same update again, as a rerun of a done cell does
    assert (tmp_path / "index.jsonl").read_bytes() == jsonl
    assert pq.read_table(tmp_path / "index.parquet").column("status").to_pylist() == ["done"]
    assert not any(leftover.exists() for leftover in leftovers) and other.exists()

    (tmp_path / "index.parquet").unlink()
    update_index(tmp_path, "c1", **args)
    assert pq.read_table(tmp_path / "index.parquet").column("status").to_pylist() == ["done"]


def test_remove_temp_files_takes_only_atomic_write_leftovers(tmp_path):
    from lade_bench.results.atomic import atomic_write_text, remove_temp_files

    atomic_write_text(tmp_path / "summary.json", "{}")
    ours = [tmp_path / ".summary.json.0123456789ab.tmp", tmp_path / ".rows.parquet.abcdef012345.tmp"]
    foreign = [tmp_path / "notes.tmp", tmp_path / ".cache.tmp", tmp_path / ".x.0123456789ab.tmp.bak"]
    for path in ours + foreign:
        path.write_bytes(b"")
    assert remove_temp_files(tmp_path, ["rows.parquet"]) == [ours[1]]
    assert remove_temp_files(tmp_path) == [ours[0]]
    assert all(path.exists() for path in foreign) and (tmp_path / "summary.json").read_text() == "{}"
    assert remove_temp_files(tmp_path / "missing") == []
