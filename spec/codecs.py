"""Spec values as JSON, for traces: one canonical encoding per value, and a strict decoder per type.

A trace event carries spec values (action parameters, observed variables) as
plain JSON. The codec of a value is derived from its Python type hint, so a
new spec gets its codecs without writing any:

=============================  ==============================================
type hint                      JSON
=============================  ==============================================
``int``, ``bool``, ``str``     number (a 64-bit integer), ``true``/``false``,
                               string; ``1`` is not ``true`` and ``1.0`` is
                               not ``1``
``tuple[X, ...]``              array (a TLA+ sequence)
``tuple[X, Y]``                array of that length (a TLA+ tuple)
``frozenset[X]``               array in any order (a TLA+ set); the canonical
                               order is ascending
attrs class (a record)         object with one key per field
=============================  ==============================================

Three operations per codec:

- ``encode(value)``: the canonical JSON data (sets in ascending order, so
  that equal values encode to equal bytes);
- ``decode(data, path)``: the value, or :class:`CodecError` naming the path
  of the bad part (``params.m.entry``) and what was expected;
- ``matches(data, value)``: does JSON ``data`` describe ``value``? A record
  in ``data`` may leave fields out when the caller allows partial data
  (parameters an observer did not see); sets compare in any order.

What is left out: TLA+ functions with non-string domains and model values
other than strings; a spec that needs them gives its trace mapping a codec
of its own (:class:`Codec` is the interface).
"""

from __future__ import annotations

import operator
import types
import typing
from collections.abc import Callable
from typing import Any

import attrs
import orjson

__all__ = [
    "BOOL",
    "INT",
    "STR",
    "Codec",
    "CodecError",
    "RecordCodec",
    "SeqCodec",
    "SetCodec",
    "TupleCodec",
    "canonical_bytes",
    "codec_for",
    "short_json",
]

INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _identity(value: Any) -> Any:
    return value


class CodecError(ValueError):
    """JSON data that does not encode a value of the expected type; the message names where."""


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "a boolean"
    if isinstance(data, int):
        return "an integer"
    if isinstance(data, float):
        return "a number with a fraction or exponent"
    if isinstance(data, str):
        return "a string"
    if isinstance(data, list):
        return "an array"
    if isinstance(data, dict):
        return "an object"
    return type(data).__name__


def short_json(data: Any, limit: int = 60) -> str:
    """``data`` as JSON for an error message, cut to ``limit`` characters."""
    try:
        text = orjson.dumps(data).decode() if not isinstance(data, float) else repr(data)
    except TypeError:  # an integer beyond 64 bits
        text = repr(data)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Codec:
    """How values of one type are written in JSON. Subclasses implement the three operations."""

    name: str = "value"

    def encode(self, value: Any) -> Any:
        raise NotImplementedError

    def decode(self, data: Any, path: str) -> Any:
        raise NotImplementedError

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        """Raise :class:`CodecError` if ``data`` cannot describe a value; return whether it is complete."""
        raise NotImplementedError

    def matches(self, data: Any, value: Any) -> bool:
        """``data`` (already checked, possibly partial) describes ``value``."""
        raise NotImplementedError

    def sort_key(self, data: Any) -> Any:
        """Order of encoded values inside a set: ascending, so emitters can produce it naturally."""
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)

    def value_key(self) -> Callable[[Any], Any] | None:
        """A key that orders values as :meth:`sort_key` orders their encodings, when one is cheap
        (Python's own order of ints, strings, tuples of them, flat records); else ``None``."""
        return None


class _ScalarCodec(Codec):
    """A JSON scalar that is its own encoding: only ``check`` differs between integers, booleans, strings."""

    kind: type  # the exact JSON type (``type(data) is kind``: 1 is not true)

    def encode(self, value: Any) -> Any:
        return value

    def decode(self, data: Any, path: str) -> Any:
        self.check(data, path, partial=False)
        return data

    def matches(self, data: Any, value: Any) -> bool:
        return type(data) is self.kind and data == value

    def sort_key(self, data: Any) -> Any:
        return data

    def value_key(self) -> Callable[[Any], Any] | None:
        return _identity


class _IntCodec(_ScalarCodec):
    name = "integer"
    kind = int

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        if type(data) is int and INT_MIN <= data <= INT_MAX:
            return True
        if type(data) is int or (type(data) is float and abs(data) >= 2**63):
            raise CodecError(f"{path}: integer {short_json(data)} is out of range (64-bit signed integers only)")
        raise CodecError(f"{path}: expected an integer, got {_kind(data)} {short_json(data)}")


