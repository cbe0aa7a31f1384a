"""Greedy verification on hand-built predictions: which candidate wins and what a step emits.

``predictions[r]`` is the argmax of logit row r (row 0 is cur's); candidate i's token t lives in row
``candidate_rows[i][t]``. The greedy chain a candidate must follow is: ``predictions[0]``, then the
argmax of the row of each token it got right.
"""

from __future__ import annotations

from lade_bench.decoding.core.verify import verify_greedy


def rows_for(num_candidates: int, length: int) -> list[list[int]]:
    """Candidate rows laid out after cur's row, ``length`` rows per candidate (the step layout)."""
    return [[1 + i * length + t for t in range(length)] for i in range(num_candidates)]


def predictions_for(first: int, per_candidate: list[list[int]]) -> list[int]:
    """Flatten cur's prediction and each candidate's row predictions into logit-row order."""
    return [first, *(token for rows in per_candidate for token in rows)]


def test_longest_accepted_prefix_wins_across_candidates():
    candidates = [(10, 99, 99), (10, 11, 99), (10, 11, 12)]
    # Each candidate's rows predict the true continuation 11, 12, 13 where its context is right.
    predictions = predictions_for(10, [[11, 50, 50], [11, 12, 50], [11, 12, 13]])
    accepted, winner, matched = verify_greedy(predictions, candidates, rows_for(3, 3))
    assert (winner, matched) == (2, 3)
    assert accepted == [10, 11, 12, 13]


def test_candidates_sharing_a_prefix_each_use_their_own_rows():
    # Both start with 10, 11; only the second continues correctly. The first's third row predicts
    # something else: its own rows, not the other candidate's, decide its acceptance.
    candidates = [(10, 11, 7), (10, 11, 12)]
    predictions = predictions_for(10, [[11, 12, 40], [11, 12, 13]])
    accepted, winner, matched = verify_greedy(predictions, candidates, rows_for(2, 3))
    assert (winner, matched) == (1, 3)
    assert accepted == [10, 11, 12, 13]


def test_ties_go_to_the_earliest_candidate():
    candidates = [(10, 11, 5), (10, 11, 6)]
    predictions = predictions_for(10, [[11, 20, 0], [11, 21, 0]])
    accepted, winner, matched = verify_greedy(predictions, candidates, rows_for(2, 3))
    assert (winner, matched) == (0, 2)
    # The token after the matched prefix comes from the winner's own row.
    assert accepted == [10, 11, 20]


def test_full_match_emits_all_guesses_plus_the_bonus_token():
    candidates = [(3, 4, 5, 6)]
    predictions = predictions_for(3, [[4, 5, 6, 77]])
    accepted, winner, matched = verify_greedy(predictions, candidates, rows_for(1, 4))
    assert (winner, matched) == (0, 4)
    # N-1 = 4 guesses plus the bonus token predicted after the last one: N tokens in one step.
    assert accepted == [3, 4, 5, 6, 77]


def test_no_match_emits_only_the_greedy_token():
    candidates = [(8, 9), (7, 9)]
    predictions = predictions_for(10, [[9, 1], [9, 2]])
    accepted, winner, matched = verify_greedy(predictions, candidates, rows_for(2, 2))
    assert (winner, matched) == (-1, 0)
    assert accepted == [10]


def test_no_candidates_emits_only_the_greedy_token():
    assert verify_greedy([42], [], []) == ([42], -1, 0)


def test_first_token_wrong_rejects_even_a_candidate_whose_later_tokens_are_right():
    # Acceptance is a prefix match: guessing later tokens right is worth nothing after a miss.
    candidates = [(9, 11, 12)]
    predictions = predictions_for(10, [[11, 12, 13]])
    assert verify_greedy(predictions, candidates, rows_for(1, 3)) == ([10], -1, 0)
