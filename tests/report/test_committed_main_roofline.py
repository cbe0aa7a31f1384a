"""The main sweep's committed roofline (paper_figures/main_roofline/) is what its command gives from the rows.

``scripts/roofline.py`` (issue 67) draws ``report.roofline`` for any sweep; the main README quotes the
main sweep's, made with the command its section names. Here that command runs again on the committed
archive into a temporary folder: the tables byte for byte and the figure byte for byte.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "paper_figures" / "main_roofline"
SCRIPT = ROOT / "scripts" / "roofline.py"
ARMS = "lookahead,prompt_lookup,jacobi"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, check=False)


def test_the_committed_main_roofline_is_what_the_command_gives_from_the_rows(tmp_path):
    """Tables (CSV, Markdown, LaTeX) and the PNG come out byte for byte from the committed main archive."""
    done = _run(str(ROOT / "paper_figures" / "rows" / "main"), "--arms", ARMS, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    names = ["tables/roofline.csv", "tables/roofline.md", "tables/roofline.tex", "figures/roofline.png"]
    for name in names:
        assert (tmp_path / name).read_bytes() == (FOLDER / name).read_bytes(), name
    assert sorted(p.name for p in (FOLDER / "figures").iterdir()) == ["roofline.pdf", "roofline.png"]


def test_an_unknown_arm_is_refused_naming_it_and_the_methods(tmp_path):
    """A misspelt arm: exit 2 and one line naming it and the registered methods, before the sweep loads."""
    done = _run(str(ROOT / "paper_figures" / "rows" / "main"), "--arms", "lookahed", "--out", str(tmp_path))
    assert done.returncode == 2
    assert "lookahed" in done.stderr and "prompt_lookup" in done.stderr
    assert not any(tmp_path.iterdir())
