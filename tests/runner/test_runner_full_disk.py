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
    step=0
    for options in $MOUNTS; do
        if [ $step = 0 ]; then
            mount -t tmpfs -o "$options" tmpfs "$out" || exit 90
        else
            mount -o "remount,$options" "$out" || exit 91
        fi
        "$PYTHON" -m lade_bench.run "$@" output_root="$out" > "$kept.$step.log" 2>&1
        echo $? > "$kept.$step.rc"
        step=$((step + 1))
    done
    cp -a "$out" "$kept"
    """
)


def _run_on_small_mount(tmp_path, *mounts: str) -> tuple[list[dict], object]:
    """Run the default cell on a tmpfs mounted with the first options, remounted with each next, in turn."""
    kept = tmp_path / "kept"
    env = {**os.environ, "PYTHON": sys.executable, "MOUNTS": " ".join(mounts)}
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
        {"rc": int((tmp_path / f"kept.{step}.rc").read_text()), "log": (tmp_path / f"kept.{step}.log").read_text()}
        for step in range(len(mounts))
    ]
    return runs, kept / "single"


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


def test_a_read_only_folder_and_out_of_space_are_one_line_each_and_the_rerun_completes(tmp_path):
    # One folder, three runs: read-only (nothing can be written, so the next run starts from an empty
    # folder as a first run would), then too small (a run cut off mid-write), then large enough.
    (read_only, out_of_space, rerun), sweep = _run_on_small_mount(tmp_path, "size=64m,ro", "rw,size=300k", "size=64m")
    assert read_only["rc"] == 1
    _assert_one_clear_line(read_only["log"], "cannot write ", "Read-only file system", "output_root=")
    assert out_of_space["rc"] == 1
    _assert_one_clear_line(out_of_space["log"], "cannot write ", "No space left on device", "needed", "free", "rerun")
    assert rerun["rc"] == 0, rerun["log"][-3000:]
    _assert_complete_and_tidy(sweep)
