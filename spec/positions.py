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

__all__ = [
    "NO_POSITION",
    "Position",
    "last_confirmed",
    "next_ledger",
    "next_position",
    "recovered_position",
    "slowest_reader_ledger",
]

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
    """``ManagedLedgerImpl.lastConfirmedEntry`` (``getLastPosition``): the last entry of the last ledger of the
    list; ``(l, -1)`` when that ledger ``l`` holds none yet (it is set so when a ledger is created)."""
    if not ledgers:
        return NO_POSITION
    return (ledgers[-1], count(ledgers[-1]) - 1)


def no_messages_after(ledgers: Sequence[int], count: Callable[[int], int], pos: Position) -> bool:
    """``ManagedLedgerImpl.isNoMessagesAfterPos`` (Pulsar 4.0.7): no entry of the list lies after ``pos``. From
    an empty last ledger it steps back to the last entry of the latest ledger that holds one
    (``getPreviousPosition``); with none written, no message follows any position."""
    written = [ledger for ledger in ledgers if count(ledger) > 0]
    return not written or pos >= (written[-1], count(written[-1]) - 1)


def recovered_position(ledgers: Sequence[int], count: Callable[[int], int], mark_delete: Position) -> Position:
    """``ManagedCursorImpl.recoveredCursor``: a restored mark-delete at ``(l, -1)`` of a ledger no longer listed
    moves to the next ledger of the list; none is left past the last entry (``last_confirmed``)."""
    ledger, entry = mark_delete
    if entry == -1 and ledger not in ledgers:
        after = next_ledger(ledgers, ledger)
        if after is not None:
            mark_delete = (after, -1)
    return min(mark_delete, last_confirmed(ledgers, count))


def slowest_reader_ledger(ledgers: Sequence[int], count: Callable[[int], int], slowest: Position) -> int:
    """``internalTrimLedgers`` (ManagedLedgerImpl, Pulsar 4.0.7): the ledger before which the ledgers of the list
    may go, from the slowest reader's position ``(x, e)``: ``x``, or ``x + 1`` when ``e`` is the last entry of
    ``x`` and ``x`` is not the last ledger of the list."""
    ledger, entry = slowest
    if ledger in ledgers and ledger != ledgers[-1] and count(ledger) == entry + 1:
        return ledger + 1
    return ledger
