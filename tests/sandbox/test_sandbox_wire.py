"""The worker -> supervisor codec: plain data round-trips, everything else is a handle, nothing is executed."""

import collections
import datetime
import decimal
import fractions
import json
import math
import os

import numpy as np
import pytest

from lade_bench.sandbox.runtime import rebuild, wire
from lade_bench.sandbox.runtime.remote import RemoteError, rebuild_exception


class Kept:
    def __init__(self):
        self.objects = []

    def __call__(self, obj):
        self.objects.append(obj)
        return len(self.objects)


def roundtrip(value, keep=None):
    encoded = json.loads(wire.dumps({"ok": wire.encode(value, keep or Kept())}))["ok"]
    return rebuild.decode(encoded, lambda tag, payload: (tag, payload))


@pytest.mark.parametrize(
    "value",
    [
        None, True, 3, -7, 2**5000, 1.5, "text", "\ud800", b"\x00\xff", bytearray(b"ab"), 1 + 2j,
        [1, [2, (3, "x")]], (1, 2), {1, 2}, frozenset({3}), {"a": 1, (1, 2): [3]}, {1.5: None},
        collections.OrderedDict(b=1, a=2), collections.Counter("hello"), collections.deque([1, 2]), range(1, 9, 2),
        datetime.datetime(2024, 1, 2, 3, 4, 5, 6), datetime.date(2024, 1, 2), datetime.time(1, 2),
        datetime.timedelta(days=1, seconds=2, microseconds=3), decimal.Decimal("1.10"), fractions.Fraction(1, 3),
    ],
)  # fmt: skip
def test_plain_data_round_trips_exactly(value):
    back = roundtrip(value)
    assert back == value and type(back) is type(value)


def test_special_floats_numpy_and_defaultdict():
    assert math.isnan(roundtrip(float("nan"))) and roundtrip(float("-inf")) == float("-inf")
    array = np.arange(6, dtype=np.int32).reshape(2, 3)
    back = roundtrip(array)
    # Rebuilt with 64-bit dtypes, so comparisons with Python numbers never round them to a narrower type.
    assert back.dtype == np.int64 and back.shape == (2, 3) and (back == array).all()
    scalar = roundtrip(np.float32(0.5))
    assert type(scalar) is float and scalar == 0.5  # a numpy scalar arrives as the builtin number it holds
    assert roundtrip(collections.defaultdict(list, a=[1])) == {"a": [1]}


def test_other_objects_become_handles_even_inside_containers():
    class Node:
        pass

    kept = Kept()
    node = Node()
    back = roundtrip([1, node, {"k": node}], kept)
    assert back[0] == 1 and back[1] == (
        "handle",
        [1, "test_other_objects_become_handles_even_inside_containers.<locals>.Node"],
    )
    assert kept.objects == [node, node]
    # Subclasses of plain types could override __eq__: they are not copied as data.
    assert roundtrip(type("MyList", (list,), {})([1]))[0] == "handle"
    cyclic = [1]
    cyclic.append(cyclic)
    assert roundtrip(cyclic)[1][0] == "handle"
    assert roundtrip(datetime.datetime.now(datetime.timezone.utc))[0] == "handle"


def test_shared_mutable_containers_and_callbacks():
    kept = Kept()
    assert wire.encode([1], kept, share_mutable=True) == {"container": [1, "list"]}
    assert wire.encode((1,), kept, share_mutable=True) == {"tuple": [1]}

    class Callback:
        _lade_callback_type = True
        number = 4

    assert wire.encode([Callback()], kept) == {"list": [{"callback": 4}]}


@pytest.mark.parametrize(
    "encoded",
    [
        [1, 2],  # bare JSON arrays are not a value
        {"list": [1], "tuple": [2]},
        {"pickle": "gASVAAAAAAAAAAB9lC4="},
        {"ndarray": ["|O", [1], {"list": [1]}]},  # object arrays would hold arbitrary objects
        {"npscalar": ["|O", 1]},
        {"pil_image": ["P", [1, 1], ""]},
        {"dict": [[1]]},
        {"dict": [[{"list": [1]}, 2]]},  # unhashable key
        {"complex": ["1", 0]},
        {"float": "1e309"},
    ],
)
def test_malformed_or_unsafe_values_are_refused(encoded):
    with pytest.raises(wire.ProtocolError):
        rebuild.decode(encoded, lambda tag, payload: None)


