"""The runner's structure (issue 49): the plan names no method, cell ids hash only the arms' sections,
model roles are registry entries, and no module of ``runner/`` imports another that imports it back."""

from __future__ import annotations

import ast
import logging

import pandas as pd
import pytest

from lade_bench.decoding import DecodingConfigError
from lade_bench.methods import REPLICA, CellFacts, Method, get_method, method_names, register, unregister
from lade_bench.report.figures import draw_accept_histogram
from lade_bench.runner.cell import load_cell_model
from lade_bench.runner.id_compat import leave_out_defaults
from lade_bench.runner.legacy_ids import legacy_cell
from lade_bench.runner.plan import CellConfigError, plan_cell, readable_cell_name
from lade_bench.runner.roles import ModelRole, register_role, role_names, unregister_role

from .conftest import REPO, TINY

RUNNER = REPO / "src" / "lade_bench" / "runner"
NO_LOOKAHEAD = [*TINY, "arms=[ar,jacobi]"]


def test_a_cell_without_a_lookahead_arm_neither_hashes_nor_names_its_shape(compose_cfg, tmp_path):
    root = f"output_root={tmp_path}"
    plain = plan_cell(compose_cfg([*NO_LOOKAHEAD, root]))
    wider = plan_cell(compose_cfg([*NO_LOOKAHEAD, root, "lookahead.window=3", "lookahead.verification=trie"]))
    assert "lookahead" not in plain.semantic and "lookahead" not in plain.settings
    assert plain.cell_id == wider.cell_id and plain.cell_dir == wider.cell_dir
    assert plain.cell_name == "tiny-llama-mt_bench-greedy" == readable_cell_name(plain.cfg)
    # With the arm, the shape is hashed and named, and changing it makes another cell.
    with_arm = plan_cell(compose_cfg([*TINY, root, "arms=[ar,lookahead,jacobi]"]))
    other = plan_cell(compose_cfg([*TINY, root, "arms=[ar,lookahead,jacobi]", "lookahead.window=3"]))
    assert with_arm.cell_id != other.cell_id and with_arm.semantic["lookahead"]["window"] == 7
    assert "-N5W7G7ref-" in with_arm.cell_dir.name and "-N5W3G7ref-" in other.cell_dir.name


def test_a_bad_lookahead_setting_binds_only_a_cell_that_runs_lookahead(compose_cfg, tmp_path):
    bad = ["lookahead.window=0", f"output_root={tmp_path}"]
    assert plan_cell(compose_cfg([*NO_LOOKAHEAD, *bad])).arms == ("ar", "jacobi")
    with pytest.raises(DecodingConfigError, match=r"window \(W\)=0"):
        plan_cell(compose_cfg([*TINY, *bad, "arms=[ar,lookahead]"]))


def test_a_cell_recorded_under_its_old_id_is_resumed_there(compose_cfg, tmp_path, caplog):
    """A sweep recorded before issue 49 holds a no-lookahead cell under the id that hashed the lookahead
    section: the plan finds that folder, keeps its id and says so; without it, the new id."""
    cfg = compose_cfg([*NO_LOOKAHEAD, f"output_root={tmp_path}"])
    new = plan_cell(cfg)
    old = legacy_cell(cfg, new.semantic, new.sweep_root, lambda extra: readable_cell_name(cfg, new.arms, extra))
    assert old is not None and old.cell_id != new.cell_id
    assert old.cell_dir.name == f"tiny-llama-mt_bench-N5W7G7ref-greedy-{old.cell_id}"  # the name it had
    # The section as lookahead hashes it, then the cell-id compatibility table, as for every cell.
    assert old.semantic == leave_out_defaults(
        {
            **new.semantic,
            "lookahead": get_method("lookahead").hashed(
                "lookahead",
                {
                    "ngram": 5,
                    "window": 7,
                    "guesses": 7,
                    "prompt_as_reference": True,
                    "verification": "flat",
                    "devices": 1,
                },
            ),
        }
    )
    assert old.semantic["lookahead"] == {"ngram": 5, "window": 7, "guesses": 7, "prompt_as_reference": True}
    old.cell_dir.mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="lade_bench.runner.legacy_ids"):
        found = plan_cell(cfg)
    assert (found.cell_id, found.cell_dir, found.legacy_id, found.semantic) == (
        old.cell_id, old.cell_dir, old.cell_id, old.semantic)  # fmt: skip
    message = caplog.text
    assert old.cell_id in message and new.cell_id in message and "Delete or move that folder" in message


def test_the_histogram_names_a_shape_only_for_a_cell_with_lookahead():
    """A committed cell's rows (SmolLM2, MT-Bench, four arms): without its lookahead rows the accept-length
    panel names no N/W/G; with them it names the cell's shape."""
    rows = pd.read_parquet(REPO / "paper_figures" / "rows" / "main" / "rows.parquet")
    cell = rows[rows["cell_id"] == "8119977b083d56c7"]
    assert {"lookahead", "jacobi", "prompt_lookup"} <= set(cell["arm"])
    without = draw_accept_histogram(cell[cell["arm"] != "lookahead"], "title", "context")
    titles = [ax.get_title() + ax.get_legend().get_title().get_text() for ax in without.axes if ax.get_legend()]
    assert titles and not any("N=" in title for title in titles)
    with_lookahead = draw_accept_histogram(cell, "title", "context")
    assert any("N=5 W=7 G=7" in ax.get_title() for ax in with_lookahead.axes)


