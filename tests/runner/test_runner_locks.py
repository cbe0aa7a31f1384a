"""Cell ownership: skip or wait for a live owner, take over a dead, silent or requeued one, heartbeat, loss."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from lade_bench.results.lockfile import read_lock, this_host, try_acquire
from lade_bench.runner import CellConfigError, run_cell
from lade_bench.runner.locks import LockLostError, LockSettings, LockSettingsError, claim
from lade_bench.runner.provenance import RunIdentity, current_run, label_slurm_job

from .conftest import TINY

FAST = LockSettings(heartbeat_s=0.1, stale_after_s=1.0, when_owned="skip")


def _run(job_id: str | None = None, scheduler: str | None = None) -> RunIdentity:
    return dataclasses.replace(current_run(), job_id=job_id, scheduler=scheduler)


def _foreign_lock(path, **owner) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"token": "x", "host": this_host(), "pid": os.getpid(), **owner}))


def test_settings_are_checked():
    with pytest.raises(LockSettingsError, match="heartbeat_s=0"):
        LockSettings(heartbeat_s=0)
    with pytest.raises(LockSettingsError, match="at least twice"):
        LockSettings(heartbeat_s=10, stale_after_s=15)
    with pytest.raises(LockSettingsError, match="'later' is not one of"):
        LockSettings(when_owned="later")


def test_owner_heartbeats_and_a_live_owner_is_skipped(tmp_path):
    path = tmp_path / "cell.lock"
    with claim(path, _run(), FAST, "cell A") as owner:
        before = read_lock(path)
        time.sleep(0.4)
        assert read_lock(path).heartbeat_utc > before.heartbeat_utc  # refreshed by the thread
        assert read_lock(path).owner["run_id"] == owner.handle.owner["run_id"]
        assert claim(path, _run(), FAST, "cell A") is None
        owner.ensure_held()
    assert read_lock(path) is None


def test_waiting_takes_the_lock_once_released(tmp_path):
    path = tmp_path / "cell.lock"
    owner = claim(path, _run(), FAST, "cell A")
    threading.Timer(0.3, owner.release).start()
    started = time.monotonic()
    with claim(path, _run(), dataclasses.replace(FAST, when_owned="wait"), "cell A") as second:
        assert time.monotonic() - started >= 0.25 and second.handle.is_held()


def test_dead_silent_and_requeued_owners_are_taken_over(tmp_path):
    path = tmp_path / "cell.lock"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _foreign_lock(path, pid=int(dead.stdout))
    with claim(path, _run(), FAST, "cell A") as owner:
        assert owner.handle.is_held()
    _foreign_lock(path, host="node-gone")
    old = time.time() - 5
    os.utime(path, (old, old))
    with claim(path, _run(), FAST, "cell A") as owner:
        assert owner.handle.is_held()
    # The same Slurm job, requeued after a preemption: its earlier run is gone even if the node looks alive.
    _foreign_lock(path, host="node-gone", job_id="77_3")
    assert claim(path, _run("77_3", "slurm"), FAST, "cell A") is not None
    _foreign_lock(path, host="node-gone", job_id="77_4")
    assert claim(path, _run("77_3", "slurm"), FAST, "cell A") is None


def test_a_lock_taken_over_stops_its_old_owner(tmp_path):
    path = tmp_path / "cell.lock"
    owner = claim(path, _run(), FAST, "cell A")
    path.unlink()  # another job judged us silent and broke our lock ...
    thief = try_acquire(path, {"host": "node9"})  # ... and took it
    with pytest.raises(LockLostError, match="taken over"):
        owner.ensure_held()
    owner.release()
    assert thief.is_held()  # releasing never removes someone else's lock


def test_run_cell_skips_a_cell_another_live_job_owns(compose_cfg, tmp_path):
    cfg = compose_cfg([*TINY, f"output_root={tmp_path}", "cell_lock.heartbeat_s=0.5", "cell_lock.stale_after_s=5"])
    from lade_bench.results.sweep_layout import cell_lock_path
    from lade_bench.runner import plan_cell

    plan = plan_cell(cfg)
    other = try_acquire(cell_lock_path(plan.sweep_root, plan.cell_id), {"host": "node9", "job_id": "1"})
    outcome = run_cell(cfg)
    assert outcome.status == "busy" and not plan.cell_dir.exists()
    other.release()
    assert run_cell(cfg).status == "done"
    assert read_lock(cell_lock_path(plan.sweep_root, plan.cell_id)) is None  # released after the run
    with pytest.raises(CellConfigError, match="at least twice"):
        run_cell(compose_cfg([*TINY, f"output_root={tmp_path}", "cell_lock.stale_after_s=1"]))


def test_slurm_job_is_commented_with_the_cell_name(tmp_path, monkeypatch):
    """The name stays (squeue -n lade-<sweep> lists every task); the cell goes into the comment."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "scontrol"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    label_slurm_job(_run("123_4", "slurm"), "llama-2-7b-chat-mt_bench-N5W15G15-greedy")
    label_slurm_job(_run("99", "ray"), "not-slurm")
    assert calls.read_text().split() == ["update", "JobId=123_4", "Comment=llama-2-7b-chat-mt_bench-N5W15G15-greedy"]


def test_a_lock_without_owner_record_is_an_orphan_never_a_live_owner(tmp_path, monkeypatch):
    import errno

    import lade_bench.results.lockfile as lockfile

    path = tmp_path / "cell.lock"
    path.write_bytes(b"")  # killed between creating the lock and writing its owner
    old = time.time() - 2 * lockfile.ORPHAN_GRACE_S
    os.utime(path, (old, old))
    assert lockfile.owner_state(read_lock(path), stale_after_s=1e9) == "orphaned"
    with claim(path, _run(), FAST, "cell A") as owner:  # taken over at once, not skipped as busy
        assert owner.handle.is_held()

    # Out of space while writing the owner record: no lock (nor its temp file) is left behind.
    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", full)
    with pytest.raises(OSError, match="No space"):
        try_acquire(path)
    assert not list(tmp_path.iterdir())


def test_two_commands_of_one_allocation_are_siblings_and_a_requeue_takes_over(tmp_path):
    path = tmp_path / "cell.lock"
    sibling = dataclasses.replace(_run("77", "slurm"), restart_count=0)
    with claim(path, sibling, FAST, "cell A") as first:  # a live owner of this host, same job and restart
        assert claim(path, sibling, FAST, "cell A") is None
        requeued = dataclasses.replace(sibling, restart_count=1)
        with claim(path, requeued, FAST, "cell A") as second:  # a later incarnation of the job
            assert second.handle.is_held() and not first.handle.is_held()
