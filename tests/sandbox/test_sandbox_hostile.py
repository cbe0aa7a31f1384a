"""Hostile programs: every escape seen against the old hand-written sandbox, and the obvious ones.

Each program raises when its attack fails, so it can only end "passed" by escaping; each must end
"failed" or "violation" (or "timeout"/"memory" for the resource ones) with nothing outside touched.
The directory with the sentinel files is shown to the sandbox read-only, so the programs aim at
real targets rather than at paths that merely do not exist inside.
"""

import os
import signal
import socket
import sysconfig
import time
import uuid

import pytest

from lade_bench.sandbox import SandboxLimits, run_in_sandbox

from .sandbox_helpers import Listener, needs_sandbox, outside_process

pytestmark = needs_sandbox

LIBC = "import ctypes, errno, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
CHECK_RC = "if rc < 0:\n    raise OSError(ctypes.get_errno(), 'refused')\n"
REFUSED = {"failed", "violation"}
OLD = 1_000_000_000  # the sentinel's mtime, far in the past


@pytest.fixture
def outside(tmp_path):
    """A directory outside the sandbox with one precious file; checks afterwards that nothing changed."""
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    keep.chmod(0o644)
    os.utime(keep, (OLD, OLD))
    yield tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    assert keep.read_text() == "precious"
    assert keep.stat().st_mode & 0o777 == 0o644
    assert keep.stat().st_mtime == OLD


def run_hostile(code: str, outside, timeout_s: float = 10, **limits):
    program = code.format(dir=str(outside), keep=str(outside / "keep.txt"))
    return run_in_sandbox(program, SandboxLimits(**limits), timeout_s=timeout_s, read_only_paths=[outside])


@pytest.mark.parametrize(
    "code",
    [
        LIBC + "rc = libc.creat(b'{dir}/created.txt', 0o644)\n" + CHECK_RC,
        "import os\nos.mkfifo('{dir}/fifo')",
        "import os, stat\nos.mknod('{dir}/node', 0o600 | stat.S_IFREG)",
        "import socket\nsocket.socket(socket.AF_UNIX).bind('{dir}/sock')",
        LIBC + "rc = libc.unlink(b'{keep}')\n" + CHECK_RC,
        "import os\nfd = os.open('{keep}', os.O_RDONLY)\nos.fchmod(fd, 0)",
        "import os\nfd = os.open('{keep}', os.O_RDONLY)\nos.utime(fd, (0, 0))",
        "open('{keep}', 'w').write('pwned')",
        "open('{keep}', 'a').write('pwned')",
        "import os\nos.remove('{keep}')",
        "import os\nos.rename('{keep}', '{dir}/moved.txt')",
        "import shutil\nshutil.rmtree('{dir}')",
        "import os\nos.chmod('{keep}', 0)",
        "import os\nos.truncate('{keep}', 0)",
        "import os\nos.mkdir('{dir}/newdir')",
        # Catching the refusal does not help: the write never happens, and the program has to admit it.
        "try:\n    open('{keep}', 'w').write('pwned')\nexcept OSError:\n    pass\n"
        "assert open('{keep}').read() == 'pwned'",
    ],
    ids=[
        "ctypes_creat",
        "mkfifo",
        "mknod",
        "unix_bind",
        "ctypes_unlink",
        "fchmod_ro_fd",
        "utime_ro_fd",
        "open_w",
        "open_a",
        "remove",
        "rename",
        "rmtree",
        "chmod",
        "truncate",
        "mkdir",
        "caught",
    ],  # fmt: skip
)
def test_file_system_outside_is_read_only(outside, code):
    result = run_hostile(code, outside)
    assert result.status in REFUSED, result.stderr_tail
    if "except OSError" not in code:  # the kernel's refusal ended the program: labelled as such
        assert result.status == "violation", result.stderr_tail
        assert result.violation


def test_interpreter_and_packages_are_read_only(outside):
    target = os.path.join(sysconfig.get_paths()["purelib"], f"lade_pwned_{uuid.uuid4().hex}.py")
    try:
        result = run_hostile(f"open({target!r}, 'w').write('import os')", outside)
        assert result.status == "violation", result.stderr_tail
        assert not os.path.exists(target)
    finally:
        if os.path.exists(target):
            os.remove(target)


@pytest.mark.parametrize(
    "code",
    [
        "open('/etc/passwd').read()",
        "open('/etc/shadow').read()",
        "import os\nos.listdir('/root/.ssh')",
        f"open({os.path.abspath(__file__)!r}).read()",
        "import os\nassert os.listdir('/home')",
    ],
    ids=["passwd", "shadow", "root_ssh", "project_files", "home"],
)
def test_secrets_and_project_files_are_not_visible(outside, code):
    result = run_hostile(code, outside)
    assert result.status in REFUSED
    assert "FileNotFoundError" in result.stderr_tail or "AssertionError" in result.stderr_tail


@pytest.mark.parametrize(
    "code",
    [
        LIBC + "rc = libc.system(b'touch {dir}/from_shell; touch /sandbox/ran')\nassert rc == 0, rc\n",
        "import subprocess\nsubprocess.run(['touch', '{dir}/from_subprocess'], check=True)",
        "import os\nos.system('touch {dir}/from_system')\nassert os.path.exists('{dir}/from_system')",
        "import os\nos.posix_spawn('/usr/bin/touch', ['touch', '{dir}/spawned'], {{}})",
        "import os\nos.execv('/usr/bin/touch', ['touch', '{dir}/exec'])",
    ],
    ids=["ctypes_system", "subprocess", "os_system", "posix_spawn", "execv"],
)
def test_other_programs_cannot_change_anything(outside, code):
    result = run_hostile(code, outside)
    assert result.status in REFUSED, result.stderr_tail


