"""TLC's coverage report read as the actions of a spec, so that it compares with the explorer's counts.

TLC names each action of its coverage report after the innermost operator of
Next's text that the action is part of (:class:`~.output.TlcActionCoverage`).
Where the TLA+ text defines its actions under the Python twin's names, that
is the spec action. Elsewhere the operator only gathers actions
(``NetworkSteps == \\E m \\in net : NetworkLosesMessage(m)``), or TLC could
not split Next down to one action (``\\E k \\in 0 .. Len(pending) :
BrokerCrashes(k)``: the set depends on the state); the spec action is then
the one that this part of the text names. A part that names no spec action,
or several, is left unmatched: its counts cannot be told apart by action.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import attrs
from ledgerspec.tools.model_checking.tlc.output import TlcActionCoverage

__all__ = ["SpecActionCoverage", "spec_action_coverage"]

_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT_RE = re.compile(r"\(\*.*?\*\)|\\\*[^\n]*", re.DOTALL)


@attrs.frozen
class SpecActionCoverage:
    """TLC's counts per spec action."""

    #: per spec action, in the spec's order: (steps taken, states reached first); (0, 0) for one never taken
    counts: dict[str, tuple[int, int]]
    #: TLC's actions that name no spec action, or several (their labels)
    unmatched: tuple[str, ...]


def spec_action_coverage(
    coverage: Iterable[TlcActionCoverage], actions: Sequence[str], folders: Sequence[Path]
) -> SpecActionCoverage:
    """Sum TLC's ``coverage`` by the spec action each of its actions is (see the module docstring);
    ``actions`` are the spec's action names, ``folders`` where the spec's modules are."""
    counts = dict.fromkeys(actions, (0, 0))
    unmatched: list[str] = []
    texts = _ModuleTexts(folders)
    for counted in coverage:
        action = _spec_action(counted, set(actions), texts)
        if action is None:
            unmatched.append(counted.label)
            continue
        steps, first = counts[action]
        counts[action] = (steps + counted.states_generated, first + counted.distinct_states)
    return SpecActionCoverage(counts, tuple(unmatched))


def _spec_action(counted: TlcActionCoverage, actions: set[str], texts: _ModuleTexts) -> str | None:
    if counted.name in actions:
        return counted.name
    lines = texts.lines(counted.module)
    if lines is None:
        return None
    text = _span(lines, counted.span) if counted.span is not None else _definition(lines, counted.line)
    named = {word for word in _IDENTIFIER_RE.findall(_COMMENT_RE.sub(" ", text)) if word in actions}
    return named.pop() if len(named) == 1 else None


def _span(lines: list[str], span: tuple[int, int, int, int]) -> str:
    """The text between two places, TLC's lines and columns, both counted from 1, the last included."""
    first_line, first_col, last_line, last_col = span
    if first_line == last_line:
        return lines[first_line - 1][first_col - 1 : last_col]
    middle = lines[first_line : last_line - 1]
    return "\n".join([lines[first_line - 1][first_col - 1 :], *middle, lines[last_line - 1][:last_col]])


def _definition(lines: list[str], line: int) -> str:
    """The definition that starts on ``line``: up to the next line that starts at the margin (the specs indent
    what continues a definition)."""
    end = line
    while end < len(lines) and (not lines[end].strip() or lines[end][0].isspace()):
        end += 1
    return "\n".join(lines[line - 1 : end])


class _ModuleTexts:
    """The lines of the spec's modules, read once each."""

    def __init__(self, folders: Sequence[Path]) -> None:
        self.folders = folders
        self._lines: dict[str, list[str] | None] = {}

    def lines(self, module: str) -> list[str] | None:
        if module not in self._lines:
            found = next((f / f"{module}.tla" for f in self.folders if (f / f"{module}.tla").is_file()), None)
            self._lines[module] = found.read_text(encoding="utf-8").splitlines() if found is not None else None
        return self._lines[module]
