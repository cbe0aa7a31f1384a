"""The reference-sweep plan scripts: their groups (one per sitting; Spec-Bench's: one model per sitting), and a
bad group refused before any run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from lade_bench.datasets import load_dataset_samples
from lade_bench.datasets.spec_bench import GROUPS
from tests.report.committed import spec_bench_cell_arms

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPTS / script), *args], capture_output=True, text=True, timeout=30, cwd=cwd)


def test_the_reference_plan_lists_its_groups():
    done = _run("reference_results.sh", "--groups", cwd=SCRIPTS)
    groups = done.stdout.split()
    assert done.returncode == 0
    # Each main-table (model, dataset) is a group, each ablation or sampling sweep a whole one.
    assert len([g for g in groups if g.startswith("main:")]) == 2 * 6
    assert {
        "main:smollm2:mt_bench",
        "main:gemma3_270m:xsum",
        "prompt_ref",
        "ablation_wg",
        "ablation_n",
        "sampling",
    } <= set(groups)


def test_the_spec_bench_plan_sits_once_per_model_each_cell_over_every_group():
    """Spec-Bench's warm-state scope (the sweep's default) makes a cell the whole benchmark: a sitting is a model,
    and the plan selects no group (a cell of one group would be refused)."""
    done = _run("spec_bench_reference.sh", "--models", cwd=SCRIPTS)
    assert done.returncode == 0 and done.stdout.split() == ["smollm2", "gemma3_270m"]
    assert "dataset.categories" not in (SCRIPTS / "spec_bench_reference.sh").read_text()


@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        (
            "reference_results.sh",
            ["OUT", "DATA", "main:llama:mt_bench"],
            "unknown group 'main:llama:mt_bench'; the groups are: main:smollm2:mt_bench",
        ),
        ("reference_results.sh", [], "usage: bash scripts/reference_results.sh OUTPUT_ROOT [SHARED_DATA_DIR [GROUP]]"),
        (
            "spec_bench_reference.sh",
            ["OUT", "DATA", "llama"],
            "unknown model 'llama': MODEL is one of smollm2 gemma3_270m",
        ),
        (
            "spec_bench_reference.sh",
            ["OUT", "DATA", "gemma3_270m"],
            "no Spec-Bench question file at DATA/spec_bench/question.jsonl",
        ),
        (
            "gpu_check.sh",
            ["OUT", "--spec-bench", "DATA/question.jsonl"],
            "gpu_check: --spec-bench needs Spec-Bench's question file (data/spec_bench/question.jsonl), got 'DATA/",
        ),
        (
            "baselines_reference.sh",
            ["OUT", "smollm2", "xsum"],
            "unknown group 'smollm2 xsum': MODEL is one of smollm2 gemma3_270m",
        ),
        (
            "batch_invariant_reference.sh",
            ["OUT", "gemma3_270m", "xsum"],
            "unknown group 'gemma3_270m xsum': MODEL is one of smollm2 gemma3_270m, DATASET one of mt_bench humaneval",
        ),
        ("batch_invariant_reference.sh", [], "usage: bash scripts/batch_invariant_reference.sh OUTPUT_ROOT [MODEL"),
        (
            "real_text_reference.sh",
            ["OUT", "DATA", "humaneval_7b"],
            "unknown part 'humaneval_7b': PART is one of spec_bench_0.5b humaneval_1.5b",
        ),
        ("real_text_reference.sh", ["OUT"], "usage: bash scripts/real_text_reference.sh OUTPUT_ROOT SHARED_DATA_DIR"),
    ],
)
def test_a_bad_group_is_named_with_the_allowed_ones_before_anything_runs(tmp_path, script, args, message):
    args = [str(tmp_path / a) if a == "OUT" else a for a in args]
    done = _run(script, *args, cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written: no output folder, no run started


def test_the_paper_scale_volume_the_docs_give_is_the_plans(shared_data_dir):
    """docs/spec_bench.md's cells, arm runs, turns, generations and tokens of Spec-Bench's own run, counted
    here from the sweep's groups, its three cell configs and the question file (read by the dataset's loader)."""
    root = SCRIPTS.parent
    question_file = shared_data_dir / "spec_bench" / "question.jsonl"
    if not question_file.is_file():
        pytest.skip(f"{question_file} not found")
    questions = load_dataset_samples("spec_bench", path=str(question_file), limit=None)
    turns = sum(len(q.turns) for q in questions)
    two_turns = sum(len(q.turns) == 2 for q in questions)
    variants = spec_bench_cell_arms(root)
    arms = [len(arms) for arms in variants.values()]
    tokens = yaml.safe_load((root / "conf" / "sweep" / "spec_bench.yaml").read_text())["max_new_tokens"]
    text = " ".join((root / "docs" / "spec_bench.md").read_text().split())
    expected = (
        f"{len(variants)} cells (one per variant, each over all {len(GROUPS)} groups), {sum(arms)} arm runs per turn"
        f" ({', '.join(f'{len(a)} in `{v}`' for v, a in variants.items())}) over {turns} "
        f"turns ({len(questions)} questions, MT-Bench's {two_turns} with both turns): {sum(arms) * turns:,} "
        f"generations of up to {tokens} new tokens, at most {sum(arms) * turns * tokens:,} tokens"
    )
    assert expected in text, re.findall(r"\d+ cells \(.*?tokens\.", text)
