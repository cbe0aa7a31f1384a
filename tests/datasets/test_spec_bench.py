"""Spec-Bench's question file as a dataset: the real file's shapes, category selection, malformed
records refused before any model, and the per-category scorers on known answers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lade_bench.datasets import DatasetFormatError, DatasetUnavailableError, get_spec, load_dataset_samples
from lade_bench.datasets.spec_bench import (
    CATEGORIES,
    GROUPS,
    QUALITY_COLUMNS,
    SCORED_COLUMNS,
    UNSCORED,
    parse_sample_id,
    turn_count,
)
from lade_bench.runner.scoring import score_output


@pytest.fixture(scope="module")
def question_file(shared_data_dir: Path) -> Path:
    path = shared_data_dir / "spec_bench" / "question.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


def _samples(path: Path, **options):
    return load_dataset_samples("spec_bench", path=str(path), limit=None, **options)


def test_the_real_file_loads_whole_with_spec_bench_s_counts(question_file):
    samples = _samples(question_file)
    counts = Counter(s.payload["category"] for s in samples)
    assert len(samples) == 480 and set(counts) == set(CATEGORIES)
    assert all(counts[c] == 80 for c in ("translation", "summarization", "qa", "math_reasoning", "rag"))
    assert all(counts[c] == 10 for c in GROUPS["mt_bench"])
    by_id = {s.sample_id: s for s in samples}
    # MT-Bench keeps both turns; the others have one; ids name the category and Spec-Bench's question id.
    assert len(by_id["writing-81"].turns) == 2 and len(by_id["translation-161"].turns) == 1
    assert parse_sample_id("rag-481") == ("rag", 481) and by_id["rag-481"].payload["question_id"] == 481
    # The reference shapes the scorers read, as the file holds them.
    assert by_id["translation-161"].payload["golds"] == (
        "Pawnbrokers shine in Singapore as middle class feel the pinch",
    )
    assert len(by_id["rag-481"].payload["golds"]) == 6 and by_id["qa-321"].payload["golds"] == ()
    assert by_id["math_reasoning-401"].reference.endswith("#### 1000")


def test_categories_and_the_per_group_cap(question_file):
    picked = _samples(question_file, categories=["mt_bench", "rag"], per_category_limit=10)
    groups = Counter("rag" if s.payload["category"] == "rag" else "mt_bench" for s in picked)
    assert groups == {"mt_bench": 10, "rag": 10}
    # A capped MT-Bench spans its categories (taken in turn), not the first ten writing questions.
    assert {s.payload["category"] for s in picked if s.payload["category"] != "rag"} == set(GROUPS["mt_bench"])
    assert [s.sample_id for s in _samples(question_file, categories=["writing"], per_category_limit=2)] == [
        "writing-81",
        "writing-82",
    ]
    with pytest.raises(ValueError, match=r"unknown category \['mtbench'\]; allowed: mt_bench, translation"):
        _samples(question_file, categories=["mtbench"])
    with pytest.raises(ValueError, match="per_category_limit must be >= 1"):
        _samples(question_file, per_category_limit=0)
    with pytest.raises(ValueError, match="dataset 'gsm8k' has no categories"):
        load_dataset_samples("gsm8k", path=str(question_file), categories=["qa"])


def test_malformed_records_of_a_real_copy_are_named_by_line(question_file, tmp_path):
    lines = question_file.read_text(encoding="utf-8").splitlines()
    broken = [json.loads(line) for line in lines]
    broken[0]["category"] = "poetry"  # line 1: not a Spec-Bench category
    broken[80]["reference"] = "Pawnbrokers"  # line 81 (translation-161): a string, not [text]
    broken[400]["reference"] = ["a", "b"]  # line 401 (rag-481): not [[answers]]
    del broken[5]["turns"]  # line 6: a missing field
    copy = tmp_path / "question.jsonl"
    copy.write_text("\n".join(json.dumps(r) for r in broken) + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as refused:
        _samples(copy)
    message = str(refused.value)
    assert f"{copy}:1:" in message and "'poetry' is not one of Spec-Bench's" in message
    assert f"{copy}:81:" in message and "translation needs reference [text]" in message
    assert f"{copy}:401:" in message and "rag needs reference [[answer, ...]]" in message
    assert f"{copy}:6:" in message and "turns" in message
    with pytest.raises(DatasetUnavailableError, match="dataset.path"):
        load_dataset_samples("spec_bench")


def test_a_question_with_another_number_of_turns_than_its_category_s_is_refused(question_file, tmp_path):
    """Spec-Bench's rule, one place (``turn_count``): MT-Bench questions have two turns, the others one."""
    records = [json.loads(line) for line in question_file.read_text(encoding="utf-8").splitlines()]
    assert all(len(r["turns"]) == turn_count(r["category"]) for r in records)
    records[0]["turns"] = records[0]["turns"][:1]  # line 1: writing-81 with one turn
    records[90]["turns"] = [*records[90]["turns"], "And again."]  # line 91: translation-171 with two
    copy = tmp_path / "question.jsonl"
    copy.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with pytest.raises(DatasetFormatError) as refused:
        _samples(copy)
    message = str(refused.value)
    assert f"{copy}:1: " in message
    assert "turns: 1 turn(s) in a writing question; Spec-Bench's writing questions have 2" in message
    assert f"{copy}:91: " in message
    assert "turns: 2 turn(s) in a translation question; Spec-Bench's translation questions have 1" in message


