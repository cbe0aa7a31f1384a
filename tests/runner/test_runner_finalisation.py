"""Finalisation in-process: sinks before "done", completing a cell from disk without the model."""

from __future__ import annotations

import json

import pytest

import lade_bench.runner.cell as cell_module
import lade_bench.runner.roles as roles_module
from lade_bench.results import read_index
from lade_bench.runner import plan_cell, run_cell

from .conftest import TINY


class FileSink:
    """A durable sink: writes ``<cell>/sink.txt``, complete while that file exists."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, config, summary, rows, cell_dir) -> None:
        self.calls += 1
        if self.fail:
            raise OSError("dashboard down")
        (cell_dir / "sink.txt").write_text(summary["cell_id"])

    def is_complete(self, cell_dir) -> bool:
        return (cell_dir / "sink.txt").is_file()


class PlainSink:
    """A sink that leaves nothing behind (like the console table)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args) -> None:
        self.calls += 1


def forbid_model_loading(monkeypatch) -> None:
    """Completing a cell from its files must not load the model."""
    monkeypatch.setattr(roles_module, "load_model", lambda *a, **k: pytest.fail("a model was loaded"))


def test_a_failing_sink_keeps_the_cell_from_done_and_a_rerun_retries_only_it(compose_cfg, tmp_path, monkeypatch):
    cfg = compose_cfg([*TINY, f"output_root={tmp_path}"])
    plan = plan_cell(cfg)
    with pytest.raises(OSError, match="dashboard down"):
        run_cell(cfg, sinks=[FileSink(fail=True)])
    (entry,) = read_index(plan.sweep_root)
    assert entry["status"] == "failed" and "sink failed, rerun to retry it: OSError" in entry["error"]
    assert (plan.cell_dir / "summary.json").is_file() and (plan.cell_dir / "rows.parquet").is_file()

    forbid_model_loading(monkeypatch)
    durable, plain = FileSink(), PlainSink()
    outcome = run_cell(cfg, sinks=[durable, plain])
    assert (outcome.status, outcome.rows_appended) == ("done", 0)
    assert (durable.calls, plain.calls) == (1, 1)
    assert read_index(plan.sweep_root)[0]["status"] == "done"

    again = run_cell(cfg, sinks=[durable, plain])
    assert again.status == "skipped" and (durable.calls, plain.calls) == (1, 1)
    assert again.summary == outcome.summary


def test_done_cell_with_missing_durable_output_is_completed(compose_cfg, tmp_path, monkeypatch):
    # The state the old order left after a kill: index says done, the W&B run / figures never came.
    cfg = compose_cfg([*TINY, f"output_root={tmp_path}"])
    durable = FileSink()
    first = run_cell(cfg, sinks=[durable])
    (first.cell_dir / "sink.txt").unlink()
    forbid_model_loading(monkeypatch)
    plain = PlainSink()
    outcome = run_cell(cfg, sinks=[durable, plain])
    assert outcome.status == "done" and durable.calls == 2 and plain.calls == 1
    assert durable.is_complete(first.cell_dir)


def test_missing_parquet_and_index_update_are_redone_from_disk(compose_cfg, tmp_path, monkeypatch):
    # Killed after summary.json: rows.parquet gone (as if never renamed), index still "running".
    cfg = compose_cfg([*TINY, f"output_root={tmp_path}"])
    plan = plan_cell(cfg)
    first = run_cell(cfg)
    (plan.cell_dir / "rows.parquet").unlink()
    leftovers = [
        plan.cell_dir / ".summary.json.0123456789ab.tmp",
        plan.cell_dir / "figures" / ".x.png.abcdefabcdef.tmp",
    ]
    for leftover in leftovers:
        leftover.parent.mkdir(exist_ok=True)
        leftover.write_bytes(b"half")
    cell_module.update_index(plan.sweep_root, plan.cell_id, cell_dir=plan.cell_dir, status="running")

    forbid_model_loading(monkeypatch)
    outcome = run_cell(cfg)
    assert outcome.status == "done" and outcome.summary == first.summary
    assert (plan.cell_dir / "rows.parquet").is_file()
    assert not any(leftover.exists() for leftover in leftovers)
    (entry,) = read_index(plan.sweep_root)
    assert entry["status"] == "done"
    assert entry["summary.arms.lookahead.matches_ar"] == 1.0
    assert json.loads((plan.cell_dir / "summary.json").read_text()) == first.summary
