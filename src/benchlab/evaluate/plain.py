"""Plain data across the sandbox's boundary: a tagged JSON of our own, never pickle.

A value is one JSON array ``[tag, payload]``. The tags name the exact built-in
(and standard-library) types that cross: None, bool, int, float, complex, str,
bytes, bytearray, list, tuple, set, frozenset, dict, range, and the
``collections`` and ``fractions``/``decimal`` types tests compare with.
Anything else is ``["x", why]`` (not plain data) and a raised exception is
``["e", its class name]``; neither is ever equal to anything on the trusted side.

``decode`` is the trusted side's: it rebuilds exact built-ins from JSON that a
hostile program may have written, checking every tag and shape, with bounds on
depth and size. Whatever arrives, the result holds no object with methods of
the sender's: comparing it runs only Python's own code.

This module is also the sandbox's: its source is put, as is, into the
programs the sandbox runs (``SOURCE``), so it imports nothing but the
standard library and defines only functions.
"""

from __future__ import annotations

import collections
import decimal
import fractions
import inspect
from typing import Any

MAX_DEPTH = 100
MAX_ITEMS = 1_000_000
# Items taken from an iterator an answer returns (a generator, map, zip...).
MAX_ITER = 100_000


class PlainDataError(ValueError):
    """What arrived is not a value of the tagged JSON."""


class Failed:
    """A value that is not one: the call raised, or returned something that is not plain data.

    ``opaque``: the call returned, with a value that does not cross (``["x", why]``); a test
    that only runs the call (``candidate(x)`` as a statement) passes on it.
    """

    __slots__ = ("opaque", "why")

    def __init__(self, why: str, opaque: bool = False) -> None:
        self.why = why
        self.opaque = opaque

    def __repr__(self) -> str:
        return f"Failed({self.why!r})"


def encode(value: Any, depth: int = 0) -> list:
    """The tagged JSON of ``value``; ``["x", why]`` where it is not plain data.

    Tuple subclasses (a namedtuple) cross as tuples, ``defaultdict`` as a dict
    and an iterator as the tuple of its items (``"it"``): that is how tests
    compare them. Other subclasses of built-ins do not cross: their own
    comparison is not Python's.
    """
    if depth > 100:
        return ["x", "a value nested deeper than 100 levels"]
    t = type(value)
    if value is None:
        return ["n", None]
    if t is bool:
        return ["b", value]
    if t is int:
        return ["i", hex(value)]
    if t is float:
        return ["f", value.hex()]
    if t is complex:
        return ["c", [value.real.hex(), value.imag.hex()]]
    if t is str:
        return ["s", value]
    if t is bytes or t is bytearray:
        return ["y" if t is bytes else "Y", value.hex()]
    if t is range:
        return ["r", [hex(value.start), hex(value.stop), hex(value.step)]]
    if t is fractions.Fraction:
        return ["Q", [hex(value.numerator), hex(value.denominator)]]
    if t is decimal.Decimal:
        return ["D", str(value)]
    tags: dict[type, str] = {list: "l", tuple: "t", set: "S", frozenset: "F", collections.deque: "q"}
    if t in tags or (isinstance(value, tuple) and t.__mro__[1] is tuple and hasattr(t, "_fields")):
        items = []
        for item in (tuple.__iter__(value) if isinstance(value, tuple) else iter(value)):
            items.append(encode(item, depth + 1))
        return [tags.get(t, "t"), items]
    maps: dict[type, str] = {dict: "d", collections.defaultdict: "d", collections.OrderedDict: "O",
                             collections.Counter: "C"}
    if t in maps:
        return [maps[t], [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)]]
    if t is type({}.items()):
        return ["I", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value]]
    views = {type({}.keys()): "K", type({}.values()): "V"}
    if t in views:
        return [views[t], [encode(item, depth + 1) for item in value]]
    if hasattr(t, "__next__") and hasattr(t, "__iter__") and t.__module__ in ("builtins", "itertools"):
        items = []
        for item in value:
            if len(items) >= 100000:
                return ["x", "an iterator of more than 100000 items"]
            items.append(encode(item, depth + 1))
        return ["it", items]
    if t.__module__ == "numpy" and getattr(value, "dtype", None) is not None and value.dtype.kind in "biufc":
        if t.__name__ == "ndarray":
            return ["np", [value.dtype.str, list(value.shape), encode(value.tolist(), depth + 1)]]
        if getattr(value, "ndim", None) == 0:
            return ["ns", [value.dtype.str, encode(value.item(), depth + 1)]]
    return ["x", "returned a " + str(getattr(t, "__qualname__", "?")) + ", not plain data"]


def _int(text: object) -> int:
    # Hexadecimal: Python's limit on decimal digits does not apply to a power-of-two base.
    if type(text) is not str or not text or len(text) > 200_000:
        raise PlainDataError("an integer must be a hexadecimal string")
    try:
        return int(text, 16)
    except ValueError:
        raise PlainDataError(f"not a hexadecimal integer: {text[:40]!r}") from None


def _float(text: object) -> float:
    if type(text) is not str or len(text) > 64:
        raise PlainDataError("a float must be a hexadecimal string")
    try:
        return float.fromhex(text)
    except (ValueError, OverflowError):
        raise PlainDataError(f"not a hexadecimal float: {text[:40]!r}") from None


