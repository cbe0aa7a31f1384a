"""The worker: the only process that runs generated code. Started by the supervisor; stdlib only.

Usage (by :mod:`supervisor` only): ``python -I -B worker.py MODE LIMITS_JSON IN_FD OUT_FD``.

Before any generated code runs, the worker puts itself under limits it cannot lift again:

* rlimits: address space, CPU time, largest file, open files, tasks (threads), no core dumps;
* a seccomp filter (:mod:`syscalls`) refusing new processes, other programs, ptrace, signals,
  scheduling and limits of any process but itself, sockets, inotify, and memory the address-space
  limit does not count.
  Without a second process, the address-space limit bounds the program's whole memory and a fork
  bomb stops at its first fork.

Modes:

* ``run``: run ``program.py`` as a script; report an uncaught exception's type and errno on OUT_FD.
* ``serve``: exec ``candidate.py`` as module ``__lade_task__``, then answer the supervisor's requests
  (attribute access, calls, operators on the candidate's objects) read from IN_FD, with values
  encoded by :mod:`wire` on OUT_FD. The tests themselves never enter this process.
"""

import json
import operator
import os
import pickle
import resource
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import syscalls  # noqa: E402
import wire  # noqa: E402

MODULE_NAME = "__lade_task__"
_SIGNALS_QUEUED = 256  # RLIMIT_SIGPENDING: queued signals and POSIX timers
SETUP_FAILED_EXIT = 71  # EX_OSERR: the limits could not be put in place; nothing was run


