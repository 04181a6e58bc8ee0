"""Spec values for a person: how an observed value differs from the spec's.

A difference is told by its parts when the values are large: the elements
only one side of a set has, the fields of a record that differ, the indices
of a sequence. Records print by the spec's own ``repr`` (``AddReq(c0 b2 e0
lac=-1)``), everything else as compact JSON.
"""

from __future__ import annotations

from typing import Any

import attrs
from ledgerspec.spec.codecs import Codec, RecordCodec, SeqCodec, SetCodec, TupleCodec, canonical_bytes

__all__ = ["Change", "changes", "describe_difference", "differences", "show"]


@attrs.frozen
class Change:
    """A part of a value that differs between an old and a new value of one type, named by its path."""

    path: str  # rec[0].phase
    old: str | None = None  # the old and new part, shown (None for a set: see added and removed)
    new: str | None = None
    added: tuple[str, ...] = ()  # elements of a set only in the new value
    removed: tuple[str, ...] = ()  # elements of a set only in the old value


def show(codec: Codec, value: Any, limit: int | None = 160) -> str:
    """A spec value for a person: records by the spec's own repr, the rest as compact JSON, cut at
    ``limit`` characters."""
    if isinstance(codec, RecordCodec):
        return repr(value)
    if isinstance(codec, SeqCodec | SetCodec) and isinstance(codec.element, RecordCodec):
        items = sorted(value, key=repr) if isinstance(codec, SetCodec) else value
        return "[" + ", ".join(map(repr, items)) + "]"
    text = canonical_bytes(codec, value).decode()
    return text if limit is None or len(text) <= limit else text[: limit - 3] + "..."


def describe_difference(name: str, codec: Codec, observed: Any, expected: Any) -> str:
    """Observed versus spec value, and the parts that differ when the values are large."""
    shown_observed, shown_expected = show(codec, observed), show(codec, expected)
    details = differences(codec, observed, expected, name)
    if len(shown_observed) + len(shown_expected) <= 160 or not details:
        text = f"observed {name} = {shown_observed}, the spec has {shown_expected}"
        if details and not (len(details) == 1 and details[0].startswith(f"{name}:")):
            text += " (" + "; ".join(details[:6]) + (" ..." if len(details) > 6 else "") + ")"
        return text
    return f"observed {name} differs from the spec: " + "; ".join(details[:6]) + (" ..." if len(details) > 6 else "")


def differences(codec: Codec, observed: Any, expected: Any, path: str) -> list[str]:
    """The parts of two values of one type that differ, each named by its path (``rec[0].phase``)."""
    out = []
    for c in changes(codec, expected, observed, path):
        if c.old is not None or c.new is not None:
            out.append(f"{c.path}: observed {c.new}, spec {c.old}")
            continue
        if c.added:
            out.append(f"{c.path} has {', '.join(c.added)} only in the observation")
        if c.removed:
            out.append(f"{c.path} has {', '.join(c.removed)} only in the spec")
    return out


def changes(codec: Codec, old: Any, new: Any, path: str) -> list[Change]:
    """What differs from ``old`` to ``new``: elements added to and removed from sets, fields of records and
    elements of sequences of one length by their paths, and any other value whole."""
    if old == new:
        return []
    if isinstance(codec, SetCodec):
        element = codec.element
        added = tuple(sorted(show(element, v) for v in new - old))
        removed = tuple(sorted(show(element, v) for v in old - new))
        return [Change(path, added=added, removed=removed)]
    if isinstance(codec, SeqCodec | TupleCodec) and len(old) == len(new):
        elements = codec.elements if isinstance(codec, TupleCodec) else (codec.element,) * len(old)
        out = []
        for i, (c, o, n) in enumerate(zip(elements, old, new, strict=True)):
            out += changes(c, o, n, f"{path}[{i}]")
        return out
    if isinstance(codec, RecordCodec):
        out = []
        for field, c in codec.fields.items():
            out += changes(c, getattr(old, field), getattr(new, field), f"{path}.{field}")
        return out
    return [Change(path, show(codec, old), show(codec, new))]
