"""The W&B run record: when a cell's W&B output counts as complete, and what an interrupted run leaves."""

from __future__ import annotations

import json

from lade_bench.report.wandb_run_record import (
    RUN_RECORD_JSON,
    discard_interrupted_run,
    missing_outputs,
    new_run_id,
    read_run_record,
    record_finished,
    record_started,
    resolve_recorded,
)


def _finished_cell(tmp_path, *, exit_code=0, cell_status="done", mode="offline"):
    cell = tmp_path / "cell"
    (cell / "figures").mkdir(parents=True)
    figure = cell / "figures" / "speedup_bars.png"
    figure.write_bytes(b"png")
    sync_dir = tmp_path / "wandb" / "offline-run-20260101_000000-abcd1234"
    sync_dir.mkdir(parents=True)
    record_started(cell, run_id="abcd1234", mode=mode, wandb_dir=tmp_path)
    record_finished(
        cell,
        run_id="abcd1234",
        mode=mode,
        wandb_dir=tmp_path,
        sync_dir=sync_dir if mode == "offline" else None,
        exit_code=exit_code,
        cell_status=cell_status,
        figures=[figure],
    )
    return cell, sync_dir, figure


def test_a_finished_run_of_a_done_cell_is_complete_until_a_file_goes(tmp_path):
    cell, sync_dir, figure = _finished_cell(tmp_path)
    assert missing_outputs(cell, "offline") == []
    assert read_run_record(cell)["figures"] == ["figures/speedup_bars.png"]
    assert missing_outputs(cell, "online") == ["run logged in mode 'offline', not 'online'"]
    figure.unlink()
    assert missing_outputs(cell, "offline") == ["figure figures/speedup_bars.png is gone"]
    sync_dir.rmdir()
    assert "offline run folder ../wandb/offline-run-20260101_000000-abcd1234 is gone" in missing_outputs(
        cell, "offline"
    )


def test_a_sweep_folder_moved_as_a_whole_still_counts_as_logged(tmp_path):
    cell, sync_dir, _ = _finished_cell(tmp_path / "before")
    (tmp_path / "before").rename(tmp_path / "after")
    moved = tmp_path / "after" / "cell"
    assert missing_outputs(moved, "offline") == []
    assert resolve_recorded(moved, read_run_record(moved)["sync_dir"]) == (
        tmp_path / "after" / sync_dir.relative_to(tmp_path / "before")
    )


def test_a_failed_cell_or_no_record_is_not_complete(tmp_path):
    cell, _, _ = _finished_cell(tmp_path, exit_code=1, cell_status="failed")
    assert missing_outputs(cell, "offline") == ["run abcd1234 logged a failed cell"]
    assert missing_outputs(tmp_path / "elsewhere", "offline") == [f"no {RUN_RECORD_JSON}"]
    (cell / RUN_RECORD_JSON).write_text("{not json")
    assert read_run_record(cell) is None


def test_an_interrupted_offline_run_is_discarded_and_only_it(tmp_path):
    cell = tmp_path / "cell"
    cell.mkdir()
    run_id = new_run_id()
    assert len(run_id) == 8 and run_id.isalnum() and run_id == run_id.lower()
    interrupted = tmp_path / "wandb" / f"offline-run-20260101_000000-{run_id}"
    other = tmp_path / "wandb" / "offline-run-20260101_000000-zzzz9999"
    for folder in (interrupted, other):
        (folder / "files").mkdir(parents=True)
    record_started(cell, run_id=run_id, mode="offline", wandb_dir=tmp_path)
    assert missing_outputs(cell, "offline") == [f"run {run_id} was interrupted"]
    assert discard_interrupted_run(cell) == [interrupted]
    assert not interrupted.exists() and other.exists()

    # Finished runs and online runs are never deleted.
    record_started(cell, run_id="zzzz9999", mode="online", wandb_dir=tmp_path)
    assert discard_interrupted_run(cell) == [] and other.exists()
    assert json.loads((cell / RUN_RECORD_JSON).read_text())["state"] == "started"
