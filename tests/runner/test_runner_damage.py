"""Damage to a finished cell is found on the next run and by every reader; a full disk gets one line.

One tiny cell is run once per module; each test corrupts a copy of its sweep, reads it (readers must
refuse, naming the file), reruns the cell in-process and reads it again (whole, every row).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import time

import pytest

import lade_bench.results.atomic as atomic_module
import lade_bench.results.writer as writer_module
from lade_bench.results import load_rows, read_index
from lade_bench.results.cell_check import DamagedCellError
from lade_bench.results.progress import sweep_progress
from lade_bench.results.sweep_layout import cell_lock_path, index_lock_path, locks_dir, plan_dir
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.job import run_job

from .conftest import TINY
from .test_runner_finalisation import FileSink, forbid_model_loading

# Two samples so that a cut line loses one row of several.
ARGS = [*TINY, "dataset.limit=2", "warmup=0"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """(output root, rows, summary) of one finished cell, never modified (tests work on copies)."""
    from hydra import compose, initialize_config_dir

    from .conftest import CONF_DIR

    root = tmp_path_factory.mktemp("finished")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[*ARGS, f"output_root={root}"])
    outcome = run_cell(cfg, sinks=[FileSink()])
    return root, load_rows(outcome.cell_dir), outcome.summary


@pytest.fixture
def copy(finished, tmp_path, compose_cfg):
    """(cfg, plan) of a fresh copy of the finished sweep under ``tmp_path``."""
    shutil.copytree(finished[0], tmp_path / "runs")
    cfg = compose_cfg([*ARGS, f"output_root={tmp_path / 'runs'}"])
    return cfg, plan_cell(cfg)


def _cut_mid_line(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])


def _garble_middle(path):
    lines = path.read_bytes().split(b"\n")
    lines[1] = b"\x00garbage{"
    path.write_bytes(b"\n".join(lines))


DAMAGE = {
    # file: (how it is damaged, do readers refuse it, is the model needed to repair it)
    "rows.jsonl cut": ("rows.jsonl", _cut_mid_line, True, True),
    "rows.jsonl garbled": ("rows.jsonl", _garble_middle, True, True),
    "rows.jsonl deleted": ("rows.jsonl", os.unlink, True, True),
    "rows.parquet garbage": ("rows.parquet", lambda p: p.write_bytes(b"garbage"), True, False),
    "summary.json deleted": ("summary.json", os.unlink, False, False),
    "summary.json garbage": ("summary.json", lambda p: p.write_text("{oops"), True, False),
    "manifest.json garbage": ("manifest.json", lambda p: p.write_text("[1, 2"), True, True),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_each_damaged_file_is_refused_by_readers_then_repaired_by_the_rerun(case, copy, finished, monkeypatch):
    cfg, plan = copy
    name, damage, readers_refuse, needs_model = DAMAGE[case]
    _, rows, summary = finished
    damage(plan.cell_dir / name)

    if readers_refuse:
        with pytest.raises(DamagedCellError, match=rf"{plan.cell_dir / name}: .*rerun the sweep's command"):
            load_rows(plan.sweep_root)
    (cell,) = sweep_progress(plan.sweep_root).cells
    assert cell.state == "damaged" and f"{plan.cell_dir / name}:" in cell.error

    if not needs_model:
        forbid_model_loading(monkeypatch)
    sink = FileSink()
    outcome = run_cell(cfg, sinks=[sink])
    assert outcome.status == "done"
    # The sink's output stays the cell's one output unless the rows had to be generated again.
    assert sink.calls == (1 if needs_model else 0)
    again = load_rows(plan.sweep_root)
    assert len(again) == len(rows) == json.loads((plan.cell_dir / "manifest.json").read_text())["rows_expected"]
    assert sorted(zip(again["sample_id"], again["arm"], strict=True)) == sorted(
        zip(rows["sample_id"], rows["arm"], strict=True)
    )
    rebuilt = json.loads((plan.cell_dir / "summary.json").read_text())
    assert {k: v for k, v in rebuilt.items() if k != "results_dir"} == {
        k: v for k, v in summary.items() if k != "results_dir"
    } or needs_model  # regenerated rows are new timings
    assert [c.state for c in sweep_progress(plan.sweep_root).cells] == ["done"]
    assert run_cell(cfg, sinks=[sink]).status == "skipped"


def test_a_damaged_index_is_named_and_rebuilt(copy, monkeypatch):
    cfg, plan = copy
    index = plan.sweep_root / "index.jsonl"
    index.write_text("not json\n")
    with pytest.raises(ValueError, match=rf"{index}:1: corrupt index line.*rerun the sweep's command"):
        read_index(plan.sweep_root)
    assert sweep_progress(plan.sweep_root).warnings[0].startswith(f"{index}:1:")
    forbid_model_loading(monkeypatch)
    assert run_cell(cfg, sinks=[FileSink()]).status == "done"
    (entry,) = read_index(plan.sweep_root)
    assert entry["status"] == "done" and (plan.sweep_root / "index.jsonl.damaged").is_file()


def _aged(path, data=b""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    old = time.time() - 3600
    os.utime(path, (old, old))
    return path


def test_every_leftover_of_a_kill_is_cleaned_and_an_ownerless_lock_is_taken_over(copy, monkeypatch):
    cfg, plan = copy
    root = plan.sweep_root
    (plan.cell_dir / "summary.json").unlink()  # the cell must run again, so it needs its lock
    leftovers = [
        _aged(plan_dir(root) / "jobs" / ".0123456789abcdef.json.0123456789ab.tmp"),
        _aged(plan_dir(root) / ".launch.json.0123456789ab.tmp"),
        _aged(locks_dir(root) / "cell-x.lock.0123456789ab.removing"),
        _aged(locks_dir(root) / ".cell-x.lock.0123456789ab.tmp"),
        _aged(root / ".index.jsonl.0123456789ab.tmp"),
        _aged(root / ".device_profile.json.0123456789ab.tmp"),
    ]
    # Killed between creating a lock and writing its owner: empty files, the index lock too.
    lock = _aged(cell_lock_path(root, plan.cell_id))
    _aged(index_lock_path(root))
    dead = _aged(
        locks_dir(root) / "device_profile-cpu.lock", json.dumps({"token": "t", "host": "?", "pid": 1}).encode()
    )
    dead.write_text(json.dumps({"token": "t", "host": os.uname().nodename, "pid": 2**22 + 1}))
    forbid_model_loading(monkeypatch)
    started = time.monotonic()
    assert run_cell(cfg, sinks=[FileSink()]).status == "done"
    assert time.monotonic() - started < 10, "an empty index lock must not stall the run"
    assert not [p for p in leftovers if p.exists()]
    assert not lock.exists() and not index_lock_path(root).exists() and not dead.exists()


def test_a_damaged_profile_is_set_aside_so_that_it_is_measured_again(copy):
    from lade_bench.profiling.device_profile import PROFILE_JSON, kind_profile_path, load_profiles
    from lade_bench.runner.sweep_tidy import tidy_sweep

    _, plan = copy
    root = plan.sweep_root
    kind_profile_path(root, "cpu test").parent.mkdir(parents=True)
    kind_profile_path(root, "cpu test").write_text(json.dumps({"device_kind": "cpu test", "token_counts": [1]}))
    (root / PROFILE_JSON).write_text("{garbage")
    with pytest.raises(ValueError, match=rf"{root / PROFILE_JSON} is damaged"):
        load_profiles(root)
    assert tidy_sweep(root) == [root / PROFILE_JSON]
    assert (root / f"{PROFILE_JSON}.damaged").is_file()
    (stored,) = load_profiles(root)  # the legacy per-kind profile is still read
    assert stored.legacy and stored.profile["device_kind"] == "cpu test"


@pytest.mark.parametrize(("fail_at", "code"), [(1, errno.ENOSPC), (3, errno.ENOSPC), (2, errno.EROFS)])
def test_a_failing_disk_gets_one_line_and_the_rerun_completes(
    fail_at, code, compose_cfg, tmp_path, monkeypatch, caplog
):
    cfg = compose_cfg([*ARGS, f"output_root={tmp_path / 'runs'}"])
    plan = plan_cell(cfg)
    writes = {"n": 0}
    real_atomic, real_append = atomic_module.write_bytes_atomically, writer_module.append_line

    def failing(real):
        def write(path, data):
            writes["n"] += 1
            if writes["n"] == fail_at:
                raise OSError(code, os.strerror(code))
            return real(path, data)

        return write

    monkeypatch.setattr(atomic_module, "write_bytes_atomically", failing(real_atomic))
    monkeypatch.setattr(writer_module, "append_line", failing(real_append))
    with caplog.at_level(logging.ERROR, logger="lade_bench.runner.job"), pytest.raises(SystemExit) as exited:
        run_job(cfg)
    assert exited.value.code == 1
    (line,) = [r.getMessage() for r in caplog.records if r.name == "lade_bench.runner.job"]
    assert line.startswith(f"cannot write {plan.sweep_root}") and "\n" not in line
    if code == errno.ENOSPC:
        assert "needed" in line and "free" in line and "rerun the same command" in line
    else:
        assert "output_root=" in line
    assert not cell_lock_path(plan.sweep_root, plan.cell_id).exists()

    monkeypatch.setattr(atomic_module, "write_bytes_atomically", real_atomic)
    monkeypatch.setattr(writer_module, "append_line", real_append)
    assert run_cell(cfg).status == "done"
    expected = json.loads((plan.cell_dir / "manifest.json").read_text())["rows_expected"]
    assert len(load_rows(plan.sweep_root)) == expected and not list(locks_dir(plan.sweep_root).iterdir())


WANDB_OFFLINE = [*ARGS, "wandb.mode=offline"]


@pytest.fixture(scope="module")
def finished_with_wandb(tmp_path_factory):
    """Output root of one cell finished with its W&B sink offline, never modified (tests work on copies:
    the run record's ``sync_dir`` is relative to the cell, so a copy holds its own offline run)."""
    from hydra import compose, initialize_config_dir

    from lade_bench.runner.sinks import default_sinks

    from .conftest import CONF_DIR

    root = tmp_path_factory.mktemp("finished_wandb")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_DATA_DIR", str(root.parent / f"{root.name}_wandb_data"))  # out of $HOME
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[*WANDB_OFFLINE, f"output_root={root}"])
        assert run_cell(cfg, default_sinks(cfg)).status == "done"
    return root


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["wandb_run.json garbled", "summary.json deleted", "rows.jsonl cut"])
def test_a_repaired_cell_keeps_exactly_one_wandb_run(damage, finished_with_wandb, tmp_path, compose_cfg, monkeypatch):
    from lade_bench.runner.sinks import default_sinks

    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb_data"))  # wandb's staging, out of $HOME
    shutil.copytree(finished_with_wandb, tmp_path / "runs")
    cfg = compose_cfg([*WANDB_OFFLINE, f"output_root={tmp_path / 'runs'}"])
    plan = plan_cell(cfg)
    assert len(list((plan.sweep_root / "wandb").glob("offline-run-*"))) == 1  # the finished cell's own run
    name = damage.split()[0]
    {"garbled": lambda p: p.write_text("{not json"), "deleted": os.unlink, "cut": _cut_mid_line}[damage.split()[1]](
        plan.cell_dir / name
    )
    assert run_cell(cfg, default_sinks(cfg)).status == "done"
    offline_runs = sorted((plan.sweep_root / "wandb").glob("offline-run-*"))
    record = json.loads((plan.cell_dir / "wandb_run.json").read_text())
    assert len(offline_runs) == 1 and offline_runs[0].name in record["sync_dir"], (offline_runs, record)
    assert [c.state for c in sweep_progress(plan.sweep_root).cells] == ["done"]


def test_a_garbage_manifest_keeps_the_runs_that_timed_the_rows(copy, finished):
    # The manifest is set aside and written anew; the runs it named must not vanish from the record:
    # every row names its run, so the new manifest carries them over (and says what was lost).
    cfg, plan = copy
    _, rows, _ = finished
    (timed_by,) = set(rows["run_id"])
    (plan.cell_dir / "manifest.json").write_text("[1, 2")
    assert run_cell(cfg, sinks=[FileSink()]).status == "done"
    manifest = json.loads((plan.cell_dir / "manifest.json").read_text())
    (earlier,) = manifest["previous_runs"]
    assert earlier["run"]["run_id"] == timed_by and earlier["rows"] == len(rows)
    assert "manifest.json.damaged" in earlier["recovered_from"]
    assert (plan.cell_dir / "manifest.json.damaged").read_text() == "[1, 2"
