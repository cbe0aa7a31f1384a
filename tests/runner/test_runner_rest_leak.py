"""REST's leak check reads the datastore as the drafter does: one token stream, across record boundaries.

Each datastore here is built by the real command from real files (GSM8K's test answers, Spec-Bench's and
MT-Bench's questions, the committed SmolLM2 outputs on GSM8K in paper_figures/rows/main) and is refused
by ``check`` and by the plan, before any model loads: the answers cut into records of at most 12 words,
the same with a record of other text between the pieces, the model's own outputs cut the same way (given
the outputs), a verbatim store whose n-gram file was emptied, Spec-Bench references of every kind and the
prompts of unscored questions.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from lade_bench.rest_datastore.cli import main as datastore_command
from lade_bench.results import load_rows, read_index
from lade_bench.runner import plan_cell
from lade_bench.runner.plan import CellConfigError

from .conftest import REPO, TINY

REST = [*TINY, "arms=[ar,rest]"]
# The committed rows of the main sweep: SmolLM2's outputs on the first 20 GSM8K test questions among them.
COMMITTED_ROWS = REPO / "paper_figures" / "rows" / "main"
ANSWERS = 40  # GSM8K test answers in the piece-cut stores
# All but one of them still show a 16-token span with a word after the cut. Answer 26 ("3 * (16.50 + 22.50 + 42)
# = $<<...>>243\nMishka spent $243 on clothing.") does not: its only words follow a line break, and "Mishka"
# after a newline tokenizes as M-ish-ka, after the space the cut leaves as Mish-ka; the rest is numbers.
CAUGHT = [str(i) for i in range(ANSWERS) if i != 26]


def _pieces(text: str, words: int = 12) -> list[str]:
    """``text`` cut at spaces into pieces of at most ``words`` words (``\\w+`` runs: "48/2" is two), as the
    issue's store cut the answers: no piece holds the 13 words the word-n-gram check looked for."""
    pieces: list[list[str]] = [[]]
    for chunk in text.split():
        if len(re.findall(r"\w+", " ".join([*pieces[-1], chunk]))) > words:
            pieces.append([])
        pieces[-1].append(chunk)
    return [" ".join(p) for p in pieces if p]


def _build(folder: Path, name: str, texts: list[str]) -> Path:
    """A datastore of ``texts``, one JSONL record each, built by the command for SmolLM2's tokenizer."""
    corpus = folder / f"{name}.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = folder / name
    assert datastore_command(["build", "--model", "tiny_llama", "--corpus", str(corpus), "--out", str(out)]) == 0
    return out


def _check(tmp_path: Path, *argv: str) -> tuple[int, dict]:
    """``python -m lade_bench.rest_datastore check ARGV`` in-process: its exit status and JSON report."""
    report = tmp_path / "report.json"
    status = datastore_command(["check", *argv, "--output", str(report)])
    return status, json.loads(report.read_text())


@pytest.fixture(scope="module")
def gsm8k(shared_data_dir) -> Path:
    return shared_data_dir / "gsm8k" / "test.jsonl"


@pytest.fixture(scope="module")
def stores(tmp_path_factory, gsm8k) -> dict[str, Path]:
    """The stores the issue built, from the first ANSWERS GSM8K test answers and the committed outputs."""
    folder = tmp_path_factory.mktemp("rest_leak")
    records = [json.loads(line) for line in gsm8k.read_text().splitlines()[: ANSWERS + 1]]
    answers = [r["answer"] for r in records[:ANSWERS]]
    pieces = [piece for answer in answers for piece in _pieces(answer)]
    # Between every two pieces a record of other text: the next question, not an answer.
    noise = [
        text for i, answer in enumerate(answers) for p in _pieces(answer) for text in (p, records[i + 1]["question"])
    ]
    rows = load_rows(COMMITTED_ROWS)
    own = rows[(rows["dataset"] == "gsm8k") & (rows["model"] == "smollm2-135m-instruct") & (rows["arm"] == "ar")]
    outputs = [piece for text in dict.fromkeys(own["output_text"]) for piece in _pieces(text)]
    return {
        "verbatim": _build(folder, "verbatim", answers),
        "pieces": _build(folder, "pieces", pieces),
        "noise": _build(folder, "noise", noise),
        "own": _build(folder, "own", outputs),
    }


