"""Atomic lock files: one winner, owners judged dead or silent, and a re-created lock never removed."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from lade_bench.results.lockfile import (
    break_lock,
    exclusive,
    owner_state,
    process_start,
    read_lock,
    this_host,
    try_acquire,
)


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _write_owner(path: Path, **owner) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"token": "t0", "host": this_host(), "pid": os.getpid(), **owner}))


def test_one_winner_and_the_owner_recorded(tmp_path):
    path = tmp_path / "locks" / "a.lock"
    first = try_acquire(path, {"run_id": "r1", "pid": 1})  # core keys cannot be overridden
    assert first is not None and try_acquire(path) is None
    info = read_lock(path)
    assert info.token == first.token and info.owner["run_id"] == "r1" and info.owner["pid"] == os.getpid()
    assert info.owner["pid_start"] == process_start(os.getpid()) and info.age_s < 5
    assert "pid" in info.describe() and owner_state(info, 60) == "alive"
    first.release()
    assert read_lock(path) is None and try_acquire(path) is not None


def test_dead_silent_and_zombie_owners(tmp_path):
    path = tmp_path / "a.lock"
    _write_owner(path, pid=_dead_pid())
    assert owner_state(read_lock(path), 60) == "dead"
    _write_owner(path, pid=os.getpid(), pid_start="1")  # our pid, but another process's start time: reused
    assert owner_state(read_lock(path), 60) == "dead"
    _write_owner(path, host="another-node", pid=_dead_pid())  # another host: only the heartbeat counts
    assert owner_state(read_lock(path), 60) == "alive"
    old = time.time() - 120
    os.utime(path, (old, old))
    assert owner_state(read_lock(path), 60) == "silent"
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    while Path(f"/proc/{zombie.pid}/stat").read_text().split(")")[-1].split()[0] != "Z":
        time.sleep(0.05)  # exited, not yet reaped by us
    _write_owner(path, pid=zombie.pid)
    assert owner_state(read_lock(path), 60) == "dead"
    zombie.wait()


def test_break_removes_only_the_judged_lock(tmp_path):
    path = tmp_path / "a.lock"
    _write_owner(path, pid=_dead_pid())
    judged = read_lock(path)
    fresh = tmp_path / "other.lock"
    # Someone else broke it and a new owner took it meanwhile: breaking what we judged must keep theirs.
    path.unlink()
    new_owner = try_acquire(path)
    assert break_lock(path, judged) is False
    assert new_owner.is_held() and new_owner.touch()
    assert break_lock(path, read_lock(path)) is True and read_lock(path) is None
    assert break_lock(fresh, judged) is False  # nothing there: nothing done
    assert not new_owner.is_held() and not new_owner.touch()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def _add_one(path: str, lock: str, times: int) -> None:
    for _ in range(times):
        with exclusive(lock, stale_after_s=60, poll_s=0.001):
            value = int(Path(path).read_text())
            Path(path).write_text(str(value + 1))


def test_exclusive_serialises_processes_and_takes_over_a_dead_holder(tmp_path):
    counter, lock = tmp_path / "counter", tmp_path / "locks" / "index.lock"
    counter.write_text("0")
    _write_owner(lock, pid=_dead_pid())  # a holder killed inside its critical section
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_one, args=(str(counter), str(lock), 25)) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    assert counter.read_text() == "75" and read_lock(lock) is None
