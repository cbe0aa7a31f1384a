"""``python -m lade_bench.export``: a sweep's rows as other tools' files, and such files checked on the way in.

Examples::

    # one Spec-Bench answer file per (model, arm, kind of cell), for Spec-Bench's evaluation/speed.py and equal.py
    python -m lade_bench.export spec-bench runs/spec_bench --out answers/
    # answer files (ours or a Spec-Bench user's) checked as the report imports them, against the question file
    python -m lade_bench.export spec-bench-check --questions ../shared/data/spec_bench/question.jsonl answers/*.jsonl
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lade_bench.export.spec_bench_answers import AnswerFileError, read_answer_file, write_answer_files
from lade_bench.export.spec_bench_records import QuestionFileError, read_questions


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the command line and write or check the files; returns the exit status (2: refused, one line)."""
    parser = argparse.ArgumentParser(prog="python -m lade_bench.export", description=__doc__.splitlines()[0])
    formats = parser.add_subparsers(dest="format", required=True)
    spec_bench = formats.add_parser("spec-bench", help="Spec-Bench answer files (evaluation/eval.py's format)")
    spec_bench.add_argument("sweep", help="a sweep folder (<output_root>/<sweep_name>) or its archive")
    spec_bench.add_argument("--out", required=True, help="folder for <model>-<arm>[-<lookahead shape>]-<cell id>.jsonl")
    check = formats.add_parser(
        "spec-bench-check", help="check Spec-Bench answer files as the report imports them (--spec-bench-answers)"
    )
    check.add_argument("files", nargs="+", metavar="FILE", help="answer files (JSONL, evaluation/eval.py's format)")
    check.add_argument(
        "--questions", required=True, help="Spec-Bench's question.jsonl, every record checked against it"
    )
    args = parser.parse_args(argv)
    try:
        if args.format == "spec-bench-check":
            questions = read_questions(args.questions)
            # Every file read before anything is printed: a refusal is the only line.
            read = [(path, read_answer_file(path, questions)) for path in args.files]
            for path, answers in read:
                print(f"{path}: {answers.model_id}, {len(answers.records)} questions, every record well formed")
            return 0
        files = write_answer_files(args.sweep, args.out)
    except (AnswerFileError, QuestionFileError) as why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    for path in files:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
