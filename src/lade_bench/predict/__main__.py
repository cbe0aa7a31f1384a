"""``python -m lade_bench.predict SWEEP --profile PROFILE.json [...]``: the leaderboard another device would show.

Examples::

    # the committed main sweep's cells as the Intel Xeon 6/167/8 (SmolLM2) and AMD EPYC 25/17/1 (Gemma)
    # profiles predict them; one --profile per model of the sweep
    P=paper_figures/rows/main/device_profiles
    python -m lade_bench.predict paper_figures/rows/main \\
        --profile $P/cpu-x86-64-1-threads--smollm2-135m-instruct--float32--sdpa--cpu-17f8311b488c.json \\
                  $P/cpu-x86-64-1-threads--gemma3-270m--float32--sdpa--cpu-04ce6b5dd321.json
    # a float32 sweep predicted on the GPU that `python -m lade_bench.gpu_check --dtypes float32 ...` profiled
    # (it writes device_profile_<model>.json in its first dtype; a profile predicts rows of its dtype only)
    python -m lade_bench.predict runs/spec_bench --out predicted/h200 \\
        --profile gpu_check/device_profile_smollm2.json gpu_check/device_profile_gemma3_270m.json

Refusals (one line, exit status 2), before any row is priced: a profile file that is not one; a
profile of another model or dtype than the rows'; a sweep of several models without a profile for
each; a folder without rows; a step width or KV length outside the profile's measured range (the cell,
the value and the range).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lade_bench import stats
from lade_bench.predict.leaderboard import predicted_leaderboard
from lade_bench.predict.output import write_leaderboard
from lade_bench.predict.profiles import PredictError, match_profiles, read_profile_file
from lade_bench.report.conditions import cell_dtypes
from lade_bench.report.sweep import SweepFolders, read_sweep_folders
from lade_bench.stats.rules import add_interval_arguments

# Where the files go without --out: beside the command, never inside a (committed) sweep folder.
DEFAULT_OUT = Path("predicted")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m lade_bench.predict",
        description="Predict a sweep's leaderboard on the device a profile was measured on (the step-cost "
        "model, lade_bench.stats.step_cost), beside the speedups the rows' own device measured.",
    )
    parser.add_argument("sweep_dirs", nargs="+", metavar="SWEEP", help="sweep folder(s) or their archives")
    parser.add_argument(
        "--profile",
        nargs="+",
        action="extend",
        required=True,
        metavar="PROFILE.json",
        help="device profile(s) measured by the suite, one per model of the sweep",
    )
    parser.add_argument("--out", default=None, help=f"output folder (default: {DEFAULT_OUT}/<sweep name>)")
    add_interval_arguments(parser, "bootstrap resamples per interval", "fewest samples an interval is computed from")
    return parser.parse_args(argv)


def cell_models(folders: SweepFolders) -> dict[tuple[str, str], tuple[str, str, tuple[str, ...]]]:
    """Each cell's (model, dtype, other names of its model) from its rows and side files.

    Raises:
        PredictError: a cell whose dtype is not recorded (no manifest), which no profile can be checked against.
    """
    dtypes = cell_dtypes(folders.cells)
    aliases = {(c.sweep, c.cell_id): c.profile_key()[1] for c in folders.cells}
    models = folders.rows.groupby(["sweep", "cell_id"], sort=True)["model"].first()
    out = {}
    for (sweep, cell_id), model in models.items():
        key = (str(sweep), str(cell_id))
        dtype = dtypes.get(key, "-")
        if dtype in ("-", "None", "auto"):
            raise PredictError(
                f"cell {sweep}/{cell_id} records no dtype (no manifest.json), so no profile can be checked against it"
            )
        out[key] = (str(model), dtype, aliases.get(key, ()))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Predict and write the leaderboard; returns the exit status (2: refused, one line on stderr)."""
    args = parse_args(argv)
    try:
        profiles = [read_profile_file(path) for path in args.profile]
        try:
            folders = read_sweep_folders(args.sweep_dirs)
        except (FileNotFoundError, ValueError) as why:
            raise PredictError(str(why)) from None
        if folders.rows.empty:
            raise PredictError(
                f"no rows in {', '.join(args.sweep_dirs)}: pass a sweep folder holding cells (<cell>/rows.parquet) "
                "or a sweep archive (rows.parquet + cells.json)"
            )
        chosen = match_profiles(profiles, cell_models(folders))
        intervals = stats.IntervalSettings(n_boot=args.n_boot, min_units=args.min_ci_units)
        tables = predicted_leaderboard(folders, chosen, intervals)
    except PredictError as why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    names = "+".join(sorted(str(s) for s in folders.rows["sweep"].dropna().unique()))
    out = Path(args.out) if args.out else DEFAULT_OUT / names
    sweep_text = f"{', '.join(args.sweep_dirs)} ({len(folders.rows)} rows)"
    for path in write_leaderboard(tables, out, sweep_text):
        print(f"wrote {path.resolve()}")
    for table in tables:
        print(f"{table.model}: {len(table.records)} (cell, method) records, {table.profile.heading()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