def test_check_refuses_the_answers_cut_into_pieces_of_at_most_12_words(tmp_path, gsm8k, stores):
    status, report = _check(tmp_path, "--datastore", str(stores["pieces"]), "--datasets", f"gsm8k={gsm8k}")
    assert json.loads((stores["pieces"] / "manifest.json").read_text())["documents"] > 4 * ANSWERS
    assert status == 1
    assert report["datasets"]["gsm8k"]["leaking"] == CAUGHT
    assert report["refused"].startswith(f"rest.datastore='{stores['pieces']}' holds reference answers of 39 of 1319")


def test_the_command_line_refuses_the_pieces_with_other_text_between_them(tmp_path, gsm8k, stores, cli_server):
    # `python -m lade_bench.rest_datastore check ...`, forked from the CLI server (its imports paid once).
    args = ["check", "--datastore", str(stores["noise"]), "--datasets", f"gsm8k={gsm8k}"]
    result = cli_server.run(args, cwd=tmp_path, module="lade_bench.rest_datastore", timeout=300)
    assert result.returncode == 1, result.stderr[-2000:]
    assert json.loads(result.stdout)["datasets"]["gsm8k"]["leaking"] == CAUGHT
    assert f"refused: rest.datastore='{stores['noise']}' holds reference answers of 39 of 1319 gsm8k" in result.stderr


def test_a_run_on_the_piece_cut_store_is_refused_before_the_model_loads(run_cli, tmp_path, gsm8k, stores):
    result = run_cli(*REST, "dataset=gsm8k", f"dataset.path={gsm8k}", f"rest.datastore={stores['pieces']}")
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "holds reference answers of 39 of 1319 gsm8k samples" in output
    assert "loading model" not in output and "Traceback" not in output
    sweep = tmp_path / "runs" / "single"  # Hydra's own record of the command (_hydra) is all there is
    assert read_index(sweep) == [] and [p.name for p in sweep.iterdir()] == ["_hydra"]


def test_a_verbatim_store_stays_refused_with_its_ngram_file_emptied(compose_cfg, gsm8k, stores):
    """The check reads the token ids (which the content hash covers), never a stored n-gram file."""
    np.save(stores["verbatim"] / "ngrams.npy", np.zeros(0, dtype=np.uint64))
    with pytest.raises(CellConfigError, match="holds reference answers of 40 of 1319 gsm8k samples"):
        plan_cell(
            compose_cfg([*REST, "dataset=gsm8k", f"dataset.path={gsm8k}", f"rest.datastore={stores['verbatim']}"])
        )


def test_the_plan_checks_a_store_against_a_dataset_file_once_and_again_once_the_file_changes(
    compose_cfg, monkeypatch, tmp_path, gsm8k, stores
):
    """The leak verdict is kept for the process per datastore and dataset file (a sweep plans every
    Spec-Bench group's REST cell with the same check); a file changed since is checked again."""
    from lade_bench.rest_datastore import leak

    checked, real = [], leak.dataset_items
    monkeypatch.setattr(leak, "dataset_items", lambda *args: checked.append(args[:2]) or real(*args))
    lines = gsm8k.read_text().splitlines()
    subset = tmp_path / "gsm8k.jsonl"
    subset.write_text(lines[ANSWERS + 1] + "\n")  # a question whose answer the store does not hold
    cell = compose_cfg([*REST, "dataset=gsm8k", f"dataset.path={subset}", f"rest.datastore={stores['verbatim']}"])
    assert plan_cell(cell).cell_id == plan_cell(cell).cell_id
    assert checked == [("gsm8k", str(subset))]
    subset.write_text(lines[0] + "\n")  # one whose answer it holds
    with pytest.raises(CellConfigError, match="holds reference answers of 1 of 1 gsm8k samples"):
        plan_cell(cell)
    assert len(checked) == 2


