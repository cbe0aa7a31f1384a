"""run_in_sandbox: outcomes, limits and the sandbox's environment (hostile programs: test_sandbox_hostile)."""

import logging
import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from lade_bench.sandbox import SandboxLimits, SandboxUnavailableError, bubblewrap, require_sandbox, run_in_sandbox

from .sandbox_helpers import needs_sandbox


@needs_sandbox
def test_passing_program():
    result = run_in_sandbox("assert 1 + 1 == 2\nprint('ok')", timeout_s=5)
    assert result.passed and result.status == "passed"
    assert result.returncode == 0 and result.sandboxed
    assert result.stdout_tail == "ok\n"
    assert result.duration_s > 0


@needs_sandbox
def test_raise_assert_and_syntax_error_are_failed():
    result = run_in_sandbox("raise ValueError('boom')", timeout_s=5)
    assert not result.passed and result.status == "failed"
    assert "ValueError: boom" in result.stderr_tail
    assert run_in_sandbox("assert 1 == 2", timeout_s=5).status == "failed"
    assert run_in_sandbox("def f(:\n  pass", timeout_s=5).status == "failed"


@needs_sandbox
def test_infinite_loop_times_out():
    result = run_in_sandbox("while True:\n    pass", timeout_s=1.0)
    assert not result.passed and result.status == "timeout"
    assert result.returncode is None
    assert 1.0 <= result.duration_s < 10.0


@needs_sandbox
def test_cpu_time_limit_is_a_timeout():
    # The wall-clock limit is far away, so only RLIMIT_CPU (SIGXCPU) can end this loop.
    result = run_in_sandbox("while True:\n    pass", SandboxLimits(cpu_time_s=1), timeout_s=30.0)
    assert result.status == "timeout"
    assert result.returncode == -signal.SIGXCPU


@needs_sandbox
def test_50_gb_allocation_is_memory():
    result = run_in_sandbox("block = bytearray(50 * 1024**3)", SandboxLimits(memory_mb=256), timeout_s=5)
    assert not result.passed and result.status == "memory"


@needs_sandbox
def test_segfault_is_error():
    result = run_in_sandbox("import ctypes\nctypes.string_at(0)", timeout_s=5)
    assert not result.passed and result.status == "error"
    assert "SIGSEGV" in result.stderr_tail


@needs_sandbox
def test_program_runs_in_a_private_writable_tmpfs():
    # The host's /tmp must stay out of reach whether or not the interpreter itself lives under /tmp
    # (then /tmp is a private tmpfs of its own instead of a link to the work dir).
    host_sentinel = Path(tempfile.mkdtemp(prefix="lade-host-tmp-")) / "host-only"
    host_sentinel.write_text("host")
    code = (
        "import os, tempfile\n"
        "cwd = os.getcwd()\n"
        "assert cwd == '/sandbox' and os.environ['HOME'] == cwd and os.environ['TMPDIR'] == cwd\n"
        "assert tempfile.gettempdir() == cwd\n"
        "assert os.path.realpath('/tmp') == cwd or os.path.ismount('/tmp')\n"
        f"assert not os.path.exists({str(host_sentinel)!r})\n"
        "open('/tmp/scratch', 'w').write('ok')\n"
        "assert sorted(os.listdir('.')) in (['program.py'], ['program.py', 'scratch']), os.listdir('.')\n"
        # A root caller's sandbox runs as an unprivileged host uid of its own; a user's as nobody in a
        # user namespace (its own uid outside).
        f"assert os.getuid() {'>= 2_000_000_000' if os.geteuid() == 0 else '== 65534'}, os.getuid()\n"
    )
    try:
        result = run_in_sandbox(code, timeout_s=5)
    finally:
        shutil.rmtree(host_sentinel.parent)
    assert result.passed, result.stderr_tail


@needs_sandbox
def test_writing_inside_the_sandbox_is_allowed():
    code = (
        "import os, pathlib, shutil, sqlite3, tempfile\n"
        "with open('out.txt', 'w') as f:\n"
        "    f.write('hello')\n"
        "assert open('out.txt').read() == 'hello'\n"
        "os.makedirs('a/b')\n"
        "pathlib.Path('a/b/c.txt').write_text('x')\n"
        "os.replace('a/b/c.txt', 'a/c.txt')\n"
        "shutil.rmtree('a')\n"
        "with tempfile.NamedTemporaryFile('w') as f:\n"
        "    f.write('tmp')\n"
        "open('/tmp/hardcoded.txt', 'w').write('x')\n"
        "con = sqlite3.connect('db.sqlite')\n"
        "con.execute('create table t (x)')\n"
        "con.commit()\n"
        "con.close()\n"
        "import threading\n"
        "t = threading.Thread(target=print, args=('thread',))\n"
        "t.start(); t.join()\n"
    )
    result = run_in_sandbox(code, timeout_s=10)
    assert result.passed, result.stderr_tail


@needs_sandbox
def test_minimal_environment_and_isolated_mode():
    code = (
        "import os, sys\n"
        "assert sys.flags.isolated == 1 and sys.dont_write_bytecode\n"
        "allowed = {'HOME', 'TMPDIR', 'PWD', 'PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'OMP_NUM_THREADS',\n"
        "           'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'}\n"
        "assert set(os.environ) <= allowed, sorted(os.environ)\n"
        "import numpy\n"
        "print(numpy.arange(4).sum())\n"
    )
    result = run_in_sandbox(code, timeout_s=10)
    assert result.passed, result.stderr_tail
    assert result.stdout_tail.strip() == "6"


@needs_sandbox
def test_run_name():
    ok = run_in_sandbox("if __name__ == '__main__':\n    raise SystemExit(3)\n", timeout_s=5, run_name="__task__")
    assert ok.passed, ok.stderr_tail
    assert run_in_sandbox("raise SystemExit(3)", timeout_s=5).returncode == 3


def test_parameter_validation():
    with pytest.raises(ValueError, match="timeout_s=0"):
        run_in_sandbox("pass", timeout_s=0)
    for kwargs, name in (({"memory_mb": 0}, "memory_mb"), ({"max_threads": 0}, "max_threads"),
                         ({"cpu_time_s": -1}, "cpu_time_s"), ({"disk_mb": -2}, "disk_mb")):  # fmt: skip
        with pytest.raises(ValueError, match=name):
            SandboxLimits(**kwargs)


def test_missing_sandbox_refuses_with_install_hint(monkeypatch):
    monkeypatch.setattr(bubblewrap, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap") as info:
        run_in_sandbox("print('never runs')", timeout_s=5)
    assert "sandbox.allow_unsandboxed" in str(info.value)
    with pytest.raises(SandboxUnavailableError):
        require_sandbox()


def test_opt_out_runs_unsandboxed_loudly(monkeypatch, caplog):
    monkeypatch.setattr(bubblewrap, "sandbox_problem", lambda: "bubblewrap (`bwrap`) is not installed")
    monkeypatch.setattr(bubblewrap, "_warned_unsandboxed", False)
    with caplog.at_level(logging.WARNING, logger="lade_bench.sandbox"):
        result = run_in_sandbox("import os\nprint(os.getcwd())", timeout_s=10, allow_unsandboxed=True)
    assert result.passed and not result.sandboxed, result.stderr_tail
    assert "WITHOUT A SANDBOX" in caplog.text
    # The limits of the worker still apply without bubblewrap.
    assert run_in_sandbox("while True:\n    pass", timeout_s=1, allow_unsandboxed=True).status == "timeout"
