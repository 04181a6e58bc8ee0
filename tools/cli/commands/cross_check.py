"""``ledgerspec cross-check CLIENT BOOKIES``: a client's own log of its ledgers beside what the bookies served.

``CLIENT`` holds the client-mode traces a client under test wrote of its
ledgers (a file, or a directory with its manifest); ``BOOKIES`` the traces
that reference bookies served with ``--trace`` wrote (``ledgerspec serve
bookies --trace``). Each client trace is paired with the bookies' trace of
the same id, or, when each side holds one trace, with that one. For each
pair: every reply the client took must be one its bookie sent, and an add
the writer counted as acknowledged must be one the bookie answered ``ok``
(:mod:`ledgerspec.conformance.crosscheck`, which says why the two logs are
joined on the requests served rather than merged into one trace). Check
each side against the spec with ``ledgerspec check``.

Exit status: 0 when every pair agrees; 1 when a reply the client took is not
borne out, each named with its file and line; 2 for input that cannot be read
or paired.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ledgerspec.conformance.crosscheck import CrossCheck, cross_check_paths
from ledgerspec.conformance.reader import TraceFileError
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_VIOLATION, UsageError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "cross-check", help="a client's own log of its ledgers beside what the served bookies logged of them"
    )
    parser.add_argument("client", metavar="CLIENT", help="the client's traces (client mode): a file or directory")
    parser.add_argument("bookies", metavar="BOOKIES", help="the served bookies' traces (bookies mode)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(run=_cross_check)


def _cross_check(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        results = cross_check_paths(args.client, args.bookies)
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({"pairs": [_to_json(r) for r in results]}, indent=2))
    else:
        _print(out, results)
    return EXIT_OK if all(r.agrees for r in results) else EXIT_VIOLATION


def _to_json(result: CrossCheck) -> dict[str, Any]:
    return {
        "client_trace": result.client_trace,
        "bookies_trace": result.bookies_trace,
        "replies": result.replies,
        "matched": result.matched,
        "agrees": result.agrees,
        "discrepancies": [
            {"where": d.client.where, "served": d.bookie.where if d.bookie else None, "reason": d.reason}
            for d in result.discrepancies
        ],
    }


def _print(out: Console, results: list[CrossCheck]) -> None:
    table = Table(title="the client's replies beside the bookies' log")
    for column in ("client trace", "bookies' trace", "replies", "matched", "discrepancies"):
        table.add_column(column, justify="right" if column in ("replies", "matched", "discrepancies") else "left")
    for r in results:
        table.add_row(r.client_trace, r.bookies_trace, str(r.replies), str(r.matched), str(len(r.discrepancies)))
    out.print(table)
    for r in results:
        for d in r.discrepancies:
            out.print(f"[red]{escape(str(d))}[/]", soft_wrap=True)
