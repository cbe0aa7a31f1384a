"""The strong-baselines table: each method against AR within one (dtype, mode), and AR's own gain.

    python -m lade_bench.report.baselines SWEEP_DIR [SWEEP_DIR ...] --out paper_figures/baselines

A baselines sweep (``scripts/baselines_reference.sh``) runs the same samples in several (dtype,
compile) settings, one cell per (model, dataset, dtype, mode, lookahead configuration). Two kinds of
number come out, never mixed:

* within a cell: every arm's speedup over that cell's AR (same dtype, same mode), the suite's usual
  paired estimate (``stats.summarize``);
* across cells: AR's gain over the reference AR (eager float32, the suite's default baseline) on the
  same units (``stats.baseline_gain``, per token), so a reader sees how much faster the baseline got
  and what remains of each method's gain against it. Two cells are compared only when every run
  that timed them was on one CPU kind (``processor``: model and dtype features, recorded per run in
  the manifest): sittings of one sweep may land on different machines, and two machines of one
  host name ran the same bf16 AR at 10.9-11.2 and 6.6 tokens/s (SmolLM2 HumanEval bf16 eager,
  2026-12-02). Elsewhere the gain is left empty and the table's ``processor`` column says why.

Writes ``tables/baselines.md`` and ``.csv`` (one row per cell and arm, n beside every number),
``tables/baselines_summary.md`` (the README's view: per-token speedups, one column per setting) and
an archive of each sweep (``rows/<sweep>/``: its per-sample rows, every cell's config and manifest,
``results.archive``), from which :func:`collect_rows` and :func:`baselines_table` recompute the table
exactly. Only finished sweeps are tabulated: a cell still running or failed is refused by name.

Every per-token speedup is against ``stats.speedup_baseline``'s choice (AR, or the faster AR where a cell
also ran ``ar_standard``). This table has no step-path column, so it refuses cells on another step path
than the standard one: a ``+sweep=batch_invariant`` run is ``report.batch_invariant``'s, whose table reads
its numbers from :func:`arm_records` here and shows the path in every row.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from lade_bench import stats
from lade_bench.decoding.core.params import STANDARD_STEP_PATH
from lade_bench.report.conditions import PROCESSOR_MIXED, PROCESSOR_UNRECORDED, cell_processor, drift_table
from lade_bench.results import load_rows
from lade_bench.results.archive import cell_manifests, export_archive
from lade_bench.results.atomic import atomic_write_text

# Where the sweeps' archives go under the output folder.
ROWS_DIR = "rows"
# The setting every gain is measured against: the suite's default baseline on a CPU.
REFERENCE_DTYPE = "float32"
CELL_COLUMNS = (
    "model",
    "dataset",
    "dtype",
    "mode",
    "ngram",
    "window",
    "guesses",
    "prompt_as_reference",
    "processor",
)
TABLE_COLUMNS = (
    *CELL_COLUMNS,
    "arm",
    "n_units",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "speedup_per_token",
    "speedup_per_token_ci_low",
    "speedup_per_token_ci_high",
    "ar_gain",
    "ar_gain_ci_low",
    "ar_gain_ci_high",
    "ar_gain_n",
    "tokens_per_s",
    "compile_time_s",
    "matches_ar",
    "capped_share",
)


def collect_rows(folders: Sequence[str | Path]) -> pd.DataFrame:
    """Every row of the sweep folders or archives, with each cell's ``dtype`` and ``processor`` (from its
    manifest, :func:`cell_processor`) as columns."""
    frames = []
    for folder in folders:
        rows = load_rows(folder)
        manifests = cell_manifests(folder)
        dtypes = {cid: str(m["dtype"]).removeprefix("torch.") for cid, m in manifests.items()}
        rows["dtype"] = rows["cell_id"].map(dtypes)
        rows["processor"] = rows["cell_id"].map({cid: cell_processor(m) for cid, m in manifests.items()})
        frames.append(rows)
    return pd.concat(frames, ignore_index=True)


def with_mode(rows: pd.DataFrame) -> pd.DataFrame:
    """A copy of :func:`collect_rows`' frame with each row's ``mode`` (``stats.mode_label``: eager, or
    compiled with its torch.compile mode).

    Raises:
        ValueError: a row lacks its cell's ``dtype`` or ``processor``.
    """
    if rows["dtype"].isna().any() or rows["processor"].isna().any():
        raise ValueError("every row needs its cell's dtype and processor (collect_rows adds them from the manifests)")
    rows = rows.copy()
    rows["mode"] = [stats.mode_label(bool(c), m) for c, m in zip(rows["compiled"], rows["compile_mode"], strict=True)]
    return rows


def arm_records(rows: pd.DataFrame) -> list[dict[str, Any]]:
    """One record per (cell, arm): ``stats.summarize``'s, with the cell's ``dtype``, ``mode``, ``processor``
    and ``step_path``, the per-token speedup (``speedup_per_token`` and its interval ends), the arm it is
    against (``per_token_baseline``) and ``capped_share``; what every table of a baselines-plan sweep
    reads (this one and ``report.batch_invariant``'s).

    Args:
        rows: :func:`with_mode`'s frame.

    Per token as well as in wall time: a low-precision greedy output may leave AR's tokens (a near tie
    flips) and then differ in length, so only time per token compares such outputs. The per-token
    speedup is against ``stats.speedup_baseline``'s choice on that basis: AR, or in a cell that also
    ran AR on the standard step path (``ar_standard``), the faster of the two per token.

    ``capped_share`` is the share of the arm's paired outputs at the cap (``stats`` ``n_at_cap``, from
    each row's own ``max_new_tokens``; NaN for rows recorded before the budget was a column).
    """
    summary = stats.summarize(rows)
    cell_info = rows.groupby("cell_id")[["dtype", "mode", "processor", "step_path"]].first()
    summary = summary.join(cell_info, on="cell_id")
    paired_cells = {cid: stats.common_rows(cell) for cid, cell in rows.groupby("cell_id", sort=False)}
    per_token_baselines = {cid: stats.speedup_baseline(paired, sampled=True) for cid, paired in paired_cells.items()}
    records = []
    for record in summary.to_dict("records"):
        cell_id = record["cell_id"]
        baseline = per_token_baselines[cell_id]
        per_token = stats.speedup_estimate(paired_cells[cell_id], record["arm"], sampled=True, baseline=baseline)
        records.append(
            {
                **record,
                "per_token_baseline": baseline,
                "speedup_per_token": per_token.value,
                "speedup_per_token_ci_low": per_token.low,
                "speedup_per_token_ci_high": per_token.high,
                "capped_share": record["n_at_cap"] / record["n_pairs"] if record["n_pairs"] else math.nan,
            }
        )
    return records


def baselines_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The table (``TABLE_COLUMNS``), one row per (cell, arm), from per-sample rows with ``dtype``.

    Args:
        rows: :func:`collect_rows`' frame (of the sweeps or of their committed archives).

    The numbers are :func:`arm_records`'. AR rows carry ``ar_gain``: its per-token speedup over the AR
    of the eager float32 cell of the same model, dataset and lookahead configuration (1.0 for that cell
    itself), on the units both ran; empty unless both cells were timed on one recorded CPU kind
    (``processor``).

    Raises:
        ValueError: a cell ran on another step path than the standard one: its table is
            ``report.batch_invariant``'s, which shows the path beside every number (this one has no
            column for it, so such a cell would read as a standard one).
    """
    rows = with_mode(rows)
    other_paths = sorted(set(rows["step_path"]) - {STANDARD_STEP_PATH})
    if other_paths:
        raise ValueError(
            f"cells on step_path {other_paths} are not tabulated here (this table has no step-path column); "
            "use python -m lade_bench.report.batch_invariant, which shows the path in every table"
        )
    records = []
    for record in arm_records(rows):
        cell_rows = rows[rows["cell_id"] == record["cell_id"]]
        gain = _ar_gain(rows, cell_rows, record) if record["arm"] == stats.BASELINE_ARM else None
        records.append(
            {
                **{name: record[name] for name in CELL_COLUMNS},
                "arm": record["arm"],
                "n_units": record["n_units"],
                "speedup": record["speedup"],
                "speedup_ci_low": record["speedup_ci_low"],
                "speedup_ci_high": record["speedup_ci_high"],
                "speedup_per_token": record["speedup_per_token"],
                "speedup_per_token_ci_low": record["speedup_per_token_ci_low"],
                "speedup_per_token_ci_high": record["speedup_per_token_ci_high"],
                "ar_gain": gain.value if gain else math.nan,
                "ar_gain_ci_low": gain.low if gain else math.nan,
                "ar_gain_ci_high": gain.high if gain else math.nan,
                "ar_gain_n": gain.n_units if gain else 0,
                "tokens_per_s": record["tokens_per_s"],
                "compile_time_s": record["compile_time_s"],
                "matches_ar": record["matches_ar"],
                "capped_share": record["capped_share"],
            }
        )
    return pd.DataFrame.from_records(records, columns=list(TABLE_COLUMNS))


