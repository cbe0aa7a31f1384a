"""Supervisor side of the worker channel: proxies for the candidate's objects; stdlib only.

Trusted test code runs in the supervisor and sees the candidate's functions, classes and objects as
:class:`Remote` proxies. Every use of a proxy (call, attribute, operator) is carried out by the worker
and its result comes back as plain data (compared here, by the supervisor's own Python) or as
another proxy. Comparisons between two plain values therefore never run candidate code; only
operations on the candidate's own objects do (e.g. its ``__eq__``), as in the reference harnesses.

To keep the reference harnesses' semantics across the process boundary:

* list/dict/set arguments the candidate mutates are updated here after the call (copy-back);
* a mutable container reached through an attribute or item of a candidate object is a
  :class:`RemoteContainer`: writes (``obj.items["a"] = 1``, ``.append``) go to the worker, reads
  (``==``, ``len``, ``in``, iteration) use a fresh snapshot compared here;
* callables the tests hand to the candidate (a ``MagicMock``, a lambda) stay here and are called
  back by the worker with plain data.
"""

from __future__ import annotations

import builtins
import collections
import copy
import io
import operator
import os
import pickle
import signal

try:  # imported as lade_bench.sandbox.runtime.remote (tests) or as a script's sibling (sandbox)
    from . import rebuild, wire
except ImportError:
    import rebuild  # type: ignore[no-redef]
    import wire  # type: ignore[no-redef]

# Raised in the supervisor instead of these when the worker reports them: they would end the test run.
_NOT_REPLAYED = frozenset({"SystemExit", "KeyboardInterrupt", "GeneratorExit", "BaseException"})
# Attributes looked up by copy/pickle machinery that must not reach the worker.
_LOCAL_ONLY = frozenset({"__deepcopy__", "__copy__", "__reduce__", "__reduce_ex__", "__getstate__",
                         "__setstate__", "__getnewargs__", "__getnewargs_ex__", "__class_getitem__"})  # fmt: skip


class RemoteError(Exception):
    """An exception of a type defined by the candidate, raised in the worker."""


class WorkerGone(Exception):
    """The worker has exited, was killed, or broke the channel; no further calls are possible."""


