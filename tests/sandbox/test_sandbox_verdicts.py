"""Whatever a completion does, scoring it returns a verdict; each case here used to raise instead.

A raise from the scorer fails the whole cell, so a hostile (or merely odd) completion could end a
sweep: a SIGINT to the supervisor, an exception the supervisor could not rebuild (an ExceptionGroup,
a built-in type whose constructor wants other arguments), or a forged message on the worker's
channel. Each must now be a plain verdict (failed, violation or error), and never a pass.
"""

from __future__ import annotations

import pytest

from lade_bench.datasets import Sample
from lade_bench.metrics.code_tasks import score_classeval
from lade_bench.runner.scoring import score_output
from lade_bench.sandbox import run_in_sandbox, run_tests_in_sandbox

from .sandbox_helpers import needs_sandbox

pytestmark = needs_sandbox

ADD_TESTS = {"kind": "check_function", "code": "def check(c):\n    assert c(1, 2) == 3\n", "function": "check",
             "candidate": "add", "time_limit_s": 3}  # fmt: skip
CORRECT_ADD = "def add(a, b):\n    return a + b\n"


def judge(candidate: str):
    return run_tests_in_sandbox(candidate, ADD_TESTS, override_names=("add",), bind_candidate_names=False)


SIGNALS_AT_LOAD = (
    "import os, signal\n"
    "for target in (1, os.getppid(), 0, -1):\n"
    "    for sig in (signal.SIGINT, signal.SIGALRM, signal.SIGTERM):\n"
    "        try:\n            os.kill(target, sig)\n        except OSError:\n            pass\n"
)


def test_signals_to_the_supervisor_at_load_change_nothing():
    result = judge(SIGNALS_AT_LOAD + CORRECT_ADD)
    assert result.status == "passed", result.report  # the signals were refused; the code is correct
    result = judge("import os, signal\nos.kill(1, signal.SIGINT)\n" + CORRECT_ADD)
    assert result.status == "violation" and "PermissionError" in result.report


def test_signals_during_a_unittest_class_change_nothing():
    payload = {
        "import_statement": ["import os", "import signal"],
        "test_classes": ["AddTest"],
        "test": "import unittest\nclass AddTest(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(Adder().add(1, 2), 3)\n"
        "    def test_again(self):\n        self.assertEqual(Adder().add(2, 2), 4)\n",
    }
    poking = (
        "class Adder:\n    def add(self, a, b):\n"
        + "".join(
            f"        try:\n            os.kill({target}, signal.SIGINT)\n        except OSError:\n            pass\n"
            for target in (1, 0, -1)
        )
        + "        return a + b\n"
    )
    assert score_classeval(poking, payload).status == "passed"


@pytest.mark.parametrize(
    "raising",
    [
        "raise ExceptionGroup('several', [ValueError(1), TypeError(2)])",
        "raise BaseExceptionGroup('several', [KeyboardInterrupt()])",
        # A built-in type whose constructor needs five arguments, with arguments that are not data.
        "e = UnicodeDecodeError('utf-8', b'x', 0, 1, 'bad')\ne.args = (object(),)\nraise e",
        "class Odd(OSError):\n    def __init__(self):\n        super().__init__(object(), object())\nraise Odd()",
        "class Loud(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise Loud(object())",
        "class Deep(Exception):\n    pass\nx = []\nfor _ in range(10000):\n    x = [x]\nraise Deep(x)",
    ],
    ids=["exception_group", "base_exception_group", "unicode_error_odd_args", "oserror_subclass", "bad_str", "deep"],
)
def test_odd_exceptions_at_import_are_failures(raising):
    result = judge(raising + "\n" + CORRECT_ADD)
    assert result.status in {"failed", "error"}, (result.status, result.report)
    assert not result.passed


# The worker's channel to the supervisor is fd sys.argv[4]; ``wire`` is importable in the worker.
FORGE = "import os, sys, wire\nout = int(sys.argv[4])\n"


