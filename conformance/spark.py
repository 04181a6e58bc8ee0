"""Check trace files on Spark: ``ledgerspec check --spark``, the same verdicts as in-process, on a cluster.

The checker is the in-process one (:class:`~ledgerspec.conformance.checker.TraceChecker`,
a pure function of one trace); Spark brings the events of each trace together
and runs it on the executors. This module is the driver: the session, the
listing of the input and the plan; the stages the executors run, and the
tables they read and write, are :mod:`ledgerspec.conformance.spark_tasks`.
The plan:

1. List the input with Hadoop's file system API (any file system the cluster
   reads: local, HDFS, S3): files as given, directories as their trace
   files in name order, the order in which the in-process reader reads them.
2. NDJSON files on the machines' own file system (``file:`` URIs; on a
   cluster, a file system every machine mounts): cut in byte ranges of
   about ``PARTITION_BYTES``, one to a task (a gzipped file is one range).
   A range holds the lines that begin in it; the driver counts the newlines
   before each range, for the number of its first line.
3. Each task reads its range with the in-process reader's two passes
   (:class:`~ledgerspec.conformance.reader.Holding`), so lines, errors and
   numbers are the same, and checks every trace it has lines of, as soon as
   its last line is read. It notes, for each trace, its first and last line
   and where the first begins. The traces more than one range has lines of
   are *shared*: their verdicts from the ranges are dropped, and their lines
   alone are read again, from where they begin, and passed on.
4. NDJSON files elsewhere (HDFS, S3: any Hadoop file system), Parquet files
   and the passed-on lines: Spark's readers (text, with an id per line,
   numbered by a first job that counts the lines of each block; Parquet,
   the row number is the line), the trace of each line by a regular
   expression in the JVM that reads exactly what the reader's
   :func:`~ledgerspec.conformance.reader.trace_key` reads (others, few, by
   that function in Python), a shuffle by trace, sorted within each
   partition, and each trace's lines put back in reading order, decoded
   with the reader's functions (:func:`~ledgerspec.conformance.reader.line_record`,
   :func:`~ledgerspec.conformance.parquet.row_event`) and checked. Each
   trace is split into units when the spec's trace mapping has a partition
   key (:mod:`ledgerspec.conformance.partition`; the ledger spec has none:
   one ledger per trace). Each Python worker builds the spec and its
   checker once, from :class:`SparkCheck` (plain data: that is all that is
   shipped), and keeps the checker's caches from one trace and one task to
   the next, frozen out of the garbage collector's sight between tasks.
5. The verdicts, one row per trace (``Verdict.to_row()`` and the verdict as
   JSON when it is not *conforms*), are written as Parquet by Spark's
   writer; the driver collects the counts and the results that are not
   *conforms*, and builds the same :class:`~ledgerspec.conformance.run.CheckRun`
   the in-process run gives, in the same order.

Bad lines get the same errors, with the same file and line, as in-process.
Left out: coverage (executors check without gathering it, so the run has
none, and no HTML report); ITF and TLC JSON files (one JSON document per
trace) are read in-process only;
the units of one trace are checked in the task that gets the trace; each
Parquet file's columns are checked by a small job of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlparse

import attrs
import orjson
import pyarrow as pa
from ledgerspec.conformance.documents import is_document
from ledgerspec.conformance.events import InputError
from ledgerspec.conformance.parquet import (
    COLUMNS,
    ParquetFileError,
    check_layout,
)
from ledgerspec.conformance.reader import (
    TRACE_SUFFIXES,
    TraceFileError,
    is_parquet,
)
from ledgerspec.conformance.run import LARGEST_KEPT, CheckRun
from ledgerspec.conformance.spark_tasks import (
    CHECKED_COLUMNS,
    LINE_COLUMNS,
    PASSED_COLUMNS,
    RANGE_COLUMNS,
    RANGE_OUT_COLUMNS,
    ROW_COLUMNS,
    CheckRanges,
    CheckTraces,
    KeyLines,
    PassShared,
    SettleStrays,
    SparkCheck,
)
from ledgerspec.conformance.verdict import CONFORMS, VIOLATES, Verdict

from ledgerspec.java import JavaNotFound, java_home

__all__ = [
    "SparkRun",
    "SparkUnavailable",
    "StageProgress",
    "check_on_spark",
    "find_java_home",
    "spark_session",
]

DEFAULT_MASTER = "local[*]"
_SPARK_TYPES = {"v": "bigint", "seq": "bigint", "time": "double"}  # the others are strings
PARTITION_BYTES = 64 << 20  # NDJSON text checked by one task, about
MIN_RANGE_BYTES = 1 << 20  # the least of a file a task reads, when files are cut in ranges
COUNT_BLOCK = 16 << 20  # bytes read at a time where the driver counts a file's lines
SLOW_LINES_PER_TASK = 1_000_000  # lines keyed in Python (not in the usual layout) by one task, at most
PARQUET_RATIO = 8  # NDJSON bytes per byte of a Parquet trace file, about (JSON text compresses well)
_SCRATCH_REMOVAL_SECONDS = 5.0  # how long the scratch directory's removal is tried again while the JVM stops


class SparkUnavailable(Exception):  # noqa: N818
    """Spark cannot start here: no Java runtime."""


@attrs.define
class SparkRun:
    """What a Spark run found (as :class:`CheckRun`), and where it wrote its verdicts."""

    run: CheckRun
    verdicts: str  # URI of the verdict table (a Parquet directory)
    summary: str  # URI of summary.json
    master: str


# -- the session ------------------------------------------------------------------------------
def _is_local(master: str) -> bool:
    return master.startswith("local")


def find_java_home() -> str:
    """The Java installation Spark will run in (:mod:`ledgerspec.java`); :class:`SparkUnavailable` if none."""
    try:
        return str(java_home())
    except JavaNotFound as exc:
        raise SparkUnavailable(f"Spark needs a Java runtime, version 17 or 21: {exc}") from None


_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark's driver counts as a shell: unless Spark's loggers have a level of their own, Spark sets the
# console to WARN and says so.
logger.spark.name = org.apache.spark
logger.spark.level = error
"""


