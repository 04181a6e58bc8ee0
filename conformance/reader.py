"""Reading trace files (NDJSON, one event per line; or Parquet), one trace at a time, in bounded memory.

Two passes over the input. The first notes, for each trace id, the last line
holding one of its events (:class:`LastLines`: 8 bytes a trace once the pass
is over, in numpy arrays, so that millions of traces cost megabytes). The
second reads the events, keeps those of traces not yet complete, and hands
each trace over as soon as its last line is read. With each trace's lines together (the usual
way to write them) one trace is in memory at a time; traces interleaved in a
file, or spread over several files (one per process), are held until their
last line, which is as little as merging them allows.

Files are read in the order given; a directory stands for its ``*.ndjson``
and ``*.jsonl`` files (also gzipped, ``.gz``), Parquet files (``*.parquet``,
one event per row: :mod:`ledgerspec.conformance.parquet`), ITF traces
(``*.itf.json``) and TLC's JSON traces (``*.tlc.json``), one trace each
(:mod:`ledgerspec.conformance.documents`), in name order. Blank lines are skipped. A line longer than
``max_line_bytes`` is not read into memory: it is reported, and the reader
goes on at the next line. An empty file is an error, as a directory without
trace files is. After ``max_bad_lines`` lines of a file that cannot be read,
the reader stops checking that file, says so at the next bad line, and
charges the traces it leaves unfinished with it: memory and the output on a
file of garbage are bounded, and its work is the first pass over the file
(about 15 seconds a gigabyte of random bytes).
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import attrs
import numpy as np
import orjson
import pyarrow as pa
from ledgerspec.conformance.documents import DOCUMENT_SUFFIXES, is_document, read_document
from ledgerspec.conformance.events import SEQ_MAX, Event, InputError, TraceFormatError, parse_event
from ledgerspec.conformance.parquet import PARQUET_SUFFIX, ParquetFileError, parquet_records, parquet_trace_keys

__all__ = [
    "DEFAULT_MAX_BAD_LINES",
    "DEFAULT_MAX_LINE_BYTES",
    "TRACE_SUFFIXES",
    "Holding",
    "LastLines",
    "LineCount",
    "LineDecoder",
    "ReadStats",
    "TraceFileError",
    "TraceInput",
    "expand_paths",
    "is_parquet",
    "line_key",
    "line_keys",
    "line_record",
    "line_records",
    "read_events",
    "read_traces",
    "stream_lines",
    "trace_key",
]

DEFAULT_MAX_LINE_BYTES = 1 << 20
DEFAULT_MAX_BAD_LINES = 100  # bad lines of one file read before the reader gives the file up
TRACE_SUFFIXES = (".ndjson", ".jsonl", ".ndjson.gz", ".jsonl.gz", PARQUET_SUFFIX, *DOCUMENT_SUFFIXES)
_T = TypeVar("_T")
# The layout this project writes: the envelope first, in this order, with names that need no
# escapes. Such a line is read without parsing its envelope as JSON, and the rest of it (type,
# params, observed) is parsed once per distinct text: among the traces of one system the same
# steps with the same values recur. Any other layout, and any line this path is not sure of,
# takes the general path (a JSON parse of the whole line), which gives the same event.
_ENVELOPE = re.compile(
    rb'\{"v":1,"trace":"([^"\\\x00-\x1f]{1,256})","process":"([^"\\\x00-\x1f]{1,256})",'
    rb'"seq":(0|[1-9][0-9]{0,18}),(?="type":)'
)
_ENVELOPE_KEYS = frozenset({"v", "trace", "process", "seq"})
_UNPARSED: Any = object()
BODY_CACHE_BYTES = 8 << 20  # text of line bodies whose parse is kept
READ_BLOCK = 1 << 20
# For lines that do not parse: the trace they most likely belong to, so the error can be charged to it.
_TRACE_FIELD = re.compile(rb'"trace"\s*:\s*"([^"\\]{1,256})"')


class TraceFileError(ValueError):
    """A path that cannot be read at all (missing, not a trace file, unreadable)."""


@attrs.frozen
class TraceInput:
    """The events of one trace in reading order, and its lines that could not be read."""

    trace: str
    events: tuple[Event, ...]
    errors: tuple[InputError, ...]


@attrs.define
class ReadStats:
    """How much a read held: ``peak_buffered`` is the most events in memory at once."""

    peak_buffered: int = 0


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files to read: each path, or the trace files of a directory."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
            if not found:
                raise TraceFileError(f"{path}: directory holds no trace files ({', '.join(TRACE_SUFFIXES)})")
            for empty in (p for p in found if p.stat().st_size == 0):
                raise TraceFileError(f"{empty}: empty file: it holds no trace")
            files += found
        elif path.is_file():
            if path.stat().st_size == 0:
                raise TraceFileError(f"{path}: empty file: it holds no trace")
            files.append(path)
        elif not path.exists():
            raise TraceFileError(f"{path}: no such file")
        else:
            raise TraceFileError(f"{path}: not a regular file")
    return files


def _open(path: Path) -> IO[bytes]:
    try:
        if path.name.endswith(".gz"):
            return cast(IO[bytes], gzip.open(path, "rb"))
        return open(path, "rb")
    except OSError as exc:
        raise TraceFileError(f"{path}: cannot be read: {exc.strerror or exc}") from None


def _lines(path: Path, limit: int) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, too long) for each non-blank line of a file.

    Read in blocks; of a line longer than ``limit`` only the first ``limit`` bytes are kept.
    """
    count = LineCount()
    with _open(path) as f:
        try:
            yield from stream_lines(f, limit, count)
        except (OSError, EOFError) as exc:
            raise TraceFileError(f"{path}:{count.lines + 1}: cannot be read: {exc}") from None


