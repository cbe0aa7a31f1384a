"""The supervisor: trusted harness inside the sandbox that starts the worker and decides the verdict.

Usage (by :mod:`lade_bench.sandbox` only): ``python -I -B supervisor.py VERDICT_FD SECTIONS_FD
[UID]`` with the job as JSON on stdin. The verdict goes to VERDICT_FD, an fd only this process holds;
each time limit it arms is announced on SECTIONS_FD, so that the caller can stop it if one long C call
keeps its own timer from firing. With UID (a root caller), it first drops to that host uid.

The supervisor is the sandbox's pid 1 and runs the tests; the generated code runs in a separate
worker process (:mod:`worker`). Before starting the worker, the supervisor makes itself
non-dumpable, so the worker (same uid, no capabilities) can neither ptrace it nor open its memory or
fds; the worker's seccomp filter lets it signal only itself. The worker never sees the tests or the
verdict fd, and can affect the verdict only through the values its code returns (see :mod:`remote`).
Stdlib only.
"""

import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import traceback
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import binding  # noqa: E402
import identity  # noqa: E402
import lifetime  # noqa: E402
import rebuild  # noqa: E402
import remote  # noqa: E402
import wire  # noqa: E402

_HERE = os.path.dirname(os.path.abspath(__file__))
_PR_SET_DUMPABLE = 4
_DETAIL_CHARS = 1500


class TestTimeout(BaseException):
    """A time limit of the supervisor expired (BaseException: test code's ``except Exception`` must not eat it)."""


def harden(memory_bytes: int) -> None:
    """Make this process unreadable to the worker and bound its own resources."""
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))


def start_worker(mode: str, limits: dict) -> tuple[subprocess.Popen, int, int]:
    """Start the worker; returns it, the fd to write requests to and the fd to read its messages from."""
    to_worker_r, to_worker_w = os.pipe()
    from_worker_r, from_worker_w = os.pipe()
    cmd = [sys.executable, "-I", "-B", "-X", "utf8", os.path.join(_HERE, "worker.py"), mode, json.dumps(limits),
           str(to_worker_r), str(from_worker_w)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, pass_fds=(to_worker_r, from_worker_w), close_fds=True)
    os.close(to_worker_r)
    os.close(from_worker_w)
    return proc, to_worker_w, from_worker_r


class Timer:
    """``with Timer(seconds, conn):`` raises TestTimeout after ``seconds`` and kills the worker.

    Each limit is also announced on the sections fd (``conn.sections_fd``): a SIGALRM handler runs only
    between bytecodes, so one long C call (comparing a huge value) would outlast it; the caller then
    stops the whole sandbox. While it is armed (and only then), ``conn`` may ask the worker anything.
    """

    def __init__(self, seconds: float, conn: "remote.Connection") -> None:
        self.seconds, self.conn, self.active = seconds, conn, False

    def _announce(self, line: bytes) -> None:
        try:
            os.write(self.conn.sections_fd, line)
        except OSError:  # the caller is gone or never listened (tests of this module): nothing to tell
            pass

    def _expire(self, signum, frame):
        if not self.active:  # a signal that arrived just after the limit was cancelled
            return
        self.active = False
        self.conn.kill(f"time limit of {self.seconds} s exceeded")
        raise TestTimeout(f"time limit of {self.seconds} s exceeded")

    def __enter__(self):
        self.active = True
        self.conn.armed = True
        self._announce(b"%r\n" % float(self.seconds))
        signal.signal(signal.SIGALRM, self._expire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        self.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        self.conn.armed = False
        self._announce(b"-\n")
        return False


def classify(exc: BaseException) -> str:
    """Outcome of a test that raised ``exc``: timeout, violation, memory, failed or error."""
    if isinstance(exc, TestTimeout):
        return "timeout"
    info = getattr(exc, "_lade_remote", None)
    if info is not None and wire.classify_report(info) != "failed":
        return wire.classify_report(info)
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, AssertionError):
        return "failed"
    return "error"


