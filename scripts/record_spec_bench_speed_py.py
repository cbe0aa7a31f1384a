"""Record Spec-Bench's own ``speed.py`` numbers on the committed Spec-Bench rows (the leaderboard's fixture).

Runs the ``speed`` function of Spec-Bench's ``evaluation/speed.py`` (Xia et al., "Unlocking Efficiency in
Large Language Model Inference: A Comprehensive Survey of Speculative Decoding", ACL 2024 Findings;
github.com/hemingkx/Spec-Bench), read from a git mirror of their repository at a named commit and run
unchanged, on the answer files this suite exports from the committed archive
(``python -m lade_bench.export spec-bench``'s ``write_answer_files``): every method's file against the
AR file of the same cells, each of speed.py's tasks (MT-Bench, translation, summarization, QA, math
reasoning, RAG, overall), with the tokenizer of the model the cells ran (the converted embedded model's
folder, which speed.py's ``AutoTokenizer.from_pretrained`` reads as it reads Vicuna's). The one thing
changed around it: ``AutoTokenizer.from_pretrained`` is cached per folder (speed.py loads the tokenizer
at every call, 10 s for Gemma's; the tokenizer is the same).

The fixture (``tests/fixtures/spec_bench_speed_py.json``) names Spec-Bench's commit, the archive and
the sha256 of its rows, and per answer file and task speed.py's speedup and mean accepted length.
``tests/report/test_committed_spec_bench.py`` checks that the committed leaderboard's speed.py columns,
computed by ``lade_bench.export.spec_bench_speed``, are these numbers.

Usage: ``python scripts/record_spec_bench_speed_py.py --repo /path/to/hemingkx+Spec-Bench/repo
[--commit fd2c1cd7d2201ef71db4c5f4e455008f017967bf] [--archive paper_figures/spec_bench/rows/spec_bench]
[--out tests/fixtures/spec_bench_speed_py.json]`` (a bare git mirror; the tokenizers are read from the
model cache the archive's cells name, ``model_cache_dir``).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import transformers
import yaml

from lade_bench.export import write_answer_files
from lade_bench.models.loading import EMBEDDED_MODELS
from lade_bench.results.archive import read_archive_cells
from lade_bench.results.atomic import atomic_write_text

COMMIT = "fd2c1cd7d2201ef71db4c5f4e455008f017967bf"
TASKS = ("mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag", "overall")
ROOT = Path(__file__).resolve().parents[1]


def load_speed(repo: Path, commit: str):
    """Spec-Bench's ``speed`` function, its file's source run as written, with a cached tokenizer loader."""
    source = subprocess.run(
        ["git", "-C", str(repo), "show", f"{commit}:evaluation/speed.py"], check=True, capture_output=True, text=True
    ).stdout
    namespace: dict = {"__name__": "spec_bench_speed"}
    exec(compile(source, f"Spec-Bench@{commit[:7]}/evaluation/speed.py", "exec"), namespace)  # noqa: S102

    class CachedAutoTokenizer:
        from_pretrained = staticmethod(functools.cache(transformers.AutoTokenizer.from_pretrained))

    namespace["AutoTokenizer"] = CachedAutoTokenizer
    return namespace["speed"]


def tokenizer_folders(archive: Path) -> dict[str, str]:
    """Each model name of the archive's cells -> the folder its tokenizer is read from (embedded models)."""
    folders = {}
    for cell in read_archive_cells(archive):
        config = yaml.safe_load(cell["config_text"])
        model = config["model"]
        if model["source"] != "embedded":
            raise SystemExit(f"{cell['cell_id']}: model.source={model['source']!r}; this script reads embedded models")
        cache = Path(config["model_cache_dir"]).expanduser()
        folders[model["name"]] = str(EMBEDDED_MODELS[model["embedded"]].folder(cache))
    return folders


def main(argv: list[str] | None = None) -> int:
    """Export the archive's answer files, run speed.py on each method's file and write the fixture."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True, help="git mirror of hemingkx/Spec-Bench")
    parser.add_argument("--commit", default=COMMIT)
    parser.add_argument("--archive", type=Path, default=ROOT / "paper_figures" / "spec_bench" / "rows" / "spec_bench")
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "fixtures" / "spec_bench_speed_py.json")
    args = parser.parse_args(argv)
    speed = load_speed(args.repo, args.commit)
    folders = tokenizer_folders(args.archive)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = {path.stem: path for path in write_answer_files(args.archive, tmp)}
        for stem, path in sorted(files.items()):
            model = next(m for m in folders if stem.startswith(f"{m}-"))
            method, kind = re.fullmatch(rf"{re.escape(model)}-(.+)-([0-9a-f]{{16}})", stem).groups()
            if method == "ar":
                continue
            base = files[f"{model}-ar-{kind}"]
            tasks = {}
            for task in TASKS:
                _, _, speedup, accepted = speed(str(path), str(base), folders[model], task=task, report=False)
                tasks[task] = {"speedup": float(speedup), "tau": float(np.mean(accepted))}
            results[stem] = {"baseline": base.stem, "tokenizer": Path(folders[model]).name, "tasks": tasks}
            print(stem, f"overall {tasks['overall']['speedup']:.4f}", file=sys.stderr)
    rows = args.archive / "rows.parquet"
    fixture = {
        "spec_bench": {"repo": "hemingkx/Spec-Bench", "commit": args.commit, "file": "evaluation/speed.py"},
        "archive": str(args.archive.resolve().relative_to(ROOT)),
        "rows_sha256": hashlib.sha256(rows.read_bytes()).hexdigest(),
        "command": "python scripts/record_spec_bench_speed_py.py --repo <hemingkx+Spec-Bench mirror>",
        "results": results,
    }
    atomic_write_text(args.out, json.dumps(fixture, indent=1) + "\n")
    print(f"wrote {args.out}: {len(results)} answer files", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
