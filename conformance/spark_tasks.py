"""What the Spark executors run to check traces: the stages of ``ledgerspec check --spark``, and their tables.

The driver (:mod:`ledgerspec.conformance.spark`) plans the check and hands
these stages to ``mapInArrow``; each runs in a Python worker of an executor,
over Arrow batches of the tables below, and checks with the in-process
checker (:class:`~ledgerspec.conformance.checker.TraceChecker`), one per
worker, built from :class:`SparkCheck` (plain data: all that is shipped):

- :class:`CheckRanges`: byte ranges of local NDJSON files, each read as the
  in-process reader reads a file, and every trace it has lines of checked
  there; :class:`PassShared`: the lines of the traces several ranges have
  lines of, read again for the shuffle by trace;
- :class:`KeyLines`: the trace of each line the JVM could not key;
- :class:`CheckTraces`: the lines (or Parquet rows) of whole traces, sorted
  by trace, checked trace by trace.
"""

from __future__ import annotations

import bisect
import gzip
import itertools
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any, cast

import attrs
import numpy as np
import orjson
import pyarrow as pa
from ledgerspec.conformance.checker import Bounds, TraceChecker
from ledgerspec.conformance.events import Event, InputError, TraceFormatError
from ledgerspec.conformance.parquet import RowDecoder, row_event
from ledgerspec.conformance.partition import split_trace
from ledgerspec.conformance.reader import (
    READ_BLOCK,
    Holding,
    LineCount,
    LineDecoder,
    TraceFileError,
    TraceInput,
    line_key,
    line_keys,
    line_record,
    line_records,
    stream_lines,
)
from ledgerspec.conformance.run import collector_paused
from ledgerspec.conformance.verdict import CONFORMS, Verdict, undecided_by_stray_line
from ledgerspec.spec import catalog

__all__ = [
    "CHECKED_COLUMNS",
    "LINE_COLUMNS",
    "PASSED_COLUMNS",
    "RANGE_COLUMNS",
    "RANGE_OUT_COLUMNS",
    "ROW_COLUMNS",
    "VERDICT_COLUMNS",
    "CheckRanges",
    "CheckTraces",
    "KeyLines",
    "PassShared",
    "SettleStrays",
    "SparkCheck",
]