@contextmanager
def spark_session(master: str = DEFAULT_MASTER, *, app_name: str = "ledgerspec check") -> Iterator[Any]:
    """A Spark session for checking traces, with Spark's logging at ERROR and its scratch files under one
    temporary directory; both are gone at the end. When this process already has an active session, that
    one is used (whatever its master), and left running.

    With a local master (``local[N]``, ``local-cluster[...]``) the executors run this Python interpreter
    and listen on the loopback interface only; on a cluster they need ledgerspec installed.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    find_java_home()
    scratch: Path | None = None
    try:
        with _interrupts_held():  # a Ctrl-C between the directory's making and its name's keeping would leave it
            scratch = Path(tempfile.mkdtemp(prefix="ledgerspec-spark-"))
        log4j = scratch / "log4j2.properties"
        log4j.write_text(_LOG4J)
        java_options = f"-Dlog4j2.configurationFile={log4j.as_uri()} -Djava.io.tmpdir={scratch}"
        if _is_local(master):
            # The JVMs on this machine move rows between Python workers that do the work: the optimising
            # compiler's compilations cost them more CPU than they save (10M events on local-cluster[2,1,1024]:
            # JVM CPU 52.9 s with it, 26.7 to 32.8 s without), CPU the Python workers need.
            java_options += " -XX:TieredStopAtLevel=1"
        builder = (
            SparkSession.builder.master(master)
            .appName(app_name)
            .config("spark.local.dir", str(scratch / "local"))
            .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
            .config("spark.driver.extraJavaOptions", java_options)
            .config("spark.sql.session.timeZone", "UTC")
        )
        if _is_local(master):
            builder = (
                builder.config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.driver.host", "127.0.0.1")
                .config("spark.driver.bindAddress", "127.0.0.1")
                .config("spark.executor.extraJavaOptions", java_options)
            )
            # PySpark starts its Python workers with $PYSPARK_PYTHON (default python3): here, this interpreter.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        before = signal.getsignal(signal.SIGINT)
        session, cancelling = None, None
        try:
            with _interrupts_held():  # PySpark sets a SIGINT handler of its own as the session starts
                session = builder.getOrCreate()
                cancelling = _Cancelling(session.sparkContext)
            session.sparkContext.setLogLevel("ERROR")
            try:
                yield session
            except Exception:
                if cancelling.interrupted:  # the jobs cancelled by Ctrl-C fail: that is the interrupt
                    raise KeyboardInterrupt from None
                raise
            if cancelling.interrupted:
                raise KeyboardInterrupt
        finally:
            if cancelling is not None:
                cancelling.close()
            if before is not None and threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, before)
            if session is not None:
                session.stop()
    finally:
        if scratch is not None:
            _remove(scratch)


def _remove(scratch: Path) -> None:
    """Remove the session's scratch directory. The JVM may still be writing there as its stop ends (its threads
    wind down after ``stop`` returns), which can make one removal leave the directory: try again, for a while."""
    deadline = time.monotonic() + _SCRATCH_REMOVAL_SECONDS
    shutil.rmtree(scratch, ignore_errors=True)
    while scratch.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def _interrupts_held() -> Iterator[None]:
    """Ctrl-C waits until the end of the block (in the main thread; elsewhere Python gets no signal)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


