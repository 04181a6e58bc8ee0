"""Positions in a managed ledger, shared by the managed-ledger and cursor specs.

The twin of ``positions.tla``. A position is ``(ledger id, entry id)``
(Pulsar's ``Position``, ``PositionImpl``), ordered ledger first, then entry:
Python's tuple order, TLA+'s ``PosLess``. Entry id ``-1`` stands before the
first entry of its ledger: ``(l, -1)`` is the mark-delete position of a
cursor that has consumed everything before ledger ``l``.

A managed ledger's entries are given here as ``entries``, the sequence of
all ledgers ever created with their entries (ledger ``l`` is
``entries[l - 1]``: ids are handed out from one counter starting at 1), and
``ledgers``, the ids of the ledger list (``ManagedLedgerInfo.ledgerInfo``),
in increasing order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "NO_POSITION",
    "Position",
    "entry_count",
    "last_position",
    "next_ledger",
    "next_position",
]

Position = tuple[int, int]
#: The position of nothing (Pulsar prints it as -1:-1).
NO_POSITION: Position = (-1, -1)


def entry_count(entries: Sequence[Sequence[Any]], ledger: int) -> int:
    """How many entries ledger ``ledger`` holds (``LedgerInfo.entries``)."""
    return len(entries[ledger - 1])


def next_ledger(ledgers: Sequence[int], ledger: int) -> int | None:
    """The first ledger of the list after ``ledger`` (``ManagedLedgerImpl.getNextValidLedger``), or None."""
    return next((x for x in ledgers if x > ledger), None)


def next_position(entries: Sequence[Sequence[Any]], ledgers: Sequence[int], pos: Position) -> Position | None:
    """The first entry after ``pos`` in the ledger list (``getNextValidPosition``), or None when there is none.

    Ledgers of the list that hold no entry are passed over.
    """
    ledger, entry = pos
    if ledger in ledgers and entry + 1 < entry_count(entries, ledger):
        return (ledger, entry + 1)
    for later in ledgers:
        if later > ledger and entry_count(entries, later) > 0:
            return (later, 0)
    return None


def last_position(entries: Sequence[Sequence[Any]], ledgers: Sequence[int]) -> Position | None:
    """The last entry of the ledger list (``ManagedLedgerImpl.getLastPosition``), or None when it holds none."""
    for ledger in reversed(ledgers):
        count = entry_count(entries, ledger)
        if count > 0:
            return (ledger, count - 1)
    return None
