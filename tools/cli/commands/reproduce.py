"""``ledgerspec reproduce``: run the stand-alone reproduction of each bug the oracle found in the real systems.

Each finding of kind bug (``record bookkeeper|managed-ledger --list``) comes
with a small Java program that shows it against the released jars without
ledgerspec (:mod:`ledgerspec.conformance.adapters.reproductions`). This
command fetches the pinned jars (once; cached), compiles the programs and runs
the chosen ones (default: all), each on a cluster of its own; ``--export DIR``
writes their Maven projects (the write-up, a ``pom.xml``, the program), to
hand to a maintainer. Exit status 0 when every chosen finding was reproduced, 1 when one
was not (the jars behaved as expected) or its program could not run, 2 for an
unknown finding, 3 when Java, javac or Maven is missing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from ledgerspec.conformance.adapters.findings import FINDINGS, Finding
from ledgerspec.conformance.adapters.jars import JavaSetupError, ensure_jars
from ledgerspec.conformance.adapters.reproductions import ReproductionRun, export, reproducible, run
from ledgerspec.tools.cli.commands.base import (
    EXIT_MISSING_TOOL,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    runs_progress,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    command = commands.add_parser(
        "reproduce", help="run the stand-alone Java reproduction of each bug found in the real BookKeeper and Pulsar"
    )
    command.add_argument("finding", nargs="*", help="a finding (default: every one with a reproduction); see --list")
    command.add_argument("--list", action="store_true", help="list the reproductions, and run nothing")
    command.add_argument(
        "--export",
        metavar="DIR",
        help="write the chosen findings' Maven projects (write-up, pom.xml, program) into DIR; run nothing",
    )
    command.add_argument(
        "--keep", metavar="DIR", help="keep each run's cluster files and logs in DIR/FINDING (default: removed)"
    )
    command.add_argument("--json", action="store_true", help="print one JSON object")
    command.set_defaults(run=_reproduce)


def _reproduce(args: argparse.Namespace, out: Console, err: Console) -> int:
    available = {f.name: f for f in reproducible()}
    unknown = [name for name in args.finding if name not in available]
    if unknown:
        without = [name for name in unknown if name in FINDINGS]
        raise UsageError(
            f"no reproduction of {', '.join(map(repr, unknown))}"
            + (" (a finding of kind difference breaks no promise: nothing to reproduce)" if without else "")
            + f"; reproductions: {', '.join(available)}"
        )
    chosen = [available[name] for name in args.finding] or list(available.values())
    if args.list:
        _print_list(out, args.json, chosen)
        return EXIT_OK
    if args.export is not None:
        written = export(Path(args.export), chosen)
        projects = sorted({path.relative_to(args.export).parts[0] for path in written})
        out.print(
            f"wrote {', '.join(projects)} to {escape(args.export)}: in each, README.md says how to run it",
            highlight=False,
        )
        return EXIT_OK
    runs: list[ReproductionRun] = []
    try:
        with runs_progress(err, quiet=args.json, transient=True) as steps:
            jars = ensure_jars(status=steps.step)
            for finding in chosen:
                with tempfile.TemporaryDirectory(prefix="ledgerspec-reproduction-") as scratch:
                    directory = Path(args.keep) / finding.name if args.keep else Path(scratch)
                    runs.append(run(finding, jars, directory, status=steps.step))
    except JavaSetupError as exc:
        err.print(f"[bold red]{escape(str(exc))}[/]", soft_wrap=True)
        return EXIT_MISSING_TOOL
    if args.json:
        print(json.dumps({"reproductions": [_to_json(r) for r in runs]}, indent=2))
    else:
        _print(out, runs, kept=args.keep is not None)
    return EXIT_OK if all(r.reproduced for r in runs) else EXIT_VIOLATION


def _print_list(out: Console, as_json: bool, chosen: list[Finding]) -> None:
    rows = [(f.name, f.reproduction.project, f.reproduction.command, f.title) for f in chosen if f.reproduction]
    if as_json:
        print(json.dumps([dict(zip(("finding", "project", "program", "title"), row, strict=True)) for row in rows]))
        return
    table = Table(title="Stand-alone reproductions of the bugs found")
    for column in ("finding", "project", "program", "what it shows"):
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    out.print(table)


def _to_json(r: ReproductionRun) -> dict[str, Any]:
    return {
        "finding": r.finding,
        "program": r.command,
        "status": r.status,
        "reproduced": r.reproduced,
        "could_not_run": r.could_not_run,
        "expected": r.line("EXPECTED"),
        "observed": r.line("OBSERVED"),
        "output": r.output,
    }


def _print(out: Console, runs: list[ReproductionRun], *, kept: bool) -> None:
    for r in runs:
        verdict = (
            "[bold red]could not run[/]"
            if r.could_not_run
            else "[yellow]reproduced[/]"
            if r.reproduced
            else "[green]not reproduced: the jars behave as expected[/]"
        )
        out.print(f"{escape(r.finding)}: {verdict}")
        if r.could_not_run:
            out.print(escape(r.output.strip()), highlight=False)
        else:
            out.print(f"  expected: {escape(r.line('EXPECTED'))}", highlight=False)
            out.print(f"  observed: {escape(r.line('OBSERVED'))}", highlight=False)
        if kept:
            out.print(f"  files and logs: {escape(str(r.directory))}", highlight=False)
