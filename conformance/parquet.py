"""Trace events in Parquet: the layout (docs/trace-format.md, "Parquet"), a writer, and rows read back as events.

One row per event. The envelope has columns of its own; ``params``,
``observed`` and ``clock`` are JSON text, so the layout is the same for
every spec and a row carries exactly what an NDJSON line does:

=============  =================  ========  =====================================
column         type               required  null means
=============  =================  ========  =====================================
``v``          integer            yes       the row has no ``v``
``trace``      string             yes       the row has no ``trace``
``process``    string             yes       the row has no ``process``
``seq``        integer            yes       the row has no ``seq``
``type``       string             yes       the row has no ``type``
``params``     string (JSON)      no        no params
``observed``   string (JSON)      no        nothing observed
``time``       floating point     no        no time
``clock``      string (JSON)      no        no vector clock
=============  =================  ========  =====================================

A row is turned into the object its NDJSON line would decode to and
checked by the same :func:`~ledgerspec.conformance.events.parse_event`, so
bad rows get the same messages as bad lines; where an error names a line,
for a Parquet file it is the row's number in the file, from 1. A column
outside the layout, other than an extension ``x-...`` (not carried into
events), or a column of another type, makes the whole file unreadable.

This module knows the layout and pyarrow; the in-process reader
(:mod:`ledgerspec.conformance.reader`) and the Spark run
(:mod:`ledgerspec.conformance.spark`) both read rows through
:func:`row_event`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
from ledgerspec.conformance.events import MAX_NAME, Event, InputError, TraceFormatError, parse_event

__all__ = [
    "COLUMNS",
    "PARQUET_SUFFIX",
    "ParquetFileError",
    "RowDecoder",
    "check_layout",
    "parquet_records",
    "parquet_trace_keys",
    "row_event",
    "write_parquet",
]

PARQUET_SUFFIX = ".parquet"
REQUIRED = ("v", "trace", "process", "seq", "type")
JSON_COLUMNS = ("params", "observed", "clock")
COLUMNS = (*REQUIRED, *JSON_COLUMNS, "time")
SCHEMA = pa.schema(
    [
        pa.field("v", pa.int64(), nullable=False),
        pa.field("trace", pa.string(), nullable=False),
        pa.field("process", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("params", pa.string()),
        pa.field("observed", pa.string()),
        pa.field("time", pa.float64()),
        pa.field("clock", pa.string()),
    ]
)
ROW_GROUP_ROWS = 131_072
READ_BATCH_ROWS = 65_536
JSON_CACHE_BYTES = 8 << 20  # text of params/observed whose parse is kept


class ParquetFileError(ValueError):
    """A Parquet file that cannot be read, or whose columns are not the trace layout."""


def _kind_ok(column: str, kind: pa.DataType) -> bool:
    if column in ("v", "seq"):
        return bool(pa.types.is_integer(kind))
    if column == "time":
        return bool(pa.types.is_floating(kind) or pa.types.is_integer(kind))
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def check_layout(name: str, columns: Iterable[tuple[str, Any]]) -> list[str]:
    """The layout's columns a file has (``(name, type)`` pairs, types as pyarrow or Spark names them);
    :class:`ParquetFileError` when one is of another type, a required one is missing, or one is unknown."""
    present = []
    for column, kind in columns:
        if column.startswith("x-"):
            continue
        if column not in COLUMNS:
            raise ParquetFileError(
                f"{name}: unknown column {column!r}; the Parquet trace layout has {', '.join(COLUMNS)} "
                "(extensions are named 'x-...')"
            )
        ok = _kind_ok(column, kind) if isinstance(kind, pa.DataType) else kind
        if not ok:
            wanted = {"v": "an integer", "seq": "an integer", "time": "a number"}.get(column, "a string")
            text = "JSON text" if column in JSON_COLUMNS else wanted
            raise ParquetFileError(f"{name}: column {column!r} must hold {text}, not {kind}")
        present.append(column)
    missing = [c for c in REQUIRED if c not in present]
    if missing:
        raise ParquetFileError(f"{name}: no column {', '.join(map(repr, missing))} (required by the trace layout)")
    return present


def valid_trace(value: Any) -> str | None:
    """The trace a row is charged to: its ``trace``, when that is a valid trace id."""
    return value if type(value) is str and 0 < len(value) <= MAX_NAME else None


class RowDecoder:
    """Rows to events. JSON texts that recur (the same params, the same observed values) are parsed once,
    within a budget; events made from the same text share its mapping: treat them as read-only."""

    def __init__(self, max_row_bytes: int, budget: int = JSON_CACHE_BYTES) -> None:
        self.max_row_bytes = max_row_bytes
        self.budget = budget
        self.kept = 0
        self.parsed: dict[str, Any] = {}

    def _json(self, column: str, text: str, file: str, row: int, trace: str | None) -> Any:
        found = self.parsed.get(text)
        if found is None:
            try:
                found = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise TraceFormatError(InputError(file, row, f"{column!r} is not valid JSON: {exc}", trace)) from None
            if self.kept + len(text) > self.budget:
                self.parsed.clear()
                self.kept = 0
            self.parsed[text] = found
            self.kept += len(text)
        return found

    def event(self, values: Sequence[Any], file: str, row: int) -> Event:
        """The event of a row, given as values in the order of :data:`COLUMNS` (``None`` for null or missing);
        :class:`TraceFormatError` when it is bad."""
        v, trace, process, seq, kind, params, observed, clock, time = values
        size = sum(len(x) for x in (trace, process, kind, params, observed, clock) if type(x) is str)
        if size > self.max_row_bytes:
            message = f"row is longer than {self.max_row_bytes:,} bytes (the limit; see --max-line-bytes)"
            raise TraceFormatError(InputError(file, row, message, valid_trace(trace)))
        obj: dict[str, Any] = {}
        for key, value in (("v", v), ("trace", trace), ("process", process), ("seq", seq), ("type", kind)):
            if value is not None:
                obj[key] = value
        charged = valid_trace(trace)
        if params is not None:
            obj["params"] = self._json("params", params, file, row, charged)
        if observed is not None:
            obj["observed"] = self._json("observed", observed, file, row, charged)
        if time is not None:
            obj["time"] = time
        if clock is not None:
            obj["clock"] = self._json("clock", clock, file, row, charged)
        return parse_event(obj, file, row)


def row_event(decoder: RowDecoder, values: Sequence[Any], file: str, row: int) -> Event | InputError:
    """The event of a row, or what is wrong with it."""
    try:
        return decoder.event(values, file, row)
    except TraceFormatError as exc:
        return exc.error


def _open(path: Path) -> pq.ParquetFile:
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise ParquetFileError(f"{path}: cannot be read as Parquet: {exc}") from None


def _layout(path: Path, f: pq.ParquetFile) -> list[str]:
    return check_layout(str(path), ((field.name, field.type) for field in f.schema_arrow))


def parquet_trace_keys(path: Path) -> Iterator[tuple[int, str | None]]:
    """(row number, trace the row is charged to) for each row: the reader's first pass."""
    f = _open(path)
    _layout(path, f)
    number = 0
    for batch in f.iter_batches(batch_size=READ_BATCH_ROWS, columns=["trace"]):
        for value in batch.column(0).to_pylist():
            number += 1
            yield number, valid_trace(value)