class Connection:
    """Request/response channel to one worker process."""

    def __init__(self, pid: int, to_worker: int, from_worker: int) -> None:
        self.pid = pid
        self.to_worker = to_worker
        self.from_worker = from_worker
        self.dead_reason: str | None = None
        # Set when the worker sent something malformed (a value beyond the decoding bounds, say):
        # whatever the tests made of it, the verdict is then "error".
        self.broken: str | None = None
        self.remotes: dict[int, Remote] = {}
        self.callbacks: list = []  # supervisor callables handed to the worker, by number
        self.sections_fd = -1  # where the supervisor announces its time limits (-1: nowhere)
        # Whether a time limit is armed (set by the supervisor's Timer): the worker is asked nothing
        # outside one, so no request can keep the supervisor waiting beyond a limit the caller knows.
        self.armed = False

    def kill(self, reason: str) -> None:
        """Stop the worker for good (a timeout or a broken channel)."""
        if self.dead_reason is None:
            self.dead_reason = reason
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def receive(self) -> dict:
        """The next message from the worker (only while a time limit is armed)."""
        if self.dead_reason is not None:
            raise WorkerGone(self.dead_reason)
        if not self.armed:
            raise WorkerGone("no time limit armed: the candidate's process is not asked anything")
        try:
            return wire.loads(wire.recv(self.from_worker))
        except wire.ChannelClosed:
            self.kill("the candidate's process ended")
            raise WorkerGone(self.dead_reason) from None
        except (wire.ProtocolError, OSError) as exc:
            self._break(f"the candidate's process broke its channel ({exc})")
            raise WorkerGone(self.dead_reason) from None

    def _break(self, reason: str) -> None:
        if self.broken is None and self.dead_reason is None:
            self.broken = reason
        self.kill(reason)

    def _send(self, message: tuple) -> None:
        buffer = io.BytesIO()
        try:
            _Pickler(buffer, self).dump(message)
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as exc:
            raise TypeError(f"cannot pass this value to the sandboxed candidate: {exc}") from None
        try:
            wire.send(self.to_worker, buffer.getvalue())
        except OSError:
            self.kill("the candidate's process ended")
            raise WorkerGone(self.dead_reason) from None

    def _decode(self, value):
        try:
            return rebuild.decode(value, self.resolve)
        except RecursionError:  # bounded depth, but called from a deep test: still the worker's doing
            self._break("the candidate's process sent a value too deep to rebuild here")
            raise WorkerGone(self.dead_reason) from None
        except wire.ProtocolError as exc:
            self._break(f"the candidate's process sent a malformed value ({exc})")
            raise WorkerGone(self.dead_reason) from None

    def request(self, message: tuple, mutable_args: tuple = ()):
        """Send one request and return its decoded result, or raise the exception it raised.

        ``mutable_args`` are the supervisor's list/dict/set arguments of a call, updated in place
        from the worker's copies afterwards. While waiting, serves the worker's callbacks.
        """
        if self.dead_reason is not None:
            raise WorkerGone(self.dead_reason)
        if not self.armed:
            raise WorkerGone("no time limit armed: the candidate's process is not asked anything")
        self._send(message)
        while True:
            reply = self.receive()
            if "callback" in reply:
                self._serve_callback(reply["callback"])
                continue
            break
        if "ok" in reply:
            result = self._decode(reply["ok"])
            after = reply.get("after")
            for item in after if type(after) is list else ():
                if type(item) is list and len(item) == 2 and type(item[0]) is int and 0 <= item[0] < len(mutable_args):
                    _refill(mutable_args[item[0]], self._decode(item[1]))
            return result
        if "error" in reply and type(reply["error"]) is dict:
            raise rebuild_exception(rebuild.report(reply["error"]))
        self._break("the candidate's process sent an unexpected message")
        raise WorkerGone(self.dead_reason)

    def _serve_callback(self, payload) -> None:
        # The worker called a supervisor callable the tests gave it, with plain data (or proxies).
        try:
            number, args, kwargs = payload
            function = self.callbacks[int(number)]
            args, kwargs = self._decode(args), self._decode(kwargs)
            if type(args) is not tuple or type(kwargs) is not dict or not all(type(k) is str for k in kwargs):
                raise TypeError("malformed callback arguments")
            reply: tuple = ("cb_ok", function(*args, **kwargs))
        except WorkerGone:
            raise
        except Exception as exc:  # noqa: BLE001 - goes back to the worker as its exception
            reply = ("cb_error", type(exc).__name__, str(exc)[:2000])
        try:
            self._send(reply)
        except TypeError as exc:
            self._send(("cb_error", "TypeError", str(exc)))

    def resolve(self, tag: str, payload):
        """The supervisor object for a handle-like value: a proxy, or one of its own callables."""
        if tag == "callback":
            number = int(payload)
            if not 0 <= number < len(self.callbacks):
                raise wire.ProtocolError(f"unknown callback {number}")
            return self.callbacks[number]
        handle, kind = int(payload[0]), str(payload[1])
        proxy = self.remotes.get(handle)
        if proxy is None:
            if tag == "container":
                if kind not in _CONTAINER_TYPES:
                    raise wire.ProtocolError(f"unknown container kind {kind!r}")
                proxy = RemoteContainer(self, handle, kind)
            else:
                proxy = Remote(self, handle, kind)
            self.remotes[handle] = proxy
        return proxy

    def callback_number(self, function) -> int:
        """Register a supervisor callable the worker may call back."""
        for number, known in enumerate(self.callbacks):
            if known is function:
                return number
        self.callbacks.append(function)
        return len(self.callbacks) - 1


def _refill(target, value) -> None:
    # Give the supervisor's own object the worker's final contents (only when the kinds agree).
    if type(target) is not type(value) and not (isinstance(target, dict) and isinstance(value, dict)):
        return
    if isinstance(target, (list, bytearray)):
        target[:] = value
    elif isinstance(target, (dict, set)):
        target.clear()
        target.update(value)
    elif isinstance(target, collections.deque):
        target.clear()
        target.extend(value)


