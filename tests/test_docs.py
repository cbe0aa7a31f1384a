"""The README and the docs say what the code does: the methods, rooms and checks they name are the real ones.

Issue 66: the README's map had fallen behind the registry (no PIA, no SAM-Decoding) and its "What it
covers" named exactness checks for three methods when the registry-wide grid checks every one. These
tests read the names from the code (the method registry, the decoding package's folders, the grid's
own list of architectures) and look for them in the text, so a method or room added later without a
word in the docs fails here.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from lade_bench.methods import REFERENCE, registered_methods, runs_on_one_model

ROOT = Path(__file__).resolve().parents[1]
TESTING = ROOT / "docs" / "testing.md"
GRID = ROOT / "tests" / "decoding" / "test_method_exactness.py"
NUMBER_WORDS = {8: "eight", 9: "nine", 10: "ten", 11: "eleven", 12: "twelve"}


def _flat(text: str) -> str:
    """The text with every run of whitespace as one space (prose wraps anywhere)."""
    return re.sub(r"\s+", " ", text)


def _short(label: str) -> str:
    """A method's label without its parenthesised gloss: 'PIA (Ant trie lookahead)' -> 'PIA'."""
    return label.split(" (")[0]


def _grid_architectures() -> tuple[str, ...]:
    """The exactness grid's ARCHITECTURES tuple, read from its source (importing it would load torch)."""
    for node in ast.parse(GRID.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ARCHITECTURES" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{GRID} defines no ARCHITECTURES")


def test_the_testing_page_names_every_method_the_exactness_grid_checks():
    """docs/testing.md lists exactly the registry's one-model methods (the grid's own selection) and
    the grid's number of architectures."""
    text = _flat(TESTING.read_text(encoding="utf-8"))
    bullet = re.search(r"\*Exactness of every registered method\*(.*?)(?= - \*)", text)
    assert bullet, "docs/testing.md has no 'Exactness of every registered method' bullet"
    named = re.search(r"runs on one model \((.*?), and any method registered later", bullet.group(1))
    assert named, bullet.group(1)[:300]
    listed = {name.strip().lower() for name in named.group(1).replace(", ", ",").split(",")}
    expected = {_short(m.label).lower() for m in registered_methods() if runs_on_one_model(m) and m.name != REFERENCE}
    assert listed == expected
    count = len(_grid_architectures())
    assert f"on {NUMBER_WORDS[count]} tiny architectures" in bullet.group(1)
    for method in registered_methods():
        if not runs_on_one_model(method):
            assert f"`{method.name}`" in bullet.group(1), f"{method.name}: its exactness test is not named"
