"""``ledgerspec mutants``: the oracle's mutation score over the engine's seeded bugs
(:mod:`ledgerspec.tools.harness.mutants`).

Exit status: 0 every mutant was killed in full observation and the
unmutated engine had no false positive in any mode; 1 otherwise; 2 bad
options.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import attrs
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_VIOLATION, UsageError, positive_jobs, runs_progress
from ledgerspec.tools.harness.mutants import MUTANTS, MutationRun, run_mutants
from ledgerspec.tools.harness.soak import PROFILES, default_jobs, seed_ranges, soak_workloads
from ledgerspec.tools.harness.workloads import MODES, WORKLOADS, SeededWorkload
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    mutants = commands.add_parser(
        "mutants",
        help="run the engine's seeded bugs under fault workloads; does the oracle kill each one?",
        description="Run each engine mutant, and the unmutated engine, under seeded fault workloads; check every "
        "run's traces in full and client observation; print which mutants were killed, by which trace, and the "
        "false positives of the unmutated engine.",
    )
    mutants.add_argument(
        "--mutant", action="append", default=[], metavar="NAME", help="only this mutant (repeatable); default all"
    )
    mutants.add_argument(
        "--workload",
        action="append",
        default=[],
        metavar="NAME",
        help="only this workload (repeatable): " + ", ".join(w.name for w in WORKLOADS),
    )
    mutants.add_argument("--traces", type=int, metavar="N", help="runs per workload (default: each workload's own)")
    mutants.add_argument(
        "--baseline-traces",
        type=int,
        metavar="N",
        help=f"the unmutated engine's runs: at least N traces per spec and mode (default {PROFILES['ci'].traces}, "
        f"the ci soak: ledgerspec soak)",
    )
    mutants.add_argument(
        "--jobs", type=int, metavar="N", help="processes for the unmutated runs (default: one per core)"
    )
    mutants.add_argument("--list", action="store_true", help="list the mutants and workloads, run nothing")
    mutants.add_argument("--json", action="store_true", help="print one JSON object (with --list: the catalogue)")
    mutants.set_defaults(run=_mutants)


def _chosen(names: list[str], known: dict[str, Any], what: str) -> list[Any]:
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown {what} {', '.join(unknown)}; {what}s: {', '.join(known)}")
    return [known[n] for n in names] if names else list(known.values())


def _mutants(args: argparse.Namespace, out: Console, err: Console) -> int:
    mutants = _chosen(args.mutant, MUTANTS, "mutant")
    workloads = _chosen(args.workload, {w.name: w for w in WORKLOADS}, "workload")
    if args.traces is not None:
        if args.traces < 1:
            raise UsageError(f"--traces must be at least 1, got {args.traces}")
        workloads = [w.scaled(args.traces) for w in workloads]
    profile = PROFILES["ci"]
    if args.baseline_traces is not None:
        if args.baseline_traces < 1:
            raise UsageError(f"--baseline-traces must be at least 1, got {args.baseline_traces}")
        profile = attrs.evolve(profile, traces=args.baseline_traces)
    jobs = positive_jobs(args.jobs, default_jobs())
    if args.list:
        if args.json:
            print(json.dumps(_catalog_json(mutants, workloads), indent=2))
        else:
            _print_catalog(out, mutants, workloads)
        return EXIT_OK
    runnable = [m for m in mutants if any(w.spec in m.specs for w in workloads)]
    idle = [m for m in mutants if m not in runnable]
    if args.mutant and idle:
        specs = " or ".join(idle[0].specs)
        raise UsageError(f"no workload chosen runs mutant {idle[0].name}: it needs a workload of the {specs} spec")
    mutants = runnable  # without --mutant: those the chosen workloads can show
    baseline = soak_workloads(profile, dict.fromkeys(w.spec for w in workloads))
    counts = {w.name: w.run_count() for w in workloads}
    runs = sum(w.run_count() for w in baseline) + sum(
        counts[w.name] for m in mutants for w in workloads if w.spec in m.specs
    )
    with runs_progress(err, quiet=args.json) as progress:
        task = progress.add_task("runs (at most)", total=runs)

        def advance(name: str, traces: int) -> None:
            progress.update(task, advance=traces, description=f"[bold]{escape(name)}[/bold]")

        run = run_mutants(mutants, workloads, baseline=baseline, jobs=jobs, progress=advance)
    if args.json:
        print(json.dumps(run.to_json(), indent=2))
    else:
        _print(out, run)
    passed = run.killed("full") == run.total and run.baseline.passed
    return EXIT_OK if passed else EXIT_VIOLATION


def _print_catalog(out: Console, mutants: list[Any], workloads: list[Any]) -> None:
    table = Table("mutant", "layer", "checked by", "the bug", title="mutants")
    for m in mutants:
        table.add_row(m.name, m.layer, ", ".join(f"{s} traces" for s in m.specs), escape(m.description))
    out.print(table)
    table = Table("workload", "spec", "runs", "", title="workloads (every fault allowed)")
    for w in workloads:
        detail = f"{w.steps} steps each, seed {w.seed}: " if isinstance(w, SeededWorkload) else ""
        table.add_row(w.name, w.spec, str(w.run_count()), escape(detail + w.doc))
    out.print(table)


def _catalog_json(mutants: list[Any], workloads: list[Any]) -> dict[str, Any]:
    """``--list --json``: ``mutants`` (each ``name``, ``layer``, ``specs``: the specs whose traces check it,
    ``description``) and ``workloads`` (each ``name``, ``spec``, ``runs``, ``steps`` and ``seed`` for seeded
    random runs, else null, ``description``)."""
    return {
        "mutants": [
            {"name": m.name, "layer": m.layer, "specs": list(m.specs), "description": m.description} for m in mutants
        ],
        "workloads": [
            {
                "name": w.name,
                "spec": w.spec,
                "runs": w.run_count(),
                "steps": w.steps if isinstance(w, SeededWorkload) else None,
                "seed": w.seed if isinstance(w, SeededWorkload) else None,
                "description": w.doc,
            }
            for w in workloads
        ],
    }


def _print(out: Console, run: MutationRun) -> None:
    table = Table("mutant", "layer", *(f"{m} observation" for m in MODES), title="mutants")
    for result in run.mutants:
        cells = []
        for mode in MODES:
            kill = result.kills[mode]
            if kill is None and not result.traces[mode]:
                cells.append("not checked (no workload of its specs records this mode)")
            elif kill is None:
                cells.append(f"[yellow]survived[/yellow] ({result.traces[mode]} traces)")
            else:
                cells.append(f"[green]killed[/green] by {escape(kill.trace)}, event {kill.event_index} ({kill.event})")
                promise_kill = result.promise_kills[mode]
                if promise_kill is not None:
                    cells[-1] += f"; breaks {escape(', '.join(promise_kill.promises))}"
                    if promise_kill is not kill:
                        cells[-1] += f" (shown by {escape(promise_kill.trace)})"
                else:
                    cells[-1] += "; no promise shown broken"
        assert result.mutant is not None
        table.add_row(result.name, result.mutant.layer, *cells)
    out.print(table)
    for mode in MODES:
        base = run.baseline.in_mode(mode)
        fp = run.false_positives(mode)
        colour = "red" if fp else "green"
        out.print(
            f"{mode} observation: {run.killed(mode)} of {run.total} killed ({run.killed(mode) / run.total:.0%}); "
            f"unmutated engine: [{colour}]{fp} false positive(s)[/{colour}] in {base.traces:,} traces "
            f"({base.events:,} events, {base.inconclusive} inconclusive; seeds {seed_ranges(sorted(base.seeds))})",
            highlight=False,
        )
    for key in sorted(run.baseline.tallies):
        t = run.baseline.tallies[key]
        out.print(
            f"  baseline {t.spec} ({t.check_mode or t.mode}): {t.traces:,} traces, {t.rejected} rejected, "
            f"{t.inconclusive} inconclusive",
            highlight=False,
        )
    for f in run.baseline.flagged:
        out.print(
            f"[red]{'false positive' if f.status == 'violates' else 'undecided'} ({f.mode}):[/red] "
            f"{escape(f.workload)} {escape(f.trace)}: {escape(f.reason)}",
            highlight=False,
        )
    for result in run.mutants:
        for mode in MODES:
            kill = result.kills[mode]
            if kill is not None:
                out.print(f"{result.name} ({mode}): {escape(kill.reason)}", highlight=False, soft_wrap=True)
            promise_kill = result.promise_kills[mode]
            if promise_kill is not None and promise_kill is not kill:
                out.print(
                    f"{result.name} ({mode}), the promise: {escape(promise_kill.reason)}",
                    highlight=False,
                    soft_wrap=True,
                )