class _BoolCodec(_ScalarCodec):
    name = "boolean"
    kind = bool

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        if type(data) is not bool:
            raise CodecError(f"{path}: expected true or false, got {_kind(data)} {short_json(data)}")
        return True


class _StrCodec(_ScalarCodec):
    name = "string"
    kind = str

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        if type(data) is not str:
            raise CodecError(f"{path}: expected a string, got {_kind(data)} {short_json(data)}")
        return True


INT: Codec = _IntCodec()
BOOL: Codec = _BoolCodec()
STR: Codec = _StrCodec()


def _array(data: Any, path: str, what: str) -> list[Any]:
    if type(data) is not list:
        raise CodecError(f"{path}: expected an array ({what}), got {_kind(data)} {short_json(data)}")
    return data


class _ArrayOfCodec(Codec):
    """An array whose items all have one codec: a sequence or a set."""

    element: Codec

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        items = _array(data, path, self.name)
        return all([self.element.check(v, f"{path}[{i}]", partial=partial) for i, v in enumerate(items)])


class SeqCodec(_ArrayOfCodec):
    """``tuple[X, ...]``: a TLA+ sequence, an array in order."""

    def __init__(self, element: Codec) -> None:
        self.element = element
        self.name = f"sequence of {element.name}"

    def encode(self, value: Any) -> Any:
        enc = self.element.encode
        return [enc(v) for v in value]

    def decode(self, data: Any, path: str) -> Any:
        dec = self.element.decode
        return tuple(dec(v, f"{path}[{i}]") for i, v in enumerate(_array(data, path, self.name)))

    def matches(self, data: Any, value: Any) -> bool:
        if type(data) is not list or len(data) != len(value):
            return False
        m = self.element.matches
        return all(m(d, v) for d, v in zip(data, value, strict=True))

    def sort_key(self, data: Any) -> Any:
        key = self.element.sort_key
        return tuple(key(d) for d in data)

    def value_key(self) -> Callable[[Any], Any] | None:
        return _identity if self.element.value_key() is _identity else None


class TupleCodec(Codec):
    """``tuple[X, Y]``: a fixed-length tuple, an array of that length."""

    def __init__(self, elements: tuple[Codec, ...]) -> None:
        self.elements = elements
        self.name = "tuple of " + ", ".join(e.name for e in elements)

    def _items(self, data: Any, path: str) -> list[Any]:
        items = _array(data, path, self.name)
        if len(items) != len(self.elements):
            raise CodecError(f"{path}: expected an array of {len(self.elements)} items, got {len(items)}")
        return items

    def encode(self, value: Any) -> Any:
        return [c.encode(v) for c, v in zip(self.elements, value, strict=True)]

    def decode(self, data: Any, path: str) -> Any:
        items = self._items(data, path)
        return tuple(c.decode(v, f"{path}[{i}]") for i, (c, v) in enumerate(zip(self.elements, items, strict=True)))

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        items = self._items(data, path)
        return all(
            [
                c.check(v, f"{path}[{i}]", partial=partial)
                for i, (c, v) in enumerate(zip(self.elements, items, strict=True))
            ]
        )

    def matches(self, data: Any, value: Any) -> bool:
        if type(data) is not list or len(data) != len(value):
            return False
        return all(c.matches(d, v) for c, d, v in zip(self.elements, data, value, strict=True))

    def sort_key(self, data: Any) -> Any:
        return tuple(c.sort_key(d) for c, d in zip(self.elements, data, strict=True))

    def value_key(self) -> Callable[[Any], Any] | None:
        return _identity if all(c.value_key() is _identity for c in self.elements) else None


class SetCodec(_ArrayOfCodec):
    """``frozenset[X]``: a TLA+ set, an array in any order; canonical order ascending."""

    def __init__(self, element: Codec) -> None:
        self.element = element
        self.name = f"set of {element.name}"
        self._value_key = element.value_key()

    def encode(self, value: Any) -> Any:
        enc = self.element.encode
        if self._value_key is not None:
            return [enc(v) for v in sorted(value, key=self._value_key)]
        return sorted((enc(v) for v in value), key=self.element.sort_key)

    def decode(self, data: Any, path: str) -> Any:
        dec = self.element.decode
        return frozenset(dec(v, f"{path}[{i}]") for i, v in enumerate(_array(data, path, self.name)))

    def matches(self, data: Any, value: Any) -> bool:
        if type(data) is not list or len(data) != len(value):
            return False
        # Each item of data must describe a different element: a matching, found by
        # backtracking (a partial record may describe several elements; sets are small).
        m = self.element.matches
        elements = list(value)
        options = [[i for i, v in enumerate(elements) if m(d, v)] for d in data]
        order = sorted(range(len(data)), key=lambda k: len(options[k]))
        used: set[int] = set()

        def assign(k: int) -> bool:
            if k == len(order):
                return True
            for i in options[order[k]]:
                if i not in used:
                    used.add(i)
                    if assign(k + 1):
                        return True
                    used.discard(i)
            return False

        return assign(0)

    def sort_key(self, data: Any) -> Any:
        key = self.element.sort_key
        return tuple(sorted(key(d) for d in data))


