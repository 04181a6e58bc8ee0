"""The ledger client's errors, named after the BookKeeper exceptions they stand for."""

from __future__ import annotations

__all__ = [
    "BadEntryError",
    "LedgerClientError",
    "LedgerClosedError",
    "LedgerFencedError",
    "LedgerStateError",
    "NotEnoughBookiesError",
    "ReadBeyondLacError",
    "ReadFailedError",
    "RecoveryFailedError",
    "TooManyPendingAddsError",
]


class LedgerClientError(Exception):
    """Root of the ledger client's errors."""


class NotEnoughBookiesError(LedgerClientError):
    """Fewer writable bookies than the ensemble needs (``BKNotEnoughBookiesException``)."""

    def __init__(self, needed: int, writable: list[str], excluded: list[str] | None = None) -> None:
        self.needed = needed
        self.writable = writable
        detail = f"; {len(excluded)} excluded: {', '.join(excluded)}" if excluded else ""
        super().__init__(
            f"not enough bookies: need {needed}, {len(writable)} writable"
            f"{': ' + ', '.join(writable) if writable else ''}{detail}"
        )


class LedgerFencedError(LedgerClientError):
    """The ledger was fenced or its metadata moved on: this handle may write no more (``BKLedgerFencedException``)."""


class LedgerClosedError(LedgerClientError):
    """The handle was closed (``BKLedgerClosedException``)."""


class TooManyPendingAddsError(LedgerClientError):
    """The handle's limit on pending adds is reached (the client's throttle)."""


class ReadBeyondLacError(LedgerClientError):
    """A read past the last entry a reader may see (``BKReadException``: entries above the LAC are not readable)."""


class ReadFailedError(LedgerClientError):
    """No bookie of the write set returned the entry with a good digest (``BKReadException``)."""


class RecoveryFailedError(LedgerClientError):
    """Recovery could not decide an entry, or another client closed the ledger elsewhere (BKLedgerRecoveryException)."""


class BadEntryError(LedgerClientError):
    """An entry a bookie returned is not the one asked for, or its digest does not match."""


class LedgerStateError(LedgerClientError):
    """An operation out of order: a step taken on an operation that cannot take it now."""
