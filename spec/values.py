"""TLA+ values as plain, hashable Python values: the common ground of both engines.

A Python spec state and a state TLC prints are compared after both are turned
into this normal form, so the mapping must follow TLA+'s own notion of
equality, not TLC's choice of printing:

========================  ===========================================
TLA+ value                Python normal form
========================  ===========================================
integer, boolean, string  ``int``, ``bool``, ``str``
model value               ``str`` (its name)
set                       ``frozenset``
sequence ``<<a, b>>``     ``tuple``; also any function whose domain is
                          ``1..n`` (in TLA+ that *is* a sequence)
record, other function    :class:`FnValue` (a frozen mapping)
========================  ===========================================

A record ``[a |-> 1]`` and the function ``"a" :> 1`` are the same value in
TLA+, and both become ``FnValue({"a": 1})``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs

__all__ = ["FnValue", "format_value", "normalize", "to_json"]


def _sort_key(value: object) -> tuple[str, str]:
    return (type(value).__name__, repr(value))


@attrs.frozen(cache_hash=True)
class FnValue(Mapping[Any, Any]):
    """A TLA+ function (or record) with a domain that is not ``1..n``."""

    items_: tuple[tuple[Any, Any], ...] = attrs.field(alias="items_")

    @classmethod
    def of(cls, mapping: Mapping[Any, Any]) -> FnValue:
        pairs = sorted(mapping.items(), key=lambda kv: _sort_key(kv[0]))
        return cls(items_=tuple(pairs))

    def __getitem__(self, key: Any) -> Any:
        for k, v in self.items_:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[Any]:
        return (k for k, _ in self.items_)

    def __len__(self) -> int:
        return len(self.items_)

    def __repr__(self) -> str:
        return format_value(self)


def normalize(value: Any) -> Any:
    """Bring a Python value built from TLA+-like parts into the normal form.

    Lists and tuples become tuples, sets become frozensets, mappings become
    :class:`FnValue` unless their keys are exactly ``1..n`` (then a tuple).
    attrs instances become records of their fields.
    """
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, FnValue):
        return _function(dict(value.items_))
    if isinstance(value, tuple | list):
        return tuple(normalize(v) for v in value)
    if isinstance(value, frozenset | set):
        return frozenset(normalize(v) for v in value)
    if isinstance(value, Mapping):
        return _function({normalize(k): v for k, v in value.items()})
    if attrs.has(type(value)):
        return FnValue.of({f.name: normalize(getattr(value, f.name)) for f in attrs.fields(type(value))})
    raise TypeError(f"no TLA+ counterpart for {type(value).__name__}: {value!r}")


def _function(mapping: dict[Any, Any]) -> Any:
    values = {k: normalize(v) for k, v in mapping.items()}
    n = len(values)
    if all(isinstance(k, int) and not isinstance(k, bool) for k in values) and set(values) == set(range(1, n + 1)):
        return tuple(values[i] for i in range(1, n + 1))
    return FnValue.of(values)


def format_value(value: Any) -> str:
    """Print a normal-form value in TLA+ syntax (records as ``[f |-> v]``)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple):
        return "<<" + ", ".join(format_value(v) for v in value) + ">>"
    if isinstance(value, frozenset):
        return "{" + ", ".join(sorted(format_value(v) for v in value)) + "}"
    if isinstance(value, FnValue):
        if value.items_ and all(isinstance(k, str) and k.isidentifier() for k, _ in value.items_):
            return "[" + ", ".join(f"{k} |-> {format_value(v)}" for k, v in value.items_) + "]"
        return "(" + " @@ ".join(f"{format_value(k)} :> {format_value(v)}" for k, v in value.items_) + ")"
    return repr(value)


def to_json(value: Any) -> Any:
    """A normal-form value as JSON data: sets become sorted lists, records objects."""
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    if isinstance(value, frozenset):
        return sorted((to_json(v) for v in value), key=lambda v: (str(type(v)), repr(v)))
    if isinstance(value, FnValue):
        if all(isinstance(k, str) for k, _ in value.items_):
            return {k: to_json(v) for k, v in value.items_}
        return [[to_json(k), to_json(v)] for k, v in value.items_]
    raise TypeError(f"not a normal-form TLA+ value: {value!r}")
