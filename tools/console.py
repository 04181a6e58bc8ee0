"""The consoles the command line and the benchmarks print to.

On a terminal a console takes the terminal's width. Piped to a file or
another program, Rich would assume 80 columns and cut tables to fit; here it
gets a width that keeps every column whole, so that the figures of a
benchmark or a report survive ``> file``. ``COLUMNS``, when set, still
decides, as Rich lets it. Emoji codes are left as text: ``file:100: message``
names line 100, not an emoji.
"""

from __future__ import annotations

import os

from rich.console import Console

__all__ = ["PIPED_WIDTH", "output_console"]

PIPED_WIDTH = 200  # columns when the output is not a terminal


def output_console(*, stderr: bool = False) -> Console:
    """A console on standard output (or standard error), as wide as the module docstring says."""
    probe = Console(stderr=stderr, emoji=False)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, width=PIPED_WIDTH, emoji=False)