def _numpy(tag: str, payload: list, depth: int, count: list) -> Any:
    """A numpy array or scalar of a numeric dtype, rebuilt by numpy from plain numbers."""
    import re

    import numpy

    if type(payload[0]) is not str or not re.fullmatch(r"[<>|=]?[biufc][0-9]{1,2}", payload[0]):
        raise PlainDataError("a numpy value of a dtype that is not numeric")
    dtype = numpy.dtype(payload[0])
    if tag == "ns":
        item = decode(payload[1], depth + 1, count)
        return item if isinstance(item, Failed) else dtype.type(item)
    shape = payload[1]
    if type(shape) is not list or len(shape) > 32 or any(type(n) is not int or n < 0 for n in shape):
        raise PlainDataError("a numpy shape must be a list of sizes")
    data = decode(payload[2], depth + 1, count)
    if isinstance(data, Failed):
        return data
    try:
        array = numpy.array(data, dtype=dtype)
        return array.reshape(shape)
    except (ValueError, TypeError, OverflowError):
        raise PlainDataError("a numpy array whose data does not fit its shape") from None


def decode(data: object, _depth: int = 0, _count: list | None = None) -> Any:
    """The value that the tagged JSON ``data`` (already parsed JSON) stands for.

    Raises PlainDataError for anything that is not exactly a value of the format.
    ``["x", ...]`` and ``["e", ...]`` decode to ``Failed``.
    """
    count = _count if _count is not None else [0]
    count[0] += 1
    if count[0] > MAX_ITEMS or _depth > MAX_DEPTH + 1:
        raise PlainDataError("a value too large or nested too deep")
    if type(data) is not list or len(data) != 2 or type(data[0]) is not str:
        raise PlainDataError("a value must be a [tag, payload] pair")
    tag, payload = data
    if tag == "n" and payload is None:
        return None
    if tag == "b" and type(payload) is bool:
        return payload
    if tag == "i":
        return _int(payload)
    if tag == "f":
        return _float(payload)
    if tag == "c" and type(payload) is list and len(payload) == 2:
        return complex(_float(payload[0]), _float(payload[1]))
    if tag == "s" and type(payload) is str:
        return payload
    if tag in ("y", "Y") and type(payload) is str:
        try:
            raw = bytes.fromhex(payload)
        except ValueError:
            raise PlainDataError("bytes must be hexadecimal") from None
        return raw if tag == "y" else bytearray(raw)
    if tag == "r" and type(payload) is list and len(payload) == 3:
        start, stop, step = (_int(p) for p in payload)
        if step == 0:
            raise PlainDataError("a range with step 0")
        return range(start, stop, step)
    if tag == "Q" and type(payload) is list and len(payload) == 2:
        num, den = _int(payload[0]), _int(payload[1])
        if den <= 0:
            raise PlainDataError("a fraction's denominator must be positive")
        return fractions.Fraction(num, den)
    if tag == "D" and type(payload) is str and len(payload) <= 1000:
        try:
            number = decimal.Decimal(payload)
        except decimal.InvalidOperation:
            raise PlainDataError("not a decimal") from None
        # A huge exponent would make int() of it a huge integer on the trusted side.
        if number.is_finite() and abs(number.adjusted()) > 100_000:
            raise PlainDataError("a decimal with an exponent too large")
        return number
    if tag in ("np", "ns") and type(payload) is list and len(payload) == (3 if tag == "np" else 2):
        return _numpy(tag, payload, _depth, count)
    if tag in ("x", "e") and type(payload) is str:
        return Failed(payload[:300], opaque=tag == "x")
    if type(payload) is not list:
        raise PlainDataError(f"unknown tag or payload: {tag[:10]!r}")
    if tag in ("l", "t", "S", "F", "q", "K", "V", "it"):
        items = [decode(item, _depth + 1, count) for item in payload]
        if any(isinstance(item, Failed) for item in items):
            return next(item for item in items if isinstance(item, Failed))
        try:
            if tag == "l":
                return items
            if tag == "t":
                return tuple(items)
            if tag == "S":
                return set(items)
            if tag == "F":
                return frozenset(items)
            if tag == "q":
                return collections.deque(items)
            if tag == "K":
                return dict.fromkeys(items).keys()
            if tag == "V":
                return dict(enumerate(items)).values()
            return iter(items)
        except TypeError:
            raise PlainDataError("an unhashable member of a set") from None
    if tag in ("d", "O", "C", "I"):
        pairs = []
        for pair in payload:
            if type(pair) is not list or len(pair) != 2:
                raise PlainDataError("a mapping's items must be pairs")
            key, value = decode(pair[0], _depth + 1, count), decode(pair[1], _depth + 1, count)
            for part in (key, value):
                if isinstance(part, Failed):
                    return part
            pairs.append((key, value))
        try:
            if tag == "O":
                return collections.OrderedDict(pairs)
            if tag == "C":
                return collections.Counter(dict(pairs))
            mapping = dict(pairs)
        except TypeError:
            raise PlainDataError("an unhashable key") from None
        return mapping.items() if tag == "I" else mapping
    raise PlainDataError(f"unknown tag: {tag[:10]!r}")


def _source() -> str:
    # What the sandboxed programs need of this module: its functions, without typing's imports
    # (annotations stay unevaluated there too).
    parts = ["from __future__ import annotations", "import collections, decimal, fractions",
             f"MAX_DEPTH = {MAX_DEPTH}", f"MAX_ITEMS = {MAX_ITEMS}", inspect.getsource(PlainDataError)]
    parts += [inspect.getsource(obj) for obj in (Failed, encode, _int, _float, _numpy, decode)]
    return "\n\n".join(parts)


SOURCE = _source()
