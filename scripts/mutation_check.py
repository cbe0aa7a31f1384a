"""Mutation check: the test suite must fail when a part of lookahead decoding is switched off.

Each mutation edits one line of a copy of ``src/`` (the working tree is never touched), then runs the
tests that should catch it with that copy first on ``sys.path``. A mutation that leaves the tests
green is a hole in the suite; the script exits 1 if any survives.

    .venv/bin/python scripts/mutation_check.py            # all mutations
    .venv/bin/python scripts/mutation_check.py --only harvest_off bonus_dropped

Runs from the repository root; takes a few minutes on 2 cores (each mutation stops at the first
failing test).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EFFECTIVENESS = "tests/decoding/test_effectiveness.py"
VERIFY_UNITS = "tests/decoding/test_verify_greedy.py"
BRANCH_UNITS = "tests/decoding/test_branch.py"


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` (which must occur exactly once) by ``new`` in ``path`` under ``src/``."""

    name: str
    what: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


MUTATIONS: tuple[Mutation, ...] = (
    Mutation(
        "harvest_off",
        "the window's n-grams never reach the pool (the whole lookahead branch is dead)",
        "lade_bench/decoding/lookahead/lookahead.py",
        "for ngram in window.ngrams(cur, step.last_level):",
        "for ngram in []:",
        (EFFECTIVENESS,),
    ),
    Mutation(
        "pool_ignored",
        "the pool is never consulted: no candidate is ever verified",
        "lade_bench/decoding/lookahead/lookahead.py",
        "candidates = pool.candidates(cur)",
        "candidates = []",
        (EFFECTIVENESS,),
    ),
    Mutation(
        "bonus_dropped",
        "on a full match the model's next token (the bonus) is not emitted",
        "lade_bench/decoding/core/tree.py",
        "    return [predictions[0], *(predictions[node] for node in path)], path\n",
        # A path ending at a leaf (a node no other node has as parent) matched its whole candidate.
        "    return [predictions[0], *(predictions[node] for node in path)]"
        "[: len(path) + (not path or best in parents)], path\n",
        (VERIFY_UNITS, EFFECTIVENESS),
    ),
    Mutation(
        "prompt_seeding_off",
        "prompt as reference no longer seeds the pool with the prompt's n-grams",
        "lade_bench/decoding/lookahead/lookahead.py",
        "pool.add_ngrams_of(sequence)\n",
        "pass\n",
        (EFFECTIVENESS,),
    ),
    Mutation(
        "trie_merges_by_depth",
        "the trie merges tokens by (depth, token) instead of (parent, token): unrelated prefixes share a node",
        "lade_bench/decoding/core/tree.py",
        "            parent = node\n",
        "            parent = -len(path) - 1\n",
        (BRANCH_UNITS,),
    ),
)


def mutate_copy(mutation: Mutation, workdir: Path) -> Path:
    """Copy ``src/`` into ``workdir`` and apply ``mutation`` there; return the copy's ``src``."""
    src = workdir / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    target = src / mutation.path
    text = target.read_text()
    count = text.count(mutation.old)
    if count != 1:
        raise SystemExit(
            f"mutation {mutation.name}: expected the snippet {mutation.old!r} once in {mutation.path}, found {count}; "
            "update scripts/mutation_check.py to the current code"
        )
    target.write_text(text.replace(mutation.old, mutation.new))
    return src


def run_tests(src: Path, tests: tuple[str, ...]) -> tuple[int, str]:
    """Run ``tests`` against the mutated copy; return pytest's exit code and its last lines."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    # -n 0: in one process. Under pytest-xdist (the suite's default), -x ends the run as "interrupted"
    # (exit 2) instead of "failed" (exit 1), which would read as an error rather than a caught mutant.
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", *tests]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    tail = "\n".join(done.stdout.strip().splitlines()[-3:])
    return done.returncode, tail


def check(mutation: Mutation) -> bool:
    """True when the tests catch ``mutation`` (they fail, rather than pass or error out)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutation.name}-") as workdir:
        src = mutate_copy(mutation, Path(workdir))
        started = time.perf_counter()
        code, tail = run_tests(src, mutation.tests)
    elapsed = time.perf_counter() - started
    # Exit 1 = tests ran and some failed; anything else (0 passed, 2+ errors) is not a catch.
    caught = code == 1
    verdict = "caught" if caught else ("SURVIVED" if code == 0 else f"ERROR (pytest exit {code})")
    print(f"{mutation.name:20s} {verdict:10s} {elapsed:6.0f}s  {mutation.what}", flush=True)
    if not caught:
        print(tail, flush=True)
    return caught


def main(argv: list[str] | None = None) -> int:
    """Run the selected mutations; 0 when every one is caught."""
    names = [m.name for m in MUTATIONS]
    parser = argparse.ArgumentParser(description="Check that the tests catch each lookahead mutation.")
    parser.add_argument("--only", nargs="+", choices=names, default=names, help="mutations to run")
    args = parser.parse_args(argv)
    results = [check(m) for m in MUTATIONS if m.name in args.only]
    print(f"{sum(results)} of {len(results)} mutations caught")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
