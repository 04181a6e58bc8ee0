"""Reading trace files: bad lines are reported with file and line and the rest is still checked;
traces are streamed, one at a time when their lines are together."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledgerspec.conformance import TraceChecker
from ledgerspec.conformance.generate import random_walk, trace_events, write_ndjson
from ledgerspec.conformance.reader import LastLines, TraceFileError, TraceInput, read_traces
from ledgerspec.conformance.run import CheckRun, check_files
from ledgerspec.spec.ledger.ledger import LedgerSpec

SPEC = LedgerSpec(MaxEntries=3)


def traces(count: int, seed: int = 1, mode: str = "full", **options: Any) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    return [
        trace_events(SPEC, random_walk(SPEC, rng, 30, weights={"WriterClosesLedger": 0.1}), mode, f"t{i}", **options)
        for i in range(count)
    ]


def lines_of(objs: list[list[dict[str, Any]]]) -> list[bytes]:
    return [json.dumps(o, separators=(",", ":")).encode() for events in objs for o in events]


def run(tmp_path: Path, lines: list[bytes], mode: str = "full", **options: Any) -> tuple[CheckRun, Path]:
    path = tmp_path / "traces.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return check_files([path], TraceChecker(SPEC, mode), **options), path


def line_of(lines: list[bytes], needle: bytes, after: int = 0) -> int:
    """1-based number of the first line at or after ``after`` holding ``needle``."""
    return next(i for i, line in enumerate(lines, 1) if i > after and needle in line)


def test_clean_files_conform(tmp_path: Path) -> None:
    result, _ = run(tmp_path, lines_of(traces(30)))
    assert (result.traces, result.conforms, result.violations, result.input_errors) == (30, 30, [], [])
    assert result.events == sum(len(t) for t in traces(30))


def test_a_malformed_line_is_reported_and_the_rest_is_checked(tmp_path: Path) -> None:
    lines = lines_of(traces(10))
    bad = line_of(lines, b'"trace":"t4"')
    lines[bad - 1] = lines[bad - 1][:40]  # cut short: not JSON any more
    result, path = run(tmp_path, lines)
    (error,) = result.input_errors
    assert (error.file, error.line, error.trace) == (str(path), bad, "t4")
    assert error.message.startswith("not valid JSON: ")
    assert result.traces == 10 and result.conforms == 9
    (t4,) = result.inconclusive
    assert t4.trace == "t4" and f"{path}:{bad}" in t4.reason


def test_a_line_naming_no_trace_is_reported_alone(tmp_path: Path) -> None:
    lines = lines_of(traces(3))
    lines.insert(2, b"[1, 2, 3]")
    lines.insert(5, b"{this is not json")
    result, _ = run(tmp_path, lines)
    assert [(e.line, e.trace) for e in result.input_errors] == [(3, None), (6, None)]
    assert "expected a JSON object (one event per line), got [1,2,3]" in result.input_errors[0].message
    assert result.traces == 3


def test_a_file_of_garbage_is_given_up_after_a_bounded_number_of_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "garbage.ndjson"
    path.write_bytes(random.Random(7).randbytes(2_000_000))
    started = time.perf_counter()
    result = check_files([path], TraceChecker(SPEC), max_bad_lines=10)
    assert time.perf_counter() - started < 5  # (reading the whole file line by line takes longer)
    assert len(result.input_errors) == 11 and result.traces == 0
    stop = result.input_errors[-1]
    assert stop.message == "more than 10 bad lines: the rest of the file is not read (the limit; see --max-bad-lines)"
    assert stop.line > result.input_errors[-2].line


def test_a_trace_left_unfinished_by_a_file_given_up_is_inconclusive(tmp_path: Path) -> None:
    t0, t1, t2 = (lines_of([t]) for t in traces(3))
    half = len(t1) // 2
    lines = t0 + t1[:half] + [b"%"] * 4 + t1[half:] + t2
    result, path = run(tmp_path, lines, max_bad_lines=3)
    stop = len(t0) + half + 4
    assert [(e.line, e.trace) for e in result.input_errors][-1] == (stop, None)
    assert len(result.input_errors) == 4
    assert result.traces == 2 and result.conforms == 1  # t2 lies past the end of the reading
    (t1_verdict,) = result.inconclusive
    assert t1_verdict.trace == "t1"
    assert any(f"{path}:{stop}: more than 3 bad lines" in str(e) for e in t1_verdict.input_errors)
    whole, _ = run(tmp_path, lines, max_bad_lines=None)
    assert whole.traces == 3 and len(whole.input_errors) == 4


def test_invalid_utf8_is_named_as_such(tmp_path: Path) -> None:
    lines = lines_of(traces(2))
    lines[3] = lines[3].replace(b'"trace":"t0"', b'"trace":"t\xe90"')
    lines.insert(1, b"\xff\xfe{}")
    result, _ = run(tmp_path, lines)
    messages = [e.message for e in result.input_errors]
    assert messages[0].startswith("not valid UTF-8 (byte 0xff at column 1)")
    assert messages[1].startswith("not valid UTF-8 (byte 0xe9 at column 18)")


def test_an_unknown_event_type_names_file_and_line(tmp_path: Path) -> None:
    objs = traces(5)
    objs[2][3] = {**objs[2][3], "type": "WriterFlies"}
    lines = lines_of(objs)
    result, _ = run(tmp_path, lines)
    (error,) = result.input_errors
    assert error.line == line_of(lines, b"WriterFlies")
    assert error.message.startswith("unknown event type 'WriterFlies': not an action of spec ledger (actions: ")
    assert result.conforms == 4
    (stopped,) = result.inconclusive
    assert stopped.trace == "t2" and stopped.checked == 3  # checked up to the bad event, not past it


def test_out_of_order_sequence_numbers_name_file_and_line(tmp_path: Path) -> None:
    objs = traces(4, observe="none")
    events = objs[1]
    writer = [i for i, o in enumerate(events) if o["process"] == "writer"]
    a, b = writer[0], writer[1]
    events[a], events[b] = events[b], events[a]  # the writer's log has two lines the wrong way round
    lines = lines_of(objs)
    result, path = run(tmp_path, lines)
    (error,) = result.input_errors
    first_line = line_of(lines, b'"trace":"t1"')
    assert error.line == first_line + b and error.file == str(path)
    assert error.message == (
        f"out-of-order sequence number: seq {events[b]['seq']} of process 'writer' in trace 't1' "
        f"comes after seq {events[a]['seq']} ({path}:{first_line + a})"
    )
    assert result.conforms == 3 and len(result.inconclusive) == 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"seq": 10**30}, "'seq' must be an integer from 0 to 2**63-1, got 1e+30"),
        ({"seq": -1}, "'seq' must be an integer from 0 to 2**63-1, got -1"),
        ({"v": 2}, "unsupported format version 2; this reader knows version 1"),
        ({"observerd": {}}, "unknown field 'observerd' (extensions are named 'x-...')"),
        ({"trace": "x" * 300}, "'trace' is 300 characters long, over the limit of 256"),
        ({"params": [1]}, "'params' must be an object, got [1]"),
        ({"observed": {"writer_lac": 10**20}}, "observed.writer_lac: integer 1e+20 is out of range"),
        ({"observed": {"writer_lac": True}}, "observed.writer_lac: expected an integer, got a boolean true"),
        ({"observed": {"bookie_lac": [1, 2]}}, "observed 'bookie_lac' is not observable in mode 'client'"),
        ({"observed": {"writer_lax": 1}}, "observed 'writer_lax' is neither a variable nor a projection"),
        ({"params": {"b": 1}}, "has no parameter 'b'"),
    ],
)
def test_bad_values_name_file_and_line(tmp_path: Path, edit: dict[str, Any], message: str) -> None:
    objs = traces(3, mode="client")
    target = objs[1][2]
    if "observed" in edit:
        edit = {"observed": {**target.get("observed", {}), **edit["observed"]}}
    objs[1][2] = {**target, **edit}
    lines = lines_of(objs)
    result, path = run(tmp_path, lines, mode="client")
    (error,) = result.input_errors
    assert message in error.message
    assert error.file == str(path) and error.line == line_of(lines, b'"trace":"t0"') + len(objs[0]) + 2
    assert result.traces == 3
    if "trace" in edit:  # a line whose trace id is not valid is charged to no trace
        assert error.trace is None
    else:
        assert result.conforms == 2 and [v.trace for v in result.inconclusive] == ["t1"]


def test_a_huge_line_is_not_read_into_memory(tmp_path: Path) -> None:
    lines = lines_of(traces(3))
    huge = orjson.loads(lines[4])
    huge["x-padding"] = "z" * 50_000
    lines[4] = orjson.dumps(huge)
    result, _ = run(tmp_path, lines, max_line_bytes=4096)
    (error,) = result.input_errors
    assert (error.line, error.trace) == (5, huge["trace"])
    assert error.message == "line is longer than 4,096 bytes (the limit; see --max-line-bytes)"
    assert result.traces == 3


def test_extension_fields_and_nulls_are_allowed(tmp_path: Path) -> None:
    objs = traces(2, mode="client")
    objs[0][1] = {**objs[0][1], "x-thread": "main", "time": 1700000000.25}
    objs[1][1] = {**objs[1][1], "observed": {"writer_lac": None}}
    result, _ = run(tmp_path, lines_of(objs), mode="client")
    assert result.conforms == 2 and not result.input_errors


def test_one_trace_at_a_time_when_lines_are_together(tmp_path: Path) -> None:
    objs = traces(50)
    path = tmp_path / "t.ndjson"
    write_ndjson(path, objs)
    result = check_files([path], TraceChecker(SPEC))
    assert result.peak_buffered_events == max(len(t) for t in objs)
    # Interleaved, two traces are held at once.
    mixed = [o for pair in zip(objs[0], objs[1], strict=False) for o in pair]
    write_ndjson(path, [mixed])
    result = check_files([path], TraceChecker(SPEC))
    assert result.conforms == 2 and result.peak_buffered_events > max(len(objs[0]), len(objs[1]))


def test_traces_spread_over_files_and_gzip_are_merged(tmp_path: Path) -> None:
    objs = traces(6, clocks=True)
    by_process: dict[str, list[dict[str, Any]]] = {}
    for events in objs:
        for o in events:
            by_process.setdefault(o["process"], []).append(o)
    assert len(by_process) > 2
    for process, events in by_process.items():
        with gzip.open(tmp_path / f"{process}.ndjson.gz", "wb") as f:
            f.writelines(orjson.dumps(o) + b"\n" for o in events)
    (tmp_path / "notes.txt").write_text("not a trace file")
    result = check_files([tmp_path], TraceChecker(SPEC))
    assert (result.traces, result.conforms) == (6, 6), [v.reason for v in result.inconclusive]


def test_the_index_of_last_lines_keeps_one_entry_a_trace() -> None:
    """Runs of a trace's lines, interleaved and over files: each trace ends at its last line, in the last
    file that holds it; compacting every few runs keeps one entry per trace and changes no answer."""
    keys = [
        [(1, "a"), (2, "a"), (3, "b"), (4, "a"), (6, None), (7, "c"), (8, "b")],
        [(1, "c"), (2, "d"), (3, "d")],
    ]
    for every in (1, 2, 1 << 20):
        index = LastLines()
        index.COMPACT_EVERY = every
        for k, file_keys in enumerate(keys):
            index.read(k, iter(file_keys))
        assert [ends.tolist() for ends in index.by_file(2)] == [[4, 8], [1, 3]]
        assert len(index._kept[0]) == 4  # a, b, c, d


def test_traces_whose_ids_share_a_hash_are_still_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With every id on one hash, the index notes one last line in all: the other traces are handed over
    when the input ends, each whole, and every verdict is the same."""
    objs = traces(6)
    path = tmp_path / "t.ndjson"
    write_ndjson(path, objs)
    monkeypatch.setattr(LastLines, "_note", lambda self, trace, file, line: LastLines._note_hash(self, 0, file, line))
    got = [t for t in read_traces([path]) if isinstance(t, TraceInput)]
    assert sorted((t.trace, len(t.events)) for t in got) == sorted((f"t{i}", len(t)) for i, t in enumerate(objs))
    assert got[0].trace == "t5"  # the one whose last line was noted comes first, at that line
    result = check_files([path], TraceChecker(SPEC))
    assert (result.traces, result.conforms) == (6, 6)


