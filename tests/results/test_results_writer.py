import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq
import pytest

from lade_bench.results import ROW_SCHEMA, CellWriter, load_rows, scan_rows_jsonl, validate_row

from .results_helpers import assert_rows_equal, frame_records


def _rows(make_row):
    """A small but varied cell: both greedy arms, NaN, an errored row, quality values."""
    return [
        make_row(
            sample_id="a",
            arm="ar",
            matches_ar=None,
            forward_time_s=math.nan,
            accept_lengths=[1, 1, 1, 1],
            decode_steps=4,
            compression_ratio=1.0,
        ),
        make_row(sample_id="a", arm="lookahead", rouge1=0.25, rougeLsum=0.5),
        make_row(sample_id="b", turn=1, arm="jacobi", passed=True, accuracy=1.0, matches_ar=False),
        make_row(
            sample_id="c",
            arm="prompt_lookup",
            ngram=None,
            window=None,
            guesses=None,
            matches_ar=None,
            prompt_tokens=None,
            new_tokens=None,
            decode_steps=None,
            wall_time_s=None,
            forward_time_s=None,
            accept_lengths=None,
            tokens_per_s=None,
            compression_ratio=None,
            output_ids=None,
            output_text=None,
            error="RuntimeError: boom",
        ),
        make_row(
            sample_id="a",
            arm="lookahead",
            repeat=1,
            output_ids=[],
            output_text="",
            new_tokens=0,
            accept_lengths=[],
            tokens_per_s=0.0,
        ),
    ]


def _jsonl_lines(path):
    data = path.read_bytes()
    assert data == b"" or data.endswith(b"\n"), "file must end with a complete line"
    return [json.loads(line) for line in data.splitlines()]


def test_append_finalize_round_trip(tmp_path, make_row):
    rows = _rows(make_row)
    writer = CellWriter(tmp_path / "cell")
    for row in rows:
        writer.append(row)
    assert len(_jsonl_lines(writer.rows_path)) == len(rows)
    path = writer.finalize()
    assert path == tmp_path / "cell" / "rows.parquet"
    table = pq.read_table(path)
    assert table.schema.equals(ROW_SCHEMA)
    expected = [validate_row(r) for r in rows]
    assert_rows_equal(frame_records(load_rows(tmp_path / "cell")), expected, from_pandas=True)
    assert_rows_equal(table.to_pylist(), expected)  # parquet keeps null and NaN apart
    assert [p.name for p in (tmp_path / "cell").iterdir() if p.name.startswith(".")] == []


def test_resume_after_torn_last_line(tmp_path, make_row):
    writer = CellWriter(tmp_path)
    for sid in ("a", "b", "c"):
        writer.append(make_row(sample_id=sid))
    line = json.dumps(make_row(sample_id="d"))
    with open(writer.rows_path, "ab") as handle:  # what a SIGKILL mid-write leaves behind
        handle.write(line[: len(line) // 2].encode())

    reopened = CellWriter(tmp_path)
    assert reopened.done_keys() == {(s, 0, "lookahead", 0) for s in "abc"}
    assert scan_rows_jsonl(reopened.rows_path).has_torn_tail
    reopened.append(make_row(sample_id="d"))
    reopened.append(make_row(sample_id="b", output_text="redo"))  # a redone row: last wins
    lines = _jsonl_lines(reopened.rows_path)
    assert [r["sample_id"] for r in lines] == ["a", "b", "c", "d", "b"]

    reopened.finalize()
    df = load_rows(tmp_path)
    assert sorted(df["sample_id"]) == ["a", "b", "c", "d"]
    assert not df.duplicated(["sample_id", "turn", "arm", "repeat"]).any()
    assert df.set_index("sample_id").loc["b", "output_text"] == "redo"


def test_garbled_terminated_last_line_is_ignored_and_cut(tmp_path, make_row):
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="a"))
    with open(writer.rows_path, "ab") as handle:
        handle.write(b'\x00\x00{"cell\n')
    assert CellWriter(tmp_path).done_keys() == {("a", 0, "lookahead", 0)}
    again = CellWriter(tmp_path)
    again.append(make_row(sample_id="b"))
    assert [r["sample_id"] for r in _jsonl_lines(again.rows_path)] == ["a", "b"]


def test_corrupt_middle_line_is_an_error_with_line_number(tmp_path, make_row):
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="a"))
    with open(writer.rows_path, "ab") as handle:
        handle.write(b"{not json}\n")
    writer.append(make_row(sample_id="c"))
    with pytest.raises(ValueError, match=r"rows\.jsonl:2: corrupt"):
        CellWriter(tmp_path).done_keys()
    with pytest.raises(ValueError, match=r"rows\.jsonl:2"):
        CellWriter(tmp_path).append(make_row(sample_id="d"))
    with pytest.raises(ValueError, match=r"rows\.jsonl:2"):
        CellWriter(tmp_path).finalize()