def rebuild_exception(info: dict) -> BaseException:
    """A supervisor-side exception for a worker-reported one: its nearest built-in type, else RemoteError.

    The result carries ``_lade_remote`` (the report) so that verdicts can tell the candidate's errors,
    such as a refused write, from the test's own assertion failures.
    """
    builtin = str(info.get("builtin", ""))
    cls = getattr(builtins, builtin, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)) or builtin in _NOT_REPLAYED:
        cls = RemoteError
    message = (
        f"{info.get('type', '?')}: {info.get('message', '')}" if cls is RemoteError else str(info.get("message", ""))
    )
    exc: BaseException | None = None
    if cls is not RemoteError and info.get("args") is not None:
        try:
            args = rebuild.decode(info["args"], _no_handles)
            exc = cls(*args) if type(args) is tuple else None
        except Exception:  # noqa: BLE001 - fall back to the message
            exc = None
    if exc is None:
        errno = info.get("errno")
        try:
            exc = cls(errno, message) if issubclass(cls, OSError) and type(errno) is int else cls(message)
        except Exception:  # noqa: BLE001 - a type that needs other arguments (ExceptionGroup, UnicodeError)
            exc = RemoteError(f"{info.get('type', '?')}: {message}")
    exc._lade_remote = info  # type: ignore[attr-defined]
    return exc


def _no_handles(tag, payload):
    raise wire.ProtocolError("exception arguments must be plain data")


class _Pickler(pickle.Pickler):
    def __init__(self, buffer, conn: Connection) -> None:
        super().__init__(buffer, protocol=pickle.HIGHEST_PROTOCOL)
        self.conn = conn

    def persistent_id(self, obj):
        if isinstance(type(obj), type) and issubclass(type(obj), Remote):
            return ("h", object.__getattribute__(obj, "_lade_handle"))
        # Functions, lambdas, mocks: stay here and are called back (classes still pickle by name).
        if callable(obj) and not isinstance(obj, type) and type(obj).__module__ not in ("builtins",):
            return ("t", self.conn.callback_number(obj))
        return None


def _conn(proxy: Remote) -> Connection:
    return object.__getattribute__(proxy, "_lade_conn")


def _op(name: str, *operands):
    first = next(o for o in operands if issubclass(type(o), Remote))
    return _conn(first).request(("op", name, operands))


class Remote:
    """Proxy for one of the candidate's objects living in the worker."""

    __slots__ = ("_lade_conn", "_lade_handle", "_lade_type")

    def __init__(self, conn: Connection, handle: int, type_name: str) -> None:
        object.__setattr__(self, "_lade_conn", conn)
        object.__setattr__(self, "_lade_handle", handle)
        object.__setattr__(self, "_lade_type", type_name)

    def __getattr__(self, name: str):
        if name in _LOCAL_ONLY or name.startswith("_lade_"):
            raise AttributeError(name)
        return _conn(self).request(("getattr", self, name))

    def __setattr__(self, name: str, value) -> None:
        _conn(self).request(("setattr", self, name, value))

    def __delattr__(self, name: str) -> None:
        _conn(self).request(("delattr", self, name))

    def __call__(self, *args, **kwargs):
        """Call the candidate's object in the worker; list/dict/set arguments get its changes back."""
        mutable = tuple(args) + tuple(kwargs.values())
        return _conn(self).request(("call", self, args, kwargs), mutable)

    def __repr__(self) -> str:
        text = _op("repr", self)
        return text if type(text) is str else f"<sandboxed {object.__getattribute__(self, '_lade_type')}>"

    def __str__(self) -> str:
        text = _op("str", self)
        return text if type(text) is str else self.__repr__()

    def __hash__(self) -> int:
        value = _op("hash", self)
        if type(value) is not int:
            raise TypeError("__hash__ of a sandboxed object did not return an int")
        return value

    def __instancecheck__(self, instance) -> bool:
        return bool(_op("isinstance", self, instance))

    def __subclasscheck__(self, subclass) -> bool:
        return bool(_op("issubclass", self, subclass))

    def __setitem__(self, key, value) -> None:
        _op("setitem", self, key, value)

    def __exit__(self, *args):
        return _op("exit", self, *args)

    def __round__(self, *args):
        return _op("round", self, *args)


