"""Reading trace files (NDJSON, one event per line), one trace at a time, in bounded memory.

Two passes over the input. The first notes, for each trace id, the last line
holding one of its events: one small entry per trace. The second reads the
events, keeps those of traces not yet complete, and hands each trace over as
soon as its last line is read. With each trace's lines together (the usual
way to write them) one trace is in memory at a time; traces interleaved in a
file, or spread over several files (one per process), are held until their
last line, which is as little as merging them allows.

Files are read in the order given; a directory stands for its ``*.ndjson``
and ``*.jsonl`` files (also gzipped, ``.gz``) in name order. Blank lines are
skipped. A line longer than ``max_line_bytes`` is not read into memory: it
is reported, and the reader goes on at the next line.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, cast

import attrs
import orjson
from ledgerspec.conformance.events import Event, InputError, TraceFormatError, parse_event

__all__ = ["DEFAULT_MAX_LINE_BYTES", "ReadStats", "TraceFileError", "TraceInput", "expand_paths", "read_traces"]

DEFAULT_MAX_LINE_BYTES = 1 << 20
_SUFFIXES = (".ndjson", ".jsonl", ".ndjson.gz", ".jsonl.gz")
# The way this project writes events, and the fast way to find their trace id in the first pass.
_CANONICAL = b'{"v":1,"trace":"'
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

    lines: int = 0
    buffered: int = 0
    peak_buffered: int = 0


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files to read: each path, or the trace files of a directory."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES))
            if not found:
                raise TraceFileError(f"{path}: directory holds no trace files ({', '.join(_SUFFIXES)})")
            files += found
        elif path.is_file():
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
    """(line number, bytes, too long) for each non-blank line; a too-long line gives its first bytes only."""
    with _open(path) as f:
        number = 0
        try:
            while True:
                raw = f.readline(limit + 1)
                if not raw:
                    return
                number += 1
                if len(raw) > limit and not raw.endswith(b"\n"):
                    while True:  # skip the rest of the line without holding it
                        rest = f.readline(1 << 20)
                        if not rest or rest.endswith(b"\n"):
                            break
                    yield number, raw, True
                elif raw.strip():
                    yield number, raw, False
        except (OSError, EOFError) as exc:
            raise TraceFileError(f"{path}:{number + 1}: cannot be read: {exc}") from None


def _guess_trace(raw: bytes) -> str | None:
    found = _TRACE_FIELD.search(raw)
    return found.group(1).decode("utf-8", "replace") if found else None


def _trace_of(raw: bytes) -> str | None:
    if raw.startswith(_CANONICAL):
        end = raw.find(b'"', len(_CANONICAL))
        if end > 0 and b"\\" not in raw[len(_CANONICAL) : end]:
            return raw[len(_CANONICAL) : end].decode("utf-8", "replace")
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _guess_trace(raw)
    if isinstance(obj, dict) and isinstance(obj.get("trace"), str):
        return str(obj["trace"])
    return _guess_trace(raw)


def read_traces(
    paths: Sequence[str | Path], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, stats: ReadStats | None = None
) -> Iterator[TraceInput | InputError]:
    """Each trace of the files, complete, as soon as its last line is read; and each unreadable line
    that names no trace, as an :class:`InputError`. ``stats`` counts what the read holds."""
    stats = stats if stats is not None else ReadStats()
    files = expand_paths(paths)
    last: dict[str, tuple[int, int]] = {}
    for index, path in enumerate(files):
        for number, raw, _too_long in _lines(path, max_line_bytes):
            trace_id = _trace_of(raw)
            if trace_id is not None:
                last[trace_id] = (index, number)

    events: dict[str, list[Event]] = {}
    errors: dict[str, list[InputError]] = {}
    for index, path in enumerate(files):
        name = str(path)
        for number, raw, too_long in _lines(path, max_line_bytes):
            stats.lines += 1
            error: InputError | None = None
            trace: str | None
            if too_long:
                trace = _guess_trace(raw)
                error = InputError(
                    name,
                    number,
                    f"line is longer than {max_line_bytes:,} bytes (the limit; see --max-line-bytes)",
                    trace,
                )
            else:
                try:
                    event = parse_event(orjson.loads(raw), name, number)
                    trace = event.trace
                    events.setdefault(trace, []).append(event)
                    stats.buffered += 1
                    stats.peak_buffered = max(stats.peak_buffered, stats.buffered)
                except orjson.JSONDecodeError as exc:
                    trace = _guess_trace(raw)
                    error = InputError(name, number, f"not valid JSON: {exc}", trace)
                except TraceFormatError as exc:
                    trace = exc.error.trace or _guess_trace(raw)
                    error = attrs.evolve(exc.error, trace=trace)
            if error is not None:
                if trace is None:
                    yield error
                    continue
                errors.setdefault(trace, []).append(error)
            assert trace is not None
            if last.get(trace) == (index, number):
                done = tuple(events.pop(trace, ()))
                stats.buffered -= len(done)
                yield TraceInput(trace, done, tuple(errors.pop(trace, ())))
    # Only when the two passes disagree about a line (a file changed under us, duplicate keys):
    for trace in list(events) + [t for t in errors if t not in events]:
        yield TraceInput(trace, tuple(events.pop(trace, ())), tuple(errors.pop(trace, ())))
