"""A real full disk and a real read-only folder: one clear line, nothing stray, complete after a rerun.

The output folder is a tmpfs of a few hundred KiB (or a read-only one) mounted in the CLI server's
private mount namespace (cli_server.py: ``unshare --mount``, root only), so the kernel itself refuses
the writes: no patched writer. Each run is a child of that server; the tmpfs is seen there only, so
the server copies what the runs left out for the checks.
"""

from __future__ import annotations

import os
import shutil

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


def _run_on_small_mount(cli_server, tmp_path, *mounts: str) -> tuple[list[dict], object]:
    """Run the default cell on a tmpfs mounted with the first options, remounted with each next, in turn."""
    if not cli_server.private_mounts:
        pytest.skip("the CLI server has no private mount namespace here (unshare --mount failed)")
    out, kept = tmp_path / "out", tmp_path / "kept"
    out.mkdir()
    runs = []
    try:
        for step, options in enumerate(mounts):
            mount = (
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs"] if step == 0 else ["mount", "-o", f"remount,{options}"]
            )
            mounted = cli_server.call([*mount, out])
            if mounted.returncode != 0:
                pytest.skip(f"cannot mount a tmpfs here: {mounted.stdout[-300:]}")
            done = cli_server.run([*ARGS, f"output_root={out}"], cwd=tmp_path, timeout=600)
            runs.append({"rc": done.returncode, "log": done.stdout + done.stderr})
        copied = cli_server.call(["cp", "-a", out, kept])
        assert copied.returncode == 0, copied.stdout
    finally:
        cli_server.call(["umount", out])
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


def test_a_read_only_folder_and_out_of_space_are_one_line_each_and_the_rerun_completes(tmp_path, cli_server):
    # One folder, four runs: read-only (nothing can be written, so the next run starts from an empty
    # folder as a first run would), then too small twice (runs cut off mid-write: at 60 KiB while rows are
    # written, at 300 KiB later, at the figures or W&B's own files), then large enough.
    (read_only, *out_of_space, rerun), sweep = _run_on_small_mount(
        cli_server, tmp_path, "size=64m,ro", "rw,size=60k", "size=300k", "size=64m"
    )
    assert read_only["rc"] == 1
    _assert_one_clear_line(read_only["log"], "cannot write ", "Read-only file system", "output_root=")
    for cut_off in out_of_space:
        assert cut_off["rc"] == 1
        _assert_one_clear_line(cut_off["log"], "cannot write ", "No space left on device", "free", "rerun")
        # The line names where the space ran out: a results file with the bytes it needed, or the W&B run's
        # folder (W&B's own writes raise errors naming no file, and only W&B knows their size).
        (line,) = [line for line in cut_off["log"].splitlines() if "cannot write" in line]
        where = line.split("cannot write ", 1)[1].split(": No space", 1)[0]
        assert where.startswith(str(tmp_path / "out")), line
        assert "needed" in line or "/wandb/" in where, line
    assert rerun["rc"] == 0, rerun["log"][-3000:]
    _assert_complete_and_tidy(sweep)
