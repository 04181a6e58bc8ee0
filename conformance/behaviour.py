"""The spec behaviours a check matches a trace with: the steps taken, chained, and the steps the search weighs.

The checker (:mod:`ledgerspec.conformance.checker`) builds them as it
searches; the explanation of a failure (:mod:`ledgerspec.conformance.explanation`)
reads them back: the path from ``Init`` to a candidate state, the hidden
steps since the previous event.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import itemgetter
from typing import Any

__all__ = ["SERIAL", "HiddenStep", "Node", "Transition", "shortest"]

# A way to take an event from a state: (action, args, next state or None, what the step breaks or
# None, the cached canonical JSON of the next state's observable values, the step's serial number
# for coverage or -1).
Transition = tuple[str, tuple[Any, ...], Any, "str | None", "dict[str, bytes] | None", int]
SERIAL = itemgetter(5)
# A hidden step from a state: (action, args, next state, serial number for coverage or -1).
HiddenStep = tuple[str, tuple[Any, ...], Any, int]


class Node:
    """A step of a spec behaviour matched so far, and the state it reaches; the chain of parents is the behaviour."""

    __slots__ = ("action", "args", "depth", "hidden", "parent", "reported", "serial", "state")

    def __init__(
        self,
        parent: Node | None,
        action: str,
        args: tuple[Any, ...],
        state: Any,
        serial: int = -1,  # the step's serial number for coverage, or -1
        hidden: bool = False,
        reported: bool = False,  # not a spec step: the trace's event, to the state it reported (checker.py)
    ) -> None:
        self.parent = parent
        self.action = action
        self.args = args
        self.state = state
        self.serial = serial
        self.hidden = hidden
        self.reported = reported
        self.depth: int = 0 if parent is None else parent.depth + 1


def shortest(nodes: Mapping[Any, Node]) -> Node | None:
    """The candidate reached by the shortest behaviour."""
    return min(nodes.values(), key=lambda n: n.depth, default=None)
