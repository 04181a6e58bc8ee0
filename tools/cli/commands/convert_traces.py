"""``ledgerspec convert-traces IN... --to parquet|ndjson OUT``: trace files from one format to the other.

Events are written in reading order (files in the order given, directories
as their trace files in name order), each as it was read; ITF traces and
TLC's JSON traces become their events (``--spec`` names the spec a TLC trace
is of: a step TLC names otherwise becomes a ``Next`` event, see
:mod:`ledgerspec.conformance.tlc_json`). A line or row that cannot be read is reported with its file and
line and left out: the output holds only events, and the exit status is 2.
The Parquet layout is in docs/trace-format.md ("Parquet").
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
from ledgerspec.conformance.events import Event, InputError
from ledgerspec.conformance.parquet import write_parquet
from ledgerspec.conformance.reader import DEFAULT_MAX_LINE_BYTES, TraceFileError, read_events
from ledgerspec.spec import catalog
from ledgerspec.spec.tracing import mapping_for
from ledgerspec.tools.cli.commands.base import EXIT_OK, EXIT_USAGE, UsageError
from rich.console import Console
from rich.markup import escape

__all__ = ["register"]

FORMATS = ("parquet", "ndjson")


def register(commands: Any) -> None:
    convert = commands.add_parser(
        "convert-traces",
        help="convert trace files between NDJSON and Parquet",
        description="Write the events of trace files (NDJSON, Parquet, ITF, TLC JSON) to one NDJSON or Parquet file.",
    )
    convert.add_argument("inputs", nargs="+", metavar="IN", help="trace files, or directories of them")
    convert.add_argument("--to", required=True, choices=FORMATS, help="the output format")
    convert.add_argument("output", metavar="OUT", help="the file to write")
    convert.add_argument(
        "--spec", help="the spec TLC JSON traces are of (" + ", ".join(catalog.SPECS) + "): names their steps"
    )
    convert.add_argument(
        "--max-line-bytes", type=int, default=DEFAULT_MAX_LINE_BYTES, metavar="N",
        help=f"longest line read (default {DEFAULT_MAX_LINE_BYTES:,})",
    )  # fmt: skip
    convert.set_defaults(run=_convert)


def _convert(args: argparse.Namespace, out: Console, err: Console) -> int:
    output = Path(args.output)
    inputs = [Path(p).resolve() for p in args.inputs]
    if output.resolve() in inputs:
        raise UsageError(f"{output}: the output would overwrite an input")
    bad: list[InputError] = []
    try:
        actions = None if args.spec is None else mapping_for(catalog.find(args.spec).name).actions
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None

    def events() -> Iterator[Event]:
        for item in read_events(args.inputs, max_line_bytes=args.max_line_bytes, actions=actions):
            if isinstance(item, InputError):
                bad.append(item)
            else:
                yield item

    try:
        written = write_parquet(output, events()) if args.to == "parquet" else _write_ndjson(output, events())
    except TraceFileError as exc:
        output.unlink(missing_ok=True)
        raise UsageError(str(exc)) from None
    out.print(f"{written:,} events written to {escape(str(output))} ({args.to})", highlight=False)
    for error in bad:
        err.print(f"[red]left out[/red] {escape(str(error))}", highlight=False, soft_wrap=True)
    return EXIT_USAGE if bad else EXIT_OK


def _write_ndjson(path: Path, events: Iterator[Event]) -> int:
    count = 0
    with open(path, "wb") as f:
        for e in events:
            f.write(orjson.dumps(e.to_json()))
            f.write(b"\n")
            count += 1
    return count
