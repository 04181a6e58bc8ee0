"""Trace events as read: the envelope of one NDJSON line of the trace format (docs/trace-format.md).

The format's version and the builder of its lines are the trace vocabulary's
(:mod:`ledgerspec.spec.vocabulary`), shared with everything that writes traces.
This module knows the envelope only: trace id, process, sequence number,
optional time and vector clock, and that ``type``, ``params`` and
``observed`` are present with the right JSON kinds. Whether the type names
an action and the values fit the spec is the checker's business, through the
spec's trace mapping. JSON Schema of the same envelope:
``docs/trace-event.schema.json`` (the tests hold the two together).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

import attrs
import orjson
from ledgerspec.spec.codecs import short_json
from ledgerspec.spec.vocabulary import FORMAT_VERSION, trace_line

__all__ = [
    "Event",
    "InputError",
    "TraceFormatError",
    "events_from_json",
    "parse_event",
]

MAX_NAME = 256  # longest trace id, process or event type
SEQ_MAX = 2**63 - 1
_EMPTY: dict[str, Any] = {}
_FIELDS = ("v", "trace", "process", "seq", "type", "params", "observed", "time", "clock")


@attrs.frozen
class InputError:
    """A line that cannot be checked, and why; ``trace`` when the line names one."""

    file: str
    line: int
    message: str
    trace: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "trace": self.trace, "message": self.message}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> InputError:
        return cls(data["file"], data["line"], data["message"], data["trace"])


class TraceFormatError(ValueError):
    """Raised by :func:`parse_event`; carries the :class:`InputError`."""

    def __init__(self, error: InputError) -> None:
        super().__init__(str(error))
        self.error = error


class Event:
    """One event of a trace, as read: envelope checked, values still JSON.

    ``params_key`` is the canonical JSON text of ``params``: with the state,
    it keys the checker's cache of successor computations. Events read from
    lines with the same text after the envelope share their ``params`` and
    ``observed`` mappings: treat them as read-only.
    """

    __slots__ = (
        "clock",
        "file",
        "line",
        "observed",
        "params",
        "params_key",
        "process",
        "seq",
        "time",
        "trace",
        "type",
    )

    def __init__(
        self,
        trace: str,
        process: str,
        seq: int,
        type: str,
        params: dict[str, Any],
        observed: dict[str, Any],
        time: float | None = None,
        clock: dict[str, int] | None = None,
        file: str = "<memory>",
        line: int = 0,
        params_key: bytes | None = None,
    ) -> None:
        self.trace = trace
        self.process = process
        self.seq = seq
        self.type = type
        self.params = params
        self.observed = observed
        self.time = time
        self.clock = clock
        self.file = file
        self.line = line
        if params_key is None:
            params_key = orjson.dumps(params, option=orjson.OPT_SORT_KEYS) if params else b""
        self.params_key = params_key

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict[str, Any]:
        """The event as a line of the trace format (without its position in a file)."""
        data = trace_line(self.trace, self.process, self.seq, self.type, self.params, self.observed)
        if self.time is not None:
            data["time"] = self.time
        if self.clock is not None:
            data["clock"] = self.clock
        return data

    def __repr__(self) -> str:
        return f"Event({self.trace!r} {self.process}#{self.seq} {self.type} at {self.where})"


def parse_event(obj: Any, file: str, line: int) -> Event:
    """Check the envelope of one decoded line and build its :class:`Event`; :class:`TraceFormatError` if bad."""
    if type(obj) is dict:
        # The common case in one test; anything else gets the full check below, with its message.
        v, trace, process, seq, kind = (
            obj.get("v"),
            obj.get("trace"),
            obj.get("process"),
            obj.get("seq"),
            obj.get("type"),
        )
        params, observed = obj.get("params", _EMPTY), obj.get("observed", _EMPTY)
        if (
            type(v) is int
            and v == FORMAT_VERSION
            and type(trace) is str
            and 0 < len(trace) <= MAX_NAME
            and type(process) is str
            and 0 < len(process) <= MAX_NAME
            and type(seq) is int
            and 0 <= seq <= SEQ_MAX
            and type(kind) is str
            and 0 < len(kind) <= MAX_NAME
            and type(params) is dict
            and type(observed) is dict
            and len(obj) == 5 + ("params" in obj) + ("observed" in obj)
        ):
            return Event(trace, process, seq, kind, params, observed, file=file, line=line)
    return _parse_checked(obj, file, line)


def events_from_json(objs: Iterable[Any], file: str = "<memory>") -> list[Event]:
    """Events from decoded lines (numbered from 1), as if read from ``file``; the first bad one raises."""
    return [parse_event(obj, file, number) for number, obj in enumerate(objs, 1)]


def _name(obj: dict[str, Any], key: str, fail: Callable[[str], NoReturn]) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        if value is None:
            fail(f"no {key!r}")
        fail(f"{key!r} must be a non-empty string, got {_kind(value)}")
    if len(value) > MAX_NAME:
        fail(f"{key!r} is {len(value)} characters long, over the limit of {MAX_NAME}")
    return value


def _kind(value: Any) -> str:
    return short_json(value, 40)


def _integer(value: Any) -> int | None:
    """An integer, as JSON Schema sees one: ``3`` or ``3.0`` (a number whose fraction is zero)."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer() and abs(value) <= SEQ_MAX:
        return int(value)
    return None


