"""Trace files that hold one trace as one JSON document: ITF traces and TLC's JSON traces.

Such a file is known by its name: ``*.itf.json`` an ITF trace (Apalache,
Quint: :mod:`ledgerspec.conformance.itf`), ``*.tlc.json`` a trace TLC wrote
with ``-dumpTrace json`` (:mod:`ledgerspec.conformance.tlc_json`). The trace
id is the file name. A document that cannot be read, or is not of its
format, is one error naming the file (line 0); an event of it that does not
parse is an error naming the file and the event's index as its line, and
the other events are still read.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import orjson
from ledgerspec.conformance.events import Event, InputError, TraceFormatError, parse_event
from ledgerspec.conformance.itf import ItfError, itf_events
from ledgerspec.conformance.tlc_json import TlcJsonError, tlc_json_events

__all__ = ["DOCUMENT_SUFFIXES", "ITF_SUFFIX", "TLC_JSON_SUFFIX", "is_document", "read_document"]

ITF_SUFFIX = ".itf.json"
TLC_JSON_SUFFIX = ".tlc.json"

_FORMATS: dict[str, tuple[str, Callable[[Any, str, Collection[str] | None], list[dict[str, Any]]]]] = {
    ITF_SUFFIX: ("ITF trace", lambda doc, trace, _actions: itf_events(doc, trace)),
    TLC_JSON_SUFFIX: ("TLC JSON trace", tlc_json_events),
}
DOCUMENT_SUFFIXES = tuple(_FORMATS)


def is_document(path: Path) -> bool:
    """Is the file one trace in one JSON document?"""
    return path.name.endswith(DOCUMENT_SUFFIXES)


def read_document(path: Path, actions: Collection[str] | None = None) -> tuple[str, list[Event], list[InputError]]:
    """The trace of the file: its id (the file name), its events, and what could not be read. ``actions``:
    the action names of the spec the trace is for, when known (see :func:`tlc_json_events`)."""
    trace = path.name
    kind, to_events = next(f for suffix, f in _FORMATS.items() if trace.endswith(suffix))
    try:
        lines = to_events(orjson.loads(path.read_bytes()), trace, actions)
    except (OSError, orjson.JSONDecodeError, ItfError, TlcJsonError) as exc:
        return trace, [], [InputError(str(path), 0, f"not a readable {kind}: {exc}", trace)]
    events, errors = [], []
    for index, line in enumerate(lines):
        try:
            events.append(parse_event(line, str(path), index))
        except TraceFormatError as exc:
            errors.append(exc.error)
    return trace, events, errors
