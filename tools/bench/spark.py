"""Benchmark: the checker on Spark against the in-process checker on the same files, and TLC against the
Python checker on one trace; side by side, in one run.

Trace files: ``--events`` events (10 million by default) of fully observed
traces of the ledger spec (``MaxEntries=6``; every step logged with its
params and the writer's, recoverers' and metadata values it changed: about
260 bytes a line), in NDJSON files in a cache directory, written on the
first run and reused after. A pool of 100,000 distinct random walks (seeded;
about 2.5 million events, more states than the checker's caches keep) is
repeated under new trace ids until the count is reached, so that writing
the files takes minutes, not an hour; both runs below read the same files.

1. In-process: ``check_files`` on one core, end to end (read, parse,
   merge, check), as ``ledgerspec check`` runs it, in a process started for
   it; and again on the first file alone (an eighth of the events). The
   peak resident memory of each process is printed, and their ratio: it
   stays near 1 when memory is bounded by the longest trace and the caches,
   not by the number of traces.
2. Spark (``--master``, ``local[2]`` by default): ``check_on_spark`` end to
   end, from listing the files to the verdict table and the summary written;
   the session's start is timed apart. The rate against the in-process rate
   is the figure of merit (the aim: 1.6 or more with two cores). Then again
   on the first file alone: from the two, the time an event adds and the
   time a job takes whatever its size. With ``--rounds N``, one core and
   Spark run N times on every file, turn about, and the ratio of each round
   is printed with their median: the machine's speed drifts from one run to
   the next by as much as 15%.
3. One small trace validated by TLC (its TLA+ trace module, through JPype)
   and by the Python checker: the same verdict, and the time of each (TLC's
   first run includes starting its JVM, so a second run is timed too).

Both runs must find every trace conforming, and agree on the counts, or
the benchmark fails. Rates are events per wall-clock second: the machine's
other load slows both.

    python -m ledgerspec.tools.bench.spark [--events N] [--cache DIR] [--master URL] [--parquet] [--rounds N]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.checker import Bounds, TraceChecker, check_trace
from ledgerspec.conformance.events import Event, events_from_json
from ledgerspec.conformance.generate import random_walk, trace_events
from ledgerspec.conformance.parquet import write_parquet
from ledgerspec.conformance.reader import read_events
from ledgerspec.conformance.run import check_files
from ledgerspec.conformance.spark import check_on_spark, spark_session
from ledgerspec.conformance.spark_tasks import SparkCheck
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_trace import CLIENT_OBSERVES
from ledgerspec.tools.console import StageSteps, StepProgress, output_console
from rich.console import Console
from rich.table import Table

MODEL = {"MaxEntries": 6}
WEIGHTS = {"WriterClosesLedger": 0.02, "RecovererStartsRecovery": 0.02}  # walks of about 25 events
POOL = 100_000  # distinct walks (about 2.5 million events), more than the checker's caches hold
FILES = 8
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "ledgerspec-bench-spark"


def _walks(seed: int, first: int, count: int) -> list[list[dict[str, Any]]]:
    """Walks ``first .. first+count-1`` of the pool: walk i from its own seeded generator."""
    spec = LedgerSpec(**MODEL)
    return [
        trace_events(spec, random_walk(spec, random.Random(seed * 1_000_003 + i), 60, weights=WEIGHTS), "full", "",
                     only=CLIENT_OBSERVES)
        for i in range(first, first + count)
    ]  # fmt: skip


def _pool(seed: int, size: int) -> list[list[dict[str, Any]]]:
    """The distinct walks, written by as many processes as there are cores."""
    chunk = 2_000
    with ProcessPoolExecutor() as workers:
        firsts = range(0, size, chunk)
        parts = workers.map(_walks, [seed] * len(firsts), firsts, [min(chunk, size - i) for i in firsts])
        return [walk for part in parts for walk in part]


def write_cache(directory: Path, events: int, seed: int, pool_size: int, console: Console) -> list[Path]:
    """The NDJSON files of the benchmark: written once, reused while their manifest matches."""
    manifest = directory / "manifest.json"
    wanted = {"events": events, "seed": seed, "model": MODEL, "pool": pool_size, "files": FILES, "format": 2}
    files = [directory / f"part-{k:02d}.ndjson" for k in range(FILES)]
    if manifest.exists() and orjson.loads(manifest.read_bytes()) == wanted and all(f.exists() for f in files):
        return files
    console.print(f"writing {events:,} events to {directory} (once) ...")
    directory.mkdir(parents=True, exist_ok=True)
    manifest.unlink(missing_ok=True)
    pool = _pool(seed, pool_size)
    per_file = -(-events // FILES)
    written, copy = 0, 0
    for path in files:
        with open(path, "wb") as out:
            in_file = 0
            while in_file < per_file and written < events:
                walk = pool[copy % len(pool)]
                trace = f"r{copy}"
                for e in walk:
                    out.write(orjson.dumps({**e, "trace": trace}))
                    out.write(b"\n")
                in_file += len(walk)
                written += len(walk)
                copy += 1
    manifest.write_bytes(orjson.dumps(wanted))
    return files


def _parquet(files: list[Path], directory: Path) -> list[Path]:
    out = []
    for path in files:
        target = directory / "parquet" / (path.stem + ".parquet")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            write_parquet(target, (e for e in read_events([path]) if isinstance(e, Event)))
        out.append(target)
    return out


def _process_cpu_seconds() -> float | None:
    """CPU seconds of this process and every process it started, alive or waited for (Linux /proc):
    for Spark in a local master, the driver JVM, the executors and their Python workers."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    times: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo += children.get(pid, [])
    return total / tick


