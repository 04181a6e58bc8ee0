"""``ledgerspec specs``: the specs and their constants."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ledgerspec.spec import catalog
from ledgerspec.spec.models import DEFAULTS
from ledgerspec.spec.values import format_value, to_json
from ledgerspec.tools.cli.commands.base import EXIT_OK
from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = ["register"]


def register(commands: Any) -> None:
    specs = commands.add_parser("specs", help="list the specs, their constants and their presets")
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
        presets = [f"{escape(name)} ({_constants(model.constants)})" for name, model in entry.models.presets.items()]
        every_action = f"; {', '.join(presets)}: {'each takes' if len(presets) > 1 else 'takes'} every action"
        out.print(f"presets (model-check --preset): {DEFAULTS}{every_action if presets else ''}", highlight=False)
    return EXIT_OK


def _constants(constants: Mapping[str, Any]) -> str:
    return escape(" ".join(f"{k}={format_value(v)}" for k, v in constants.items())) or "the defaults"


def _specs_json() -> dict[str, Any]:
    """``{"specs": [...]}``, each ``name``, ``summary``, ``constants`` (each ``name``, ``type``: int, bool or
    str, ``default`` as JSON, ``choices`` or null, ``doc``) and ``presets`` (each ``name``, ``constants`` as set
    over the defaults, ``distinct_states`` but for ``defaults``, ``why``)."""
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
                "presets": [
                    {"name": DEFAULTS, "constants": {}},
                    *(
                        {
                            "name": name,
                            "constants": {k: to_json(v) for k, v in model.constants.items()},
                            "distinct_states": model.distinct_states,
                            "why": model.why,
                        }
                        for name, model in entry.models.presets.items()
                    ),
                ],
            }
            for entry in catalog.SPECS.values()
        ]
    }
