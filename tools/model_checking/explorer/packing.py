"""States as compact bytes, for the explorer's frontier: built from the state's type hints.

A frontier of whole Python states costs about a kilobyte a state, and the
frontier of a breadth-first search is a good part of all the states. A
:class:`StatePacker` turns a state into bytes and back, exactly:

- a record (an attrs class) becomes the tuple of its fields, in order;
- sequences, tuples and sets are packed item by item;
- integers, booleans and strings stay as they are;
- the result is written with :mod:`marshal`, Python's own fast format for
  its built-in values. A part whose type holds no record needs no walk: it
  is its own packed form.

Unpacking builds the records again with their classes, so an unpacked state
equals (and hashes as) the one packed. The packer is derived from the same
type hints as the trace codecs (:mod:`.codecs`); a state type it cannot
pack is refused when the packer is built, not halfway through a search.
"""

from __future__ import annotations

import marshal
import operator
import typing
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["StatePacker"]

Convert = Callable[[Any], Any]


def _plain(hint: Any) -> bool:
    """Values of this type are made of ints, bools, strings, tuples and frozensets only."""
    if hint in (int, bool, str):
        return True
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (tuple, frozenset):
        return all(_plain(a) for a in args if a is not Ellipsis)
    return False


def _converters(hint: Any) -> tuple[Convert, Convert] | None:
    """(pack, unpack) for a value of type ``hint``; None when the value is its own packed form."""
    if _plain(hint):
        return None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = _converters(args[0])
        assert item is not None
        pack_item, unpack_item = item
        return (lambda v: tuple(map(pack_item, v))), (lambda v: tuple(map(unpack_item, v)))
    if origin is frozenset:
        item = _converters(args[0])
        assert item is not None
        pack_item, unpack_item = item
        return (lambda v: tuple(map(pack_item, v))), (lambda v: frozenset(map(unpack_item, v)))
    if origin is tuple:
        parts = [_converters(a) for a in args]
        packs = [p[0] if p else _same for p in parts]
        unpacks = [p[1] if p else _same for p in parts]
        return (
            lambda v: tuple(f(x) for f, x in zip(packs, v, strict=True)),
            lambda v: tuple(f(x) for f, x in zip(unpacks, v, strict=True)),
        )
    if isinstance(hint, type) and attrs.has(hint):
        return _record(hint, memo=True)
    raise TypeError(f"cannot pack a value of type {hint!r}: states are made of records, tuples, sets and scalars")


def _same(value: Any) -> Any:
    return value


def _record(cls: type, *, memo: bool = False) -> tuple[Convert, Convert]:
    """(pack, unpack) for a record; with ``memo``, unpacking returns one object per distinct value (the records
    inside a state, such as messages, recur across states: building each once saves most of the work)."""
    pack, build = _record_converters(cls)
    if not memo:
        return pack, build
    built: dict[Any, Any] = {}

    def unpack(data: Any) -> Any:
        found = built.get(data)
        if found is None:
            if len(built) >= _MEMO_LIMIT:
                built.clear()
            found = built[data] = build(data)
        return found

    return pack, unpack


_MEMO_LIMIT = 1 << 16  # records remembered per class; past it, the memo starts again


def _record_converters(cls: type) -> tuple[Convert, Convert]:
    hints = typing.get_type_hints(cls)
    names = [f.name for f in attrs.fields(cls)]
    parts = [_converters(hints[name]) for name in names]
    if all(p is None for p in parts):
        getter = _fields_getter(names)
        return getter, (lambda v: cls(*v))
    packs = [(name, p[0] if p else None) for name, p in zip(names, parts, strict=True)]
    unpacks = [p[1] if p else None for p in parts]

    def pack(value: Any) -> Any:
        return tuple(getattr(value, n) if f is None else f(getattr(value, n)) for n, f in packs)

    def unpack(data: Any) -> Any:
        return cls(*[x if f is None else f(x) for f, x in zip(unpacks, data, strict=True)])

    return pack, unpack


def _fields_getter(names: list[str]) -> Convert:
    """The tuple of a record's fields ``names``, in order."""
    if len(names) == 1:
        name = names[0]
        return lambda v: (getattr(v, name),)
    return operator.attrgetter(*names)


class StatePacker:
    """Packs states of one attrs class into bytes and back (see the module docstring)."""

    def __init__(self, state_type: type) -> None:
        if not (isinstance(state_type, type) and attrs.has(state_type)):
            raise TypeError(f"a spec state must be an attrs class, got {state_type!r}")
        self.state_type = state_type
        self._pack, self._unpack = _record(state_type)

    def pack(self, state: Any) -> bytes:
        return marshal.dumps(self._pack(state))

    def unpack(self, data: bytes) -> Any:
        return self._unpack(marshal.loads(data))
