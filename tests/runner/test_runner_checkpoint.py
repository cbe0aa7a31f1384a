"""A sweep carried to a new machine by checkpoint: done cells skipped there, a half-run cell run again whole."""

from __future__ import annotations

import pytest

from lade_bench.checkpoint import main, restore_checkpoint, save_checkpoint
from lade_bench.results import load_rows, read_index
from lade_bench.results.progress import sweep_progress
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.sinks import default_sinks

from .conftest import TINY, interrupt_generation_after

pytestmark = pytest.mark.slow  # three cells with real W&B offline runs

# W&B offline as in a real sweep: a done cell counts as done only with its offline run whole.
CELL = [*TINY, "dataset.limit=2", "warmup=0", "wandb.mode=offline", "wandb.log_figures=false"]
ROWS = 2 * 2 * 2  # 2 questions x 2 turns x 2 arms


def _run(cfg):
    """The cell run as the CLI runs it, with its W&B sink."""
    return run_cell(cfg, default_sinks(cfg))


def test_done_cells_cross_and_the_half_run_cell_runs_again_from_its_start(compose_cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb_data"))  # wandb's staging, out of $HOME
    here, there, saved = tmp_path / "here", tmp_path / "there", tmp_path / "checkpoint"
    done_cfg = compose_cfg([*CELL, "lookahead.window=2", f"output_root={here}"])
    assert _run(done_cfg).status == "done"
    half_cfg = compose_cfg([*CELL, "lookahead.window=3", f"output_root={here}"])
    interrupt_generation_after(monkeypatch, 2, lambda: _run(half_cfg))  # as a kill leaves it
    done_plan, half_plan = plan_cell(done_cfg), plan_cell(half_cfg)
    assert len(load_rows(half_plan.cell_dir)) == 2  # one (question, turn) of both arms was written

    result = save_checkpoint(done_plan.sweep_root, saved)
    assert result.kept == (done_plan.cell_dir.name,)
    assert [line.split(":")[0] for line in result.left_out] == [half_plan.cell_dir.name]
    assert not (saved / half_plan.cell_dir.name).exists()
    assert [e["cell_id"] for e in read_index(saved)] == [done_plan.cell_id]
    assert not (saved / "wandb").exists()  # run outputs stay out of the checkpoint

    sweep_there = there / done_plan.sweep_root.name
    restore_checkpoint(saved, sweep_there)
    with pytest.raises(FileExistsError, match="exists"):
        restore_checkpoint(saved, sweep_there)
    again = _run(compose_cfg([*CELL, "lookahead.window=2", f"output_root={there}"]))
    # Completed from its rows (W&B logged again, no generation): nothing of it runs twice.
    assert (again.status, again.rows_appended) == ("done", 0)
    assert load_rows(sweep_there / done_plan.cell_dir.name).equals(load_rows(done_plan.cell_dir))
    whole = _run(compose_cfg([*CELL, "lookahead.window=3", f"output_root={there}"]))
    assert (whole.status, whole.rows_appended) == ("done", ROWS)  # every row, none resumed across machines
    assert sweep_progress(sweep_there).counts()["done"] == 2

    # Saving again replaces the checkpoint whole: both cells now, no staging folder left beside it.
    result = save_checkpoint(sweep_there, saved)
    assert (len(result.kept), result.left_out) == (2, ())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint", "here", "there", "wandb_data"]


def test_bad_paths_are_refused_by_name(tmp_path, capsys):
    assert main(["save", str(tmp_path / "nowhere"), str(tmp_path / "out")]) == 2
    assert f"no sweep folder with an index.jsonl at {tmp_path / 'nowhere'}" in capsys.readouterr().err
    assert main(["restore", str(tmp_path / "nowhere"), str(tmp_path / "sweep")]) == 2
    assert f"no checkpoint at {tmp_path / 'nowhere'}" in capsys.readouterr().err
