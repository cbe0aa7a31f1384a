"""``python -m lade_bench.export spec-bench SWEEP --out DIR``: a sweep's rows as other tools' files.

Example::

    # one Spec-Bench answer file per (model, method), for Spec-Bench's evaluation/speed.py and equal.py
    python -m lade_bench.export spec-bench runs/spec_bench --out answers/
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lade_bench.export.spec_bench_answers import AnswerFileError, write_answer_files


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and write the files; returns the exit status (2: nothing to export)."""
    parser = argparse.ArgumentParser(prog="python -m lade_bench.export", description=__doc__.splitlines()[0])
    formats = parser.add_subparsers(dest="format", required=True)
    spec_bench = formats.add_parser("spec-bench", help="Spec-Bench answer files (evaluation/eval.py's format)")
    spec_bench.add_argument("sweep", help="a sweep folder (<output_root>/<sweep_name>) or its archive")
    spec_bench.add_argument("--out", required=True, help="folder for <model>-<method>[-<setting>].jsonl")
    args = parser.parse_args(argv)
    try:
        files = write_answer_files(args.sweep, args.out)
    except AnswerFileError as why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    for path in files:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