@attrs.define
class LineCount:
    """Lines :func:`stream_lines` went through: blank ones included, the numbering the reader reports;
    and where the line it gave last begins, in bytes from the start of the stream."""

    lines: int = 0
    begins: int = 0


def stream_lines(
    f: IO[bytes], limit: int, count: LineCount, *, stop: int | None = None
) -> Iterator[tuple[int, bytes, bool]]:
    """(line number, bytes without the newline, too long) for each non-blank line of a stream, numbered
    on from ``count.lines``; with ``stop``, only the lines that begin before that many bytes into the
    stream. ``count`` ends at the number of the last line gone through, blank or not (where a read
    fails, at the last line before the block it was reading)."""
    number = count.lines
    start = b""  # the line under way, not yet ended by a newline (at most ``limit`` bytes of it)
    over = False  # the line under way is longer than the limit
    begins = 0  # where the line under way begins, in bytes from the start of the stream
    read = 0  # bytes read so far
    while True:
        count.lines = number  # (where a read that fails stopped: a block at a time, off the lines' path)
        block = f.read(READ_BLOCK)
        if not block:
            break
        lines = block.split(b"\n")
        tail = lines.pop()
        at = read  # where lines[i] begins (for i > 0)
        for i, line in enumerate(lines):
            if i > 0:
                begins = at
            at += len(line) + 1
            if stop is not None and begins >= stop:
                count.lines = number
                return
            number += 1
            long_line = False
            if i == 0 and (start or over):
                long_line = over or len(start) + len(line) > limit
                line = (start + line)[:limit] if not over else start
                start, over = b"", False
            elif len(line) > limit:
                long_line, line = True, line[:limit]
            if long_line:
                count.begins = begins
                yield number, line, True
            elif line and not line.isspace():
                count.begins = begins
                yield number, line, False
        if lines:
            begins = at
        if not over:  # (a long line under way drops the rest of its bytes)
            start = start + tail if not lines else tail
            if len(start) > limit:
                start, over = start[:limit], True
        read += len(block)
    count.lines = number
    if (stop is not None and begins >= stop) or (not over and not start):
        return
    count.lines = number = number + 1
    count.begins = begins
    if over:
        yield number, start, True
    elif not start.isspace():
        yield number, start, False


def _guess_trace(raw: bytes) -> str | None:
    found = _TRACE_FIELD.search(raw)
    return found.group(1).decode("utf-8", "replace") if found else None


def trace_key(raw: bytes) -> str | None:
    """The trace a line most likely belongs to, without decoding the whole line when it has the usual layout."""
    found = _ENVELOPE.match(raw)
    if found is not None:
        try:
            return found.group(1).decode()
        except UnicodeDecodeError:
            pass
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _guess_trace(raw)
    if isinstance(obj, dict) and isinstance(obj.get("trace"), str):
        return str(obj["trace"])
    return _guess_trace(raw)


