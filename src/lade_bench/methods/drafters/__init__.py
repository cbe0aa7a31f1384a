"""The drafters' declarations, one module each, found by discovery (as the datasets' task specs are).

Each module here declares ``DRAFTER = declare_drafter(...)`` (``methods/drafter_method.py``) beside its
engine in ``lade_bench.decoding.drafters``: a new drafter is its engine file and its module here, with no list
to extend. :func:`discover_drafters` imports every module of the package in name order and keeps the
declarations; :func:`in_reading_order` places them among the other built-in methods, each after the method
its declaration names (``after``), the others last.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Sequence

from lade_bench.methods.drafter_method import DrafterDeclaration
from lade_bench.methods.registry import Method


def discover_drafters(package: str = __name__) -> list[DrafterDeclaration]:
    """The ``DRAFTER`` (a ``DrafterDeclaration``) of every module of ``package`` that declares one, by module name."""
    found = []
    for info in sorted(pkgutil.iter_modules(importlib.import_module(package).__path__), key=lambda m: m.name):
        declared = getattr(importlib.import_module(f"{package}.{info.name}"), "DRAFTER", None)
        if isinstance(declared, DrafterDeclaration):
            found.append(declared)
    return found


def in_reading_order(methods: Sequence[Method], drafters: Sequence[DrafterDeclaration]) -> list[Method]:
    """``methods`` in their order with each drafter placed right after the method its ``after`` names
    (drafters following the same one by name), and the drafters that name none last, by name.

    Raises:
        ValueError: a drafter follows a method that is neither among ``methods`` nor a drafter.
    """
    followers: dict[str | None, list[DrafterDeclaration]] = {}
    for drafter in sorted(drafters, key=lambda d: d.name):
        followers.setdefault(drafter.after, []).append(drafter)
    ordered: list[Method] = []

    def place(method: Method) -> None:
        ordered.append(method)
        for follower in followers.pop(method.name, []):
            place(follower.method)

    for method in [*methods, *(d.method for d in followers.pop(None, []))]:
        place(method)
    if followers:
        stray = {d.name: anchor for anchor, ds in followers.items() for d in ds}
        raise ValueError(
            f"drafters {stray} follow (after=) methods that are not registered; name one of "
            f"{[m.name for m in ordered]} or leave after out"
        )
    return ordered
