"""Unit tests of the engine's parts: pool, window, step layout, cache commit."""

from __future__ import annotations

import torch
from transformers import DynamicCache

from lade_bench.decoding.core.kv_cache import commit_accepted
from lade_bench.decoding.core.layout import build_step_layout
from lade_bench.decoding.lookahead.pool import NGramPool
from lade_bench.decoding.lookahead.window import LookaheadWindow


def test_pool_caps_evicts_oldest_and_refreshes():
    pool = NGramPool(length=2, cap=2)
    pool.add(1, (2, 3))
    pool.add(1, (4, 5))
    pool.add(1, (2, 3))  # refresh: now most recent
    pool.add(1, (6, 7))  # evicts (4, 5), the oldest
    assert pool.candidates(1) == [(6, 7), (2, 3)]
    assert pool.candidates(9) == []


def test_pool_with_cap_zero_stores_nothing():
    pool = NGramPool(length=2, cap=0)
    pool.add_ngrams_of([1, 2, 3, 1, 2, 3])
    assert len(pool) == 0


def test_pool_adds_only_ngrams_completed_by_new_tokens():
    pool = NGramPool(length=2, cap=8)
    pool.add_ngrams_of([1, 2, 3, 4])
    assert pool.candidates(1) == [(2, 3)] and pool.candidates(2) == [(3, 4)]
    pool.add_ngrams_of([1, 2, 3, 4, 5], first_end=4)
    assert pool.candidates(3) == [(4, 5)] and pool.candidates(1) == [(2, 3)]


def test_window_warm_up_then_steady_state():
    window = LookaheadWindow(ngram=4, window=3, initial_guesses=[10, 11, 12, 13])  # W+N-3 = 4
    assert (window.num_levels, window.num_columns) == (1, 5)
    window.update([20, 21, 22, 23, 24])
    assert window.levels == [[11, 12, 13], [21, 22, 23, 24]]
    window.update([30, 31, 32, 33])
    assert window.levels == [[12, 13], [22, 23, 24], [31, 32, 33]]
    assert window.is_full and window.num_columns == 3
    assert window.ngrams(cur=99, last_level_predictions=[40, 41, 42]) == [
        [99, 22, 31, 40],
        [12, 23, 32, 41],
        [13, 24, 33, 42],
    ]
    window.update([40, 41, 42])
    assert window.levels == [[23, 24], [31, 32, 33], [40, 41, 42]]


def test_window_with_n2_keeps_one_level():
    window = LookaheadWindow(ngram=2, window=3, initial_guesses=[5, 6])
    assert window.is_full
    window.update([7, 8, 9])
    assert window.levels == [[8, 9]]


def test_layout_mask_positions_and_rows():
    # 2 levels x 3 columns, 1 candidate of 2 tokens: inputs [c, a1, a2, b0, b1, b2, x0, x1].
    layout = build_step_layout(levels=2, columns=3, candidates=1, candidate_length=2, dtype=torch.float32, device="cpu")
    allowed = (layout.mask_block == 0).int().tolist()
    assert allowed == [
        [1, 0, 0, 0, 0, 0, 0, 0],  # cur
        [1, 1, 0, 0, 0, 0, 0, 0],  # level 0, column 1: causal
        [1, 1, 1, 0, 0, 0, 0, 0],
        [1, 0, 0, 1, 0, 0, 0, 0],  # level 1, column 0: sees cur and itself
        [1, 1, 0, 0, 1, 0, 0, 0],  # level 1, column 1: level-0 columns 0..1 and itself
        [1, 1, 1, 0, 0, 1, 0, 0],
        [1, 0, 0, 0, 0, 0, 1, 0],  # candidate: cur and its own chain only
        [1, 0, 0, 0, 0, 0, 1, 1],
    ]
    assert layout.position_offsets.tolist() == [0, 1, 2, 1, 2, 3, 1, 2]
    assert layout.logit_rows.tolist() == [0, 3, 4, 5, 6, 7]
    assert layout.last_level_rows == [1, 2, 3] and layout.candidate_rows == [[4, 5]]


def test_commit_moves_accepted_entries_after_cur():
    cache = DynamicCache()
    keys = torch.arange(10, dtype=torch.float32).view(1, 1, 10, 1)
    cache.update(keys, keys + 100, layer_idx=0)
    # 4 accepted entries before this step, then a step of 6 inputs; accept the inputs at offsets 3, 4.
    commit_accepted(cache, cur_position=4, step_tokens=6, kept_offsets=[3, 4])
    assert cache.layers[0].keys.flatten().tolist() == [0, 1, 2, 3, 4, 7, 8]
    assert cache.layers[0].values.flatten().tolist() == [100, 101, 102, 103, 104, 107, 108]