def _ar_gain(rows: pd.DataFrame, cell_rows: pd.DataFrame, record: dict) -> stats.Estimate | None:
    if record["processor"] in (PROCESSOR_UNRECORDED, PROCESSOR_MIXED):
        return None
    same = rows[
        (rows["processor"] == record["processor"])
        & (rows["model"] == record["model"])
        & (rows["dataset"] == record["dataset"])
        & (rows["dtype"] == REFERENCE_DTYPE)
        & (rows["mode"] == stats.EAGER)
        & (rows["ngram"] == record["ngram"])
        & (rows["window"] == record["window"])
        & (rows["guesses"] == record["guesses"])
    ]
    if same.empty:
        return None
    return stats.baseline_gain(same, cell_rows)


def baselines_drift(rows: pd.DataFrame) -> pd.DataFrame:
    """``stats.ar_drift`` of :func:`collect_rows`' frame: identical AR work (one model, dataset, dtype and
    mode, one CPU kind) timed in different cells, i.e. the AR arms of a setting's lookahead configurations.

    Its spread is the noise floor of every comparison across cells, the AR gains included.
    """
    cells = rows.groupby(["sweep", "cell_id"])[["processor", "dtype"]].first()
    keys = [(str(sweep), str(cell_id)) for sweep, cell_id in cells.index]
    drift = stats.ar_drift(
        rows,
        dict(zip(keys, cells["processor"], strict=True)),
        skip_cpus=frozenset({PROCESSOR_MIXED, PROCESSOR_UNRECORDED}),
        cell_dtypes=dict(zip(keys, cells["dtype"], strict=True)),
    )
    return drift.sort_values(["model", "dataset", "dtype", "mode"], ignore_index=True)


