"""docs/suffix_decoding.md's measured effect of the plugin's defaults against vLLM's is the committed JSON's.

``docs/engine_bench/suffix_decoding_plugin_vs_vllm.json`` (written by ``scripts/suffix_decoding_effect.py``)
holds every question's recorded steps under both configurations; this test recomputes each summary number
from those per-question numbers (the leaderboard's pooled tokens per decode step, the share equal to AR,
and the speedups replayed on the committed CPU profile) and finds the table built from them in the doc.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lade_bench.stats.profile_replay import configuration_summary, replayed_speedup

ROOT = Path(__file__).resolve().parents[1]
EFFECT = ROOT / "docs" / "engine_bench" / "suffix_decoding_plugin_vs_vllm.json"
DOC = ROOT / "docs" / "suffix_decoding.md"
NAMES = {"plugin": "the plugin's defaults", "vllm": "vLLM's values"}
# The committed JSON's names for configuration_summary's keys (scripts/suffix_decoding_effect.py writes them so).
RECORDED_NAMES = {
    "tau": "accepted_per_step",
    "width": "input_tokens_per_step",
    "predicted_speedup": "predicted_speedup_over_ar",
}


def _recomputed(samples: list[dict[str, Any]], profile: dict[str, Any]) -> dict[str, Any]:
    """Per configuration: n, tokens per decode step, share equal to AR, predicted speedups (from the samples)."""
    ar = [s["ar_step_tokens"] for s in samples]
    out: dict[str, Any] = {}
    for config in NAMES:
        rows = pd.DataFrame([s[config] for s in samples])
        summary = configuration_summary(rows, ar, profile)
        out[config] = {RECORDED_NAMES.get(key, key): value for key, value in summary.items()}
    plugin = [s["plugin"]["step_tokens"] for s in samples]
    out["predicted_plugin_over_vllm"] = replayed_speedup(plugin, [s["vllm"]["step_tokens"] for s in samples], profile)
    return out


def _table_lines(model: str, numbers: dict[str, Any], settings: dict[str, dict[str, Any]]) -> list[str]:
    """The doc's table rows of one model."""
    lines = []
    for config, name in NAMES.items():
        s, n = settings[config], numbers[config]
        what = (
            f"{name} (depth {s['max_tree_depth']}, {s['max_cached_requests']:,} requests, width {s['max_spec_tokens']})"
        )
        lines.append(
            f"| {model} | {what} | {n['n']} | {n['accepted_per_step']:.3f} | {n['input_tokens_per_step']:.3f} "
            f"| {n['matches_ar']:.0%} | {n['predicted_speedup_over_ar']:.3f}x |"
        )
    lines.append(f"| {model} | the plugin's over vLLM's | | | | | {numbers['predicted_plugin_over_vllm']:.3f}x |")
    return lines


def test_the_docs_effect_table_is_recomputed_from_the_committed_per_question_numbers():
    effect = json.loads(EFFECT.read_text())
    doc = DOC.read_text()
    settings = {"plugin": effect["fresh_run"]["suffix_decoding"], "vllm": effect["committed_rows"]["suffix_decoding"]}
    assert effect["summary"], "no model in the effect JSON"
    for model, summary in effect["summary"].items():
        samples = [s for s in effect["samples"] if s["model"] == model]
        profile = json.loads((ROOT / summary["profile"]).read_text())
        numbers = _recomputed(samples, profile)
        for config in NAMES:
            assert summary[config] == pytest.approx(numbers[config]), (model, config)
        assert summary["predicted_plugin_over_vllm"] == pytest.approx(numbers["predicted_plugin_over_vllm"])
        for line in _table_lines(model, numbers, settings):
            assert line in doc, f"docs/suffix_decoding.md lacks the line {line!r}"
