"""Many jobs, one sweep: Hydra's submitit and Ray launchers, a kill -9 mid-cell, two identical commands.

Every test runs the real CLI on the tiny model, forked from the CLI server (cli_server.py: the CLI's
modules imported once); the kill test reruns in-process. A sweep run in
parallel must leave exactly what the same sweep run sequentially leaves, timings and provenance aside:
every cell done, each row once, an index and a status that agree.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir

from lade_bench import stats
from lade_bench.report.sweep import load_sweep
from lade_bench.results import CLOCK_COLUMNS, COLUMNS, load_rows, read_index
from lade_bench.results.progress import STATES, sweep_progress
from lade_bench.results.sweep_layout import locks_dir
from lade_bench.runner import run_cell

from .cli_server import CliServer, ForkedRun
from .conftest import CONF_DIR, TINY

pytestmark = pytest.mark.slow

# Three cells: more than the two Ray slots, so one Ray worker runs a second cell after its first.
WINDOWS = (1, 2, 3)
SWEEP = ["--multirun", f"lookahead.window={','.join(map(str, WINDOWS))}", *TINY, "warmup=0"]
ROWS_PER_CELL = 4  # 1 question x 2 turns x 2 arms
# Columns that depend on the clock or on who ran the row; everything else must not depend on the launcher.
ROW_TIMING = (*CLOCK_COLUMNS, *(c.name for c in COLUMNS if c.group == "provenance"))
REPORT_TIMING = stats.CLOCK_COLUMNS


def _run(cli_server: CliServer, args: list[str], output_root: Path, *, timeout: float = 300):
    done = cli_server.run([*args, f"output_root={output_root}"], cwd=output_root.parent, timeout=timeout)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done


def _raw_rows(cell_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (cell_dir / "rows.jsonl").read_text().splitlines()]


def _assert_complete(sweep: Path, cells: int, rows_per_cell: int) -> None:
    """Every cell done once, each row written exactly once, index and status agreeing, no lock left."""
    index = read_index(sweep)
    assert len(index) == cells and {e["status"] for e in index} == {"done"}
    for entry in index:
        rows = _raw_rows(sweep / entry["cell_dir"])
        keys = [(r["sample_id"], r["turn"], r["arm"], r["repeat"]) for r in rows]
        assert len(keys) == len(set(keys)) == rows_per_cell, entry["cell_dir"]
    status = sweep_progress(sweep)
    assert status.counts() == {**dict.fromkeys(STATES, 0), "done": cells}
    assert status.rows_written == status.rows_expected == cells * rows_per_cell
    assert sorted(c.cell_id for c in status.cells) == sorted(e["cell_id"] for e in index)
    assert list(locks_dir(sweep).glob("*.lock")) == []
    assert [p for p in sweep.rglob(".*.tmp") if "wandb" not in p.parts] == []


def _without_timing(sweep: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The report's summary table and the rows, minus clock- and run-dependent columns, in a fixed order."""
    report = load_sweep(sweep).summary.drop(columns=list(REPORT_TIMING)).sort_values(["cell_id", "arm"])
    rows = load_rows(sweep).drop(columns=list(ROW_TIMING)).sort_values(["cell_id", "sample_id", "turn", "arm"])
    return report.reset_index(drop=True), rows.reset_index(drop=True)


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> Path:
    """The same cells run one after another in this process, as Hydra's basic launcher runs them."""
    out = tmp_path_factory.mktemp("sequential") / "runs"
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for window in WINDOWS:
            cfg = compose("config", overrides=[*SWEEP[2:], f"lookahead.window={window}", f"output_root={out}"])
            assert run_cell(cfg).status == "done"
    return out / "single"


def _assert_same_report(sweep: Path, reference: Path, windows: tuple[int, ...] = WINDOWS) -> None:
    """``sweep`` ran the cells of ``windows``: they equal the sequential reference's, timings aside."""
    _assert_complete(sweep, len(windows), ROWS_PER_CELL)
    report, rows = _without_timing(sweep)
    expected_report, expected_rows = _without_timing(reference)
    ran = set(report["cell_id"])
    expected_report = expected_report[expected_report["cell_id"].isin(ran)].reset_index(drop=True)
    expected_rows = expected_rows[expected_rows["cell_id"].isin(ran)].reset_index(drop=True)
    assert len(expected_report["cell_id"].unique()) == len(windows)
    pd.testing.assert_frame_equal(report, expected_report)
    pd.testing.assert_frame_equal(rows, expected_rows)