def test_each_category_is_scored_by_its_metric_or_says_why_not(question_file):
    samples = {s.payload["category"]: s for s in _samples(question_file, per_category_limit=1)}
    assert set(SCORED_COLUMNS) | set(UNSCORED) == set(CATEGORIES)
    assert get_spec("spec_bench").quality_columns == QUALITY_COLUMNS

    def filled(category: str, answer: str) -> dict:
        scores = score_output("spec_bench", answer, samples[category], chat=True)
        assert sorted(scores) == sorted(QUALITY_COLUMNS)  # every column, the others null
        return {k: v for k, v in scores.items() if v is not None}

    gold = samples["translation"].payload["golds"][0]
    right = filled("translation", gold)
    assert right.pop("bleu_stats")[:2] == [len(gold.split())] * 2  # BLEU counts, for corpus BLEU (13a tokens)
    assert right == pytest.approx({"bleu": 100.0, "chrf": 100.0})
    wrong = filled("translation", "The weather is cold today.")
    assert wrong["bleu"] < 10 and wrong["chrf"] < 30
    assert filled("summarization", samples["summarization"].reference)["rougeL"] == pytest.approx(1.0)
    assert filled("math_reasoning", "So the travel costs 1000 dollars.") == {"accuracy": 1.0}
    assert filled("math_reasoning", "It costs 600.") == {"accuracy": 0.0}
    # rag: any gold alternative counts, after SQuAD's normalisation (case, articles, punctuation).
    assert filled("rag", "A source of lumber.") == {"exact_match": 1.0, "token_f1": 1.0}
    # "acting as sink" against "acting as a carbon sink": precision 3/3, recall 3/4, F1 6/7.
    assert filled("rag", "Acting as a sink") == pytest.approx({"exact_match": 0.0, "token_f1": 6 / 7})
    assert filled("qa", "Ginnifer Goodwin") == {} and filled("writing", "A blog post.") == {}
    assert "no reference answers" in UNSCORED["qa"].reason and "judged by an LLM" in UNSCORED["writing"].reason


def test_a_cell_refuses_bad_records_and_categories_before_its_model_loads(question_file, tmp_path):
    """The cell's model is a folder that does not exist: had it loaded first, that would be the error."""
    from hydra import compose, initialize_config_dir

    from lade_bench.conf import PACKAGE_CONF_DIR
    from lade_bench.runner import register_configs, run_cell

    records = [json.loads(line) for line in question_file.read_text(encoding="utf-8").splitlines()]
    records[100]["turns"] = []  # line 101: a question without a turn
    copy = tmp_path / "question.jsonl"
    copy.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    register_configs()
    base = ["model=vicuna_7b", f"model.name_or_path={tmp_path / 'no-such-model'}", "dataset=spec_bench", "device=cpu"]
    base += ["wandb.mode=disabled", "device_profile.enabled=false", f"output_root={tmp_path / 'runs'}"]
    for extra, error, message in (
        ([f"dataset.path={copy}"], DatasetFormatError, f"{copy}:101: .*turns"),
        (
            [f"dataset.path={question_file}", "dataset.categories=[poetry]"],
            ValueError,
            r"unknown category \['poetry'\]",
        ),
    ):
        with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=[*base, *extra])
        with pytest.raises(error, match=message):
            run_cell(cfg)
