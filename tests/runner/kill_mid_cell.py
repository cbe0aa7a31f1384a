"""Test helper: ``python -m lade_bench.run`` that SIGKILLs itself mid-cell, after its N-th row.

Usage: ``python kill_mid_cell.py N [overrides...]``, or as a patch of a CLI server's child
(cli_server.py, ``patch=("kill_mid_cell", N)``). Like ``kill -9`` from a scheduler or the OOM
killer: no ``finally`` runs, so the cell's lock, its "running" index entry and its rows up to the
N-th stay behind for the next run to take over. The patch lives only in this process.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

from lade_bench.results import CellWriter


def install(after_rows: int) -> None:
    """Patch ``CellWriter.append`` to kill this process once ``after_rows`` rows are on disk."""
    original = CellWriter.append
    appended = 0

    def append(self, row):
        nonlocal appended
        original(self, row)
        appended += 1
        if appended >= after_rows:
            os.kill(os.getpid(), signal.SIGKILL)

    CellWriter.append = append


if __name__ == "__main__":
    install(int(sys.argv[1]))
    sys.argv = ["lade_bench.run", *sys.argv[2:]]
    runpy.run_module("lade_bench.run", run_name="__main__", alter_sys=True)