def test_message_framing_limits():
    read, write = os.pipe()
    try:
        wire.send(write, b'{"ok": 1}')
        assert wire.loads(wire.recv(read)) == {"ok": 1}
        os.write(write, (wire.MAX_MESSAGE_BYTES + 1).to_bytes(4, "big"))
        with pytest.raises(wire.ProtocolError, match="exceeds"):
            wire.recv(read)
        for bad in (b"[1]", b'{"a": NaN}', b"\xff"):
            with pytest.raises(wire.ProtocolError):
                wire.loads(bad)
    finally:
        os.close(read)
        os.close(write)
    with pytest.raises(wire.ChannelClosed):
        closed_read, closed_write = os.pipe()
        os.close(closed_write)
        try:
            wire.recv(closed_read)
        finally:
            os.close(closed_read)


def test_worker_exceptions_are_rebuilt_as_builtins_or_remote_errors():
    exc = rebuild_exception({"type": "KeyError", "builtin": "KeyError", "message": "'a'", "args": {"tuple": ["a"]}})
    assert type(exc) is KeyError and exc.args == ("a",)
    exc = rebuild_exception({"type": "PermissionError", "builtin": "PermissionError", "message": "no",
                             "args": {"tuple": [13, "Permission denied"]}, "errno": 13})  # fmt: skip
    assert isinstance(exc, PermissionError) and exc.errno == 13 and exc._lade_remote["errno"] == 13
    # A candidate's own subclass of ValueError is still caught by `except ValueError` in the tests.
    assert type(rebuild_exception({"type": "BadInput", "builtin": "ValueError", "message": "x"})) is ValueError
    # Exceptions that would stop the test run are not replayed as such.
    for name in ("SystemExit", "KeyboardInterrupt", "NoSuchBuiltin"):
        assert type(rebuild_exception({"type": name, "builtin": name, "message": "bye"})) is RemoteError
    assert wire.classify_report({"builtin": "OSError", "errno": 30}) == "violation"
    assert wire.classify_report({"builtin": "FileNotFoundError", "errno": 2}) == "failed"
    assert wire.classify_report({"builtin": "MemoryError"}) == "memory"


def test_decoding_is_bounded_in_depth_size_and_time():
    import time

    deep: object = 1
    for _ in range(rebuild.MAX_DEPTH + 5):
        deep = {"list": [deep]}
    colliding = {"set": [k * (2**61 - 1) for k in range(1, 100_000)]}
    too_many = {"list": [0] * (rebuild.MAX_NODES + 1)}
    colliding_keys = {"dict": [[k * (2**61 - 1), 0] for k in range(1, 99)]}
    huge = ({"bigint": "f" * 300_000}, {"decimal": "1e999999999"}, {"fraction": [{"bigint": "f" * 30_000}, 3]})
    for encoded in (deep, colliding, colliding_keys, too_many, *huge):
        started = time.monotonic()
        with pytest.raises(wire.ProtocolError):
            rebuild.decode(encoded, lambda tag, payload: None)
        assert time.monotonic() - started < 2, str(encoded)[:80]
    assert wire.MAX_MESSAGE_BYTES <= 16 * 2**20  # a 60 MB reply is refused before it is read


def test_only_exact_builtin_numbers_cross_from_numpy():
    # float16 infinity equals 123456.0 in numpy; as the builtin inf it equals nothing finite.
    for value in (np.float16("inf"), np.float32("inf")):
        back = roundtrip(value)
        assert type(back) is float and back != 123456.0 and back == float("inf")
    array = roundtrip(np.array([np.inf, 1.5], dtype=np.float16))
    assert array.dtype == np.float64 and not (array == 123456.0).any()
    assert type(roundtrip(np.int8(-3))) is int and type(roundtrip(np.bool_(True))) is bool
    with pytest.raises(wire.ProtocolError):  # a forged scalar whose value does not fit its kind
        rebuild.decode({"npscalar": ["<f2", "inf"]}, lambda tag, payload: None)


def test_exception_reports_reach_verdicts_as_short_fields_only():
    deep: object = "x"
    for _ in range(990):
        deep = [deep]
    info = rebuild.report({"type": "E", "builtin": "ValueError", "message": deep, "errno": 10**30, "extra": deep})
    assert info == {"type": "E", "builtin": "ValueError", "message": "", "errno": None, "traceback": ""}
