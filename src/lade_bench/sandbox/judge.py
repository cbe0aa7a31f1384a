"""Judging a candidate with trusted tests that run in the supervisor, outside the candidate's process."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lade_bench.sandbox.launch import (
    NO_VERDICT,
    STARTUP_ALLOWANCE_S,
    TAIL_CHARS,
    check_harness,
    execute,
    harness_note,
    signal_status,
)
from lade_bench.sandbox.limits import DEFAULT_LIMITS, SandboxLimits
from lade_bench.sandbox.outcome import SandboxResult, Status, TestOutcome

_OUTCOME_ORDER: tuple[Status, ...] = ("timeout", "violation", "memory")


def run_tests_in_sandbox(
    candidate: str,
    tests: Mapping[str, Any],
    limits: SandboxLimits = DEFAULT_LIMITS,
    *,
    trusted_setup: str = "",
    bind_candidate_names: bool = True,
    override_names: Sequence[str] = (),
    load_time_limit_s: float = 10.0,
    allow_unsandboxed: bool = False,
) -> SandboxResult:
    """Judge ``candidate`` with trusted tests that run outside the candidate's process.

    The worker execs ``candidate`` as module ``__lade_task__``; the supervisor execs ``trusted_setup``
    in the tests' own module, binds the candidate's top-level names to proxies (``override_names``
    always, the others where ``bind_candidate_names`` and the trusted code left the name free), then
    runs ``tests``:

    * ``{"kind": "statements", "statements": [str], "time_limit_s": float}``: each statement is one
      test (MBPP's ``assert`` lines), all within the time limit;
    * ``{"kind": "check_function", "code": str, "function": str, "candidate": str, "time_limit_s":
      float}``: ``code`` defines ``function``, called with the candidate's ``candidate`` (HumanEval);
    * ``{"kind": "unittest", "code": str, "classes": [str], "time_limit_s_per_class": float}``: each
      TestCase class run by unittest; a class passes if it ran tests and none failed (ClassEval).

    Args:
        candidate: the generated code (plus whatever it needs, e.g. a prompt it continues).
        tests: the test specification above.
        trusted_setup: code run before the tests in their module (imports, helpers the tests use).
        bind_candidate_names: make the candidate's other top-level names visible to the tests.
        override_names: candidate names that replace the trusted setup's (e.g. a prompt's stub).
        load_time_limit_s: time for the candidate module to load.
        limits: the resource limits of the candidate's process (:class:`SandboxLimits`).
        allow_unsandboxed: without bubblewrap, run anyway (unsafe: verdicts can be forged; loud warning).

    Returns:
        A :class:`SandboxResult` whose ``passed`` is the supervisor's verdict, with per-test outcomes.

    Raises:
        ValueError: on a non-positive limit or an unknown test kind.
        SandboxUnavailableError: no sandbox here and ``allow_unsandboxed`` is False.
        SandboxError: the sandbox could not be set up, before the candidate ran (a broken environment).
            A failure of the supervisor after that (an error in ``trusted_setup`` too) is a verdict:
            ``status == "error"`` with the reason in ``report``.
    """
    kind = tests.get("kind")
    if kind not in ("statements", "check_function", "unittest"):
        raise ValueError(f"tests kind={kind!r} is not one of 'statements', 'check_function', 'unittest'")
    test_time = float(tests.get("time_limit_s", 0)) or float(tests.get("time_limit_s_per_class", 0)) * len(
        tests.get("classes", ())
    )
    if load_time_limit_s <= 0 or test_time <= 0:
        raise ValueError(f"load_time_limit_s={load_time_limit_s!r} and the tests' time limit ({test_time!r}) "
                         "must be positive")  # fmt: skip
    time_limit = load_time_limit_s + test_time
    job = {
        "mode": "check",
        "candidate": candidate,
        "trusted_setup": trusted_setup,
        "bind_candidate_names": bind_candidate_names,
        "override_names": list(override_names),
        "load_time_limit_s": load_time_limit_s,
        "tests": dict(tests),
    }
    wall = 2 * load_time_limit_s + test_time + STARTUP_ALLOWANCE_S
    raw = execute(job, limits, "__lade_task__", time_limit, wall, (), allow_unsandboxed)
    verdict = check_harness(raw)
    stderr = raw.stderr
    if verdict is None or "harness_error" in verdict:
        status: Status = "timeout" if raw.timed_out else "error"
        if verdict is not None:
            stderr += harness_note(verdict)
        else:
            stderr += f"\n[sandbox] {raw.kill_note}\n" if raw.timed_out else f"\n{NO_VERDICT}\n"
        return SandboxResult(False, status, None, raw.duration_s, stderr[-TAIL_CHARS:], raw.stdout[-TAIL_CHARS:],
                             report=stderr[-TAIL_CHARS:], sandboxed=raw.sandboxed)  # fmt: skip
    outcomes = tuple(TestOutcome(str(t["name"]), str(t["outcome"]), str(t.get("detail", ""))) for t in verdict["tests"])
    status, violation, lines = _test_status(verdict, outcomes, limits.cpu_seconds(time_limit))
    return SandboxResult(
        passed=status == "passed",
        status=status,
        returncode=None,
        duration_s=raw.duration_s,
        stderr_tail=stderr[-TAIL_CHARS:],
        stdout_tail=raw.stdout[-TAIL_CHARS:],
        violation=violation,
        report="\n".join(lines)[-TAIL_CHARS * 2 :],
        tests=outcomes,
        sandboxed=raw.sandboxed,
    )


def _test_status(
    verdict: Mapping[str, Any], outcomes: Sequence[TestOutcome], cpu_seconds: int
) -> tuple[Status, str | None, list[str]]:
    lines = [
        f"{o.name}: {o.outcome}" + (f"\n{o.detail}" if o.outcome not in ("passed", "skipped") else "") for o in outcomes
    ]
    if verdict.get("passed"):
        return "passed", None, lines
    if verdict.get("broken_channel"):  # the candidate's process sent something malformed (or beyond bounds)
        lines.append(f"[sandbox] {verdict['broken_channel']}")
        return "error", None, lines
    load_error = verdict.get("load_error")
    if load_error is not None:
        lines.insert(0, f"the candidate did not load: {load_error.get('type')}: {load_error.get('message')}")
        outcome = verdict.get("load_outcome", "failed")
        found = [outcome] if outcome in _OUTCOME_ORDER else []
        first_violation = (
            f"{load_error.get('type')}: {load_error.get('message')}"[:500] if outcome == "violation" else None
        )
    else:
        found = [o.outcome for o in outcomes]
        first_violation = next(
            (
                o.detail.strip().splitlines()[-1][:500]
                for o in outcomes
                if o.outcome == "violation" and o.detail.strip()
            ),
            None,
        )
    for status in _OUTCOME_ORDER:
        if status in found:
            return status, (first_violation or "refused by the sandbox") if status == "violation" else None, lines
    # The worker died on its own (not stopped by the supervisor at the end): its signal says why.
    if verdict.get("worker_gone"):
        by_signal = signal_status(verdict.get("worker", {}), cpu_seconds)
        if by_signal is not None:
            lines.append(f"[sandbox] the candidate's process was {by_signal[1]}")
            return by_signal[0], by_signal[1] if by_signal[0] == "violation" else None, lines
    return "failed", None, lines