class _Cancelling:
    """Ctrl-C during a session: Spark's jobs are cancelled, from a thread of its own, again and again so
    that no later job runs either, and the interrupt is raised as KeyboardInterrupt, at once when this
    process is not waiting on the JVM, else by :func:`spark_session` when the cancelled job fails.
    PySpark's own handler calls the JVM from inside the call it interrupts, which breaks the connection
    to the JVM and ends in a traceback."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self.interrupted = False
        self.done = threading.Event()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._on_interrupt)

    def _on_interrupt(self, signum: int, frame: FrameType | None) -> None:
        if not self.interrupted:
            self.interrupted = True
            threading.Thread(target=self._cancel, name="cancel Spark jobs", daemon=True).start()
        if not _in_jvm_call(frame):
            raise KeyboardInterrupt

    def _cancel(self) -> None:
        with contextlib.suppress(Exception):  # (the session is stopping)
            while not self.done.is_set():
                self.context.cancelAllJobs()
                self.done.wait(0.2)

    def close(self) -> None:
        """The session ends: no more cancelling."""
        self.done.set()


def _in_jvm_call(frame: FrameType | None) -> bool:
    """Is this frame, or one that called it, in py4j, the library that talks to the JVM?"""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("py4j."):
            return True
        frame = frame.f_back
    return False


# -- listing the input --------------------------------------------------------------------------
@attrs.frozen
class _InputFile:
    uri: str  # as Spark names it in _metadata.file_path
    name: str  # as the in-process reader names it
    parquet: bool
    size: int  # bytes

    @property
    def text_size(self) -> int:
        """About how many bytes of NDJSON the file holds."""
        return self.size * PARQUET_RATIO if self.parquet else self.size


def _hadoop(spark: Any, raw: str) -> tuple[Any, Any]:
    sc = spark.sparkContext
    path = sc._jvm.org.apache.hadoop.fs.Path(raw)
    return path, path.getFileSystem(sc._jsc.hadoopConfiguration())


def _has_scheme(raw: str) -> bool:
    head, sep, _ = raw.partition("://")
    return bool(sep) and head.isalnum()


def _list_input(spark: Any, paths: Sequence[str | Path]) -> list[_InputFile]:
    """The files to read, in the in-process reader's order, through Hadoop's file system API."""
    files = []
    for given in paths:
        raw = str(given)
        path, fs = _hadoop(spark, raw)
        if not fs.exists(path):
            raise TraceFileError(f"{raw if _has_scheme(raw) else Path(raw)}: no such file")
        status = fs.getFileStatus(path)
        if status.isDirectory():
            listed = [s.getPath() for s in fs.listStatus(path) if s.isFile()]
            children = sorted((p for p in listed if p.getName().endswith(TRACE_SUFFIXES)), key=lambda p: str(p))
            if not children:
                raise TraceFileError(f"{raw}: directory holds no trace files ({', '.join(TRACE_SUFFIXES)})")
            for child in children:
                name = child.getName()
                shown = raw.rstrip("/") + "/" + name if _has_scheme(raw) else str(Path(raw) / name)
                size = fs.getFileStatus(child).getLen()
                files.append(_InputFile(str(fs.makeQualified(child).toString()), shown, is_parquet(name), size))
        else:
            shown = raw if _has_scheme(raw) else str(Path(raw))
            files.append(_InputFile(str(fs.makeQualified(path).toString()), shown, is_parquet(raw), status.getLen()))
    for empty in (f for f in files if f.size == 0):
        raise TraceFileError(f"{empty.name}: empty file: it holds no trace")
    documents = [f.name for f in files if is_document(Path(f.name))]
    if documents:
        raise TraceFileError(f"{documents[0]}: ITF and TLC JSON traces are read in-process only (run without --spark)")
    return files


# -- byte ranges of local NDJSON files ------------------------------------------------------------
def _local_path(uri: str) -> str | None:
    """The path of a file on this machine's file system, from the URI Hadoop qualified; None for others."""
    parsed = urlparse(uri)
    return parsed.path if parsed.scheme == "file" and parsed.netloc in ("", "localhost") else None


