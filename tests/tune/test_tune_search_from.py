"""An earlier search reused (``tune.search_from``) and a tune's held-out cells archived and recomputed.

One real tiny tune serves the module; a second tune validates its search again without searching,
and its held-out cells are archived (``lade_bench.tune.heldout_archive``) and recomputed from the
archive alone.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from lade_bench.results import load_rows
from lade_bench.tune.config import TuneConfigError
from lade_bench.tune.heldout_archive import archive_heldout, main, read_record, recompute_heldout
from lade_bench.tune.search import STUDY_DB
from lade_bench.tune.tuner import prepare, run_tune

from .conftest import TINY_TUNE, compose_tune, tmp_outputs

pytestmark = pytest.mark.slow

TRIALS = 3


def _overrides(root: Path, name: str, *extra: str) -> list[str]:
    return [
        *TINY_TUNE,
        *tmp_outputs(root),
        f"tune.trials={TRIALS}",
        f"tune.name={name}",
        f"tune.preset_name={name}",
        "tune.prune=false",
        *extra,
    ]


def _preset_values(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tunes(tmp_path_factory):
    """A searched tune, then a tune reusing its search (validation only)."""
    root = tmp_path_factory.mktemp("search_from")
    first = run_tune(compose_tune(_overrides(root, "searched")))
    source = first.record
    again = run_tune(compose_tune(_overrides(root, "revalidated", f"tune.search_from={first.tune_dir}")))
    return {"root": root, "first": first, "again": again, "source_bytes": source.read_bytes()}


def test_reused_search_runs_no_search_and_keeps_the_declared_top_k_and_winner(tunes):
    first, again = tunes["first"], tunes["again"]
    assert (first.tune_dir / STUDY_DB).is_file()
    assert not (again.tune_dir / STUDY_DB).exists()  # no study: nothing was searched
    searched, revalidated = read_record(first.tune_dir), read_record(again.tune_dir)
    assert revalidated["configurations"] == searched["configurations"]
    assert revalidated["search"] == searched["search"]
    assert revalidated["profile"] == searched["profile"]
    reuse = revalidated["search_from"]
    assert reuse["record"] == str(first.record.resolve())
    assert reuse["sha256"] == hashlib.sha256(tunes["source_bytes"]).hexdigest()

    def ranked(record):
        return [
            (h["config"], h["rank_in_search"], h["probe_speedup"]) for h in record["heldout"] if h["reference"] is None
        ]

    assert ranked(revalidated) == ranked(searched)
    assert again.winner == first.winner == searched["winner"]
    assert _preset_values(again.preset) == _preset_values(first.preset)
    # The table and the preset say the search was reused; the searched tune's do not.
    assert "only the held-out validation ran in this tune" in again.table.read_text()
    assert "reused: tune.search_from" in again.preset.read_text()
    assert "reused" not in first.table.read_text() + first.preset.read_text()
    # The held-out cells ran again in the new folder: every held-out sample of every arm.
    for rec in revalidated["heldout"]:
        cell = Path(rec["cell_dir"])
        assert cell.parent == again.tune_dir
        rows = load_rows(cell)
        assert set(rows["sample_id"].astype(str)) == set(revalidated["heldout_sample_ids"])


def test_a_search_made_for_another_tune_is_refused_naming_what_differs(tunes):
    first, root = tunes["first"], tunes["root"]
    other_space = _overrides(root, "other", f"tune.search_from={first.tune_dir}", "tune.space.guesses=[1,2,3]")
    with pytest.raises(TuneConfigError, match=r"another tune \(space: searched with .*'guesses': \[1, 2\]"):
        prepare(compose_tune(other_space))  # before the model loads
    other_samples = _overrides(root, "other", f"tune.search_from={first.tune_dir}", "tune.probe_samples=3")
    with pytest.raises(TuneConfigError, match=r"probe_sample_ids: searched with"):
        run_tune(compose_tune(other_samples))


def test_a_record_without_a_finished_search_is_refused(tunes, tmp_path):
    (tmp_path / "empty").mkdir()
    cfg = compose_tune(_overrides(tunes["root"], "x", f"tune.search_from={tmp_path / 'empty'}"))
    with pytest.raises(TuneConfigError, match=r"no tune_record.json there"):
        prepare(cfg)
    partial = tmp_path / "partial.json"
    record = json.loads(tunes["source_bytes"])
    del record["stopped"]
    partial.write_text(json.dumps(record))
    with pytest.raises(TuneConfigError, match=r"lacks \['stopped'\]"):
        prepare(compose_tune(_overrides(tunes["root"], "x", f"tune.search_from={partial}")))


def test_archived_heldout_rows_recompute_the_record_exactly(tunes, tmp_path):
    tune_dir = tunes["again"].tune_dir
    record = read_record(tune_dir)
    out = tmp_path / "heldout_rows"
    result = archive_heldout(tune_dir, out)
    assert result.n_cells == len(record["heldout"])
    rows = load_rows(out)  # the archive alone: the tune folder is not read
    assert len(rows) == result.n_rows
    assert recompute_heldout(record, rows) == record["heldout"]
    # The recomputation reads the rows: one AR time changed in a copy of the archive is seen.
    tampered = tmp_path / "tampered"
    shutil.copytree(out, tampered)
    table = pq.read_table(tampered / "rows.parquet")
    times = table.column("wall_time_s").to_pylist()
    first_ar = table.column("arm").to_pylist().index("ar")
    times[first_ar] *= 3
    column = table.schema.get_field_index("wall_time_s")
    pq.write_table(
        table.set_column(column, table.schema.field(column), pa.array(times, pa.float64())), tampered / "rows.parquet"
    )
    assert recompute_heldout(record, load_rows(tampered)) != record["heldout"]


def test_archive_refuses_rows_that_no_longer_match_or_miss_a_sample(tunes, tmp_path, capsys):
    source = tunes["first"].tune_dir
    assert main([str(source), str(source / "inside")]) == 2
    assert "lies inside the tune folder" in capsys.readouterr().err
    copy = tmp_path / "copy"
    shutil.copytree(source, copy)
    record = read_record(copy)
    cell = copy / Path(record["heldout"][0]["cell_dir"]).name
    rows = pq.read_table(cell / "rows.parquet")
    dropped = str(record["heldout_sample_ids"][0])
    keep = [str(s) != dropped for s in rows.column("sample_id").to_pylist()]
    pq.write_table(rows.filter(keep), cell / "rows.parquet")
    with pytest.raises(ValueError, match=rf"has no row for sample\(s\) \['{dropped}'\]"):
        archive_heldout(copy, tmp_path / "out")


def test_a_resumed_tune_keeps_the_provenance_of_the_runs_that_timed_its_heldout_rows(tunes, tmp_path):
    """Rerun after a kill: a held-out cell with every row keeps its manifest as it was; a cell that lost
    its last row runs that row again and keeps the earlier run under ``previous_runs``."""
    overrides = _overrides(tmp_path, "resumed", f"tune.search_from={tunes['first'].tune_dir}")
    first = run_tune(compose_tune(overrides))
    cells = sorted(path.parent for path in first.tune_dir.glob("*/manifest.json"))
    assert len(cells) >= 2
    before = {cell: (cell / "manifest.json").read_bytes() for cell in cells}
    cut = cells[0] / "rows.jsonl"
    lines = cut.read_text(encoding="utf-8").splitlines(keepends=True)
    cut.write_text("".join(lines[:-1]), encoding="utf-8")  # a kill before the last row was committed

    run_tune(compose_tune(overrides))
    for cell in cells[1:]:
        assert (cell / "manifest.json").read_bytes() == before[cell], cell.name
    resumed = json.loads((cells[0] / "manifest.json").read_text(encoding="utf-8"))
    earlier = json.loads(before[cells[0]])
    assert earlier.pop("previous_runs") == []  # the first run had none
    assert resumed["previous_runs"] == [earlier]
    assert len(cut.read_text(encoding="utf-8").splitlines()) == len(lines)
