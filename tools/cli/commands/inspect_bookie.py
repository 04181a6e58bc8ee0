"""``ledgerspec inspect-bookie DIR``: show a bookie's files and check them against each other.

Shows the journals (their records, and where the lastMark points), the
lastMark copies, the entry logs and the ledger index; then the problems
found by :func:`~ledgerspec.reference.bookie.disk.check_bookie_files`. Exit
status 0 when the directory is valid (warnings allowed), 1 when it is not,
2 when DIR is not a bookie directory.

The files are read by the format readers alone, not by the bookie engine,
so directories of Apache BookKeeper's bookies (``--journal-dir`` and
``--ledger-dir`` for their ``current/`` directories) are read the same way.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from ledgerspec.reference.bookie.disk import BookieFiles, Problem, check_bookie_files, read_bookie_files
from ledgerspec.reference.bookie.entry import DigestType
from ledgerspec.reference.bookie.formats import JournalEnd, JournalScan, RecordKind, split_location
from ledgerspec.reference.bookie.layout import BookieLayout
from ledgerspec.reference.bookie.report import bookie_files_json, explicit_lac
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_VIOLATION, UsageError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    inspect = commands.add_parser(
        "inspect-bookie", help="show and check a bookie's journals, lastMark, entry logs, index"
    )
    inspect.add_argument(
        "dir", nargs="?", help="a bookie data directory: journal/current and ledgers*/current under it"
    )
    inspect.add_argument("--journal-dir", help="the journal's current/ directory (instead of DIR)")
    inspect.add_argument("--ledger-dir", action="append", default=[], help="a ledger directory's current/ (repeatable)")
    inspect.add_argument(
        "--digest",
        choices=("auto", "crc32c", "crc32"),
        default="auto",
        help="the entries' digest type (default: whichever matches)",
    )
    inspect.add_argument("--records", action="store_true", help="list every journal record and entry-log entry")
    inspect.add_argument("--json", action="store_true", help="print one JSON object")
    inspect.set_defaults(run=_inspect)


def _inspect(args: argparse.Namespace, out: Console, err: Console) -> int:
    layout, root = _layout(args)
    files = read_bookie_files(layout)
    digest = None if args.digest == "auto" else DigestType(args.digest)
    problems = check_bookie_files(files, digest)
    valid = not any(p.severity == "error" for p in problems)
    if args.json:
        print(json.dumps(bookie_files_json(files, problems, valid), indent=2))
    else:
        _print(out, files, problems, valid, root, args.records)
    return EXIT_OK if valid else EXIT_VIOLATION


def _layout(args: argparse.Namespace) -> tuple[BookieLayout, str]:
    if args.journal_dir or args.ledger_dir:
        if args.dir or not (args.journal_dir and args.ledger_dir):
            raise UsageError("give either DIR, or --journal-dir with at least one --ledger-dir")
        for path in [args.journal_dir, *args.ledger_dir]:
            if not os.path.isdir(path):
                raise UsageError(f"{path}: no such directory")
        layout = BookieLayout(os.path.abspath(args.journal_dir), tuple(os.path.abspath(d) for d in args.ledger_dir))
        return layout, os.path.commonpath([layout.journal_dir, *layout.ledger_dirs])
    if not args.dir:
        raise UsageError("give a bookie directory DIR, or --journal-dir and --ledger-dir")
    if not os.path.isdir(args.dir):
        raise UsageError(f"{args.dir}: no such directory")
    found = BookieLayout.discover(os.path.abspath(args.dir))
    if found is None:
        raise UsageError(
            f"{args.dir} is not a bookie directory: it needs journal/current and ledgers/current "
            "(for other layouts use --journal-dir and --ledger-dir)"
        )
    return found, os.path.abspath(args.dir)


# ---------------------------------------------------------------- human output


def _print(out: Console, files: BookieFiles, problems: list[Problem], valid: bool, root: str, records: bool) -> None:
    def rel(path: str) -> str:
        return escape(os.path.relpath(path, root))

    mark = files.persisted_mark
    out.print(f"[bold]bookie[/bold] {escape(root)}")
    out.print(
        f"  journal dir {rel(files.layout.journal_dir)}; ledger dirs "
        + ", ".join(rel(d) for d in files.layout.ledger_dirs)
    )
    copies = ", ".join(f"{rel(c.path)} = {c.mark if c.mark is not None else 'unreadable'}" for c in files.marks)
    out.print(f"[bold]lastMark[/bold] {mark}" + (f"  ({copies})" if copies else "  (no lastMark file)"))

    table = Table("journal", "version", "bytes", "records", "ends", "lastMark", title="journals", title_justify="left")
    for journal in files.journals:
        table.add_row(
            os.path.basename(journal.path),
            str(journal.version),
            f"{journal.size:,}",
            str(len(journal.records)),
            _journal_end(journal),
            _mark_note(journal, mark.file_id, mark.offset),
        )
    out.print(table)
    if records:
        for journal in files.journals:
            _print_records(out, journal, os.path.basename(journal.path), mark.file_id, mark.offset)

    table = Table("entry log", "bytes", "entries", "ledgers", "ends", title="entry logs", title_justify="left")
    for log in files.entry_logs:
        ledgers = sorted({r.ledger_id for r in log.records})
        table.add_row(
            rel(log.path),
            f"{log.size:,}",
            str(len(log.records)),
            _short_list(ledgers),
            "torn tail" if log.torn else "end of file",
        )
    out.print(table)
    if records:
        for log in files.entry_logs:
            entries = Table("offset", "location", "ledger", "entry", "size", title=rel(log.path), title_justify="left")
            for r in log.records:
                entries.add_row(str(r.offset), f"{r.location:#x}", str(r.ledger_id), str(r.entry_id), str(r.size))
            out.print(entries)

    table = Table(
        "ledger", "index file", "fenced", "explicit LAC", "entries", "locations", title="index", title_justify="left"
    )
    for index in files.indexes:
        lac = explicit_lac(index.header.explicit_lac)
        logs = sorted({split_location(loc)[0] for loc in index.locations.values()})
        table.add_row(
            str(index.ledger_id),
            rel(index.path),
            "yes" if index.header.fenced else "no",
            "-" if lac is None else str(lac),
            _ranges(sorted(index.locations)),
            "entry logs " + _short_list(logs) if logs else "-",
        )
    out.print(table)
    if files.leftovers or files.other_files:
        out.print("other files: " + ", ".join(rel(p) for p in [*files.leftovers, *files.other_files]))

    for problem in problems:
        colour = "red" if problem.severity == "error" else "yellow"
        where = rel(problem.path) + (f" at offset {problem.offset}" if problem.offset is not None else "")
        out.print(f"[{colour}]{problem.severity}[/{colour}]: {where}: {escape(problem.message)}", highlight=False)
    errors = sum(p.severity == "error" for p in problems)
    warnings = len(problems) - errors
    verdict = "[green]valid[/green]" if valid else f"[red]invalid[/red]: {errors} error(s)"
    out.print(verdict + (f", {warnings} warning(s)" if warnings else ""))


def _journal_end(journal: JournalScan) -> str:
    if journal.end_kind is JournalEnd.TORN:
        return f"torn record at {journal.end}"
    if journal.end_kind is JournalEnd.ZERO_LENGTH:
        return f"zeros from {journal.end}"
    return "end of file"


def _mark_note(journal: JournalScan, file_id: int, offset: int) -> str:
    if journal.file_id < file_id:
        return "wholly before"
    if journal.file_id > file_id:
        return "after"
    before = journal.records_before(offset)
    return f"<- at {offset}: {before} record(s) before, {len(journal.records) - before} after"


def _print_records(out: Console, journal: JournalScan, name: str, file_id: int, offset: int) -> None:
    table = Table("offset", "kind", "ledger", "entry", "detail", title=name, title_justify="left")
    marked = journal.file_id != file_id
    for record in journal.records:
        if not marked and record.offset >= offset:
            table.add_row(str(offset), "[bold]lastMark[/bold]", "", "", "")
            marked = True
        detail = ""
        if record.kind is RecordKind.EXPLICIT_LAC:
            detail = f"lac {record.lac}"
        elif record.kind is RecordKind.LEDGER_KEY:
            detail = f"key {record.master_key.hex()}"
        elif record.kind is RecordKind.ENTRY:
            detail = f"{len(record.data)} bytes"
        entry = str(record.entry_id) if record.kind is RecordKind.ENTRY else ""
        table.add_row(str(record.offset), record.kind.value, str(record.ledger_id), entry, detail)
    if not marked:
        table.add_row(str(offset), "[bold]lastMark[/bold]", "", "", "")
    out.print(table)


def _ranges(ids: list[int]) -> str:
    """``0-4, 7, 9-10``: sorted ids as ranges."""
    parts = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(parts) or "-"


def _short_list(values: list[int], limit: int = 8) -> str:
    shown = ", ".join(str(v) for v in values[:limit])
    return shown + (f", ... ({len(values)})" if len(values) > limit else "")
