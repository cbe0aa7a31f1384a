"""The committed methods tune (paper_figures/tune/methods/, scripts/tune_methods_reference.sh) recomputed from its rows.

The search: every candidate's predicted speedup from the committed search cells' rows on the committed
profile, the declared winner the top prediction, the search samples one per Spec-Bench group. The tuned
leaderboard, once the timed held-out check is committed beside it: every number from the held-out rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.datasets.spec_bench import GROUP_OF, GROUPS
from lade_bench.methods import get_method, methods_where
from lade_bench.methods.budget import candidate_grid, candidate_key
from lade_bench.results import load_rows
from lade_bench.stats.step_cost import predicted_speedup
from lade_bench.tune.budget_search import paired_rows
from lade_bench.tune.leaderboard import heldout_methods, leaderboard_table

REPO = Path(__file__).resolve().parents[2]
METHODS_DIR = REPO / "paper_figures" / "tune" / "methods"
SEARCH = json.loads((METHODS_DIR / "methods_search.json").read_text(encoding="utf-8"))


def test_the_committed_search_ran_on_the_committed_profile_and_one_question_per_group():
    profile = json.loads((METHODS_DIR / "profile-smollm2-135m-instruct-1thread.json").read_text(encoding="utf-8"))
    assert SEARCH["profile"] == profile and len(profile["kv_lengths"]) >= 2
    assert SEARCH["model"] == "smollm2-135m-instruct" and SEARCH["dataset"] == "spec_bench"
    assert set(SEARCH["methods"]) == set(methods_where(lambda m: m.budget is not None))  # every rival with a budget
    assert not set(SEARCH["search_sample_ids"]) & set(SEARCH["heldout_sample_ids"])
    # A Spec-Bench sample id is <category>-<question id>: one search question per group.
    groups = [GROUP_OF[str(i).rsplit("-", 1)[0]] for i in SEARCH["search_sample_ids"]]
    assert sorted(groups) == sorted(GROUPS)
    heldout = [GROUP_OF[str(i).rsplit("-", 1)[0]] for i in SEARCH["heldout_sample_ids"]]
    assert sorted(heldout) == sorted([*GROUPS, *GROUPS])


@pytest.mark.parametrize("method", sorted(SEARCH["methods"]))
def test_every_committed_prediction_recomputes_from_the_committed_search_rows_and_the_winner_is_the_top(method):
    candidates = SEARCH["candidates"][method]
    declared = [candidate_key(c) for c in candidate_grid(get_method(method).budget.values)]
    assert sorted(c["key"] for c in candidates) == sorted(declared)
    for candidate in candidates:
        rows = load_rows(METHODS_DIR / "search_rows" / candidate["cell"])
        arm, ar = paired_rows(rows, method, SEARCH["search_sample_ids"])
        assert len(arm) == candidate["units"] > 0
        assert candidate["outputs_equal_ar"] == candidate["units"]  # exact at every candidate
        assert candidate["predicted_speedup"] == pytest.approx(predicted_speedup(arm, ar, SEARCH["profile"]))
    winner = SEARCH["winners"][method]
    assert winner["predicted_speedup"] == max(c["predicted_speedup"] for c in candidates)
    assert winner["key"] == candidates[0]["key"] and candidates[0]["rank"] == 1


def test_the_committed_tuned_leaderboard_recomputes_from_the_committed_held_out_rows():
    if not (METHODS_DIR / "leaderboard.csv").is_file():
        pytest.skip("the timed held-out check is not committed yet (scripts/tune_methods_reference.sh --search-from)")
    record = json.loads((METHODS_DIR / "methods_record.json").read_text(encoding="utf-8"))
    assert record["winners"] == SEARCH["winners"]  # the held-out check reused the committed search
    cells = record["heldout"]["cells"]
    rows = {which: load_rows(METHODS_DIR / "heldout_rows" / cell) for which, cell in cells.items()}
    configured = {which: {m: v[which]["settings"] for m, v in record["heldout"]["methods"].items()} for which in cells}
    again = heldout_methods(rows, record["methods"], record["heldout"]["sample_ids"], record["profile"], configured)
    assert json.dumps(again, sort_keys=True) == json.dumps(record["heldout"]["methods"], sort_keys=True)
    committed = pd.read_csv(METHODS_DIR / "leaderboard.csv", dtype=str, keep_default_na=False)
    pd.testing.assert_frame_equal(committed, leaderboard_table(record).astype(str))


def test_docs_quote_the_committed_search_declarations():
    """docs/tuning.md's list of the declared winners and predictions is the committed record's."""
    from lade_bench.methods import method_label

    text = " ".join((REPO / "docs" / "tuning.md").read_text(encoding="utf-8").split())
    for method, candidates in SEARCH["candidates"].items():
        winner = SEARCH["winners"][method]
        defaults = next(c for c in candidates if c["defaults"])
        label = method_label(method).split(" (")[0]
        quoted = f"{label} {winner['key']} {winner['predicted_speedup']:.3f}x ({defaults['predicted_speedup']:.3f}x)"
        assert quoted in text, quoted


def test_docs_quote_the_committed_held_out_check():
    """docs/tuning.md's held-out numbers (defaults -> tuned, measured with intervals and n) are the committed
    leaderboard's, and its verdicts against AR are the intervals' (stats.speedup_verdict)."""
    from lade_bench.stats import speedup_verdict

    table = pd.read_csv(METHODS_DIR / "leaderboard.csv", dtype=str, keep_default_na=False)
    text = " ".join((REPO / "docs" / "tuning.md").read_text(encoding="utf-8").split())
    verdicts = {}
    for _, row in table.iterrows():
        quoted = f"{row['Method']} {row['Defaults: measured vs AR']} → {row['Tuned: measured vs AR']}"
        assert quoted in text, quoted
        for which in ("Defaults", "Tuned"):
            low, high = (float(x) for x in row[f"{which}: measured vs AR"].split("[")[1].split("]")[0].split(","))
            verdicts[(row["Method"], which)] = speedup_verdict(low, high)
    expected = {
        ("Prompt lookup", "Tuned"): "faster",
        ("Prompt lookup", "Defaults"): "cannot tell",
        ("SuffixDecoding", "Defaults"): "cannot tell",
        ("SuffixDecoding", "Tuned"): "cannot tell",
        ("PIA (Ant trie lookahead)", "Defaults"): "slower",
        ("PIA (Ant trie lookahead)", "Tuned"): "cannot tell",
    }
    expected |= {(m, w): "slower" for m in ("Token Recycling", "SAM-Decoding", "REST") for w in ("Defaults", "Tuned")}
    assert verdicts == expected


def test_docs_quote_the_committed_profiles_eight_token_step_cost():
    """docs/tuning.md's 8-token step cost relative to a one-token step is the committed profile's, at its context."""
    profile = json.loads((METHODS_DIR / "profile-smollm2-135m-instruct-1thread.json").read_text(encoding="utf-8"))
    counts, times = profile["token_counts"], profile["forward_time_s"]
    ratio = times[counts.index(8)] / times[counts.index(1)]
    text = " ".join((REPO / "docs" / "tuning.md").read_text(encoding="utf-8").split())
    assert f"an 8-token step costs {ratio:.2f}x a one-token step ({profile['context_tokens']} cached tokens)" in text
