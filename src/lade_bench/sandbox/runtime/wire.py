"""Messages between the supervisor (trusted) and the worker (runs generated code); stdlib only.

Worker -> supervisor: JSON whose values the supervisor rebuilds (:mod:`rebuild`, with bounded
depth, size and time) from a fixed list of inert types (numbers, strings, bytes, containers,
datetime, Decimal, numpy arrays of plain dtypes). Any other object stays in the worker and travels
as a handle number. The supervisor never executes, evaluates
or unpickles anything the worker sends, so the worker can influence a verdict only through the
values its code returns.

Supervisor -> worker: pickle (the worker trusts the supervisor), with handles sent back as
persistent ids so that the worker receives its own objects again.
"""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import errno
import fractions
import json
import os
import struct

_HEADER = struct.Struct(">I")
# Larger messages are refused: a candidate returning gigabytes cannot exhaust the supervisor, and
# parsing one takes the supervisor a fraction of a second (its values are bounded by :mod:`rebuild`).
MAX_MESSAGE_BYTES = 16 * 2**20
MAX_ENCODE_DEPTH = 100
# Plain JSON ints up to this many bits; bigger ones travel as hex (int <-> decimal str is capped).
_JSON_INT_BITS = 4000
_NUMPY_KINDS = frozenset("biufc")
# PIL image modes that are fully described by mode, size and pixel bytes (no palette).
PIL_MODES = frozenset({"1", "L", "LA", "La", "RGB", "RGBA", "RGBX", "RGBa", "CMYK", "YCbCr", "LAB", "HSV", "I", "F"})


# errnos with which the kernel refuses what the sandbox forbids: writes to the read-only file system,
# new processes, ptrace, other processes, the network, size limits. An exception of one of these
# built-in types carrying one of these errnos that ends a program or a test marks a violation.
VIOLATION_ERRNOS = frozenset({
    errno.EROFS, errno.EACCES, errno.EPERM, errno.EAGAIN, errno.ENOSYS, errno.EFBIG, errno.ENOSPC, errno.EDQUOT,
    errno.ESRCH, errno.ENETUNREACH, errno.ECONNREFUSED, errno.EHOSTUNREACH,
})  # fmt: skip
VIOLATION_TYPES = frozenset({"OSError", "PermissionError", "BlockingIOError", "ProcessLookupError",
                             "ConnectionRefusedError", "ConnectionError"})  # fmt: skip


def classify_report(info: dict) -> str:
    """``violation``, ``memory`` or ``failed`` for an exception report made by the worker."""
    if info.get("errno") in VIOLATION_ERRNOS and info.get("builtin") in VIOLATION_TYPES:
        return "violation"
    if info.get("builtin") == "MemoryError":
        return "memory"
    return "failed"


class ProtocolError(Exception):
    """A malformed or oversized message (a worker that scribbled on its channel, or died mid-write)."""


class ChannelClosed(ProtocolError):
    """The other side closed its end (the worker exited or was killed)."""


