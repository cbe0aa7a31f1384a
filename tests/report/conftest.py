"""The small real sweep shared by the report tests (built once per session; treat as read-only)."""

from __future__ import annotations

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
