"""REST in a real cell and its plan checks: the datastore named in the cell id, refused when missing, of
another tokenizer, or holding the scored dataset's reference answers (a real GSM8K file)."""

from __future__ import annotations

import json
import sysconfig
from pathlib import Path

import pytest

from lade_bench.bench import resolved_bench_settings
from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.rest_datastore.build import datastore_folder, write_datastore
from lade_bench.rest_datastore.cli import main as datastore_command
from lade_bench.rest_datastore.reader import REFERENCE
from lade_bench.rest_datastore.reference import ensure_reference_datastore, reference_corpus
from lade_bench.results import load_rows
from lade_bench.runner import plan_cell, run_cell
from lade_bench.runner.console import console_summary_sink
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY, console_states

REST = [*TINY, "arms=[ar,rest]"]


def _build(tmp_path: Path, name: str, corpus: list[Path], *extra: str) -> Path:
    """A datastore built by the command, for the tiny models' (SmolLM2's) tokenizer."""
    out = tmp_path / name
    assert (
        datastore_command(["build", "--model", "tiny_llama", "--corpus", *map(str, corpus), "--out", str(out), *extra])
        == 0
    )
    return out


@pytest.fixture(scope="module")
def stdlib_datastore(tmp_path_factory) -> Path:
    """Two modules of Python's own standard library: the reference corpus docs/rest.md names."""
    stdlib = Path(sysconfig.get_path("stdlib"))
    return _build(tmp_path_factory.mktemp("rest"), "stdlib", [stdlib / "textwrap.py", stdlib / "heapq.py"])


def test_a_cell_matches_ar_and_its_datastore_is_named_by_content_in_the_cell_id(
    compose_cfg, tmp_path, stdlib_datastore, capsys
):
    cfg = compose_cfg(
        [*REST, "dataset.limit=1", "warmup=0", f"rest.datastore={stdlib_datastore}", f"output_root={tmp_path}"]
    )
    outcome = run_cell(cfg, sinks=[console_summary_sink])
    # The end-of-run table: the datastore is carried across requests but none changes it, so not "warm".
    assert console_states(capsys.readouterr().out) == {"ar": "-", "rest": "static"}
    rows = load_rows(outcome.cell_dir)
    assert rows["error"].isna().all() and rows[rows["arm"] == "rest"]["matches_ar"].all()
    rest = rows[rows["arm"] == "rest"]
    assert (rest["state_size"] == json.loads((stdlib_datastore / "manifest.json").read_text())["tokens"]).all()
    # The same datastore moved elsewhere keeps the cell; another datastore makes another cell.
    moved = tmp_path / "moved"
    stdlib_datastore.rename(moved)
    try:
        same = plan_cell(compose_cfg([*REST, f"rest.datastore={moved}"])).cell_id
        other = write_datastore(tmp_path / "other", [[5, 6, 7]], tokenizer="embedded:smollm2", vocab_size=49_152)
        different = plan_cell(compose_cfg([*REST, f"rest.datastore={other}"])).cell_id
    finally:
        moved.rename(stdlib_datastore)
    assert same == plan_cell(compose_cfg([*REST, f"rest.datastore={stdlib_datastore}"])).cell_id
    assert different != same


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["rest.datastore=null"],
            "rest.datastore is not set: REST drafts from a datastore; build one with python -m lade_bench.rest_",
        ),
        (["rest.datastore=/nonexistent/ds"], "no REST datastore at /nonexistent/ds; build one with"),
        (["rest.num_draft=0"], "rest.num_draft=0 is not allowed: use an integer >= 1"),
        (
            ["rest.tree_budget=widest"],
            "rest.tree_budget='widest' is not allowed: use cut_to_choices .* or most_frequent_nodes",
        ),
        (["rest.no_match_guess=-1"], r"rest.no_match_guess=-1 is not allowed: use a token id >= 0 .* or null"),
        (
            ["attn_implementation=flash_attention_2", "rest.datastore=/nonexistent/ds"],
            r"'flash_attention_2' cannot take the custom attention mask the \['rest'\] arm\(s\) need",
        ),
    ],
)
def test_bad_settings_are_refused_in_the_plan_naming_them(compose_cfg, overrides, message):
    with pytest.raises(CellConfigError, match=message):
        plan_cell(compose_cfg([*REST, *overrides]))


def test_a_datastore_of_another_tokenizer_is_refused_before_the_model_loads(compose_cfg, tmp_path):
    gemma = write_datastore(tmp_path / "gemma", [[70_000, 5]], tokenizer="embedded:gemma3_270m", vocab_size=262_144)
    with pytest.raises(
        CellConfigError, match=f"rest.datastore='{gemma}' was built with the tokenizer 'embedded:gemma3_270m'"
    ):
        plan_cell(compose_cfg([*REST, f"rest.datastore={gemma}"]))


