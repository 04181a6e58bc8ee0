"""The subcommands of ``ledgerspec``, one module each.

A command module provides ``register(commands)``, which adds its parser to
the subparsers and sets ``run=`` to a function ``(args, out, err) -> int``.
:data:`COMMANDS` lists them in the order ``ledgerspec --help`` shows them.
"""

from __future__ import annotations

from ledgerspec.tools.cli.commands import (
    check,
    convert_traces,
    crash_check,
    cross_check,
    decode_cursor,
    demo,
    inspect_bookie,
    merge,
    model_check,
    mutants,
    quorum,
    record,
    reproduce,
    serve,
    simulate,
    soak,
    specs,
)

COMMANDS = (
    demo,
    model_check,
    check,
    cross_check,
    merge,
    convert_traces,
    simulate,
    mutants,
    soak,
    record,
    reproduce,
    serve,
    quorum,
    specs,
    inspect_bookie,
    crash_check,
    decode_cursor,
)

__all__ = ["COMMANDS"]
