"""The package layout keeps its one-way, public seams: no private module or name used across packages."""

from __future__ import annotations

import re
from pathlib import Path

import lade_bench

PACKAGE = Path(lade_bench.__file__).resolve().parent
_IMPORT = re.compile(r"^\s*from lade_bench\.([a-z_]+)((?:\.[a-z_0-9]+)*) import ([^\n#]+)", re.MULTILINE)


def _cross_package_private_imports() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        here = path.relative_to(PACKAGE).parts[0].removesuffix(".py")
        for match in _IMPORT.finditer(path.read_text(encoding="utf-8")):
            package, submodules, names = match.groups()
            if package == here:
                continue  # a package may use its own private modules
            private_module = any(part.startswith("_") for part in submodules.split(".") if part)
            private_name = re.search(r"(^|[\s,(])_[a-zA-Z]", names)
            if private_module or private_name:
                where = path.relative_to(PACKAGE)
                found.append(f"{where}: from lade_bench.{package}{submodules} import {names.strip()}")
    return found


def test_no_private_module_or_name_is_imported_across_packages():
    assert _cross_package_private_imports() == []


def test_the_decoding_package_exports_every_lazy_name_and_each_resolves():
    import lade_bench.decoding as decoding

    exports = decoding._EXPORTS  # noqa: SLF001 - the table the lazy __getattr__ reads
    assert sorted(decoding.__all__) == sorted(exports)
    for name in decoding.__all__:
        assert getattr(decoding, name) is not None


def test_the_docs_index_lists_every_page():
    """docs/README.md is the one index of the docs: a page missing from it is a page nobody finds."""
    docs = PACKAGE.parents[1] / "docs"
    index = (docs / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([a-z_]+\.md)\)", index))
    pages = {path.name for path in docs.glob("*.md")} - {"README.md"}
    assert pages - linked == set(), "pages missing from docs/README.md"
    assert linked - pages == set(), "docs/README.md links pages that do not exist"


# The engine's rooms, lowest first: a module may import from its own room and the rooms before it.
DECODING_ROOMS = ("core", "model_checks", "lookahead", "drafters", "baselines")
_DECODING_IMPORT = re.compile(r"^\s*(?:from|import) lade_bench\.decoding\.([a-z_]+)", re.MULTILINE)


def _decoding_room_violations() -> list[str]:
    found = []
    decoding = PACKAGE / "decoding"
    for path in sorted(decoding.rglob("*.py")):
        parts = path.relative_to(decoding).parts
        if len(parts) == 1:
            continue  # the package's own __init__: the lazy public names of every room
        here = DECODING_ROOMS.index(parts[0])
        for room in _DECODING_IMPORT.findall(path.read_text(encoding="utf-8")):
            if room not in DECODING_ROOMS:
                found.append(f"{path.relative_to(PACKAGE)}: imports lade_bench.decoding.{room}, in no room")
            elif DECODING_ROOMS.index(room) > here:
                found.append(f"{path.relative_to(PACKAGE)}: {parts[0]} imports the higher room {room}")
    return found


def test_every_decoding_module_lives_in_a_room_and_imports_only_downwards():
    """decoding/ is rooms of one kind each; an import from a higher room would make the order a circle."""
    decoding = PACKAGE / "decoding"
    loose = sorted(p.name for p in decoding.glob("*.py") if p.name != "__init__.py")
    assert loose == [], "modules outside the rooms"
    assert sorted(p.name for p in decoding.iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(
        DECODING_ROOMS
    )
    assert _decoding_room_violations() == []


# The one module outside decoding/ the engine may import: the datastore's reader (the file a drafter reads).
DATASTORE_READER = "lade_bench.rest_datastore.reader"


def _lade_imports(path: Path, *, module_level_only: bool = False) -> list[str]:
    """The ``lade_bench`` modules ``path`` imports (``from lade_bench import x`` counts as ``lade_bench.x``);
    ``module_level_only``: those run on import, not inside a function."""
    import ast

    found = []
    nodes: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    while nodes:
        node = nodes.pop()
        if module_level_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [alias.name for alias in node.names]
            found += [f"{node.module}.{name}" for name in names] if node.module == "lade_bench" else [node.module]
        nodes.extend(ast.iter_child_nodes(node))
    return sorted(name for name in found if name == "lade_bench" or name.startswith("lade_bench."))


def _module_file(name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, name
    return Path(spec.origin)


def test_the_engine_imports_nothing_of_lade_bench_but_itself_and_the_datastore_reader():
    """The engine is the bottom of the house: decoding/ may read a datastore's files through the reader, and
    nothing else outside decoding/ (no build, leak check, plan or runner), so no arrow points back up."""
    outside = [
        f"{path.relative_to(PACKAGE)}: imports {name}"
        for path in sorted((PACKAGE / "decoding").rglob("*.py"))
        for name in _lade_imports(path)
        if not name.startswith("lade_bench.decoding") and name != DATASTORE_READER
    ]
    assert outside == []


def test_the_datastore_reader_imports_no_lade_bench_module_on_import():
    """The reader sits beside the engine: importing it loads no other lade_bench module (none of the build or
    check side), and what it imports inside a function (a message's conf/model lookup) is a leaf module that
    itself imports no lade_bench module on import, so nothing above the engine."""
    reader = _module_file(DATASTORE_READER)
    assert _lade_imports(reader, module_level_only=True) == []
    lazy = _lade_imports(reader)
    not_leaves = {name: _lade_imports(_module_file(name), module_level_only=True) for name in lazy}
    assert {name: found for name, found in not_leaves.items() if found} == {}
