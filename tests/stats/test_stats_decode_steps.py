"""Tokens accepted and fed per decode step (every arm), and a stateful arm's warmth (schema 8)."""

from __future__ import annotations

import math

import pytest

from lade_bench import stats
from lade_bench.report import tables
from tests.stats.rows import frame, row


def _cell():
    built = []
    # The tree arm: prefill then steps emitting 3 and 1 tokens (s0), 4 (s1), feeding 9 tokens each;
    # its state had seen 0, then 1 earlier requests. AR: one token per forward, one fed.
    arms = {
        "s0": dict(accept_lengths=[1, 3, 1], step_tokens=[5, 9, 9], tokens=5, steps=3, state_requests_seen=0),
        "s1": dict(accept_lengths=[1, 4], step_tokens=[5, 9], tokens=5, steps=2, state_requests_seen=1),
    }
    for sample, values in arms.items():
        built.append(row("c", sample, "token_recycling", state_size=10, **values))
        built.append(row("c", sample, "ar", tokens=5, steps=5, step_tokens=[5, 1, 1, 1, 1]))
    return built


def test_accepted_and_fed_per_decode_step_pool_the_decode_steps_and_warmth_is_a_range(tmp_path):
    records = stats.summarize(frame(tmp_path, _cell())).set_index("arm").to_dict("index")
    tree, ar = records["token_recycling"], records["ar"]
    assert tree["mean_accepted"] == pytest.approx(8 / 3) and tree["step_tokens_mean"] == 9.0
    assert ar["mean_accepted"] == 1.0 and ar["step_tokens_mean"] == 1.0
    assert (tree["state_requests_min"], tree["state_requests_max"]) == (0.0, 1.0)
    assert math.isnan(ar["state_requests_min"]) and tables.state_cell({**ar, "arm": "ar"}) == ""
    assert tables.state_cell({**tree, "arm": "token_recycling"}) == "0-1"


def test_the_state_column_shows_only_where_a_method_keeps_state(tmp_path):
    summary = stats.summarize(frame(tmp_path, _cell()))
    shown = tables.summary_display_table(summary)
    assert list(shown[tables.STATE_HEADER]) == ["", "0-1"]
    assert list(shown[tables.ACCEPTED_HEADER]) == ["1.00", "2.67"]
    assert list(shown[tables.WIDTH_HEADER]) == ["1.0", "9.0"]
    stateless = tables.summary_display_table(summary[summary["arm"] == "ar"])
    assert tables.STATE_HEADER not in stateless
