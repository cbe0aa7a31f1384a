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
