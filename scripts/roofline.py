"""The roofline of a sweep's methods (``lade_bench.report.roofline``), for any sweep, not only Spec-Bench's.

``python -m lade_bench.report`` draws the roofline of a sweep's Spec-Bench rows with the rest of its
report; this draws it for the rows of any sweep folder or archive, optionally of some arms only (AR, the
reference of every point, is always kept), into ``OUT/tables/roofline.{csv,md,tex}`` and
``OUT/figures/roofline.{png,pdf}``. The committed main sweep's roofline was made with::

    python scripts/roofline.py paper_figures/rows/main --arms lookahead,prompt_lookup,jacobi \\
        --out paper_figures/main_roofline

An arm that is not a registered method is refused, with the methods named, before the sweep is loaded.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lade_bench import stats
from lade_bench.methods import is_registered, registered_methods
from lade_bench.report.build import FIGURES_DIR, TABLES_DIR
from lade_bench.report.roofline import build_roofline
from lade_bench.report.sweep import load_sweep


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python scripts/roofline.py", description=__doc__.splitlines()[0])
    parser.add_argument("sweep_dirs", nargs="+", help="sweep folder(s) or their archives (results.archive)")
    parser.add_argument("--out", required=True, help="output folder: tables/ and figures/ are written under it")
    parser.add_argument("--arms", default=None, help="comma-separated arms to draw (default: every arm)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Load the sweep, keep the chosen arms and write the roofline; returns the exit status."""
    args = parse_args(argv)
    wanted = [arm.strip() for arm in (args.arms or "").split(",") if arm.strip()]
    # A misspelt arm is refused before the sweep (and its bootstrap summaries) is loaded.
    unknown = [arm for arm in wanted if not is_registered(arm)]
    if unknown:
        known = ", ".join(m.name for m in registered_methods())
        print(f"roofline: --arms {','.join(unknown)} is not a registered method; the methods: {known}", file=sys.stderr)
        return 2
    sweep = load_sweep(args.sweep_dirs)
    rows = sweep.rows[sweep.rows["arm"].isin([*wanted, stats.BASELINE_ARM])] if wanted else sweep.rows
    out = Path(args.out)
    result = build_roofline(sweep, out / TABLES_DIR, out / FIGURES_DIR, rows=rows)
    if result is None:
        print("roofline: no greedy rows of these arms have a matching device profile", file=sys.stderr)
        return 1
    for path in [*result.tables, result.figure.png, result.figure.pdf]:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