def test_invalid_row_is_rejected_and_not_written(tmp_path, make_row):
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="a"))
    with pytest.raises(ValueError, match="'decode_steps'"):
        writer.append(make_row(sample_id="b", decode_steps=2.5))
    with pytest.raises(ValueError, match="'cell_id'"):
        writer.append(make_row(sample_id="b", cell_id="ffffffffffffffff"))
    assert writer.done_keys() == {("a", 0, "lookahead", 0)}


def test_done_keys_can_leave_errors_for_retry(tmp_path, make_row):
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="ok"))
    writer.append(make_row(sample_id="bad", output_ids=None, output_text=None, error="OOM"))
    assert len(writer.done_keys()) == 2
    assert writer.done_keys(include_errors=False) == {("ok", 0, "lookahead", 0)}
    writer.append(make_row(sample_id="bad"))  # the retry succeeded
    assert len(writer.done_keys(include_errors=False)) == 2


def test_append_after_finalize_invalidates_parquet(tmp_path, make_row):
    writer = CellWriter(tmp_path)
    writer.append(make_row(sample_id="a"))
    writer.finalize()
    resumed = CellWriter(tmp_path)
    resumed.append(make_row(sample_id="b"))
    assert not resumed.parquet_path.exists()
    assert sorted(load_rows(tmp_path)["sample_id"]) == ["a", "b"]  # from the jsonl meanwhile
    resumed.finalize()
    assert pq.read_table(resumed.parquet_path).num_rows == 2


def test_empty_cell_finalizes_to_empty_table(tmp_path):
    path = CellWriter(tmp_path).finalize()
    assert pq.read_table(path).num_rows == 0
    assert CellWriter(tmp_path).done_keys() == set()


def test_write_json_is_atomic(tmp_path):
    writer = CellWriter(tmp_path)
    writer.write_json("summary.json", {"speedup": 1.5, "n": 3})
    with pytest.raises(TypeError):
        writer.write_json("summary.json", {"speedup": 2.0, "bad": object()})  # fails mid-serialisation
    assert json.loads((tmp_path / "summary.json").read_text()) == {"speedup": 1.5, "n": 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temp file left
    writer.write_text("config.yaml", "ngram: 5\n")
    assert (tmp_path / "config.yaml").read_text() == "ngram: 5\n"
    for bad in ("../x.json", "sub/x.json", "", "rows.jsonl", "rows.parquet"):
        with pytest.raises(ValueError):
            writer.write_json(bad, {})


CHILD = textwrap.dedent(
    """
    import json, sys
    from lade_bench.results import CellWriter
    cell_dir, base, start = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
    writer = CellWriter(cell_dir)
    i = start
    while True:
        # Large rows make the write syscall long enough for SIGKILL to land inside it sometimes.
        writer.append({**base, "sample_id": f"s{i}", "output_text": "x" * 1_000_000})
        print(f"s{i}", flush=True)  # printed only after append returned: the row is committed
        i += 1
    """
)


def _run_and_kill(cell, base_row, start, delay_s):
    """Start a writer child, let it commit a few rows, SIGKILL it; return the acknowledged ids."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(cell), json.dumps(base_row), str(start)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acknowledged = []
    try:
        deadline = time.monotonic() + 20
        while len(acknowledged) < 3 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            acknowledged.append(line.strip())
        time.sleep(delay_s)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    acknowledged += [line.strip() for line in proc.stdout.read().splitlines() if line.strip()]
    proc.stdout.close()
    assert len(acknowledged) >= 3, "child did not write rows"
    return acknowledged


@pytest.mark.slow
def test_sigkill_of_a_real_writer_loses_at_most_the_row_in_flight(tmp_path, make_row):
    cell = tmp_path / "cell"
    done: set[str] = set()
    # Three kill/resume cycles: each child resumes a file the previous one was killed writing.
    for cycle, delay_s in enumerate((0.0, 0.005, 0.015)):
        acknowledged = _run_and_kill(cell, make_row(), start=100 * cycle, delay_s=delay_s)
        before, done = done, {key[0] for key in CellWriter(cell).done_keys()}
        assert before <= done  # nothing committed earlier was lost by the resume
        assert set(acknowledged) <= done - before  # every acknowledged row survived
        assert len(done - before) <= len(acknowledged) + 1  # at most the row in flight beyond them

    writer = CellWriter(cell)
    writer.append(make_row(sample_id="after-kill"))
    lines = _jsonl_lines(writer.rows_path)  # valid JSONL again, torn tail (if any) cut off
    assert len(lines) == len(done) + 1
    writer.finalize()
    df = load_rows(cell)
    assert len(df) == len(done) + 1
    assert not df.duplicated(["sample_id", "turn", "arm", "repeat"]).any()