@pytest.mark.parametrize(
    "code",
    [
        "import os\nwhile True:\n    os.fork()",
        # A child in its own session used to outlive the timeout's process-group kill.
        "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\n    os._exit(0)\n",
        # Four children of 800 MB each used to hold 3.2 GB under a 1 GB limit.
        "import os, time\nfor _ in range(4):\n    if os.fork() == 0:\n        block = bytearray(800 * 2**20)\n"
        "        time.sleep(30)\n        os._exit(0)\n",
    ],
    ids=["fork_bomb", "setsid_child", "forks_beyond_memory"],
)
def test_no_new_processes(outside, code):
    started = time.monotonic()
    result = run_hostile(code, outside, memory_mb=1024)
    assert result.status == "violation", result.stderr_tail
    assert "BlockingIOError" in result.stderr_tail
    assert time.monotonic() - started < 8


def test_threads_share_one_memory_limit(outside):
    # Every thread is started (its stack mapped) before any of them takes memory: a thread started
    # after two blocks were taken used to fail to start ("can't start new thread") instead.
    code = (
        "import threading\nblocks = []\nerrors = []\nready = threading.Barrier(4)\n"
        "def grab():\n    ready.wait()\n    try:\n        blocks.append(bytearray(300 * 2**20))\n"
        "    except MemoryError as e:\n        errors.append(e)\n"
        "threads = [threading.Thread(target=grab) for _ in range(4)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "if errors:\n    raise errors[0]\n"
    )
    result = run_hostile(code, outside, memory_mb=700)
    assert result.status == "memory", result.stderr_tail


def test_processes_outside_cannot_be_signalled(outside):
    with outside_process() as victim:
        for code in (
            f"import os, signal\nos.kill({victim.pid}, signal.SIGKILL)",
            LIBC + f"rc = libc.kill({victim.pid}, 9)\n" + CHECK_RC,
        ):
            result = run_hostile(code, outside)
            assert result.status == "violation", result.stderr_tail
        # kill(-1) reaches only what is inside the sandbox (it takes the supervisor down with it).
        result = run_hostile("import os, signal, time\nos.kill(-1, signal.SIGKILL)\ntime.sleep(5)", outside)
        assert result.status in {"error", "failed", "violation"}
        time.sleep(0.2)
        assert victim.poll() is None


def test_no_network_to_the_host(outside):
    with Listener() as tcp, Listener(socket.AF_UNIX, f"\0lade_bench_test_{uuid.uuid4().hex}") as unix:
        host, port = tcp.address
        for code in (
            f"import socket\ns = socket.create_connection(({host!r}, {port}), timeout=2)\ns.sendall(b'hello')",
            f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({unix.address!r})\ns.sendall(b'hello')",
        ):
            result = run_hostile(code, outside)
            assert result.status == "violation", result.stderr_tail
        time.sleep(0.3)
    assert tcp.accepted == [] and unix.accepted == []


def test_output_beyond_the_file_size_limit_is_a_violation(outside):
    result = run_hostile("import sys\nsys.stdout.write('x' * 8 * 2**20)\nsys.stdout.flush()", outside, max_file_mb=1)
    assert result.status == "violation", result.stderr_tail
    assert len(result.stdout_tail) <= 4000


def test_filling_the_private_tmpfs_is_a_violation(outside):
    code = "for i in range(100):\n    open(f'f{{i}}', 'wb').write(b'x' * 2**20)\n"
    result = run_hostile(code, outside, disk_mb=8)
    assert result.status == "violation", result.stderr_tail
    assert "No space left" in result.stderr_tail


@pytest.mark.parametrize(
    "code",
    [
        "import os\nopen(f'/proc/{{os.getppid()}}/mem', 'rb')",
        # The verdict fd is one of these; none of them can be opened.
        "import os\nfor n in os.listdir(f'/proc/{{os.getppid()}}/fd'):\n"
        "    open(f'/proc/{{os.getppid()}}/fd/{{n}}', 'w').write('{{\"passed\": true}}')",
        "import os\nos.readlink(f'/proc/{{os.getppid()}}/fd/0')",
        LIBC + "rc = libc.ptrace(16, os.getppid(), 0, 0)\n" + CHECK_RC,  # PTRACE_ATTACH to the supervisor
        LIBC + "rc = libc.unshare(0x10000000)\n" + CHECK_RC,  # CLONE_NEWUSER: no nested namespaces
    ],
    ids=["supervisor_mem", "supervisor_fds", "supervisor_fd_link", "ptrace", "nested_userns"],
)
def test_the_supervisor_and_the_kernel_stay_out_of_reach(outside, code):
    result = run_hostile(code, outside)
    assert result.status in REFUSED, result.stderr_tail


def test_sleeping_forever_times_out(outside):
    result = run_hostile("import time\ntime.sleep(60)", outside, timeout_s=1)
    assert result.status == "timeout"


def test_signal_name_is_reported(outside):
    result = run_hostile("import os, signal\nos.kill(os.getpid(), signal.SIGABRT)", outside)
    assert result.status == "error" and "SIGABRT" in result.stderr_tail
    assert result.returncode == -signal.SIGABRT
