"""``python -m lade_bench.report.step_cost_cli --out DIR SWEEP[=PROFILE] ...``: the step-cost model checked
against sweeps' cells.

Writes into ``--out``: ``check.csv`` (``report.step_cost_check.CHECK_COLUMNS``, one row per (cell, arm),
full precision), ``check.md`` (:mod:`lade_bench.report.step_cost_page`) and ``predicted_vs_measured.png``
/ ``.pdf`` (:mod:`lade_bench.report.step_cost_figure`). Each SWEEP is a sweep folder or archive; its cells
are predicted from its own device profiles, and ``=PROFILE`` names profiles for the cells those do not
match (a profile JSON, a tune record's ``profile``, or the engine benchmark's step-cost ``curves``), each
used only for cells of its model, dtype, mode, threads and, where it recorded one, CPU. Example (part of
the committed check, ``paper_figures/step_cost/``)::

    python -m lade_bench.report.step_cost_cli --out paper_figures/step_cost paper_figures/rows/main \\
        paper_figures/tune/mt_bench/heldout_rows=paper_figures/tune/mt_bench/tune_record.json
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lade_bench import stats
from lade_bench.profiling.device_profile import StoredProfile, profile_key
from lade_bench.report.figures import save_figure
from lade_bench.report.step_cost_check import check_sweep
from lade_bench.report.step_cost_figure import draw_check_figure
from lade_bench.report.step_cost_page import check_page
from lade_bench.report.sweep import load_sweep
from lade_bench.results.atomic import atomic_write_text

CHECK_CSV, CHECK_MD, CHECK_FIGURE = "check.csv", "check.md", "predicted_vs_measured"
PROG = "python -m lade_bench.report.step_cost_cli"


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "sweeps",
        nargs="+",
        metavar="SWEEP[=PROFILE]",
        help="sweep folder or archive, and optionally profiles for its cells its own profiles do not match "
        "(a profile JSON, a tune record or a step-cost file)",
    )
    parser.add_argument("--out", required=True, help="folder for check.csv, check.md and the figure")
    parser.add_argument("--n-boot", type=int, default=stats.N_BOOT, help="bootstrap resamples (default: %(default)s)")
    return parser.parse_args(argv)


def given_profiles(path: Path) -> list[StoredProfile]:
    """The profiles a command-line file holds: a device profile JSON, the ``profile`` a tune record embeds,
    or the ``curves`` of the engine benchmark's step-cost file (``python -m lade_bench.bench --step-cost``).

    Raises:
        ValueError: the file is none of these (names it and what it should be).
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("curves"), list):
        found = list(data["curves"])
    else:
        found = [data.get("profile") if isinstance(data, dict) and "profile" in data else data]
    if not found or not all(isinstance(p, dict) and "token_counts" in p and "forward_time_s" in p for p in found):
        raise ValueError(
            f"{path} is neither a device profile JSON, a tune record with one ('profile') nor a step-cost file "
            "('curves')"
        )
    return [StoredProfile(profile, path, profile_key(profile)) for profile in found]


def parse_sweeps(specs: Sequence[str]) -> list[tuple[Path, list[StoredProfile]]]:
    """Each ``SWEEP[=PROFILE]`` as a folder and its given profile, every path checked before any loading.

    Raises:
        ValueError: a folder or profile file that does not exist, or a profile file that is none.
    """
    out = []
    for spec in specs:
        folder, _, profile = spec.partition("=")
        if not Path(folder).is_dir():
            raise ValueError(f"{folder!r} is not a sweep folder or archive")
        if profile and not Path(profile).is_file():
            raise ValueError(f"{profile!r} (the profile given for {folder}) does not exist")
        out.append((Path(folder), given_profiles(Path(profile)) if profile else []))
    return out


def check_of(sweeps: Sequence[tuple[Path, list[StoredProfile]]], n_boot: int = stats.N_BOOT) -> pd.DataFrame:
    """The check of every sweep of :func:`parse_sweeps` (each loaded, summarised and checked), in order."""
    return pd.concat(
        [check_sweep(load_sweep(folder, n_boot=n_boot), given) for folder, given in sweeps], ignore_index=True
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Check every SWEEP's cells and write the table, the page and the figure; 2 on bad arguments."""
    args = parse_args(argv)
    try:
        sweeps = parse_sweeps(args.sweeps)
    except (ValueError, json.JSONDecodeError) as error:
        print(f"{PROG}: {error}", file=sys.stderr)
        return 2
    check = check_of(sweeps, n_boot=args.n_boot)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join([PROG, "--out", shlex.quote(args.out), *(shlex.quote(s) for s in args.sweeps)])
    atomic_write_text(out / CHECK_CSV, check.to_csv(index=False))
    atomic_write_text(out / CHECK_MD, check_page(check, command))
    save_figure(draw_check_figure(check), out, CHECK_FIGURE)
    print(f"{len(check)} (cell, arm) checks of {len(sweeps)} sweep(s) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
