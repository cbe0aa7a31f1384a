"""A launch runs every cell it does not skip, and never exits 0 with a planned cell left undone.

A cell another live job owns is skipped (``cell_lock.when_owned=skip``); the launch must still run the
others. If that owner then dies, the skipped cell is neither done nor being run by anyone when the
launch ends: the launch must say so and exit non-zero (3), and a rerun finishes it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import pytest

from lade_bench import status
from lade_bench.results import read_index
from lade_bench.results.sweep_layout import cell_lock_path
from lade_bench.results.sweep_plan import read_launch
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.launch_plan import INCOMPLETE_EXIT

from .conftest import QUIET, TINY

pytestmark = pytest.mark.slow

ARGS = ["+sweep=ablation_wg", *TINY, "lookahead.guesses=1"]

# Holds a cell's lock (heartbeat included) until a line arrives on stdin, like a live job would.
OWNER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from lade_bench.runner.locks import LockSettings, claim
    from lade_bench.runner.provenance import current_run
    settings = LockSettings(heartbeat_s=0.2, stale_after_s=30.0, when_owned="skip")
    with claim(Path(sys.argv[1]), current_run(), settings, "a live job of the test"):
        print("owned", flush=True)
        sys.stdin.readline()
    """
)


@pytest.fixture
def owner_of_window_1(tmp_path, compose_cfg):
    """A live process owning the lock of the window=1 cell (started on demand); killed at the end."""
    plan = plan_cell(compose_cfg([*ARGS, "lookahead.window=1", f"output_root={tmp_path / 'runs'}"]))
    started = []

    def _start() -> subprocess.Popen:
        path = cell_lock_path(plan.sweep_root, plan.cell_id)
        proc = subprocess.Popen([sys.executable, "-c", OWNER, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)  # fmt: skip
        assert proc.stdout.readline().strip() == "owned"
        started.append(proc)
        return proc

    yield plan, _start
    for proc in started:
        proc.kill()
        proc.wait()


def _states(sweep_root) -> dict[int, str]:
    return {entry["lookahead.window"]: entry["status"] for entry in read_index(sweep_root)}


def _rerun_in_process(compose_cfg, tmp_path) -> list[str]:
    """The launch's two cells run again in this process, as Hydra's basic launcher runs them (the CLI
    costs seconds of imports; its exit codes are what the launches above check)."""
    out = f"output_root={tmp_path / 'runs'}"
    return [run_cell(compose_cfg([*ARGS, f"lookahead.window={w}", out])).status for w in (1, 3)]


def test_skip_runs_every_other_cell_and_a_live_owner_is_no_failure(run_cli, owner_of_window_1, compose_cfg, tmp_path):
    plan, start = owner_of_window_1
    owner = start()
    first = run_cli(*ARGS, "lookahead.window=1,3", "cell_lock.when_owned=skip")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "is being run by another job" in first.stdout + first.stderr
    assert _states(plan.sweep_root) == {3: "done"}  # the cell nobody else owned was run
    owner.stdin.write("\n")
    owner.stdin.flush()
    owner.wait(timeout=30)
    assert _rerun_in_process(compose_cfg, tmp_path) == ["done", "skipped"]  # the released cell runs now
    assert _states(plan.sweep_root) == {1: "done", 3: "done"}


def test_a_skipped_cell_whose_owner_died_fails_the_launch(tmp_path, owner_of_window_1, compose_cfg, cli_server):
    plan, start = owner_of_window_1
    owner = start()
    out = f"output_root={tmp_path / 'runs'}"
    launch = cli_server.start([*ARGS, "lookahead.window=1,3", out], cwd=tmp_path, stream=True, timeout=240)
    output = []
    for line in launch.stdout:  # the window=1 cell comes first: kill its owner as soon as it is skipped
        output.append(line)
        if "is being run by another job" in line:
            owner.send_signal(signal.SIGKILL)
    launch.stdout.close()
    launch.wait()
    text = "".join(output)
    assert launch.returncode == INCOMPLETE_EXIT, text[-3000:]
    assert "neither done nor being run by a live job" in text and "Rerun the same command" in text
    assert _states(plan.sweep_root) == {3: "done"}
    assert _rerun_in_process(compose_cfg, tmp_path) == ["done", "skipped"]  # the dead owner's cell is taken over
    assert _states(plan.sweep_root) == {1: "done", 3: "done"}


def test_jobs_that_are_one_cell_are_planned_once_and_the_launch_finishes(run_cli, tmp_path, capsys):
    # The smoke sweep sweeps lookahead.window=1,3; with no lookahead arm both jobs are one cell (issue 64):
    # the launch plans it once, the first job runs it, the second skips it, and nothing stays pending.
    result = run_cli("+sweep=smoke", "arms=[ar,sam_decoding,pia]", *QUIET)
    said = result.stdout + result.stderr
    assert result.returncode == 0, said[-3000:]
    assert "lookahead.window=1,3 is read by no arm of this cell" in said and "2 jobs are 1 cell" in said
    sweep_root = tmp_path / "runs" / "smoke"
    launch = read_launch(sweep_root)
    assert [cell["jobs"] for cell in launch["cells"]] == [[0, 1]] and len(launch["jobs"]) == 2
    assert status.main([str(sweep_root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert len(shown["cells"]) == 1 and shown["counts"]["done"] == 1 and shown["counts"]["pending"] == 0
    assert shown["cells"][0]["job_num"] == 0 and shown["cells"][0]["other_jobs"] == [1]
    (entry,) = read_index(sweep_root)
    assert entry["status"] == "done" and entry["arms"] == ["ar", "sam_decoding", "pia"]