def render_markdown(table: pd.DataFrame) -> str:
    """The table as markdown: speedups within the cell's mode, AR's gain over eager float32 AR, n each."""
    lines = [
        "| model | dataset | dtype | mode | lookahead (N, W, G) | arm | speedup vs AR of its mode | "
        "per token | AR vs eager float32 AR (per token) | compile (s) | matches AR | at cap | CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.to_dict("records"):
        config = f"{row['ngram']}, {row['window']}, {row['guesses']}"
        per_token = (row["speedup_per_token"], row["speedup_per_token_ci_low"], row["speedup_per_token_ci_high"])
        lines.append(
            f"| {row['model']} | {row['dataset']} | {row['dtype']} | {row['mode']} | {config} | {row['arm']} | "
            f"{interval_text(row['speedup'], row['speedup_ci_low'], row['speedup_ci_high'], row['n_units'])} | "
            f"{interval_text(*per_token, row['n_units'])} | "
            f"{interval_text(row['ar_gain'], row['ar_gain_ci_low'], row['ar_gain_ci_high'], row['ar_gain_n'])} | "
            f"{number_text(row['compile_time_s'], '.0f')} | {number_text(row['matches_ar'], '.0%')} | "
            f"{number_text(row['capped_share'], '.0%')} | {row['processor']} |"
        )
    return "\n".join(lines) + "\n"


def render_summary(table: pd.DataFrame, drift: pd.DataFrame) -> str:
    """The README's view of the table: one column per (dtype, mode), per-token speedups with n.

    A method's row gives its speedup over the AR of the same cell (same dtype and mode); an AR row
    gives that AR's gain over eager float32 AR of the same model, dataset and lookahead
    configuration. Every number is per token, so low-precision outputs that left AR's tokens still
    compare; matches AR says how many did not. Below the table, the CPU kind(s) each (model, dataset)
    was timed on, and the drift of identical AR work across cells (:func:`baselines_drift`).
    """
    settings = sorted(
        {(r["dtype"], r["mode"]) for r in table.to_dict("records")},
        key=lambda s: (s[0] != REFERENCE_DTYPE, s[0], s[1] != stats.EAGER, s[1]),
    )
    header = "| model | dataset | lookahead (N, W, G) | arm | " + " | ".join(f"{d} {m}" for d, m in settings) + " |"
    lines = [header, "|" + "---|" * (4 + len(settings))]
    keys = ("model", "dataset", "ngram", "window", "guesses", "arm")
    for key, group in table.groupby(list(keys), sort=False):
        model, dataset, n, w, g, arm = key
        by_setting = {(r["dtype"], r["mode"]): r for r in group.to_dict("records")}
        cells = []
        for setting in settings:
            row = by_setting.get(setting)
            if row is None:
                cells.append("")
            elif arm == stats.BASELINE_ARM:
                gain = (row["ar_gain"], row["ar_gain_ci_low"], row["ar_gain_ci_high"])
                cells.append(interval_text(*gain, row["ar_gain_n"]))
            else:
                value = (row["speedup_per_token"], row["speedup_per_token_ci_low"], row["speedup_per_token_ci_high"])
                matches = number_text(row["matches_ar"], ".0%")
                cells.append(f"{interval_text(*value, row['n_units'])}, {matches} match AR")
        label = "AR (gain over eager float32 AR)" if arm == stats.BASELINE_ARM else arm
        lines.append(f"| {model} | {dataset} | {n}, {w}, {g} | {label} | " + " | ".join(cells) + " |")
    lines.append("")
    for (model, dataset), group in table.groupby(["model", "dataset"], sort=False):
        cpus = ", ".join(sorted(set(group["processor"])))
        lines.append(f"- {model}, {dataset}: timed on {cpus}.")
    lines.append("- An AR gain is left empty where the two cells were not timed on one recorded CPU kind.")
    lines += ["", *_drift_markdown(drift)]
    return "\n".join(lines) + "\n"


def _drift_markdown(drift: pd.DataFrame) -> list[str]:
    if drift.empty:
        return ["No two cells did identical AR work on one CPU kind, so no drift of AR time can be shown."]
    shown = drift_table(drift).drop(columns=["sweep", "cpu"])
    lines = [
        "Drift of identical AR work across cells (the same AR arm timed in the cells of two lookahead "
        "configurations; relative spread = (max - min) / median, n = cells): an AR gain, or a difference "
        "between two cells' speedups, smaller than its group's spread is within the machine's drift.",
        "",
        "| " + " | ".join(shown.columns) + " |",
        "|" + "---|" * len(shown.columns),
    ]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return lines


def interval_text(value: float, low: float, high: float, n: int) -> str:
    """``"1.23x [1.10, 1.40] (n=20)"``: a ratio with its interval (where there is one) and n; empty for NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    bounds = f" [{low:.2f}, {high:.2f}]" if not math.isnan(low) else ""
    return f"{value:.2f}x{bounds} (n={n})"


def number_text(value, spec: str) -> str:
    """``value`` formatted with ``spec``; empty for a missing value (None or NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return format(value, spec)


def write_baselines(sweep_dirs: Sequence[str | Path], out: str | Path) -> Path:
    """Archive each finished sweep under ``out/rows/``, then tabulate those archives; returns the markdown's path.

    Raises:
        ValueError: a sweep is not finished (``results.archive`` names each cell and why).
    """
    out = Path(out)
    archives = [export_archive(sweep, out / ROWS_DIR / Path(sweep).name).path for sweep in sweep_dirs]
    rows = collect_rows(archives)
    table = baselines_table(rows)
    atomic_write_text(out / "tables" / "baselines.csv", table.to_csv(index=False))
    path = out / "tables" / "baselines.md"
    atomic_write_text(path, render_markdown(table))
    atomic_write_text(out / "tables" / "baselines_summary.md", render_summary(table, baselines_drift(rows)))
    return path


def table_main(
    argv: list[str] | None, module: str, doc: str, what: str, write: Callable[[Sequence[str], str], Path]
) -> int:
    """The command line of a sweep-table report (``SWEEP_DIR ... --out DIR``): writes it, says where; 2 on bad input.

    Args:
        module: the ``python -m`` module name; ``doc``: its docstring (the first paragraph is the description).
        what: the table's name in the closing line (``baselines``, ``batch-invariant``) and the sweep kind.
        write: (sweep folders, out folder) -> the table's path.
    """
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n\n")[0])
    parser.add_argument("sweeps", nargs="+", help=f"sweep folders of a {what} run")
    parser.add_argument("--out", required=True, help="folder for tables/ and rows/")
    args = parser.parse_args(argv)
    try:
        path = write(args.sweeps, args.out)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{what} table: {path}; rows (archives): {Path(args.out) / ROWS_DIR}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    return table_main(argv, "lade_bench.report.baselines", __doc__, "baselines", write_baselines)


if __name__ == "__main__":
    raise SystemExit(main())
