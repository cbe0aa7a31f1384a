"""A result script run from another checkout (a worktree reusing the venv) runs that checkout's code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULT_SCRIPTS = (
    "reference_results.sh",
    "tune_reference.sh",
    "assisted_reference.sh",
    "baselines_reference.sh",
    "batch_invariant_reference.sh",
    "real_text_reference.sh",
)


def test_a_copy_of_the_checkout_imports_its_own_code_and_records_its_own_folder(tmp_path):
    """The venv's editable install points at this repo; a copy sourcing this_checkout.sh imports the copy."""
    copy = tmp_path / "worktree"
    shutil.copytree(REPO / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "scripts", copy / "scripts")
    probe = "import lade_bench.results.manifest as m; print(m._PACKAGE_DIR)"
    done = subprocess.run(
        ["bash", "-c", f'source scripts/this_checkout.sh && "{sys.executable}" -c "{probe}"'],
        cwd=copy, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).resolve().is_relative_to(copy.resolve()), done.stdout


@pytest.mark.parametrize("script", RESULT_SCRIPTS)
def test_every_result_script_runs_its_own_checkout(script):
    text = (REPO / "scripts" / script).read_text(encoding="utf-8")
    root, source = text.index('cd "$(dirname "$0")/.."'), text.index("source scripts/this_checkout.sh")
    assert root < source < text.index(".venv/bin/python")  # in the root, before any python runs
