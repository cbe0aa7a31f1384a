"""Supervisor side of the wire: rebuild the worker's values with bounded depth, size and time; stdlib only.

Everything here reads what the candidate's process wrote, so every step is bounded before it runs:

* depth (:data:`MAX_DEPTH` levels of values) and the number of values in one message
  (:data:`MAX_NODES`); the message itself is at most :data:`wire.MAX_MESSAGE_BYTES`;
* the inputs of the few C routines whose time grows faster than their input: integers
  (:data:`MAX_INT_BITS`), the two halves of a Fraction (:data:`MAX_FRACTION_BITS`, its gcd is
  quadratic), Decimal digits and exponents, and keys of sets and dicts (no more than
  :data:`MAX_SAME_HASH` keys may share one hash: all-alike hashes make building the set quadratic);
* types: only exact builtin values (and containers of them, and a few stdlib value types) are
  rebuilt. A numpy scalar arrives as the builtin number it holds (a float16 infinity is ``inf``,
  equal to nothing but infinity) and a numpy array with 64-bit dtypes, so that comparing it with a
  Python number never rounds the number to a narrower type.

Any violation raises :class:`wire.ProtocolError`, which the supervisor turns into an ``error``.
"""

from __future__ import annotations

import base64
import collections
import datetime
import decimal
import fractions
from collections.abc import Callable
from typing import Any

try:  # imported as lade_bench.sandbox.runtime.rebuild (tests) or as a script's sibling (sandbox)
    from . import wire
except ImportError:
    import wire  # type: ignore[no-redef]

ProtocolError = wire.ProtocolError
# Nesting of values (not of JSON): the worker encodes at most wire's own depth, plus an array's dims
# (a few frames each: 140 levels stay well inside the interpreter's recursion limit).
MAX_DEPTH = wire.MAX_ENCODE_DEPTH + 40
# Values (containers, numbers, strings) in one message: a few hundred thousand is more than any test
# compares, and a million keeps the supervisor's pure-Python rebuild within a second or two.
MAX_NODES = 1_000_000
# Integers: exact for any answer a test could check, and linear-time to parse, compare and hash.
MAX_INT_BITS = 1_000_000
# Fraction(n, d) normalises with a gcd, quadratic in C: 100k bits take milliseconds (6M bits: a minute).
MAX_FRACTION_BITS = 100_000
# Decimal: digits and exponent (int(Decimal('1e999999999')) in a test would build a billion digits).
MAX_DECIMAL_CHARS = 10_000
MAX_DECIMAL_EXPONENT = 10_000
# Keys of one set or dict that share a hash: distinct plain keys rarely share one; all-alike hashes
# make each insertion compare with every earlier key.
MAX_SAME_HASH = 16
_MAX_DIMS = 32
_MAX_TEXT = 64  # ISO dates and times
_MAX_IMAGE_SIDE = 1 << 16
# Array dtypes as the supervisor rebuilds them: 64 bits, so comparisons are those of Python numbers.
_WIDE = {"b": "?", "i": "<i8", "u": "<u8", "f": "<f8", "c": "<c16"}
# Exact builtin types whose hash the supervisor computes itself (a proxy's hash is the worker's).
_HASHED_HERE = (int, float, complex, str, bytes, bool, tuple, frozenset, type(None), decimal.Decimal,
                fractions.Fraction, datetime.date, datetime.datetime, datetime.time, datetime.timedelta,
                range)  # fmt: skip

Resolver = Callable[[str, object], object]


def decode(value, remote: Resolver):
    """Rebuild a value encoded by :func:`wire.encode`; ``remote(tag, payload)`` resolves handle-like tags.

    Raises:
        ProtocolError: on anything that is not a well-formed encoded value within the bounds above.
    """
    return _Decoder(remote).value(value, 0)


