"""Where a bookie keeps its files, named as BookKeeper names them.

A bookie has one journal directory and one or more ledger directories; the
files live in each one's ``current/`` subdirectory:

=====================================================  ===========================================
``<journal>/current/<hex id>.txn``                     journal files (``Journal.listJournalIds``)
``<ledgers>/current/<hex id>.log``                     entry logs (``DefaultEntryLogger``)
``<ledgers>/current/<hex>/<hex>/<hex ledger id>.idx``  ledger index files
                                                       (``IndexPersistenceMgr.getLedgerName``:
                                                       bits 8-15 of the ledger id, then bits 0-7)
``<ledgers>/current/lastMark``                         the LastLogMark, one copy per ledger directory
=====================================================  ===========================================

File ids are written in lower-case hex without leading zeros
(``Long.toHexString``). With several ledger directories, the reference bookie
puts entry log ``n`` and the index of ledger ``l`` in directory
``n mod N`` and ``l mod N``; readers look in every directory, as BookKeeper
does, so they also read directories where BookKeeper chose otherwise.

Files created atomically are first written as ``<name>.tmp`` and renamed;
a ``.tmp`` file left by a crash is a leftover, not part of the state.
"""

from __future__ import annotations

import os
import re

import attrs
from ledgerspec.reference.bookie.errors import UnexpectedFileError
from ledgerspec.reference.bookie.files import FileSystem, OsFileSystem

__all__ = [
    "ENTRY_LOG_SUFFIX",
    "INDEX_SUFFIX",
    "JOURNAL_SUFFIX",
    "LAST_MARK_NAME",
    "TEMP_SUFFIX",
    "BookieLayout",
    "parse_file_id",
]

JOURNAL_SUFFIX = ".txn"
ENTRY_LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".idx"
LAST_MARK_NAME = "lastMark"  # Journal.LAST_MARK_DEFAULT_NAME (one journal directory)
TEMP_SUFFIX = ".tmp"

_HEX = re.compile(r"[0-9a-fA-F]{1,16}")
_LEDGER_DIR = re.compile(r"ledgers(-\d+)?")


def parse_file_id(directory: str, name: str, suffix: str) -> int:
    """The id in a file name ``<hex><suffix>``; :class:`UnexpectedFileError` if the stem is not hex."""
    stem = name[: -len(suffix)]
    if not _HEX.fullmatch(stem):
        raise UnexpectedFileError(os.path.join(directory, name), None, f"{suffix} file whose name is not a hex id")
    return int(stem, 16)


@attrs.frozen
class BookieLayout:
    """The ``current/`` directories of one bookie: where each kind of file goes."""

    journal_dir: str  # <journal>/current
    ledger_dirs: tuple[str, ...]  # each <ledgers>/current; lastMark is copied into every one

    def __attrs_post_init__(self) -> None:
        if not self.ledger_dirs:
            raise ValueError("a bookie needs at least one ledger directory")

    @classmethod
    def in_data_dir(cls, root: str, ledger_dirs: int = 1) -> BookieLayout:
        """The layout under one data directory: ``journal/``, ``ledgers/`` (then ``ledgers-1/``, ...)."""
        if ledger_dirs < 1:
            raise ValueError(f"a bookie needs at least one ledger directory, got {ledger_dirs}")
        names = ["ledgers"] + [f"ledgers-{i}" for i in range(1, ledger_dirs)]
        return cls(os.path.join(root, "journal", "current"), tuple(os.path.join(root, n, "current") for n in names))

    @classmethod
    def discover(cls, root: str, fs: FileSystem | None = None) -> BookieLayout | None:
        """The layout :meth:`in_data_dir` made under ``root``, or ``None`` if ``root`` has no journal directory."""
        fs = fs or OsFileSystem()
        journal = os.path.join(root, "journal", "current")
        if not fs.is_dir(journal):
            return None
        names = sorted(
            (n for n in fs.list_dir(root) if _LEDGER_DIR.fullmatch(n) and fs.is_dir(os.path.join(root, n, "current"))),
            key=lambda n: int(n.partition("-")[2] or 0),
        )
        return cls(journal, tuple(os.path.join(root, n, "current") for n in names)) if names else None

    def journal_path(self, file_id: int) -> str:
        return os.path.join(self.journal_dir, f"{file_id:x}{JOURNAL_SUFFIX}")

    def entry_log_dir(self, log_id: int) -> str:
        """The ledger directory a new entry log goes to."""
        return self.ledger_dirs[log_id % len(self.ledger_dirs)]

    def entry_log_path(self, log_id: int) -> str:
        return os.path.join(self.entry_log_dir(log_id), f"{log_id:x}{ENTRY_LOG_SUFFIX}")

    def index_path(self, ledger_id: int) -> str:
        """Where the reference bookie puts the index of a new ledger (``IndexPersistenceMgr.getLedgerName``)."""
        base = self.ledger_dirs[ledger_id % len(self.ledger_dirs)]
        return os.path.join(base, *self.index_subdirs(ledger_id), f"{ledger_id:x}{INDEX_SUFFIX}")

    @staticmethod
    def index_subdirs(ledger_id: int) -> tuple[str, str]:
        return f"{(ledger_id >> 8) & 0xFF:x}", f"{ledger_id & 0xFF:x}"

    def last_mark_paths(self) -> tuple[str, ...]:
        return tuple(os.path.join(d, LAST_MARK_NAME) for d in self.ledger_dirs)
