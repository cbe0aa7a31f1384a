"""SAM-Decoding in the plan: bad settings refused before anything loads, naming them; its section
binds only its own cells; a backend without custom masks refused for its fallback tree; the optional
static corpus (a REST datastore) refused as REST refuses one (missing, another tokenizer, a scored
dataset's answers in it), named in the cell id by content, and absent from the id when not set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lade_bench.bench import resolved_bench_settings
from lade_bench.models.embedded import converted_smollm2_dir
from lade_bench.rest_datastore.build import datastore_folder, write_datastore
from lade_bench.rest_datastore.cli import main as datastore_command
from lade_bench.rest_datastore.reader import REFERENCE
from lade_bench.runner import plan_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import TINY


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["sam_decoding.n_predicts=1"], "sam_decoding.n_predicts=1 is not allowed: use an integer >= 2"),
        (["sam_decoding.len_threshold=0"], "sam_decoding.len_threshold=0 is not allowed: use an integer >= 1"),
        (["sam_decoding.tree=2.2.3"], r"sam_decoding.tree='2.2.3' is not a known template"),
        (["sam_decoding.tree=[[0],[9]]"], r"sam_decoding.tree node 1 \[9\]: rank 9 is not in \[0, top_k=8\)"),
        (["attn_implementation=flash_attention_2"], "flash_attention_2"),
    ],
)
def test_bad_settings_are_refused_in_the_plan_naming_them(compose_cfg, overrides, message):
    with pytest.raises(CellConfigError, match=message):
        plan_cell(compose_cfg([*TINY, "arms=[ar,sam_decoding]", *overrides]))


def test_its_section_binds_only_its_cells_and_a_tree_of_token_recycling_is_allowed(compose_cfg):
    other = plan_cell(compose_cfg([*TINY, "arms=[ar,lookahead]", "sam_decoding.n_predicts=1"]))
    assert "sam_decoding" not in other.arms
    mine = plan_cell(compose_cfg([*TINY, "arms=[ar,sam_decoding]", "sam_decoding.tree=2.2.2"]))
    assert mine.arms == ("ar", "sam_decoding")


# ---- The optional static corpus: a REST datastore, refused and named in the cell id by REST's code ----

SAM = [*TINY, "arms=[ar,sam_decoding]"]
STATIC = "sam_decoding.static_datastore"


def _datastore(folder: Path, name: str, tokens: list[int], **kwargs) -> Path:
    """A tiny datastore for the tiny models' tokenizer (the embedded SmolLM2's)."""
    kwargs = {"tokenizer": "embedded:smollm2", "vocab_size": 49_152, **kwargs}
    return write_datastore(folder / name, [tokens], **kwargs)


def test_without_a_static_corpus_the_cell_id_is_the_one_before_the_option(compose_cfg):
    plan = plan_cell(compose_cfg(SAM))
    # The section hashed as before the option existed, so cells recorded then keep their ids ...
    assert sorted(plan.semantic["sam_decoding"]) == ["len_threshold", "n_predicts", "top_k", "tree"]
    # ... and len_bias, which changes nothing without a static corpus, splits no cell.
    assert plan_cell(compose_cfg([*SAM, "sam_decoding.len_bias=9"])).cell_id == plan.cell_id


def test_a_static_corpus_is_named_in_the_cell_id_by_content(compose_cfg, tmp_path):
    """Exactness and acceptance with a static corpus: tests/decoding/test_sam_decoding.py."""
    corpus = _datastore(tmp_path, "corpus", list(range(5, 60)))
    plan = plan_cell(compose_cfg([*SAM, f"{STATIC}={corpus}"]))
    content = json.loads((corpus / "manifest.json").read_text())["content_hash"]
    assert plan.semantic["sam_decoding"][STATIC.split(".")[1]] == f"sha256:{content}"
    assert plan.semantic["sam_decoding"]["len_bias"] == 5
    assert plan_cell(compose_cfg([*SAM, f"{STATIC}={corpus}", "sam_decoding.len_bias=9"])).cell_id != plan.cell_id
    moved = corpus.rename(tmp_path / "moved")
    assert plan_cell(compose_cfg([*SAM, f"{STATIC}={moved}"])).cell_id == plan.cell_id
    other = _datastore(tmp_path, "other", [5, 6, 7])
    assert plan_cell(compose_cfg([*SAM, f"{STATIC}={other}"])).cell_id != plan.cell_id
    assert plan_cell(compose_cfg(SAM)).cell_id != plan.cell_id


def test_a_missing_static_corpus_or_one_of_another_tokenizer_is_refused_before_the_model_loads(compose_cfg, tmp_path):
    with pytest.raises(CellConfigError, match=f"{STATIC}='/nonexistent/ds': no REST datastore at /nonexistent/ds"):
        plan_cell(compose_cfg([*SAM, f"{STATIC}=/nonexistent/ds"]))
    gemma = _datastore(tmp_path, "gemma", [70_000, 5], tokenizer="embedded:gemma3_270m", vocab_size=262_144)
    with pytest.raises(
        CellConfigError, match=f"{STATIC}='{gemma}' was built with the tokenizer 'embedded:gemma3_270m'"
    ):
        plan_cell(compose_cfg([*SAM, f"{STATIC}={gemma}"]))
    with pytest.raises(CellConfigError, match="sam_decoding.len_bias=-1 is not allowed: use an integer >= 0"):
        plan_cell(compose_cfg([*SAM, "sam_decoding.len_bias=-1"]))


def test_the_word_reference_names_rests_reference_datastore_of_the_cells_tokenizer(compose_cfg, tmp_path):
    """``static_datastore=reference`` resolves (in the plan, by REST's resolver) to ``<model_cache_dir>/
    rest_datastores/<tokenizer>/reference``: refused with the build command until built, then the same cell
    as naming that folder by path."""
    (tmp_path / "smollm2-135m-instruct").symlink_to(converted_smollm2_dir())  # the tokenizer, not converted again
    cell = [*SAM, f"model_cache_dir={tmp_path}", f"{STATIC}={REFERENCE}"]
    command = f"python -m lade_bench.rest_datastore build --reference --model smollm2 --cache-dir {tmp_path}"
    not_built = f"{STATIC}='reference': the reference datastore for embedded:smollm2 is not built .*{command}"
    with pytest.raises(CellConfigError, match=not_built):
        plan_cell(compose_cfg(cell))
    bench_settings = {"sam_decoding": {"static_datastore": REFERENCE}}
    with pytest.raises(ValueError, match=f"--methods sam_decoding: {not_built}"):
        resolved_bench_settings(["ar", "sam_decoding"], bench_settings, str(tmp_path), "cpu", False)
    folder = _datastore(datastore_folder(tmp_path, "embedded:smollm2", REFERENCE).parent, REFERENCE, list(range(5, 60)))
    plan = plan_cell(compose_cfg(cell))
    assert plan.settings["sam_decoding"].static_datastore == plan.cfg.sam_decoding.static_datastore == str(folder)
    by_path = plan_cell(compose_cfg([*SAM, f"model_cache_dir={tmp_path}", f"{STATIC}={folder}"]))
    assert plan.cell_id == by_path.cell_id
    assert plan.cell_id != plan_cell(compose_cfg([*SAM, f"model_cache_dir={tmp_path}"])).cell_id
    bench = resolved_bench_settings(["ar", "sam_decoding"], bench_settings, str(tmp_path), "cpu", False)
    assert bench["sam_decoding"]["static_datastore"] == str(folder)
    # A Gemma-3 cell's reference is its own tokenizer's folder, not built here.
    with pytest.raises(CellConfigError, match=f"{STATIC}='reference': .*build --reference --model gemma3_270m"):
        plan_cell(compose_cfg([*cell, "model=gemma3_270m"]))


def test_a_static_corpus_holding_gsm8k_answers_is_refused_for_gsm8k(compose_cfg, tmp_path, shared_data_dir):
    gsm8k = shared_data_dir / "gsm8k" / "test.jsonl"
    records = tmp_path / "records.jsonl"  # 20 real records, tokenized by the command as the drafter reads them
    records.write_text("".join(gsm8k.read_text().splitlines(keepends=True)[:20]))

    def build(field: str) -> Path:
        out = tmp_path / field
        argv = ["build", "--model", "tiny_llama", "--corpus", str(records), "--text-field", field, "--out", str(out)]
        assert datastore_command(argv) == 0
        return out

    answers, questions = build("answer"), build("question")
    cell = [*SAM, "dataset=gsm8k", f"dataset.path={gsm8k}"]
    with pytest.raises(CellConfigError, match=rf"{STATIC}='{answers}' holds reference answers of 20 of 1319 gsm8k"):
        plan_cell(compose_cfg([*cell, f"{STATIC}={answers}"]))
    assert plan_cell(compose_cfg([*cell, f"{STATIC}={questions}"])).arms == ("ar", "sam_decoding")