def test_submitit_local_jobs_in_parallel_match_the_sequential_sweep(sequential, tmp_path, cli_server):
    # Two of the three cells: two jobs at once, each a process of its own (Ray's test needs the third).
    windows = WINDOWS[:2]
    sweep_args = ["--multirun", f"lookahead.window={','.join(map(str, windows))}", *SWEEP[2:]]
    out = tmp_path / "runs"
    _run(cli_server, [*sweep_args, "hydra/launcher=local_parallel"], out)
    sweep = out / "single"
    _assert_same_report(sweep, sequential, windows)
    runs = {e["cell_id"]: (e["run.scheduler"], e["run.job_id"], e["run.pid"]) for e in read_index(sweep)}
    assert {scheduler for scheduler, _, _ in runs.values()} == {"submitit-local"}
    assert len({job for _, job, _ in runs.values()}) == len({pid for _, _, pid in runs.values()}) == len(windows)
    for entry in read_index(sweep):  # each row names the job that timed it
        assert {r["job_id"] for r in _raw_rows(sweep / entry["cell_dir"])} == {entry["run.job_id"]}
    assert all(cell.job_num is not None for cell in sweep_progress(sweep).cells)  # matched to the launch plan
    for entry in read_index(sweep):  # the user's command, not submitit's job runner
        manifest = json.loads((sweep / entry["cell_dir"] / "manifest.json").read_text())
        assert manifest["command"] == ["run.py", *sweep_args, "hydra/launcher=local_parallel", f"output_root={out}"]


