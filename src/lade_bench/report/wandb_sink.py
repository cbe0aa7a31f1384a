"""The W&B sink: one W&B run per finished cell, grouped by sweep. A sink, never the source of truth.

The runner calls ``sink(cell_config, summary, rows, cell_dir)`` after each cell. The run gets:

* name: readable, e.g. ``SmolLM2-135M | mt_bench | N5 W7 G7 | greedy | 1a2b3c``; group: the sweep;
* config: the resolved cell config plus ``cell_id`` and the cell's ``manifest.json``;
* summary: ``aggregate.flat_metrics`` of the rows (``<arm>/speedup``, ``<arm>/speedup_ci_low``,
  ``<arm>/compression_ratio``, ``<arm>/tokens_per_s``, ``<arm>/rouge1``, ``<arm>/pass@1``,
  ``<arm>/accuracy``, ``<arm>/matches_ar``, ``<arm>/n_units``, ``<arm>/n_pairs``, ...), i.e. the same
  numbers as the report, with ``aggregate.flat_notes`` beside them (``<arm>/speedup_basis``, and
  ``<arm>/speedup_ci_note`` saying why an interval is missing, e.g. too few samples), and every
  quality metric the cell's dataset declares (``aggregate.flat_quality``: Spec-Bench's ``<arm>/bleu``,
  ``<arm>/chrf``, ``<arm>/exact_match``, ``<arm>/token_f1``, which the summary table has no column for), plus
  ``status`` and ``error``; the runner's ``summary`` argument is only used for its failure status;
* a per-sample table ``samples`` (list columns as space-separated ids);
* the cell's figures (speedup bars, accepted-tokens histogram) as ``figures/<name>``, also saved as
  PNG/PDF in ``<cell_dir>/figures``.

Mode comes from config: ``offline`` (default; run files under ``<dir>/wandb/offline-run-*``, the
``wandb sync`` command is logged), ``online``, or ``disabled`` (unit tests). The run is finished in
``finally``: with exit code 1 when the cell failed (``summary`` has ``status: failed`` or an
``error``) or when logging itself raised, which then propagates.

Surviving a kill: ``<cell_dir>/wandb_run.json`` records the run as started before ``wandb.init`` and
as finished after ``run.finish()`` (see :mod:`lade_bench.report.wandb_run_record`);
:meth:`WandbSink.is_complete` reads it, and the runner logs the cell again when it is not complete,
after deleting the cell's earlier offline run (interrupted, failed, or found by the cell id in its
run id when the record is unreadable), so that a cell keeps one W&B run.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import wandb

from lade_bench import stats
from lade_bench.report import aggregate, wandb_run_record
from lade_bench.report.figures import FigureSkipped, draw_accept_histogram, draw_speedup_bars, save_figure
from lade_bench.report.sweep import config_arm_label
from lade_bench.report.tables import sampling_label
from lade_bench.results import MANIFEST_JSON
from lade_bench.results.atomic import write_failed

logger = logging.getLogger(__name__)

WandbMode = Literal["offline", "online", "disabled"]
MODES: tuple[WandbMode, ...] = ("offline", "online", "disabled")
SAMPLES_TABLE_KEY = "samples"
FIGURE_KEY_PREFIX = "figures/"


@dataclass(frozen=True)
class WandbSettings:
    """W&B settings, as in the ``wandb`` config group.

    Attributes:
        mode: ``offline`` (default: files on disk, upload later with ``wandb sync``), ``online`` or
            ``disabled``.
        project: W&B project.
        entity: W&B entity (user or team); None: the account's default.
        dir: parent of the ``wandb/`` folder; None: the sweep folder (the cell folder's parent).
        tags: extra run tags (the dataset and model are always added).
        log_table: log the per-sample table.
        log_figures: draw and log the cell's figures.
        n_boot: bootstrap resamples of the speedup CIs.
    """

    mode: WandbMode = "offline"
    project: str = "lade-bench"
    entity: str | None = None
    dir: str | None = None
    tags: tuple[str, ...] = ()
    log_table: bool = True
    log_figures: bool = True
    n_boot: int = stats.N_BOOT

    def __post_init__(self) -> None:
        """Reject an unknown mode before any run starts."""
        if self.mode not in MODES:
            raise ValueError(f"wandb.mode={self.mode!r} is not one of {MODES}")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> WandbSettings:
        """Settings from a plain mapping (e.g. ``OmegaConf.to_container(cfg.wandb)``); unknown keys fail."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(config) - known)
        if unknown:
            raise ValueError(f"unknown wandb setting(s) {unknown}; known: {sorted(known)}")
        values = dict(config)
        if "tags" in values:
            values["tags"] = tuple(values["tags"] or ())
        return cls(**values)


@dataclass
class CellRunInfo:
    """What :meth:`WandbSink.log_cell` produced.

    Attributes:
        run_id: W&B run id.
        name: the run's display name.
        exit_code: 0, or 1 for a failed cell.
        sync_dir: the offline run folder (upload with ``wandb sync <sync_dir>``); None unless offline.
        summary: the metrics put into the run summary.
    """

    run_id: str
    name: str
    exit_code: int
    sync_dir: Path | None
    summary: dict[str, Any] = field(default_factory=dict)


def failure_message(summary: Mapping[str, Any] | None) -> str | None:
    """The failure recorded in a runner summary (``status: failed`` or an ``error``), else None."""
    if not summary:
        return None
    error = summary.get("error")
    if summary.get("status") == "failed" or error:
        return str(error or "cell failed")
    return None


def run_name(attributes: Mapping[str, Any]) -> str:
    """Readable run name from cell attributes: ``model | dataset | N5 W7 G7 | greedy | <id6>``."""
    parts = [str(attributes.get("model")), str(attributes.get("dataset"))]
    if attributes.get("ngram") is not None:
        shape = f"N{attributes['ngram']} W{attributes['window']} G{attributes['guesses']}"
        if attributes.get("prompt_as_reference") is False:
            shape += " noref"
        if attributes.get("verification") not in (None, "flat"):
            shape += f" {attributes['verification']}"
        parts.append(shape)
    if attributes.get("do_sample") is not None:
        parts.append(sampling_label(dict(attributes)))
    parts.append(str(attributes.get("cell_id", ""))[:6])
    return " | ".join(parts)


def attributes_from_config(cell_config: Mapping[str, Any]) -> dict[str, Any]:
    """Cell attributes from a resolved config, for a cell that failed before writing any row."""

    def group(name: str) -> Mapping[str, Any]:
        value = cell_config.get(name)
        return value if isinstance(value, Mapping) else {}

    lookahead, sampling = group("lookahead"), group("sampling")
    return {
        "cell_id": cell_config.get("cell_id", ""),
        "sweep": cell_config.get("sweep_name"),
        "model": group("model").get("name"),
        "dataset": group("dataset").get("name"),
        **{k: lookahead.get(k) for k in ("ngram", "window", "guesses", "prompt_as_reference")},
        "verification": lookahead.get("verification", stats.DEFAULT_VERIFICATION),
        **{k: sampling.get(k) for k in ("do_sample", "temperature", "top_p", "top_k")},
    }


def samples_table_frame(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows as plain Python values for a ``wandb.Table``: lists as space-separated ids, NA as None."""

    def plain(value: Any) -> Any:
        if value is None or value is pd.NA:
            return None
        if isinstance(value, (np.ndarray, list)):
            return " ".join(str(int(v)) for v in value)
        if isinstance(value, np.generic):
            return value.item()
        if isinstance(value, float) and math.isnan(value):
            return None
        return value

    return pd.DataFrame({c: [plain(v) for v in rows[c]] for c in rows.columns}, dtype=object)


def _json_safe(value: Any) -> Any:
    # Round-trip through JSON so that enums, paths and numpy scalars in a config become plain values.
    return json.loads(json.dumps(value, default=str))


def _read_manifest(cell_dir: Path) -> dict[str, Any] | None:
    path = cell_dir / MANIFEST_JSON
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


@contextlib.contextmanager
def _naming_the_run_folder(folder: Path) -> Iterator[None]:
    """Re-raise an OSError that names no file (W&B's own writes) as a write failure naming the W&B run folder.

    Out of space, W&B's debug log fails on close with a bare "No space left on device"; the runner's one
    line must still say where the space ran out (its size is W&B's to know, so none is given).
    """
    try:
        yield
    except OSError as exc:
        if exc.filename:
            raise
        raise write_failed(exc, folder, None) from exc


class WandbSink:
    """Per-cell sink logging one W&B run per cell; see the module docstring.

    Usage (by the runner)::

        sink = WandbSink(WandbSettings.from_config(cfg.wandb))
        sink(cell_config, summary, rows, cell_dir)
    """

    def __init__(self, settings: WandbSettings | None = None) -> None:
        self.settings = settings or WandbSettings()

    def __repr__(self) -> str:
        return f"WandbSink({self.settings!r})"

    def __call__(
        self, cell_config: Mapping[str, Any], summary: Mapping[str, Any], rows: pd.DataFrame, cell_dir: Path
    ) -> None:
        """Log one finished (or failed) cell; the runner's sink interface."""
        self.log_cell(cell_config, summary, rows, Path(cell_dir))

    def is_complete(self, cell_dir: str | os.PathLike[str]) -> bool:
        """True when a whole run of the done cell was logged in this mode and its figures still exist.

        The runner's durable-sink check: when False, a rerun of a finished cell logs it again.
        """
        missing = wandb_run_record.missing_outputs(Path(cell_dir), self.settings.mode)
        if missing:
            logger.info("W&B output of %s incomplete: %s", cell_dir, "; ".join(missing))
        return not missing

    def log_cell(
        self,
        cell_config: Mapping[str, Any],
        summary: Mapping[str, Any] | None,
        rows: pd.DataFrame,
        cell_dir: str | os.PathLike[str],
    ) -> CellRunInfo:
        """Start a run for the cell, log config, summary, table and figures, and always finish it.

        Args:
            cell_config: the resolved config of the cell (plain mapping).
            summary: the runner's summary; only its failure status is used.
            rows: the cell's rows (may be empty for a cell that failed before its first row).
            cell_dir: the cell folder (``manifest.json`` is read from it, figures written into it).

        Raises:
            Whatever logging raised, after finishing the run with exit code 1.
        """
        cell_dir = Path(cell_dir)
        failure = failure_message(summary)
        attributes = stats.cell_attributes(rows) if len(rows) else attributes_from_config(cell_config)
        sweep = str(attributes.get("sweep") or cell_config.get("sweep_name") or cell_dir.parent.name)
        manifest = _read_manifest(cell_dir)
        name = run_name(attributes)
        tags = [*self.settings.tags, *(str(attributes[k]) for k in ("dataset", "model") if attributes.get(k))]
        wandb_dir = Path(self.settings.dir) if self.settings.dir else cell_dir.parent
        cell_id = str(attributes.get("cell_id") or cell_config.get("cell_id") or "") or None
        wandb_run_record.discard_previous_runs(cell_dir, cell_id, wandb_dir)
        run_id = wandb_run_record.new_run_id(cell_id)
        # Recorded before init: from here on a kill leaves a record naming the run to discard.
        wandb_run_record.record_started(cell_dir, run_id=run_id, mode=self.settings.mode, wandb_dir=wandb_dir)
        run = wandb.init(
            id=run_id,
            project=self.settings.project,
            entity=self.settings.entity,
            group=sweep,
            job_type="cell",
            name=name,
            tags=tags,
            config=_json_safe({**dict(cell_config), "cell_id": attributes.get("cell_id"), "manifest": manifest}),
            mode=self.settings.mode,
            dir=str(wandb_dir),
            reinit="create_new",
            # console="off": the runner's own logging stays where Hydra sends it.
            settings=wandb.Settings(console="off"),
        )
        sync_dir = Path(run.settings.sync_dir) if self.settings.mode == "offline" else None
        # W&B writes its own files (the run's records, media, its debug log) and its OSErrors name none of them.
        run_folder = Path(run.settings.sync_dir) if getattr(run.settings, "sync_dir", None) else wandb_dir
        exit_code = 1
        metrics: dict[str, Any] = {}
        figures: list[Path] = []
        notes: dict[str, str] = {}
        try:
            with _naming_the_run_folder(run_folder):
                if len(rows):
                    cell_summary = aggregate.summarize(rows, n_boot=self.settings.n_boot)
                    # The table's columns first; then every quality metric the dataset declares (BLEU, chrF, ...).
                    metrics = {**aggregate.flat_quality(rows), **aggregate.flat_metrics(cell_summary)}
                    notes = aggregate.flat_notes(cell_summary)
                    if self.settings.log_table:
                        run.log({SAMPLES_TABLE_KEY: wandb.Table(dataframe=samples_table_frame(rows))})
                    if self.settings.log_figures:
                        figures = self._log_figures(run, cell_summary, rows, cell_dir, manifest, sweep, cell_config)
                status = {"status": "failed" if failure else "done", "n_rows": len(rows)}
                if failure:
                    status["error"] = failure
                run.summary.update({**metrics, **notes, **status})
                exit_code = 1 if failure else 0
        finally:
            with _naming_the_run_folder(run_folder):
                run.finish(exit_code=exit_code)
            wandb_run_record.record_finished(
                cell_dir,
                run_id=run.id,
                mode=self.settings.mode,
                wandb_dir=wandb_dir,
                sync_dir=sync_dir,
                exit_code=exit_code,
                cell_status="failed" if failure or exit_code else "done",
                figures=figures,
            )
            if sync_dir is not None:
                logger.info("W&B offline run of cell %s saved; upload with: wandb sync %s", name, sync_dir)
        return CellRunInfo(run_id=run.id, name=name, exit_code=exit_code, sync_dir=sync_dir, summary=metrics)

    def _log_figures(
        self,
        run: Any,
        cell_summary: pd.DataFrame,
        rows: pd.DataFrame,
        cell_dir: Path,
        manifest: Mapping[str, Any] | None,
        sweep: str,
        cell_config: Mapping[str, Any],
    ) -> list[Path]:
        """Draw, save (PNG and PDF into ``<cell_dir>/figures``) and log the cell's figures; return the files."""
        attributes = stats.cell_attributes(rows)
        # The legends name the configuration each arm ran, as the report's figures of this cell do.
        labels = {str(arm): config_arm_label(str(arm), cell_config) for arm in rows["arm"].unique()}
        device = (manifest or {}).get("device", "unknown device")
        context = f"model: {attributes['model']} | device: {device} | sweep: {sweep} | cell: {run_name(attributes)}"
        drawings = {
            "speedup_bars": lambda: draw_speedup_bars(cell_summary, "Speedup over AR (95% CI)", context, labels=labels),
            "accept_length_histogram": lambda: draw_accept_histogram(
                rows, "Tokens accepted per forward pass", context, labels
            ),
        }
        images = {}
        saved: list[Path] = []
        for name, draw in drawings.items():
            try:
                fig = draw()
            except FigureSkipped as why:
                logger.info("cell figure %s skipped: %s", name, why)
                continue
            png, pdf = save_figure(fig, cell_dir / "figures", name)
            saved += [png, pdf]
            images[f"{FIGURE_KEY_PREFIX}{name}"] = wandb.Image(str(png), caption=name)
        if images:
            run.log(images)
        return saved
