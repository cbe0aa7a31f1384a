"""The cell-id compatibility table (``runner.id_compat``): the plan reads it, every committed cell recomputes
to its recorded id through it, and each entry keeps some old id (so the table cannot rot)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from omegaconf import OmegaConf

from lade_bench.datasets import get_spec
from lade_bench.methods import get_method, method_names
from lade_bench.results import cell_id
from lade_bench.runner.id_compat import ID_COMPAT, LEGACY_SECTION, IdCompat, leave_out_defaults, setting_value
from lade_bench.runner.plan import plan_cell, semantic_config

from .conftest import REPO, TINY

SECTIONS = {section for name in method_names() for section in get_method(name).sections}
PLAN_ENTRIES = [e for e in ID_COMPAT if e.setting.split(".")[0] not in SECTIONS]
SECTION_ENTRIES = [e for e in ID_COMPAT if e.setting.split(".")[0] in SECTIONS]
# For each entry on a method's section: the arm that reads it and the setting away from its default.
# A nonexistent corpus is no cell (the plan refuses it), but it is hashed as written: enough to see the key.
SECTION_WITNESSES = {
    "lookahead.verification": (("ar", "lookahead"), "lookahead.verification=trie"),
    "sam_decoding.static_datastore": (("ar", "sam_decoding"), "sam_decoding.static_datastore=/nonexistent/corpus"),
}


@pytest.fixture(scope="module")
def committed(tmp_path_factory):
    """(plan, cell record) of every committed cell (the paper figures, the baselines, the tuner's held-out
    cells), each planned once for every test here."""
    root = tmp_path_factory.mktemp("runs")
    plans = []
    for index in sorted((REPO / "paper_figures").glob("**/cells.json")):
        for cell in json.loads(index.read_text()):
            cfg = OmegaConf.create(cell["config_text"])
            # Neither changes the id; a sandbox-less host must still plan the code datasets' cells.
            cfg.output_root, cfg.sandbox.allow_unsandboxed = str(root), True
            plans.append((plan_cell(cfg), cell))
    return plans


def _semantic(plan, compat=ID_COMPAT) -> dict:
    """The plan's semantic config recomputed with ``compat`` as the table."""
    dtype = str(plan.dtype).removeprefix("torch.")
    return semantic_config(plan.cfg, plan.arms, plan.dataset_spec, plan.device.type, dtype, plan.compile_mode, compat)


def test_every_committed_cell_plans_to_its_recorded_id_and_folder_through_the_table(committed):
    """Those with a lookahead arm (whose shape the id hashes) and those without (Spec-Bench's REST cells)."""
    with_lookahead = ["lookahead" in plan.arms for plan, _ in committed]
    assert any(with_lookahead) and not all(with_lookahead)
    for plan, cell in committed:
        assert (plan.cell_id, plan.cell_dir.name) == (cell["cell_id"], cell["cell_dir"]), cell["cell_dir"]
        assert plan.legacy_id is None and cell_id(_semantic(plan)) == plan.cell_id
        # Without the table every plan-level setting is hashed, and the table takes out what it must.
        full = _semantic(plan, compat=())
        assert all(setting_value(full, entry.setting)[0] for entry in PLAN_ENTRIES), cell["cell_dir"]
        assert leave_out_defaults(full) == plan.semantic


@pytest.mark.parametrize("entry", ID_COMPAT, ids=lambda e: e.setting)
def test_each_entry_keeps_committed_ids(committed, entry):
    """Dropping the entry from the table changes committed ids, and only of cells at its default: the
    table is the one place the rule lives (a method's ``hashed`` does not apply it a second time)."""
    without = [e for e in ID_COMPAT if e != entry]
    changed = [plan for plan, cell in committed if cell_id(_semantic(plan, without)) != cell["cell_id"]]
    assert changed, f"{entry.setting}: no committed cell keeps its id by this entry"
    for plan in changed:
        assert setting_value(_semantic(plan, compat=()), entry.setting) == (True, entry.default), plan.cell_dir.name


def test_every_section_entry_has_a_witness():
    assert set(SECTION_WITNESSES) == {e.setting for e in SECTION_ENTRIES}


@pytest.mark.parametrize("entry", SECTION_ENTRIES, ids=lambda e: e.setting)
def test_each_section_entry_is_left_out_only_at_its_default(compose_cfg, entry):
    """A method's setting enters a cell with its arm away from the default, and the table takes it (and
    what means nothing without it) out at the default."""
    arms, away = SECTION_WITNESSES[entry.setting]
    cfg = compose_cfg([*TINY, f"arms=[{','.join(arms)}]"])
    spec = get_spec(cfg.dataset.name)
    default = semantic_config(cfg, arms, spec, "cpu", "float64")
    assert not any(setting_value(default, path)[0] for path in (entry.setting, *entry.with_it))
    moved = semantic_config(compose_cfg([*TINY, f"arms=[{','.join(arms)}]", away]), arms, spec, "cpu", "float64")
    found, value = setting_value(moved, entry.setting)
    assert found and value != entry.default and all(setting_value(moved, path)[0] for path in entry.with_it)
    section, key = entry.setting.split(".", 1)
    back = {**moved, section: {**moved[section], key: entry.default}}
    assert leave_out_defaults(back) == default
    assert leave_out_defaults(back, [e for e in ID_COMPAT if e != entry]) != default


def test_a_new_entry_is_read_by_the_plan(compose_cfg):
    """The plan reads the table it is given: an entry for a setting every cell hashes takes it out at its
    default, and the id is then the one without the setting."""
    plan = plan_cell(compose_cfg(TINY))
    toy = IdCompat("max_new_tokens", "a test", plan.counts.max_new_tokens, "a toy entry")
    semantic = _semantic(plan, compat=(*ID_COMPAT, toy))
    assert "max_new_tokens" not in semantic and "max_new_tokens" in plan.semantic
    assert _semantic(plan, compat=(*ID_COMPAT, replace(toy, default=-1))) == plan.semantic


def test_the_table_leaves_its_input_alone_and_skips_what_is_absent():
    semantic = {"dataset": {"name": "x", "offset": 0}, "compile": False, "compile_options": {"mode": None}}
    before = json.dumps(semantic)
    assert leave_out_defaults(semantic) == {"dataset": {"name": "x"}}
    assert json.dumps(semantic) == before
    assert leave_out_defaults({"arms": ["ar"]}) == {"arms": ["ar"]}  # no entry's setting there: unchanged


def test_the_docs_show_the_table():
    """docs/results.md (cell ids) lists every entry with its commit and default, and the legacy rule."""
    text = (REPO / "docs" / "results.md").read_text()
    for entry in ID_COMPAT:
        assert f"| `{entry.setting}` | {entry.since} | `{json.dumps(entry.default)}` |" in text, entry.setting
    assert LEGACY_SECTION.until in text and "runner/id_compat.py" in text