def _parse_checked(obj: Any, file: str, line: int) -> Event:
    """Every rule of the envelope, in order, each failure with its own message."""
    trace_id = obj.get("trace") if type(obj) is dict and type(obj.get("trace")) is str else None
    if trace_id is not None and not 0 < len(trace_id) <= MAX_NAME:
        trace_id = None  # not a valid trace id: the error is charged to no trace

    def fail(message: str) -> NoReturn:
        raise TraceFormatError(InputError(file, line, message, trace_id))

    if type(obj) is not dict:
        fail(f"expected a JSON object (one event per line), got {_kind(obj)}")
    v = _integer(obj.get("v"))
    if v != FORMAT_VERSION:
        if v is None:
            fail(f'not a trace event: no format version "v" (this reader knows version {FORMAT_VERSION})')
        fail(f"unsupported format version {_kind(obj.get('v'))}; this reader knows version {FORMAT_VERSION}")
    trace = _name(obj, "trace", fail)
    process = _name(obj, "process", fail)
    seq = _integer(obj.get("seq"))
    if seq is None or not 0 <= seq <= SEQ_MAX:
        if "seq" not in obj:
            fail("no 'seq'")
        fail(f"'seq' must be an integer from 0 to 2**63-1, got {_kind(obj['seq'])}")
    event_type = _name(obj, "type", fail)
    params = obj.get("params", _EMPTY)
    if type(params) is not dict:
        fail(f"'params' must be an object, got {_kind(params)}")
    observed = obj.get("observed", _EMPTY)
    if type(observed) is not dict:
        fail(f"'observed' must be an object, got {_kind(observed)}")
    time = obj.get("time")
    if time is not None and (type(time) not in (int, float)):
        fail(f"'time' must be a number, got {_kind(time)}")
    clock = obj.get("clock")
    if clock is not None:
        if type(clock) is not dict or not clock:
            fail(f"'clock' must be a non-empty object of process -> counter, got {_kind(clock)}")
        clock = dict(clock)
        for p, raw in clock.items():
            n = _integer(raw)
            if n is None or not 0 <= n <= SEQ_MAX:
                fail(f"clock entry {p!r} must be an integer from 0 to 2**63-1, got {_kind(raw)}")
            clock[p] = n
    known = 5 + ("params" in obj) + ("observed" in obj) + ("time" in obj) + ("clock" in obj)
    if len(obj) != known:
        unknown = [k for k in obj if k not in _FIELDS and not k.startswith("x-")]
        if unknown:
            fail(f"unknown field {', '.join(map(repr, unknown))} (extensions are named 'x-...')")
    return Event(trace, process, seq, event_type, params, observed, time=time, clock=clock, file=file, line=line)
