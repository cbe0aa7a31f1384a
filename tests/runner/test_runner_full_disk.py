"""A real full disk and a real read-only folder: one clear line, nothing stray, complete after a rerun.

The output folder is a tmpfs of a few hundred KiB (or a read-only one) mounted in a private mount
namespace (``unshare --mount``, root only), so the kernel itself refuses the writes: no patched writer.
The namespace's tmpfs disappears with it, so the script copies what it left out for the checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from lade_bench.results import load_rows, read_index

from .conftest import TINY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None, reason="mounting a tmpfs needs root and unshare"
    ),
]

ARGS = [*TINY, "dataset.limit=2", "wandb.mode=offline"]

SCRIPT = textwrap.dedent(
    """
    set -u
    out=$1; kept=$2; shift 2
    mkdir -p "$out"
    mount -t tmpfs -o "$FIRST_MOUNT" tmpfs "$out" || exit 90
    "$PYTHON" -m lade_bench.run "$@" output_root="$out" > "$kept.first.log" 2>&1
    echo $? > "$kept.first.rc"
    mount -o remount,$SECOND_MOUNT "$out" || exit 91
    "$PYTHON" -m lade_bench.run "$@" output_root="$out" > "$kept.second.log" 2>&1
    echo $? > "$kept.second.rc"
    cp -a "$out" "$kept"
    """
)


def _run_on_small_mount(tmp_path, first: str, second: str) -> tuple[dict, dict, object]:
    """Run the default cell on a mount made with options ``first``, remount with ``second``, run again."""
    kept = tmp_path / "kept"
    env = {**os.environ, "PYTHON": sys.executable, "FIRST_MOUNT": first, "SECOND_MOUNT": second}
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "bash",
            "-c",
            SCRIPT,
            "script",
            str(tmp_path / "out"),
            str(kept),
            *ARGS,
        ],  # fmt: skip
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode in (90, 91):
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr[-300:]}")
    runs = [
        {"rc": int((tmp_path / f"kept.{name}.rc").read_text()), "log": (tmp_path / f"kept.{name}.log").read_text()}
        for name in ("first", "second")
    ]
    return runs[0], runs[1], kept / "single"


def _assert_one_clear_line(log: str, *needles: str) -> None:
    assert "Traceback" not in log and "Logging error" not in log, log[-3000:]
    # Before the job starts (a read-only folder) Hydra's own log format prints it, without "[ERROR]".
    errors = [line for line in log.splitlines() if "cannot write" in line]
    assert len(errors) == 1, log[-3000:]
    for needle in needles:
        assert needle in errors[0], errors[0]


def _assert_complete_and_tidy(sweep) -> None:
    (entry,) = read_index(sweep)
    assert entry["status"] == "done"
    cell = sweep / entry["cell_dir"]
    assert len(load_rows(cell)) == 8  # 2 questions x 2 turns x 2 arms
    locks = sweep / "_locks"
    assert not locks.exists() or list(locks.iterdir()) == []
    offline_runs = sorted(p.name for p in (sweep / "wandb").glob("offline-run-*"))
    record = (cell / "wandb_run.json").read_text()
    assert len(offline_runs) == 1 and offline_runs[0] in record, (offline_runs, record)
    leftovers = [p for p in sweep.rglob("*") if ".tmp" in p.name or p.name.endswith(".removing")]
    assert leftovers == []


def test_out_of_space_is_one_line_and_the_rerun_completes(tmp_path):
    first, second, sweep = _run_on_small_mount(tmp_path, "size=300k", "size=64m")
    assert first["rc"] == 1
    _assert_one_clear_line(first["log"], "cannot write ", "No space left on device", "needed", "free", "rerun")
    assert second["rc"] == 0, second["log"][-3000:]
    _assert_complete_and_tidy(sweep)


def test_a_read_only_output_folder_is_one_line(tmp_path):
    first, second, sweep = _run_on_small_mount(tmp_path, "size=64m,ro", "rw")
    assert first["rc"] == 1
    _assert_one_clear_line(first["log"], "cannot write ", "Read-only file system", "output_root=")
    assert second["rc"] == 0, second["log"][-3000:]
    _assert_complete_and_tidy(sweep)
