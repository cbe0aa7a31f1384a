"""Text health of one output (issue 63): repeated-4-gram share, distinct-4, where a final loop starts, the cap.

Constructed token sequences with their answers worked out by hand in each test.
"""

from __future__ import annotations

import math
import random

import pytest

from lade_bench.metrics.text_health import (
    LOOP_MIN_TOKENS,
    TEXT_HEALTH_COLUMNS,
    distinct_n,
    hit_cap,
    loop_start,
    repeated_ngram_share,
    text_health,
)

STOP = 2
CLEAN = list(range(100, 140))  # 40 distinct tokens: no 4-gram twice, no loop


def test_a_clean_text_repeats_nothing_and_has_no_loop():
    assert repeated_ngram_share(CLEAN) == 0.0
    assert distinct_n(CLEAN) == 1.0
    assert loop_start(CLEAN) is None


def test_an_output_that_is_one_loop_starts_it_at_0():
    ids = [1, 2, 3] * 10  # 30 tokens, 27 4-grams, 3 distinct ((1,2,3,1), (2,3,1,2), (3,1,2,3))
    assert distinct_n(ids) == pytest.approx(3 / 27)
    assert repeated_ngram_share(ids) == pytest.approx(24 / 27)
    assert loop_start(ids) == 0


def test_a_loop_after_clean_text_starts_where_the_block_first_begins():
    # 20 clean tokens, then the block 5 6 7 8 five times: the periodic suffix is the 20 loop tokens.
    ids = CLEAN[:20] + [5, 6, 7, 8] * 5
    assert loop_start(ids) == 20
    # 37 4-grams: the 17 that start inside the loop hold 4 distinct ones (13 repeats); the 20 that start
    # in the clean part (or cross into the loop) are all distinct.
    assert repeated_ngram_share(ids) == pytest.approx(13 / 37)
    # The block's first token happening to end the clean part moves the start one earlier (still periodic).
    assert loop_start([*CLEAN[:19], 8, *[5, 6, 7, 8] * 5]) == 19


def test_a_short_repeat_is_no_loop_and_the_longest_periodic_suffix_wins():
    block = [11, 12, 13, 14, 15, 16, 17]
    assert loop_start(CLEAN + block * 2) is None  # 2 periods but 14 tokens < 16
    assert loop_start(CLEAN + block * 3) == len(CLEAN)  # 21 tokens
    assert loop_start(CLEAN + [9] * (LOOP_MIN_TOKENS - 1)) is None
    assert loop_start(CLEAN + [9] * LOOP_MIN_TOKENS) == len(CLEAN)
    # A run of 16 equal tokens is a loop of period 1, but the block of 16 nines and a 4 repeated before it
    # makes the whole tail periodic with period 17 (67 tokens): the longest periodic suffix is the loop.
    block = [9] * 16 + [4]
    ids = CLEAN + block * 3 + [9] * 16
    assert loop_start(CLEAN + [4] + [9] * 16) == len(CLEAN) + 1
    assert loop_start(ids) == len(CLEAN)


def test_a_trailing_stop_token_leaves_the_loop():
    ids = CLEAN[:10] + [5, 6, 7, 8] * 6
    assert loop_start(ids) == 10
    assert loop_start([*ids, STOP]) is None


def test_at_cap_means_the_budget_reached_without_a_stop_token():
    assert hit_cap(CLEAN[:16], 16, {STOP})
    assert not hit_cap([*CLEAN[:15], STOP], 16, {STOP})  # ended by itself on the last allowed token
    assert not hit_cap(CLEAN[:15], 16, {STOP})
    assert not hit_cap([*CLEAN[:10], STOP], 16, {STOP})


def test_under_four_tokens_there_is_no_4_gram_to_count():
    for ids in ([], [1], [1, 2, 3]):
        assert math.isnan(repeated_ngram_share(ids)) and math.isnan(distinct_n(ids))
        assert loop_start(ids) is None


def test_the_repeated_share_is_one_minus_distinct_4():
    rng = random.Random(0)
    for _ in range(50):
        ids = [rng.randrange(4) for _ in range(rng.randrange(4, 60))]
        assert repeated_ngram_share(ids) == pytest.approx(1.0 - distinct_n(ids))


def test_text_health_gives_the_four_row_columns():
    ids = [*CLEAN[:8], *[5, 6, 7, 8] * 4]  # 24 tokens at a budget of 24, no stop: at the cap
    health = text_health(ids, 24, [STOP])
    assert tuple(health) == TEXT_HEALTH_COLUMNS
    assert health["loop_start"] == 8 and health["at_cap"] is True
    # 21 4-grams: 8 start before the loop (all distinct), 13 inside it (4 distinct).
    assert health["distinct_4"] == pytest.approx(12 / 21)