class LineDecoder:
    """Lines to events: the fast path for the usual layout, with parsed bodies kept within a budget."""

    def __init__(self, budget: int = BODY_CACHE_BYTES) -> None:
        self.budget = budget
        self.kept = 0
        # body text -> (type, params, observed, time, clock, params_key); None: take the general path
        self.bodies: dict[bytes, tuple[Any, ...] | None] = {}

    def event(self, raw: bytes, file: str, line: int) -> Event:
        """The event of a line; ``orjson.JSONDecodeError`` or :class:`TraceFormatError` if it is bad."""
        found = _ENVELOPE.match(raw)
        if found is not None:
            body = raw[found.end() :]
            parts = self.bodies.get(body, _UNPARSED)
            if parts is _UNPARSED:
                parts = self._parse_body(body)
            seq = int(found.group(3))
            if isinstance(parts, tuple) and seq <= SEQ_MAX:
                try:
                    trace, process = found.group(1).decode(), found.group(2).decode()
                except UnicodeDecodeError:
                    pass
                else:
                    kind, params, observed, time, clock, key = parts
                    return Event(trace, process, seq, kind, params, observed, time, clock, file, line, key)
        return parse_event(orjson.loads(raw), file, line)

    def _parse_body(self, body: bytes) -> tuple[Any, ...] | None:
        parts: tuple[Any, ...] | None = None
        try:
            rest = orjson.loads(b"{" + body)
            if isinstance(rest, dict) and not _ENVELOPE_KEYS & rest.keys():
                e = parse_event({"v": 1, "trace": "t", "process": "p", "seq": 0, **rest}, "", 0)
                parts = (e.type, e.params, e.observed, e.time, e.clock, e.params_key)
        except (orjson.JSONDecodeError, TraceFormatError):
            parts = None  # the general path reports it, with its own message
        if self.kept + len(body) > self.budget:
            self.bodies.clear()
            self.kept = 0
        self.bodies[body] = parts
        self.kept += len(body)
        return parts


def line_key(raw: bytes, max_line_bytes: int) -> str | None:
    """The trace :func:`line_record` will most likely charge a line to, read from its text alone."""
    if len(raw) > max_line_bytes:
        return _guess_trace(raw[:max_line_bytes])
    return trace_key(raw)


def line_record(
    decoder: LineDecoder, raw: bytes, file: str, number: int, max_line_bytes: int
) -> tuple[str | None, Event | InputError]:
    """The trace a line is charged to, and its event or what is wrong with it.

    ``raw`` is the line without its newline; of a line longer than ``max_line_bytes`` only the first
    ``max_line_bytes`` bytes are needed. The in-process reader and the Spark run both read lines here.
    """
    if len(raw) > max_line_bytes:
        message = f"line is longer than {max_line_bytes:,} bytes (the limit; see --max-line-bytes)"
        trace = _guess_trace(raw[:max_line_bytes])
        return trace, InputError(file, number, message, trace)
    try:
        event = decoder.event(raw, file, number)
    except orjson.JSONDecodeError as exc:
        trace = _guess_trace(raw)
        return trace, InputError(file, number, _not_json(raw, exc), trace)
    except TraceFormatError as exc:
        trace = exc.error.trace or _guess_trace(raw)
        return trace, attrs.evolve(exc.error, trace=trace)
    return event.trace, event


