"""No credit from a last-number reading of an output cut at the cap (issue 63): the committed SmolLM2
Spec-Bench math row that scored 1.0 (its "accuracy 10.0%") is a cut output whose last number happens
to equal the gold answer; scored as cut, it scores 0. An output that ended, or a cut one with an
explicit ``#### <number>``, is read as before."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lade_bench.datasets import Sample, load_dataset_samples
from lade_bench.metrics.task_accuracy import gsm8k_correct
from lade_bench.runner.scoring import score_output

ROWS = Path(__file__).resolve().parents[2] / "paper_figures" / "spec_bench" / "rows" / "spec_bench" / "rows.parquet"
# The committed SmolLM2 cell of every method whose math group "scored" 10.0% (1 of 10): its AR row.
CELL, SAMPLE = "7b51125cd164d2d2", "math_reasoning-405"


@pytest.fixture(scope="module")
def committed_row() -> dict:
    columns = ["cell_id", "model", "sample_id", "arm", "new_tokens", "max_new_tokens", "accuracy", "output_text"]
    rows = pd.read_parquet(ROWS, columns=columns)
    found = rows[(rows["cell_id"] == CELL) & (rows["sample_id"] == SAMPLE) & (rows["arm"] == "ar")]
    assert len(found) == 1
    return found.iloc[0].to_dict()


@pytest.fixture(scope="module")
def question(shared_data_dir: Path) -> Sample:
    path = shared_data_dir / "spec_bench" / "question.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    samples = load_dataset_samples("spec_bench", path=str(path), limit=None, categories=["math_reasoning"])
    return next(s for s in samples if s.sample_id == SAMPLE)


def test_the_committed_cut_math_output_scores_zero(committed_row, question):
    row = committed_row
    # What was credited: a SmolLM2 output cut at its 128-token cap mid-sentence, no final answer given.
    assert row["model"] == "smollm2-135m-instruct" and row["accuracy"] == 1.0
    assert row["new_tokens"] == row["max_new_tokens"] == 128
    assert "####" not in row["output_text"] and row["output_text"].endswith("which is $3.00")
    # Its last number (3.00) equals the gold answer: the fallback reading, taken for an output that ended.
    assert question.reference.endswith("#### 3")
    assert score_output("spec_bench", row["output_text"], question, chat=True)["accuracy"] == 1.0
    # Cut at the cap, it has no final answer and scores 0.
    assert score_output("spec_bench", row["output_text"], question, chat=True, ended=False)["accuracy"] == 0.0
    # The same cut output with an explicit final answer line still scores it.
    explicit = row["output_text"] + "\n#### 3"
    assert score_output("spec_bench", explicit, question, chat=True, ended=False)["accuracy"] == 1.0


def test_gsm8k_scores_a_cut_output_only_by_its_explicit_answer():
    gold = "She makes 9 * 2 = $18 every day.\n#### 18"
    sample = Sample(sample_id="0", turns=("q",), reference="18", task="math", payload={"answer": gold})
    cut = "Each day she sells 16 eggs, 3 for breakfast... so far $18"
    assert gsm8k_correct(cut, gold) and not gsm8k_correct(cut, gold, ended=False)
    assert score_output("gsm8k", cut, sample, chat=True, ended=False) == {"accuracy": 0.0}
    assert score_output("gsm8k", cut, sample, chat=True, ended=True) == {"accuracy": 1.0}
    assert score_output("gsm8k", "Working... #### 18", sample, chat=True, ended=False) == {"accuracy": 1.0}
    assert score_output("gsm8k", "Working... #### 17 and then 18", sample, chat=True, ended=False) == {"accuracy": 0.0}