@pytest.mark.parametrize(
    "forgery",
    [
        FORGE + "wire.send(out, wire.dumps({'error': {'builtin': 'ExceptionGroup', 'type': 5, 'message': [1],"
        " 'args': {'list': [1]}, 'errno': 'x', 'traceback': None}}))\nos._exit(0)\n",
        FORGE + "wire.send(out, wire.dumps({'error': 'not a record'}))\nos._exit(0)\n",
        FORGE + "wire.send(out, wire.dumps({'error': {'builtin': 'UnicodeDecodeError', 'args': {'tuple': [1]}}}))\n"
        "os._exit(0)\n",
        FORGE + "wire.send(out, wire.dumps({'ok': True}))\nos.write(out, b'\\xff' * 64)\nos._exit(0)\n",
        FORGE + "os.write(out, b'\\x7f\\xff\\xff\\xff')\nos._exit(0)\n",
        FORGE + "wire.send(out, wire.dumps({'ok': True}))\nwire.send(out, wire.dumps({'ok': {'dict': "
        "[['names', {'dict': [['add', {'handle': [1, 'x']}]]}], ['modules', {'dict': []}]]}}))\n" + CORRECT_ADD,
    ],
    ids=[
        "weird_error_record",
        "error_not_a_record",
        "rebuild_needs_args",
        "garbage_after_ok",
        "huge_header",
        "forged_names",
    ],  # fmt: skip
)
def test_forged_messages_on_the_worker_channel_are_failures(forgery):
    result = judge(forgery)
    assert result.status in {"failed", "error", "violation"}, (result.status, result.report)
    assert not result.passed


def test_forged_exception_record_of_a_program_is_a_failure():
    forged = (  # a program's argv is its own: try every fd for the channel
        "import wire\nfor fd in range(3, 64):\n    try:\n        wire.send(fd, wire.dumps({'exception': {'builtin': "
        "'OSError', 'errno': 'x', 'type': [], 'message': {}}}))\n    except OSError:\n        pass\n"
        "raise SystemExit(3)\n"
    )
    result = run_in_sandbox(forged)
    assert result.status == "failed" and result.returncode == 3


def test_a_hostile_completion_never_fails_a_cell():
    # The runner's own entry point for quality columns, as a HumanEval cell calls it.
    test = "def check(candidate):\n    assert candidate(1, 2) == 3\n"
    payload = {"task_id": "t/0", "prompt": "def add(a, b):\n", "entry_point": "add", "test": test,
               "canonical_solution": ""}  # fmt: skip
    sample = Sample(sample_id="t/0", turns=(payload["prompt"],), reference=None, task="code", payload=payload,
                    completion_prefix=payload["prompt"])  # fmt: skip
    for body in ("    return a + b\nraise ExceptionGroup('x', [ValueError()])\n",
                 "    return a + b\nimport os, signal\nos.kill(1, signal.SIGINT)\n"):  # fmt: skip
        assert score_output("humaneval", body, sample, chat=False) == {"passed": False}


# A forged load reply whose message is a list nested 980 deep: the supervisor used to copy it into the
# verdict, and the caller's JSON parser (which shares the recursion limit with the caller's own frames)
# raised RecursionError when the call was made from a deep enough stack.
DEEP_RECORD = (
    FORGE + "body = b'{\"error\": {\"type\": \"E\", \"message\": ' + b'[' * 980 + b']' * 980 + b'}}'\n"
    "os.write(out, len(body).to_bytes(4, 'big') + body)\nos._exit(0)\n"
)


def _from_a_deep_stack(frames: int, call):
    return call() if frames == 0 else _from_a_deep_stack(frames - 1, call)


def test_a_deeply_nested_load_error_record_never_crashes_the_caller():
    result = _from_a_deep_stack(200, lambda: judge(DEEP_RECORD + CORRECT_ADD))
    assert result.status in {"failed", "error"} and not result.passed, (result.status, result.report)