def parquet_records(path: Path, max_row_bytes: int) -> Iterator[tuple[int, str | None, Event | InputError]]:
    """(row number, trace charged, event or error) for each row of a Parquet trace file."""
    f = _open(path)
    present = _layout(path, f)
    name = str(path)
    decoder = RowDecoder(max_row_bytes)
    order = ("v", "trace", "process", "seq", "type", "params", "observed", "clock", "time")
    number = 0
    for batch in f.iter_batches(batch_size=READ_BATCH_ROWS, columns=present):
        size = batch.num_rows
        columns = [batch.column(present.index(c)).to_pylist() if c in present else [None] * size for c in order]
        for values in zip(*columns, strict=True):
            number += 1
            item = row_event(decoder, values, name, number)
            yield number, item.trace, item


def event_row(event: Event) -> dict[str, Any]:
    """An event as a row of the layout."""

    def text(value: dict[str, Any] | None) -> str | None:
        return orjson.dumps(value).decode() if value else None

    return {
        "v": 1,
        "trace": event.trace,
        "process": event.process,
        "seq": event.seq,
        "type": event.type,
        "params": text(event.params),
        "observed": text(event.observed),
        "time": float(event.time) if event.time is not None else None,
        "clock": text(event.clock),
    }


@attrs.define
class _Writer:
    path: Path
    writer: pq.ParquetWriter
    rows: list[dict[str, Any]] = attrs.Factory(list)
    written: int = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        if len(self.rows) >= ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=SCHEMA), row_group_size=ROW_GROUP_ROWS)
            self.written += len(self.rows)
            self.rows = []


def write_parquet(path: Path, events: Iterable[Event | dict[str, Any]]) -> int:
    """Write events (or event objects of the NDJSON format) to a Parquet file in the layout; rows written."""
    with pq.ParquetWriter(path, SCHEMA, compression="zstd") as writer:
        out = _Writer(path, writer)
        for e in events:
            out.add(event_row(e if isinstance(e, Event) else parse_event(e, str(path), 0)))
        out.flush()
        return out.written
