"""The statistics package stands alone: importing it (or its clients) pulls in no presentation code."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Packages the statistics must not depend on: presentation (report, matplotlib, its HTML), the
# runner and the tuner. Data flows engine -> runner -> results -> stats -> report, never back.
FORBIDDEN = ("lade_bench.report", "lade_bench.runner", "lade_bench.tune", "matplotlib")


def _imported_after(statement: str) -> list[str]:
    """Modules present in a fresh interpreter after ``statement`` (the test's own process is unaffected)."""
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _present(modules: list[str], packages: tuple[str, ...]) -> list[str]:
    """The modules that are, or sit inside, one of ``packages``."""
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in packages)]


@pytest.mark.slow
def test_importing_stats_imports_no_report_runner_tuner_or_plotting_code():
    modules = _imported_after("import lade_bench.stats")
    assert "lade_bench.stats.summary" in modules
    assert _present(modules, FORBIDDEN) == []


# The runner's per-cell summary and the tuner's held-out validation read the statistics, not the
# report (which would pull in matplotlib and the HTML report).
@pytest.mark.slow
@pytest.mark.parametrize("module", ["lade_bench.runner.summary", "lade_bench.tune.validate"])
def test_statistics_clients_do_not_import_the_report(module):
    modules = _imported_after(f"import {module}")
    assert "lade_bench.stats" in modules
    assert _present(modules, ("lade_bench.report", "matplotlib")) == []