def test_files_that_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(TraceFileError, match=r"nope\.ndjson: no such file"):
        list(read_traces([tmp_path / "nope.ndjson"]))
    with pytest.raises(TraceFileError, match="directory holds no trace files"):
        list(read_traces([tmp_path]))
    (tmp_path / "empty.ndjson").write_bytes(b"")
    with pytest.raises(TraceFileError, match=r"empty\.ndjson: empty file: it holds no trace"):
        list(read_traces([tmp_path / "empty.ndjson"]))
    with pytest.raises(TraceFileError, match=r"empty\.ndjson: empty file: it holds no trace"):
        list(read_traces([tmp_path]))


def test_reader_yields_each_trace_complete(tmp_path: Path) -> None:
    objs = traces(5)
    path = tmp_path / "t.ndjson"
    write_ndjson(path, objs)
    got = [t for t in read_traces([path]) if isinstance(t, TraceInput)]
    assert [t.trace for t in got] == [f"t{i}" for i in range(5)]
    assert [len(t.events) for t in got] == [len(t) for t in objs]
    assert got[1].events[0].where == f"{path}:{len(objs[0]) + 1}"


@pytest.mark.parametrize(
    "raw",
    [
        b'{"v":1,"trace":"t1","process":"writer","seq":3,"type":"WriterAddsEntry"}',
        b'{"v":1,"trace":"t1","process":"writer","seq":3,"type":"WriterAddsEntry","observed":{"writer_lap":0}}\n',
        b'{"v":1,"trace":"t\\u00e9","process":"writer","seq":3,"type":"WriterAddsEntry"}',  # an escape
        '{"v":1,"trace":"té","process":"w","seq":3,"type":"X","x-note":"ü"}'.encode(),
        b'{"v":1,"trace":"t1","process":"writer","seq":03,"type":"X"}',  # not JSON: a leading zero
        b'{"v":1,"trace":"t1","process":"writer","seq":99999999999999999999,"type":"X"}',  # too large
        b'{"v":1,"trace":"t1","process":"writer","seq":9223372036854775807,"type":"X"}',
        b'{"v":1,"trace":"t1","process":"writer","seq":1,"type":"X","trace":"t2"}',  # a second trace key
        b'{"v":1,"trace":"t1","process":"writer","seq":1,"type":"X","params":{"c":1}} trailing',
        b'{"v":1,"trace":"t1","process":"writer","seq":1,"type":"X","observed":7}',
        b'{"v":1,"trace":"t\xff","process":"writer","seq":1,"type":"X"}',  # not UTF-8
        b'{"v":1,"trace":"t1","process":"writer","seq":1,"type":"X","clock":{"writer":1},"time":2.5}',
        b'{"seq":1,"v":1,"trace":"t1","process":"writer","type":"X"}',  # another order: the general path
    ],
)
def test_the_fast_path_reads_lines_as_a_json_parser_does(raw: bytes) -> None:
    """Lines in the usual layout skip the JSON parse of their envelope; they must give the same event,
    or the same error, as a full parse."""
    from ledgerspec.conformance.events import TraceFormatError, parse_event
    from ledgerspec.conformance.reader import LineDecoder

    def outcome(read: Any) -> Any:
        try:
            e = read()
        except (orjson.JSONDecodeError, TraceFormatError) as exc:
            return type(exc).__name__, str(exc)
        return (e.trace, e.process, e.seq, e.type, e.params, e.observed, e.time, e.clock, e.params_key)

    decoder = LineDecoder()
    general = outcome(lambda: parse_event(orjson.loads(raw), "f", 1))
    assert outcome(lambda: decoder.event(raw, "f", 1)) == general
    assert outcome(lambda: decoder.event(raw, "f", 1)) == general  # again, from the kept body


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([b"", b" ", b"a", b"abc", b"abcdefghij", b"\r", b"xyz" * 5]), max_size=12),
    st.booleans(),
    st.integers(1, 7),
    st.integers(1, 12),
)
def test_lines_are_split_like_the_text(parts: list[bytes], final_newline: bool, block: int, limit: int) -> None:
    """Block reading gives each line, with its number, as splitting the whole text would; a line over
    the limit is cut to it and flagged, whatever the block boundaries."""
    from ledgerspec.conformance import reader

    text = b"\n".join(parts) + (b"\n" if final_newline and parts else b"")
    expected = [
        (n, line[:limit], len(line) > limit)
        for n, line in enumerate(text.split(b"\n"), 1)
        if len(line) > limit or (line and not line.isspace())
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.ndjson"
        path.write_bytes(text)
        saved, reader.READ_BLOCK = reader.READ_BLOCK, block
        try:
            assert list(reader._lines(path, limit)) == expected
        finally:
            reader.READ_BLOCK = saved


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    st.booleans(),
    st.integers(1, 9),
    st.integers(0, 120),
    st.integers(0, 120),
)
def test_a_byte_range_owns_the_lines_that_begin_in_it(
    parts: list[bytes], final_newline: bool, block: int, first: int, last: int
) -> None:
    """The lines that begin in [first, last) of a text, read from the first of them on, are those of the
    whole text with their numbers; the ranges of a text, one after another, give each line once."""
    from ledgerspec.conformance import reader

    text = b"\n".join(parts) + (b"\n" if final_newline and parts else b"")
    first, last = min(first, last), max(first, last)
    starts = ([0] if text else []) + [i + 1 for i, c in enumerate(text) if c == 0x0A and i + 1 < len(text)]
    whole = list(enumerate(text.split(b"\n"), 1))[: len(starts)]
    owned = [(n, line) for (n, line), at in zip(whole, starts, strict=True) if first <= at < last]
    begin = next((at for at in starts if at >= first), len(text))
    numbered = reader.LineCount(sum(1 for at in starts if at < begin))
    saved, reader.READ_BLOCK = reader.READ_BLOCK, block
    try:
        lines = reader.stream_lines(io.BytesIO(text[begin:]), 1000, numbered, stop=last - begin)
        got = [(*line, begin + numbered.begins) for line in lines]  # and where each begins in the text
    finally:
        reader.READ_BLOCK = saved
    where = dict(zip(range(1, len(starts) + 1), starts, strict=True))
    assert got == [(n, line, False, where[n]) for n, line in owned if line and not line.isspace()]
    assert numbered.lines == (owned[-1][0] if owned else sum(1 for at in starts if at < begin))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=12),
    st.booleans(),
    st.integers(1, 9),
    st.lists(st.integers(0, 150), max_size=6),
)
def test_the_driver_numbers_a_range_s_first_line_as_the_reader_does(
    parts: list[bytes], final_newline: bool, block: int, offsets: list[int]
) -> None:
    """Spark's driver counts newlines to number each range's first line: the number the reader gives the
    first line that begins at or after the range's start."""
    from ledgerspec.conformance import spark

    text = b"\n".join(parts) + (b"\n" if final_newline and parts else b"")
    begins = ([0] if text else []) + [i + 1 for i, c in enumerate(text) if c == 0x0A and i + 1 < len(text)]
    starts = sorted({at for at in offsets if at < max(len(text), 1)})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.ndjson"
        path.write_bytes(text)
        saved, spark.COUNT_BLOCK = spark.COUNT_BLOCK, block
        try:
            got = spark._first_lines(str(path), starts)
        finally:
            spark.COUNT_BLOCK = saved
    assert got == [1 + sum(1 for at in begins if at < start) for start in starts]


def test_a_file_cut_short_names_the_line_where_reading_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzipped file cut in the middle: the error names the file and the line after the last block read."""
    from ledgerspec.conformance import reader

    lines = b"".join(b'{"v":1,"trace":"t","seq":%d}\n' % i for i in range(2000))
    path = tmp_path / "t.ndjson.gz"
    whole = gzip.compress(lines)
    path.write_bytes(whole[: len(whole) // 2])
    monkeypatch.setattr(reader, "READ_BLOCK", 256)
    with pytest.raises(TraceFileError, match=r"t\.ndjson\.gz:(\d+): cannot be read") as raised:
        list(reader._lines(path, 1000))
    line = int(re.search(r"gz:(\d+):", str(raised.value)).group(1))  # type: ignore[union-attr]
    assert 1 < line < 2000
