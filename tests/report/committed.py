"""Shared checks of the committed-results tests: tables recomputed from committed rows equal the committed ones."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest

from lade_bench.report.build import SUMMARY_CSV


def _missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def assert_recomputes(recomputed: pd.DataFrame, committed: pd.DataFrame, columns: Sequence[str], key: str) -> None:
    """Row by row, ``columns`` agree: missing with missing, floats to 1e-9 relative, anything else exactly.

    ``key`` names each row in a failure (e.g. ``"arm"``). A float is compared to 1e-9 only because the
    CSV round trip may move its last digit; everything the tables print is far coarser.
    """
    assert len(recomputed) == len(committed)
    for new, old in zip(recomputed.to_dict("records"), committed.to_dict("records"), strict=True):
        for column in columns:
            a, b = new[column], old[column]
            if _missing(b):
                assert _missing(a), (new[key], column, a)
            elif isinstance(b, float):
                assert a == pytest.approx(b, rel=1e-9), (new[key], column)
            else:
                assert a == b, (new[key], column, a, b)


def assert_tables_recompute(new_tables: Path, old_tables: Path, key: str) -> None:
    """Every table of a rebuilt report's ``tables/`` equals the committed one; none missing or extra.

    Markdown and LaTeX byte for byte; the full-precision summary CSV column for column through
    :func:`assert_recomputes` (``key`` names a row in a failure).
    """
    names = sorted(p.name for p in new_tables.iterdir())
    assert names == sorted(p.name for p in old_tables.iterdir())
    for name in names:
        if name != SUMMARY_CSV:
            assert (new_tables / name).read_text() == (old_tables / name).read_text(), name
    recomputed, committed = pd.read_csv(new_tables / SUMMARY_CSV), pd.read_csv(old_tables / SUMMARY_CSV)
    assert list(recomputed.columns) == list(committed.columns)
    assert_recomputes(recomputed, committed, list(committed.columns), key=key)


def kept_figure(rebuilt, name: str):
    """The figure ``name`` as a rebuilt report (``build_report``'s result) drew and saved it: a test of its
    drawing reads it there instead of drawing it again from the sweep (the same function of the same rows)."""
    (output,) = [f for f in rebuilt.figures if f.name == name]
    assert output.figure is not None, name
    return output.figure


# The two models that ship offline, which every committed CPU sweep runs.
EMBEDDED_MODELS = frozenset({"smollm2-135m-instruct", "gemma3-270m"})


def assert_each_run_timed_alone(manifest: Mapping, cores: int) -> None:
    """Every run that timed the cell's rows (its ``previous_runs``, then itself) had ``cores`` cores and
    as many torch threads, and saw no other process of the suite (tests, tuner, sweep) at its start or end."""
    for run in [*(manifest.get("previous_runs") or []), manifest]:
        conditions = run["timing_conditions"]
        assert conditions["cpu_affinity_count"] == conditions["torch_threads"] == cores, manifest["cell_id"]
        for moment in ("start", "end"):  # a run killed mid-cell has no end snapshot
            assert not (conditions.get(moment) or {}).get("suite_processes"), (manifest["cell_id"], moment)


def spec_bench_cell_arms(root: Path) -> dict[str, list[str]]:
    """The arms of each of ``+sweep=spec_bench``'s cell configs (``conf/spec_bench/<variant>.yaml``), by
    variant in name order: every_method, paper_lookahead, rest, the three cells of each group. An arms list
    read from the registry (every_method's resolver) is resolved as a run resolves it."""
    from omegaconf import OmegaConf

    from lade_bench.conf import register_resolvers

    register_resolvers()
    configs = sorted((root / "conf" / "spec_bench").glob("*.yaml"))
    return {path.stem: list(OmegaConf.load(path).arms) for path in configs}


# Where the README and paper_figures/spec_bench/README.md report the Spec-Bench results: the prose
# the number and verdict checks read.
SPEC_BENCH_SECTION = (r"<!-- spec_bench -->", r"<!-- /spec_bench -->")
# A ratio as the prose quotes it (``1.23x``), and any decimal (accepted tokens, widths, ratios).
QUOTED_RATIO = r"(\d+\.\d\d)x"
QUOTED_DECIMAL = r"(?<![\d/.])(\d+\.\d+)"


def numbers_in_tables(tables: Path, number: str = r"\d+\.\d\d") -> set[str]:
    """Every number matching ``number`` (two decimals unless told) that the Markdown tables of ``tables``
    print: what the prose may quote.

    The tables print ratios without the ``x`` (``0.84 [0.73, 0.98]``); the prose marks them with it.
    """
    return {found for table in tables.glob("*.md") for found in re.findall(number, table.read_text())}


def assert_quotes_only_table_numbers(prose: str, known: set[str], where: object, quoted: str = QUOTED_RATIO) -> None:
    """``prose`` quotes at least one number matching ``quoted`` (its group 1), and every one is in ``known``."""
    found = set(re.findall(quoted, prose))
    assert found, f"{where}: the prose quotes no number"
    assert found <= known, (where, sorted(found - known))


def markdown_rows(path: Path) -> list[dict[str, str]]:
    """A generated markdown table's rows as {header: cell} (the file's first table)."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]]
