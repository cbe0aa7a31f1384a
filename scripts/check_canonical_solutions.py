"""Run every reference solution of HumanEval, MBPP and ClassEval through the sandboxed scorers.

A change to the sandbox must keep every reference solution passing (MBPP tasks 367 and 927 fail
upstream too) and keep the per-call time near what it was. This prints, per dataset, how many
passed, which did not (with their status), and the median and 90th-percentile time per call.

Usage::

    python scripts/check_canonical_solutions.py --shared-data ../shared/data [--limit N] [--out FILE.json]

Timings are only comparable between two runs on the same, otherwise idle machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lade_bench.metrics.code_tasks import score_classeval, score_mbpp
from lade_bench.metrics.humaneval_exec import humaneval_job, load_humaneval_problems
from lade_bench.sandbox import SandboxLimits, SandboxResult

# As score_humaneval runs them.
LIMITS = SandboxLimits(memory_mb=2048)


def _humaneval(limit: int | None) -> Iterable[tuple[str, Callable[[], SandboxResult]]]:
    problems = list(load_humaneval_problems().values())[:limit]
    for problem in problems:
        job = humaneval_job(problem, problem["canonical_solution"])
        yield problem["task_id"], lambda job=job: job.run(load_time_limit_s=10.0, limits=LIMITS,
                                                          allow_unsandboxed=False)  # fmt: skip


def _mbpp(shared: Path, limit: int | None) -> Iterable[tuple[str, Callable[[], SandboxResult]]]:
    with open(shared / "mbpp" / "mbpp.jsonl", encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()][:limit]
    for record in records:
        yield f"mbpp/{record['task_id']}", lambda r=record: score_mbpp(r["code"], r)


def _classeval(shared: Path, limit: int | None) -> Iterable[tuple[str, Callable[[], SandboxResult]]]:
    records = json.loads((shared / "classeval" / "ClassEval_data.json").read_text(encoding="utf-8"))[:limit]
    for record in records:
        yield record["task_id"], lambda r=record: score_classeval(r["solution_code"], r)


def _check(name: str, calls: list[tuple[str, Callable[[], SandboxResult]]]) -> dict[str, Any]:
    durations, failures = [], {}
    for task_id, call in tqdm(calls, desc=name, unit="task"):
        started = time.perf_counter()
        result = call()
        durations.append(time.perf_counter() - started)
        if not result.passed:
            failures[task_id] = f"{result.status}: {(result.report or result.stderr_tail).strip()[-300:]}"
    quantiles = statistics.quantiles(durations, n=10) if len(durations) >= 2 else durations * 9
    return {
        "n": len(calls),
        "passed": len(calls) - len(failures),
        "not_passed": failures,
        "median_s": statistics.median(durations),
        "p90_s": quantiles[-1],
    }


def main() -> None:
    """Parse the arguments, run the three datasets and print (and optionally save) the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared-data", type=Path, required=True, help="folder holding mbpp/ and classeval/")
    parser.add_argument("--limit", type=int, default=None, help="first N tasks of each dataset only")
    parser.add_argument("--out", type=Path, default=None, help="also write the summary here as JSON")
    args = parser.parse_args()
    summary = {
        "humaneval": _check("humaneval", list(_humaneval(args.limit))),
        "mbpp": _check("mbpp", list(_mbpp(args.shared_data, args.limit))),
        "classeval": _check("classeval", list(_classeval(args.shared_data, args.limit))),
    }
    for name, part in summary.items():
        print(f"{name}: {part['passed']}/{part['n']} passed; per call median {part['median_s']:.3f} s, "
              f"p90 {part['p90_s']:.3f} s")  # fmt: skip
        for task_id, why in part["not_passed"].items():
            print(f"  {task_id}: {why.splitlines()[-1] if why else ''}")
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=1), encoding="utf-8")
        print(f"summary written to {args.out}")


if __name__ == "__main__":
    main()