@attrs.frozen
class OneCore:
    """A check of the files in this process's way, on one core, in a fresh process: what it found, and
    the most memory that process held."""

    traces: int
    events: int
    conforms: int
    input_errors: int
    seconds: float
    cpu_seconds: float
    peak_buffered: int  # most events held at once
    peak_rss: int  # bytes: the process's peak resident set


def _one_core(files: list[Path]) -> OneCore:
    run = check_files(files, TraceChecker(LedgerSpec(**MODEL), "full"))
    return OneCore(
        run.traces,
        run.events,
        run.conforms,
        len(run.input_errors),
        run.seconds,
        run.cpu_seconds,
        run.peak_buffered_events,
        _peak_resident_bytes(),
    )


def _peak_resident_bytes() -> int:
    """This process's peak resident set: ``VmHWM``, which starts afresh at ``exec``; ``ru_maxrss`` does
    not (it keeps the peak of the process forked to start this one), so it serves only without /proc."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _in_fresh_process(files: list[Path]) -> OneCore:
    """``_one_core`` in a process started for it (not forked: its memory is the check's alone)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_one_core, files).result()


def _rate(events: int, seconds: float) -> str:
    return f"{events / seconds:,.0f}" if seconds > 0 else "-"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.bench.spark", description=__doc__)
    parser.add_argument("--events", type=int, default=10_000_000, help="events in the files (default 10,000,000)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help=f"where the files are kept ({DEFAULT_CACHE})")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--parquet", action="store_true", help="also check the files converted to Parquet, on Spark")
    parser.add_argument(
        "--rounds", type=int, default=1, help="run one core and Spark on every file this many times, turn about"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pool", type=int, default=POOL, help=f"distinct walks, repeated (default {POOL:,})")
    args = parser.parse_args(argv)
    console = output_console()
    files = write_cache(args.cache, args.events, args.seed, args.pool, console)
    spec = LedgerSpec(**MODEL)
    failed = False

    console.print("in-process, one core, in a process of its own ...")
    local = _in_fresh_process(files)
    first = _in_fresh_process(files[:1])
    if local.conforms != local.traces or local.input_errors:
        console.print("[red]in-process: not every trace conforms")
        failed = True

    job = SparkCheck(spec.name, tuple(spec.values.items()), "full", Bounds(), 1 << 20)
    runs: list[tuple[str, Any, float, float | None]] = []
    started = time.perf_counter()
    with spark_session(args.master, app_name="ledgerspec bench") as spark:
        session_seconds = time.perf_counter() - started
        inputs = [("NDJSON", files)] + ([("Parquet", _parquet(files, args.cache))] if args.parquet else [])
        for name, paths in inputs:
            console.print(f"Spark {args.master}, {name} ...")
            with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-out-") as out:
                cpu0, t0 = _process_cpu_seconds(), time.perf_counter()
                with StepProgress(console, quiet=not console.is_terminal, transient=True) as shown:
                    result = check_on_spark(spark, paths, job, out, progress=StageSteps(shown))
                seconds, cpu1 = time.perf_counter() - t0, _process_cpu_seconds()
                runs.append((name, result.run, seconds, cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None))
        console.print(f"Spark {args.master}, NDJSON, the first file alone ...")
        with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-out-") as out:
            t0 = time.perf_counter()
            with StepProgress(console, quiet=not console.is_terminal, transient=True) as shown:
                small = check_on_spark(spark, files[:1], job, out, progress=StageSteps(shown)).run
            small_seconds = time.perf_counter() - t0
        # One core and Spark again, turn about: the machine's speed drifts between runs minutes apart.
        rounds = [(local.seconds, runs[0][2])]
        for n in range(2, args.rounds + 1):
            console.print(f"round {n} of {args.rounds}: one core, then Spark {args.master}, NDJSON ...")
            again = _in_fresh_process(files)
            with tempfile.TemporaryDirectory(prefix="ledgerspec-bench-out-") as out:
                t0 = time.perf_counter()
                with StepProgress(console, quiet=not console.is_terminal, transient=True) as shown:
                    check_on_spark(spark, files, job, out, progress=StageSteps(shown))
                rounds.append((again.seconds, time.perf_counter() - t0))
    for name, run, _, _ in runs:
        if (run.traces, run.events, run.conforms) != (local.traces, local.events, local.conforms):
            console.print(f"[red]Spark ({name}) and in-process disagree: {run.traces, run.events, run.conforms}")
            failed = True

    if (small.traces, small.events, small.conforms) != (first.traces, first.events, first.conforms):
        counts = (small.traces, small.events, small.conforms)
        console.print(f"[red]Spark and in-process disagree on the first file: {counts}")
        failed = True

    table = Table("run", "events", "traces", "wall s", "CPU s", "events / s", "vs one core", title="checking traces")
    base = local.events / local.seconds
    rows: list[tuple[str, Any, float, float | None]]
    rows = [("in-process, one core", local, local.seconds, local.cpu_seconds)]
    rows += [(f"Spark {args.master}, {name}", run, seconds, cpu) for name, run, seconds, cpu in runs]
    for name, run, seconds, cpu in rows:
        table.add_row(
            name,
            f"{run.events:,}",
            f"{run.traces:,}",
            f"{seconds:.1f}",
            f"{cpu:.1f}" if cpu is not None else "-",
            _rate(run.events, seconds),
            f"{run.events / seconds / base:.2f}",
        )
    table.add_row(f"(Spark session start, {args.master})", "", "", f"{session_seconds:.1f}", "", "", "")
    console.print(table)
    # Two sizes, one session: the time a job takes whatever its size (planning, scheduling, starting Python
    # workers, the verdict table's write), and the time an event adds.
    whole = runs[0][2]
    per_event = (whole - small_seconds) / max(1, runs[0][1].events - small.events)
    fixed = small_seconds - small.events * per_event
    console.print(
        f"Spark {args.master}, NDJSON: the first file alone ({small.events:,} events) in {small_seconds:.1f} s; "
        f"with every file's run: {per_event * 1e6:.2f} µs an event ({1 / per_event:,.0f} events/s) "
        f"and {fixed:.1f} s a job whatever its size, besides the session's start"
    )
    if len(rounds) > 1:
        ratios = sorted(one / on_spark for one, on_spark in rounds)
        each = ", ".join(f"{one:.1f} s / {on_spark:.1f} s = {one / on_spark:.2f}" for one, on_spark in rounds)
        console.print(f"one core ÷ Spark, round by round: {each}; median {statistics.median(ratios):.2f}")
    memory = Table("run", "events", "traces", "most events held", "peak resident MiB", title="memory, one core")
    for name, one in ((f"the first file of {FILES}", first), ("every file", local)):
        memory.add_row(
            name, f"{one.events:,}", f"{one.traces:,}", f"{one.peak_buffered:,}", f"{one.peak_rss / 2**20:,.0f}"
        )
    console.print(memory)
    console.print(
        f"peak resident memory, {local.events:,} events ÷ {first.events:,}: {local.peak_rss / first.peak_rss:.2f} "
        f"(events: {local.events / first.events:.1f}x)"
    )

    failed |= _tlc_against_python(console)
    return 1 if failed else 0


def _fails(spec: LedgerSpec, model: LedgerSpec, walk: Any) -> bool:
    return check_trace(events_from_json(trace_events(model, walk, "full", "b")), spec).failure is not None


def _tlc_against_python(console: Console) -> bool:
    """One small trace, by TLC and by the Python checker: the same verdict; the time of each."""
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc

    spec = LedgerSpec(MaxEntries=3, MaxLoss=1, MaxCrashes=1)
    buggy = LedgerSpec(MaxEntries=3, MaxLoss=1, MaxCrashes=1, Bug="lac_before_qa")
    weights = {"WriterClosesLedger": 0.05, "RecovererStartsRecovery": 0.05}
    walks = (random_walk(spec, random.Random(seed), 40, weights=weights) for seed in range(100))
    walk = next(w for w in walks if len(w) > 15)
    bad_walks = (random_walk(buggy, random.Random(seed), 40, weights=weights) for seed in range(100))
    bad_walk = next(w for w in bad_walks if _fails(spec, buggy, w))
    table = Table("trace", "events", "checker", "verdict", "failing event", "seconds", title="TLC and Python")
    failed = False
    for name, model, w in (("conforming", spec, walk), ("lac_before_qa", buggy, bad_walk)):
        events = events_from_json(trace_events(model, w, "full", name))
        t0 = time.perf_counter()
        verdict = check_trace(events, spec)
        python_seconds = time.perf_counter() - t0
        checks = [validate_with_tlc(events, spec) for _ in range(2)]
        index = verdict.failure.event_index if verdict.failure else None
        table.add_row(name, str(len(events)), "Python", verdict.status, str(index), f"{python_seconds:.4f}")
        for k, checked in enumerate(checks):
            status = "conforms" if checked.outcome.conforms else "violates"
            run = "TLC, first run (starts the JVM)" if k == 0 and name == "conforming" else "TLC"
            table.add_row("", "", run, status, str(checked.outcome.event_index), f"{checked.seconds:.4f}")
            if status != verdict.status or checked.outcome.event_index != index:
                console.print(f"[red]{name}: TLC says {checked.outcome}, Python {verdict.status} at {index}")
                failed = True
    console.print(table)
    return failed


if __name__ == "__main__":
    sys.exit(main())
