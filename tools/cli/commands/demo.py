"""``ledgerspec demo``: the whole loop on embedded defaults, end to end.

1. Simulate: seeded runs of the reference engine with every fault (the
   ``striped`` workload of ``ledgerspec mutants``: E=3, Qw=2, Qa=2 on four
   bookies, crashes, restarts, lost and reordered messages, recoveries
   racing the writer, ensemble changes), once unmutated and once for each of
   two mutants: a client that moves the LAC before Qa acks, and bookies that
   acknowledge an add before its journal fsync. The metadata store is the
   embedded one; the bookies write real journal, entry log and index files.
   Traces, fully observed, go to ``OUT/traces/<engine>/``.
2. Check every trace on Spark (``local[*]`` unless ``--master``): the verdict
   table and summary go to ``OUT/check/``.
3. Check them again in this process, for coverage and the HTML report
   (``OUT/report.html``); the two runs must agree trace for trace.
4. Print the summary: the unmutated engine's traces must all conform, each
   mutant must be caught by some trace.

Exit status: 0 all of that held; 1 it did not; 3 Spark cannot start (no Java).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from ledgerspec.conformance.checker import Bounds, TraceChecker
from ledgerspec.conformance.manifest import find_inputs, manifest_json, write_manifest
from ledgerspec.conformance.reader import DEFAULT_MAX_LINE_BYTES
from ledgerspec.conformance.run import CheckRun, check_files
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.vocabulary import ndjson
from ledgerspec.tools.cli.commands.base import (
    EXIT_MISSING_TOOL,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    runs_progress,
)
from ledgerspec.tools.console import StageSteps, StepProgress
from ledgerspec.tools.harness.mutants import MUTANTS
from ledgerspec.tools.harness.workloads import LEDGER_WORKLOADS, Mutant, workload_traces
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["DEMO_MUTANTS", "register"]

#: The mutants the demo runs beside the unmutated engine: one in the client, one in the bookies.
DEMO_MUTANTS = ("lac_before_qa", "ack_before_fsync")
UNMUTATED = "unmutated"
STATUSES = ("conforms", "violates", "inconclusive")


def register(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="simulate the engine with faults and two mutants, check the traces on Spark, write a report",
        description="Simulate the reference engine with faults (and two mutants), check the traces on Spark "
        "and in this process, print the summary and write an HTML report.",
    )
    demo.add_argument("--out", default="ledgerspec-demo", metavar="DIR", help="output directory (ledgerspec-demo)")
    demo.add_argument(
        "--traces",
        type=int,
        default=LEDGER_WORKLOADS[0].traces,
        metavar="N",
        help=f"runs per engine (default {LEDGER_WORKLOADS[0].traces}). A mutant shows in some runs only: the bookie "
        "mutant ack_before_fsync, whose acks come before the fsync, shows only where a bookie crashes between "
        "the two, with the default seeds first in run 11; with fewer runs it goes uncaught and the demo fails",
    )
    demo.add_argument("--master", metavar="URL", help="Spark master URL (default local[*])")
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    demo.set_defaults(run=_demo)


def _simulate(directory: Path, traces: int, progress: StepProgress) -> tuple[dict[str, list[str]], dict[str, int]]:
    """Write each engine's traces; the trace ids of each engine, and the spec constants they share."""
    workload = LEDGER_WORKLOADS[0].scaled(traces)
    engines: dict[str, Mutant | None] = {UNMUTATED: None, **{name: MUTANTS[name] for name in DEMO_MUTANTS}}
    ids: dict[str, list[str]] = {}
    task = progress.add_task("simulating", total=len(engines) * traces)
    for engine, mutant in engines.items():
        progress.update(task, description=f"simulating: {engine}")
        folder = directory / engine
        folder.mkdir(parents=True)
        ids[engine] = []
        files = []
        for trace_id, lines, _ in workload_traces(workload, mutant, modes=("full",)):
            named = f"{engine}/{trace_id}"  # trace ids are unique across the engines' files
            files.append(f"{trace_id}.ndjson")
            (folder / files[-1]).write_bytes(ndjson({**line, "trace": named} for line in lines["full"]))
            ids[engine].append(named)
            progress.advance(task)
        manifest = manifest_json(
            spec="ledger",
            mode="full",
            constants=workload.config.spec_constants(),
            files=files,
            engine=engine,
            mutant=None if mutant is None else mutant.name,
        )
        write_manifest(folder, manifest)
    return ids, workload.config.spec_constants()


def _statuses(run: CheckRun, ids: dict[str, list[str]]) -> dict[str, str]:
    """Each trace's status, and for a violation what it is (``violates: bug NoAckedEntryLost``): Spark's and this
    process's verdicts must agree on both."""
    found = {v.trace: v.status for v in run.inconclusive}
    for v in run.violations:
        promises = " ".join(v.promise_names)
        found[v.trace] = f"{v.status}: {v.finding}" + (f" {promises}" if promises else "")
    return {t: found.get(t, "conforms") for trace_ids in ids.values() for t in trace_ids}


