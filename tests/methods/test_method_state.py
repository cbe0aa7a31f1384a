"""The registry's side of the warm-state protocol: lifetimes, the state section, the warmth counters."""

from __future__ import annotations

import pytest

from lade_bench.decoding import DecodeResult
from lade_bench.methods import Method, get_method, method_state_text, methods_where
from lade_bench.methods.state import REQUESTS_SEEN_STAT, STATE_SECTION, STATE_SIZE_STAT, use_state


def _never_run(request):
    raise AssertionError("never run")


class _Counter:
    """A state that holds one entry per request it saw."""

    def __init__(self) -> None:
        self.requests_seen = 0
        self.entries: list[int] = []

    def size(self) -> int:
        return len(self.entries)


def test_a_lifetime_outside_the_three_is_refused_and_cell_state_needs_a_builder():
    with pytest.raises(ValueError, match=r"state='forever' is not one of \['none', 'request', 'cell'\]"):
        Method("toy", _never_run, label="Toy", color="#000001", state="forever")
    with pytest.raises(ValueError, match="state='cell' needs new_state"):
        Method("toy", _never_run, label="Toy", color="#000001", state="cell")


def test_a_cell_state_method_reads_the_state_section_so_warm_or_cold_enters_its_cells_ids():
    toy = Method("toy", _never_run, label="Toy", color="#000001", sections=("toy",), state="cell", new_state=dict)
    assert toy.sections == ("toy", STATE_SECTION)
    assert Method("toy", _never_run, label="Toy", color="#000001", sections=("toy",)).sections == ("toy",)
    assert "token_recycling" in methods_where(lambda m: m.state == "cell")
    assert get_method("ar").state == "none" and STATE_SECTION not in get_method("lookahead").sections


def test_use_state_records_the_warmth_at_the_start_and_counts_the_request():
    state = _Counter()

    def generate(s: _Counter) -> DecodeResult:
        s.entries.append(1)
        return DecodeResult(tokens=[1], steps=1, accept_lengths=[1], wall_time_s=0.0)

    warmth = []
    for _ in range(3):
        result = use_state(state, _Counter, generate)
        warmth.append((result.stats[REQUESTS_SEEN_STAT], result.stats[STATE_SIZE_STAT]))
    assert warmth == [(0, 0), (1, 1), (2, 2)] and state.requests_seen == 3
    cold = use_state(None, _Counter, generate)  # no state given: a fresh one
    assert cold.stats[REQUESTS_SEEN_STAT] == 0 and state.requests_seen == 3


def test_only_a_state_that_learns_is_labelled_warm_or_cold_and_rest_s_datastore_is_static():
    with pytest.raises(ValueError, match="static_state=True needs state='cell'"):
        Method("toy", _never_run, label="Toy", color="#000001", static_state=True)
    assert get_method("rest").state == "cell" and get_method("rest").static_state
    # REST's rows count the requests its datastore served, but none changed it: not warm, whatever the mode.
    assert method_state_text("rest", "warm", 0.0, 19.0) == "static"
    assert method_state_text("token_recycling", "warm", 0.0, 19.0) == "warm 0-19"
    assert method_state_text("suffix_decoding", "cold", 0, 1) == "cold 0-1"
    assert method_state_text("token_recycling", None, 0.0, 3.0) == "0-3"  # the mode not recorded
    assert method_state_text("lookahead", "warm", float("nan"), float("nan")) == ""
    assert method_state_text("gone_method", "warm", 0.0, 2.0) == "warm 0-2"  # rows of another version
    # With the cell's method_state.scope: how far the state reaches (Spec-Bench's: the whole benchmark).
    assert method_state_text("token_recycling", "warm", 3.0, 62.0, "benchmark") == "warm per benchmark 3-62"
    assert method_state_text("token_recycling", "warm", 0.0, 9.0, "cell") == "warm per cell 0-9"
    assert method_state_text("rest", "warm", 0.0, 9.0, "benchmark") == "static"
