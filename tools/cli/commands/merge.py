"""``ledgerspec merge CLIENT BOOKIES --out DIR``: a client's log and the served bookies' log, as one trace.

``CLIENT`` holds the client-mode traces a client under test wrote of its
ledgers, ``BOOKIES`` the traces reference bookies served with ``--trace``
wrote; each client trace is paired with the bookies' trace of its ledger as
``cross-check`` pairs them. Both must stamp every event with the host's
monotonic clock (``time``); the merged trace orders the two logs' events by
it and takes each reply the client logged as the ledger spec's
``ClientReceivesReply``, checked with ``RepliesInFlight = 1`` in the
``merged`` mode (:mod:`ledgerspec.conformance.log_merge`, which says why
that order is the run's). ``DIR`` gets ``merged.ndjson`` and its
``manifest.json``; ``ledgerspec check DIR`` judges it.

Exit status: 0 when the logs were merged; 2 for input that cannot be read,
paired or merged (a line without a stamp, stamps that go back), named with
its file and line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ledgerspec.conformance.log_merge import MERGED_FILE, merge_paths
from ledgerspec.conformance.reader import TraceFileError
from ledgerspec.tools.cli.commands.base import EXIT_OK, UsageError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "merge", help="a client's own log of its ledgers and the served bookies' log, as one trace to check"
    )
    parser.add_argument("client", metavar="CLIENT", help="the client's traces (client mode): a file or directory")
    parser.add_argument("bookies", metavar="BOOKIES", help="the served bookies' traces (bookies mode)")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR", help="where the merged trace goes")
    parser.set_defaults(run=_merge)


def _merge(args: argparse.Namespace, out: Console, err: Console) -> int:
    try:
        merged = merge_paths(args.client, args.bookies, args.out)
    except TraceFileError as exc:
        raise UsageError(str(exc)) from None
    table = Table(title=f"merged into {escape(str(args.out / MERGED_FILE))}")
    for column in ("trace", "bookies' trace", "events", "replies taken"):
        table.add_column(column, justify="right" if column in ("events", "replies taken") else "left")
    for m in merged:
        table.add_row(escape(m.trace), escape(m.bookies_trace), str(len(m.lines)), str(m.replies))
    out.print(table)
    out.print(f"check it with: ledgerspec check {escape(str(args.out))}", highlight=False, soft_wrap=True)
    return EXIT_OK