def _unary(name):
    return lambda self: _op(name, self)


def _binary(name):
    return lambda self, other: _op(name, self, other)


def _reflected(name):
    return lambda self, other: _op(name, other, self)


for _name in ("len", "bool", "iter", "next", "int", "float", "complex", "index", "neg", "pos", "abs",
              "invert", "reversed", "enter", "bytes"):  # fmt: skip
    setattr(Remote, f"__{_name}__", _unary(_name))
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "getitem", "delitem", "format"):
    setattr(Remote, f"__{_name}__", _binary(_name))
for _name, _function in (("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "truediv"),
                         ("floordiv", "floordiv"), ("mod", "mod"), ("pow", "pow"), ("matmul", "matmul"),
                         ("lshift", "lshift"), ("rshift", "rshift"), ("and", "and_"), ("or", "or_"),
                         ("xor", "xor"), ("divmod", "divmod")):  # fmt: skip
    setattr(Remote, f"__{_name}__", _binary(_function))
    setattr(Remote, f"__r{_name}__", _reflected(_function))
# Methods set on the class after it is built (the proxy's whole surface): mypy cannot follow them.
Remote.__contains__ = lambda self, item: bool(_op("contains", self, item))  # type: ignore[method-assign,operator]
Remote.__dir__ = lambda self: list(_op("dir", self))  # type: ignore[method-assign]


_CONTAINER_TYPES = {"list": list, "dict": dict, "set": set, "bytearray": bytearray, "deque": collections.deque,
                    "ordereddict": collections.OrderedDict, "defaultdict": collections.defaultdict,
                    "counter": collections.Counter}  # fmt: skip


def _snapshot(proxy: RemoteContainer):
    return _conn(proxy).request(("snapshot", proxy))


class RemoteContainer(Remote):
    """Proxy for a mutable container inside the candidate's objects: reads on a snapshot, writes remote."""

    __slots__ = ()

    @property  # type: ignore[misc]  # read-only on purpose: isinstance(proxy, dict) holds, as for the worker's
    def __class__(self):
        return _CONTAINER_TYPES[object.__getattribute__(self, "_lade_type")]

    def __repr__(self) -> str:
        return repr(_snapshot(self))

    def __str__(self) -> str:
        return str(_snapshot(self))

    __hash__ = None  # type: ignore[assignment]


def _read_unary(function):
    return lambda self: function(_snapshot(self))


def _read_binary(function):
    return lambda self, other: function(_snapshot(self), other)


def _read_reflected(function):
    return lambda self, other: function(other, _snapshot(self))


for _read_name, _reader in (("len", len), ("bool", bool), ("iter", iter), ("reversed", reversed), ("copy", copy.copy)):
    setattr(RemoteContainer, f"__{_read_name}__", _read_unary(_reader))
for _name in ("eq", "ne", "lt", "le", "gt", "ge", "add", "mul", "sub", "and", "or", "xor", "mod"):
    _function = getattr(operator, _name if _name not in ("and", "or") else f"{_name}_")
    setattr(RemoteContainer, f"__{_name}__", _read_binary(_function))
    if _name not in ("eq", "ne", "lt", "le", "gt", "ge"):  # comparisons reflect by themselves
        setattr(RemoteContainer, f"__r{_name}__", _read_reflected(_function))
RemoteContainer.__contains__ = lambda self, item: item in _snapshot(self)  # type: ignore[method-assign,operator,arg-type]
RemoteContainer.__format__ = lambda self, spec: format(_snapshot(self), spec)  # type: ignore[method-assign,arg-type]
RemoteContainer.__deepcopy__ = lambda self, memo: copy.deepcopy(_snapshot(self), memo)  # type: ignore[attr-defined]
for _name in ("iadd", "imul", "ior", "iand", "isub", "ixor"):
    setattr(RemoteContainer, f"__{_name}__", _binary(_name))