def send(fd: int, payload: bytes) -> None:
    """Write one length-prefixed message to ``fd``."""
    if len(payload) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise ChannelClosed("channel closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def recv(fd: int) -> bytes:
    """Read one length-prefixed message from ``fd``."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
    return _read_exact(fd, size)


# ----------------------------------------------------------------------------- worker side: encode


class _NotData(Exception):
    pass


def _float(x: float):
    return x if x == x and x not in (float("inf"), float("-inf")) else {"float": repr(x)}


def _int(x: int):
    return x if x.bit_length() <= _JSON_INT_BITS else {"bigint": hex(x)}


def _encode(value, keep, depth: int, path: set):
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return _int(value)
    if kind is float:
        return _float(value)
    if depth > MAX_ENCODE_DEPTH:
        raise _NotData
    if kind in (list, tuple, set, frozenset, dict, collections.OrderedDict, collections.Counter,
                collections.defaultdict, collections.deque):  # fmt: skip
        if id(value) in path:  # a cycle: the container stays in the worker
            return handle(value, keep)
        path.add(id(value))
        try:
            if kind in (dict, collections.OrderedDict, collections.Counter, collections.defaultdict):
                items = [
                    [_encode(k, keep, depth + 1, path), _encode(v, keep, depth + 1, path)] for k, v in value.items()
                ]
                return {kind.__name__.lower(): items}
            return {kind.__name__: [_encode(v, keep, depth + 1, path) for v in value]}
        finally:
            path.discard(id(value))
    if kind is bytes or kind is bytearray:
        return {kind.__name__: base64.b64encode(bytes(value)).decode("ascii")}
    if kind is complex:
        return {"complex": [_float(value.real), _float(value.imag)]}
    if kind is range:
        return {"range": [_int(value.start), _int(value.stop), _int(value.step)]}
    if kind in (datetime.datetime, datetime.time) and value.tzinfo is None:
        return {kind.__name__: value.isoformat()}
    if kind is datetime.date:
        return {"date": value.isoformat()}
    if kind is datetime.timedelta:
        return {"timedelta": [value.days, value.seconds, value.microseconds]}
    if kind is decimal.Decimal:
        return {"decimal": str(value)}
    if kind is fractions.Fraction:
        return {"fraction": [_int(value.numerator), _int(value.denominator)]}
    module = getattr(kind, "__module__", "")
    if module == "numpy" and kind.__name__ == "ndarray" and value.dtype.kind in _NUMPY_KINDS:
        return {"ndarray": [value.dtype.str, list(value.shape), _encode(value.tolist(), keep, depth + 1, path)]}
    if (
        module == "numpy"
        and hasattr(value, "dtype")
        and getattr(value, "shape", None) == ()
        and value.dtype.kind in _NUMPY_KINDS
    ):
        return {"npscalar": [value.dtype.str, _encode(value.item(), keep, depth + 1, path)]}
    if module == "PIL.Image" and kind.__name__ == "Image" and value.mode in PIL_MODES:
        return {"pil_image": [value.mode, list(value.size), base64.b64encode(value.tobytes()).decode("ascii")]}
    raise _NotData


# Mutable containers that tests reach through the candidate's objects (``obj.items["a"] = 1``) travel as
# container handles: reads are snapshotted into the supervisor, writes go to the worker.
MUTABLE_CONTAINERS: dict[type, str] = {
    list: "list", dict: "dict", set: "set", bytearray: "bytearray", collections.deque: "deque",
    collections.OrderedDict: "ordereddict", collections.defaultdict: "defaultdict", collections.Counter: "counter",
}  # fmt: skip


def handle(value, keep) -> dict:
    """The reference to a worker-side object: its handle number and type name (for messages only)."""
    return {"handle": [keep(value), type(value).__qualname__[:200]]}


def encode(value, keep, share_mutable: bool = False) -> object:
    """A JSON-ready form of ``value``: data by value, every other object (also inside containers) by handle.

    ``keep(obj) -> int`` stores ``obj`` in the worker and returns its handle number. With
    ``share_mutable``, a top-level mutable container travels as a container handle instead of a copy.
    An object with a ``_lade_callback`` number (a supervisor callable) travels as that number.
    """
    kind = type(value)
    if share_mutable and kind in MUTABLE_CONTAINERS:
        return {"container": [keep(value), MUTABLE_CONTAINERS[kind]]}
    try:
        return _encode_with_handles(value, keep, 0, set())
    except RecursionError:
        return handle(value, keep)


def _encode_with_handles(value, keep, depth, path):
    try:
        return _encode(value, keep, depth, path)
    except _NotData:
        pass
    kind = type(value)
    number = getattr(kind, "_lade_callback_type", False) and getattr(value, "number", None)
    if type(number) is int:
        return {"callback": number}
    # A plain container that holds some non-data objects: copy it, with handles for those objects.
    if kind in (list, tuple) and id(value) not in path and depth <= MAX_ENCODE_DEPTH:
        path.add(id(value))
        try:
            return {kind.__name__: [_encode_with_handles(v, keep, depth + 1, path) for v in value]}
        finally:
            path.discard(id(value))
    if kind is dict and id(value) not in path and depth <= MAX_ENCODE_DEPTH:
        path.add(id(value))
        try:
            pairs = [
                [_encode_with_handles(k, keep, depth + 1, path), _encode_with_handles(v, keep, depth + 1, path)]
                for k, v in value.items()
            ]
            return {"dict": pairs}
        finally:
            path.discard(id(value))
    return handle(value, keep)


def dumps(message: dict) -> bytes:
    """Serialise a worker message (already encoded values) as strict JSON."""
    return json.dumps(message, allow_nan=False, separators=(",", ":")).encode("utf-8")


# ----------------------------------------------------------------------------- supervisor side: parse


def loads(payload: bytes) -> dict:
    """Parse a worker message (strict JSON object)."""
    try:
        message = json.loads(payload.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"unreadable worker message: {type(exc).__name__}") from None
    if type(message) is not dict:
        raise ProtocolError("a worker message must be a JSON object")
    return message


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")
