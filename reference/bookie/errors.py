"""The errors of the reference bookie: one hierarchy, every file error naming the file and the offset.

``BookieError`` is the root. Its two branches:

- :class:`BookieFileError`: a file in a bookie directory is corrupt, missing
  or unexpected. It carries ``path`` and ``offset`` (``None`` when the
  problem is the file as a whole), so a message reads
  ``/data/journal/current/1.txn at offset 1536: negative record length -7``.
- :class:`BookieRequestError`: a request the bookie refuses (fenced ledger,
  no such entry, wrong master key, malformed entry), as BookKeeper answers
  with a return code.

:class:`BookieStateError` is a step taken out of order by the caller (a
request before ``start()``, a mark persisted before the flush of its
checkpoint): a bug in the caller, not in the data.
"""

from __future__ import annotations

__all__ = [
    "BadEntryError",
    "BookieError",
    "BookieFileError",
    "BookieRequestError",
    "BookieStateError",
    "CorruptFileError",
    "LedgerFencedError",
    "MissingFileError",
    "NoSuchEntryError",
    "NoSuchLedgerError",
    "UnauthorizedError",
    "UnexpectedFileError",
]


class BookieError(Exception):
    """Root of the reference bookie's errors."""


class BookieFileError(BookieError):
    """A file of a bookie directory cannot be used: the message names the file and the offset."""

    def __init__(self, path: str, offset: int | None, problem: str) -> None:
        self.path = path
        self.offset = offset
        self.problem = problem
        where = f"{path} at offset {offset}" if offset is not None else path
        super().__init__(f"{where}: {problem}")


class CorruptFileError(BookieFileError):
    """The bytes of a file break its format (bad magic, impossible length, digest mismatch, ...)."""


class MissingFileError(BookieFileError):
    """A file the directory's other files refer to does not exist (a journal the mark points into, ...)."""


class UnexpectedFileError(BookieFileError):
    """A file whose name looks like a bookie file but cannot be one (``xyz.txn``: not a hex id)."""


class BookieRequestError(BookieError):
    """A request the bookie refuses, as BookKeeper answers with an error code."""


class LedgerFencedError(BookieRequestError):
    """A normal add to a fenced ledger (BookKeeper's EFENCED); recovery adds are still accepted."""


class NoSuchLedgerError(BookieRequestError):
    """The bookie knows nothing of the ledger (ENOLEDGER)."""


class NoSuchEntryError(BookieRequestError):
    """The ledger is known but the entry is not stored (ENOENTRY)."""


class UnauthorizedError(BookieRequestError):
    """The master key does not match the one the ledger was created with (EUA)."""


class BadEntryError(BookieRequestError):
    """An entry or LAC buffer sent to the bookie is malformed or its digest does not match."""


class BookieStateError(BookieError):
    """A step taken out of order: a request while the bookie is not up, a checkpoint step out of sequence."""
