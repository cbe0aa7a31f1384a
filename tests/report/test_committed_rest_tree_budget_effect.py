"""docs/rest.md's measured effect of REST's tree budget and no-match guess is the committed per-row JSON's.

``docs/engine_bench/rest_tree_budget.json`` (written by ``scripts/rest_tree_budget_effect.py``, its
command and commit inside) holds every committed Spec-Bench REST row replayed with the real drafter in
three configurations (the committed cells' ``most_frequent_nodes`` without a guess, the authors'
``cut_to_choices`` without a guess, and the authors' default: ``cut_to_choices`` with their guess of
token 100 on a miss), beside its AR row's step widths; the script checked the replay against every
committed row in the configuration those cells ran and against the rows of real runs in the other two.
Here each configuration's numbers are recomputed from those rows (the project's pooled tau and width,
``stats.profile_replay`` on the committed device profile) and the docs' table and ratios must quote them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .effect_json import check_configuration_summaries

ROOT = Path(__file__).resolve().parents[2]
EFFECT = ROOT / "docs" / "engine_bench" / "rest_tree_budget.json"
DOC = ROOT / "docs" / "rest.md"
# A table row: | `label` | model | n | tau | width | outputs = AR | predicted speedup over AR |
ROW = re.compile(r"^\| `(REST[^`]*)` \| ([\w.-]+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| (\d+)% \| ([\d.]+)x \|$", re.M)


@pytest.fixture(scope="module")
def effect() -> dict:
    """The committed per-row numbers."""
    return json.loads(EFFECT.read_text())


def test_each_configuration_summary_is_its_rows_and_every_output_is_ar(effect):
    configurations = check_configuration_summaries(effect, lambda c: ROOT / c["profile"])
    labels = {c["label"] for c in configurations}
    assert labels == {"REST", "REST (no guess on a miss)", "REST (64 most frequent nodes, no guess on a miss)"}
    # The replay was checked against every committed row, and against real rows in the other two.
    assert effect["replay_checked"]["committed_rows"] == 140
    assert effect["replay_checked"]["real_run_rows"]["no_guess"] > 0
    assert effect["replay_checked"]["real_run_rows"]["authors"] > 0


def test_the_docs_table_quotes_the_committed_numbers(effect):
    quoted = {(m[1], m[2]): m.groups()[2:] for m in ROW.finditer(DOC.read_text())}
    expected = {}
    for c in effect["configurations"]:
        s = c["summary"]
        expected[c["label"], c["model"]] = (
            str(s["n"]),
            f"{s['tau']:.3f}",
            f"{s['width']:.1f}",
            f"{s['matches_ar'] * 100:.0f}",
            f"{s['predicted_speedup']:.2f}",
        )
    assert quoted == expected


@pytest.mark.parametrize(
    ("configuration", "over", "sentence"),
    [
        # The authors' budget alone against the configuration every committed row ran.
        ("no_guess", "committed", r"predicted\s+([\d.]+)x\s+as\s+fast\s+as\s+the\s+committed\s+configuration"),
        # Their guess alone: the authors' default against their budget without it.
        ("authors", "no_guess", r"the\s+guess\s+alone\s+is\s+predicted\s+([\d.]+)x\s+as\s+fast"),
        # The authors' default against the committed rows' configuration.
        ("authors", "committed", r"predicted\s+([\d.]+)x\s+as\s+fast\s+as\s+the\s+committed\s+rows'\s+configuration"),
    ],
)
def test_the_docs_ratios_are_the_committed_predictions(effect, configuration, over, sentence):
    speedup = {(c["model"], c["configuration"]): c["summary"]["predicted_speedup"] for c in effect["configurations"]}
    ratios = [
        speedup[model, configuration] / speedup[model, over] for model in ("smollm2-135m-instruct", "gemma3-270m")
    ]
    quoted = re.search(sentence + r"\s+on\s+SmolLM2\s+and\s+([\d.]+)x\s+on\s+Gemma-3-270M", DOC.read_text())
    assert quoted is not None and quoted.groups() == tuple(f"{r:.2f}" for r in ratios)


def test_the_docs_miss_counts_are_the_committed_rows(effect):
    """How often nothing is retrieved (a 1-token step without the guess) and how often the guess is accepted
    (a 2-token step accepting 2: no retrieved tree is that narrow in these rows), as the docs quote them."""
    by = {(c["model"], c["configuration"]): c["rows"] for c in effect["configurations"]}
    shares, guesses = [], []
    for model in ("smollm2-135m-instruct", "gemma3-270m"):
        widths = [w for row in by[model, "no_guess"] for w in row["step_tokens"][1:]]
        shares.append(f"{100 * widths.count(1) / len(widths):.0f}%")
        steps = [
            s
            for row in by[model, "authors"]
            for s in zip(row["step_tokens"][1:], row["accept_lengths"][1:], strict=True)
        ]
        assert not any(w == 2 for row in by[model, "no_guess"] for w in row["step_tokens"][1:])
        guessed = [a for w, a in steps if w == 2]
        guesses.append((len(guessed), sum(a == 2 for a in guessed)))
    text = " ".join(DOC.read_text().split())
    assert f"on {shares[0]} (SmolLM2) and {shares[1]} (Gemma) of the decode steps no suffix is found" in text
    (s_misses, s_hits), (g_misses, g_hits) = guesses
    assert (s_hits, g_hits) == (1, 0)
    assert f"once in {s_misses:,} misses on SmolLM2, never in {g_misses:,} on Gemma" in text
