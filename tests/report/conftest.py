"""The small real sweep shared by the report tests (built once per session; treat as read-only)."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import pytest

from .sweep_builder import SWEEP_NAME, build_sweep


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory) -> Path:
    """A sweep folder with 8 cells run by the real engine on a tiny model, plus a device profile."""
    return build_sweep(tmp_path_factory.mktemp("sweeps") / SWEEP_NAME)


@pytest.fixture(scope="session")
def sweep(sweep_dir):
    """The loaded sweep (rows, summary, cells, profile)."""
    from lade_bench.report.sweep import load_sweep

    return load_sweep(sweep_dir)


@dataclass(frozen=True)
class CliReport:
    """What ``python -m lade_bench.report SWEEP --out OUT --n-boot N_BOOT`` wrote and printed."""

    out: Path
    printed: str
    n_boot: int


@pytest.fixture(scope="session")
def sweep_report(sweep_dir, tmp_path_factory) -> CliReport:
    """The small sweep's report as the CLI writes it (figures, tables, HTML), built once: several modules
    read the same report (its files, its page in a browser, the tables an archive must reproduce)."""
    from lade_bench.report.cli import main

    out, n_boot = tmp_path_factory.mktemp("report"), 300
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main([str(sweep_dir), "--out", str(out), "--n-boot", str(n_boot)]) == 0
    return CliReport(out, printed.getvalue(), n_boot)