def _count_my_tasks() -> int:
    # RLIMIT_NPROC counts every task (process or thread) of this user. The sandbox mounts no /proc:
    # its only tasks are then the supervisor (pid 1: its main thread and the one watching its caller,
    # see lifetime) and this process's one thread so far. Unsandboxed, the host's /proc tells.
    if not os.path.isdir("/proc/self"):
        return 3
    uid, count = os.getuid(), 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            if int(fields[b"Uid"].split()[0]) == uid:
                count += int(fields[b"Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return max(count, 1)


def apply_limits(limits: dict) -> None:
    """Set this process's rlimits (soft = hard, so they cannot be raised again)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    # The soft CPU limit sends SIGXCPU (reported as a timeout); the hard one is a SIGKILL backstop.
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_bytes"], limits["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))  # POSIX message queues hold memory outside RLIMIT_AS
    # Queued signals and POSIX timers (each preallocates one) are kernel memory too: a few hundred of
    # them are more than any program here needs (the default is one per possible thread of the host).
    resource.setrlimit(resource.RLIMIT_SIGPENDING, (_SIGNALS_QUEUED, _SIGNALS_QUEUED))
    tasks = _count_my_tasks() + limits["threads"]
    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))


def describe_exception(exc: BaseException) -> dict:
    """Type, nearest built-in base, message, errno and traceback tail of ``exc`` (for the supervisor)."""
    builtin = next((c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"), "BaseException")
    try:
        message = str(exc)[:2000]
    except Exception:  # a candidate's __str__ may raise
        message = f"<unprintable {type(exc).__name__}>"
    try:
        args = wire.encode(tuple(exc.args), _reject_handles)
    except Exception:
        args = None
    code = getattr(exc, "errno", None)
    return {
        "type": type(exc).__qualname__[:200],
        "builtin": builtin,
        "message": message,
        "args": args,
        "errno": code if type(code) is int else None,
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def _reject_handles(obj):
    raise ValueError("exception argument is not plain data")


class Objects:
    """The worker's objects the supervisor holds handles to (kept alive until the worker exits)."""

    def __init__(self) -> None:
        self.by_handle: dict[int, object] = {}
        self.handle_by_id: dict[int, int] = {}

    def keep(self, obj) -> int:
        """The handle of ``obj`` (a new one the first time it is seen)."""
        known = self.handle_by_id.get(id(obj))
        if known is not None and self.by_handle[known] is obj:
            return known
        handle = len(self.by_handle) + 1
        self.by_handle[handle] = obj
        self.handle_by_id[id(obj)] = handle
        return handle

    def get(self, handle: int):
        """The object behind ``handle``."""
        return self.by_handle[handle]


class Channel:
    """The worker's ends of the channel, for callbacks into the supervisor in the middle of a request."""

    def __init__(self, in_fd: int, out_fd: int, objects: Objects) -> None:
        self.in_fd, self.out_fd, self.objects = in_fd, out_fd, objects

    def load(self, payload: bytes):
        """Unpickle a supervisor message; returns it and the ids of the worker objects it referred to."""
        unpickler = _Unpickler(payload, self)
        return unpickler.load(), unpickler.shared

    def callback(self, number: int, args: tuple, kwargs: dict):
        """Call supervisor callable ``number`` with these arguments and return (or raise) its result."""
        message = {"callback": [number, wire.encode(args, self.objects.keep), wire.encode(kwargs, self.objects.keep)]}
        wire.send(self.out_fd, wire.dumps(message))
        reply, _ = self.load(wire.recv(self.in_fd))
        if reply[0] == "cb_ok":
            return reply[1]
        cls = (
            getattr(__builtins__, reply[1], None)
            if isinstance(__builtins__, types.ModuleType)
            else __builtins__.get(reply[1])
        )
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = RuntimeError
        raise cls(reply[2])


class Callback:
    """A supervisor callable handed to the candidate (e.g. a test's MagicMock): calling it calls back."""

    _lade_callback_type = True

    def __init__(self, number: int, channel: Channel) -> None:
        self.number, self.channel = number, channel

    def __call__(self, *args, **kwargs):
        """Call back into the supervisor."""
        return self.channel.callback(self.number, args, kwargs)

    def __repr__(self) -> str:
        return f"<supervisor callable {self.number}>"


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, channel: Channel) -> None:
        import io

        super().__init__(io.BytesIO(data))
        self.channel = channel
        self.shared: set[int] = set()

    def persistent_load(self, pid):
        if pid[0] == "t":
            return Callback(pid[1], self.channel)
        obj = self.channel.objects.get(pid[1])
        self.shared.add(id(obj))
        return obj


_BINARY: dict[str, Callable[..., Any]] = {
    name: getattr(operator, name)
    for name in ("eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "truediv", "floordiv", "mod",
                 "pow", "matmul", "lshift", "rshift", "and_", "or_", "xor", "contains", "getitem", "delitem")
}  # fmt: skip
_BINARY["setitem"] = operator.setitem
_BINARY["format"] = format
_BINARY["divmod"] = divmod
_BINARY["isinstance"] = lambda cls, obj: isinstance(obj, cls)
_BINARY["issubclass"] = lambda cls, sub: issubclass(sub, cls)
_BINARY["exit"] = lambda obj, *args: obj.__exit__(*args)
_BINARY["round"] = round
for _name in ("iadd", "imul", "ior", "iand", "isub", "ixor"):
    _BINARY[_name] = getattr(operator, _name)
_UNARY: dict[str, Callable[..., Any]] = {
    "len": len, "bool": bool, "iter": iter, "next": next, "hash": hash, "repr": repr, "str": str,
    "int": int, "float": float, "complex": complex, "index": operator.index, "neg": operator.neg,
    "pos": operator.pos, "abs": abs, "invert": operator.invert, "reversed": reversed,
    "enter": lambda obj: obj.__enter__(), "dir": dir, "bytes": bytes,
}  # fmt: skip


def answer(request: tuple, module: types.ModuleType, objects: Objects, shared: set) -> dict:
    """Carry out one supervisor request on the candidate's objects; returns the encoded reply."""
    op = request[0]
    keep = objects.keep
    if op == "names":
        # The candidate's top-level names; modules by their import name (the supervisor imports its own).
        public = [(name, value) for name, value in vars(module).items() if not name.startswith("__")]
        names = [[name, wire.encode(value, keep, share_mutable=True)]
                 for name, value in public if not isinstance(value, types.ModuleType)]  # fmt: skip
        modules = [[name, str(value.__name__)] for name, value in public if isinstance(value, types.ModuleType)]
        return {"ok": {"dict": [["names", {"dict": names}], ["modules", {"dict": modules}]]}}
    # Handles in a request arrive as the worker's own objects (pickle persistent ids).
    if op == "getattr":
        return {"ok": wire.encode(getattr(request[1], request[2]), keep, share_mutable=True)}
    if op == "setattr":
        setattr(request[1], request[2], request[3])
        return {"ok": wire.encode(None, keep)}
    if op == "delattr":
        delattr(request[1], request[2])
        return {"ok": wire.encode(None, keep)}
    if op == "snapshot":
        return {"ok": wire.encode(request[1], keep)}
    if op == "call":
        args, kwargs = request[2], request[3]
        result = request[1](*args, **kwargs)
        reply = {"ok": wire.encode(result, keep)}
        # The supervisor's own list/dict/set arguments: send their final contents back (copy-back).
        values = list(args) + list(kwargs.values())
        after = [[i, wire.encode(v, keep)] for i, v in enumerate(values)
                 if type(v) in wire.MUTABLE_CONTAINERS and id(v) not in shared]  # fmt: skip
        if after:
            reply["after"] = after
        return reply
    if op == "op":
        name, args = request[1], request[2]
        function: Callable[..., Any] | None = _UNARY.get(name) if len(args) == 1 else _BINARY.get(name)
        if function is None:
            raise TypeError(f"unsupported operation {name!r} with {len(args)} operand(s)")
        # An item of a container stays shared (obj.data["k"]["x"] = 1 must reach the worker's object).
        return {"ok": wire.encode(function(*args), keep, share_mutable=name == "getitem")}
    raise ValueError(f"unknown request {op!r}")


def serve(in_fd: int, out_fd: int) -> None:
    """Load the candidate module, then answer requests until the supervisor closes the channel."""
    objects = Objects()
    channel = Channel(in_fd, out_fd, objects)
    module = types.ModuleType(MODULE_NAME)
    module.__file__ = os.path.abspath("candidate.py")
    sys.modules[MODULE_NAME] = module
    try:
        with open("candidate.py", encoding="utf-8") as f:
            source = f.read()
        exec(compile(source, module.__file__, "exec"), module.__dict__)
        reply: dict[str, Any] = {"ok": True}
    except BaseException as exc:  # noqa: BLE001 - SystemExit at import fails the candidate too
        traceback.print_exception(exc)
        reply = {"error": describe_exception(exc)}
    wire.send(out_fd, wire.dumps(reply))
    if "error" in reply:
        return
    while True:
        try:
            request, shared = channel.load(wire.recv(in_fd))
        except wire.ChannelClosed:
            return
        try:
            reply = answer(request, module, objects, shared)
        except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the supervisor
            reply = {"error": describe_exception(exc)}
        try:
            payload = wire.dumps(reply)
            if len(payload) > wire.MAX_MESSAGE_BYTES:  # the supervisor would refuse it: say so instead
                raise ValueError(f"a result of {len(payload)} bytes exceeds {wire.MAX_MESSAGE_BYTES}")
        except (ValueError, TypeError, RecursionError) as exc:
            payload = wire.dumps({"error": describe_exception(exc)})
        wire.send(out_fd, payload)


def run(out_fd: int, run_name: str) -> None:
    """Run ``program.py`` as a script named ``run_name``; report an uncaught exception on ``out_fd``."""
    import runpy

    sys.argv = [os.path.abspath("program.py")]
    try:
        runpy.run_path(sys.argv[0], run_name=run_name)
    except SystemExit:
        raise
    except BaseException as exc:  # noqa: BLE001
        # Print it as Python would, from the program's first frame on (not runpy's or ours).
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != sys.argv[0]:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb or exc.__traceback__)
        sys.stderr.flush()
        try:
            wire.send(out_fd, wire.dumps({"exception": describe_exception(exc)}))
        except OSError:
            pass
        os._exit(1)


def main() -> None:
    """Entry point (see the module docstring): limits and seccomp first, then run or serve."""
    mode, limits_json, in_fd, out_fd = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limits = json.loads(limits_json)
    try:
        apply_limits(limits)
        if limits["seccomp"]:
            syscalls.install_seccomp(os.getpid())
    except Exception as exc:  # noqa: BLE001 - fail closed: no generated code runs without its limits
        print(f"[sandbox] could not set the worker's limits: {type(exc).__name__}: {exc}", file=sys.stderr)
        wire.send(out_fd, wire.dumps({"setup_error": f"{type(exc).__name__}: {exc}"}))
        os._exit(SETUP_FAILED_EXIT)
    wire.send(out_fd, wire.dumps({"ready": True}))
    if mode == "serve":
        serve(in_fd, out_fd)
    else:
        run(out_fd, limits["run_name"])


if __name__ == "__main__":
    main()
