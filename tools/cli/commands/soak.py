"""``ledgerspec soak``: the unmutated engine over many seeded runs of every spec, checked in every observation
mode (:mod:`ledgerspec.tools.harness.soak`).

Exit status: 0 every trace conformed; 1 a trace was rejected (a false
positive: the spec or the engine departs from the real system) or a run of
the engine raised; 4 no trace was rejected but some were left undecided; 2
bad options.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.tools.cli.commands.base import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_VIOLATION,
    UsageError,
    positive_jobs,
    runs_progress,
)
from ledgerspec.tools.harness.soak import (
    PROFILES,
    SOAK_WORKLOADS,
    SoakProfile,
    SoakRun,
    default_jobs,
    run_soak,
    seed_ranges,
    soak_workloads,
    write_soak,
)
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]

SHOWN = 20  # flagged traces listed; --out keeps them all


def register(commands: Any) -> None:
    soak = commands.add_parser(
        "soak",
        help="run the unmutated engine over many seeded runs of every spec; does every trace conform?",
        description="Run the unmutated reference engine over seeded fault workloads of every spec, check every run "
        "in every observation mode, and print traces, events, rejected and inconclusive per spec and mode. A "
        "rejected trace is a false positive: the spec or the engine departs from the real system.",
    )
    soak.add_argument(
        "--profile",
        default="ci",
        choices=list(PROFILES),
        help="; ".join(
            f"{p.name}: at least {p.traces:,} traces per spec and mode, {len(p.seeds)} seeds" for p in PROFILES.values()
        ),
    )
    soak.add_argument(
        "--spec",
        action="append",
        default=[],
        metavar="NAME",
        help="only this spec (repeatable): " + ", ".join(SOAK_WORKLOADS),
    )
    soak.add_argument(
        "--traces", type=int, metavar="N", help="at least N traces per spec and mode (default: the profile's)"
    )
    soak.add_argument(
        "--seed",
        type=int,
        action="append",
        default=[],
        metavar="S",
        help="seed the runs with S (repeatable; default: the profile's)",
    )
    soak.add_argument("--jobs", type=int, metavar="N", help="processes (default: one per core)")
    soak.add_argument(
        "--out", metavar="DIR", help="write summary.json, and every rejected or inconclusive trace as NDJSON, under DIR"
    )
    soak.add_argument("--json", action="store_true", help="print one JSON object")
    soak.set_defaults(run=_soak)


def _profile(args: argparse.Namespace) -> SoakProfile:
    profile = PROFILES[args.profile]
    if args.traces is not None:
        if args.traces < 1:
            raise UsageError(f"--traces must be at least 1, got {args.traces}")
        profile = attrs.evolve(profile, name=f"{profile.name}, {args.traces} traces", traces=args.traces)
    if args.seed:
        profile = attrs.evolve(profile, seeds=tuple(dict.fromkeys(args.seed)))
    return profile


def _soak(args: argparse.Namespace, out: Console, err: Console) -> int:
    unknown = [s for s in args.spec if s not in SOAK_WORKLOADS]
    if unknown:
        raise UsageError(f"unknown spec {', '.join(unknown)}; specs: {', '.join(SOAK_WORKLOADS)}")
    jobs = positive_jobs(args.jobs, default_jobs())
    profile = _profile(args)
    workloads = soak_workloads(profile, dict.fromkeys(args.spec) or None)
    with runs_progress(err, quiet=args.json) as progress:
        task = progress.add_task("runs", total=sum(w.run_count() for w in workloads))
        run = run_soak(
            workloads,
            jobs=jobs,
            progress=lambda name, n: progress.update(task, advance=n, description=f"[bold]{escape(name)}[/bold]"),
        )
    summary = {"profile": attrs.asdict(profile), "jobs": jobs, **run.to_json()}
    if args.out:
        write_soak(Path(args.out), run, summary)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        _print(out, run, profile, Path(args.out) if args.out else None)
    if any(t.rejected for t in run.tallies.values()) or run.read_problems or run.failures:
        return EXIT_VIOLATION
    return EXIT_INCONCLUSIVE if run.flagged else EXIT_OK


def _print(out: Console, run: SoakRun, profile: SoakProfile, written: Path | None) -> None:
    table = Table(
        "spec",
        "mode",
        "workloads",
        "seeds",
        "traces",
        "events",
        "rejected",
        "inconclusive",
        "decided later",
        title=f"soak ({escape(profile.name)}: at least {profile.traces:,} traces per spec and mode)",
    )
    for key in sorted(run.tallies):
        t = run.tallies[key]
        table.add_row(
            t.spec,
            t.check_mode if t.check_mode and t.check_mode != t.mode else t.mode,
            ", ".join(sorted(t.workloads)),
            seed_ranges(sorted(t.seeds)),
            f"{t.traces:,}",
            f"{t.events:,}",
            f"[red]{t.rejected}[/red]" if t.rejected else "0",
            f"[yellow]{t.inconclusive}[/yellow]" if t.inconclusive else "0",
            str(t.decided_later),
        )
    out.print(table)
    if run.read_problems:
        out.print(f"[red]{run.read_problems} wrong read(s) up to the LAC[/red] (the ledger simulation's own check)")
    for failure in run.failures:
        where = f" (traceback in {failure.path_under(written)})" if written else ""
        seed = "" if failure.seed is None else f", seed {failure.seed}"
        out.print(
            f"[red]engine error[/red] in run {failure.run} of {escape(failure.workload)}{seed}{escape(where)}: "
            f"{escape(failure.error)}" + (f"; its {failure.skipped} later run(s) not made" if failure.skipped else ""),
            highlight=False,
            soft_wrap=True,
        )
    for f in run.flagged[:SHOWN]:
        colour = "red" if f.status == "violates" else "yellow"
        where = f" (written to {f.path_under(written)})" if written else ""
        out.print(
            f"[{colour}]{f.status}[/{colour}] {escape(f.workload)} {escape(f.trace)} ({f.mode}){escape(where)}: "
            f"{escape(f.reason)}",
            highlight=False,
            soft_wrap=True,
        )
    if len(run.flagged) > SHOWN:
        out.print(f"... and {len(run.flagged) - SHOWN} more" + (f", all in {written}" if written else ""))
    if written and run.flagged:
        out.print(
            "check one again with: " + escape(run.flagged[0].check_command(str(run.flagged[0].path_under(written))))
        )
