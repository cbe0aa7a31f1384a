"""``python -m lade_bench.report SWEEP_DIR [SWEEP_DIR ...] [--out DIR]``: figures, tables, HTML report.

Examples::

    # report of one sweep, into runs/ablation_wg/report/
    python -m lade_bench.report runs/ablation_wg
    # the committed reference: two sweeps reported together into paper_figures/
    python -m lade_bench.report runs/ablation_wg runs/sampling --out paper_figures
    # the same from the committed archives of those sweeps (python -m lade_bench.results.archive)
    python -m lade_bench.report paper_figures/rows/ablation_wg paper_figures/rows/sampling --out /tmp/again
    # a Spec-Bench sweep with answer files published by Spec-Bench users beside it (baseline first),
    # every record checked against Spec-Bench's question file
    python -m lade_bench.report runs/spec_bench --spec-bench-answers vicuna-vanilla.jsonl vicuna-pld.jsonl \\
        --spec-bench-questions ../shared/data/spec_bench/question.jsonl
    # every table and figure again on the samples whose AR output ends in no loop (runs/spec_bench/report-no_loop)
    python -m lade_bench.report runs/spec_bench --units no_loop
    # also publish a W&B Report (needs a logged-in W&B account and network)
    python -m lade_bench.report runs/ablation_wg --wandb-report --wandb-project lade-bench
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from lade_bench.export.spec_bench_answers import AnswerFileError
from lade_bench.report.build import build_report
from lade_bench.report.text_health import UNITS, UNITS_ALL
from lade_bench.stats.rules import add_interval_arguments


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line (see the module docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m lade_bench.report",
        description="Build figures (PNG+PDF), paper tables (LaTeX+Markdown) and a self-contained HTML "
        "report from sweep results. Every number is recomputed from the per-sample rows.",
    )
    parser.add_argument(
        "sweep_dirs", nargs="+", help="sweep folder(s), <output_root>/<sweep_name>, or their archives (results.archive)"
    )
    parser.add_argument("--out", default=None, help="output folder (default: <first sweep>/report)")
    parser.add_argument("--no-html", action="store_true", help="skip report.html")
    add_interval_arguments(
        parser,
        "bootstrap resamples per speedup CI",
        "fewest samples a CI is computed from; fewer: the point estimate and the reason",
    )
    parser.add_argument(
        "--spec-bench-answers",
        nargs="+",
        default=(),
        metavar="FILE",
        help="Spec-Bench answer files shown beside the Spec-Bench leaderboard, labelled external (Spec-Bench's "
        "speed.py arithmetic, never paired with the sweep's rows): the baseline's file first, then methods'",
    )
    parser.add_argument(
        "--spec-bench-questions",
        default=None,
        metavar="FILE",
        help="Spec-Bench's question.jsonl, which every record of --spec-bench-answers is checked against "
        "(question ids, categories, turns per question); needed with them",
    )
    parser.add_argument(
        "--units",
        choices=UNITS,
        default=UNITS_ALL,
        help="the paired units every number is on: all, or no_loop (the keys whose AR output ends in no exact "
        "loop; the split by text health, every method on the same keys). Default: %(default)s",
    )
    parser.add_argument(
        "--wandb-report", action="store_true", help="also create a W&B Report with the same panels (online)"
    )
    parser.add_argument("--wandb-project", default="lade-bench", help="W&B project (default: %(default)s)")
    parser.add_argument("--wandb-entity", default=None, help="W&B entity (default: the account's default)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the report build; returns the process exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        result = build_report(
            args.sweep_dirs,
            args.out,
            html=not args.no_html,
            n_boot=args.n_boot,
            min_ci_units=args.min_ci_units,
            spec_bench_answers=args.spec_bench_answers,
            spec_bench_questions=args.spec_bench_questions,
            units=args.units,
        )
    except AnswerFileError as why:
        # A malformed answer file is the user's input, refused in one line (file, line, field), not a traceback.
        print(f"error: {why}", file=sys.stderr)
        return 2
    print(f"sweep {result.sweep.label}: {len(result.sweep.rows)} rows, {len(result.sweep.cells)} cells")
    for fig in result.figures:
        print(f"figure  {fig.png}  {fig.pdf.name}")
    for name, files in result.tables.items():
        print(f"table   {name}: " + ", ".join(str(f) for f in files))
    for name, reason in result.skipped.items():
        print(f"skipped {name}: {reason}")
    if result.html is not None:
        print(f"report  {result.html.resolve().as_uri()}")
    if args.wandb_report:
        from lade_bench.report.wandb_report import publish_wandb_report
        from lade_bench.report.wandb_sink import WandbSettings

        url = publish_wandb_report(
            result, WandbSettings(mode="online", project=args.wandb_project, entity=args.wandb_entity)
        )
        print(f"W&B report {url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
