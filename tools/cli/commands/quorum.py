"""``ledgerspec quorum``: what a ledger's (E, Qw, Qa) guarantees, each figure proved with Z3."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.quorum import Quorum
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_USAGE, EXIT_VIOLATION
from ledgerspec.tools.proofs.quorum_proofs import QuorumAnalysis, Verdict, analyse
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    quorum = commands.add_parser(
        "quorum",
        help="what an ensemble / write quorum / ack quorum guarantees, proved with Z3",
        description=(
            "Prove, with Z3, what a ledger with ensemble size E, write quorum Qw and ack quorum Qa guarantees: "
            "the fencing and recovery rules, and how many bookie failures each guarantee survives. Where a "
            "guarantee fails, print the smallest concrete counterexample. Bookies are numbered 1..E in ensemble "
            "order, spares E+1..N; entry ids start at 0."
        ),
    )
    quorum.add_argument("--ensemble", "-e", type=int, required=True, metavar="E", help="ensemble size")
    quorum.add_argument("--write", "-w", type=int, required=True, metavar="Qw", help="write quorum")
    quorum.add_argument("--ack", "-a", type=int, required=True, metavar="Qa", help="ack quorum")
    quorum.add_argument(
        "--bookies", "-n", type=int, metavar="N", help="bookies in the cluster, for ensemble change (default: E)"
    )
    quorum.add_argument("--json", action="store_true", help="print one JSON object")
    quorum.add_argument(
        "--force",
        action="store_true",
        help=f"prove a cluster of more than {MAX_BOOKIES} bookies even so: that can take Z3 minutes to hours",
    )
    quorum.set_defaults(run=_quorum)


# Up to this many bookies (the ensemble and the spares) every configuration is proved in seconds (at most 2.3 s
# measured); beyond, Z3's time grows fast and unevenly: E=Qw=20 46 s; E=100 Qw=3, E=5 with 100 bookies, E=Qw=16
# with 40 bookies: over a minute.
MAX_BOOKIES = 16


def _quorum(args: argparse.Namespace, out: Console, err: Console) -> int:
    bookies = max(args.ensemble, args.bookies or 0)
    if bookies > MAX_BOOKIES and not args.force:
        message = (
            f"a cluster of {bookies} bookies is more than {MAX_BOOKIES}: up to {MAX_BOOKIES} every configuration is "
            "proved in seconds, larger ones can take Z3 minutes to hours (E=Qw=20: 46 s; E=100 Qw=3, or E=5 with "
            "100 bookies: over a minute); add --force to prove it anyway"
        )
        if args.json:
            print(json.dumps({"valid": None, "error": message, "proved": False}, indent=2))
        err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
        return EXIT_USAGE
    try:
        q = Quorum(args.ensemble, args.write, args.ack)
        analysis = analyse(q, args.bookies)
    except ConstantError as exc:
        message = f"impossible configuration E={args.ensemble} Qw={args.write} Qa={args.ack}: {exc}"
        if args.json:
            print(json.dumps({"valid": False, "error": message, "proved": False}, indent=2))
        err.print(f"[red]error:[/red] {escape(message)}", highlight=False)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(analysis.to_json(), indent=2))
    else:
        _print(out, analysis)
    return EXIT_OK if analysis.proved else EXIT_VIOLATION


def _proved(ok: bool) -> str:
    return "[green]proved[/green]" if ok else "[red]NOT proved[/red]"


def _print(out: Console, a: QuorumAnalysis) -> None:
    q = a.quorum
    out.print(f"[bold]E={q.E} Qw={q.Qw} Qa={q.Qa}[/bold], a cluster of {a.bookies} bookies", highlight=False)
    table = Table(title="What it guarantees", expand=True)
    table.add_column("guarantee", ratio=3)
    table.add_column("figure", ratio=1)
    table.add_column("Z3", no_wrap=True)
    table.add_column("where it fails (smallest counterexample)", ratio=6)
    table.add_row("copies written of each entry", str(a.replicas_per_entry), "definition", "")
    table.add_row("copies of an acknowledged entry, at least", str(q.Qa), "definition", "")
    table.add_row(
        "fencing replies needed in each write set",
        str(a.fencing_replies_per_write_set),
        _proved(a.fencing_threshold_proved),
        _one_short(a.verdict("fencing", "one_short")),
    )
    table.add_row(
        "NoSuchEntry replies to declare an entry missing",
        str(a.missing_after_no_such_entry),
        _proved(a.missing_threshold_proved),
        _one_short(a.verdict("missing", "one_short")),
    )
    for t in a.tolerances:
        where = "" if t.breaks_with is None else escape(t.breaks_with.describe())
        table.add_row(f"failures tolerated: {t.title}", str(t.tolerated), _proved(t.proved), where)
    out.print(table)

    rules = Table(title="Other rules", expand=True)
    rules.add_column("rule", ratio=3)
    rules.add_column("source", ratio=2, overflow="fold")
    rules.add_column("verdict", no_wrap=True)
    rules.add_column("counterexample", ratio=6)
    for v in (a.verdict("fencing", "qa_total"), a.verdict("missing", "qa_no_such")):
        verdict = "[green]safe here[/green]" if v.safe else "[red]unsafe[/red]"
        cex = escape(v.counterexample.describe()) if v.counterexample is not None else "none exists for this E, Qw, Qa"
        rules.add_row(escape(v.rule.doc), v.rule.source, verdict, cex)
    ec = a.verdict("fencing", "ensemble_coverage")
    if a.write_set_coverage_only is not None:
        comparison = "stricter than BookKeeper's rule: " + escape(a.write_set_coverage_only.describe())
    else:
        comparison = "accepts the same reply sets as BookKeeper's rule for this E, Qw, Qa"
    verdict = "[green]safe[/green]" if ec.safe and a.ensemble_coverage_implies_write_set_coverage else "[red]?[/red]"
    rules.add_row(escape(ec.rule.doc), ec.rule.source, verdict, comparison)
    out.print(rules)
    if a.proved:
        out.print(f"[green]Every figure above is proved by Z3[/green] ({a.seconds:.2f} s).")
    else:
        out.print("[red]Some figure could not be proved.[/red]")


def _one_short(v: Verdict) -> str:
    if v.counterexample is None:
        return ""
    return "one fewer is unsafe: " + escape(v.counterexample.describe())
