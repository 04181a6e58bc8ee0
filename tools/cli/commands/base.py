"""What every command shares: exit statuses and the error for bad input."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "EXIT_INCONCLUSIVE",
    "EXIT_MISSING_TOOL",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VIOLATION",
    "UsageError",
    "parse_constants",
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
