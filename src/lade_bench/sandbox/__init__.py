"""Run generated code inside bubblewrap, and decide test verdicts outside the generated code's reach.

Never ``exec`` model output in the caller's process. Every call here starts a fresh bubblewrap
(``bwrap``) sandbox. Inside, a trusted supervisor (:mod:`.runtime.supervisor`) starts the
worker (:mod:`.runtime.worker`), the only process that runs generated code. Two entry points:

* :func:`run_in_sandbox`: run a whole program; it passes by exiting with status 0. The program
  controls its exit status, so this is a runner, not a verdict on untrusted code.
* :func:`run_tests_in_sandbox`: the tests run in the supervisor against proxies of the candidate's
  functions and objects (the worker carries out the calls; plain results come back as data and are
  compared by the supervisor), and the supervisor writes the verdict to an fd the worker lacks.

Guaranteed (each point has a hostile-program test in ``tests/sandbox``), for root and other callers:

* Identity: never host root. A root caller's bwrap runs without a user namespace (in one, the
  sandbox user would be host uid 0) and the supervisor first drops to a fresh unprivileged host uid
  (:func:`_host_uid`); another caller's sandbox is uid 65534 in a new user namespace (the caller's
  uid outside). No capabilities, so no host sysctl, key ring or ``setuid(0)``.
* File system: read-only ``/usr``, the interpreter and its site-packages (benchmark answer keys,
  ``_ANSWER_KEYS``, masked), and the dynamic linker's ``/etc`` files; nothing else of the host (no
  home, ``/root`` beyond the interpreter, project files, ``/etc/passwd``, ``/run``) and no ``/proc``.
  The only writable place is a private tmpfs of ``disk_mb`` MiB (``/sandbox``: cwd, HOME, TMPDIR and
  ``/tmp``); the root and ``/dev`` (``/dev/shm`` too) are read-only. Discarded at the end.
* Processes: new PID, network, IPC, UTS and cgroup namespaces; the supervisor is pid 1 (there is no
  bubblewrap init) and non-dumpable; the worker's seccomp filter (:mod:`.runtime.syscalls`) refuses
  new processes, exec, ptrace, process_vm_*, pidfds, namespaces, key rings, signals to anything but
  itself (fd signal owners included), the niceness, affinity, scheduler and rlimits of any pid but
  its own, and memory outside RLIMIT_AS (memfd, SysV shared memory and queues, POSIX queues).
* Nothing outlives a call: the caller kills the sandbox's init through a pidfd (:mod:`.reaper`; the
  kernel then kills the whole PID namespace) and waits until it has exited, whatever the code did;
  if the caller dies mid-call, the supervisor exits too (:mod:`.runtime.lifetime`).
* Network: none (the worker may create no socket of any family).
* Resources: address space (one process, so all of the program's memory), CPU time, file size, open
  files, tmpfs size, wall clock; threads by RLIMIT_NPROC (the sandbox uid is never root, so the
  kernel enforces it). Kernel memory: no sockets or inotify instances; pipe buffers bounded by that
  uid's per-user limit and the open-files limit (docs/sandbox.md lists each kind).
* Verdicts (:func:`run_tests_in_sandbox`): the tests never enter the worker's process or files, and
  nothing it can reach holds them or their expected values. Output, exit status, ``os._exit``,
  excepthooks, files, forged channel messages, patching ``unittest``, builtins or modules in the
  worker: none of them changes a verdict. Only what the candidate returns counts, rebuilt by
  :mod:`.runtime.rebuild` with bounded depth, size and time and only as exact builtin values (a
  numpy scalar as the number it holds); anything beyond the bounds is an "error" verdict. The tests
  resolve modules and builtins from the supervisor, only the names under test from the candidate
  (:mod:`.runtime.binding`); a failed subtest fails its test. The supervisor asks the worker nothing
  outside an armed time limit, and its work is bounded even in one long C call: it announces each
  time limit on a "sections" pipe and :func:`_watch` kills the sandbox a little past it. After the
  candidate started, every call returns a verdict; a supervisor failure it provoked is an "error"
  verdict, and the caller's parse of a verdict never raises.

Not guaranteed:

* Kernel bugs: the boundary is Linux namespaces and a seccomp filter, not a VM.
* Candidate objects that are not plain data are compared by the candidate's own code: an object
  whose ``__eq__`` (or ``__bool__``, ``__contains__``) always says yes passes such assertions, as it
  does in the reference harnesses; the value it is compared with reaches the worker and may be
  returned later as plain data.
* The worker can time the gaps between requests (and so tell which assertions passed so far); POSIX
  byte-range locks and tmpfs inodes (empty files) have no count limit but the CPU time.
* With ``allow_unsandboxed=True`` (no bubblewrap) none of the isolation holds, and a program can read
  the job (tests included) and forge the verdict.

Requires ``bwrap`` and ``libseccomp.so.2``; without them calls raise :class:`SandboxUnavailableError`
(its message says how to install them), unless ``allow_unsandboxed=True``: then the same
supervisor/worker pair runs without namespaces, after a loud warning.
"""

from lade_bench.sandbox.bubblewrap import INSTALL_HINT, require_sandbox, sandbox_problem
from lade_bench.sandbox.judge import run_tests_in_sandbox
from lade_bench.sandbox.limits import SandboxLimits
from lade_bench.sandbox.outcome import SandboxError, SandboxResult, SandboxUnavailableError, Status, TestOutcome
from lade_bench.sandbox.program import run_in_sandbox

__all__ = [
    "INSTALL_HINT",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "SandboxUnavailableError",
    "Status",
    "TestOutcome",
    "require_sandbox",
    "run_in_sandbox",
    "run_tests_in_sandbox",
    "sandbox_problem",
]
