"""The committed tuner outcome (paper_figures/tune/) recomputes from its committed held-out rows.

For each tuned dataset, every held-out record of ``tune_record.json`` (speedups, paired intervals,
prompt lookup, the declared winner) must come out of ``heldout_rows/`` (the archive of the held-out
cells) again through the tuner's own code, ``heldout.csv`` byte for byte and the table of
``heldout.md``; the preset (committed twice: beside the record and in the package) must be the
record's declared winner; the held-out cells ran at one clean commit on one CPU kind, pinned to one
core, with nothing of the suite beside them; every speedup docs/tuning.md and docs/reference_results.md quote for the
tune is one its tables hold.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from lade_bench.report.conditions import cell_processor
from lade_bench.report.table_format import to_markdown
from lade_bench.results import load_rows
from lade_bench.results.archive import cell_manifests
from lade_bench.tune.heldout_archive import recompute_heldout
from lade_bench.tune.outputs import heldout_table, write_heldout_table

from .committed import assert_each_run_timed_alone

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "paper_figures" / "tune"
PACKAGE_PRESETS = REPO / "conf" / "lookahead" / "tuned"
DATASETS = ("mt_bench", "humaneval")


def _record(dataset: str) -> dict:
    return json.loads((FOLDER / dataset / "tune_record.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_heldout_table_recomputes_from_the_committed_rows(dataset, tmp_path):
    record = _record(dataset)
    recomputed = recompute_heldout(record, load_rows(FOLDER / dataset / "heldout_rows"))
    assert recomputed == record["heldout"]
    _, csv = write_heldout_table(tmp_path, recomputed, "", record["winner_rule"])
    assert csv.read_bytes() == (FOLDER / dataset / "heldout.csv").read_bytes()
    md = (FOLDER / dataset / "heldout.md").read_text(encoding="utf-8")
    assert md.endswith(to_markdown(heldout_table(recomputed, record["winner_rule"])))


@pytest.mark.parametrize("dataset", DATASETS)
def test_the_preset_is_the_declared_winner(dataset):
    record = _record(dataset)
    winner = next(h for h in record["heldout"] if h["winner"])
    assert winner["config"] == record["winner"] and winner["rank_in_search"] == 1
    name = f"cpu-smollm2-135m-instruct-{dataset}.yaml"
    beside, packaged = FOLDER / dataset / name, PACKAGE_PRESETS / name
    assert beside.read_text(encoding="utf-8") == packaged.read_text(encoding="utf-8")
    values = yaml.safe_load(packaged.read_text(encoding="utf-8"))
    for key in ("ngram", "window", "guesses", "prompt_as_reference", "verification"):
        assert values[key] == winner[key], key


def test_the_heldout_cells_ran_at_one_clean_commit_on_one_cpu_kind_pinned_to_one_core_and_alone():
    by_dataset = {dataset: list(cell_manifests(FOLDER / dataset / "heldout_rows").values()) for dataset in DATASETS}
    for dataset, cells in by_dataset.items():  # one held-out cell per record, none without its manifest
        assert len(cells) == len(_record(dataset)["heldout"]), dataset
    manifests = [m for cells in by_dataset.values() for m in cells]
    assert {m["git_sha"] for m in manifests} == {manifests[0]["git_sha"]}
    assert not any(m["git_dirty"] for m in manifests)
    assert len({cell_processor(m) for m in manifests}) == 1
    for m in manifests:
        assert_each_run_timed_alone(m, cores=1)


@pytest.mark.parametrize(
    ("document", "heading"),
    [
        ("docs/tuning.md", "## What it found on this CPU"),
        ("docs/reference_results.md", "## What the tuner found on this CPU"),
    ],
)
def test_every_speedup_the_docs_quote_for_the_tune_is_in_its_tables(document, heading):
    text = (REPO / document).read_text(encoding="utf-8")
    section = re.split(r"\n#{1,3} ", text.split(heading, 1)[1], maxsplit=1)[0]
    quoted = set(re.findall(r"\b\d\.\d{3}x", section))
    assert quoted, f"{document}: the section quotes no speedup"
    known = set()
    for dataset in DATASETS:
        known |= set(re.findall(r"\b\d\.\d{3}x", (FOLDER / dataset / "heldout.md").read_text(encoding="utf-8")))
    assert quoted <= known, (document, quoted - known)
