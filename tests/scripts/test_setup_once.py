"""scripts/setup.sh run again with nothing changed does nothing (``.ci/run`` calls it twice)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INPUTS = ("scripts/setup.sh", "pyproject.toml", "setup.py")


def test_a_second_setup_from_the_same_files_skips_the_work_in_one_line(tmp_path):
    """A checkout whose venv carries the stamp of a finished setup from these very files: setup.sh says so
    and exits before pip. Run offline (no package index), so a setup that did any install work would fail."""
    for name in INPUTS:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    # The stamp a finished setup writes: sha256sum's lines for the files that decide what is installed.
    stamp = subprocess.run(["sha256sum", *INPUTS], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    (tmp_path / ".venv" / "setup.sha256").write_text(stamp)
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    done = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "setup already done from these files (.venv/setup.sha256 matches scripts/setup.sh, pyproject.toml, "
        "setup.py): nothing to do"
    ]
    assert sorted(p.name for p in (tmp_path / ".venv").iterdir()) == ["bin", "setup.sha256"]  # no venv made