# The verdict table: Verdict.to_row(), then the whole verdict as JSON for a trace that does not conform.
VERDICT_COLUMNS = pa.schema(
    [
        pa.field("trace", pa.string()),
        pa.field("status", pa.string()),
        pa.field("events", pa.int64()),
        pa.field("checked", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("finding", pa.string()),
        pa.field("promises", pa.string()),
        pa.field("divergences", pa.int64()),
        pa.field("event_index", pa.int64()),
        pa.field("event", pa.string()),
        pa.field("file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("explanation", pa.string()),
        pa.field("path", pa.string()),
        pa.field("bound", pa.string()),
        pa.field("input_errors", pa.string()),
        pa.field("max_candidates", pa.int64()),
        pa.field("verdict_json", pa.string()),
    ]
)


# The verdict table with where the in-process reader would hand each result over: the order of the results.
CHECKED_COLUMNS = VERDICT_COLUMNS.append(pa.field("order_file", pa.int32())).append(pa.field("order_line", pa.int64()))
# Lines keyed by their trace: the trace, the line's id, its bytes.
LINE_COLUMNS = pa.schema([pa.field("key", pa.string()), pa.field("id", pa.int64()), pa.field("raw", pa.binary())])
ROW_COLUMNS = ("v", "trace", "process", "seq", "type", "params", "observed", "clock", "time")  # of a Parquet row
OUTPUT_BATCH_ROWS = 4096


Constants = tuple[tuple[str, Any], ...]  # a spec's constants, parsed, in order


@attrs.frozen
class SparkCheck:
    """What the executors need to check traces: plain data, so that it pickles small.

    The executors build the spec from ``spec`` and ``constants`` and keep one checker per Python worker.
    """

    spec: str  # a name in the spec catalog
    constants: tuple[tuple[str, Any], ...]  # the spec's constants, parsed
    mode: str
    bounds: Bounds
    max_line_bytes: int
    files: tuple[str, ...] = ()  # the input files, by index, named as the in-process reader names them
    # The blocks of the NDJSON files as Spark reads them, by the id of their first line: (that id, lines,
    # file index, number of the first line). A line's id then says its file and number.
    blocks: tuple[tuple[int, int, int, int], ...] = ()
    # Traces whose manifest says what they were recorded under (conformance/manifest.py): each manifest's
    # constants and its traces' own, the manifest of each input file by name, and the --const values, which
    # hold over them. A trace's checker is that of the manifest of the file of its first event.
    manifests: tuple[tuple[Constants, tuple[tuple[str, Constants], ...]], ...] = ()
    file_manifests: tuple[tuple[str, int], ...] = ()
    given: Constants = ()

    def checker(self, constants: Constants | None = None) -> TraceChecker:
        """The checker of this worker process for this spec, mode and bounds, and ``constants`` (by default the
        job's): built on first use."""
        constants = self.constants if constants is None else constants
        key = (self.spec, constants, self.mode, self.bounds)
        found = _CHECKERS.get(key)
        if found is None:
            if len(_CHECKERS) >= _CHECKERS_KEPT:
                _CHECKERS.clear()
            spec = catalog.find(self.spec).python(**dict(constants))
            found = _CHECKERS[key] = TraceChecker(spec, self.mode, self.bounds, coverage=False)
        return found

    def picker(self) -> Callable[[str, int], TraceChecker]:
        """The checker of a trace, given the index of the file of its first event: the job's, or that of the
        constants its manifest names. Made once per stage, so that each trace costs a lookup."""
        if not self.file_manifests:
            return lambda _trace, _file_index: self.checker()
        named = [(dict(general), {t: dict(c) for t, c in own}) for general, own in self.manifests]
        by_file = dict(self.file_manifests)
        of_index = [by_file.get(name) for name in self.files]
        given = dict(self.given)

        def pick(trace: str, file_index: int) -> TraceChecker:
            found = of_index[file_index]
            if found is None:
                return self.checker()
            general, own = named[found]
            return self.checker(tuple({**general, **own.get(trace, {}), **given}.items()))

        return pick


class _Places:
    """Where NDJSON lines are, from their ids: the file index and the line number."""

    def __init__(self, blocks: Sequence[tuple[int, int, int, int]]) -> None:
        self.blocks = blocks
        self.starts = [b[0] for b in blocks]

    def __call__(self, line_id: int) -> tuple[int, int]:
        k = bisect.bisect_right(self.starts, line_id) - 1
        first_id, count, index, number = self.blocks[k]
        if k < 0 or line_id >= first_id + count:
            raise TraceFileError(f"a line read by Spark (id {line_id}) is in no block counted before: a file changed?")
        return index, number + line_id - first_id


_CHECKERS: dict[tuple[Any, ...], TraceChecker] = {}  # in each Python worker: the checkers of the last job
_CHECKERS_KEPT = 16  # checkers of other constants kept at once


# -- byte ranges of local NDJSON files ---------------------------------------------------------
RANGE_COLUMNS = pa.schema(
    [
        pa.field("range", pa.int64()),
        pa.field("file_index", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("start", pa.int64()),
        pa.field("stop", pa.int64()),  # -1: to the end (a gzipped file is one range)
        pa.field("first_line", pa.int64()),  # the number of the range's first line
        pa.field("traces", pa.list_(pa.string())),  # for the second read: the traces to pass on,
        pa.field("windows", pa.list_(pa.list_(pa.int64()))),  # and the lines they lie within: [from, to, at]
    ]
)


# What the check of a range gives: rows of the verdict table, each with the trace it comes from (``key``;
# null for a line that names no trace), then one row (``range`` not null) that lists the traces the range
# has lines of, with the first and the last of those lines, how many there are, and where the first begins.
RANGE_OUT_COLUMNS = pa.schema(
    [
        *CHECKED_COLUMNS,
        pa.field("key", pa.string()),
        pa.field("range", pa.int64()),
        pa.field("traces", pa.list_(pa.string())),
        pa.field("firsts", pa.list_(pa.int64())),
        pa.field("lasts", pa.list_(pa.int64())),
        pa.field("counts", pa.list_(pa.int64())),
        pa.field("offsets", pa.list_(pa.int64())),
    ]
)


PASSED_COLUMNS = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("file_index", pa.int32()),
        pa.field("line", pa.int64()),
        pa.field("raw", pa.binary()),
    ]
)


def _open_range(path: str, start: int, gz: bool) -> tuple[IO[bytes], int] | None:
    """The file, at the first line that begins at or after ``start``, and where that is; None when no line
    begins there. A line begins at 0 or right after a newline."""
    if gz:
        return cast(IO[bytes], gzip.open(path, "rb")), 0
    f = open(path, "rb")  # noqa: SIM115 (returned, the caller closes it)
    if start == 0:
        return f, 0
    f.seek(start - 1)
    at = start - 1
    while block := f.read(READ_BLOCK):
        found = block.find(b"\n")
        if found >= 0:
            f.seek(at + found + 1)
            return f, at + found + 1
        at += len(block)
    f.close()
    return None


@attrs.define
class _Reading(LineCount):
    """Lines read of a range, and where in the file the stream read begins."""

    origin: int = 0

    @property
    def offset(self) -> int:
        """Where in the file the line read last begins."""
        return self.origin + self.begins


def _range_lines(
    job: SparkCheck, r: dict[str, Any], count: _Reading | None = None, *, at: int | None = None
) -> Iterator[tuple[int, bytes, bool]]:
    """The lines that begin in a range, as the in-process reader reads them, numbered on from its first;
    with ``at`` (where a line begins) and ``count`` (the lines before it), from that line on."""
    gz = r["stop"] < 0
    opened = _open_range(r["path"], r["start"] if at is None else at, gz)
    if opened is None:
        return
    f, begins = opened
    count = _Reading(r["first_line"] - 1) if count is None else count
    with f:
        try:
            if gz and at:  # (offsets in the text, which reading from the start gets to)
                f.seek(at)
                begins = at
            count.origin = begins
            yield from stream_lines(f, job.max_line_bytes, count, stop=None if gz else r["stop"] - begins)
        except (OSError, EOFError) as exc:
            raise TraceFileError(f"{job.files[r['file_index']]}:{count.lines + 1}: cannot be read: {exc}") from None


class CheckRanges:
    """A Python stage over ranges: each range is read as the in-process reader reads a file, its two
    passes over the range, and each trace it has lines of is checked there. The driver keeps the
    verdicts of the traces no other range has lines of, and has the others checked whole."""

    def __init__(self, job: SparkCheck) -> None:
        self.job = job

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with collector_paused():  # as in-process: the collector's scans of the caches cost more than the check
            for batch in batches:
                for r in batch.to_pylist():
                    yield from self._check(r)

    def _check(self, r: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        job = self.job
        checker, pick = job.checker(), job.picker()
        index = r["file_index"]
        last: dict[str, int] = {}  # the first pass: the line that ends each trace in the range
        for number, trace in line_keys(_range_lines(job, r)):
            if trace is not None:
                last[trace] = number
        ends = np.sort(np.fromiter(last.values(), np.int64, len(last)))
        del last
        # trace charged -> [its first line, its last line, its lines, where its first line begins]
        spans: dict[str, list[int]] = {}
        reading = _Reading(r["first_line"] - 1)

        def noted() -> Iterator[tuple[int, str | None, Event | InputError]]:
            previous, span = None, [0, 0, 0, 0]  # a trace's lines mostly come together
            lines = _range_lines(job, r, reading)
            for number, trace, item in line_records(lines, job.files[index], job.max_line_bytes, LineDecoder()):
                if trace is not None:
                    if trace != previous:
                        previous, span = trace, spans.setdefault(trace, [number, number, 0, reading.offset])
                    span[1] = number
                    span[2] += 1
                yield number, trace, item

        out: list[dict[str, Any]] = []
        holding = Holding()
        for item in itertools.chain(holding.take(noted(), ends), holding.rest()):
            if isinstance(item, InputError):
                out.append(_stray_row(item, index, item.line))
                continue
            last_line = max([e.line for e in item.events] + [e.line for e in item.errors])
            chosen = pick(item.trace, index)
            for unit in split_trace(item, checker.mapping.partition):
                row = _verdict_row(chosen.check(unit.events, unit.errors), index, last_line)
                row["key"] = item.trace
                out.append(row)
            if len(out) >= OUTPUT_BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(out, schema=RANGE_OUT_COLUMNS)
                out.clear()
        firsts, lasts, counts, offsets = zip(*spans.values(), strict=True) if spans else ((), (), (), ())
        summary = {"range": r["range"], "traces": list(spans), "firsts": firsts, "lasts": lasts}
        summary.update(counts=counts, offsets=offsets)
        yield pa.RecordBatch.from_pylist([*out, summary], schema=RANGE_OUT_COLUMNS)


class PassShared:
    """A Python stage over ranges: the lines of the traces other ranges have lines of too, read again
    within the windows the check of the range noted, for the shuffle by trace."""

    def __init__(self, job: SparkCheck) -> None:
        self.job = job

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = self.job
        for batch in batches:
            for r in batch.to_pylist():
                shared, index = frozenset(r["traces"]), r["file_index"]
                decoder = LineDecoder()
                out: list[dict[str, Any]] = []
                for first, last, at in r["windows"]:
                    for number, line, too_long in _range_lines(job, r, _Reading(first - 1), at=at):
                        if number > last:
                            break
                        records = line_records(
                            [(number, line, too_long)], job.files[index], job.max_line_bytes, decoder
                        )
                        raw = line + b" " * too_long  # (a line cut at the limit keeps a byte more: it is too long)
                        out.extend(
                            {"key": trace, "file_index": index, "line": number, "raw": raw}
                            for _, trace, _ in records
                            if trace in shared
                        )
                yield pa.RecordBatch.from_pylist(out, schema=PASSED_COLUMNS)


# -- lines to trace keys ------------------------------------------------------------------------
class KeyLines:
    """A Python stage for the lines the JVM could not key: each non-blank one with the trace it names."""

    def __init__(self, max_line_bytes: int) -> None:
        self.max_line_bytes = max_line_bytes

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        limit = self.max_line_bytes
        for batch in batches:
            raws = batch.column("raw").to_pylist()
            kept = pa.array([i for i, raw in enumerate(raws) if raw and not raw.isspace()], pa.int64())
            keys = [line_key(raws[i], limit) for i in kept.to_pylist()]
            columns = [pa.array(keys, pa.string()), batch.column("id").take(kept), batch.column("raw").take(kept)]
            yield pa.RecordBatch.from_arrays(columns, schema=LINE_COLUMNS)


# -- traces to verdicts -------------------------------------------------------------------------
def _verdict_row(v: Verdict, index: int, line: int) -> dict[str, Any]:
    row: dict[str, Any] = dict(v.to_row())
    row["verdict_json"] = orjson.dumps(v.to_json()).decode() if v.status != CONFORMS else None
    row["order_file"], row["order_line"] = index, line
    return row


def _stray_row(error: InputError, index: int, line: int) -> dict[str, Any]:
    """A line that names no trace: not a trace, so not in the verdict table; the driver reports it."""
    row: dict[str, Any] = dict.fromkeys(CHECKED_COLUMNS.names)
    detail = orjson.dumps(error.to_json()).decode()
    row.update(file=error.file, line=error.line, input_errors=str(error), verdict_json=detail)
    row["order_file"], row["order_line"] = index, line
    return row


class SettleStrays:
    """A Python stage over violation rows that a bad line no trace claims makes undecided: the rows again, with
    the verdict the in-process run counts (:func:`~ledgerspec.conformance.verdict.undecided_by_stray_line`).
    ``first``: each file's first such line, as the JSON of its input error."""

    def __init__(self, first: dict[str, str]) -> None:
        self.first = first

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for row in batch.to_pylist():
                verdict = Verdict.from_json(orjson.loads(row["verdict_json"]))
                assert verdict.failure is not None
                stray = InputError.from_json(orjson.loads(self.first[verdict.failure.file]))
                out.append(_verdict_row(undecided_by_stray_line(verdict, stray), row["order_file"], row["order_line"]))
            yield pa.RecordBatch.from_pylist(out, schema=CHECKED_COLUMNS)


class CheckTraces:
    """A Python stage over the lines of whole traces, sorted by trace, file and line: one row per trace,
    and one per line that names no trace. ``order_file`` and ``order_line`` say where the in-process
    reader would hand the trace over (its last line), or read the line: the order of its results."""

    def __init__(self, job: SparkCheck) -> None:
        self.job = job

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with collector_paused():  # as in-process: the collector's scans of the caches cost more than the check
            yield from self._check(batches)

    def _check(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        job = self.job
        partition, pick = job.checker().mapping.partition, job.picker()
        decoder, rows = LineDecoder(), RowDecoder(job.max_line_bytes)
        event, limit, files, place = decoder.event, job.max_line_bytes, job.files, _Places(job.blocks)
        out: list[dict[str, Any]] = []
        group: list[tuple[str | None, Event | InputError, int, int]] = []  # trace, item, file index, line
        key: Any = _NO_KEY

        def finish() -> None:
            group.sort(key=_reading_order)  # sorted by trace alone, lines may come in any order
            for trace, records in _by_trace(group).items():
                if trace is None:
                    out.extend(_stray_row(item, index, line) for _, item, index, line in records)  # type: ignore[arg-type]
                    continue
                events = tuple(r[1] for r in records if isinstance(r[1], Event))
                errors = tuple(r[1] for r in records if isinstance(r[1], InputError))
                _, _, index, line = records[-1]
                first = next((r for r in records if isinstance(r[1], Event)), records[0])
                chosen = pick(trace, first[2])
                for unit in split_trace(TraceInput(trace, events, errors), partition):
                    out.append(_verdict_row(chosen.check(unit.events, unit.errors), index, line))
            group.clear()

        for batch in batches:
            keys = batch.column("key").to_pylist()
            ids = batch.column("id").to_pylist()
            raws = batch.column("raw").to_pylist()
            indexes, numbers = batch.column("file_index").to_pylist(), batch.column("line").to_pylist()
            fields = _row_fields(batch) if batch.column("raw").null_count else None
            for i, k in enumerate(keys):
                if k != key:
                    if group:
                        finish()
                    key = k
                raw = raws[i]
                if raw is None:  # a Parquet row
                    assert fields is not None
                    index, number = fields[-2][i], fields[-1][i]
                    item = row_event(rows, [column[i] for column in fields[:-2]], files[index], number)
                    group.append((item.trace, item, index, number))
                    continue
                index, number = place(ids[i]) if numbers[i] is None else (indexes[i], numbers[i])
                if len(raw) <= limit:
                    try:  # the usual line, in few steps
                        e = event(raw, files[index], number)
                    except (orjson.JSONDecodeError, TraceFormatError):
                        pass
                    else:
                        group.append((e.trace, e, index, number))
                        continue
                trace, item = line_record(decoder, raw, files[index], number, limit)
                group.append((trace, item, index, number))
            if len(out) >= OUTPUT_BATCH_ROWS:
                yield pa.RecordBatch.from_pylist(out, schema=CHECKED_COLUMNS)
                out.clear()
        if group:
            finish()
        yield pa.RecordBatch.from_pylist(out, schema=CHECKED_COLUMNS)


_NO_KEY = object()


def _reading_order(record: tuple[str | None, Event | InputError, int, int]) -> tuple[int, int]:
    return record[2], record[3]


def _row_fields(batch: pa.RecordBatch) -> list[list[Any]]:
    """The columns of Parquet rows, in the order :func:`row_event` takes them, then file index and line."""
    return [batch.column(c).to_pylist() for c in (*ROW_COLUMNS, "file_index", "line")]


def _by_trace(
    group: list[tuple[str | None, Event | InputError, int, int]],
) -> dict[str | None, list[tuple[str | None, Event | InputError, int, int]]]:
    """The records of one key, by the trace each is charged to: one trace, but for lines whose envelope
    names another trace than the key read from the line's text (duplicate keys in a JSON object, say)."""
    traces: dict[str | None, list[tuple[str | None, Event | InputError, int, int]]] = {}
    for record in group:
        traces.setdefault(record[0], []).append(record)
    return traces
