import pytest

from lade_bench.metrics.rouge import ROUGE_TYPES, rouge_corpus, rouge_scores


def test_identical_strings_score_one():
    text = "Lookahead decoding breaks the sequential dependency.\nIt keeps the output distribution."
    assert rouge_scores(text, text) == {name: pytest.approx(1.0) for name in ROUGE_TYPES}


def test_known_pair():
    # reference: the cat sat on the mat (6 tokens); prediction: the cat on the mat (5 tokens).
    # ROUGE-1: 5 matches, P = 1, R = 5/6, F = 10/11. ROUGE-2: 3 of 4 / 5 bigrams, F = 2/3.
    # ROUGE-L: LCS = 5 tokens, same as ROUGE-1. One line, so rougeLsum = rougeL.
    scores = rouge_scores("the cat on the mat", "the cat sat on the mat")
    assert scores["rouge1"] == pytest.approx(10 / 11)
    assert scores["rouge2"] == pytest.approx(2 / 3)
    assert scores["rougeL"] == pytest.approx(10 / 11)
    assert scores["rougeLsum"] == pytest.approx(10 / 11)


def test_stemmer_is_on():
    assert rouge_scores("running dogs", "run dog")["rouge1"] == pytest.approx(1.0)


def test_rougelsum_uses_lines_as_sentences():
    # Swapped sentences: the flat LCS keeps 2 of 4 tokens, the summary-level LCS matches each sentence.
    scores = rouge_scores("c d\na b", "a b\nc d")
    assert scores["rougeL"] == pytest.approx(0.5)
    assert scores["rougeLsum"] == pytest.approx(1.0)
    # Blank lines and surrounding whitespace do not create or change sentences.
    assert rouge_scores("  c d \n\n\na b\n", "a b\nc d")["rougeLsum"] == pytest.approx(1.0)


def test_empty_prediction_scores_zero():
    assert rouge_scores("", "the cat") == {name: 0.0 for name in ROUGE_TYPES}


def test_corpus_mean():
    corpus = rouge_corpus(["the cat on the mat", "a b"], ["the cat sat on the mat", "a b"])
    assert corpus["rouge1"] == pytest.approx((10 / 11 + 1.0) / 2)
    assert corpus["rouge2"] == pytest.approx((2 / 3 + 1.0) / 2)


def test_corpus_validation():
    with pytest.raises(ValueError, match="lengths 2 != 1"):
        rouge_corpus(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        rouge_corpus([], [])
    with pytest.raises(TypeError):
        rouge_scores(None, "a")
