"""The conditions a cell was timed under: CPU and affinity, threads, load, other suite processes, resume gaps.

A speedup is a ratio of two wall times measured minutes apart, so whatever else ran on the machine
meanwhile (another sweep, a tuner on the other core, a pytest run) shifts it. Each cell records, in
its manifest (``timing_conditions``), what it can see of that: which CPU it ran on
(``processor``: model and dtype-relevant features, ``lade_bench.profiling.processor``), the CPUs it may
run on (``os.sched_getaffinity``), torch's thread count, the load average before and after, the other
lade_bench / pytest processes running at its start and end (found in ``/proc``, this process's own
tree left out), and, when it resumed rows an earlier run left, the wall-clock gap since the last of
them (``rows.jsonl``'s modification time: every row append is fsynced). The report
(``lade_bench.report.conditions``) flags a cell that ran under interference.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from lade_bench.profiling.processor import processor_identity

# A command line is kept to this many characters: enough to tell a sweep from a test run.
COMMAND_CHARS = 160
# Words in a python command line that make it one of the suite's processes.
SUITE_WORDS = ("lade_bench", "pytest")
PROC = Path("/proc")


def _utc(timestamp: float | None = None) -> str:
    moment = datetime.now(timezone.utc) if timestamp is None else datetime.fromtimestamp(timestamp, timezone.utc)
    return moment.isoformat(timespec="seconds")


def _parent_pids(proc: Path = PROC) -> dict[int, int]:
    """``{pid: parent pid}`` of every process readable in ``proc``."""
    parents = {}
    for entry in proc.iterdir() if proc.is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # the process ended while we looked, or is not ours to read
            continue
        # Field 2 (the command name) may hold spaces and parentheses: split after its last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            parents[int(entry.name)] = int(fields[1])
    return parents


def own_tree(pid: int, parents: dict[int, int]) -> set[int]:
    """``pid``, its ancestors and its descendants: the processes that are this run, not interference."""
    below = {pid}
    grew = True
    while grew:  # descendants: grown from pid only (an ancestor's other children are not this run)
        children = {child for child, parent in parents.items() if parent in below and child not in below}
        grew = bool(children)
        below |= children
    above = set()
    up = parents.get(pid)
    while up and up not in above and up not in below:
        above.add(up)
        up = parents.get(up)
    return below | above


def suite_processes(pid: int | None = None, proc: Path = PROC) -> list[dict[str, Any]]:
    """Other python processes of the suite (their command line names lade_bench or pytest), by pid.

    Args:
        pid: the process whose own tree is left out (default: this one).
        proc: the procfs root (a test may pass a fake one).

    Returns:
        ``[{"pid": int, "command": str}]``, commands cut to :data:`COMMAND_CHARS` characters; empty
        where ``/proc`` does not exist (not Linux).
    """
    parents = _parent_pids(proc)
    mine = own_tree(os.getpid() if pid is None else pid, parents)
    found = []
    for other in sorted(parents):
        if other in mine:
            continue
        try:
            argv = (proc / str(other) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        command = " ".join(a.decode("utf-8", "replace") for a in argv if a)
        if "python" in Path(argv[0].decode("utf-8", "replace")).name and any(w in command for w in SUITE_WORDS):
            found.append({"pid": other, "command": command[:COMMAND_CHARS]})
    return found


def snapshot() -> dict[str, Any]:
    """Load average (1, 5, 15 min) and the other suite processes, now."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # not available on this platform
        load = None
    return {"utc": _utc(), "load_average": load, "suite_processes": suite_processes()}


def start_conditions(rows_path: Path) -> dict[str, Any]:
    """What is known before the cell's first timed generation of this run.

    ``resume_gap_s`` is the wall-clock time since the last row of an earlier run of this cell
    (``rows_path``'s modification time), None when this run starts the cell.
    """
    try:
        affinity: list[int] | None = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        affinity = None
    gap = last_row = None
    if rows_path.is_file() and rows_path.stat().st_size > 0:
        mtime = rows_path.stat().st_mtime
        gap, last_row = round(max(0.0, datetime.now(timezone.utc).timestamp() - mtime), 1), _utc(mtime)
    return {
        "processor": processor_identity(),
        "cpu_affinity": affinity,
        "cpu_affinity_count": len(affinity) if affinity is not None else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "start": snapshot(),
        "end": None,
        "resume_gap_s": gap,
        "last_row_before_resume_utc": last_row,
    }


def finish_conditions(conditions: dict[str, Any]) -> dict[str, Any]:
    """``conditions`` with the end snapshot, taken after the cell's last generation."""
    return {**conditions, "end": snapshot()}
