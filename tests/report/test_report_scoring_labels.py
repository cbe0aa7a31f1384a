"""Quality numbers that cannot mislead (issue 63), on the committed Spec-Bench rows: a report scores a
final answer cut at the cap as today's scorer does (the SmolLM2 math "accuracy 10.0%" was one cut output
whose last number equalled the gold: 0 of 10), names BLEU for what it is (the mean of sentence BLEU beside
corpus BLEU, sacrebleu's ``corpus_bleu`` from the rows' BLEU counts) and shows the outputs at the cap
beside every quality number of the leaderboard."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import sacrebleu

from lade_bench import stats
from lade_bench.datasets.registry import ending_datasets
from lade_bench.metrics.text_match import bleu_statistics
from lade_bench.report.spec_bench_board import board_records, leaderboard_table
from lade_bench.report.sweep import sweep_from_rows
from lade_bench.results import load_rows

REPO = Path(__file__).resolve().parents[2]
ARCHIVE = REPO / "paper_figures" / "spec_bench" / "rows" / "spec_bench"
# Committed cells: SmolLM2's every-method math_reasoning and translation cells, Gemma-3-270M's REST
# translation cell (its AR rows).
SMOLLM2, SMOLLM2_TRANSLATION, GEMMA = "7b51125cd164d2d2", "7c4c4131a43e529b", "0b62d315907bd58e"


@pytest.fixture(scope="module")
def committed() -> pd.DataFrame:
    rows = load_rows(ARCHIVE)
    return rows[rows["sample_id"].str.startswith(("math_reasoning-", "translation-"))].reset_index(drop=True)


@pytest.fixture(scope="module")
def references(shared_data_dir: Path) -> dict[str, str]:
    path = shared_data_dir / "spec_bench" / "question.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {f"translation-{r['question_id']}": r["reference"][0] for r in records if r["category"] == "translation"}


def test_a_report_scores_the_committed_cut_math_answer_as_today(committed):
    math_rows = committed[(committed["cell_id"] == SMOLLM2) & committed["sample_id"].str.startswith("math_")]
    ar = math_rows[math_rows["arm"] == "ar"]
    assert len(ar) == 10 and stats.quality_means(ar)["accuracy"] == 0.1  # as recorded: 1 of 10
    rescored = stats.rescore_cut_answers(stats.with_text_health(math_rows), ending_datasets())
    assert rescored.loc[rescored["sample_id"] == "math_reasoning-405", "at_cap"].all()
    assert stats.quality_means(rescored[rescored["arm"] == "ar"])["accuracy"] == 0.0
    # Only that credit goes: every other recorded accuracy is unchanged.
    changed = rescored["accuracy"] != math_rows["accuracy"]
    assert set(rescored.loc[changed, "sample_id"]) == {"math_reasoning-405"}


def test_sentence_bleu_mean_and_corpus_bleu_are_both_computed_and_named(committed, references):
    gemma = committed[(committed["cell_id"] == GEMMA) & (committed["arm"] == "ar")]
    gemma = gemma[gemma["sample_id"].str.startswith("translation-")]
    texts, golds = gemma["output_text"].tolist(), [references[s] for s in gemma["sample_id"]]
    # The committed rows have no BLEU counts (schema 14): corpus BLEU is not invented for them.
    means = stats.quality_means(gemma)
    assert means["sentence_bleu"] == pytest.approx(0.417, abs=5e-4) and math.isnan(means["corpus_bleu"])
    # Counted as today's scorer counts them, the same outputs' corpus BLEU is sacrebleu's, and far lower.
    counted = gemma.assign(bleu_stats=[bleu_statistics(t, [g]) for t, g in zip(texts, golds, strict=True)])
    corpus = stats.quality_means(counted)["corpus_bleu"]
    assert corpus == sacrebleu.corpus_bleu(texts, [golds]).score and corpus == pytest.approx(0.147, abs=5e-4)
    assert stats.quality_means(counted)["sentence_bleu"] == means["sentence_bleu"]


def test_the_leaderboard_shows_at_cap_beside_quality_and_names_each_bleu(committed):
    cells = committed["cell_id"].isin([SMOLLM2, SMOLLM2_TRANSLATION])
    smollm2 = committed[cells & committed["arm"].isin(["ar", "prompt_lookup"])]
    sweep = sweep_from_rows(smollm2, intervals=stats.IntervalSettings(n_boot=50))
    table = leaderboard_table(board_records(sweep))
    columns = list(table.columns)
    assert columns[columns.index("Quality") + 1] == "At cap"
    math_row = table[table["Group"] == "Math"].iloc[0]
    # Prompt lookup's math outputs: what the rows' text health says of them (8 of 10 cut by the cap).
    health = stats.with_text_health(smollm2)
    cut = health[(health["arm"] == "prompt_lookup") & health["sample_id"].str.startswith("math_")]["at_cap"]
    assert math_row["Quality"] == "accuracy 0.0%" and math_row["At cap"] == f"{int(cut.sum())}/10" == "8/10"
    translation = table[table["Group"] == "Translation"].iloc[0]["Quality"]
    assert translation.startswith("sentence BLEU (mean) 3.5, corpus BLEU n/a, chrF (mean) ")