def _ray_processes(temp_dir: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and temp_dir.encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids


def test_ray_with_two_workers_matches_the_sequential_sweep(sequential, tmp_path, cli_server):
    # Ray's socket paths must stay under 107 bytes: a short folder in the system temp dir, not tmp_path.
    ray_dir = tempfile.mkdtemp(prefix="lade-ray-")
    try:
        out = tmp_path / "runs"
        overrides = ["hydra/launcher=ray_local", "hydra.launcher.ray.init.num_cpus=2"]
        _run(cli_server, [*SWEEP, *overrides, f"+hydra.launcher.ray.init._temp_dir={ray_dir}"], out)
        sweep = out / "single"
        _assert_same_report(sweep, sequential)
        assert {e["run.scheduler"] for e in read_index(sweep)} == {"ray"}
        deadline = time.monotonic() + 20
        while _ray_processes(ray_dir) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _ray_processes(ray_dir) == [], "Ray must stop with the sweep"
    finally:
        shutil.rmtree(ray_dir, ignore_errors=True)


def _wait_for_locks(folder: Path, count: int, jobs: list[ForkedRun], timeout_s: float = 300) -> None:
    """Wait until ``count`` cell locks exist in ``folder`` (or every job has exited, holding none)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(list(folder.glob("cell-*.lock"))) >= count or all(job.poll() is not None for job in jobs):
            return
        time.sleep(0.2)
    raise AssertionError(f"no {count} cell locks in {folder} after {timeout_s} s")


def test_kill_9_mid_cell_while_another_runs_then_rerun_resumes_it(tmp_path, caplog, cli_server):
    out = tmp_path / "runs"
    base = [*[a for a in TINY if not a.startswith("dataset.limit")], "dataset.limit=2", "warmup=0"]
    base += ["cell_lock.heartbeat_s=1", "cell_lock.stale_after_s=60"]  # the takeover must come from the dead pid
    rows_per_cell = 2 * 2 * 2
    # Two jobs, one per cell, as a Slurm array would run them; the victim dies after 3 rows, mid
    # (sample, turn). Each job breaks the locks of dead owners when it starts its cell
    # (runner.sweep_tidy), so the victim starts only once the other holds its cell: the victim's lock
    # must be left for the rerun to take over, not broken by a job that merely started later than the kill.
    # Both are children of the CLI server; the victim's patch (kill_mid_cell.install) lives in it alone.
    other_log, victim_log = tmp_path / "other.log", tmp_path / "victim.log"
    other = cli_server.start([*base, "lookahead.window=2", f"output_root={out}"], cwd=tmp_path, output=other_log)
    _wait_for_locks(locks_dir(out / "single"), 1, [other])
    victim_args = [*base, "lookahead.window=1", f"output_root={out}"]
    victim = cli_server.start(victim_args, cwd=tmp_path, output=victim_log, patch=("kill_mid_cell", 3), timeout=300)
    assert victim.wait() == -9, victim_log.read_text()[-3000:]
    assert other.wait() == 0, other_log.read_text()[-3000:]
    sweep = out / "single"
    killed = {c.name: c for c in sweep_progress(sweep).cells if c.state != "done"}
    assert len(killed) == 1, [(c.name, c.state) for c in sweep_progress(sweep).cells]
    (cell,) = killed.values()
    assert cell.state == "interrupted" and cell.rows_written == 3 and cell.rows_expected == rows_per_cell
    assert (locks_dir(sweep) / f"cell-{cell.cell_id}.lock").is_file()  # left by the kill
    cell_dir = sweep / cell.name
    before = (cell_dir / "rows.jsonl").read_bytes()
    finished = {p.parent.name: p.read_bytes() for p in sweep.glob("*/rows.jsonl") if p.parent != cell_dir}

    # The rerun of both cells, in this process as Hydra's basic launcher runs them (the CLI's own
    # resume after a kill is tests/runner/test_runner_cli.py::test_sigkill_mid_cell_then_rerun_completes).
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"), caplog.at_level("WARNING"):
        statuses = [
            run_cell(compose("config", overrides=[*base, f"lookahead.window={window}", f"output_root={out}"])).status
            for window in (1, 2)
        ]
    assert statuses == ["done", "skipped"]  # the killed cell resumed, the finished one left as it was
    assert "taking over the lock" in caplog.text
    _assert_complete(sweep, 2, rows_per_cell)
    assert (cell_dir / "rows.jsonl").read_bytes().startswith(before)  # nothing lost, nothing redone
    assert {p.parent.name: p.read_bytes() for p in sweep.glob("*/rows.jsonl") if p.parent != cell_dir} == finished
    run_ids = [r["run_id"] for r in _raw_rows(cell_dir)]
    assert len(set(run_ids[:3])) == 1 and len(set(run_ids[3:])) == 1 and run_ids[0] != run_ids[3]
    manifest = json.loads((cell_dir / "manifest.json").read_text())
    assert [run["run"]["run_id"] for run in manifest["previous_runs"]] == [run_ids[0]]
    assert manifest["run"]["run_id"] == run_ids[3]


def test_two_identical_commands_at_once_write_one_set_of_rows(tmp_path, cli_server):
    out = tmp_path / "runs"
    args = ["--multirun", "lookahead.window=1,2", *TINY, "warmup=0", "wandb.mode=offline"]
    # One W&B run per cell is the point here; what a run logs (figures, table) is test_runner_cli's.
    args += ["wandb.log_figures=false", "wandb.log_table=false"]
    args += ["device_profile.enabled=true", "device_profile.warmup=0", "device_profile.repeats=1"]
    args += ["device_profile.context_tokens=8", f"output_root={out}"]
    env = {**os.environ, "WANDB_DATA_DIR": str(tmp_path / "wandb_data")}  # keep W&B staging out of $HOME
    # Two children of the CLI server, both started before either is waited for.
    logs = [tmp_path / f"job{number}.log" for number in range(2)]
    jobs = [cli_server.start(args, cwd=tmp_path, env=env, output=log, timeout=300) for log in logs]
    [job.wait() for job in jobs]
    outputs = [log.read_text() for log in logs]
    assert [job.returncode for job in jobs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    sweep = out / "single"
    _assert_complete(sweep, 2, ROWS_PER_CELL)
    for entry in read_index(sweep):
        cell_dir = sweep / entry["cell_dir"]
        assert len({r["run_id"] for r in _raw_rows(cell_dir)}) == 1  # one run wrote the cell
        assert json.loads((cell_dir / "manifest.json").read_text())["previous_runs"] == []
    assert len(list((sweep / "wandb").glob("offline-run-*"))) == 2, "one W&B run per cell"
    assert sum(o.count("measuring forward time") for o in outputs) == 1, "the device profile is measured once"
    assert len(list((sweep / "device_profiles").glob("*.json"))) == 1 and not (sweep / "device_profile.json").exists()