def _demo(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.traces < 1:
        raise UsageError(f"--traces must be at least 1, got {args.traces}")
    root = Path(args.out)
    try:
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
    except OSError as exc:
        raise UsageError(f"cannot write to {root}: {exc.strerror or exc}") from None
    traces_dir = root / "traces"
    if not args.json:
        err.print(f"simulating {args.traces} runs each: {UNMUTATED}, {', '.join(DEMO_MUTANTS)} ...")
    with runs_progress(err, quiet=args.json) as progress:
        ids, constants = _simulate(traces_dir, args.traces, progress)
    spec = LedgerSpec(**constants)
    sources = [traces_dir / engine for engine in ids]

    from ledgerspec.conformance.report import write_report
    from ledgerspec.conformance.spark import DEFAULT_MASTER, SparkUnavailable, check_on_spark, spark_session
    from ledgerspec.conformance.spark_tasks import SparkCheck

    job = SparkCheck(spec.name, tuple(spec.values.items()), "full", Bounds(), DEFAULT_MAX_LINE_BYTES)
    try:
        with runs_progress(err, quiet=args.json, transient=True) as progress:
            progress.step("starting Spark")
            with spark_session(args.master or DEFAULT_MASTER, app_name="ledgerspec demo") as spark:
                progress.step(None)
                on_spark = check_on_spark(spark, sources, job, root / "check", progress=StageSteps(progress))
                progress.step("stopping Spark")
    except SparkUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_MISSING_TOOL
    checker = TraceChecker(spec, "full")
    report = root / "report.html"
    with runs_progress(err, quiet=args.json, transient=True) as progress:
        progress.step("checking the traces in this process")
        here = check_files(sources, checker)
        progress.step("writing the report")
        write_report(report, here, checker, sources, seeded_bug_of=find_inputs(sources).seeded_bug_of)

    spark_statuses, local_statuses = _statuses(on_spark.run, ids), _statuses(here, ids)
    disagree = sorted(t for t in local_statuses if spark_statuses[t] != local_statuses[t])
    first_violation = {}
    for v in here.violations:
        engine = v.trace.split("/", 1)[0]
        if engine not in first_violation and v.failure is not None:
            first_violation[engine] = (v.trace, v.failure.event_index, v.failure.reason)
    rows: dict[str, dict[str, Any]] = {}
    for engine, trace_ids in ids.items():
        statuses = [local_statuses[t].split(":")[0] for t in trace_ids]
        counts = {status: statuses.count(status) for status in STATUSES}
        promises = sorted({b.name for v in here.violations if v.trace in trace_ids for b in v.broken_promises})
        bugs = sum(1 for t in trace_ids if local_statuses[t].startswith("violates: bug"))
        rows[engine] = {
            "traces": len(trace_ids),
            **counts,
            "bugs": bugs,
            "promises": promises,
            "first_violation": first_violation.get(engine),
        }
    passed = (
        not disagree
        and rows[UNMUTATED]["conforms"] == rows[UNMUTATED]["traces"]
        and all(rows[m]["violates"] > 0 for m in DEMO_MUTANTS)
    )
    summary = {
        "passed": passed,
        "constants": constants,
        "engines": rows,
        "events": here.events,
        "spark": {"master": on_spark.master, "verdicts": on_spark.verdicts, "summary": on_spark.summary},
        "spark_and_in_process_disagree_on": disagree,
        "traces_directory": str(traces_dir),
        "report": str(report),
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(out, summary)
    return EXIT_OK if passed else EXIT_VIOLATION


def _print(out: Console, summary: dict[str, Any]) -> None:
    table = Table(
        "engine", "traces", "conform", "violate", "of them bugs", "promises broken", "inconclusive", title="demo"
    )
    for engine, row in summary["engines"].items():
        violates = f"[red]{row['violates']}[/red]" if row["violates"] and engine == UNMUTATED else str(row["violates"])
        table.add_row(
            engine,
            str(row["traces"]),
            str(row["conforms"]),
            violates,
            str(row["bugs"]),
            escape(", ".join(row["promises"])) or "-",
            str(row["inconclusive"]),
        )
    out.print(table)
    for engine, row in summary["engines"].items():
        if row["first_violation"] is not None:
            trace, event, reason = row["first_violation"]
            out.print(f"{engine}: {escape(trace)}, event {event}: {escape(reason)}", highlight=False, soft_wrap=True)
    spark = summary["spark"]
    out.print(
        f"{summary['events']:,} events checked on Spark ({spark['master']}) and in this process"
        + (
            f"; [red]they disagree on {len(summary['spark_and_in_process_disagree_on'])} trace(s)[/red]"
            if summary["spark_and_in_process_disagree_on"]
            else ": same verdict for every trace"
        ),
        highlight=False,
    )
    out.print(f"traces:   {escape(summary['traces_directory'])}", highlight=False)
    out.print(f"verdicts: {escape(spark['verdicts'])}", highlight=False)
    out.print(f"report:   {escape(summary['report'])}", highlight=False)
    verdict = "[green]passed[/green]" if summary["passed"] else "[red]failed[/red]"
    out.print(
        f"demo {verdict}: the unmutated engine conforms, each mutant is caught"
        if summary["passed"]
        else f"demo {verdict}: see the table",
        highlight=False,
    )
    uncaught = [engine for engine in DEMO_MUTANTS if not summary["engines"][engine]["violates"]]
    if uncaught:
        out.print(
            f"no trace caught {', '.join(uncaught)}: a mutant shows in some runs only; more runs (--traces, "
            "see --help) give it more chances",
            highlight=False,
        )