def _detail(exc: BaseException) -> str:
    info = getattr(exc, "_lade_remote", None)
    try:
        text = "".join(traceback.format_exception(exc))
    except Exception:  # noqa: BLE001 - str() of a proxy in its args may call a dead or hostile worker
        text = f"{type(exc).__name__} (its message could not be formatted)\n"
    if info is not None:
        text += "--- in the candidate's process:\n" + str(info.get("traceback", ""))
    return text[-_DETAIL_CHARS:]


class _Collect(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[dict] = []

    def _add(self, test, outcome, detail=""):
        self.outcomes.append({"name": test.id().split(".", 1)[-1], "outcome": outcome, "detail": detail})

    def addSuccess(self, test):
        super().addSuccess(test)
        self._add(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add(test, classify(err[1]), _detail(err[1]))

    def addError(self, test, err):
        super().addError(test, err)
        self._add(test, classify(err[1]), _detail(err[1]))

    def addSubTest(self, test, subtest, err):
        # Since Python 3.11 a test whose subtests failed gets no other callback: record them here.
        super().addSubTest(test, subtest, err)
        if err is not None:
            self._add(subtest, classify(err[1]), _detail(err[1]))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._add(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._add(test, "passed", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._add(test, "failed", "unexpected success")


def _run_one(name: str, seconds: float, conn, body) -> dict:
    try:
        with Timer(seconds, conn):
            try:
                body()
            except TestTimeout:
                raise
            except BaseException as exc:  # noqa: BLE001 - every test outcome is recorded
                # Formatted while the limit is still armed: str() of a proxy asks the worker.
                return {"name": name, "outcome": classify(exc), "detail": _detail(exc)}
        return {"name": name, "outcome": "passed", "detail": ""}
    except TestTimeout as exc:
        return {"name": name, "outcome": "timeout", "detail": str(exc)}


def run_tests(tests: dict, namespace: dict, conn) -> tuple[list[dict], bool]:
    """Run the trusted tests against the candidate; returns per-test outcomes and the overall verdict.

    The test code is defined (``tests["code"]``) before this, by :func:`_judge`, under a time limit.
    """
    kind = tests["kind"]
    code = lambda source, name: compile(source, name, "exec")  # noqa: E731
    if kind == "statements":  # MBPP: assertion lines, all under one time limit
        outcomes = []
        with_budget = {"left": float(tests["time_limit_s"])}
        for i, statement in enumerate(tests["statements"]):
            if with_budget["left"] <= 0:
                outcomes.append({"name": f"test {i}", "outcome": "timeout", "detail": "no time left"})
                continue
            started = _now()
            outcomes.append(_run_one(statement[:200], with_budget["left"], conn,
                                     lambda s=statement: exec(code(s, "<test>"), namespace)))  # fmt: skip
            with_budget["left"] -= _now() - started
        return outcomes, bool(outcomes) and all(o["outcome"] == "passed" for o in outcomes)
    if kind == "check_function":  # HumanEval: check(candidate)
        function, target = namespace[tests["function"]], namespace[tests["candidate"]]
        outcome = _run_one(f"{tests['function']}({tests['candidate']})", float(tests["time_limit_s"]), conn,
                           lambda: function(target))  # fmt: skip
        return [outcome], outcome["outcome"] == "passed"
    if kind == "unittest":  # ClassEval: each TestCase class with its own time limit
        outcomes, ok = [], True
        for class_name in tests["classes"]:
            case = namespace.get(class_name)
            if not (isinstance(case, type) and issubclass(case, unittest.TestCase)):
                outcomes.append({"name": class_name, "outcome": "error", "detail": "test class not found"})
                ok = False
                continue
            result = _Collect()
            suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
            try:
                with Timer(float(tests["time_limit_s_per_class"]), conn):
                    suite.run(result)
            except TestTimeout as exc:  # fired between tests, outside unittest's own handlers
                result.outcomes.append({"name": class_name, "outcome": "timeout", "detail": str(exc)})
            outcomes.extend(result.outcomes)
            # ClassEval's rule: a class passes if it ran tests and none failed or errored (judged by the
            # result itself too: a failed subtest leaves no outcome of its test's own).
            failed = any(o["outcome"] not in ("passed", "skipped") for o in result.outcomes)
            if result.testsRun == 0 or failed or not result.wasSuccessful():
                ok = False
        return outcomes, ok
    raise ValueError(f"unknown test kind {kind!r}")


def _now() -> float:
    import time

    return time.monotonic()


def _wait(proc: subprocess.Popen) -> dict:
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    signame = None
    if proc.returncode < 0:
        try:
            signame = signal.Signals(-proc.returncode).name
        except ValueError:
            signame = str(-proc.returncode)
    return {"returncode": proc.returncode, "signal": signame, "cpu_s": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": usage.ru_maxrss}  # fmt: skip


def _first_message(conn) -> dict:
    try:
        return conn.receive()
    except remote.WorkerGone:
        return {}


def check(job: dict, sections_fd: int) -> dict:
    """Load the candidate in a worker, run the trusted tests here, and report.

    Whatever the candidate does, this returns a verdict: a failure here after the worker started is
    reported as ``harness_error`` (an "error" verdict), never as a crash of the caller's cell.
    """
    with open("candidate.py", "w", encoding="utf-8") as f:
        f.write(job["candidate"])
    proc, to_worker, from_worker = start_worker("serve", job["limits"])
    conn = remote.Connection(proc.pid, to_worker, from_worker)
    conn.sections_fd = sections_fd
    verdict: dict = {"mode": "check", "tests": [], "passed": False}
    try:
        _judge(job, conn, verdict)
    except BaseException:  # noqa: BLE001 - the candidate may have provoked it; it must not escape
        verdict.update(tests=[], passed=False, harness_error=traceback.format_exc()[-_DETAIL_CHARS:])
    conn.kill("finished")
    verdict["worker"] = _wait(proc)
    verdict["worker_gone"] = None if conn.dead_reason == "finished" else conn.dead_reason
    if conn.broken is not None:  # a malformed message: an error, never a pass, whatever the tests concluded
        verdict.update(passed=False, broken_channel=conn.broken[:_DETAIL_CHARS])
    return verdict


def _judge(job: dict, conn, verdict: dict) -> None:
    """Load the candidate, bind its names and run the tests; fills ``verdict`` in place."""
    load_timeout = None
    try:
        with Timer(float(job["load_time_limit_s"]), conn):
            ready = _first_message(conn)
            loaded = _first_message(conn) if "ready" in ready else {}
    except TestTimeout as exc:
        ready, loaded, load_timeout = {"ready": True}, {}, str(exc)
    if "setup_error" in ready or "ready" not in ready:
        error = ready.get("setup_error")
        verdict["setup_error"] = error[:_DETAIL_CHARS] if type(error) is str else "the worker ended before it was ready"
    elif load_timeout is not None:
        verdict["load_error"] = {"type": "Timeout", "message": load_timeout}
        verdict["load_outcome"] = "timeout"
    elif "ok" not in loaded:
        error = rebuild.report(loaded.get("error") if "error" in loaded else {"message": "no reply"})
        # Only the report's short fields reach the verdict (never a structure the worker built).
        verdict["load_error"] = {key: value for key, value in error.items() if key != "args"}
        verdict["load_outcome"] = classify(remote.rebuild_exception(error))
    else:
        namespace = _task_namespace()
        bound = False
        # One limit over the trusted code too: module-level test code may already use the candidate's
        # names. Failures of the trusted code itself propagate (a harness error, as before).
        with Timer(float(job["load_time_limit_s"]), conn):
            exec(compile(job["trusted_setup"], "<setup>", "exec"), namespace)
            try:
                _bind(job, namespace, conn)
                bound = True
            except BaseException as exc:  # noqa: BLE001 - the candidate's process misbehaved
                verdict["load_error"] = {"type": type(exc).__name__, "message": str(exc)[:_DETAIL_CHARS]}
                verdict["load_outcome"] = classify(exc)
            if bound and "code" in job["tests"]:
                exec(compile(job["tests"]["code"], "<test>", "exec"), namespace)
        if bound:
            outcomes, passed = run_tests(job["tests"], namespace, conn)
            verdict.update(tests=outcomes, passed=passed)


def _bind(job: dict, namespace: dict, conn) -> None:
    """Ask the worker for the candidate's top-level names and bind them for the tests (:mod:`binding`)."""
    reply = conn.request(("names",))
    names, modules = (reply.get("names"), reply.get("modules")) if type(reply) is dict else (None, None)
    if type(names) is not dict or type(modules) is not dict:
        raise remote.WorkerGone("the candidate's process did not list its names")
    binding.bind_candidate(job, namespace, names, modules)


def _task_namespace() -> dict:
    # The tests run as module __lade_task__, like the candidate, so objects of classes they define
    # pickle by a name the worker can resolve. Tests that put files next to themselves
    # (os.path.dirname(__file__)) put them in the shared working directory.
    module = types.ModuleType("__lade_task__")
    module.__file__ = os.path.join(os.getcwd(), "test_task.py")
    sys.modules["__lade_task__"] = module
    return module.__dict__


def run_program(job: dict) -> dict:
    """Run a whole program in a worker and report how it ended."""
    with open("program.py", "w", encoding="utf-8") as f:
        f.write(job["program"])
    proc, to_worker, from_worker = start_worker("run", job["limits"])
    os.close(to_worker)
    verdict: dict = {"mode": "run"}
    messages = _drain(from_worker)
    if not messages or "ready" not in messages[0]:
        error = (messages[0] if messages else {}).get("setup_error")
        verdict["setup_error"] = error[:_DETAIL_CHARS] if type(error) is str else "the worker ended before it was ready"
    else:
        # Reported by the worker's own wrapper; the program could forge it, but only to label its failure.
        exceptions = [m["exception"] for m in messages[1:] if type(m.get("exception")) is dict]
        if exceptions:  # short fields only: the verdict holds nothing the worker built
            verdict["exception"] = {k: v for k, v in rebuild.report(exceptions[-1]).items() if k != "args"}
    verdict["worker"] = _wait(proc)
    return verdict


def _drain(fd: int, limit: int = 16) -> list[dict]:
    """Messages on ``fd`` until the worker closes it (at most ``limit`` kept; malformed ones end the read)."""
    messages: list[dict] = []
    while True:
        try:
            message = wire.loads(wire.recv(fd))
        except (wire.ProtocolError, OSError):
            return messages
        if len(messages) < limit:
            messages.append(message)


def main() -> None:
    """Entry point (see the module docstring): drop privileges, harden, judge, write the verdict."""
    verdict_fd, sections_fd = int(sys.argv[1]), int(sys.argv[2])
    try:
        if len(sys.argv) > 3:  # started by root: become the unprivileged host uid before anything else
            identity.drop_to(int(sys.argv[3]))
        # bwrap's parent-death signal cannot end this process for a root caller (see lifetime): it
        # watches the caller itself (who also kills the whole sandbox, by this pid 1, after each call).
        lifetime.exit_with_caller(sections_fd)
        # Python's own SIGINT handler would let a signal end the tests with KeyboardInterrupt; the
        # worker cannot signal us (seccomp), and this keeps it so even if it could.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        job = json.load(sys.stdin)
        harden(job["supervisor_memory_bytes"])
        os.chdir(job["workdir"])
        verdict = check(job, sections_fd) if job["mode"] == "check" else run_program(job)
    except BaseException:  # noqa: BLE001 - a harness fault, reported as such
        verdict = {"internal_error": traceback.format_exc()[-_DETAIL_CHARS * 2 :]}
    with os.fdopen(verdict_fd, "w", encoding="utf-8") as out:
        json.dump(verdict, out)


if __name__ == "__main__":
    main()
