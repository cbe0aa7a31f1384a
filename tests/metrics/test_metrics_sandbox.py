import os
import signal
import sys
import time
from pathlib import Path

import pytest

from lade_bench.metrics.sandbox import run_in_sandbox


def test_passing_program():
    result = run_in_sandbox("assert 1 + 1 == 2\nprint('ok')", timeout_s=5)
    assert result.passed and result.status == "passed"
    assert result.returncode == 0
    assert result.stdout_tail == "ok\n"
    assert result.duration_s > 0


def test_raise_is_failed():
    result = run_in_sandbox("raise ValueError('boom')", timeout_s=5)
    assert not result.passed and result.status == "failed"
    assert "ValueError: boom" in result.stderr_tail


def test_failed_assertion_and_syntax_error_are_failed():
    assert run_in_sandbox("assert 1 == 2", timeout_s=5).status == "failed"
    assert run_in_sandbox("def f(:\n  pass", timeout_s=5).status == "failed"


def test_infinite_loop_times_out():
    result = run_in_sandbox("while True:\n    pass", timeout_s=1.0)
    assert not result.passed and result.status == "timeout"
    assert result.returncode is None
    assert 1.0 <= result.duration_s < 10.0


def test_cpu_time_limit_is_a_timeout():
    # The wall-clock limit is far away, so only RLIMIT_CPU (SIGXCPU) can end this loop.
    result = run_in_sandbox("while True:\n    pass", timeout_s=30.0, cpu_time_s=1)
    assert result.status == "timeout"
    assert result.returncode == -signal.SIGXCPU


def test_huge_allocation_is_memory():
    result = run_in_sandbox("block = bytearray(8 * 1024**3)", timeout_s=5, memory_mb=256)
    assert not result.passed and result.status == "memory"


def test_segfault_is_error():
    result = run_in_sandbox("import ctypes\nctypes.string_at(0)", timeout_s=5)
    assert not result.passed and result.status == "error"
    assert "SIGSEGV" in result.stderr_tail


def test_program_runs_in_a_fresh_temp_dir_that_is_removed():
    code = (
        "import os, tempfile\n"
        "cwd = os.getcwd()\n"
        "assert os.environ['HOME'] == cwd and os.environ['TMPDIR'] == cwd\n"
        "assert tempfile.gettempdir() == cwd\n"
        "assert sorted(os.listdir('.')) == ['program.py']\n"
        "print(cwd)\n"
    )
    result = run_in_sandbox(code, timeout_s=5)
    assert result.passed, result.stderr_tail
    workdir = Path(result.stdout_tail.strip())
    assert workdir.is_absolute()
    assert not workdir.exists()
    assert not workdir.parent.exists()


def test_writing_inside_the_temp_dir_is_allowed():
    code = (
        "import os, pathlib, shutil, sqlite3, tempfile\n"
        "with open('out.txt', 'w') as f:\n"
        "    f.write('hello')\n"
        "assert open('out.txt').read() == 'hello'\n"
        "with open('out.txt', 'a') as f:\n"
        "    f.write('!')\n"
        "os.makedirs('a/b')\n"
        "pathlib.Path('a/b/c.txt').write_text('x')\n"
        "os.replace('a/b/c.txt', 'a/c.txt')\n"
        "shutil.rmtree('a')\n"
        "with tempfile.NamedTemporaryFile('w') as f:\n"
        "    f.write('tmp')\n"
        "con = sqlite3.connect('db.sqlite')\n"
        "con.execute('create table t (x)')\n"
        "con.commit()\n"
        "con.close()\n"
        "os.remove('db.sqlite')\n"
        "os.symlink('/etc/hostname', 'link')\n"
        "os.remove('link')\n"
    )
    result = run_in_sandbox(code, timeout_s=5)
    assert result.passed, result.stderr_tail


@pytest.mark.parametrize(
    "code",
    [
        "open({target!r}, 'w').write('pwned')",
        "open({target!r}, 'a').write('pwned')",
        "import pathlib\npathlib.Path({target!r}).write_text('pwned')",
        "import os\nos.close(os.open({target!r}, os.O_WRONLY | os.O_CREAT))",
        "import os\nos.chdir(os.path.dirname({target!r}))\nopen(os.path.basename({target!r}), 'w')",
        "import os\nos.symlink({target!r}, 'link')\nopen('link', 'w').write('pwned')",
        # os.open(dir) gives a dir_fd whose later relative open the hook could not see.
        "import os\nfd = os.open(os.path.dirname({target!r}), os.O_RDONLY)\n"
        "os.open(os.path.basename({target!r}), os.O_WRONLY | os.O_CREAT, dir_fd=fd)",
        # Catching the violation must not help.
        "try:\n    open({target!r}, 'w').write('pwned')\nexcept BaseException:\n    pass",
    ],
    ids=["open_w", "open_a", "pathlib", "os_open", "chdir", "symlink", "dir_fd", "caught"],
)
def test_writing_outside_the_temp_dir_is_failed_and_has_no_effect(tmp_path, code):
    target = tmp_path / "outside.txt"
    result = run_in_sandbox(code.format(target=str(target)), timeout_s=5)
    assert not result.passed and result.status == "failed"
    assert result.violation is not None and "SANDBOX VIOLATION" in result.violation
    assert not target.exists()


