"""The report depends on the tuner's outputs (files), never on its code: tune -> report, one way."""

from __future__ import annotations

import ast
from pathlib import Path

import lade_bench.report


def _imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_report_module_imports_the_tuner():
    sources = sorted(Path(lade_bench.report.__file__).parent.glob("*.py"))
    assert sources
    offenders = {path.name: sorted(m for m in _imported_modules(path) if _is_tuner(m)) for path in sources}
    assert {name: mods for name, mods in offenders.items() if mods} == {}


def _is_tuner(module: str) -> bool:
    return module == "lade_bench.tune" or module.startswith("lade_bench.tune.")
