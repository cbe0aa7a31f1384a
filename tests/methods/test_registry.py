"""The registry's lookups and errors, and what the committed results show of it.

No test here lists the methods: each reads the registry, so a new method needs no edit here. The
published names, labels, colours and order are protected by the committed results themselves: every
arm of a committed table is registered, its table shows the registry's label in registration order,
and its figure draws it in the registry's colour.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zlib
from pathlib import Path

import pandas as pd
import pytest
from matplotlib.colors import to_hex

from lade_bench.methods import (
    DRAFT,
    PIPELINE_PARALLEL,
    REFERENCE,
    REPLICA,
    TENSOR_PARALLEL,
    Method,
    UnknownMethodError,
    bind_method,
    get_method,
    method_color,
    method_label,
    method_names,
    method_rank,
    register,
    registered_methods,
    runs_on_one_model,
    sort_methods,
    unregister,
)
from lade_bench.report.spec_bench_board import FIGURE, LEADERBOARD

PAPER_FIGURES = Path(__file__).resolve().parents[2] / "paper_figures"
# Every committed report folder: tables/cells_summary.csv beside tables/main_speedup.md and figures/.
REPORTS = sorted(path.parents[1] for path in PAPER_FIGURES.rglob("tables/cells_summary.csv"))


def _never_run(request):
    raise AssertionError("never run")


def _table_methods(table: Path) -> list[list[str]]:
    """The Method column of a committed markdown table, one list per cell (rows of one cell are consecutive)."""
    lines = [line for line in table.read_text().splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    method = header.index("Method")
    keys = [i for i, name in enumerate(header) if name in ("Sweep", "Model", "Dataset", "CPU", "Mode", "Selection")]
    cells: dict[tuple[str, ...], list[str]] = {}
    for line in lines[2:]:
        row = [cell.strip() for cell in line.strip("|").split("|")]
        cells.setdefault(tuple(row[i] for i in keys), []).append(row[method])
    return list(cells.values())


def _pdf_fill_colours(pdf: Path) -> set[str]:
    """The fill colours (``r g b rg`` operators) of a matplotlib PDF's content streams, as hex."""
    data = pdf.read_bytes()
    colours = set()
    for stream in re.finditer(rb"stream\r?\n(.*?)\r?\nendstream", data, re.S):
        try:
            content = zlib.decompress(stream.group(1))
        except zlib.error:
            continue  # an image or font stream
        for rgb in re.findall(rb"([0-9.]+) ([0-9.]+) ([0-9.]+) rg", content):
            colours.add(to_hex(tuple(float(x) for x in rgb)))
    return colours


def test_there_are_committed_reports_to_check():
    assert len(REPORTS) >= 2


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.relative_to(PAPER_FIGURES).as_posix() or "main")
def test_committed_tables_and_figures_show_the_registrys_names_labels_order_and_colours(report):
    arms = set(pd.read_csv(report / "tables" / "cells_summary.csv")["arm"])
    assert arms and all(get_method(arm) for arm in arms)  # an unknown arm raises, naming the registered ones
    labels = {method_label(arm): arm for arm in arms}

    def method_of(name: str) -> str | None:
        """The label a row's name extends (methods.configuration_label names the configuration that ran:
        "SAM-Decoding (Token Recycling tree)", "PIA (Ant trie lookahead, earlier prompts not drafted)")."""
        found = [label for label in labels if name == label or name.startswith(label.removesuffix(")"))]
        return max(found, key=len) if found else None

    cells = [[method_of(name) for name in cell] for cell in _table_methods(report / "tables" / "main_speedup.md")]
    shown = {label for cell in cells for label in cell}
    leaderboard = report / "tables" / f"{LEADERBOARD.name}.md"
    if leaderboard.exists():
        # The main table shows each model's declared cell only, which never holds REST's cell; the
        # leaderboard shows every method, a lookahead entry with its setting: "Lookahead (n5-w7-g7)".
        entries = {entry for cell in _table_methods(leaderboard) for entry in cell}
        assert shown <= set(labels)
        shown |= {method_of(entry) for entry in entries} - {None}
    assert shown == set(labels)
    for cell in cells:
        ranks = [method_rank(labels[label]) for label in cell]
        assert ranks == sorted(ranks), cell  # registration order is the reading order
    drawn = _pdf_fill_colours(report / "figures" / "speedup_bars.pdf")
    if leaderboard.exists():
        drawn |= _pdf_fill_colours(report / "figures" / f"{FIGURE}.pdf")
    for arm in arms - {REFERENCE}:
        assert method_color(arm).lower() in drawn, (arm, method_color(arm), drawn)


