"""Cells recorded before issue 49 without a lookahead arm: found again under their old id on resume.

Until issue 49 every cell hashed the ``lookahead`` section into its id and put the lookahead shape in
its folder name (``...-N5W7G7ref-greedy-<id>``), whether or not lookahead was among its arms. Since
then a section enters the id, and a method's part the folder name, only when the method is among
the cell's arms (``runner.plan``). Cells with a lookahead arm kept their ids and names; a cell
without one has a new id. So that a sweep recorded before does not silently run such a cell again
beside its old folder, the plan looks for the folder of the old id in the sweep and, when it is
there, resumes that folder under its old id (logged as a warning naming both ids); a cell not
recorded before gets the new id. ``docs/results.md`` (cell ids) says the same for users.

The rule is ``runner.id_compat.LEGACY_SECTION``, beside the cell-id compatibility table: the section
(lookahead) every old cell hashed. This module reads that method's own hashing and name
(``Method.hashed``, ``Method.name_part``), and the old semantic config leaves out, as today's does,
every setting at the default the table gives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from lade_bench.methods import get_method, is_registered
from lade_bench.results import cell_id
from lade_bench.runner.id_compat import LEGACY_SECTION, leave_out_defaults

log = logging.getLogger(__name__)

# The section (and method) every cell hashed before issue 49, with or without its arm.
ALWAYS_HASHED_BEFORE = LEGACY_SECTION.section


@dataclass(frozen=True)
class LegacyCell:
    """A cell's identity as recorded before issue 49.

    Attributes:
        semantic: the semantic config hashed then (today's plus the lookahead section).
        cell_id: its id.
        cell_dir: its folder, ``<sweep>/<name with the lookahead shape>-<id>``.
    """

    semantic: dict[str, Any]
    cell_id: str
    cell_dir: Path


def legacy_cell(
    cfg: DictConfig, semantic: Mapping[str, Any], sweep_root: Path, name: Callable[[Sequence[str]], str]
) -> LegacyCell | None:
    """The identity the cell had before issue 49; None when it is the same as today's (a lookahead arm).

    ``name(extra)``: the cell's readable folder name with ``extra`` where the arms' parts go.
    """
    if ALWAYS_HASHED_BEFORE in semantic or not is_registered(ALWAYS_HASHED_BEFORE):
        return None
    method = get_method(ALWAYS_HASHED_BEFORE)
    section = cast(dict[str, Any], OmegaConf.to_container(cfg[ALWAYS_HASHED_BEFORE], enum_to_str=True))
    hashed = method.hashed(ALWAYS_HASHED_BEFORE, section) if method.hashed else section
    old = leave_out_defaults({**semantic, ALWAYS_HASHED_BEFORE: hashed})
    name_part = [method.name_part(cfg[method.own_section])] if method.name_part is not None else []
    identity = cell_id(old)
    return LegacyCell(old, identity, sweep_root / f"{name(name_part)}-{identity}")


def find_legacy_cell(
    cfg: DictConfig,
    semantic: Mapping[str, Any],
    sweep_root: Path,
    new_id: str,
    name: Callable[[Sequence[str]], str],
) -> LegacyCell | None:
    """The cell's pre-issue-49 identity when its folder is in the sweep (resume it there); None otherwise."""
    old = legacy_cell(cfg, semantic, sweep_root, name)
    if old is None or not old.cell_dir.is_dir():
        return None
    log.warning(
        "cell %s: found the folder %s, recorded before issue 49 under the old id %s (which hashed the lookahead "
        "section though no arm runs lookahead); resuming it under that id. Delete or move that folder to run "
        "the cell afresh under its new id %s.",
        new_id,
        old.cell_dir,
        old.cell_id,
        new_id,
    )
    return old
