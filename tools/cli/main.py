"""The ``ledgerspec`` command line.

Every error a user can cause (an unknown spec or constant, an impossible
quorum, no Java, a TLA+ text TLC cannot parse) ends in one clear message and
a non-zero exit status, never in a traceback.

Exit status: 0 all checks passed; 1 a property is violated or the engines
disagree; 2 bad usage or input; 3 a required tool (Java, TLC) is missing.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from ledgerspec.spec.kernel import ConstantError
from ledgerspec.tools.cli.commands import COMMANDS
from ledgerspec.tools.cli.commands.base import EXIT_MISSING_TOOL, EXIT_USAGE, UsageError
from ledgerspec.tools.console import output_console
from rich.console import Console

from ledgerspec import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ledgerspec",
        description="Specs, a reference engine and a conformance oracle for BookKeeper and Pulsar storage.",
    )
    parser.add_argument("--version", action="version", version=f"ledgerspec {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    out, err = output_console(), output_console(stderr=True)
    try:
        return int(args.run(args, out, err))
    except (UsageError, ConstantError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("[red]interrupted[/red]")
        return 130
    except BrokenPipeError:  # the reader of the output went away (``| head``): stop quietly, as a pipe expects
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # (Python's flush of stdout at exit would fail again)
        return 128 + signal.SIGPIPE
    except Exception as exc:
        return _tool_error(exc, err)


def _tool_error(exc: Exception, err: Console) -> int:
    """TLC's own errors, reported without a traceback; anything else is a bug and is raised."""
    from ledgerspec.tools.model_checking.tlc.output import TlcSpecError, TlcUnavailable

    if isinstance(exc, TlcUnavailable):
        err.print(f"[red]error:[/red] {exc}", highlight=False)
        return EXIT_MISSING_TOOL
    if isinstance(exc, TlcSpecError):
        err.print(f"[red]error: TLC could not check the spec:[/red]\n{exc}", highlight=False)
        return EXIT_USAGE
    raise exc


if __name__ == "__main__":
    sys.exit(main())
