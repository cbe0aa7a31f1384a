"""Results in other tools' formats, read from the rows alone (``python -m lade_bench.export``).

* ``spec_bench_answers``: Spec-Bench's answer files (``evaluation/eval.py``), written from a sweep's
  rows and read back from files Spec-Bench users publish (shown in the report as external results).
"""

from lade_bench.export.spec_bench_answers import (
    AnswerFileError,
    answer_records,
    read_answer_file,
    write_answer_files,
)

__all__ = ["AnswerFileError", "answer_records", "read_answer_file", "write_answer_files"]
