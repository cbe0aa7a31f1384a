"""SIGKILL at each finalisation step, then one rerun: every artifact of every cell exists and is whole.

Each stage kills the real CLI (with W&B offline) at one step of a different cell of the same sweep
(cells differ by seed; each run, the rerun too, is a child of the CLI server, which imported the CLI's
modules once: cli_server.py, the stages in kill_during_finalisation.py); a single multirun over the
seeds then has to complete them all: rows, parquet, summary, one whole W&B run per cell, figures, the
index (jsonl and parquet), no temp files.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from lade_bench.report.wandb_run_record import RUN_RECORD_JSON, read_run_record, resolve_recorded
from lade_bench.results import load_rows, read_index

from ..report.wandb_records import read_offline_run
from .conftest import TINY
from .kill_during_finalisation import STAGE_TIMEOUT_S, STAGES

pytestmark = pytest.mark.slow

ARGS = [*[a for a in TINY if not a.startswith("wandb.mode=")], "wandb.mode=offline", "warmup=0"]
FIGURES = ("accept_length_histogram", "speedup_bars")


def _temp_files(sweep: Path) -> list[Path]:
    # atomic_write's temp names; W&B's own folder is not ours to judge.
    return [p for p in sweep.rglob(".*.tmp") if "wandb" not in p.relative_to(sweep).parts]


def _cell_dir(sweep: Path, seed: int) -> Path:
    for config in sweep.glob("*/config.yaml"):
        if f"\nseed: {seed}\n" in "\n" + config.read_text():
            return config.parent
    raise AssertionError(f"no cell with seed {seed} in {sweep}")


def _state_left_by(stage: str, sweep: Path, cell: Path) -> None:
    """The kill happened where the stage says (not earlier, not later)."""
    record = read_run_record(cell)
    index = {e["cell_dir"]: e for e in read_index(sweep)}[cell.name]
    figures = cell / "figures"
    if stage == "rows_parquet":
        assert (cell / "rows.parquet").is_file() and not (cell / "summary.json").exists()
    elif stage == "summary":
        assert (cell / "summary.json").is_file() and record is None
    elif stage == "wandb_table":
        assert record["state"] == "started" and not figures.exists()
    elif stage == "figure_write":
        assert record["state"] == "started" and list(figures.glob(".*.png.*.tmp"))
    elif stage == "wandb_finish":
        assert record["state"] == "started" and len(list(figures.glob("*.p*"))) == 2 * len(FIGURES)
    elif stage == "index_done":
        assert record["state"] == "finished" and index["status"] == "done"
        assert list(sweep.glob(".index.parquet.*.tmp"))
        assert set(pq.read_table(sweep / "index.parquet").column("status").to_pylist()) != {"done"}
    if stage != "index_done":
        assert index["status"] == "running"


def test_kill_at_each_finalisation_step_then_rerun_completes_everything(tmp_path, cli_server):
    env = {**os.environ, "WANDB_DATA_DIR": str(tmp_path / "wandb_data")}  # keep W&B staging out of $HOME
    runs = tmp_path / "runs"
    sweep = runs / "single"
    rows_before = {}
    # Each stage's run is a child of the CLI server (its own session, so the stage's kill reaches that
    # child and its W&B service only); each kill is checked before the next.
    for seed, stage in enumerate(STAGES):
        log = tmp_path / f"{stage}.log"
        args = [*ARGS, f"seed={seed}", f"output_root={runs}"]
        child = cli_server.start(
            args, cwd=tmp_path, output=log, env=env, patch=("kill_during_finalisation", stage), timeout=STAGE_TIMEOUT_S
        )
        killed = child.wait(kill_group=True)  # and whatever the killed run left behind
        assert killed == -signal.SIGKILL, f"{stage}: not killed (exit status {killed})\n{log.read_text()[-3000:]}"
        cell = _cell_dir(sweep, seed)
        _state_left_by(stage, sweep, cell)
        rows_before[seed] = (cell / "rows.jsonl").read_bytes()

    seeds = ",".join(str(seed) for seed in range(len(STAGES)))
    rerun = cli_server.run(["--multirun", *ARGS, f"seed={seeds}", f"output_root={runs}"], cwd=tmp_path, env=env)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    output = rerun.stdout + rerun.stderr
    assert "rows to generate" not in output, "a rerun must not generate again"

    index = read_index(sweep)
    assert len(index) == len(STAGES) and {e["status"] for e in index} == {"done"}
    assert pq.read_table(sweep / "index.parquet").column("status").to_pylist() == ["done"] * len(STAGES)
    assert _temp_files(sweep) == []
    offline_runs = sorted((sweep / "wandb").glob("offline-run-*"))
    assert len(offline_runs) == len(STAGES), "one W&B run per cell, interrupted ones removed"
    for seed, stage in enumerate(STAGES):
        cell = _cell_dir(sweep, seed)
        assert (cell / "rows.jsonl").read_bytes() == rows_before[seed], stage
        rows = load_rows(cell)
        assert pq.read_table(cell / "rows.parquet").num_rows == len(rows) == 4, stage
        summary = json.loads((cell / "summary.json").read_text())
        assert summary["status"] == "done" and summary["arms"]["lookahead"]["matches_ar"] == 1.0
        for name in FIGURES:
            with Image.open(cell / "figures" / f"{name}.png") as image:
                image.load()  # raises on a truncated file
            pdf = (cell / "figures" / f"{name}.pdf").read_bytes()
            assert pdf.startswith(b"%PDF") and pdf.rstrip().endswith(b"%%EOF"), (stage, name)
        record = json.loads((cell / RUN_RECORD_JSON).read_text())
        assert record["state"] == "finished" and record["exit_code"] == 0, stage
        run = read_offline_run(resolve_recorded(cell, record["sync_dir"]))
        assert run.exit_code == 0 and run.run_id == record["run_id"], stage
        assert run.config["cell_id"] == summary["cell_id"] and run.summary["status"] == "done", stage
        logged = {key for step in run.history for key in step}
        assert all(any(key.startswith(f"figures/{name}") for key in logged) for name in FIGURES), stage
