"""``ledgerspec specs``: the specs and their constants."""

from __future__ import annotations

import argparse
from typing import Any

from ledgerspec.spec import catalog
from ledgerspec.spec.values import format_value
from ledgerspec.tools.cli.commands.base import EXIT_OK
from rich.console import Console
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    specs = commands.add_parser("specs", help="list the specs and their constants")
    specs.set_defaults(run=_specs)


def _specs(args: argparse.Namespace, out: Console, err: Console) -> int:
    for entry in catalog.SPECS.values():
        out.print(f"[bold]{entry.name}[/bold]: {entry.summary}")
        table = Table("constant", "default", "meaning")
        for c in entry.python.constants:
            table.add_row(c.name, format_value(c.default), c.doc)
        out.print(table)
    return EXIT_OK