def _first_lines(path: str, starts: Sequence[int]) -> list[int]:
    """The number of the first line that begins at or after each offset (increasing) of a file, as the
    reader numbers lines: a line begins at 0 and after each newline."""
    numbers: list[int] = []
    newlines, at = 0, 0  # newlines in the bytes before ``at``
    with open(path, "rb") as f:
        for start in starts:
            while at < start - 1:
                block = f.read(min(COUNT_BLOCK, start - 1 - at))
                if not block:
                    break
                newlines += block.count(b"\n")
                at += len(block)
            # lines that begin before ``start``: the one at 0, and one after each newline before start - 1
            numbers.append(1 if start == 0 else newlines + 2)
    return numbers


# -- the driver -----------------------------------------------------------------------------------
#: ``progress(stages)``: the stages under way, each as its description and (tasks done, tasks in all); called about
#: four times a second while Spark works, and with no stage once it is done.
StageProgress = Callable[[Mapping[str, tuple[int, int]]], None]


class _Progress:
    """Progress of Spark's stages, polled from the driver's status tracker and reported to ``report``."""

    def __init__(self, spark: Any, report: StageProgress | None) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.report = report
        self.phase = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> _Progress:
        if self.report is not None:
            self._thread = threading.Thread(target=self._poll, name="ledgerspec-spark-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _poll(self) -> None:
        assert self.report is not None
        names: dict[int, str] = {}  # the stages under way at the last look, each under the phase first seen in
        stopping = False
        while not stopping:
            stopping = self._stop.wait(0.25)
            active = set(self.tracker.getActiveStageIds())
            stages = {}
            # A stage that has ended is reported once more, with its final counts.
            for stage in sorted(active | set(names)):
                info = self.tracker.getStageInfo(stage)
                if info is None:
                    continue
                name = names.setdefault(stage, f"{self.phase}: stage {stage}")
                stages[name] = (info.numCompletedTasks, info.numTasks)
            for stage in set(names) - active:
                del names[stage]
            self.report(stages)
        self.report({})


# A line in the layout this project writes, with a trace id and a process name in printable ASCII: the
# reader's trace_key (a Python regular expression over bytes, of which this is a narrower copy) reads the
# trace from its first group, and so can the JVM.
_ENVELOPE_ASCII = (
    r'^\{"v":1,"trace":"([\x20\x21\x23-\x5b\x5d-\x7e]{1,256})","process":"[\x20\x21\x23-\x5b\x5d-\x7e]{1,256}",'
    r'"seq":(?:0|[1-9][0-9]{0,18}),"type":'
)


def _fast_key(value: Any, max_line_bytes: int) -> Any:  # ``value``: the column of that name
    """The trace of a line, found in the JVM where that is sure to be what the reader's ``line_key`` gives
    (:mod:`ledgerspec.conformance.reader`); null for the other lines, which are keyed in Python."""
    from pyspark.sql import functions as F  # noqa: N812

    found = F.regexp_extract(value, _ENVELOPE_ASCII, 1)
    return F.when((found != "") & (F.octet_length(value) <= max_line_bytes), found)


def _ranges_frame(spark: Any, rows: list[tuple[Any, ...]], tasks: int | None = None) -> Any:
    """A frame of ranges, one to a partition (so to a task), or spread over ``tasks`` partitions."""
    partitions = len(rows) if tasks is None else max(1, min(tasks, len(rows)))
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, partitions), _spark_schema(RANGE_COLUMNS))


