"""Positions in a managed ledger, shared by the managed-ledger and cursor specs.

The twin of ``positions.tla``. A position is ``(ledger id, entry id)``
(Pulsar's ``Position``, ``PositionImpl``), ordered ledger first, then entry:
Python's tuple order, TLA+'s ``PosLess``. Entry id ``-1`` stands before the
first entry of its ledger: ``(l, -1)`` is the mark-delete position of a
cursor that has consumed everything before ledger ``l``.

A managed ledger is given here as ``ledgers``, the ids of its ledger list
(``ManagedLedgerInfo.ledgerInfo``) in increasing order, and ``count``, the
number of entries of a ledger (``LedgerInfo.entries``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["NO_POSITION", "Position", "last_confirmed", "next_ledger", "next_position"]

Position = tuple[int, int]
#: The position of nothing (Pulsar prints it as -1:-1).
NO_POSITION: Position = (-1, -1)


def next_ledger(ledgers: Sequence[int], ledger: int) -> int | None:
    """The first ledger of the list after ``ledger`` (``ManagedLedgerImpl.getNextValidLedger``), or None."""
    return next((x for x in ledgers if x > ledger), None)


def next_position(ledgers: Sequence[int], count: Callable[[int], int], pos: Position) -> Position | None:
    """The first entry after ``pos`` in the ledger list (``getNextValidPosition``), or None when there is none.

    ``count(l)`` is the number of entries of ledger ``l``; ledgers of the list that hold none are passed over.
    """
    ledger, entry = pos
    if ledger in ledgers and entry + 1 < count(ledger):
        return (ledger, entry + 1)
    for later in ledgers:
        if later > ledger and count(later) > 0:
            return (later, 0)
    return None


def last_confirmed(ledgers: Sequence[int], count: Callable[[int], int]) -> Position:
    """``initLastConfirmedEntry``: the last entry of the ledger list; from the last ledger, empty ledgers are
    passed over towards the first; when none holds an entry, ``(first ledger, -1)``."""
    for ledger in reversed(ledgers):
        if count(ledger) > 0:
            return (ledger, count(ledger) - 1)
    return (ledgers[0], -1) if ledgers else NO_POSITION
