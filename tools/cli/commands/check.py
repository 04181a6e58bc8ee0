"""``ledgerspec check PATH...``: check an implementation's traces against a spec (the conformance oracle).

In this process by default, streaming; with ``--spark`` on Spark
(:mod:`ledgerspec.conformance.spark`), which also writes the verdicts as a
Parquet table and the summary as JSON.

Exit status: 0 every trace conforms; 1 a trace violates the spec; 2 bad
input (a line that cannot be read, an unknown event, out-of-order sequence
numbers; the other traces are still checked and counted); 4 a trace is
inconclusive (a search bound was hit). The first that applies, in that order
of precedence: 1, 2, 4.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ledgerspec.conformance.checker import Bounds, TraceChecker
from ledgerspec.conformance.coverage import coverage_summary
from ledgerspec.conformance.reader import DEFAULT_MAX_BAD_LINES, DEFAULT_MAX_LINE_BYTES, TraceFileError
from ledgerspec.conformance.run import CheckRun, check_files
from ledgerspec.conformance.verdict import Verdict
from ledgerspec.spec import catalog
from ledgerspec.spec.tracing import mapping_for
from ledgerspec.spec.values import format_value
from ledgerspec.tools.cli.commands.base import (
    EXIT_INCONCLUSIVE,
    EXIT_MISSING_TOOL,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATION,
    UsageError,
    parse_constants,
    runs_progress,
)
from ledgerspec.tools.console import StageSteps
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["exit_status", "register"]

SHOWN_IN_FULL = 10  # violations printed with their explanation and path; the rest one line each
PATH_TAIL = 15  # steps of the spec path printed


_DEFAULT = Bounds()


def register(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="check an implementation's traces (NDJSON, Parquet) against a spec",
        description="Check traces (NDJSON, one event per line, or Parquet; docs/trace-format.md) against a spec.",
    )
    check.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="trace files (NDJSON, Parquet: *.parquet, ITF: *.itf.json, TLC -dumpTrace json: *.tlc.json), "
        "or directories of them",
    )
    check.add_argument("--spec", default="ledger", help="spec name: " + ", ".join(catalog.SPECS))
    check.add_argument("--mode", default="full", help="observation mode of the traces: full (default) or client")
    check.add_argument("--const", action="append", default=[], metavar="NAME=VALUE", help="set a constant (repeatable)")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument(
        "--max-hidden-steps", type=int, default=_DEFAULT.max_hidden_steps, metavar="N",
        help=f"hidden steps allowed in a row between two events (default {_DEFAULT.max_hidden_steps})",
    )  # fmt: skip
    check.add_argument(
        "--max-candidates", type=int, default=_DEFAULT.max_candidates, metavar="N",
        help=f"candidate states kept at once (default {_DEFAULT.max_candidates:,})",
    )  # fmt: skip
    check.add_argument(
        "--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES, metavar="N",
        help=f"longest line read (default {DEFAULT_MAX_LINE_BYTES:,})",
    )  # fmt: skip
    check.add_argument(
        "--max-bad-lines", type=int, metavar="N",
        help=f"bad lines of one file read before the rest of the file is given up, and the traces it leaves "
        f"unfinished are inconclusive (default {DEFAULT_MAX_BAD_LINES}; in this process, not with --spark)",
    )  # fmt: skip
    _add_report_option(check)
    _add_spark_options(check)
    check.set_defaults(run=_check)


def _add_report_option(check: Any) -> None:
    check.add_argument(
        "--report", metavar="FILE.html",
        help="also write an HTML report: violations drawn as sequence diagrams, candidate states, coverage",
    )  # fmt: skip


def _check_report_path(args: argparse.Namespace) -> None:
    """Fail before the check, not after it, when the report cannot be written there."""
    if args.report and not Path(args.report).resolve().parent.is_dir():
        raise UsageError(f"cannot write the report {args.report}: no directory {Path(args.report).parent}")


def _write_report(args: argparse.Namespace, checker: TraceChecker, run: CheckRun) -> None:
    """``--report``: the HTML report, from the run and the violating traces read again."""
    if not args.report:
        return
    from ledgerspec.conformance.report import write_report  # jinja2, only when a report is asked for

    try:
        write_report(args.report, run, checker, args.paths, max_line_bytes=args.max_line_bytes)
    except TraceFileError as exc:  # a file went away after the check
        raise UsageError(f"cannot write the report {args.report}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"cannot write the report {args.report}: {exc.strerror or exc}") from None


def _print_coverage(out: Console, checker: TraceChecker, run: CheckRun) -> None:
    """One line each: the actions no trace took, and the guards that never held."""
    if run.coverage is None or not run.traces:
        return
    summary = coverage_summary(run.coverage, checker.spec, checker.mapping)
    idle = [a for a, n in summary["actions"].items() if not n["steps"] and not n["hidden_steps"]]
    unheld = [f"{p} ({g})" for p, c in summary["properties"].items() for g, n in c["guards"].items() if not n]
    out.print(
        f"\ncoverage: {len(summary['actions']) - len(idle)} of {len(summary['actions'])} actions taken"
        + (f"; never taken: {', '.join(idle)}" if idle else ""),
        highlight=False,
        soft_wrap=True,
    )
    if unheld:
        out.print(f"guards that never held: {escape(', '.join(unheld))}", highlight=False, soft_wrap=True)


def _add_spark_options(check: argparse.ArgumentParser) -> None:
    spark = check.add_argument_group("Spark", "check on Spark (NDJSON and Parquet input; docs/conformance.md)")
    spark.add_argument("--spark", action="store_true", help="check on Spark, partitioned by trace")
    spark.add_argument("--master", metavar="URL", help="Spark master URL (default local[*])")
    spark.add_argument(
        "--out", metavar="DIR", help="where to write verdicts.parquet and summary.json (default ledgerspec-check)"
    )


def _checker(args: argparse.Namespace) -> TraceChecker:
    try:
        entry = catalog.find(args.spec)
        mapping = mapping_for(entry.name)
        mode = mapping.mode(args.mode)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    spec = entry.python(**parse_constants(args.const))
    try:
        bounds = Bounds(args.max_hidden_steps, args.max_candidates)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.max_line_bytes < 64:
        raise UsageError(f"--max-line-bytes must be at least 64, got {args.max_line_bytes}")
    if args.max_bad_lines is not None and args.max_bad_lines < 0:
        raise UsageError(f"--max-bad-lines must be at least 0, got {args.max_bad_lines}")
    return TraceChecker(spec, mode, bounds, mapping=mapping)


def exit_status(run: CheckRun) -> int:
    if run.violations:
        return EXIT_VIOLATION
    if run.input_errors:
        return EXIT_USAGE
    if run.inconclusive:
        return EXIT_INCONCLUSIVE
    return EXIT_OK


def _check(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.spark or args.master or args.out:
        return _check_on_spark(args, out, err)
    checker = _checker(args)
    _check_report_path(args)
    try:
        max_bad_lines = DEFAULT_MAX_BAD_LINES if args.max_bad_lines is None else args.max_bad_lines
        run = check_files(args.paths, checker, max_line_bytes=args.max_line_bytes, max_bad_lines=max_bad_lines)
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(_to_json(checker, run), indent=2))
    else:
        _print(out, checker, run)
        _print_coverage(out, checker, run)
    _write_report(args, checker, run)
    return exit_status(run)


def _check_on_spark(args: argparse.Namespace, out: Console, err: Console) -> int:
    if not args.spark:
        raise UsageError("--master and --out go with --spark")
    if args.report:
        raise UsageError("--report is written by runs in this process (without --spark): Spark gathers no coverage")
    if args.max_bad_lines is not None:
        raise UsageError("--max-bad-lines bounds runs in this process (without --spark): Spark reports every bad line")
    checker = _checker(args)
    from ledgerspec.conformance.spark import DEFAULT_MASTER, SparkUnavailable, check_on_spark, spark_session
    from ledgerspec.conformance.spark_tasks import SparkCheck

    spec = checker.spec
    job = SparkCheck(spec.name, tuple(spec.values.items()), checker.mode.name, checker.bounds, args.max_line_bytes)
    try:
        # Spark's stages are shown with --json too: they go to standard error, the JSON to standard output.
        with runs_progress(err, quiet=False, transient=True) as progress:
            progress.step("starting Spark")
            with spark_session(args.master or DEFAULT_MASTER) as spark:
                progress.step(None)
                result = check_on_spark(
                    spark, args.paths, job, args.out or "ledgerspec-check", progress=StageSteps(progress),
                    summary=lambda run: _to_json(checker, run),
                )  # fmt: skip
                progress.step("stopping Spark")
    except SparkUnavailable as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_MISSING_TOOL
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({**_to_json(checker, result.run), "verdict_table": result.verdicts}, indent=2))
    else:
        _print(out, checker, result.run)
        out.print(f"\nverdicts: {escape(result.verdicts)}\nsummary: {escape(result.summary)}", highlight=False)
    return exit_status(result.run)


def _violation_json(v: Verdict) -> dict[str, Any]:
    f = v.failure
    assert f is not None
    return {
        "trace": v.trace,
        "event_index": f.event_index,
        "event": f.event_type,
        "process": f.process,
        "seq": f.seq,
        "file": f.file,
        "line": f.line,
        "reason": f.reason,
        "explanation": f.explanation,
        "path": list(f.path),
    }


def _inconclusive_json(v: Verdict) -> dict[str, Any]:
    data: dict[str, Any] = {"trace": v.trace, "reason": v.reason, "checked": v.checked, "events": v.events}
    if v.bound is not None:
        data["bound"] = v.bound.to_json()
    if v.failure is not None:
        data["event_index"] = v.failure.event_index
        data["explanation"] = v.failure.explanation
    if v.input_errors:
        data["input_errors"] = [e.to_json() for e in v.input_errors]
    return data


def _to_json(checker: TraceChecker, run: CheckRun) -> dict[str, Any]:
    return {
        "spec": checker.spec.name,
        "mode": checker.mode.name,
        "constants": checker.spec.values,
        "traces": run.traces,
        "events": run.events,
        "conforms": run.conforms,
        "violations": [_violation_json(v) for v in run.violations],
        "inconclusive": [_inconclusive_json(v) for v in run.inconclusive],
        "input_errors": [e.to_json() for e in run.input_errors],
        "coverage": None if run.coverage is None else coverage_summary(run.coverage, checker.spec, checker.mapping),
        "seconds": round(run.seconds, 3),
    }


def _print(out: Console, checker: TraceChecker, run: CheckRun) -> None:
    spec = checker.spec
    out.print(
        f"[bold]{spec.name}[/bold] ({checker.mode.name} mode) "
        + escape(" ".join(f"{k}={format_value(v)}" for k, v in spec.values.items()))
    )
    table = Table("traces", "events", "conform", "violate", "inconclusive", "bad lines", "seconds")
    table.add_row(
        f"{run.traces:,}",
        f"{run.events:,}",
        f"[green]{run.conforms:,}[/green]",
        f"[red]{len(run.violations):,}[/red]" if run.violations else "0",
        f"[yellow]{len(run.inconclusive):,}[/yellow]" if run.inconclusive else "0",
        f"[red]{len(run.input_errors):,}[/red]" if run.input_errors else "0",
        f"{run.seconds:.2f}",
    )
    out.print(table)
    for k, v in enumerate(run.violations):
        f = v.failure
        assert f is not None
        out.print(
            f"\n[red bold]trace {escape(v.trace)} violates the spec at event {f.event_index}[/red bold] "
            f"({escape(f.file)}:{f.line}, {escape(f.process)} seq {f.seq}): {escape(f.reason)}",
            highlight=False,
            soft_wrap=True,
        )
        if k < SHOWN_IN_FULL:
            out.print(escape(f.explanation), highlight=False, soft_wrap=True)
            shown = f.path[-PATH_TAIL:]
            skipped = len(f.path) - len(shown)
            out.print(
                f"  shortest spec path to that point ({len(f.path) - 1} steps"
                + (f", the last {len(shown)}" if skipped else "")
                + "):",
                highlight=False,
                soft_wrap=True,
            )
            for i, step in enumerate(shown, skipped):
                out.print(f"    {i}. {escape(step)}", highlight=False, soft_wrap=True)
    for v in run.inconclusive:
        out.print(
            f"\n[yellow bold]trace {escape(v.trace)} is inconclusive[/yellow bold]: {escape(v.reason)}", highlight=False
        )
    if run.input_errors:
        out.print(f"\n[red bold]{len(run.input_errors)} bad line(s)[/red bold]:")
        for e in run.input_errors:
            out.print(f"  {escape(str(e))}", highlight=False, soft_wrap=True)
