"""Timing conditions: recorded by a real cell run, read from /proc, flagged by the report, and the AR drift."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path

import pytest

from lade_bench.profiling.processor import processor_identity, processor_label
from lade_bench.report.conditions import (
    NOT_RECORDED,
    PROCESSOR_MIXED,
    PROCESSOR_UNRECORDED,
    cell_interference,
    cell_processors,
    interference,
    interference_table,
)
from lade_bench.report.sweep import CellFiles
from lade_bench.runner import run_cell
from lade_bench.runner.conditions import own_tree, start_conditions, suite_processes
from lade_bench.stats import ar_drift

from ..stats.rows import frame, row
from .conftest import TINY


def test_a_cell_records_real_timing_conditions(compose_cfg, tmp_path):
    result = run_cell(compose_cfg([*TINY, f"output_root={tmp_path / 'runs'}"]))
    manifest = json.loads((result.cell_dir / "manifest.json").read_text())
    assert manifest["manifest_version"] == 2
    conditions = manifest["timing_conditions"]
    assert conditions["cpu_affinity"] == sorted(os.sched_getaffinity(0))
    assert conditions["cpu_affinity_count"] == len(os.sched_getaffinity(0)) >= 1
    assert conditions["torch_threads"] >= 1
    start, end = conditions["start"], conditions["end"]
    for snap in (start, end):
        assert len(snap["load_average"]) == 3 and all(x >= 0 for x in snap["load_average"])
        assert all(p["pid"] != os.getpid() for p in snap["suite_processes"])  # this run is not interference
    assert datetime.fromisoformat(end["utc"]) >= datetime.fromisoformat(start["utc"])
    assert conditions["resume_gap_s"] is None  # a fresh cell: nothing resumed
    assert conditions["processor"] == processor_identity() and processor_label(conditions["processor"])


INTEL_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
stepping\t: 8
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile hypervisor

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: a second core, not read
flags\t\t: fpu
"""
ARM_CPUINFO = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"


def test_the_processor_is_read_from_the_first_cpu_with_its_dtype_features(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(INTEL_CPUINFO)
    intel = processor_identity(path)
    assert intel["model_name"] == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz" and intel["vendor"] == "GenuineIntel"
    assert (intel["family"], intel["model"], intel["stepping"]) == ("6", "143", "8")
    assert intel["features"] == ["avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"]
    label = processor_label(intel)
    assert label.startswith("Intel(R) Xeon(R) Platinum 8481C") and "6/143/8" in label and "amx_bf16" in label
    # The same chip without native bf16 is another kind: its label differs.
    path.write_text(INTEL_CPUINFO.replace(" avx512_bf16", "").replace(" amx_bf16", ""))
    assert processor_label(processor_identity(path)) != label
    path.write_text(ARM_CPUINFO)
    assert processor_identity(path)["features"] == ["asimd", "sve", "bf16", "i8mm"]
    missing = processor_identity(tmp_path / "absent")
    assert missing["features"] == [] and "machine" in missing
    assert processor_label(None) is None and processor_label({}) is None


def test_a_resumed_cell_records_the_gap_since_its_last_row(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"a": 1}\n')
    past = time.time() - 1260  # the last row was written 21 minutes ago
    os.utime(rows, (past, past))
    gap = start_conditions(rows)["resume_gap_s"]
    assert 1255 <= gap <= 1300
    assert start_conditions(tmp_path / "absent.jsonl")["resume_gap_s"] is None


def _fake_proc(root: Path, processes: dict[int, tuple[int, list[str]]]) -> Path:
    """A /proc with ``stat`` (pid, a name with a space and parentheses, parent pid) and ``cmdline``."""
    for pid, (parent, argv) in processes.items():
        folder = root / str(pid)
        folder.mkdir(parents=True)
        (folder / "stat").write_text(f"{pid} (py (x) y) S {parent} 1 1 0 -1\n")
        (folder / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return root


def test_other_suite_processes_are_found_and_the_own_tree_left_out(tmp_path):
    proc = _fake_proc(
        tmp_path,
        {
            1: (0, ["/sbin/init"]),
            10: (1, ["/bin/bash"]),
            11: (10, ["/venv/bin/python", "-m", "pytest", "tests/runner"]),  # this run's parent
            12: (11, ["/venv/bin/python", "-m", "lade_bench.run"]),  # this run
            13: (12, ["/venv/bin/python3", "-c", "worker lade_bench"]),  # its child
            20: (1, ["/usr/bin/python3.12", "-m", "lade_bench.tune", "model=smollm2"]),  # another developer's tune
            21: (1, ["/usr/bin/vim", "lade_bench.py"]),  # not python
            22: (1, ["/usr/bin/python3", "-m", "http.server"]),  # python, not the suite
        },
    )
    assert own_tree(12, {11: 10, 12: 11, 13: 12, 10: 1, 1: 0, 20: 1}) == {1, 10, 11, 12, 13}
    found = suite_processes(pid=12, proc=proc)
    assert [p["pid"] for p in found] == [20]
    assert found[0]["command"].startswith("/usr/bin/python3.12 -m lade_bench.tune")
    assert all(p["pid"] != os.getpid() for p in suite_processes())  # the real /proc


def _conditions(load=(0.5, 0.5, 0.5), cpus=2, others=(), gap=None, end_load=None):
    snap = {"utc": "2025-01-01T00:00:00+00:00", "load_average": list(load), "suite_processes": list(others)}
    end = {**snap, "load_average": list(end_load or load)}
    return {"cpu_affinity": list(range(cpus)), "cpu_affinity_count": cpus, "torch_threads": cpus,
            "start": snap, "end": end, "resume_gap_s": gap}  # fmt: skip


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        (_conditions(), []),
        (_conditions(load=(1.9, 1, 1), cpus=2), []),  # busy but not oversubscribed
        (_conditions(end_load=(2.6, 1, 1), cpus=2), ["load average 2.60 at the end above the 2 CPU(s)"]),
        (_conditions(load=(1.2, 1, 1), cpus=1), ["at the start above the 1 CPU(s)", "at the end above the 1 CPU(s)"]),
        (
            _conditions(others=[{"pid": 42, "command": "python -m pytest"}]),
            ["process(es) at the start (pid 42)", "process(es) at the end (pid 42)"],
        ),
        (_conditions(gap=1260.0), ["resumed after a gap of 21.0 min"]),
        (None, [NOT_RECORDED]),
    ],
)
def test_interference_flags(conditions, expected):
    reasons = interference(conditions)
    assert len(reasons) == len(expected)
    for want in expected:
        assert any(want in reason for reason in reasons), (want, reasons)