class RecordCodec(Codec):
    """An attrs class: a TLA+ record, an object with one key per field."""

    def __init__(self, cls: type, fields: dict[str, Codec]) -> None:
        self.cls = cls
        self.fields = fields
        self.name = f"{cls.__name__} record"

    def _object(self, data: Any, path: str) -> dict[str, Any]:
        if type(data) is not dict:
            raise CodecError(
                f"{path}: expected an object ({self.name} with fields {', '.join(self.fields)}), "
                f"got {_kind(data)} {short_json(data)}"
            )
        unknown = [k for k in data if k not in self.fields]
        if unknown:
            raise CodecError(
                f"{path}: {self.name} has no field {', '.join(map(repr, unknown))}; fields: {', '.join(self.fields)}"
            )
        return data

    def encode(self, value: Any) -> Any:
        return {name: codec.encode(getattr(value, name)) for name, codec in self.fields.items()}

    def decode(self, data: Any, path: str) -> Any:
        obj = self._object(data, path)
        missing = [name for name in self.fields if name not in obj]
        if missing:
            raise CodecError(f"{path}: {self.name} lacks field {', '.join(missing)}")
        return self.cls(**{name: codec.decode(obj[name], f"{path}.{name}") for name, codec in self.fields.items()})

    def check(self, data: Any, path: str, *, partial: bool) -> bool:
        obj = self._object(data, path)
        complete = all([self.fields[k].check(v, f"{path}.{k}", partial=partial) for k, v in obj.items()])
        if len(obj) < len(self.fields):
            if not partial:
                missing = [name for name in self.fields if name not in obj]
                raise CodecError(f"{path}: {self.name} lacks field {', '.join(missing)}")
            return False
        return complete

    def matches(self, data: Any, value: Any) -> bool:
        if type(data) is not dict:
            return False
        fields = self.fields
        for k, d in data.items():
            codec = fields.get(k)
            if codec is None or not codec.matches(d, getattr(value, k)):
                return False
        return True

    def sort_key(self, data: Any) -> Any:
        return tuple(codec.sort_key(data[name]) for name, codec in self.fields.items())

    def value_key(self) -> Callable[[Any], Any] | None:
        if all(c.value_key() is _identity for c in self.fields.values()):
            return operator.attrgetter(*self.fields)
        return None


_RECORDS: dict[type, RecordCodec] = {}


def codec_for(hint: Any) -> Codec:
    """The codec of a type hint (see the module docstring); ``TypeError`` for a type it cannot encode."""
    if hint is int:
        return INT
    if hint is bool:
        return BOOL
    if hint is str:
        return STR
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return SeqCodec(codec_for(args[0]))
        return TupleCodec(tuple(codec_for(a) for a in args))
    if origin is frozenset:
        return SetCodec(codec_for(args[0]))
    if isinstance(hint, type) and attrs.has(hint):
        found = _RECORDS.get(hint)
        if found is None:
            hints = typing.get_type_hints(hint)
            found = _RECORDS[hint] = RecordCodec(hint, {f.name: codec_for(hints[f.name]) for f in attrs.fields(hint)})
        return found
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"no JSON codec for a union type {hint!r}: give the trace mapping a codec of its own")
    raise TypeError(f"no JSON codec for type {hint!r}: give the trace mapping a codec of its own")


def canonical_bytes(codec: Codec, value: Any) -> bytes:
    """The canonical JSON text of a value, as bytes: equal values give equal bytes."""
    return orjson.dumps(codec.encode(value), option=orjson.OPT_SORT_KEYS)


def hints_of(fn: Callable[..., Any]) -> dict[str, Any]:
    """Type hints of a spec function, resolved in its module (specs use postponed annotations)."""
    return typing.get_type_hints(fn)
