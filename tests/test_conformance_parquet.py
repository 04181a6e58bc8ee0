"""Parquet trace files read in this process: the same events and verdicts as the NDJSON they were converted
from, rows checked as lines (same messages, the row's number as the line), a file outside the layout refused
whole; ``ledgerspec convert-traces`` both ways."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ledgerspec.conformance import TraceChecker, check_files
from ledgerspec.conformance.generate import random_walk, trace_events, write_ndjson
from ledgerspec.conformance.parquet import SCHEMA, write_parquet
from ledgerspec.conformance.reader import TraceFileError, TraceInput, read_events, read_traces
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.tools.cli.main import main

SPEC = LedgerSpec(MaxEntries=3, MaxLoss=1, MaxCrashes=1)


def _traces(spec: LedgerSpec, count: int, seed: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    return [trace_events(spec, random_walk(spec, rng, 30), "full", f"t{i}", clocks=i % 2 == 0) for i in range(count)]


def test_converted_files_give_the_same_events_and_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ndjson, parquet, back = tmp_path / "a.ndjson", tmp_path / "a.parquet", tmp_path / "b.ndjson"
    buggy = LedgerSpec(MaxEntries=3, MaxLoss=1, MaxCrashes=1, Bug="lac_before_qa")
    traces = _traces(SPEC, 10, 1) + _traces(buggy, 10, 2)
    for i, t in enumerate(traces[10:]):
        for e in t:
            e["trace"] = f"b{i}"
    write_ndjson(ndjson, traces)
    assert main(["convert-traces", str(ndjson), "--to", "parquet", str(parquet)]) == 0
    assert main(["convert-traces", str(parquet), "--to", "ndjson", str(back)]) == 0
    assert "events written to" in capsys.readouterr().out
    assert back.read_bytes() == ndjson.read_bytes()  # the same lines, in the same order

    def events(path: Path) -> list[tuple[Any, ...]]:
        return [
            (e.trace, e.process, e.seq, e.type, e.params, e.observed, e.clock, e.line)
            for t in read_traces([path])
            if isinstance(t, TraceInput)
            for e in t.events
        ]

    assert events(parquet) == events(ndjson)
    runs = [check_files([p], TraceChecker(SPEC)) for p in (ndjson, parquet)]
    assert runs[0].violations and runs[0].conforms
    for a, b in zip(runs[0].violations, runs[1].violations, strict=True):
        assert orjson.loads(orjson.dumps(b.to_json()).replace(b"a.parquet", b"a.ndjson")) == a.to_json()


def test_bad_rows_get_the_messages_of_bad_lines(tmp_path: Path) -> None:
    add = "WriterAddsEntry"
    rows = [
        {"v": 1, "trace": "r", "process": "writer", "seq": 1, "type": add, "observed": '{"writer_lap":0}'},
        {"v": 1, "trace": "r", "process": "writer", "seq": 2, "type": add, "params": "[1]"},
        {"v": 2, "trace": "r", "process": "writer", "seq": 3, "type": add},
        {"v": 1, "trace": "r", "process": None, "seq": 4, "type": add},
        {"v": 1, "trace": "r", "process": "writer", "seq": 5, "type": add, "clock": "{oops"},
        {"v": 1, "trace": "", "process": "writer", "seq": 6, "type": add},
        {"v": 1, "trace": "r", "process": "writer", "seq": 7, "type": add, "params": '{"x":"' + "y" * 300 + '"}'},
    ]
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([f.with_nullable(True) for f in SCHEMA])), path)
    run = check_files([path], TraceChecker(SPEC), max_line_bytes=256)
    errors = [(e.line, e.trace, e.message) for e in run.input_errors]
    assert errors == [
        (6, None, "'trace' must be a non-empty string, got \"\""),  # names no trace: reported where it is read
        (2, "r", "'params' must be an object, got [1]"),
        (3, "r", "unsupported format version 2; this reader knows version 1"),
        (4, "r", "no 'process'"),
        (5, "r", "'clock' is not valid JSON: unexpected character, expected a string key: line 1 column 2 (char 1)"),
        (7, "r", "row is longer than 256 bytes (the limit; see --max-line-bytes)"),
    ]
    assert run.traces == 1 and run.inconclusive[0].checked == 1  # the first row is checked


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"seq": pa.string()}, "column 'seq' must hold an integer, not string"),
        ({"params": pa.struct([("b", pa.int64())])}, "column 'params' must hold JSON text"),
        ({"observerd": pa.string()}, "unknown column 'observerd'"),
        ({"type": None}, "no column 'type' (required by the trace layout)"),
    ],
)
def test_a_file_outside_the_layout_is_refused_whole(tmp_path: Path, columns: dict[str, Any], message: str) -> None:
    fields = [pa.field(f.name, columns.get(f.name, f.type)) for f in SCHEMA if columns.get(f.name, f.type) is not None]
    fields += [pa.field(n, t) for n, t in columns.items() if n not in SCHEMA.names]
    path = tmp_path / "odd.parquet"
    pq.write_table(pa.Table.from_pylist([], schema=pa.schema(fields)), path)
    with pytest.raises(TraceFileError) as caught:
        list(read_traces([path]))
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)


def test_extensions_are_allowed_and_not_read(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    write_parquet(path, [{"v": 1, "trace": "t", "process": "writer", "seq": 1, "type": "WriterAddsEntry"}])
    table = pq.read_table(path).append_column("x-host", pa.array(["h1"]))
    pq.write_table(table, path)
    (event,) = read_events([path])
    assert event.type == "WriterAddsEntry" and event.line == 1  # type: ignore[union-attr]
