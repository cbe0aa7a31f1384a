import math

import pytest

from lade_bench.results import canonical_json, cell_id

CONFIG = {
    "model": "HuggingFaceTB/SmolLM2-135M",
    "dataset": {"name": "mtbench", "max_samples": 8},
    "ngram": 5,
    "window": 7,
    "guesses": 7,
    "prompt_as_reference": True,
    "do_sample": False,
    "temperature": 0.7,
    "top_p": 1.0,
    "top_k": 0,
    "seed": 0,
    "arms": ["ar", "lookahead"],
}


def test_shape_and_determinism():
    cid = cell_id(CONFIG)
    assert len(cid) == 16 and all(c in "0123456789abcdef" for c in cid)
    assert cell_id(dict(CONFIG)) == cid


def test_pinned_value():
    # Guards the canonical form itself: changing it would orphan every existing result folder.
    assert canonical_json({"b": 1.0, "a": [0.1, True, None], "c": "é"}) == '{"a":[0.1,true,null],"b":1,"c":"é"}'
    assert cell_id({"a": 1}) == "015abd7f5cc57a2d"


def test_key_order_does_not_matter():
    reordered = dict(reversed(list(CONFIG.items())))
    reordered["dataset"] = {"max_samples": 8, "name": "mtbench"}
    assert cell_id(reordered) == cell_id(CONFIG)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ngram", 6),
        ("temperature", 0.70000001),
        ("prompt_as_reference", False),
        ("model", "other"),
        ("arms", ["lookahead", "ar"]),
        ("dataset", {"name": "mtbench", "max_samples": 9}),
    ],
)
def test_changed_value_changes_id(key, value):
    assert cell_id({**CONFIG, key: value}) != cell_id(CONFIG)


def test_added_key_changes_id():
    assert cell_id({**CONFIG, "max_new_tokens": 128}) != cell_id(CONFIG)


def test_spelling_of_equal_values_does_not_matter():
    assert cell_id({**CONFIG, "top_p": 1}) == cell_id(CONFIG)
    assert cell_id({**CONFIG, "arms": ("ar", "lookahead")}) == cell_id(CONFIG)
    assert cell_id({"x": True}) != cell_id({"x": 1})


@pytest.mark.parametrize("bad", [{"t": math.nan}, {"t": math.inf}, {1: "a"}, {"t": object()}])
def test_rejects_values_without_canonical_form(bad):
    with pytest.raises(ValueError):
        cell_id(bad)
