import json

import pytest

from lade_bench.metrics.code_tasks import mbpp_job, score_classeval, score_mbpp

from ..sandbox.sandbox_helpers import needs_sandbox

# Shaped like MBPP record 2 (similar_elements), with a setup line added to exercise test_setup_code.
MBPP_PAYLOAD = {
    "task_id": 2,
    "test_setup_code": "import math",
    "test_list": [
        "assert similar_elements((3, 4, 5, 6),(5, 7, 4, 10)) == (4, 5)",
        "assert similar_elements((1, 2, 3, 4),(5, 4, 3, 7)) == (3, 4)",
        "assert math.floor(2.5) == 2",
    ],
    "challenge_test_list": ["assert similar_elements((1,), (2,)) == ()"],
}
MBPP_SOLUTION = "def similar_elements(a, b):\n    return tuple(sorted(set(a) & set(b)))\n"


@needs_sandbox
def test_mbpp_correct_and_wrong():
    assert score_mbpp(MBPP_SOLUTION, MBPP_PAYLOAD, timeout_s=5).passed
    wrong = "def similar_elements(a, b):\n    return tuple(a)\n"
    result = score_mbpp(wrong, MBPP_PAYLOAD, timeout_s=5)
    assert result.status == "failed"
    assert "AssertionError" in result.report
    assert [t.outcome for t in result.tests] == ["failed", "failed", "passed"]
    assert score_mbpp(MBPP_SOLUTION, MBPP_PAYLOAD, timeout_s=5, include_challenge_tests=True).passed


@needs_sandbox
def test_mbpp_early_exit_and_main_block():
    assert not score_mbpp(MBPP_SOLUTION + "exit()\n", MBPP_PAYLOAD, timeout_s=5).passed
    with_demo = MBPP_SOLUTION + "if __name__ == '__main__':\n    print(input())\n"
    assert score_mbpp(with_demo, MBPP_PAYLOAD, timeout_s=5).passed


@needs_sandbox
def test_mbpp_hang_is_timeout():
    hang = "def similar_elements(a, b):\n    while True:\n        pass\n"
    assert score_mbpp(hang, MBPP_PAYLOAD, timeout_s=1).status == "timeout"


def test_mbpp_job_layout_and_validation():
    job = mbpp_job("X = 1", {"test_setup_code": "S = 0", "test_list": ["assert X"]})
    # The setup runs before the completion in the worker, and before the tests in the supervisor;
    # the tests themselves never enter the completion's process.
    assert job.candidate.index("S = 0") < job.candidate.index("X = 1") and "assert X" not in job.candidate
    assert job.trusted_setup == "S = 0" and job.tests["statements"] == ["assert X"]
    with pytest.raises(ValueError, match="test_list"):
        score_mbpp("pass", {"test_setup_code": ""})
    with pytest.raises(ValueError, match="non-empty list"):
        score_mbpp("pass", {"test_list": "assert True"})


@pytest.fixture(scope="module")
def classeval(shared_data_dir):
    path = shared_data_dir / "classeval" / "ClassEval_data.json"
    if not path.exists():
        pytest.skip(f"ClassEval data not found at {path}")
    with path.open(encoding="utf-8") as f:
        return {record["task_id"]: record for record in json.load(f)}


@pytest.mark.parametrize(
    "task_id",
    [
        "ClassEval_0",  # AccessGatewayFilter: logging, datetime
        "ClassEval_14",  # BookManagementDB: writes an sqlite file in its cwd
        "ClassEval_26",  # CSVProcessor: writes and reads CSV files in its cwd
        "ClassEval_97",  # Words2Numbers: a test class name with a stray leading space
    ],
)
@needs_sandbox
def test_classeval_reference_solutions_pass(classeval, task_id):
    record = classeval[task_id]
    assert isinstance(record["import_statement"], list) and isinstance(record["test_classes"], list)
    result = score_classeval(record["solution_code"], record)
    assert result.passed, result.report


@needs_sandbox
@pytest.mark.parametrize(
    "task_id",
    [
        "ClassEval_4",  # tests write through attributes: system.students["Alice"]["courses"] = ...
        "ClassEval_16",  # the class mutates list arguments in place (operand stacks)
        "ClassEval_45",  # tests compare PIL images of the candidate with ImageChops
        "ClassEval_84",  # tests replace methods with MagicMock and assert on the calls
    ],
)
def test_classeval_semantics_across_the_process_boundary(classeval, task_id):
    record = classeval[task_id]
    result = score_classeval(record["solution_code"], record)
    assert result.passed, result.report


@needs_sandbox
def test_classeval_broken_solutions_fail(classeval):
    record = classeval["ClassEval_0"]
    # The skeleton: every method is only a docstring, so it returns None.
    skeleton = score_classeval(record["skeleton"], record)
    assert skeleton.status == "failed"
    assert "AccessGatewayFilterTestFilter.test_filter_1: failed" in skeleton.report
    # One method wrong.
    broken = record["solution_code"].replace("start_with = [\"/api\", '/login']", 'start_with = ["/api"]')
    assert broken != record["solution_code"]
    assert not score_classeval(broken, record).passed
    # Leaving before the tests finish does not count as passing.
    assert not score_classeval(record["solution_code"] + "\nimport sys\nsys.exit(0)\n", record).passed
