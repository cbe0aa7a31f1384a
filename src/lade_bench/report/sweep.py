"""Load one or more sweep folders into what a report needs: rows, their summary, cell side files.

An archive of a finished sweep (``results.archive``: one rows parquet, the cells' side files in
``cells.json``, the device profiles) loads into the same :class:`Sweep` as the folder it came from.

Only the rows are data; ``summary.json`` and the index are caches written by the runner, shown in
the report as provenance but never used for a number. From each cell's ``config.yaml`` one setting is
read: ``report.headline``, the configuration the sweep declared as its headline before it ran (see
``stats.choose_headline``).

Device profiles are matched to cells (:func:`cell_profiles`): each lookahead cell is predicted from
the profile of its own (device kind, model, dtype, attention implementation), read from its
manifest's ``device_profile_key`` or, for cells recorded before it, from its config and manifest;
a cell with no profile of its key gets none.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from lade_bench import stats
from lade_bench.datasets.registry import ending_datasets, sample_groups
from lade_bench.methods import configuration_label, get_method, is_registered
from lade_bench.profiling.device_profile import (
    PROFILES_DIR,
    ProfileKey,
    StoredProfile,
    device_kind_of_description,
    load_profiles,
    matching_profile,
)
from lade_bench.report import aggregate
from lade_bench.results import CONFIG_YAML, MANIFEST_JSON, SUMMARY_JSON, find_cell_dirs, load_index, load_rows
from lade_bench.results.archive import CELL_TEXT_FILES, is_archive, read_archive_cells

SweepPaths = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


@dataclass
class CellFiles:
    """One cell directory and its side files (text as on disk; None when absent).

    Attributes:
        sweep, cell_id: the cell key, read from its rows.
        path: the cell directory.
        config_text: ``config.yaml`` (the resolved Hydra config).
        manifest: parsed ``manifest.json`` (git sha, versions, device, seeds).
        summary_text: ``summary.json`` as written by the runner.
        headline: the ``report.headline`` its config declares (N, W, G, prompt-as-reference), or None.
        root: the sweep folder it was found in (its device profiles are that folder's); None when
            unknown (a hand-built sweep).
    """

    sweep: str
    cell_id: str
    path: Path
    config_text: str | None
    manifest: dict[str, Any] | None
    summary_text: str | None
    headline: dict[str, Any] | None = None
    root: Path | None = None

    def profile_key(self) -> tuple[ProfileKey | None, tuple[str, ...]]:
        """The cell's device-profile key and the other names of its model (for legacy profiles).

        From the manifest's ``device_profile_key`` when it has one; for older cells, rebuilt from
        ``config.yaml`` (model name, dtype, attention implementation) and the manifest's device.
        None when a part is unknown.
        """
        manifest = self.manifest or {}
        config = parse_config_text(self.config_text)
        model = config.get("model") or {}
        aliases = tuple(str(v) for v in (model.get("name_or_path"),) if v)
        recorded = manifest.get("device_profile_key")
        if isinstance(recorded, dict):
            return ProfileKey.from_record(recorded), aliases
        dtype = manifest.get("dtype") or config.get("dtype")
        rebuilt = {
            "device_kind": device_kind_of_description(str(manifest.get("device") or "")),
            "model": model.get("name"),
            "dtype": None if dtype in (None, "auto") else str(dtype),
            # Older cells: the legacy profile recorded no attention implementation, so any stated one serves.
            "attn_implementation": str(config.get("attn_implementation") or "unrecorded"),
            # Cells without a recorded key predate the compiled mode: eager.
        }
        return ProfileKey.from_record(rebuilt), aliases


@dataclass
class Sweep:
    """Everything loaded from one or more sweep folders.

    Attributes:
        roots: the sweep folders, as given.
        rows: all per-sample rows (``load_rows`` of every root, concatenated).
        summary: ``aggregate.summarize(rows)``.
        cells: side files per cell, in row order.
        profiles: every device profile of the sweep folders (keyed and legacy).
        cell_profiles: the profile matching each cell, by ``(sweep, cell_id)``; cells without a
            matching profile are absent (no prediction for them).
        index: the sweep indexes concatenated (cell status, failures), with a ``sweep_root`` column.
        intervals: the interval settings ``summary`` was computed with (tables computing more
            intervals use the same).
        headline_choice: ``stats.choose_headline``: the headline cell per (sweep, model, dataset,
            subset, mode), how it was chosen and which samples it reports.
        headline: ``aggregate.headline_summary``: those cells' records on their reported samples.
        subsets: the groups of a categorised dataset each cell ran, by ``(sweep, cell_id)``
            (``datasets.registry.sample_groups``; Spec-Bench: one group per cell); "" or absent: the
            whole dataset. Every table and figure names a cell's dataset with :meth:`dataset_text`.
    """

    roots: list[Path]
    rows: pd.DataFrame
    summary: pd.DataFrame
    cells: list[CellFiles]
    profiles: list[StoredProfile] = field(default_factory=list)
    cell_profiles: dict[tuple[str, str], StoredProfile] = field(default_factory=dict)
    index: pd.DataFrame = field(default_factory=pd.DataFrame)
    intervals: stats.IntervalSettings = field(default_factory=stats.IntervalSettings)
    headline_choice: pd.DataFrame = field(default_factory=pd.DataFrame)
    headline: pd.DataFrame = field(default_factory=pd.DataFrame)
    subsets: dict[tuple[str, str], str] = field(default_factory=dict)
    # Each cell's parsed config.yaml, read once on first use (the labels of every table and figure ask).
    _configs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, init=False, repr=False)

    def cell_config(self, key: tuple[str, str]) -> dict[str, Any]:
        """The resolved config cell ``key`` = (sweep, cell_id) recorded, parsed; empty where it has none."""
        if not self._configs and self.cells:
            for cell in self.cells:
                text = cell.config_text
                self._configs[(cell.sweep, cell.cell_id)] = parse_config_text(text)
        return self._configs.get((str(key[0]), str(key[1])), {})

    def arm_label(self, arm: str, keys: Iterable[tuple[str, str]]) -> str:
        """The label of the configuration ``arm`` ran in the cells ``keys`` ((sweep, cell_id) pairs).

        ``methods.configuration_label`` of the arm's own section as each cell recorded it (a cell with
        no recorded config or section: the method's plain label), so that a row names what ran
        (e.g. "Token Recycling (+ prefill refresh)"); cells that ran different configurations give
        their labels joined with " / " (a figure pooling them says so rather than naming one).
        """
        labels = {config_arm_label(arm, self.cell_config(key)) for key in keys}
        return " / ".join(sorted(labels)) or configuration_label(arm, None)

    def arm_labels(self, records: pd.DataFrame) -> dict[str, str]:
        """Each arm of ``records`` (rows or summary records: ``arm``, ``sweep``, ``cell_id``) -> its
        :meth:`arm_label` over the cells of ``records`` it ran in."""
        if records.empty:
            return {}
        keys = records[["arm", "sweep", "cell_id"]].drop_duplicates()
        return {
            str(arm): self.arm_label(str(arm), zip(part["sweep"], part["cell_id"], strict=True))
            for arm, part in keys.groupby("arm", sort=False)
        }

    def dataset_text(self, rec: Any) -> str:
        """The dataset of one record (a mapping with ``dataset``, ``sweep``, ``cell_id``) as tables and figures
        show it: with the groups the cell ran where it ran part of a categorised dataset
        (``spec_bench: math_reasoning``), so one Spec-Bench group is never labelled as the benchmark."""
        subset = self.subsets.get((str(rec["sweep"]), str(rec["cell_id"])), "")
        return f"{rec['dataset']}: {subset}" if subset else str(rec["dataset"])

    def record_label(self, rec: Any) -> str:
        """:meth:`arm_label` of one (cell, arm) record (a mapping with ``arm``, ``sweep``, ``cell_id``)."""
        return self.arm_label(str(rec["arm"]), [(str(rec["sweep"]), str(rec["cell_id"]))])

    @property
    def label(self) -> str:
        """Sweep name(s) joined with ``+`` (or the folder names when there are no rows yet)."""
        names = sorted(self.rows["sweep"].dropna().unique()) if len(self.rows) else [p.name for p in self.roots]
        return "+".join(str(n) for n in names)

    @property
    def models(self) -> list[str]:
        """Distinct models in the rows."""
        return sorted(str(m) for m in self.rows["model"].dropna().unique())

    @property
    def devices(self) -> list[str]:
        """Distinct devices named in the cells' manifests."""
        found = {str(c.manifest["device"]) for c in self.cells if c.manifest and c.manifest.get("device")}
        return sorted(found)

    def context_line(self, shown: pd.DataFrame | None = None) -> str:
        """``model: ... | device: ... | sweep: ...``, the provenance line every figure carries.

        Args:
            shown: the rows or summary records a figure draws (``model`` and ``sweep`` columns); the
                line then names only their models and sweeps, not every one of the report (a panel of
                one sweep headed by all five misleads). None: the whole report's.
        """
        if shown is not None and len(shown):
            models = ", ".join(sorted(str(m) for m in shown["model"].dropna().unique())) or "?"
            sweeps = "+".join(sorted(str(n) for n in shown["sweep"].dropna().unique()))
        else:
            models, sweeps = ", ".join(self.models) or "?", self.label
        devices = ", ".join(self.devices) or "unknown device"
        return f"model: {models} | device: {devices} | sweep: {sweeps}"


def config_arm_label(arm: str, config: Mapping[str, Any]) -> str:
    """The label of the configuration ``arm`` ran in a cell whose resolved config is ``config``:
    ``methods.configuration_label`` of the arm's own section there (none recorded: the plain label)."""
    section = config.get(get_method(arm).own_section) if is_registered(arm) else None
    return configuration_label(arm, section if isinstance(section, Mapping) else None)


def as_paths(paths: SweepPaths) -> list[Path]:
    """One path or a sequence of paths as a list of ``Path``."""
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    return [Path(p) for p in paths]


def load_sweep(
    paths: SweepPaths,
    *,
    n_boot: int = stats.N_BOOT,
    confidence: float = stats.CONFIDENCE,
    seed: int = stats.BOOT_SEED,
    min_ci_units: int = stats.MIN_CI_UNITS,
) -> Sweep:
    """Load one sweep folder (or several, reported together) and summarise its rows.

    Args:
        paths: a sweep folder (``<output_root>/<sweep_name>``) or an archive of one
            (``results.archive``, e.g. ``paper_figures/rows/<sweep>``), or a list of them.
        n_boot, confidence, seed: bootstrap settings of the CIs.
        min_ci_units: fewest samples a CI is computed from.

    Raises:
        FileNotFoundError: a folder does not exist.
    """
    read = read_sweep_folders(paths)
    intervals = stats.IntervalSettings(n_boot, confidence, seed, min_ci_units)
    return sweep_from_rows(
        read.rows, roots=read.roots, cells=read.cells, profiles=read.profiles, index=read.index, intervals=intervals
    )


@dataclass
class SweepFolders:
    """What :func:`read_sweep_folders` reads: the :class:`Sweep` attributes that come from disk, nothing computed."""

    roots: list[Path]
    rows: pd.DataFrame
    cells: list[CellFiles]
    profiles: list[StoredProfile]
    index: pd.DataFrame


def read_sweep_folders(paths: SweepPaths) -> SweepFolders:
    """The rows, cell side files, device profiles and indexes of sweep folders (or archives), unsummarised.

    :func:`load_sweep` summarises what this reads; a caller that must check the rows before any
    bootstrap (``python -m lade_bench.predict``'s refusals) reads them here first.

    Raises:
        FileNotFoundError: a folder does not exist.
    """
    roots = as_paths(paths)
    frames, cells, indexes = [], [], []
    profiles: list[StoredProfile] = []
    for root in roots:
        if not root.is_dir():
            raise FileNotFoundError(f"no sweep folder at {root}")
        if is_archive(root):
            frames.append(load_rows(root))
            cells += [_archived_cell_files(record, root) for record in read_archive_cells(root)]
            profiles += load_profiles(root)
            continue
        for cell_dir in find_cell_dirs(root):
            cell_rows = load_rows(cell_dir)
            if cell_rows.empty:
                continue
            frames.append(cell_rows)
            sweep_name = str(cell_rows["sweep"].iloc[0])
            cells.append(_cell_files(sweep_name, str(cell_rows["cell_id"].iloc[0]), cell_dir, root))
        profiles += load_profiles(root)
        index = load_index(root)
        if not index.empty:
            indexes.append(index.assign(sweep_root=str(root)))
    rows = pd.concat(frames, ignore_index=True) if frames else load_rows(roots[0])
    index = pd.concat(indexes, ignore_index=True) if indexes else pd.DataFrame()
    return SweepFolders(roots, rows, cells, profiles, index)


def sweep_from_rows(
    rows: pd.DataFrame,
    *,
    roots: Sequence[Path] = (),
    cells: Sequence[CellFiles] = (),
    profiles: Sequence[StoredProfile] | None = None,
    index: pd.DataFrame | None = None,
    intervals: stats.IntervalSettings | None = None,
) -> Sweep:
    """A :class:`Sweep` of already loaded rows: the summary and the headline computed from them.

    Args:
        rows: per-sample rows (any subset of a sweep's rows is fine).
        roots, cells, profiles, index: as the :class:`Sweep` attributes; cells also carry each cell's
            declared headline and device-profile key (matched against ``profiles``).
        intervals: bootstrap settings of every interval (default: ``aggregate``'s defaults).
    """
    intervals = intervals or stats.IntervalSettings()
    # Rows written before schema 12 get their text health from their output ids, once for every report.
    rows = stats.with_text_health(rows) if len(rows) else rows
    # ... and their final-answer accuracy without the credit a cut output's last number got before issue 63.
    rows = stats.rescore_cut_answers(rows, ending_datasets()) if len(rows) else rows
    summary = aggregate.summarize(
        rows,
        n_boot=intervals.n_boot,
        confidence=intervals.confidence,
        seed=intervals.seed,
        min_ci_units=intervals.min_units,
    )
    headlines = {(c.sweep, c.cell_id): c.headline for c in cells}
    declared = stats.declared_cells(summary, headlines) if len(summary) else frozenset()
    subsets = cell_subsets(rows)
    choice = stats.choose_headline(rows, summary, declared, subsets=subsets) if len(summary) else pd.DataFrame()
    headline = pd.DataFrame()
    if len(choice):
        headline = aggregate.headline_summary(rows, choice, intervals=intervals, summary=summary)
    return Sweep(
        roots=list(roots),
        rows=rows,
        summary=summary,
        cells=list(cells),
        profiles=list(profiles or ()),
        cell_profiles=cell_profiles(cells, profiles or ()),
        index=index if index is not None else pd.DataFrame(),
        intervals=intervals,
        headline_choice=choice,
        headline=headline,
        subsets=subsets,
    )


def cell_subsets(rows: pd.DataFrame) -> dict[tuple[str, str], str]:
    """The groups of a categorised dataset each cell's rows ran (``datasets.registry.sample_groups``), by
    ``(sweep, cell_id)``; cells of a dataset without categories are left out (the whole dataset)."""
    subsets: dict[tuple[str, str], str] = {}
    if rows.empty:
        return subsets
    for (sweep, cell_id, dataset), cell in rows.groupby(["sweep", "cell_id", "dataset"], sort=False):
        groups = sample_groups(str(dataset), cell["sample_id"].unique())
        if groups:
            subsets[(str(sweep), str(cell_id))] = groups
    return subsets


def cell_profiles(
    cells: Sequence[CellFiles], profiles: Sequence[StoredProfile]
) -> dict[tuple[str, str], StoredProfile]:
    """The profile of each cell's key among those of its own sweep folder (see ``matching_profile``)."""
    out = {}
    for cell in cells:
        key, aliases = cell.profile_key()
        if key is None:
            continue
        own = [p for p in profiles if cell.root is None or p.path.parent in (cell.root, cell.root / PROFILES_DIR)]
        found = matching_profile(own, key, aliases)
        if found is not None:
            out[(cell.sweep, cell.cell_id)] = found
    return out


def parse_config_text(config_text: str | None) -> dict[str, Any]:
    """A cell's recorded ``config.yaml`` text as a dict; empty where it has none.

    PyYAML's C loader (libyaml) where the installed PyYAML has it: the same mappings as ``yaml.safe_load``
    for about a seventh of the CPU, which counts since a report parses every cell's config several times.
    """
    if not config_text:
        return {}
    return yaml.load(config_text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


def declared_headline(config_text: str | None) -> dict[str, Any] | None:
    """``report.headline`` of a cell's resolved config (None when absent or null)."""
    if not config_text:
        return None
    config = parse_config_text(config_text)
    headline = (config.get("report") or {}).get("headline")
    return dict(headline) if isinstance(headline, dict) else None


def _archived_cell_files(record: dict[str, Any], root: Path) -> CellFiles:
    """A cell of an archive (``results.archive``): its side files as the sweep folder held them."""
    texts = {name: record.get(key) for key, name in CELL_TEXT_FILES.items()}
    path = root / str(record.get("cell_dir", ""))
    return _cell_from_texts(record["sweep"], record["cell_id"], path, texts, root)


def _cell_files(sweep: str, cell_id: str, cell_dir: Path, root: Path | None = None) -> CellFiles:
    texts = {}
    for name in CELL_TEXT_FILES.values():
        path = cell_dir / name
        texts[name] = path.read_text(encoding="utf-8") if path.is_file() else None
    return _cell_from_texts(sweep, cell_id, cell_dir, texts, root)


def _cell_from_texts(
    sweep: str, cell_id: str, path: Path, texts: dict[str, str | None], root: Path | None
) -> CellFiles:
    manifest_text, config_text = texts[MANIFEST_JSON], texts[CONFIG_YAML]
    return CellFiles(
        sweep=sweep,
        cell_id=cell_id,
        path=path,
        config_text=config_text,
        manifest=json.loads(manifest_text) if manifest_text else None,
        summary_text=texts[SUMMARY_JSON],
        headline=declared_headline(config_text),
        root=root,
    )