class _Decoder:
    """One message's rebuild, with its node budget."""

    def __init__(self, remote: Resolver) -> None:
        self.remote = remote
        self.nodes_left = MAX_NODES

    def value(self, value, depth: int):
        """The value encoded as ``value``, ``depth`` levels below the message's top."""
        self.nodes_left -= 1
        if self.nodes_left < 0:
            raise ProtocolError(f"more than {MAX_NODES} values in one message")
        if depth > MAX_DEPTH:
            raise ProtocolError(f"values nested deeper than {MAX_DEPTH}")
        kind = type(value)
        if value is None or kind in (bool, float, str):
            return value
        if kind is int:
            return _bounded_int(value)
        if kind is not dict or len(value) != 1:
            raise ProtocolError(f"unexpected {kind.__name__} in a worker message")
        ((tag, payload),) = value.items()
        build = _TAGS.get(tag)
        if build is None:
            raise ProtocolError(f"unknown tag {tag!r} in a worker message")
        try:
            return build(self, payload, depth + 1)
        except ProtocolError:
            raise
        except (TypeError, ValueError, IndexError, KeyError, ImportError, OverflowError, ArithmeticError) as exc:
            raise ProtocolError(f"bad {tag!r} value: {type(exc).__name__}: {str(exc)[:200]}") from None

    def items(self, items, depth: int) -> list:
        """The decoded elements of an encoded list."""
        if type(items) is not list:
            raise ProtocolError("expected a list")
        return [self.value(v, depth) for v in items]

    def pairs(self, items, depth: int) -> list:
        """The decoded ``[key, value]`` pairs of an encoded mapping, keys checked for alike hashes."""
        if type(items) is not list:
            raise ProtocolError("expected a list of pairs")
        out = []
        for pair in items:
            if type(pair) is not list or len(pair) != 2:
                raise ProtocolError("expected a [key, value] pair")
            out.append((self.value(pair[0], depth), self.value(pair[1], depth)))
        _check_hashes([k for k, _ in out])
        return out

    def keys(self, items, depth: int) -> list:
        """The decoded elements of an encoded set, checked for alike hashes."""
        out = self.items(items, depth)
        _check_hashes(out)
        return out

    def number(self, x):
        """A number field (int, float or a tagged special float / big int)."""
        if type(x) is int:
            return _bounded_int(x)
        if type(x) is float:
            return x
        if type(x) is dict and set(x) == {"float"} and x["float"] in ("nan", "inf", "-inf"):
            return float(x["float"])
        if type(x) is dict and set(x) == {"bigint"} and type(x["bigint"]) is str:
            return _bigint(x["bigint"])
        raise ProtocolError(f"expected a number, got {type(x).__name__}")


def _bounded_int(x: int) -> int:
    if x.bit_length() > MAX_INT_BITS:
        raise ProtocolError(f"an integer of more than {MAX_INT_BITS} bits")
    return x


def _bigint(text: str) -> int:
    if len(text) > MAX_INT_BITS // 4 + 3:
        raise ProtocolError(f"an integer of more than {MAX_INT_BITS} bits")
    return int(text, 16)


def _check_hashes(keys: list) -> None:
    """Refuse keys of which more than ``MAX_SAME_HASH`` share one hash (building them would be quadratic)."""
    if len(keys) <= MAX_SAME_HASH:
        return
    counts: dict[int, int] = {}
    for key in keys:
        if type(key) not in _HASHED_HERE:
            continue
        h = hash(key)
        counts[h] = counts.get(h, 0) + 1
        if counts[h] > MAX_SAME_HASH:
            raise ProtocolError(f"more than {MAX_SAME_HASH} keys with one hash (a hash-collision attack)")


def _text(value, limit: int = _MAX_TEXT) -> str:
    if type(value) is not str or len(value) > limit:
        raise ProtocolError("expected a short string")
    return value


def _fraction(d: _Decoder, payload, depth: int) -> fractions.Fraction:
    numerator, denominator = d.number(payload[0]), d.number(payload[1])
    if type(numerator) is not int or type(denominator) is not int:
        raise ProtocolError("a Fraction of non-integers")
    if max(numerator.bit_length(), denominator.bit_length()) > MAX_FRACTION_BITS:
        raise ProtocolError(f"a Fraction with more than {MAX_FRACTION_BITS} bits")
    return fractions.Fraction(numerator, denominator)


def _decimal(d: _Decoder, payload, depth: int) -> decimal.Decimal:
    value = decimal.Decimal(_text(payload, MAX_DECIMAL_CHARS))
    exponent = value.as_tuple().exponent
    if type(exponent) is int and abs(exponent) > MAX_DECIMAL_EXPONENT:
        raise ProtocolError(f"a Decimal with an exponent beyond {MAX_DECIMAL_EXPONENT}")
    return value


def _ndarray(d: _Decoder, payload, depth: int):
    import numpy

    dtype, shape, values = payload
    kind = numpy.dtype(_text(dtype)).kind
    if kind not in _WIDE:
        raise ProtocolError(f"ndarray dtype {dtype} is not allowed")
    if type(shape) is not list or len(shape) > _MAX_DIMS or any(type(n) is not int or n < 0 for n in shape):
        raise ProtocolError("bad ndarray shape")
    rebuilt = d.value(values, depth)
    return numpy.array(rebuilt, dtype=_WIDE[kind]).reshape(shape)