def test_a_datastore_holding_gsm8k_answers_is_refused_for_gsm8k_and_a_clean_one_is_not(
    compose_cfg, tmp_path, shared_data_dir, stdlib_datastore
):
    gsm8k = shared_data_dir / "gsm8k" / "test.jsonl"
    leaked = tmp_path / "answers.jsonl"  # a real file: 20 GSM8K test records, worked answers included
    leaked.write_text("".join(gsm8k.read_text().splitlines(keepends=True)[:20]))
    answers = _build(tmp_path, "answers", [leaked], "--text-field", "answer")
    gsm8k_cell = [*REST, "dataset=gsm8k", f"dataset.path={gsm8k}"]
    with pytest.raises(CellConfigError, match=r"holds reference answers of 20 of 1319 gsm8k samples .*e\.g\. ids"):
        plan_cell(compose_cfg([*gsm8k_cell, f"rest.datastore={answers}"]))
    # The questions alone are what the model is shown, not what it is scored on: no leak.
    questions = _build(tmp_path, "questions", [leaked], "--text-field", "question")
    assert plan_cell(compose_cfg([*gsm8k_cell, f"rest.datastore={questions}"])).arms == ("ar", "rest")
    assert plan_cell(compose_cfg([*gsm8k_cell, f"rest.datastore={stdlib_datastore}"])).arms == ("ar", "rest")
    # An unscored dataset (MT-Bench, judged) has no answers to leak.
    assert plan_cell(compose_cfg([*REST, f"rest.datastore={answers}"])).arms == ("ar", "rest")


def test_the_reference_corpus_leaves_out_configparser_whose_code_classeval_scores(
    compose_cfg, tmp_path, shared_data_dir
):
    """docs/rest.md's reference corpus drops stdlib's configparser.py: the check flags ClassEval_18 there."""
    classeval = shared_data_dir / "classeval" / "ClassEval_data.json"
    flagged = _build(tmp_path, "configparser", [Path(sysconfig.get_path("stdlib")) / "configparser.py"])
    with pytest.raises(CellConfigError, match=r"holds reference answers of 1 of 100 classeval samples .*ClassEval_18"):
        plan_cell(compose_cfg([*REST, "dataset=classeval", f"dataset.path={classeval}", f"rest.datastore={flagged}"]))


def test_the_default_names_the_reference_datastore_of_the_cells_tokenizer_in_the_model_cache(compose_cfg, tmp_path):
    """``rest.datastore: reference`` resolves (in the plan) to ``<model_cache_dir>/rest_datastores/<tokenizer>/
    reference``: recorded, refused and run as that folder, and the same cell as naming the folder itself."""
    (tmp_path / "smollm2-135m-instruct").symlink_to(converted_smollm2_dir())  # the tokenizer, not converted again
    missing = [*REST, f"model_cache_dir={tmp_path}"]
    command = f"python -m lade_bench.rest_datastore build --reference --model smollm2 --cache-dir {tmp_path}"
    with pytest.raises(CellConfigError, match=f"reference datastore for embedded:smollm2 is not built .*{command}"):
        plan_cell(compose_cfg(missing))
    with pytest.raises(ValueError, match=f"--methods rest: .*{command}"):  # bench, before its model loads
        resolved_bench_settings(["ar", "rest"], {}, str(tmp_path), "cpu", False)
    folder = write_datastore(
        datastore_folder(tmp_path, "embedded:smollm2", REFERENCE),
        [[5, 6, 7]],
        tokenizer="embedded:smollm2",
        vocab_size=49_152,
    )
    plan = plan_cell(compose_cfg(missing))
    assert plan.settings["rest"].datastore == plan.cfg.rest.datastore == str(folder)
    assert plan.cell_id == plan_cell(compose_cfg([*REST, f"rest.datastore={folder}"])).cell_id
    assert resolved_bench_settings(["ar", "rest"], {}, str(tmp_path), "cpu", False)["rest"]["datastore"] == str(folder)
    # A Gemma-3 cell's reference is another folder (its tokenizer's), not built here.
    with pytest.raises(CellConfigError, match="build --reference --model gemma3_270m"):
        plan_cell(compose_cfg([*missing, "model=gemma3_270m"]))


def test_the_reference_build_is_skipped_when_built_from_the_same_files(tmp_path):
    """What scripts/setup.sh runs (``build --reference``), on a small corpus: built once, kept while its
    files are unchanged, rebuilt when one changes."""
    corpus = reference_corpus()
    assert {"textwrap.py", "heapq.py"} <= {f.name for f in corpus} and "configparser.py" not in {f.name for f in corpus}
    assert all(f.parent == Path(sysconfig.get_path("stdlib")) for f in corpus)
    (tmp_path / "smollm2-135m-instruct").symlink_to(converted_smollm2_dir())  # the tokenizer, not converted again
    small = [tmp_path / "a.py", tmp_path / "b.txt"]
    small[0].write_text("def add(a, b):\n    return a + b\n")
    small[1].write_text("The quick brown fox jumps over the lazy dog.\n")
    folder, built = ensure_reference_datastore("smollm2", tmp_path, small)
    assert built and folder == datastore_folder(tmp_path, "embedded:smollm2", REFERENCE)
    stamp = (folder / "manifest.json").stat().st_mtime_ns
    assert ensure_reference_datastore("smollm2", tmp_path, small) == (folder, False)
    assert (folder / "manifest.json").stat().st_mtime_ns == stamp
    small[1].write_text("Another text.\n")
    assert ensure_reference_datastore("smollm2", tmp_path, small) == (folder, True)