def test_every_run_of_a_resumed_cell_counts(tmp_path):
    quiet, interrupted = _conditions(), _conditions(gap=600.0)
    manifest = {"timing_conditions": interrupted, "previous_runs": [{"timing_conditions": quiet}]}
    cell = CellFiles("s", "c", tmp_path, None, manifest, None)
    assert cell_interference(cell) == ["resumed after a gap of 10.0 min since its last row"]


def test_ar_drift_across_cells_with_identical_ar_work(tmp_path):
    rows = []
    for cell, wall in (("c1", 1.0), ("c2", 1.1), ("c3", 1.05)):  # the same AR work, timed three times
        for sample in ("s0", "s1"):
            rows += [row(cell, sample, "ar", wall=wall), row(cell, sample, "lookahead", wall=0.9)]
    rows += [row("c4", "s0", "ar", wall=5.0, dataset="other"), row("c4", "s0", "lookahead", wall=1.0, dataset="other")]
    drift = ar_drift(frame(tmp_path, rows))
    assert len(drift) == 1  # c4 did other work (another dataset) and has no twin
    rec = drift.iloc[0]
    assert rec["n_cells"] == 3 and rec["dataset"] == "d"
    assert rec["ar_ms_per_token_min"] == pytest.approx(100.0) and rec["ar_ms_per_token_max"] == pytest.approx(110.0)
    assert rec["relative_spread"] == pytest.approx(10 / 105)


def _cpu_cell(tmp_path, cell_id, *processors):
    """A cell whose runs (earliest first) recorded ``processors`` (None: a run that recorded none)."""
    runs = [{"timing_conditions": {**_conditions(), "processor": p}} for p in processors]
    manifest = {**runs[-1], "previous_runs": runs[:-1]}
    return CellFiles("unit", cell_id, tmp_path / cell_id, None, manifest, None)


FAST_CPU = {"model_name": "Fast CPU", "vendor": "AuthenticAMD", "family": "25", "model": "17", "features": ["avx2"]}
SLOW_CPU = {"model_name": "Slow CPU", "vendor": "GenuineIntel", "family": "6", "model": "85", "features": ["avx2"]}


def test_the_timing_table_names_the_cpu_of_every_run_of_a_cell(tmp_path):
    cells = [
        _cpu_cell(tmp_path, "one", FAST_CPU),
        _cpu_cell(tmp_path, "resumed", FAST_CPU, SLOW_CPU),
        _cpu_cell(tmp_path, "old", None),
    ]
    table = interference_table(cells).set_index("cell")
    assert table.loc["one", "cpu"] == processor_label(FAST_CPU)
    assert table.loc["resumed", "cpu"] == PROCESSOR_MIXED and table.loc["old", "cpu"] == PROCESSOR_UNRECORDED


def test_ar_drift_never_spans_two_cpus(tmp_path):
    # Four cells of identical AR work: two timed on a fast CPU, one on a slow one (a later sitting on
    # another machine), one resumed across both.
    walls = {"a": 1.0, "b": 1.02, "c": 1.6, "d": 1.3}
    rows = []
    for cell, wall in walls.items():
        for sample in ("s0", "s1"):
            rows += [row(cell, sample, "ar", wall=wall), row(cell, sample, "lookahead", wall=0.9)]
    frame_ = frame(tmp_path, rows)
    cells = [_cpu_cell(tmp_path, "a", FAST_CPU), _cpu_cell(tmp_path, "b", FAST_CPU)]
    cells += [_cpu_cell(tmp_path, "c", SLOW_CPU), _cpu_cell(tmp_path, "d", FAST_CPU, SLOW_CPU)]
    drift = ar_drift(frame_, cell_processors(cells), skip_cpus=frozenset({PROCESSOR_MIXED}))
    (rec,) = drift.to_dict("records")  # the slow CPU's one cell has no twin; the mixed one joins nothing
    assert rec["cpu"] == processor_label(FAST_CPU) and rec["n_cells"] == 2
    assert rec["relative_spread"] == pytest.approx(0.02 / 1.01)
    blind = ar_drift(frame_)  # without the CPUs, the machines' difference would read as 52% drift
    assert blind["n_cells"].tolist() == [4] and blind["relative_spread"].iloc[0] == pytest.approx(0.6 / 1.16)