def test_a_store_of_the_models_own_outputs_is_refused_given_those_outputs(compose_cfg, tmp_path, gsm8k, stores):
    """SmolLM2's committed outputs on GSM8K, cut into pieces: refused when the check is given the outputs, as
    the committed rows (``check --outputs``) or as a JSONL file (``rest.leak_outputs``, which no cell id hashes)."""
    store = str(stores["own"])
    status, report = _check(
        tmp_path, "--datastore", store, "--datasets", f"gsm8k={gsm8k}", "--outputs", str(COMMITTED_ROWS)
    )
    assert status == 1 and report["outputs"]["leaking"]
    assert all(label.split(":")[2] == "ar" for label in report["outputs"]["leaking"][:3])
    rows = load_rows(COMMITTED_ROWS)
    answers_file = tmp_path / "outputs.jsonl"
    answers_file.write_text("".join(json.dumps({"output_text": t}) + "\n" for t in rows["output_text"].dropna()))
    cell = [*REST, "dataset=gsm8k", f"dataset.path={gsm8k}", f"rest.datastore={store}"]
    with pytest.raises(CellConfigError, match=rf"rest.datastore='{store}' holds \d+ of \d+ model outputs given"):
        plan_cell(compose_cfg([*cell, f"rest.leak_outputs={answers_file}"]))
    # The outputs feed the check only: a store they do not refuse plans to the same cell with them as without.
    clean = str(stores["noise"].parent / "clean")
    _build(stores["noise"].parent, "clean", ["A datastore of text that no benchmark here holds, said twice. " * 2])
    with_outputs = plan_cell(compose_cfg([*REST, f"rest.datastore={clean}", f"rest.leak_outputs=[{answers_file}]"]))
    assert with_outputs.cell_id == plan_cell(compose_cfg([*REST, f"rest.datastore={clean}"])).cell_id


def test_spec_bench_references_of_every_kind_and_the_prompts_of_unscored_questions_are_checked(
    tmp_path, shared_data_dir
):
    """Spec-Bench: an MT-Bench judge reference, a translation reference shorter than 16 tokens (checked whole),
    the prompts of a qa question and of a RAG question (neither has an answer long enough to check); and
    MT-Bench itself (unscored), by its turns. A datastore holding any of them is refused."""
    spec_bench = shared_data_dir / "spec_bench" / "question.jsonl"
    records = {(r["category"], r["question_id"]): r for r in map(json.loads, spec_bench.read_text().splitlines())}
    coding = next(r for r in records.values() if r["category"] == "coding" and r.get("reference"))
    short = next(
        r for r in records.values() if r["category"] == "translation" and 8 <= len(r["reference"][0].split()) < 12
    )
    qa = next(r for r in records.values() if r["category"] == "qa")
    rag = next(r for r in records.values() if r["category"] == "rag")
    writing = next(r for r in records.values() if r["category"] == "writing")
    texts = [coding["reference"][0], short["reference"][0], qa["turns"][0], rag["turns"][0], writing["turns"][1]]
    store = _build(tmp_path, "spec_bench_texts", texts)
    status, report = _check(tmp_path, "--datastore", str(store), "--datasets", f"spec_bench={spec_bench}", "mt_bench")
    assert status == 1
    ids = {f"{r['category']}-{r['question_id']}" for r in (coding, short)}
    assert set(report["datasets"]["spec_bench"]["leaking"]) == ids
    prompts = {f"qa-{qa['question_id']}", f"rag-{rag['question_id']}", f"writing-{writing['question_id']}"}
    assert set(report["datasets"]["spec_bench"]["leaking_prompts"]) == prompts
    assert report["datasets"]["mt_bench"]["leaking_prompts"] == [str(writing["question_id"])]
    from lade_bench.rest_datastore.leak import LEAK_SPAN, MIN_SPAN, load_tokenizer_of, token_classes

    tokenizer = load_tokenizer_of("embedded:smollm2", None)  # the datastore's (the tiny models read SmolLM2's)
    short_tokens = token_classes(tokenizer).normalized(tokenizer(short["reference"][0])["input_ids"])
    assert MIN_SPAN <= len(short_tokens) < LEAK_SPAN  # it was checked whole: it has no 16-token window


def test_a_dataset_file_that_does_not_load_is_named_with_what_is_wrong(compose_cfg, tmp_path, stores):
    broken = tmp_path / "test.jsonl"
    broken.write_text('{"question": "What is 2 + 2?", "answer": "#### 4"}\n{"question": \n')
    with pytest.raises(CellConfigError) as refused:
        plan_cell(compose_cfg([*REST, "dataset=gsm8k", f"dataset.path={broken}", f"rest.datastore={stores['pieces']}"]))
    message = str(refused.value)
    assert f"dataset.path='{broken}' does not load as gsm8k" in message and f"{broken}:2" in message
    assert "set dataset.path" not in message
