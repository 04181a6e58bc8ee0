"""``ledgerspec crash-check bookie``: crash the reference bookie at every file-system boundary of scripted workloads.

Each crash is continued every way it may end (a process crash, a power loss,
torn tails) and the bookie restarted; the restart is crashed too. Every state
is checked against the bookie spec through the abstraction function (see
:mod:`ledgerspec.tools.harness.crash_check`). Exit status 0 when no violation is
found, 1 when one is, 2 for an unknown target, workload or mutant.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ledgerspec.reference.bookie import MUTANTS
from ledgerspec.reference.bookie.workloads import WORKLOADS
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_VIOLATION, UsageError, runs_progress
from ledgerspec.tools.harness.crash_check import CrashCheckResult, crash_check
from rich.console import Console
from rich.markup import escape
from rich.progress import TaskID
from rich.table import Table

__all__ = ["register"]

TARGETS = ("bookie",)


def register(commands: Any) -> None:
    check = commands.add_parser(
        "crash-check", help="crash the reference bookie at every write, fsync and rename; check every restart"
    )
    check.add_argument("target", help="what to crash: " + ", ".join(TARGETS))
    check.add_argument(
        "--workload",
        action="append",
        metavar="NAME",
        help="a workload (repeatable; default: all): " + ", ".join(WORKLOADS),
    )
    check.add_argument("--mutant", metavar="NAME", help="run a seeded bug of the bookie: " + ", ".join(MUTANTS))
    check.add_argument(
        "--no-second-crash", action="store_true", help="do not crash the restarts (faster, fewer crash points)"
    )
    check.add_argument("--dir", help="where the bookies' scratch directories go (default: /dev/shm or the temp dir)")
    check.add_argument("--list", action="store_true", help="list the workloads and mutants, and check nothing")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.set_defaults(run=_crash_check)


def _crash_check(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.target not in TARGETS:
        raise UsageError(f"unknown target {args.target!r}; targets: {', '.join(TARGETS)}")
    workloads = args.workload or list(WORKLOADS)
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        raise UsageError(f"unknown workload {', '.join(map(repr, unknown))}; workloads: {', '.join(WORKLOADS)}")
    if args.mutant is not None and args.mutant not in MUTANTS:
        raise UsageError(f"unknown mutant {args.mutant!r}; mutants: {', '.join(MUTANTS)}")
    if args.list:
        _print_list(out)
        return EXIT_OK
    result = _with_progress(workloads, args, err)
    if args.json:
        print(json.dumps({"target": args.target, **result.to_json()}, indent=2))
    else:
        _print(out, result)
    return EXIT_VIOLATION if result.violations else EXIT_OK


def _with_progress(workloads: list[str], args: argparse.Namespace, err: Console) -> CrashCheckResult:
    with runs_progress(err, quiet=args.json, transient=True) as progress:
        tasks: dict[str, TaskID] = {}

        def report(workload: str, done: int, total: int) -> None:
            if workload not in tasks:  # a step per workload, from its first crash point
                tasks[workload] = progress.add_task(f"{workload}: boundaries", total=total)
            progress.update(tasks[workload], completed=done, total=total)

        return crash_check(
            workloads, args.mutant, second_crashes=not args.no_second_crash, progress=report, scratch=args.dir
        )


def _print_list(out: Console) -> None:
    table = Table("workload", "what it exercises", title="workloads", title_justify="left")
    for workload in WORKLOADS.values():
        table.add_row(workload.name, workload.description)
    out.print(table)
    table = Table("mutant", "the bug", title="mutants", title_justify="left")
    for name, doc in MUTANTS.items():
        table.add_row(name, doc)
    out.print(table)


def _print(out: Console, result: CrashCheckResult) -> None:
    title = "crash check of the reference bookie" + (f", mutant {result.mutant}" if result.mutant else "")
    table = Table("workload", "boundaries", "crash points", "2nd crashes", "restarts", "s", "violations", title=title)
    for w in result.workloads:
        table.add_row(
            w.workload,
            str(w.boundaries),
            f"{w.crash_points:,}",
            f"{w.second_crash_points:,}",
            f"{w.restarts:,}",
            f"{w.seconds:.1f}",
            "[green]0[/green]" if not w.violations else f"[red]{len(w.violations)}[/red]",
        )
    out.print(table)
    rate = result.crash_points / result.seconds if result.seconds else 0.0
    summary = f"{result.crash_points:,} crash points in {result.seconds:.1f} s ({rate:,.0f} per second): "
    if not result.violations:
        out.print(summary + "[green]no violation[/green]", highlight=False)
        return
    out.print(summary + f"[red]{len(result.violations)} violation(s)[/red]", highlight=False)
    for w in result.workloads:
        for v in w.violations:
            out.print(f"\n[red bold]{escape(w.workload)}: {v.kind} {escape(v.name)}[/red bold]")
            out.print(f"  crash point: {escape(v.crash_point or 'none (the run without a crash)')}", highlight=False)
            out.print(f"  after: {escape(v.step)}", highlight=False)
            out.print(f"  {escape(v.message)}", highlight=False)
            for variable, expected, actual in v.differences:
                out.print(f"    {variable}: spec {escape(expected)}, bookie {escape(actual)}", highlight=False)