def _not_json(raw: bytes, exc: orjson.JSONDecodeError) -> str:
    """What is wrong with a line that does not parse: not UTF-8 text, or not JSON."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        return (
            f"not valid UTF-8 (byte 0x{raw[bad.start]:02x} at column {bad.start + 1}): a trace file is UTF-8 text, "
            "one JSON object a line"
        )
    return f"not valid JSON: {exc}"


def is_parquet(path: str | Path) -> bool:
    """Is this a Parquet trace file (by its name)?"""
    return str(path).endswith(PARQUET_SUFFIX)


def _trace_keys(path: Path, max_line_bytes: int) -> Iterator[tuple[int, str | None]]:
    """(line or row number, the trace it most likely belongs to): the first pass. It reads the whole file,
    also where the second pass gives the file up: a trace with lines past that point is then known to be
    unfinished."""
    if is_parquet(path):
        yield from _parquet_guarded(parquet_trace_keys(path), path)
        return
    yield from line_keys(_lines(path, max_line_bytes))


def line_keys(lines: Iterable[tuple[int, bytes, bool]]) -> Iterator[tuple[int, str | None]]:
    """(line number, the trace it most likely belongs to) for lines as :func:`stream_lines` gives them."""
    for number, raw, _too_long in lines:
        yield number, trace_key(raw)


def _records(
    path: Path, max_line_bytes: int, decoder: LineDecoder
) -> Iterator[tuple[int, str | None, Event | InputError]]:
    """(line or row number, trace charged, event or error) for each line or row: the second pass."""
    if is_parquet(path):
        yield from _parquet_guarded(parquet_records(path, max_line_bytes), path)
        return
    yield from line_records(_lines(path, max_line_bytes), str(path), max_line_bytes, decoder)


def line_records(
    lines: Iterable[tuple[int, bytes, bool]], name: str, max_line_bytes: int, decoder: LineDecoder
) -> Iterator[tuple[int, str | None, Event | InputError]]:
    """(line number, trace charged, event or error) for lines of file ``name`` as :func:`stream_lines`
    gives them."""
    event = decoder.event
    for number, raw, too_long in lines:
        if not too_long:
            try:  # the usual case, in few steps
                e = event(raw, name, number)
            except (orjson.JSONDecodeError, TraceFormatError):
                pass
            else:
                yield number, e.trace, e
                continue
        else:  # stream_lines keeps max_line_bytes of the line; one more byte says it is longer
            raw += b" "
        trace, item = line_record(decoder, raw, name, number, max_line_bytes)
        yield number, trace, item


def _parquet_guarded(items: Iterator[_T], path: Path) -> Iterator[_T]:
    try:
        yield from items
    except ParquetFileError as exc:
        raise TraceFileError(str(exc)) from None
    except (OSError, pa.ArrowException) as exc:
        raise TraceFileError(f"{path}: cannot be read as Parquet: {exc}") from None


class LastLines:
    """The last line of each trace, over files read in order: the reader's first pass.

    Lines are noted a run at a time (consecutive lines of one trace), as (hash of the trace id, file,
    last line of the run), 24 bytes a run in arrays; every million runs, and at the end, only the
    last run of each hash is kept. Two ids with the same 64-bit hash share an entry: only the later
    of their last lines is noted, and the other trace is handed over when the input ends, whole. Its
    verdict is the same; only the memory it is held in differs.
    """

    COMPACT_EVERY = 1 << 20

    def __init__(self) -> None:
        self._hashes: list[int] = []
        self._files: list[int] = []
        self._lines: list[int] = []
        self._kept = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))

    def read(self, file: int, keys: Iterator[tuple[int, str | None]]) -> None:
        """Note the lines of one file: (line number, the trace it belongs to, or None)."""
        current, run_end = None, 0
        for number, trace in keys:
            if trace != current:
                if current is not None:
                    self._note(current, file, run_end)
                current = trace
            run_end = number
        if current is not None:
            self._note(current, file, run_end)

    def _note(self, trace: str, file: int, line: int) -> None:
        self._note_hash(hash(trace), file, line)

    def _note_hash(self, trace_hash: int, file: int, line: int) -> None:
        self._hashes.append(trace_hash)
        self._files.append(file)
        self._lines.append(line)
        if len(self._hashes) >= self.COMPACT_EVERY:
            self._compact()

    def _compact(self) -> None:
        hashes, files, lines = (
            np.concatenate((kept, np.asarray(new, np.int64)))
            for kept, new in zip(self._kept, (self._hashes, self._files, self._lines), strict=True)
        )
        order = np.lexsort((lines, files, hashes))  # by hash, then in reading order
        hashes, files, lines = hashes[order], files[order], lines[order]
        last = np.ones(len(hashes), bool)
        last[:-1] = hashes[1:] != hashes[:-1]
        self._kept = (hashes[last], files[last], lines[last])
        self._hashes, self._files, self._lines = [], [], []

    def by_file(self, files: int) -> list[np.ndarray]:
        """For each file, the numbers of the lines that end a trace, in increasing order."""
        self._compact()
        _, in_file, lines = self._kept
        return [np.sort(lines[in_file == k]) for k in range(files)]


def read_events(
    paths: Sequence[str | Path],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    actions: Collection[str] | None = None,
) -> Iterator[Event | InputError]:
    """Every event of the files, and every line that cannot be read, in reading order (not by trace).
    ``actions``: the spec's action names, for TLC's JSON traces (:mod:`ledgerspec.conformance.tlc_json`)."""
    decoder = LineDecoder()
    for path in expand_paths(paths):
        if is_document(path):
            _, document_events, document_errors = read_document(path, actions)
            yield from document_errors
            yield from document_events
            continue
        for _, _, item in _records(path, max_line_bytes, decoder):
            yield item


def read_traces(
    paths: Sequence[str | Path],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    stats: ReadStats | None = None,
    actions: Collection[str] | None = None,
    max_bad_lines: int | None = DEFAULT_MAX_BAD_LINES,
) -> Iterator[TraceInput | InputError]:
    """Each trace of the files, complete, as soon as its last line is read; and each unreadable line
    that names no trace, as an :class:`InputError`. ``stats`` counts what the read holds; ``actions``
    are the spec's action names, for TLC's JSON traces (:mod:`ledgerspec.conformance.tlc_json`);
    ``max_bad_lines``: a file is given up after that many bad lines (None: never)."""
    stats = stats if stats is not None else ReadStats()
    files = expand_paths(paths)
    last_lines = LastLines()
    for k, path in enumerate(files):
        if not is_document(path):
            last_lines.read(k, _trace_keys(path, max_line_bytes))
    last = last_lines.by_file(len(files))
    del last_lines

    holding = Holding(stats)
    decoder = LineDecoder()
    for index, path in enumerate(files):
        if is_document(path):
            document_trace, document_events, document_errors = read_document(path, actions)
            yield TraceInput(document_trace, tuple(document_events), tuple(document_errors))
            continue
        records = _records(path, max_line_bytes, decoder)
        if max_bad_lines is None:
            yield from holding.take(records, last[index])
            continue
        bounded = _BadLineBound(records, str(path), max_bad_lines)
        yield from holding.take(bounded, last[index])
        if bounded.stopped_at is not None:  # the traces not yet complete may have more lines past it
            holding.cut_short(bounded.stopped_at)
    yield from holding.rest()


class _BadLineBound:
    """The records of one file up to its bad line number ``limit + 1``, which is replaced by an error
    saying that the reader stops there; ``stopped_at`` is then that error."""

    def __init__(self, records: Iterator[tuple[int, str | None, Event | InputError]], name: str, limit: int) -> None:
        self.records = records
        self.name = name
        self.limit = limit
        self.stopped_at: InputError | None = None

    def __iter__(self) -> Iterator[tuple[int, str | None, Event | InputError]]:
        bad = 0
        for number, trace, item in self.records:
            if type(item) is not Event:
                bad += 1
                if bad > self.limit:
                    self.stopped_at = InputError(
                        self.name,
                        number,
                        f"more than {self.limit:,} bad lines: the rest of the file is not read "
                        "(the limit; see --max-bad-lines)",
                    )
                    yield number, None, self.stopped_at
                    return
            yield number, trace, item


class Holding:
    """The events and errors of the traces not yet complete: the reader's second pass.

    Each trace is handed over whole at the line that ends it (given by its first pass), and each bad
    line that names no trace as soon as it is read. ``stats.peak_buffered`` counts the events held.
    """

    def __init__(self, stats: ReadStats | None = None) -> None:
        self.stats = stats if stats is not None else ReadStats()
        self.events: dict[str, list[Event]] = {}
        self.errors: dict[str, list[InputError]] = {}
        self.buffered = 0

    def take(
        self, records: Iterable[tuple[int, str | None, Event | InputError]], ends: np.ndarray
    ) -> Iterator[TraceInput | InputError]:
        """The records of one file (line number, trace charged, event or error), in reading order, and
        the numbers of the lines that end a trace in it, in increasing order."""
        events, errors, stats = self.events, self.errors, self.stats
        at = 0
        end = int(ends[0]) if len(ends) else -1  # the next line that is the last of its trace
        for number, trace, item in records:
            while 0 <= end < number:  # (a line that ends its trace was not given: skip it)
                at += 1
                end = int(ends[at]) if at < len(ends) else -1
            ended = number == end
            if type(item) is Event:
                trace = item.trace
                held = events.get(trace)
                if held is None:
                    events[trace] = [item]
                else:
                    held.append(item)
                self.buffered += 1
                if ended:
                    yield self._hand_over(trace)
                continue
            assert isinstance(item, InputError)
            if trace is None:
                yield item
                continue
            errors.setdefault(trace, []).append(item)
            if ended:
                yield self._hand_over(trace)
        stats.peak_buffered = max(stats.peak_buffered, self.buffered)

    def _hand_over(self, trace: str) -> TraceInput:
        self.stats.peak_buffered = max(self.stats.peak_buffered, self.buffered)
        done = self.events.pop(trace, [])
        self.buffered -= len(done)
        return TraceInput(trace, tuple(done), tuple(self.errors.pop(trace, ())))

    def cut_short(self, stop: InputError) -> None:
        """The reader stopped reading a file at ``stop``: every trace not yet complete may have lines past
        it, and is charged with that line, so that its check says it is incomplete."""
        for trace in self._unfinished():
            self.errors.setdefault(trace, []).append(attrs.evolve(stop, trace=trace))

    def _unfinished(self) -> list[str]:
        """The traces held: begun, and not yet ended."""
        return list(self.events) + [t for t in self.errors if t not in self.events]

    def rest(self) -> Iterator[TraceInput]:
        """The traces still held when the input ends: those whose last line the first pass did not note
        (two ids on one hash), and lines the two passes disagree on (a file changed under us)."""
        for trace in self._unfinished():
            yield self._hand_over(trace)
