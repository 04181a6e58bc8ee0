"""What every command shares: exit statuses, the error for bad input, and the progress of long steps."""

from __future__ import annotations

from collections.abc import Sequence

from ledgerspec.tools.console import StepProgress
from rich.console import Console

__all__ = [
    "EXIT_INCONCLUSIVE",
    "EXIT_MISSING_TOOL",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATION",
    "UsageError",
    "parse_constants",
    "positive_jobs",
    "runs_progress",
]

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_MISSING_TOOL = 0, 1, 2, 3
# A check that could not decide (a search bound was hit): neither a pass nor a violation.
EXIT_INCONCLUSIVE = 4


class UsageError(Exception):
    """Bad input from the user: reported as a message, exit status 2."""


def parse_constants(items: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` items of a repeatable ``--const`` option, as a mapping."""
    constants = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UsageError(f"--const expects NAME=VALUE, got {item!r}")
        constants[name.strip()] = value.strip()
    return constants


def positive_jobs(jobs: int | None, default: int) -> int:
    """The ``--jobs`` option's value: ``default`` when not given; a usage error below 1."""
    chosen = default if jobs is None else jobs
    if chosen < 1:
        raise UsageError(f"--jobs must be at least 1, got {chosen}")
    return chosen


def runs_progress(err: Console, *, quiet: bool, transient: bool = False) -> StepProgress:
    """The progress of a command's long steps on ``err``: a live bar on a terminal, plain lines on anything
    else (:class:`~ledgerspec.tools.console.StepProgress`); nothing when ``quiet`` (``--json``)."""
    return StepProgress(err, quiet=quiet, transient=transient)
