"""The ledger storage: a memtable in front of the entry logs and the per-ledger index files.

As BookKeeper's ``SortedLedgerStorage`` over ``InterleavedLedgerStorage``:

- an added entry goes into the memtable (``EntryMemTable``); tailing reads
  are served from it;
- :meth:`LedgerStorage.flush` writes the memtable, sorted by ledger and
  entry, to the current entry log in one write and fsyncs it; then, ledger by
  ledger, writes each entry's location into the ledger's index file
  (``FileInfo``: slot ``1024 + 8 * entryId``), rewrites the index header when
  the fenced flag or the explicit LAC changed, and fsyncs the index file.
  Only then does the memtable empty, and only after that may the caller
  persist a mark. Index locations are written after the entry log is
  fsynced, so no index slot that survives a crash points at data that did
  not;
- catch-up reads go index -> entry log, checking that the location holds the
  entry asked for and that its digest matches.

Entry logs roll over when the next flush would pass ``entry_log_max_bytes``;
after a restart a new log is started, never an old one appended to (as
BookKeeper does). New index files and entry logs are created whole (see
:meth:`~ledgerspec.reference.bookie.files.FileSystem.create_durably`), their
directories made durable.

Left out: the ledgers map BookKeeper appends when it finalises an entry log
(its header keeps offset 0: "not finalised", which BookKeeper handles by
scanning), compaction and garbage collection of entry logs, ledger deletion,
and the page cache of index entries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import attrs
from ledgerspec.reference.bookie.disk import find_index_files, list_file_ids
from ledgerspec.reference.bookie.entry import DigestType, EntryFormatError, check_entry, decode_lac
from ledgerspec.reference.bookie.errors import CorruptFileError, MissingFileError
from ledgerspec.reference.bookie.files import FileHandle, FileSystem
from ledgerspec.reference.bookie.formats import (
    ENTRY_LOG_HEADER_SIZE,
    FENCED_BIT,
    INDEX_VERSION,
    IndexHeader,
    encode_index_slot,
    entry_log_header,
    entry_log_record,
    index_header,
    index_slot_offset,
    make_location,
    parse_index,
    read_entry_at,
    split_location,
)
from ledgerspec.reference.bookie.layout import ENTRY_LOG_SUFFIX, BookieLayout

__all__ = ["LedgerInfo", "LedgerStorage"]


@attrs.define(eq=False)
class LedgerInfo:
    """What the bookie knows of one ledger (``LedgerDescriptor`` and ``FileInfo``)."""

    ledger_id: int
    master_key: bytes | None  # None while only a fence or LAC record named the ledger
    fenced: bool = False
    explicit_lac: bytes | None = None  # the explicit LAC buffer (ledgerId, lac, digest)
    lac: int = -1  # highest LAC piggybacked on an entry added in this run
    flushed: dict[int, int] = attrs.Factory(dict)  # entry id -> location, durable in the index file
    index_path: str | None = None  # the index file, once it exists
    header_on_disk: IndexHeader | None = None  # the index header as last fsynced

    @property
    def fenced_flushed(self) -> bool:
        return self.header_on_disk is not None and self.header_on_disk.fenced

    def header(self) -> IndexHeader:
        """The index header that says what the bookie knows now."""
        return IndexHeader(INDEX_VERSION, self.master_key or b"", FENCED_BIT if self.fenced else 0, self.explicit_lac)


class LedgerStorage:
    """Memtable, entry logs and index files of one bookie."""

    def __init__(self, fs: FileSystem, layout: BookieLayout, digest_type: DigestType, entry_log_max_bytes: int) -> None:
        self._fs = fs
        self._layout = layout
        self.digest_type = digest_type
        self.entry_log_max_bytes = min(entry_log_max_bytes, 0xFFFFFFFF)  # offsets are 32 bits in a location
        self.ledgers: dict[int, LedgerInfo] = {}
        self.memtable: dict[tuple[int, int], bytes] = {}  # (ledger, entry) -> entry, not yet flushed
        self._log_paths: dict[int, str] = {}  # every entry log, by id
        self._log_sizes: dict[int, int] = {}
        self._readers: dict[int, FileHandle] = {}
        self._log_id = -1  # the entry log being written, -1 before the first flush of this run
        self._log: FileHandle | None = None
        self._next_log_id = 0

    def load(self) -> None:
        """Read the index files and list the entry logs, as a restarted bookie finds them."""
        for ledger_dir in self._layout.ledger_dirs:
            for log_id in list_file_ids(self._fs, ledger_dir, ENTRY_LOG_SUFFIX):
                path = os.path.join(ledger_dir, f"{log_id:x}{ENTRY_LOG_SUFFIX}")
                if log_id in self._log_paths:
                    raise CorruptFileError(path, None, f"entry log {log_id:x} also in {self._log_paths[log_id]}")
                self._log_paths[log_id] = path
            for ledger_id, path in find_index_files(self._fs, ledger_dir):
                if ledger_id in self.ledgers:
                    raise CorruptFileError(path, None, f"second index of ledger {ledger_id}")
                index = parse_index(path, self._fs.read_file(path), ledger_id)
                if index.header.explicit_lac is not None:
                    self._check_lac(path, None, ledger_id, index.header.explicit_lac)
                self.ledgers[ledger_id] = LedgerInfo(
                    ledger_id,
                    # An empty key was written before the key was known: the next one given sets it, as an
                    # all-zeros key in LedgerMetadataIndex.setMasterKey (release-4.17.2).
                    index.header.master_key or None,
                    index.header.fenced,
                    index.header.explicit_lac,
                    flushed=dict(index.locations),
                    index_path=path,
                    header_on_disk=index.header,
                )
        self._next_log_id = max(self._log_paths, default=-1) + 1

    def _check_lac(self, path: str, offset: int | None, ledger_id: int, buffer: bytes) -> None:
        try:
            lac_ledger, _ = decode_lac(buffer, self.digest_type)
        except EntryFormatError as exc:
            raise CorruptFileError(path, offset, f"explicit LAC: {exc}") from None
        if lac_ledger != ledger_id:
            raise CorruptFileError(path, offset, f"explicit LAC of ledger {lac_ledger} stored for ledger {ledger_id}")

    # -- writes

    def ledger(self, ledger_id: int, master_key: bytes | None) -> LedgerInfo:
        """The ledger, created (in memory) if new."""
        info = self.ledgers.get(ledger_id)
        if info is None:
            info = self.ledgers[ledger_id] = LedgerInfo(ledger_id, master_key)
        elif info.master_key is None:
            info.master_key = master_key
        return info

    def put(self, info: LedgerInfo, entry_id: int, entry: bytes, lac: int) -> None:
        """Add an entry to the memtable (a later add of the same entry replaces it, as in BookKeeper)."""
        self.memtable[(info.ledger_id, entry_id)] = entry
        if lac > info.lac:
            info.lac = lac

    def flush(self) -> None:
        """Write the memtable and the changed index headers durably; then empty the memtable."""
        locations = self._write_entry_logs(sorted(self.memtable.items()))
        by_ledger: dict[int, list[tuple[int, int]]] = {}
        for (ledger_id, entry_id), location in locations:
            by_ledger.setdefault(ledger_id, []).append((entry_id, location))
        for info in self.ledgers.values():
            slots = by_ledger.get(info.ledger_id, [])
            header = info.header()
            header_changed = header != info.header_on_disk
            # A known master key is worth a file by itself: a checkpoint may move the mark past the ledger's
            # key record, and a fence or explicit LAC journaled after it must find the key at the replay
            # (DbLedgerStorage queues the key in LedgerMetadataIndex.setMasterKey and writes it at the
            # checkpoint's flush; release-4.17.2). InterleavedLedgerStorage writes no index file for a key
            # alone (FileInfo.checkOpen), one way a fence is lost (its reproduction:
            # conformance/adapters/java/reproductions/fence-of-empty-ledger).
            worth_a_file = (
                info.index_path is not None
                or info.master_key is not None
                or info.fenced
                or info.explicit_lac is not None
            )
            if slots or (header_changed and worth_a_file):
                self._write_index(info, header, header_changed, slots)
        self.memtable.clear()

    def _write_entry_logs(self, entries: list[tuple[tuple[int, int], bytes]]) -> list[tuple[tuple[int, int], int]]:
        locations: list[tuple[tuple[int, int], int]] = []
        chunk = bytearray()
        for key, entry in entries:
            record = entry_log_record(entry)
            if self._log is None or (
                self._log_sizes[self._log_id] + len(chunk) + len(record) > self.entry_log_max_bytes
                and self._log_sizes[self._log_id] + len(chunk) > ENTRY_LOG_HEADER_SIZE
            ):
                self._write_chunk(chunk)
                chunk = bytearray()
                self._roll_entry_log()
            offset = self._log_sizes[self._log_id] + len(chunk) + 4
            locations.append((key, make_location(self._log_id, offset)))
            chunk += record
        self._write_chunk(chunk)
        return locations

    def _write_chunk(self, chunk: bytearray) -> None:
        if chunk and self._log is not None:
            self._log.write(self._log_sizes[self._log_id], chunk)
            self._log.fsync()
            self._log_sizes[self._log_id] += len(chunk)

    def _roll_entry_log(self) -> None:
        if self._log is not None:
            self._log.close()
        log_id = self._next_log_id
        path = self._layout.entry_log_path(log_id)
        header = entry_log_header()
        self._log = self._fs.create_durably(path, header)
        self._log_id, self._next_log_id = log_id, log_id + 1
        self._log_paths[log_id] = path
        self._log_sizes[log_id] = len(header)

    def _write_index(
        self, info: LedgerInfo, header: IndexHeader, header_changed: bool, slots: list[tuple[int, int]]
    ) -> None:
        content = index_header(header.master_key, header.fenced, header.explicit_lac)
        if info.index_path is None:
            path = self._layout.index_path(info.ledger_id)
            self._fs.make_dirs(os.path.dirname(path))
            handle = self._fs.create_durably(path, content)
            info.index_path = path
        else:
            handle = self._fs.open(info.index_path)
            if header_changed:
                handle.write(0, content)
        try:
            for first, run in _runs(slots):
                handle.write(index_slot_offset(first), b"".join(encode_index_slot(loc) for _, loc in run))
            handle.fsync()
        finally:
            handle.close()
        info.flushed.update(slots)
        info.header_on_disk = header

    # -- reads

    def read_path(self, ledger_id: int, entry_id: int) -> str | None:
        """Which path serves a read: ``"memtable"`` (tailing), ``"entry_log"`` (catch-up), or ``None``."""
        if (ledger_id, entry_id) in self.memtable:
            return "memtable"
        info = self.ledgers.get(ledger_id)
        if info is not None and entry_id in info.flushed:
            return "entry_log"
        return None

    def read(self, ledger_id: int, entry_id: int) -> bytes | None:
        """The stored entry, digest checked, or ``None``; :class:`CorruptFileError` if the files disagree."""
        entry = self.memtable.get((ledger_id, entry_id))
        if entry is not None:
            return entry
        info = self.ledgers.get(ledger_id)
        location = info.flushed.get(entry_id) if info is not None else None
        if location is None:
            return None
        log_id, offset = split_location(location)
        path = self._log_paths.get(log_id)
        if path is None:
            where = info.index_path if info is not None and info.index_path else self._layout.entry_log_path(log_id)
            raise MissingFileError(
                where,
                None,
                f"index of ledger {ledger_id} entry {entry_id} points into entry log {log_id:x}.log, which is missing",
            )
        reader = self._reader(log_id, path)
        size = self._log_sizes.get(log_id)
        if size is None:
            size = self._log_sizes[log_id] = self._fs.size(path)
        entry = read_entry_at(path, reader.read, size, offset, (ledger_id, entry_id))
        try:
            check_entry(entry, self.digest_type)
        except EntryFormatError as exc:
            raise CorruptFileError(path, offset, str(exc)) from None
        return entry

    def _reader(self, log_id: int, path: str) -> FileHandle:
        if log_id == self._log_id and self._log is not None:
            return self._log
        reader = self._readers.get(log_id)
        if reader is None:
            reader = self._readers[log_id] = self._fs.open(path)
        return reader

    def stored_entries(self, ledger_id: int) -> Iterator[int]:
        """The ids of the ledger's entries in the memtable or the index, unsorted."""
        info = self.ledgers.get(ledger_id)
        yield from (info.flushed if info is not None else ())
        yield from (entry for (ledger, entry) in self.memtable if ledger == ledger_id)

    def close(self) -> None:
        for handle in [self._log, *self._readers.values()]:
            if handle is not None:
                handle.close()
        self._log = None
        self._readers.clear()


def _runs(slots: list[tuple[int, int]]) -> Iterator[tuple[int, list[tuple[int, int]]]]:
    """Consecutive entry ids grouped, so each group is one write: ``(first entry id, [(entry, location)])``."""
    run: list[tuple[int, int]] = []
    for slot in sorted(slots):
        if run and slot[0] != run[-1][0] + 1:
            yield run[0][0], run
            run = []
        run.append(slot)
    if run:
        yield run[0][0], run
