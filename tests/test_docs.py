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
    grid = [m for m in registered_methods() if runs_on_one_model(m) and m.name != REFERENCE and m.exact]
    expected = {_short(m.label).lower() for m in grid}
    assert listed == expected
    count = len(_grid_architectures())
    assert f"on {NUMBER_WORDS[count]} tiny architectures" in bullet.group(1)
    for method in registered_methods():
        if not runs_on_one_model(method):
            assert f"`{method.name}`" in bullet.group(1), f"{method.name}: its exactness test is not named"


README = ROOT / "README.md"
DECODING = ROOT / "src" / "lade_bench" / "decoding"
SETUP = "bash scripts/setup.sh && .venv/bin/python -m "
TWO_COMMANDS = [
    "```bash",
    SETUP + "lade_bench.run        # set up, then the main job on the embedded SmolLM2",
    SETUP + "pytest                # set up, then the tests (CPU only, no network)",
    "```",
]
# Issue 66: "at most about 250 lines"; history, timings and long explanations live in docs/.
README_MAX_LINES = 250
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _readme_section(heading: str) -> str:
    """The README's section under ``## heading``, up to the next ``## ``."""
    text = README.read_text(encoding="utf-8")
    assert f"\n## {heading}\n" in text, f"README has no '## {heading}' section"
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_opens_with_the_two_commands_and_stays_short():
    """A newcomer's first lines are the two commands; the rest fits a ten-minute read."""
    lines = README.read_text(encoding="utf-8").splitlines()
    assert lines[: len(TWO_COMMANDS)] == TWO_COMMANDS
    assert len(lines) <= README_MAX_LINES, f"README has {len(lines)} lines, at most {README_MAX_LINES}"


def test_the_readme_map_names_every_room_of_the_engine_and_every_method():
    """Every folder of decoding/ (a room) and every registered method's name appear in the Map; every
    method has its row in the methods table, with a page that exists."""
    rooms = sorted(p.name for p in DECODING.iterdir() if (p / "__init__.py").is_file())
    assert rooms, DECODING
    the_map = _readme_section("Map")
    for room in rooms:
        assert re.search(rf"^\s+{room}/\s", the_map, re.M), f"the Map does not name decoding/{room}/"
    words = set(re.findall(r"[a-z_]+", the_map))
    table = {}
    for line in _readme_section("The methods").splitlines():
        if line.startswith("| `"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            for name in re.findall(r"`([a-z_]+)`", cells[0]):
                table[name] = cells[-1]
    for method in registered_methods():
        assert method.name in words, f"the Map does not name the method {method.name}"
        assert method.name in table, f"the methods table has no row for {method.name}"
        (page,) = LINK.findall(table[method.name])
        assert (README.parent / page).is_file(), (method.name, page)


def test_the_readme_points_to_where_its_moved_text_lives_and_names_only_what_exists():
    """The README links the pages its history, timings and results moved to (issue 66); each ``python -m
    lade_bench...`` and ``bash scripts/...`` it names is a module or script here; and every relative link
    of the README and of a docs page names a file that exists (anchors aside)."""
    text = README.read_text(encoding="utf-8")
    links = set(LINK.findall(text))
    assert {"docs/testing.md", "docs/reference_results.md", "docs/README.md"} <= links
    modules = set(re.findall(r"python -m (lade_bench[\w.]*)", text))
    assert {"lade_bench.run", "lade_bench.status", "lade_bench.report"} <= modules
    for module in modules:
        path = ROOT / "src" / Path(*module.split("."))
        assert path.with_suffix(".py").is_file() or (path / "__main__.py").is_file(), module
    for script in set(re.findall(r"bash (scripts/[\w.]+)", text)):
        assert (ROOT / script).is_file(), script
    for document in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(document.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            assert (document.parent / target.split("#", 1)[0]).exists(), (document.name, target)


def test_the_numbers_the_readme_states_are_the_configs_and_the_code():
    """The default job's numbers (questions, N/W/G, tokens), the interval rule's sample count, the exit
    code of an unfinished launch and the torch pin are read from the composed config and the code."""
    from hydra import compose, initialize_config_dir

    from lade_bench.conf import PACKAGE_CONF_DIR
    from lade_bench.runner import register_configs
    from lade_bench.runner.launch_plan import INCOMPLETE_EXIT
    from lade_bench.stats.rules import MIN_CI_UNITS

    register_configs()
    with initialize_config_dir(config_dir=str(PACKAGE_CONF_DIR), version_base=None):
        cfg = compose(config_name="config")
    text = _flat(README.read_text(encoding="utf-8"))
    look = cfg.lookahead
    assert list(cfg.arms) == ["ar", "lookahead"] and cfg.dataset.name == "mt_bench" and look.prompt_as_reference
    assert (
        f"SmolLM2 on the first {cfg.dataset.limit} MT-Bench questions (both turns), greedy, AR and lookahead at "
        f"N={look.ngram}/W={look.window}/G={look.guesses} with prompt as reference, {cfg.max_new_tokens} new tokens"
    ) in text
    quoted = re.findall(r"(?:no interval below|none from fewer than) (\d+) samples", text)
    assert quoted and set(quoted) == {str(MIN_CI_UNITS)}
    assert f"(exit {INCOMPLETE_EXIT})" in text
    pin = re.search(r'"(torch==[\d.]+)"', (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8"))
    assert pin and f"`{pin.group(1)}`" in text