def _ndjson_ranges(spark: Any, files: Sequence[_InputFile]) -> list[tuple[Any, ...]]:
    """The NDJSON files (on this machine's file system) cut in byte ranges, a row of :data:`RANGE_COLUMNS`
    each, with the number of its first line: the driver counts the newlines before it."""
    ndjson = [(i, f) for i, f in enumerate(files) if not f.parquet]
    cores = spark.sparkContext.defaultParallelism
    total = sum(f.size for _, f in ndjson)
    size = max(MIN_RANGE_BYTES, min(PARTITION_BYTES, -(-total // (2 * cores))))  # two rounds of tasks at least
    ranges: list[tuple[Any, ...]] = []
    for i, f in ndjson:
        path = _local_path(f.uri)
        assert path is not None
        if f.name.endswith(".gz"):  # not to be cut: one range
            ranges.append((len(ranges), i, path, 0, -1, 1, None, None))
            continue
        starts = range(0, max(f.size, 1), size)
        for start, first in zip(starts, _first_lines(path, starts), strict=True):
            ranges.append((len(ranges), i, path, start, min(start + size, f.size), first, None, None))
    return ranges


def _shared_traces(
    ranges: list[tuple[Any, ...]], summaries: list[Any]
) -> tuple[frozenset[str], list[tuple[Any, ...]], float]:
    """From what the check of each range noted: the traces more than one range has lines of; the ranges
    that have lines of them, each with those traces and the windows of lines to read them in; and the
    share of the traces' lines that are theirs."""
    seen: dict[str, int] = {}
    shared: set[str] = set()
    for row in summaries:
        for trace in row["traces"]:
            if seen.setdefault(trace, row["range"]) != row["range"]:
                shared.add(trace)
    again: list[tuple[Any, ...]] = []
    shared_lines, lines = 0, 0
    for row in sorted(summaries, key=lambda row: row["range"]):
        windows: list[list[int]] = []
        traces = []
        spans = zip(row["traces"], row["firsts"], row["lasts"], row["counts"], row["offsets"], strict=True)
        for trace, first, last, count, at in spans:
            lines += count
            if trace in shared:
                traces.append(trace)
                windows.append([first, last, at])
                shared_lines += count
        if not traces:
            continue
        windows.sort()
        merged = [windows[0]]
        for first, last, at in windows[1:]:
            if first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last, at])
        again.append((*ranges[row["range"]][:6], traces, merged))
    return frozenset(shared), again, shared_lines / max(1, lines)


def _ndjson_frame(
    spark: Any, files: Sequence[_InputFile], max_line_bytes: int
) -> tuple[Any, list[tuple[int, int, int, int]]]:
    """The non-blank lines of the NDJSON files, each with its trace (``key``) and id, and the blocks the
    files were read in (see :attr:`SparkCheck.blocks`).

    A first job counts the lines of each block of each file, with the id (``monotonically_increasing_id``,
    the same in every scan of the same files) of its first line: with those counts, a line's id gives
    its file and line number, as the in-process reader numbers lines (blank ones included).
    """
    from pyspark.sql import functions as F  # noqa: N812

    ndjson = [(i, f) for i, f in enumerate(files) if not f.parquet]
    text = spark.read.option("lineSep", "\n").text([f.uri for _, f in ndjson])
    keyed = text.select(
        _fast_key(F.col("value"), max_line_bytes).alias("key"), F.monotonically_increasing_id().alias("id"), "value"
    )
    counts = (
        text.select(
            "_metadata.file_path",
            "_metadata.file_block_start",
            F.monotonically_increasing_id().alias("id"),
            _fast_key(F.col("value"), max_line_bytes).isNull().cast("int").alias("slow"),
        )
        .groupBy("file_path", "file_block_start")
        .agg(F.count(F.lit(1)).alias("n"), F.min("id").alias("first"), F.sum("slow").alias("slow"))
        .collect()
    )
    index = {f.uri: i for i, f in ndjson}
    blocks = []
    for uri in {row["file_path"] for row in counts}:
        if uri not in index:
            raise TraceFileError(f"{uri}: read by Spark, but not among the files listed ({', '.join(index)})")
        number = 1
        for row in sorted((r for r in counts if r["file_path"] == uri), key=lambda r: r["file_block_start"]):
            blocks.append((row["first"], row["n"], index[uri], number))
            number += row["n"]
    lines = keyed.filter(F.col("key").isNotNull()).select("key", "id", F.col("value").cast("binary").alias("raw"))
    slow = sum(row["slow"] for row in counts)
    if slow:
        # A Python worker for each partition would cost more than keying these lines: few tasks do it.
        unkeyed = keyed.filter(F.col("key").isNull()).select("id", F.col("value").cast("binary").alias("raw"))
        unkeyed = unkeyed.repartition(max(1, slow // SLOW_LINES_PER_TASK))
        lines = lines.unionByName(unkeyed.mapInArrow(KeyLines(max_line_bytes), _spark_schema(LINE_COLUMNS)))
    return lines, sorted(blocks)


def _parquet_frame(spark: Any, files: Sequence[_InputFile]) -> Any:
    """Rows of the Parquet files, with their trace, file index and row number, in the layout's columns."""
    from pyspark.sql import functions as F  # noqa: N812

    present: set[str] = set()
    parquet = [(i, f) for i, f in enumerate(files) if f.parquet]
    for _, f in parquet:
        schema = spark.read.parquet(f.uri).schema
        fits = [(field.name, _spark_kind_ok(field.name, field.dataType)) for field in schema.fields]
        try:
            present.update(check_layout(f.name, fits))
        except ParquetFileError as exc:
            raise TraceFileError(str(exc)) from None
    frame = spark.read.option("mergeSchema", "true").parquet(*[f.uri for _, f in parquet])
    index = F.create_map(*[x for i, f in parquet for x in (F.lit(f.uri), F.lit(i))])
    kinds = {c: _SPARK_TYPES.get(c, "string") for c in COLUMNS}
    columns = [(F.col(c) if c in present else F.lit(None)).cast(kinds[c]).alias(c) for c in COLUMNS]
    trace = F.col("trace")
    key = F.when((F.length(trace) > 0) & (F.length(trace) <= 256), trace)
    return frame.select(
        key.alias("key"),
        F.element_at(index, F.col("_metadata.file_path")).cast("int").alias("file_index"),
        (F.col("_metadata.row_index") + 1).alias("line"),
        *columns,
    )


_RECORD_COLUMNS = {
    "key": "string",
    "id": "bigint",
    "file_index": "int",
    "line": "bigint",
    "raw": "binary",
    **{c: _SPARK_TYPES.get(c, "string") for c in ROW_COLUMNS},
}


def _with_columns(frame: Any) -> Any:
    """The frame with every column of the records the check takes (null where it has none), in one order."""
    from pyspark.sql import functions as F  # noqa: N812

    have = set(frame.columns)
    return frame.select(
        *[(F.col(c) if c in have else F.lit(None)).cast(kind).alias(c) for c, kind in _RECORD_COLUMNS.items()]
    )


def _spark_kind_ok(column: str, kind: Any) -> bool:
    from pyspark.sql import types as T  # noqa: N812

    if column in ("v", "seq"):
        return isinstance(kind, T.IntegralType)
    if column == "time":
        return isinstance(kind, T.NumericType)
    return isinstance(kind, T.StringType)


def _write_text(spark: Any, uri: str, text: str) -> None:
    path, fs = _hadoop(spark, uri)
    stream = fs.create(path, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()


def check_on_spark(
    spark: Any,
    paths: Sequence[str | Path],
    job: SparkCheck,
    out: str | Path,
    *,
    progress: StageProgress | None = None,
    summary: Callable[[CheckRun], dict[str, Any]] | None = None,
) -> SparkRun:
    """Check every trace of the files on Spark; write ``OUT/verdicts.parquet`` and ``OUT/summary.json``.

    ``progress``: told of Spark's stages as they run (:data:`StageProgress`). ``summary``: the JSON of the run
    written to ``summary.json`` (by default its counts).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F  # noqa: N812

    started = time.perf_counter()
    files = _list_input(spark, paths)
    job = attrs.evolve(job, files=tuple(f.name for f in files))
    ndjson = [f for f in files if not f.parquet]
    parquet = [f for f in files if f.parquet]
    out_dir = str(out).rstrip("/")
    if not files:
        raise TraceFileError("no trace files given")
    frames = []
    shuffled_text = sum(f.text_size for f in parquet)
    by_range = None  # what the check of each range gives
    in_ranges = None  # the verdicts of the traces checked range by range
    with _Progress(spark, progress) as shown:
        if ndjson and all(_local_path(f.uri) is not None for f in ndjson):
            shown.phase = "numbering lines"
            ranges = _ndjson_ranges(spark, files)
            shown.phase = "checking ranges"
            by_range = _ranges_frame(spark, ranges).mapInArrow(CheckRanges(job), _spark_schema(RANGE_OUT_COLUMNS))
            by_range = by_range.persist(StorageLevel.MEMORY_AND_DISK)
            noted = ("range", "traces", "firsts", "lasts", "counts", "offsets")  # what each range noted
            summaries = by_range.filter(F.col("range").isNotNull()).select(*noted).collect()
            shared, again, shared_part = _shared_traces(ranges, summaries)
            in_ranges = by_range.filter(F.col("range").isNull())
            if shared:
                shared_frame = spark.createDataFrame([(t,) for t in sorted(shared)], "key string")
                in_ranges = in_ranges.join(F.broadcast(shared_frame), on="key", how="left_anti")
                # Little to read: a task per core, not per range (a task costs more than its windows).
                again_frame = _ranges_frame(spark, again, spark.sparkContext.defaultParallelism)
                frames.append(again_frame.mapInArrow(PassShared(job), _spark_schema(PASSED_COLUMNS)))
                shuffled_text += int(shared_part * sum(f.text_size for f in ndjson))
            in_ranges = in_ranges.select(*CHECKED_COLUMNS.names)
        elif ndjson:
            shown.phase = "numbering lines"
            lines, blocks = _ndjson_frame(spark, files, job.max_line_bytes)
            frames.append(lines)
            job = attrs.evolve(job, blocks=tuple(blocks))
            shuffled_text += sum(f.size for f in ndjson)
        if parquet:
            frames.append(_parquet_frame(spark, files))
        checked = None
        if frames:
            complete = [_with_columns(frame) for frame in frames]
            records = complete[0]
            for frame in complete[1:]:
                records = records.unionByName(frame)
            cores = spark.sparkContext.defaultParallelism
            tasks = cores * -(-shuffled_text // (cores * PARTITION_BYTES))  # whole rounds of tasks
            # Each trace's lines together; the check puts them back in reading order.
            ordered = records.repartition(max(tasks, cores), "key").sortWithinPartitions("key")
            checked = ordered.mapInArrow(CheckTraces(job), _spark_schema(CHECKED_COLUMNS))
        if in_ranges is not None:
            checked = in_ranges if checked is None else in_ranges.unionByName(checked)
        assert checked is not None
        checked = checked.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            shown.phase = "checking traces"
            checked = _undecided_by_stray_lines(spark, checked)
            verdicts_uri = f"{out_dir}/verdicts.parquet"
            verdicts = checked.filter(F.col("trace").isNotNull()).drop("order_file", "order_line")
            verdicts.write.mode("overwrite").parquet(verdicts_uri)
            shown.phase = "summing up"
            totals = (
                checked.filter(F.col("trace").isNotNull())
                .agg(
                    F.count(F.lit(1)).alias("traces"),
                    F.coalesce(F.sum("events"), F.lit(0)).alias("events"),
                    F.count(F.when(F.col("status") == CONFORMS, 1)).alias("conforms"),
                )
                .collect()[0]
            )
            detail = (
                checked.filter(F.col("status").isNull() | (F.col("status") != CONFORMS))
                .select("trace", "verdict_json", "order_file", "order_line")
                .collect()
            )
            largest = (
                checked.filter(F.col("trace").isNotNull())
                .orderBy(F.desc("max_candidates"), "trace")
                .select("trace", "max_candidates")
                .limit(LARGEST_KEPT)
                .collect()
            )
        finally:
            checked.unpersist()
            if by_range is not None:
                by_range.unpersist()
    # The results that are not "conforms", added in the order the in-process run adds them.
    run = CheckRun()
    for row in sorted(detail, key=lambda r: (r["order_file"], r["order_line"])):
        data = orjson.loads(row["verdict_json"])
        run.add(Verdict.from_json(data) if row["trace"] is not None else InputError.from_json(data))
    run.traces, run.events, run.conforms = totals["traces"], totals["events"], totals["conforms"]
    run.largest_candidates = [(row["trace"], row["max_candidates"]) for row in largest]
    run.seconds = time.perf_counter() - started
    summary_uri = f"{out_dir}/summary.json"
    data = summary(run) if summary is not None else {"traces": run.traces, "events": run.events}
    _write_text(spark, summary_uri, orjson.dumps(data, option=orjson.OPT_INDENT_2).decode() + "\n")
    return SparkRun(run, verdicts_uri, summary_uri, spark.sparkContext.master)


def _undecided_by_stray_lines(spark: Any, checked: Any) -> Any:
    """The checked rows with each violation after a bad line no trace claims, in the file of its failing event,
    made inconclusive as the in-process run counts it (:func:`~ledgerspec.conformance.verdict.undecided_by_stray_line`).
    ``checked`` is persisted; so is what is returned, and ``checked`` is released when it differs."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F  # noqa: N812

    strays = (
        checked.filter(F.col("trace").isNull())
        .groupBy("file")
        .agg(F.min_by("verdict_json", "order_line").alias("stray_json"), F.min("line").alias("stray_line"))
        .collect()
    )
    if not strays:
        return checked
    first = {row["file"]: row["stray_json"] for row in strays}
    bounds = spark.createDataFrame([(row["file"], row["stray_line"]) for row in strays], "file string, stray_line long")
    joined = checked.join(F.broadcast(bounds), on="file", how="left")
    hit = F.coalesce((F.col("status") == VIOLATES) & (F.col("line") > F.col("stray_line")), F.lit(False))
    columns = list(CHECKED_COLUMNS.names)
    kept = joined.filter(~hit).select(*columns)
    settled = joined.filter(hit).select(*columns).mapInArrow(SettleStrays(first), _spark_schema(CHECKED_COLUMNS))
    result = kept.unionByName(settled).persist(StorageLevel.MEMORY_AND_DISK)
    checked.unpersist()
    return result


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)
