"""A finished tune's held-out cells as an archive, and its held-out numbers recomputed from that archive.

``python -m lade_bench.tune.heldout_archive TUNE_DIR OUT`` writes the per-sample rows of every held-out
cell the record names (top-k and reference presets), with their configs and manifests, in the
layout of a sweep archive (``results.archive``: ``rows.parquet``, ``cells.json``), so that

* :func:`recompute_heldout` rebuilds every held-out record of ``tune_record.json`` (speedups,
  paired intervals, prompt lookup, the winner's rule) from the archived rows alone, through the
  tuner's own summary and winner code; the archive is refused unless that reproduces the record
  exactly (rows changed or missing after the tune would otherwise ship as its evidence);
* ``python -m lade_bench.report OUT`` reports the cells like any sweep.

The tuner does not write the archive into its own folder (a report of the tune folder would read
the rows twice); ``scripts/tune_reference.sh`` writes it beside the committed table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench.report.tune_figure import TUNE_RECORD
from lade_bench.results import load_rows
from lade_bench.results.archive import ArchiveResult, write_archive
from lade_bench.tune.outputs import heldout_records, json_ready
from lade_bench.tune.search import params_of
from lade_bench.tune.validate import declare_winner, heldout_result


def read_record(tune_dir: Path) -> dict[str, Any]:
    """The tune's record, which must hold the held-out validation (a finished tune).

    Raises:
        FileNotFoundError: no record in ``tune_dir``.
        ValueError: the record has no held-out results (the tune did not finish).
    """
    path = tune_dir / TUNE_RECORD
    if not path.is_file():
        raise FileNotFoundError(f"no {TUNE_RECORD} in {tune_dir}: not a tune folder")
    record = json.loads(path.read_text(encoding="utf-8"))
    if not record.get("heldout"):
        raise ValueError(f"{path} has no held-out results: the tune has not finished; run it again to finish it")
    return record


def cell_id_of(heldout: dict[str, Any]) -> str:
    """The cell id of one held-out record (its cell folder is ``<name>-<cell id>``)."""
    return Path(str(heldout["cell_dir"])).name.rsplit("-", 1)[-1]


def recompute_heldout(record: dict[str, Any], rows: pd.DataFrame) -> list[dict[str, Any]]:
    """Every held-out record of ``record``, recomputed from ``rows`` (the cells' rows) as the tuner computes it.

    Raises:
        ValueError: a held-out cell has no rows in ``rows``.
    """
    results = []
    for rec in record["heldout"]:
        cell_id = cell_id_of(rec)
        part = rows[rows["cell_id"].astype(str) == cell_id]
        if part.empty:
            raise ValueError(f"no rows of the held-out cell {rec['config']} ({cell_id})")
        params = params_of(rec)
        probe = math.nan if rec["probe_speedup"] is None else float(rec["probe_speedup"])
        rank = rec["rank_in_search"]
        results.append(
            heldout_result(params, None if rank is None else int(rank), probe, rec["cell_dir"], part, rec["reference"])
        )
    choice = declare_winner(results, record["winner_rule"], record["heldout_sample_ids"])
    # Through JSON as the record went (tuples to lists, NaN to null), so the two compare as written.
    return json.loads(json.dumps(json_ready(heldout_records(results, choice))))


def archive_heldout(tune_dir: Path, out: Path) -> ArchiveResult:
    """Write the archive of the tune's held-out cells to ``out``, after checking it reproduces the record.

    Raises:
        FileNotFoundError, ValueError: no finished tune in ``tune_dir``; ``out`` inside it; a held-out
            cell missing, or a sample of the held-out set missing from one of its arms; numbers
            recomputed from the rows that differ from the record (each named).
    """
    tune_dir, out = Path(tune_dir), Path(out)
    record = read_record(tune_dir)
    if out.resolve().is_relative_to(tune_dir.resolve()):
        raise ValueError(f"archive folder {out} lies inside the tune folder {tune_dir}; choose one outside it")
    cells = [tune_dir / Path(str(rec["cell_dir"])).name for rec in record["heldout"]]
    missing = [str(cell) for cell in cells if not cell.is_dir()]
    if missing:
        raise FileNotFoundError(f"held-out cell folder(s) missing from {tune_dir}: {missing}")
    wanted = {str(s) for s in record["heldout_sample_ids"]}
    for cell in cells:
        rows = load_rows(cell)
        for arm, group in rows.groupby("arm"):
            absent = sorted(wanted - set(group["sample_id"].astype(str)))
            if absent:
                raise ValueError(f"held-out cell {cell.name}: arm {arm} has no row for sample(s) {absent}")
    result = write_archive(tune_dir, cells, out)
    recomputed = recompute_heldout(record, load_rows(out))
    differ = [
        f"{want['config']}: {key}"
        for want, got in zip(record["heldout"], recomputed, strict=True)
        for key in sorted(set(want) | set(got))
        if want.get(key) != got.get(key)
    ]
    if differ:
        raise ValueError(
            f"the archived rows in {out} do not reproduce {tune_dir / TUNE_RECORD} ({'; '.join(differ)}): the cells "
            "changed after the tune wrote its record; run the tune again"
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m lade_bench.tune.heldout_archive TUNE_DIR OUT``: archive a finished tune's held-out cells."""
    parser = argparse.ArgumentParser(
        prog="python -m lade_bench.tune.heldout_archive",
        description="Archive a finished tune's held-out cells (rows, configs, manifests) so that its held-out "
        "table can be recomputed from the rows alone.",
    )
    parser.add_argument("tune_dir", type=Path, help="the tune folder (holding tune_record.json)")
    parser.add_argument("out", type=Path, help="the archive folder to write (outside the tune folder)")
    args = parser.parse_args(argv)
    try:
        result = archive_heldout(args.tune_dir, args.out)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"archived {result.n_rows} rows of {result.n_cells} held-out cells to {result.path} "
        f"(report: python -m lade_bench.report {result.path})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
