"""``ledgerspec specs``: the specs and their constants."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ledgerspec.spec import catalog
from ledgerspec.spec.values import format_value, to_json
from ledgerspec.tools.cli.commands.base import EXIT_OK
from rich.console import Console
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    specs = commands.add_parser("specs", help="list the specs and their constants")
    specs.add_argument("--json", action="store_true", help="print one JSON object")
    specs.set_defaults(run=_specs)


def _specs(args: argparse.Namespace, out: Console, err: Console) -> int:
    if args.json:
        print(json.dumps(_specs_json(), indent=2))
        return EXIT_OK
    for entry in catalog.SPECS.values():
        out.print(f"[bold]{entry.name}[/bold]: {entry.summary}")
        table = Table("constant", "default", "meaning")
        for c in entry.python.constants:
            table.add_row(c.name, format_value(c.default), c.doc)
        out.print(table)
    return EXIT_OK


def _specs_json() -> dict[str, Any]:
    """``{"specs": [...]}``, each ``name``, ``summary`` and ``constants`` (each ``name``, ``type``: int, bool or
    str, ``default`` as JSON, ``choices`` or null, ``doc``)."""
    return {
        "specs": [
            {
                "name": entry.name,
                "summary": entry.summary,
                "constants": [
                    {
                        "name": c.name,
                        "type": c.type.__name__,
                        "default": to_json(c.default),
                        "choices": None if c.choices is None else [to_json(x) for x in c.choices],
                        "doc": c.doc,
                    }
                    for c in entry.python.constants
                ],
            }
            for entry in catalog.SPECS.values()
        ]
    }
