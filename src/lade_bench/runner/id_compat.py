"""Cell-id compatibility in one table: the settings that enter a cell's id only away from their default.

A cell's id hashes its semantic config (``runner.plan.semantic_config``, ``results.cell_id``). A setting
added after cells were recorded would give every old cell a new id, and a resumed sweep would run its
cells again beside their old folders. So each such setting is hashed only when it differs from the
default every cell recorded before it ran under: :data:`ID_COMPAT` lists them (setting, since when,
that default, why), and :func:`leave_out_defaults` is the one place that applies it, to the whole
semantic config the plan builds (its methods' sections too). A new setting that changes no old cell's
meaning at its default gets an entry here, nowhere else.

:data:`LEGACY_SECTION` is the one rule the table cannot express: before issue 49 every cell hashed the
lookahead section, with or without a lookahead arm; ``runner.legacy_ids`` finds such a cell's old
folder on resume. ``docs/results.md`` (cell ids) says the same for users. Not defaults, so not here:
what a method's ``Method.hashed`` keeps of its section (a datastore by content) and the name a
section was recorded under (``Method.config_section``, assisted's ``assistant``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IdCompat:
    """One setting hashed only away from its default, so cells recorded before it keep their ids.

    Attributes:
        setting: its dotted path in the semantic config (``dataset.offset``; a method's section by its
            name, ``lookahead.verification``, present only when an arm reads that section).
        since: the commit (and issue) that made it part of the id.
        default: the value every cell recorded before ran under; at it the setting is left out.
        why: one line on what the setting is and why old cells lacked it.
        with_it: further paths left out with it (settings that mean nothing at the default).
    """

    setting: str
    since: str
    default: Any
    why: str
    with_it: tuple[str, ...] = ()


@dataclass(frozen=True)
class LegacySection:
    """A config section every cell hashed until a commit, whether or not an arm read it.

    Attributes:
        section: the section (and the method whose shape named the old folders).
        until: the commit (and issue) after which only a cell with the method's arm hashes it.
        why: one line on why old cells are looked for under their old id.
    """

    section: str
    until: str
    why: str


ID_COMPAT: tuple[IdCompat, ...] = (
    IdCompat(
        "model.embedded",
        "a0951d6 (issue 10)",
        "smollm2",
        "the second embedded model (Gemma-3-270M); every embedded cell before it ran SmolLM2",
    ),
    IdCompat(
        "model.completion_format",
        "issue 63",
        "plain",
        "a base model's completion format (cued: each task's label and answer cue); every base-model cell "
        "before it got the bare turns",
    ),
    IdCompat(
        "dataset.offset",
        "f34bf00",
        0,
        "samples dropped before the limit (a tuner's held-out draw); cells before it dropped none",
    ),
    IdCompat(
        "dataset.categories",
        "c21c03f (issue 52)",
        None,
        "Spec-Bench's category selection; cells before it kept every sample",
    ),
    IdCompat(
        "dataset.per_category_limit",
        "c21c03f (issue 52)",
        None,
        "the most samples per category; cells before it had no cap",
    ),
    IdCompat(
        "devices",
        "2522bcf",
        1,
        "the cell's rank count (lookahead.devices); every cell before multi-device runs ran on one",
    ),
    IdCompat(
        "compile",
        "0059788",
        False,
        "a compiled cell (its mode and cache block with it); every cell before the switch was eager",
        with_it=("compile_options",),
    ),
    IdCompat(
        "step_path",
        "issue 68 (after 948c4e5)",
        "standard",
        "the step path (batch_invariant: every row bit-identical however many share a forward); every cell "
        "before it ran the model's own kernels",
    ),
    IdCompat(
        "lookahead.verification",
        "bb38b96",
        "flat",
        "lookahead's verification layout (trie); every lookahead cell before it verified flat",
    ),
    IdCompat(
        "sam_decoding.static_datastore",
        "69cc46b (issue 51)",
        None,
        "SAM-Decoding's static corpus (len_bias weighs it, so means nothing without it); none before it",
        with_it=("sam_decoding.len_bias",),
    ),
)

LEGACY_SECTION = LegacySection(
    "lookahead",
    "9a0646d (issue 49)",
    "until then every cell hashed the lookahead section and named its shape, with or without the arm",
)


def leave_out_defaults(semantic: Mapping[str, Any], compat: Sequence[IdCompat] = ID_COMPAT) -> dict[str, Any]:
    """``semantic`` without each entry's setting (and its ``with_it``) where the setting is at its default.

    A setting the config does not hold (a section no arm reads) is left as it is. The input is not
    changed: the nested mappings on a removed path are copied.
    """
    out = _copy(semantic)
    for entry in compat:
        found, value = setting_value(out, entry.setting)
        if found and value == entry.default:
            for path in (entry.setting, *entry.with_it):
                _remove(out, path)
    return out


def _copy(value: Any) -> Any:
    # Mappings only: the leaves (lists among them) are hashed, never changed here.
    return {key: _copy(item) for key, item in value.items()} if isinstance(value, Mapping) else value


def setting_value(semantic: Mapping[str, Any], path: str) -> tuple[bool, Any]:
    """(True, the value) at the dotted ``path`` of a semantic config; (False, None) where it has none."""
    node: Any = semantic
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _remove(semantic: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    node: Any = semantic
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)
