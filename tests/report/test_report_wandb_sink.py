"""The W&B sink in offline mode: the run files read back hold exactly the numbers on disk."""

from __future__ import annotations

import errno
import json

import pytest
import yaml

from lade_bench.report import aggregate
from lade_bench.report.wandb_sink import CellRunInfo, WandbSettings, WandbSink, failure_message, run_name
from lade_bench.results import find_cell_dirs, load_rows

from .wandb_records import read_offline_run


def _cell_dir(sweep_dir, dataset: str):
    for cell in find_cell_dirs(sweep_dir):
        config = yaml.safe_load((cell / "config.yaml").read_text())
        if config["dataset"]["name"] == dataset:
            return cell, config
    raise AssertionError(dataset)


@pytest.fixture(scope="module", autouse=True)
def wandb_staging_in_tmp(tmp_path_factory):
    """wandb stages logged tables under ~/.local/share/wandb unless told otherwise; keep tests out of $HOME."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("WANDB_DATA_DIR", str(tmp_path_factory.mktemp("wandb_data")))
        yield


@pytest.fixture(scope="module")
def logged(sweep_dir, tmp_path_factory):
    """One offline run of the toy_code cell (three arms, repeats, an errored sample)."""
    cell_dir, config = _cell_dir(sweep_dir, "toy_code")
    out = tmp_path_factory.mktemp("wandb")
    rows = load_rows(cell_dir)
    figures_dir = out / "cell"
    # Figures are written into the cell folder; use a copy so the shared sweep stays read-only.
    figures_dir.mkdir()
    (figures_dir / "manifest.json").write_text((cell_dir / "manifest.json").read_text())
    sink = WandbSink(WandbSettings(mode="offline", project="lade-bench-test", dir=str(out), n_boot=500))
    summary = json.loads((cell_dir / "summary.json").read_text())
    info = sink.log_cell(config, summary, rows, figures_dir)
    return info, read_offline_run(info.sync_dir), rows, cell_dir


def test_offline_run_files_exist_and_identify_the_cell(logged):
    info, run, rows, _ = logged
    assert isinstance(info, CellRunInfo) and info.exit_code == 0
    assert info.sync_dir.name.startswith("offline-run-") and info.sync_dir.is_dir()
    assert run.run_id == info.run_id and run.project == "lade-bench-test"
    assert run.group == "unit_report" and run.job_type == "cell"
    assert run.name == info.name and run.name.startswith("tiny-llama | toy_code | N3 W3 G3 | greedy | ")
    assert set(run.tags) >= {"toy_code", "tiny-llama"}
    assert run.exit_code == 0


def test_logged_config_is_the_resolved_config(logged):
    _, run, rows, cell_dir = logged
    config = yaml.safe_load((cell_dir / "config.yaml").read_text())
    for key, value in config.items():
        assert run.config[key] == value
    assert run.config["cell_id"] == rows["cell_id"].iloc[0]
    assert run.config["manifest"]["device"] == "cpu"


def test_logged_summary_equals_the_results_on_disk(logged):
    _, run, _, cell_dir = logged
    rows = load_rows(cell_dir)  # what is on disk, read afresh
    # every arm on the keys where all three arms succeeded (lookahead failed on the error sample)
    good = rows[rows["error"].isna()].set_index(["sample_id", "turn", "repeat"])
    arms_per_key = good.groupby(level=[0, 1, 2])["arm"].nunique()
    good = good[good.index.isin(arms_per_key[arms_per_key == 3].index)]
    for arm in ("lookahead", "prompt_lookup"):
        ar = good[good["arm"] == "ar"]["wall_time_s"]
        other = good[good["arm"] == arm]["wall_time_s"]
        assert run.summary[f"{arm}/speedup"] == pytest.approx(ar.sum() / other.sum(), rel=1e-12)
        arm_rows = good[good["arm"] == arm]
        assert run.summary[f"{arm}/compression_ratio"] == pytest.approx(
            arm_rows["new_tokens"].sum() / arm_rows["decode_steps"].sum(), rel=1e-12
        )
        assert run.summary[f"{arm}/tokens_per_s"] == pytest.approx(
            arm_rows["new_tokens"].sum() / arm_rows["wall_time_s"].sum(), rel=1e-12
        )
        assert run.summary[f"{arm}/matches_ar"] == 1.0
        # two samples: no interval logged, and the run says why
        assert f"{arm}/speedup_ci_low" not in run.summary
        assert run.summary[f"{arm}/speedup_ci_note"] == "no interval: 2 samples (< 10)"
        assert run.summary[f"{arm}/speedup_basis"] == "wall time"
        assert run.summary[f"{arm}/n_units"] == 2 and run.summary[f"{arm}/n_pairs"] == 4
    assert run.summary["lookahead/n_errors"] == 2
    # every logged metric is the shared aggregate of the rows on disk, value for value
    summary = aggregate.summarize(rows, n_boot=500)
    expected = {**aggregate.flat_metrics(summary), **aggregate.flat_notes(summary)}
    logged_metrics = {
        k: v for k, v in run.summary.items() if "/" in k and not k.startswith(("_", "samples", "figures"))
    }
    assert logged_metrics.keys() == expected.keys()
    for key, value in expected.items():
        if isinstance(value, str):
            assert logged_metrics[key] == value, key
        else:
            assert logged_metrics[key] == pytest.approx(value, rel=1e-12), key
    assert run.summary["status"] == "done" and run.summary["n_rows"] == len(rows)


def test_per_sample_table_and_figures_are_logged(logged):
    info, run, rows, _ = logged
    logged_keys = set().union(*(h.keys() for h in run.history))
    assert "samples/nrows" in logged_keys or any(k.startswith("samples/") for k in logged_keys)
    tables = list((info.sync_dir / "files" / "media" / "table").glob("samples_*.table.json"))
    assert len(tables) == 1
    table = json.loads(tables[0].read_text())
    assert len(table["data"]) == len(rows) and table["columns"] == list(rows.columns)
    first = dict(zip(table["columns"], table["data"][0], strict=True))
    assert first["accept_lengths"] == " ".join(str(v) for v in rows["accept_lengths"].iloc[0])
    images = list((info.sync_dir / "files" / "media" / "images").rglob("*.png"))
    assert len(images) == 2
    assert any(k.startswith("figures/speedup_bars") for k in logged_keys)


def test_failed_cell_still_closes_the_run_with_exit_code_1(sweep_dir, tmp_path):
    _, config = _cell_dir(sweep_dir, "toy_code")
    sink = WandbSink(WandbSettings(mode="offline", project="p", dir=str(tmp_path)))
    empty = load_rows(find_cell_dirs(sweep_dir)[0]).iloc[0:0]
    info = sink.log_cell(
        {**config, "cell_id": "deadbeefdeadbeef"}, {"status": "failed", "error": "OOM"}, empty, tmp_path / "c"
    )
    run = read_offline_run(info.sync_dir)
    assert info.exit_code == 1 and run.exit_code == 1
    assert run.summary["status"] == "failed" and run.summary["error"] == "OOM"
    # named from the config, as no row exists
    assert run.name == "tiny-llama | toy_code | N3 W3 G3 | greedy | deadbe" and run.group == "unit_report"


def test_error_while_logging_closes_the_run_and_propagates(sweep_dir, tmp_path):
    cell_dir, config = _cell_dir(sweep_dir, "toy_sum")
    rows = load_rows(cell_dir)
    rows.loc[rows["arm"] == "ar", "wall_time_s"] = -1.0  # impossible timing: the aggregate refuses it
    sink = WandbSink(WandbSettings(mode="offline", project="p", dir=str(tmp_path), log_figures=False))
    with pytest.raises(ValueError, match="not positive"):
        sink(config, {"status": "done"}, rows, tmp_path / "c")
    (run_dir,) = list((tmp_path / "wandb").glob("offline-run-*"))
    assert read_offline_run(run_dir).exit_code == 1


def test_a_write_error_naming_no_file_names_the_w_and_b_run_folder(sweep_dir, tmp_path, monkeypatch):
    # W&B's own writes (its run files, its debug log closing on a full disk) raise OSErrors naming no file;
    # the runner's one line must still say where the space ran out. The fault is injected while the run logs.
    from lade_bench.report import wandb_sink
    from lade_bench.results.atomic import WriteFailed
    from lade_bench.runner.job import describe_write_error

    def full_disk(rows):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(wandb_sink, "samples_table_frame", full_disk)
    cell_dir, config = _cell_dir(sweep_dir, "toy_sum")
    sink = WandbSink(WandbSettings(mode="offline", project="p", dir=str(tmp_path), log_figures=False))
    with pytest.raises(WriteFailed) as raised:
        sink(config, {"status": "done"}, load_rows(cell_dir), tmp_path / "c")
    (run_dir,) = list((tmp_path / "wandb").glob("offline-run-*"))
    assert raised.value.filename == str(run_dir)
    assert read_offline_run(run_dir).exit_code == 1
    line = describe_write_error(raised.value)
    assert line.startswith(f"cannot write {run_dir}: No space left on device (") and " free)" in line, line


def test_disabled_mode_writes_nothing(sweep_dir, tmp_path):
    cell_dir, config = _cell_dir(sweep_dir, "toy_sum")
    sink = WandbSink(WandbSettings(mode="disabled", dir=str(tmp_path), log_figures=False))
    info = sink.log_cell(config, {}, load_rows(cell_dir), tmp_path / "c")
    assert info.exit_code == 0 and info.sync_dir is None
    assert not (tmp_path / "wandb").exists()


def test_sync_command_is_logged(sweep_dir, tmp_path, caplog):
    cell_dir, config = _cell_dir(sweep_dir, "toy_sum")
    sink = WandbSink(WandbSettings(mode="offline", dir=str(tmp_path), log_figures=False, log_table=False))
    with caplog.at_level("INFO", logger="lade_bench.report.wandb_sink"):
        info = sink.log_cell(config, {}, load_rows(cell_dir), tmp_path / "c")
    assert f"wandb sync {info.sync_dir}" in caplog.text


def test_settings_validation():
    with pytest.raises(ValueError, match="mode"):
        WandbSettings(mode="sometimes")
    with pytest.raises(ValueError, match="unknown wandb setting"):
        WandbSettings.from_config({"mode": "offline", "projekt": "x"})
    settings = WandbSettings.from_config({"mode": "online", "tags": ["a"], "entity": None})
    assert settings.tags == ("a",) and settings.mode == "online"


def test_run_name_and_failure_message():
    attributes = {
        "cell_id": "0123456789abcdef",
        "model": "m",
        "dataset": "d",
        "ngram": 5,
        "window": 7,
        "guesses": 7,
        "prompt_as_reference": False,
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": 0,
    }
    assert run_name(attributes) == "m | d | N5 W7 G7 noref | T=0.7 p=1 k=0 | 012345"
    assert failure_message({"status": "done"}) is None
    assert failure_message({"status": "failed"}) == "cell failed"
    assert failure_message({"error": "boom"}) == "boom"