def test_entries_are_consistent_with_what_reads_them():
    roles = {REPLICA, TENSOR_PARALLEL, DRAFT, PIPELINE_PARALLEL}
    assert method_names()[0] == REFERENCE
    assert len({m.color.lower() for m in registered_methods()}) == len(method_names())
    for method in registered_methods():
        assert set(method.models) <= roles, method.name
        # The scaling figure draws methods that spread over devices.
        if method.scaling_label is not None:
            assert method.every_rank or not runs_on_one_model(method), method.name
        # A method that feeds its own mask feeds more than one token a step: the position checks need its reach.
        if method.custom_mask:
            assert method.reach is not None, method.name


def test_unknown_names_list_the_registered_ones_and_the_closest():
    name = max(method_names(), key=len)
    typo = name[:-2] + name[-1]
    with pytest.raises(UnknownMethodError) as info:
        get_method(typo)
    assert f"did you mean {name!r}?" in str(info.value)
    assert f"expected one of [{', '.join(method_names())}]" in str(info.value)


def test_register_refuses_bad_and_duplicate_names_and_taken_colours():
    with pytest.raises(ValueError, match="lowercase"):
        register(Method("My-Method", _never_run, label="x", color="#000001"))
    with pytest.raises(ValueError, match="already registered"):
        register(Method(REFERENCE, _never_run, label="x", color="#000001"))
    other = registered_methods()[-1]
    with pytest.raises(ValueError, match=f"color '{other.color.upper()}' is already '{other.name}'"):
        register(Method("zz_toy", _never_run, label="Toy", color=other.color.upper()))
    register(Method("zz_toy", _never_run, label="Toy", color="#000001"))
    try:
        assert method_names()[-1] == "zz_toy"
        first, last = method_names()[0], method_names()[-2]
        assert sort_methods(["zz_toy", "unknown", last, first]) == [first, last, "zz_toy", "unknown"]
    finally:
        unregister("zz_toy")
    assert "zz_toy" not in method_names()


def test_a_config_section_is_declared_with_its_entry():
    from dataclasses import dataclass

    @dataclass
    class ToyConfig:
        depth: int = 3

    toy = Method("zz_toy", _never_run, label="Toy", color="#000001", config=ToyConfig)
    assert toy.sections == ("zz_toy",)
    with pytest.raises(ValueError, match="not a dataclass"):
        Method("zz_toy", _never_run, label="Toy", color="#000001", config=dict)


def test_unregistered_arms_of_old_rows_keep_their_name_and_get_no_colour():
    assert method_label("retired_arm") == "retired_arm" and method_color("retired_arm") is None


def test_bind_refuses_a_method_that_needs_more_than_one_model():
    method = next(m for m in registered_methods() if not runs_on_one_model(m))
    with pytest.raises(ValueError, match=method.models[0]):
        bind_method(method.name, model=None, max_new_tokens=4)


def test_reading_the_registry_imports_no_torch():
    """The plan checks, the row schema and the config schema read the registry before any model loads:
    an entry (or the engine constants its config section reads) that imports torch slows every typo."""
    probe = "import sys, lade_bench.methods, lade_bench.runner.config_schema; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_configuration_label_is_the_label_without_a_describe_hook_or_a_section():
    from lade_bench.methods.registry import configuration_label, method_label

    assert configuration_label("not_a_method", {"x": 1}) == "not_a_method"
    assert configuration_label("ar", None) == method_label("ar")
    assert configuration_label("ar", {}) == method_label("ar")
