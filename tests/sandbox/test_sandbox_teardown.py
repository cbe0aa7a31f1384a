"""When a scoring call returns, no process of its sandbox exists, whatever the code did.

Each root cause by which sandbox processes used to outlive the call has its own hostile program:
the caller's kill reached only bubblewrap's process group while the supervisor (the sandbox's pid 1,
in a session of its own, its parent-death signal cleared by the privilege drop) and the worker lived
on; the supervisor could be kept busy in one long C call on a value the candidate returned (a set
of integers that all hash alike), or waiting on the worker outside any armed time limit (formatting
a failed test's exception calls ``repr`` on a proxy). Each runs as root (as CI does) and again as an
unprivileged caller.
"""

from __future__ import annotations

import secrets
import time

import pytest

from lade_bench.sandbox import SandboxLimits, run_tests_in_sandbox

from .sandbox_helpers import SURVIVORS, as_unprivileged_caller, needs_sandbox, survivors

pytestmark = needs_sandbox

# Replies (forged on its channel, as building it here would be as slow) with a set of integers that all
# hash alike (k * (2**61 - 1) hashes to 0): building it in the supervisor compares each with every
# earlier one, minutes in one C call.
COLLIDING_SET = (
    "import sys, time, wire\ndef make():\n"
    "    wire.send(int(sys.argv[4]), wire.dumps({'ok': {'set': [k * (2**61 - 1) for k in range(1, 100_000)]}}))\n"
    "    time.sleep(60)\n"
)
# A candidate object whose repr never returns: formatting the KeyError the test raises asks for it.
SLOW_REPR = (
    "import time\nclass Key:\n    def __hash__(self):\n        return 5\n"
    "    def __repr__(self):\n        time.sleep(60)\n        return 'key'\ndef make():\n    return Key()\n"
)
TESTS = {
    COLLIDING_SET: "def check(make):\n    assert make() == {0}\n",
    SLOW_REPR: "def check(make):\n    assert {1: 2}[make()] == 2\n",
}
# The scenarios as code, so that an unprivileged caller's interpreter runs exactly the same calls. The
# worker's command line holds its limits: an odd memory limit (or a run name) marks this sandbox's.
SCENARIOS = (
    SURVIVORS
    + """
import json, random, time
from lade_bench.sandbox import SandboxLimits, run_in_sandbox, run_tests_in_sandbox

def judged(candidate, test):
    memory_mb = random.randrange(1100, 1999)
    started = time.monotonic()
    result = run_tests_in_sandbox(candidate, {'kind': 'check_function', 'code': test, 'function': 'check',
                                  'candidate': 'make', 'time_limit_s': 1}, SandboxLimits(memory_mb=memory_mb),
                                  override_names=('make',), bind_candidate_names=False, load_time_limit_s=2)
    return {'status': result.status, 's': time.monotonic() - started,
            'left': survivors('"memory_bytes": %d,' % (memory_mb * 2**20))}

def caller_killed(token):
    # A caller (a child interpreter here) killed in the middle of a call: bubblewrap dies with it, and
    # the sandbox must go too (the privilege drop cleared its parent-death signal, which the kernel
    # would not deliver across uids anyway).
    import signal, subprocess, sys
    marker = 'lade_' + token  # built here: no command line holds it but the worker's
    call = "from lade_bench.sandbox import run_in_sandbox; run_in_sandbox('import time; time.sleep(60)', "
    call += "timeout_s=30, run_name='lade_' + %r)" % token
    child = subprocess.Popen([sys.executable, '-c', call])
    deadline = time.monotonic() + 30
    while not survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = survivors(marker)
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = time.monotonic() + 5
    while survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {'seen': seen, 'left': survivors(marker)}

def timed_out(marker):
    started = time.monotonic()
    result = run_in_sandbox('import time\\ntime.sleep(60)', timeout_s=1, run_name='lade_' + marker)
    return {'status': result.status, 's': time.monotonic() - started, 'left': survivors('lade_' + marker)}
"""
)


def _scenarios() -> dict:
    namespace: dict = {}
    exec(SCENARIOS, namespace)
    return namespace


def _check_wall_clock(out: dict) -> None:
    # bubblewrap's group is killed at the wall clock; nothing else may be left.
    assert out["status"] == "timeout" and out["left"] == [], out


def _check_colliding_set(out: dict) -> None:
    # Refused before it is built (too many keys with one hash): an error verdict, no kill needed.
    assert out["status"] == "error" and out["left"] == [], out
    assert out["s"] < 8, out


def _check_slow_repr(out: dict) -> None:
    # Formatted under the test's own 1 s limit, which ends it; the wall clock (20 s) never comes.
    assert out["status"] in ("timeout", "failed", "error") and out["left"] == [], out
    assert out["s"] < 8, out


def _check_caller_killed(out: dict) -> None:
    assert out["seen"] and out["left"] == [], out  # the sandbox was running, and it went with its caller


def test_a_caller_killed_in_the_middle_of_a_call_leaves_no_process():
    _check_caller_killed(_scenarios()["caller_killed"](secrets.token_hex(8)))


def test_a_sandbox_killed_at_the_wall_clock_leaves_no_process():
    _check_wall_clock(_scenarios()["timed_out"](secrets.token_hex(8)))


@pytest.mark.parametrize("candidate", [COLLIDING_SET, SLOW_REPR], ids=["colliding_set", "slow_repr"])
def test_a_stuck_supervisor_leaves_no_process(candidate):
    out = _scenarios()["judged"](candidate, TESTS[candidate])
    (_check_colliding_set if candidate is COLLIDING_SET else _check_slow_repr)(out)


def test_an_unprivileged_callers_sandbox_leaves_no_process():
    code = SCENARIOS + (
        f"print(json.dumps({{'wall': timed_out('{secrets.token_hex(8)}'), "
        f"'caller': caller_killed('{secrets.token_hex(8)}'), "
        f"'colliding': judged({COLLIDING_SET!r}, {TESTS[COLLIDING_SET]!r}), "
        f"'repr': judged({SLOW_REPR!r}, {TESTS[SLOW_REPR]!r})}}))"
    )
    out = as_unprivileged_caller(code)
    _check_wall_clock(out["wall"])
    _check_caller_killed(out["caller"])
    _check_colliding_set(out["colliding"])
    _check_slow_repr(out["repr"])


# A plain value the trusted test hands to one long C call (summing a range of 10**12 numbers: sum()
# checks for signals nowhere) in the supervisor, where its own timer cannot interrupt it.
LONG_C_CALL = "def numbers():\n    return range(10**12)\n"


@pytest.mark.slow
def test_a_supervisor_stuck_in_one_c_call_is_stopped_from_outside():
    memory_mb = 1100 + secrets.randbelow(899)
    started = time.monotonic()
    result = run_tests_in_sandbox(
        LONG_C_CALL,
        {
            "kind": "check_function",
            "code": "def check(c):\n    assert sum(c()) > 0\n",
            "function": "check",
            "candidate": "numbers",
            "time_limit_s": 1,
        },  # fmt: skip
        SandboxLimits(memory_mb=memory_mb),
        override_names=("numbers",),
        bind_candidate_names=False,
        load_time_limit_s=2,
    )
    # The wall clock alone would allow 2 x 2 + 1 + 15 s; the test's own 1 s limit (plus slack) ends it,
    # from outside the supervisor, and takes every process of the sandbox with it.
    assert result.status == "timeout", result.report
    assert "stayed busy past its 1 s time limit" in result.stderr_tail, result.stderr_tail
    assert time.monotonic() - started < 12
    assert survivors(f'"memory_bytes": {memory_mb * 2**20},') == []
