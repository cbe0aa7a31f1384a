"""Test helper: ``python -m lade_bench.tune`` that SIGKILLs itself inside its K-th measured configuration.

Usage: ``python kill_mid_trial.py K [overrides...]``, or as the CLI server's patch helper
(tests/runner/cli_server.py, ``patch=(path of this file, K)``), as test_tune_end_to_end runs it. The
kill comes after the first probe unit of the K-th configuration measured, like ``kill -9`` from a
scheduler or the OOM killer: no ``finally`` runs, so that trial stays RUNNING in the study and the
tune's lock file stays behind. The patch lives only in this process.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys

from lade_bench.tune import tuner


def install(kill_in: int) -> None:
    """Wrap the tuner's ``measure_config`` so that its ``kill_in``-th call dies after one unit."""
    original = tuner.measure_config
    calls = 0

    def measure_config(plan, cell_model, units, after_unit=lambda _: None):
        nonlocal calls
        calls += 1
        if calls < kill_in:
            return original(plan, cell_model, units, after_unit)

        def after_first_unit(measurement):
            after_unit(measurement)
            os.kill(os.getpid(), signal.SIGKILL)

        return original(plan, cell_model, units, after_first_unit)

    tuner.measure_config = measure_config


if __name__ == "__main__":
    install(int(sys.argv[1]))
    sys.argv = ["lade_bench.tune", *sys.argv[2:]]
    runpy.run_module("lade_bench.tune", run_name="__main__", alter_sys=True)
