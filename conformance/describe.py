"""Spec values for a person: how an observed value differs from the spec's.

A difference is told by its parts when the values are large: the elements
only one side of a set has, the fields of a record that differ, the indices
of a sequence. Records print by the spec's own ``repr`` (``AddReq(c0 b2 e0
lac=-1)``), everything else as compact JSON.
"""

from __future__ import annotations

from typing import Any

from ledgerspec.spec.codecs import Codec, RecordCodec, SeqCodec, SetCodec, TupleCodec, canonical_bytes

__all__ = ["describe_difference", "differences", "show"]


def show(codec: Codec, value: Any) -> str:
    """A spec value for a person: records by the spec's own repr, the rest as compact JSON."""
    if isinstance(codec, RecordCodec):
        return repr(value)
    if isinstance(codec, SeqCodec | SetCodec) and isinstance(codec.element, RecordCodec):
        items = sorted(value, key=repr) if isinstance(codec, SetCodec) else value
        return "[" + ", ".join(map(repr, items)) + "]"
    text = canonical_bytes(codec, value).decode()
    return text if len(text) <= 160 else text[:157] + "..."


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
    if observed == expected:
        return []
    if isinstance(codec, SetCodec):
        element = codec.element
        extra = sorted(show(element, v) for v in observed - expected)
        missing = sorted(show(element, v) for v in expected - observed)
        out = []
        if extra:
            out.append(f"{path} has {', '.join(extra)} only in the observation")
        if missing:
            out.append(f"{path} has {', '.join(missing)} only in the spec")
        return out
    if isinstance(codec, SeqCodec | TupleCodec) and len(observed) == len(expected):
        elements = codec.elements if isinstance(codec, TupleCodec) else (codec.element,) * len(observed)
        out = []
        for i, (c, o, x) in enumerate(zip(elements, observed, expected, strict=True)):
            out += differences(c, o, x, f"{path}[{i}]")
        return out
    if isinstance(codec, RecordCodec):
        out = []
        for field, c in codec.fields.items():
            out += differences(c, getattr(observed, field), getattr(expected, field), f"{path}.{field}")
        return out
    return [f"{path}: observed {show(codec, observed)}, spec {show(codec, expected)}"]