def test_a_model_role_is_one_registry_entry(compose_cfg, tmp_path):
    """A toy method running a toy role: the cell loads the role through its entry, beside the replica."""
    assert set(role_names()) >= {role for name in method_names() for role in get_method(name).models}
    loaded = []

    def load_toy(plan, cell_model, ranks):
        loaded.append(plan.cell_id)
        return ("toy", cell_model.model.config.vocab_size)  # the replica loads first and is there

    toy = Method("toy_role_user", get_method("ar").generate, label="Toy", color="#000001", models=(REPLICA, "toy"))
    register(toy)
    try:
        cfg = compose_cfg([*TINY, f"output_root={tmp_path}", "arms=[ar,toy_role_user]"])
        with pytest.raises(CellConfigError, match=r"model role 'toy'.*registered roles: \['replica'"):
            load_cell_model(plan_cell(cfg), None)
        register_role(ModelRole("toy", load_toy))
        plan = plan_cell(cfg)
        cell_model = load_cell_model(plan, None)
        assert loaded == [plan.cell_id] and set(cell_model.models) == {REPLICA, "toy"}
        assert cell_model.models["toy"] == ("toy", cell_model.model.config.vocab_size)
    finally:
        unregister(toy.name)
        unregister_role("toy")


def _runner_imports() -> dict[str, set[str]]:
    """``runner`` module -> the ``runner`` modules it imports anywhere (top level, functions, TYPE_CHECKING)."""
    graph = {}
    for path in RUNNER.glob("*.py"):
        name = "lade_bench.runner" if path.stem == "__init__" else f"lade_bench.runner.{path.stem}"
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "lade_bench.runner":
                imported |= {f"lade_bench.runner.{alias.name}" for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lade_bench.runner."):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names if alias.name.startswith("lade_bench.runner.")}
        graph[name] = imported & {f"lade_bench.runner.{p.stem}" for p in RUNNER.glob("*.py")}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order), or None."""
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return [*path[path.index(nxt) :], nxt] if nxt in path else [node, nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = "done"
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_no_module_of_the_runner_imports_one_that_imports_it_back():
    graph = _runner_imports()
    assert "lade_bench.runner.cell_model" in graph["lade_bench.runner.arms"]  # the graph sees imports
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]  # and the search finds cycles
    assert _cycle(graph) is None


def test_the_plan_names_no_method():
    """The plan, the cell and the sample fitting read methods through the registry, never by name."""
    names = set(method_names())
    for module in ("plan.py", "cell.py", "samples.py"):
        tree = ast.parse((RUNNER / module).read_text())
        strings = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in names}
        attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in names}
        assert not strings | attributes, f"runner/{module} names the methods {sorted(strings | attributes)}"


def test_a_refusal_gets_the_settings_its_generate_gets_and_the_cell_facts(compose_cfg, tmp_path):
    """``Method.refuse(settings, cell)``: its own sections (parsed) and ``CellFacts``, never the config."""
    asked = []

    def refuse(settings, cell):
        asked.append((dict(settings), cell))
        return "toy refusal: num_tokens=3 is too few" if settings["prompt_lookup"].num_tokens == 3 else None

    toy = Method(
        "toy_refuser",
        get_method("ar").generate,
        label="Toy refuser",
        color="#000002",
        sections=("prompt_lookup", "lookahead"),
        refuse=refuse,
    )
    register(toy)
    try:
        cfg = compose_cfg([*TINY, f"output_root={tmp_path}", "arms=[ar,toy_refuser]", "attn_implementation=eager"])
        plan = plan_cell(cfg)
        ((settings, cell),) = asked
        assert set(settings) == {"prompt_lookup", "lookahead"}  # its sections, nothing else
        assert settings["lookahead"] is plan.settings["lookahead"]  # parsed once, by lookahead's entry
        assert settings["prompt_lookup"].num_tokens == cfg.prompt_lookup.num_tokens
        assert cell == CellFacts(
            devices=1,
            device=cfg.device.value,
            attn_implementation="eager",
            model_source="tiny",
            model_name=cfg.model.name,
            compiled=False,
            dataset=cfg.dataset.name,
            dataset_path=cfg.dataset.path,
            tokenizer="embedded:smollm2",
            model_cache_dir=cfg.model_cache_dir,
        )
        assert plan.facts == cell
        with pytest.raises(CellConfigError, match="toy refusal: num_tokens=3"):
            plan_cell(
                compose_cfg([*TINY, f"output_root={tmp_path}", "arms=[ar,toy_refuser]", "prompt_lookup.num_tokens=3"])
            )
    finally:
        unregister(toy.name)


# Where the runner still reads the composed config, and why: a multi-device job's leader builds the sinks from it;
# the cell records it as composed (config.yaml, the sinks' config); the rows' lookahead-shape columns
# (the schema's "always") of a cell without a lookahead arm come from a section no arm reads.
CONFIG_READERS = {"_lead", "_run_owned_cell", "sink_config", "shape_columns"}


def test_the_runner_reads_the_plan_not_the_composed_config():
    """Outside ``plan.py`` (which builds the typed plan from it), ``.cfg`` is read only to record it."""
    readers = set()
    for path in sorted(RUNNER.glob("*.py")):
        if path.name in ("plan.py", "config_schema.py"):
            continue
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, ast.FunctionDef) and any(
                isinstance(node, ast.Attribute) and node.attr == "cfg" for node in ast.walk(function)
            ):
                readers.add(function.name)
    assert "sink_config" in readers  # the walk sees the reads
    assert readers <= CONFIG_READERS, (
        f"runner functions reading the composed config: {sorted(readers - CONFIG_READERS)}"
    )
