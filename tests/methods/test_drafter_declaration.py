"""A drafter is its engine file and one declaration, found by discovery; the declaration builds its whole entry.

What a newcomer meets (docs/adding_a_method.md): a declaration module in a package is found with no list to
extend, a hook the engine needs cannot be left out (nor one it does not take declared), every drafter's
settings refuse a bad value by name, and a toy drafter declared outside the package (``toy_drafter.py``) runs
a real generation through the registry with its state carried.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from lade_bench.decoding import DecodingConfigError, autoregressive_generate
from lade_bench.methods import REPLICA, GenerationRequest, get_method, method_color, registered_methods, run_generation
from lade_bench.methods.drafter_method import declare_drafter
from lade_bench.methods.drafters import discover_drafters, in_reading_order
from lade_bench.models.tiny import tiny_model

from ..decoding.helpers import repetitive_prompt
from . import toy_drafter

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "adding_a_method.md"


def test_a_declaration_module_in_a_package_is_found_with_no_list_to_extend(tmp_path, monkeypatch):
    package = tmp_path / "my_drafters"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "bigram.py").write_text("from tests.methods.toy_drafter import DRAFTER as DRAFTER\n")
    (package / "notes.py").write_text("WORDS = 'a module without a declaration is skipped'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert discover_drafters("my_drafters") == [toy_drafter.DRAFTER]
    # The built-in drafters are found the same way, and each registered entry is the one its declaration built.
    built_in = discover_drafters()
    assert len(built_in) >= 6
    for declared in built_in:
        assert get_method(declared.name) is declared.method


def test_a_hook_the_engine_needs_cannot_be_left_out_nor_one_it_lacks_declared():
    pieces = {
        "label": "Toy",
        "color": "#0b0b0c",
        "custom_mask": False,
        "settings": toy_drafter.BigramSettings,
        "reach": toy_drafter.bigram_reach,
    }
    # Its engine takes the cell's state: without new_state the entry would be stateless, so it is refused.
    with pytest.raises(ValueError, match="takes 'state'; declare new_state"):
        declare_drafter("zz_toy", engine=toy_drafter.bigram_generate, **pieces)

    def stateless(model, input_ids, max_new_tokens, settings=None, *, eos_token_id=None, seed=0, sampling=None):
        raise AssertionError("never run")

    with pytest.raises(ValueError, match="declares new_state .*, but .* takes no 'state'"):
        declare_drafter("zz_toy", engine=stateless, new_state=toy_drafter.new_bigram_state, **pieces)
    with pytest.raises(ValueError, match="declares compiles=True, but .* takes no 'compiled'"):
        declare_drafter("zz_toy", engine=stateless, compiles=True, **pieces)
    with pytest.raises(ValueError, match="static_state=True needs new_state"):
        declare_drafter("zz_toy", engine=stateless, static_state=True, **pieces)

    @dataclasses.dataclass
    class Unfrozen:
        depth: int = 3

    with pytest.raises(ValueError, match="settings=Unfrozen is not frozen"):
        declare_drafter("zz_toy", engine=stateless, **{**pieces, "settings": Unfrozen})
    method = declare_drafter(
        "zz_toy", engine=toy_drafter.bigram_generate, new_state=toy_drafter.new_bigram_state, **pieces
    ).method
    assert method.state == "cell" and method.new_state is not None and method.sections == ("zz_toy", "method_state")


def test_each_drafter_follows_the_method_its_declaration_names():
    built_in = [m for m in registered_methods() if m.name not in {d.name for d in discover_drafters()}]
    ordered = in_reading_order(built_in, [*discover_drafters(), toy_drafter.DRAFTER])
    assert [m.name for m in ordered] == [*(m.name for m in registered_methods()), toy_drafter.NAME]
    stray = dataclasses.replace(toy_drafter.DRAFTER, after="no_such_method")
    with pytest.raises(ValueError, match="no_such_method"):
        in_reading_order(built_in, [stray])


@pytest.mark.parametrize("declared", discover_drafters(), ids=lambda d: d.name)
def test_every_drafters_settings_are_one_frozen_object_that_refuses_a_bad_value_by_name(declared):
    settings = declared.settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.__setattr__(dataclasses.fields(settings)[0].name, None)
    number = next(f.name for f in dataclasses.fields(settings) if type(getattr(settings, f.name)) is int)
    with pytest.raises(DecodingConfigError, match=rf"{declared.name}\.{number}=-1 is not allowed"):
        declared.settings(**{number: -1})
    # The plan hears the same message through the entry's refuse, before anything loads.
    why = get_method(declared.name).refuse({declared.name: {number: -1}}, None)
    assert why is not None and f"{declared.name}.{number}=-1" in why


def test_a_toy_drafter_declared_outside_the_package_runs_with_its_state_carried():
    model = tiny_model("llama", init_scale=3.0, seed=7)
    prompt = repetitive_prompt(24, seed=5)
    reference = autoregressive_generate(model, prompt, 24).tokens
    with toy_drafter.registered() as name:
        method = get_method(name)
        state = method.new_state({})
        results = []
        for _ in range(2):
            request = GenerationRequest({REPLICA: model}, prompt, 24, settings={}, state=state)
            results.append(run_generation(method, request))
    assert [r.tokens for r in results] == [reference, reference]
    assert [r.stats["state_requests_seen"] for r in results] == [0.0, 1.0] and state.requests_seen == 2
    assert max(results[1].accept_lengths[1:]) > 1  # the warm table drafts the output it saw


def test_the_guides_example_colour_is_free_and_its_test_command_covers_the_engine_tests():
    guide = GUIDE.read_text()
    colours = set(re.findall(r'color="(#[0-9a-fA-F]{6})"', guide))
    assert not {c.lower() for c in colours} & {method_color(m.name) for m in registered_methods()}
    commands = re.findall(r"```bash\n(.*?)```", guide, re.S)[-1]
    assert "tests/decoding" in commands and "tests/methods" in commands
