"""``ledgerspec check --spark``: the same verdicts, counts and bad-line reports as the in-process run, on
NDJSON and Parquet files with conforming traces, violating traces and bad lines, in ``local[2]`` and in
local-cluster mode (separate executor JVMs)."""

from __future__ import annotations

import gzip
import json
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ledgerspec.conformance import Bounds, TraceChecker, Verdict, check_files
from ledgerspec.conformance.generate import random_walk, trace_events
from ledgerspec.conformance.parquet import SCHEMA, write_parquet
from ledgerspec.conformance.run import CheckRun
from ledgerspec.conformance.spark import check_on_spark
from ledgerspec.conformance.spark_tasks import SparkCheck
from ledgerspec.spec.ledger.ledger import LedgerSpec

pytestmark = pytest.mark.spark

MODEL = {"MaxEntries": 3, "MaxLoss": 1, "MaxCrashes": 1}
CONSTANTS = [x for name, value in MODEL.items() for x in ("--const", f"{name}={value}")]
MAX_LINE = 4096  # a small limit, so that a test line can pass it
SPEC = LedgerSpec(**MODEL)
LONGER = {"WriterClosesLedger": 0.05, "RecovererStartsRecovery": 0.05}


def _traces(spec: LedgerSpec, prefix: str, count: int, seed: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    walks = (random_walk(spec, rng, 30, weights=LONGER) for _ in range(count))
    return [trace_events(spec, walk, "full", f"{prefix}{i}") for i, walk in enumerate(walks)]


def _lines(traces: list[list[dict[str, Any]]]) -> list[bytes]:
    return [orjson.dumps(e) for t in traces for e in t]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of trace files with every kind of verdict and of bad input, in NDJSON and Parquet."""
    root = tmp_path_factory.mktemp("mixed")
    good = _traces(SPEC, "good-", 8, 1)
    bad = _traces(LedgerSpec(**MODEL, Bug="lac_before_qa"), "bug-", 8, 2)
    lines = _lines(good[:5] + bad[:5])
    lines[3] = lines[3][:40]  # cut short: not JSON
    lines.insert(7, b"")
    lines.insert(8, b"   \t")
    lines[20] = lines[20].replace(b'"type":"', b'"type":"Writer', 1)  # an unknown event type
    lines[30] = lines[30][:-1] + b',"x-pad":"' + b"p" * MAX_LINE + b'"}'  # too long
    lines[40] = lines[40] + b"\r"  # a CRLF line: still one event
    lines[25] = orjson.dumps(dict(reversed(orjson.loads(lines[25]).items())))  # another layout: keyed in Python
    lines.insert(50, b'{"v":1,"trace":"good-4","process":"writer","seq":99,"type":"\xff"}')  # not UTF-8
    lines.append(b"[1, 2, 3]")  # names no trace; after every violation of the file, so it leaves them decided
    split = good[5]
    lines += _lines([split[: len(split) // 2]])
    (root / "a.ndjson").write_bytes(b"\n".join(lines) + b"\n")
    rest = _lines([split[len(split) // 2 :], good[6]])
    last = orjson.loads(rest[-1])
    rest[-1] = orjson.dumps({**last, "process": "writer", "seq": 1})  # the writer's seq 1 again: out of order
    (root / "b.ndjson.gz").write_bytes(gzip.compress(b"\n".join(rest)))  # no final newline
    write_parquet(root / "c.parquet", [e for t in [good[7], *bad[5:]] for e in t])
    rows = [
        {
            "v": 1,
            "trace": "rows",
            "process": "writer",
            "seq": 1,
            "type": "WriterAddsEntry",
            "observed": '{"writer_lap":0',
        },
        {"v": None, "trace": "rows", "process": "writer", "seq": 2, "type": "WriterAddsEntry"},
        {"v": 1, "trace": "rows", "process": "writer", "seq": -3, "type": "WriterAddsEntry"},
        {"v": 1, "trace": "", "process": "writer", "seq": 4, "type": "WriterAddsEntry"},
    ]
    schema = pa.schema([f.with_nullable(True) for f in SCHEMA])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), root / "d.parquet")
    return root


def _job() -> SparkCheck:
    return SparkCheck("ledger", tuple(SPEC.values.items()), "full", Bounds(), MAX_LINE)


def _in_process(path: Path) -> tuple[CheckRun, list[Verdict]]:
    verdicts: list[Verdict] = []
    run = check_files(
        [path],
        TraceChecker(SPEC),
        max_line_bytes=MAX_LINE,
        each=lambda v: verdicts.append(v) if isinstance(v, Verdict) else None,
    )
    return run, verdicts


def _same_run(spark_run: CheckRun, run: CheckRun) -> None:
    assert (spark_run.traces, spark_run.events, spark_run.conforms) == (run.traces, run.events, run.conforms)
    assert [v.to_json() for v in spark_run.violations] == [v.to_json() for v in run.violations]
    assert [v.to_json() for v in spark_run.inconclusive] == [v.to_json() for v in run.inconclusive]
    assert spark_run.input_errors == run.input_errors


def test_a_line_no_trace_claims_leaves_the_violations_after_it_undecided(spark: Any, tmp_path: Path) -> None:
    """A bad line that names no trace may be any trace's lost event: a violation later in its file is then
    inconclusive, one earlier stays a violation; the same in-process and on Spark, in the table too."""
    bad = _traces(LedgerSpec(**MODEL, Bug="lac_before_qa"), "bug-", 8, 2)
    run, _ = _in_process_lines(tmp_path / "plain.ndjson", _lines(bad))
    violating = [v for v in run.violations if v.failure is not None]
    assert len(violating) >= 2
    first, second = sorted(violating, key=lambda v: v.failure.line if v.failure else 0)[:2]
    assert first.failure is not None and second.failure is not None
    lines = _lines(bad)
    lines.insert(first.failure.line, b"[1, 2, 3]")  # after the first violation's failing event, before the second's
    path = tmp_path / "stray" / "a.ndjson"
    path.parent.mkdir()
    run, _ = _in_process_lines(path, lines)
    assert first.trace in {v.trace for v in run.violations}
    undecided = {v.trace: v for v in run.inconclusive}
    assert second.trace in undecided and second.trace not in {v.trace for v in run.violations}
    assert undecided[second.trace].input_errors[0].line == first.failure.line + 1
    assert "expected a JSON object" in undecided[second.trace].reason
    result = check_on_spark(spark, [path.parent], _job(), tmp_path / "out")
    _same_run(result.run, run)
    table = pq.read_table(result.verdicts).to_pylist()
    statuses = {row["trace"]: row["status"] for row in table}
    assert statuses[first.trace] == "violates" and statuses[second.trace] == "inconclusive"


def _in_process_lines(path: Path, lines: list[bytes]) -> tuple[CheckRun, list[Verdict]]:
    path.write_bytes(b"\n".join(lines) + b"\n")
    return _in_process(path)


def test_spark_gives_the_in_process_verdicts_and_errors(spark: Any, mixed: Path, tmp_path: Path) -> None:
    run, verdicts = _in_process(mixed)
    assert run.traces == 17 and run.conforms >= 3 and len(run.violations) >= 3 and len(run.inconclusive) >= 5
    assert {"c.parquet", "a.ndjson"} <= {Path(v.failure.file).name for v in run.violations if v.failure}
    messages = " ".join(e.message for e in run.input_errors)
    for expected in (
        "not valid JSON",
        "expected a JSON object",
        "unknown event type",
        "line is longer than 4,096 bytes",
        "out-of-order sequence number",
        "'observed' is not valid JSON",
        "not a trace event",
        "'seq' must be an integer",
        "'trace' must be a non-empty string",
    ):
        assert expected in messages, expected
    result = check_on_spark(spark, [mixed], _job(), tmp_path / "out")
    _same_run(result.run, run)
    # The verdict table: one row per trace, Verdict.to_row() and the verdict's JSON when it does not conform.
    table = pq.read_table(tmp_path / "out" / "verdicts.parquet").to_pylist()
    assert sorted(r["trace"] for r in table) == sorted(v.trace for v in verdicts)
    by_trace = {v.trace: v for v in verdicts}
    for row in table:
        verdict = by_trace[row["trace"]]
        assert {k: row[k] for k in verdict.to_row()} == verdict.to_row()
        assert (json.loads(row["verdict_json"]) if row["verdict_json"] else None) == (
            verdict.to_json() if verdict.status != "conforms" else None
        )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (summary["traces"], summary["events"]) == (run.traces, run.events)


@pytest.mark.parametrize("range_bytes", [4000, 20000])
def test_files_cut_in_small_ranges_give_the_in_process_verdicts(
    spark: Any, mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, range_bytes: int
) -> None:
    """Ranges of a few dozen lines: every trace of the file has lines in several ranges, and goes through the
    shuffle; a line cut by a range's end belongs to the range it begins in; every number and error is the same."""
    from ledgerspec.conformance import spark as spark_module

    monkeypatch.setattr(spark_module, "PARTITION_BYTES", range_bytes)
    monkeypatch.setattr(spark_module, "MIN_RANGE_BYTES", range_bytes)
    run, _ = _in_process(mixed)
    _same_run(check_on_spark(spark, [mixed], _job(), tmp_path / "out").run, run)


def test_files_spark_reads_itself_give_the_in_process_verdicts(
    spark: Any, mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NDJSON files outside the machines' own file system (HDFS, S3) are read by Spark's text reader."""
    from ledgerspec.conformance import spark as spark_module

    monkeypatch.setattr(spark_module, "_local_path", lambda uri: None)
    run, _ = _in_process(mixed)
    _same_run(check_on_spark(spark, [mixed], _job(), tmp_path / "out").run, run)


def test_a_trace_file_and_its_parquet_conversion_give_the_same_verdicts(spark: Any, tmp_path: Path) -> None:
    """Converted to Parquet (``ledgerspec convert-traces``), row n is line n: the verdicts differ in the
    file's name only."""
    ndjson, parquet = tmp_path / "t.ndjson", tmp_path / "t.parquet"
    traces = _traces(SPEC, "g", 6, 3) + _traces(LedgerSpec(**MODEL, Bug="lac_before_qa"), "b", 6, 4)
    ndjson.write_bytes(b"".join(line + b"\n" for line in _lines(traces)))
    from ledgerspec.tools.cli.main import main

    assert main(["convert-traces", str(ndjson), "--to", "parquet", str(parquet)]) == 0
    run, _ = _in_process(ndjson)
    assert run.violations and run.conforms
    spark_run = check_on_spark(spark, [parquet], _job(), tmp_path / "out").run
    assert (spark_run.traces, spark_run.events, spark_run.conforms) == (run.traces, run.events, run.conforms)
    renamed = [orjson.loads(orjson.dumps(v.to_json()).replace(b"t.parquet", b"t.ndjson")) for v in spark_run.violations]
    assert renamed == [v.to_json() for v in run.violations]


def test_what_is_shipped_to_executors_is_plain_data() -> None:
    job = _job()
    data = pickle.dumps(job)
    assert len(data) < 1000 and pickle.loads(data) == job
    checker = job.checker()
    assert checker is job.checker()  # one per worker process, with its caches
    assert checker.spec.values == SPEC.values


def test_local_cluster_mode_with_separate_executors(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line, in a process of its own, on Spark's local-cluster master: two executor JVMs."""
    from ledgerspec.tools.cli.main import main

    argv = ["check", str(mixed), *CONSTANTS, "--max-line-bytes", str(MAX_LINE), "--json"]
    code = main(argv)
    in_process_json = json.loads(capsys.readouterr().out)
    master = "local-cluster[2,1,1024]"
    out = tmp_path / "out"
    got = subprocess.run(
        [sys.executable, "-m", "ledgerspec.tools.cli.main", *argv, "--spark", "--master", master, "--out", str(out)],
        capture_output=True,
        check=False,
        timeout=300,
    )
    assert got.returncode == code == 1, got.stderr.decode()[-3000:]
    spark_json = json.loads(got.stdout)
    assert spark_json.pop("verdict_table") == str(out / "verdicts.parquet")
    spark_json.pop("seconds"), in_process_json.pop("seconds")
    assert spark_json.pop("coverage") is None  # executors gather none
    in_process_json.pop("coverage")
    assert spark_json == in_process_json
    assert pq.read_table(out / "verdicts.parquet").num_rows == in_process_json["traces"]
    assert not re.search(rb" (WARN|INFO) ", got.stderr), got.stderr.decode()[-3000:]  # Spark's logging kept quiet


def test_an_empty_file_is_an_error_on_spark_too(spark: Any, tmp_path: Path) -> None:
    from ledgerspec.conformance.reader import TraceFileError

    (tmp_path / "empty.ndjson").write_bytes(b"")
    with pytest.raises(TraceFileError, match=r"empty\.ndjson: empty file: it holds no trace"):
        check_on_spark(spark, [tmp_path], _job(), tmp_path / "out")