@pytest.mark.parametrize(
    "code",
    [
        "import os\nos.remove({target!r})",
        "import os\nos.rename({target!r}, 'stolen.txt')",
        "import shutil\nshutil.rmtree({parent!r})",
        "import os\nos.mkdir({parent!r} + '/newdir')",
        "import os\nos.chmod({target!r}, 0)",
        "import os\nos.truncate({target!r}, 0)",
    ],
    ids=["remove", "rename", "rmtree", "mkdir", "chmod", "truncate"],
)
def test_changing_files_outside_is_failed_and_has_no_effect(tmp_path, code):
    target = tmp_path / "keep.txt"
    target.write_text("precious")
    before = target.stat().st_mode
    result = run_in_sandbox(code.format(target=str(target), parent=str(tmp_path)), timeout_s=5)
    assert result.status == "failed" and result.violation is not None
    assert target.read_text() == "precious"
    assert target.stat().st_mode == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_starting_programs_is_blocked_unless_allowed(tmp_path):
    target = tmp_path / "from_shell.txt"
    code = f"import subprocess\nsubprocess.run(['touch', {str(target)!r}])"
    result = run_in_sandbox(code, timeout_s=5)
    assert result.status == "failed" and "starting programs" in result.violation
    assert not target.exists()
    assert run_in_sandbox("import os\nos.system('true')", timeout_s=5).status == "failed"
    allowed = run_in_sandbox(
        "import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'], check=True)",
        timeout_s=10,
        allow_subprocess=True,
    )
    assert allowed.passed, allowed.stderr_tail


def test_timeout_kills_the_whole_process_group():
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    result = run_in_sandbox(code, timeout_s=1.5, allow_subprocess=True)
    assert result.status == "timeout"
    pid = int(result.stdout_tail.split()[0])
    status = Path(f"/proc/{pid}/status")

    def dead():
        # Gone, or a zombie waiting for a reaper that the container's init may not provide.
        try:
            return "\nState:\tZ" in status.read_text()
        except FileNotFoundError:
            return True

    # SIGKILL is delivered asynchronously; give the kernel a moment.
    deadline = time.monotonic() + 3.0
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dead()


def test_success_marker_and_run_name():
    early_exit = run_in_sandbox("import sys\nsys.exit(0)\nprint('DONE')", timeout_s=5, success_marker="DONE")
    assert early_exit.status == "failed"
    assert "no success marker" in early_exit.stderr_tail
    ok = run_in_sandbox(
        "if __name__ == '__main__':\n    raise SystemExit(3)\nprint('DONE')",
        timeout_s=5,
        run_name="__task__",
        success_marker="DONE",
    )
    assert ok.passed, ok.stderr_tail


def test_minimal_environment_and_isolated_mode():
    code = (
        "import os, sys\n"
        "assert sys.flags.isolated == 1 and sys.dont_write_bytecode\n"
        "assert 'PYTHONPATH' not in os.environ\n"
        "allowed = {'HOME', 'TMPDIR', 'PATH', 'LANG', 'LC_ALL', 'LC_CTYPE', 'OMP_NUM_THREADS',\n"
        "           'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS'}\n"
        "assert set(os.environ) <= allowed, sorted(os.environ)\n"
    )
    result = run_in_sandbox(code, timeout_s=5)
    assert result.passed, result.stderr_tail


def test_uses_the_callers_interpreter_and_packages():
    result = run_in_sandbox("import numpy\nprint(numpy.arange(4).sum())", timeout_s=10)
    assert result.passed, result.stderr_tail
    assert result.stdout_tail.strip() == "6"
    assert os.path.exists(sys.executable)


def test_parameter_validation():
    with pytest.raises(ValueError, match="timeout_s"):
        run_in_sandbox("pass", timeout_s=0)
    with pytest.raises(ValueError, match="memory_mb"):
        run_in_sandbox("pass", memory_mb=0)