def _npscalar(d: _Decoder, payload, depth: int):
    import numpy

    kind = numpy.dtype(_text(payload[0])).kind
    value = d.value(payload[1], depth)
    expected = {"b": bool, "i": int, "u": int, "f": float, "c": complex}.get(kind)
    if expected is None or type(value) is not expected:
        raise ProtocolError(f"a numpy scalar of kind {kind!r} holding {type(value).__name__}")
    return value  # the builtin number it holds: compared as Python compares numbers


def _pil_image(d: _Decoder, payload, depth: int):
    from PIL import Image

    mode, size, data = payload
    if mode not in wire.PIL_MODES:
        raise ProtocolError(f"PIL image mode {mode!r} is not allowed")
    width, height = int(size[0]), int(size[1])
    if not (0 <= width <= _MAX_IMAGE_SIDE and 0 <= height <= _MAX_IMAGE_SIDE):
        raise ProtocolError("PIL image too large")
    return Image.frombytes(str(mode), (width, height), _b64(data))


def _b64(payload) -> bytes:
    return base64.b64decode(_text(payload, wire.MAX_MESSAGE_BYTES), validate=True)


_TAGS: dict[str, Callable[[_Decoder, Any, int], object]] = {
    "list": lambda d, v, depth: d.items(v, depth),
    "tuple": lambda d, v, depth: tuple(d.items(v, depth)),
    "set": lambda d, v, depth: set(d.keys(v, depth)),
    "frozenset": lambda d, v, depth: frozenset(d.keys(v, depth)),
    "deque": lambda d, v, depth: collections.deque(d.items(v, depth)),
    "dict": lambda d, v, depth: dict(d.pairs(v, depth)),
    "ordereddict": lambda d, v, depth: collections.OrderedDict(d.pairs(v, depth)),
    "counter": lambda d, v, depth: collections.Counter(dict(d.pairs(v, depth))),
    # The worker's default factory is code; the copy keeps the contents only.
    "defaultdict": lambda d, v, depth: collections.defaultdict(None, d.pairs(v, depth)),
    "bytes": lambda d, v, depth: _b64(v),
    "bytearray": lambda d, v, depth: bytearray(_b64(v)),
    "float": lambda d, v, depth: d.number({"float": v}),
    "bigint": lambda d, v, depth: d.number({"bigint": v}),
    "complex": lambda d, v, depth: complex(d.number(v[0]), d.number(v[1])),
    "range": lambda d, v, depth: range(d.number(v[0]), d.number(v[1]), d.number(v[2])),
    "datetime": lambda d, v, depth: datetime.datetime.fromisoformat(_text(v)),
    "date": lambda d, v, depth: datetime.date.fromisoformat(_text(v)),
    "time": lambda d, v, depth: datetime.time.fromisoformat(_text(v)),
    "timedelta": lambda d, v, depth: datetime.timedelta(
        days=d.number(v[0]), seconds=d.number(v[1]), microseconds=d.number(v[2])
    ),  # fmt: skip
    "decimal": _decimal,
    "fraction": _fraction,
    "ndarray": _ndarray,
    "pil_image": _pil_image,
    "npscalar": _npscalar,
    # Resolved by the supervisor's connection: proxies, and its own callables handed back.
    "handle": lambda d, v, depth: d.remote("handle", v),
    "container": lambda d, v, depth: d.remote("container", v),
    "callback": lambda d, v, depth: d.remote("callback", v),
}


def report(info) -> dict:
    """A worker's exception report reduced to short fields of exact types (never copied as sent).

    The record is kept to what the supervisor reads: names, message, errno, traceback (truncated
    strings) and the encoded ``args`` (decoded later with :func:`decode`); anything else, a nested
    structure included, is dropped, so nothing of the worker's making reaches a verdict unbounded.
    """
    if type(info) is not dict:
        return {"type": "?", "builtin": "", "message": "malformed exception report", "errno": None}
    short = lambda key, limit: info[key][:limit] if type(info.get(key)) is str else ""  # noqa: E731
    code = info.get("errno")
    out = {
        "type": short("type", 200) or "?",
        "builtin": short("builtin", 100),
        "message": short("message", 2000),
        "errno": code if type(code) is int and abs(code) < 1 << 16 else None,
        "traceback": short("traceback", 4000),
    }
    if "args" in info:
        out["args"] = info["args"]
    return out
