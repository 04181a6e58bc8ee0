"""The reference bookie: BookKeeper's bookie storage, in explicit deterministic steps.

One :class:`Bookie` owns a bookie directory (:class:`~.layout.BookieLayout`)
and does all its I/O through the :class:`~.files.FileSystem` it is given.
It does nothing on its own: every step is a method call, named as in the
bookie spec (``spec/bookie/bookie.py``, BOOKIE_CONTRACT vocabulary), so tests and
crash checks drive it one boundary at a time, and
:class:`~.runner.BookieRunner` drives it from threads for real use.

======================================  =============================================================
step                                    BookKeeper (``bookkeeper-server/.../bookie/``)
======================================  =============================================================
``add_entry`` (BookieAddsEntry)         ``BookieImpl.addEntry``: memtable, then a journal record;
                                        the reply waits for the fsync
``fence_ledger`` (BookieFencesLedger)   ``LedgerDescriptorImpl.fenceAndLogInJournal``
``set_explicit_lac``                    ``BookieImpl.setExplicitLac``
(BookieSetsExplicitLac)
``journal_flush``                       ``Journal.run``: pad and write a batch to the OS
``journal_sync`` + ``journal_synced``   ``ForceWriteThread``: fsync, mark := end of batch, acks
``force_write`` (JournalForceWrites)    the three above
``roll_journal`` (JournalRollsOver)     ``Journal.run`` when the file passes ``maxJournalSize``
``start_checkpoint(flusher)``           ``Journal.newCheckpoint``, by the sync thread's checkpoint or
(FlusherTakesMark)                      the write cache's flush: the flusher takes the mark
``flush_ledger_storage(flusher)``       ``SingleDirectoryDbLedgerStorage.checkpoint``: one flush at a
(LedgerStorageFlushes)                  time
``persist_mark(flusher)``               ``Journal.checkpointComplete``: the flusher's mark to the
(CheckpointPersistsMark, once a copy)   lastMark of each ledger dir in turn; an older mark skipped
``delete_journal`` (JournalFileDeleted) ``checkpointComplete(compact=true)``
``start`` (BookieReplaysJournal)        ``BookieImpl.readJournal``/``replay``, then a full flush
======================================  =============================================================

A crash is not a method: the file system raises
:class:`~.faults.SimulatedCrash` at a boundary, the :class:`Bookie` object
is dropped, the file system loses power, and a new :class:`Bookie` is
started on the same directory.

Where the reference departs from BookKeeper, and why:

- lastMark is replaced atomically (temp file, fsync, rename, directory
  fsync); BookKeeper rewrites it in place, so a crash can leave a short copy
  that ``readLog`` then skips;
- journal files, entry logs and index files are created whole (see
  :mod:`.journal`); new names are made durable with directory fsyncs, which
  POSIX needs and BookKeeper leaves to the file system;
- a fence of a ledger whose key this bookie has not journaled journals the
  key first: BookKeeper journals keys only with entries, and its replay
  skips a fence record of a ledger it cannot find;
- the new journal file of a restart is created right after the replay,
  before the full flush; BookKeeper creates it when the journal thread
  starts, after that flush. A crash during the flush then leaves one empty
  journal file more, which the next replay reads as empty; in exchange a
  start is the spec's ``BookieReplaysJournal`` followed by an ordinary
  checkpoint, and crashes inside it map to the spec's crashes;
- every entry's digest is checked on add, replay and catch-up read;
  BookKeeper's bookie stores entries unchecked and leaves that to clients;
- journal files are not preallocated: BookKeeper writes zeros ahead of the
  data (which is why its scanner stops at a length of 0); the readers accept
  both;
- journal rollover may also be bounded by a number of records, to match the
  spec's ``RecordsPerJournal``; journal ids count up from 1 (BookKeeper uses
  the time in milliseconds for the first one);
- a start first fsyncs every file and directory of the bookie it finds:
  after a process crash what the last run wrote may be in the OS cache only
  (a journal tail, an index header with the fenced bit, the name of an index
  file whose directory was never fsynced), and the replay and the checkpoint
  after it build on what they read, so it must not vanish in a later power
  loss; BookKeeper trusts the OS cache there;
- one journal directory (BookKeeper may have several, with ``lastMark.N``);
- the two flushers are steps of the caller, each with its own mark
  (``SYNC_THREAD``: ``SyncThread``'s checkpoint; ``WRITE_CACHE``:
  ``SingleDirectoryDbLedgerStorage.flush`` when the write cache fills). As in
  the spec, a sync-thread checkpoint starts only when the mark is past the
  persisted one, and a write-cache flush only with entries in the memtable;
  BookKeeper's sync thread also runs when the mark has not moved, and then
  flushes what the next flush would. A flush always flushes:
  DbLedgerStorage skips the flush of a mark older than the last flush's;
- a persist skips a mark older than the persisted one, as BookKeeper 4.18.0
  does (apache/bookkeeper#4105); release-4.17.2 writes it (the mutant
  ``mark_moves_backwards``).

Mutants (``BookieConfig.mutant``) are real bugs made on purpose, for the
crash checks; each is a small switch marked ``MUTANT`` in the code.
"""

from __future__ import annotations

import enum
import itertools
import os
from collections.abc import Callable, Iterator

import attrs
from ledgerspec.reference.bookie.disk import find_index_directories, find_leftovers, list_file_ids, read_mark_copies
from ledgerspec.reference.bookie.entry import DigestType, EntryFormatError, check_entry, decode_lac
from ledgerspec.reference.bookie.errors import (
    BadEntryError,
    BookieStateError,
    CorruptFileError,
    LedgerFencedError,
    MissingFileError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedError,
)
from ledgerspec.reference.bookie.files import FileSystem, OsFileSystem
from ledgerspec.reference.bookie.formats import (
    JOURNAL_ALIGNMENT,
    JournalRecord,
    LogMark,
    RecordKind,
    encode_mark,
    explicit_lac_record,
    fence_record,
    ledger_key_record,
    scan_journal,
)
from ledgerspec.reference.bookie.journal import ForceWriteRequest, JournalFile, JournalWriter
from ledgerspec.reference.bookie.layout import JOURNAL_SUFFIX, BookieLayout
from ledgerspec.reference.bookie.storage import LedgerInfo, LedgerStorage

__all__ = [
    "LAST_ADD_CONFIRMED",
    "MUTANTS",
    "SYNC_THREAD",
    "WRITE_CACHE",
    "Bookie",
    "BookieConfig",
    "MemoryState",
    "Request",
    "RequestKind",
]

MUTANTS = {
    "ack_before_fsync": "adds are acknowledged once written to the OS, before the fsync (as journalSyncData=false)",
    "mark_before_flush": "a checkpoint persists its mark before it flushes the ledger storage",
    "fence_not_journaled": "a fence is set in memory and acknowledged at once, without a journal record",
    "mark_not_advanced_in_replay": "replay leaves the mark where lastMark was (apache/bookkeeper#2087)",
    "delete_journal_at_mark": "journal deletion also removes the journal the persisted mark points into",
    "mark_moves_backwards": "a flusher persists a mark older than the persisted one (release-4.17.2, #4105)",
}

#: The entry id a read asks for to get the ledger's last entry (``BookieProtocol.LAST_ADD_CONFIRMED``).
LAST_ADD_CONFIRMED = -1

#: The flushers (the bookie spec's numbers): the sync thread's checkpoint, and the write cache's flush.
SYNC_THREAD, WRITE_CACHE = 1, 2

NO_MARK = LogMark(0, 0)


def _check_mutant(_: object, __: object, value: str | None) -> None:
    if value is not None and value not in MUTANTS:
        raise ValueError(f"unknown mutant {value!r}; known mutants: {', '.join(MUTANTS)}")


@attrs.frozen
class BookieConfig:
    """The bookie's settings (BookKeeper's ``ServerConfiguration`` names in the comments)."""

    digest_type: DigestType = DigestType.CRC32C  # the entries' digest, checked on add, replay and read
    journal_alignment: int = JOURNAL_ALIGNMENT  # journalAlignmentSize
    journal_max_bytes: int = 2048 * 1024 * 1024  # maxJournalSizeMB: roll over past this size
    journal_max_records: int | None = None  # also roll over at this many spec records (the spec's RecordsPerJournal)
    entry_log_max_bytes: int = 1024 * 1024 * 1024  # logSizeLimit
    max_backup_journals: int = 0  # maxBackupJournals (BookKeeper: 5): journals kept before the mark
    mutant: str | None = attrs.field(default=None, validator=_check_mutant)  # a seeded bug from MUTANTS


class RequestKind(enum.Enum):
    ADD = "add"
    FENCE = "fence"
    LAC = "lac"


class Request:
    """A request that waits for its reply; the reply is the request itself, delivered once.

    A plain slotted class rather than attrs: one is made per add, on the hot path.
    """

    __slots__ = ("entry_id", "kind", "lac", "ledger_id", "recovery", "seq")

    def __init__(
        self, seq: int, kind: RequestKind, ledger_id: int, entry_id: int = -1, lac: int = -1, recovery: bool = False
    ) -> None:
        self.seq = seq  # order of arrival
        self.kind = kind
        self.ledger_id = ledger_id
        self.entry_id = entry_id  # ADD: the entry
        self.lac = lac  # LAC: the explicit LAC
        self.recovery = recovery  # ADD: a recovery add (accepted by a fenced ledger)

    def __repr__(self) -> str:
        what = {RequestKind.ADD: f" e{self.entry_id}", RequestKind.FENCE: "", RequestKind.LAC: f" lac={self.lac}"}
        return f"{self.kind.value}(#{self.seq} l{self.ledger_id}{what[self.kind]})"


@attrs.frozen
class MemoryState:
    """The bookie's memory in the spec's words: what an abstraction function reads besides the files."""

    up: bool  # serving requests
    memtable: frozenset[tuple[int, int]]  # (ledger, entry) added, not yet flushed to the entry log and index
    flushed: frozenset[tuple[int, int]]  # (ledger, entry) durably in the entry log and the index
    fenced: frozenset[int]  # ledgers fenced in memory
    fenced_flushed: frozenset[int]  # ledgers whose index header durably says fenced
    lac: tuple[tuple[int, int], ...]  # (ledger, explicit LAC) in memory
    mark: LogMark  # in-memory LastLogMark: advanced by each fsync of the journal
    flusher_marks: tuple[tuple[int, LogMark], ...]  # (flusher, the mark it took), for each flusher under way
    flusher_flushed: frozenset[int]  # the flushers under way that have flushed the ledger storage
    persisted_mark: LogMark  # the largest lastMark copy (as written by this bookie or read at start)
    synced: LogMark  # the journal is durable up to here
    written: LogMark  # the journal is written to the OS up to here
    current_journal: int | None  # the journal file being written
    buffered: tuple[tuple[str, int, int], ...]  # spec records appended but not yet written to the OS
    pending: tuple[Request, ...]  # requests waiting for the fsync of their record
    replies: tuple[Request, ...]  # every reply delivered, in order: the acked entries and fences


class Bookie:
    """BookKeeper's bookie storage over one directory, one explicit step at a time."""

    def __init__(
        self,
        layout: BookieLayout,
        fs: FileSystem | None = None,
        config: BookieConfig | None = None,
        on_reply: Callable[[Request], None] | None = None,
    ) -> None:
        self.layout = layout
        self.fs = fs or OsFileSystem()
        self.config = config or BookieConfig()
        self.on_reply = on_reply  # called with each reply as it is delivered
        self.mutant = self.config.mutant
        self.up = False
        self.replies: list[Request] = []  # every reply delivered, in order
        self.mark = NO_MARK  # in-memory LastLogMark
        self.synced = NO_MARK  # journal durable up to here
        self.persisted_mark = NO_MARK  # content of the lastMark files
        self.flusher_marks: dict[int, LogMark] = {}  # flusher -> the mark it took, while it is under way
        self._flusher_flushed: set[int] = set()  # the flushers under way that have flushed
        self._started = False
        self._seq = itertools.count()
        self._journaled_keys: set[int] = set()  # ledgers whose key is in the journal (BookieImpl.masterKeyCache)
        # ledger -> fence requests waiting for the ledger's fence record, which is not yet durable
        self._fence_followers: dict[int, list[Request]] = {}
        self._queue: list[ForceWriteRequest[Request]] = []  # flushed batches waiting for their fsync
        self._in_flight: list[ForceWriteRequest[Request]] = []  # batches taken by a force write, not yet synced
        self.journal: JournalWriter[Request] = JournalWriter(self.fs, layout, self.config.journal_alignment)
        self.storage = LedgerStorage(self.fs, layout, self.config.digest_type, self.config.entry_log_max_bytes)

    # ------------------------------------------------------------ start: BookieReplaysJournal

    def start(self, *, checkpoint: bool = True) -> None:
        """Replay the journal from the persisted mark, then (``checkpoint``) flush and persist the mark.

        As ``BookieImpl.start``: leftovers of interrupted file creations are
        removed, lastMark is read (the maximum over the copies), the ledger
        storage loaded, every journal record at or after the mark replayed,
        the mark advanced to the end of each replayed journal (#2087), a new
        journal file started, and a full checkpoint taken.
        """
        if self._started:
            raise BookieStateError("a Bookie object starts once; make a new one to restart")
        self._started = True
        for directory in (self.layout.journal_dir, *self.layout.ledger_dirs):
            self.fs.make_dirs(directory)
        self._remove_leftovers()
        self._make_found_durable()
        for copy in read_mark_copies(self.fs, self.layout):
            if copy.error is not None:
                raise copy.error
            assert copy.mark is not None
            self.persisted_mark = max(self.persisted_mark, copy.mark)  # LastLogMark.readLog
        self.mark = self.synced = self.persisted_mark
        self.storage.load()
        journal_ids = list_file_ids(self.fs, self.layout.journal_dir, JOURNAL_SUFFIX)
        self._replay(journal_ids)
        self.journal.open_file(max([*journal_ids, self.mark.file_id, 0]) + 1)
        if checkpoint:
            self._checkpoint(delete_journals=False)
        self.up = True

    def _remove_leftovers(self) -> None:
        leftovers = find_leftovers(self.fs, self.layout)
        for path in leftovers:
            self.fs.delete(path)
        for directory in sorted({os.path.dirname(p) for p in leftovers}):
            self.fs.fsync_dir(directory)

    def _make_found_durable(self) -> None:
        """Fsync every file of the bookie as found, then every directory holding them, up to the directory
        holding all of them: what the replay and the checkpoint after it read becomes durable."""
        top = os.path.commonpath([self.layout.journal_dir, *self.layout.ledger_dirs])
        directories = {self.layout.journal_dir}
        for ledger_dir in self.layout.ledger_dirs:
            directories |= {ledger_dir, *find_index_directories(self.fs, ledger_dir)}
        for directory in sorted(directories):
            for name in self.fs.list_dir(directory):
                path = os.path.join(directory, name)
                if not self.fs.is_dir(path):
                    self._fsync(path)
        parents = set(directories)
        for directory in directories:
            while directory != top and os.path.dirname(directory) != directory:
                directory = os.path.dirname(directory)
                parents.add(directory)
        for directory in sorted(parents, key=len, reverse=True):  # children first, then the names of them
            self.fs.fsync_dir(directory)

    def _replay(self, journal_ids: list[int]) -> None:
        mark = self.persisted_mark
        to_replay = [i for i in journal_ids if i >= mark.file_id]
        if mark.file_id > 0 and (not to_replay or to_replay[0] != mark.file_id):
            raise MissingFileError(
                self.layout.journal_path(mark.file_id),
                None,
                f"lastMark {mark} points into this journal, which is missing",
            )
        for file_id in to_replay:
            path = self.layout.journal_path(file_id)
            data = self.fs.read_file(path)
            start = mark.offset if file_id == mark.file_id else None
            if start is not None and start > len(data):
                raise CorruptFileError(
                    path, start, f"lastMark {mark} points past the end of the journal ({len(data)} bytes)"
                )
            scan = scan_journal(path, data, file_id, start)
            for record in scan.records:
                self._replay_record(path, record)
            self.synced = LogMark(file_id, scan.end)
            if self.mutant != "mark_not_advanced_in_replay":  # MUTANT: apache/bookkeeper#2087
                self.mark = LogMark(file_id, scan.end)

    def _fsync(self, path: str) -> None:
        handle = self.fs.open(path)
        try:
            handle.fsync()
        finally:
            handle.close()

    def _replay_record(self, path: str, record: JournalRecord) -> None:
        ledger_id = record.ledger_id
        if record.kind is RecordKind.LEDGER_KEY:
            info = self.storage.ledger(ledger_id, record.master_key)
            if info.master_key != record.master_key:
                raise CorruptFileError(
                    path, record.offset, f"ledger key record of ledger {ledger_id} differs from the key the ledger has"
                )
            self._journaled_keys.add(ledger_id)
        elif record.kind is RecordKind.FENCE:
            self.storage.ledger(ledger_id, None).fenced = True
        elif record.kind is RecordKind.EXPLICIT_LAC:
            try:
                lac_ledger, _ = decode_lac(record.lac_buffer, self.config.digest_type)
            except EntryFormatError as exc:
                raise CorruptFileError(path, record.offset, f"explicit LAC record: {exc}") from None
            if lac_ledger != ledger_id:
                raise CorruptFileError(
                    path, record.offset, f"explicit LAC of ledger {lac_ledger} in a record of ledger {ledger_id}"
                )
            self.storage.ledger(ledger_id, None).explicit_lac = record.lac_buffer
        else:
            try:
                _, entry_id, lac = check_entry(record.data, self.config.digest_type)
            except EntryFormatError as exc:
                raise CorruptFileError(path, record.offset, f"entry record: {exc}") from None
            self.storage.put(self.storage.ledger(ledger_id, None), entry_id, record.data, lac)

    # ------------------------------------------------------------ requests

    def add_entry(self, entry: bytes, master_key: bytes, *, recovery: bool = False) -> Request:
        """BookieAddsEntry: the entry goes to the memtable and the journal buffer; the reply waits for the fsync.

        Raises :class:`BadEntryError` (malformed entry, digest mismatch),
        :class:`UnauthorizedError` (another master key) or
        :class:`LedgerFencedError` (a normal add to a fenced ledger).
        """
        if not self.up:
            self._require_up()
        try:
            ledger_id, entry_id, lac = check_entry(entry, self.config.digest_type)
        except EntryFormatError as exc:
            raise BadEntryError(str(exc)) from None
        if ledger_id < 0 or entry_id < 0:
            raise BadEntryError(f"ledger {ledger_id} entry {entry_id}: ids must not be negative")
        info = self._ledger_for_request(ledger_id, master_key)
        if info.fenced and not recovery:
            raise LedgerFencedError(f"ledger {ledger_id} is fenced: add of entry {entry_id} refused")
        self.storage.put(info, entry_id, entry, lac)
        request = Request(next(self._seq), RequestKind.ADD, ledger_id, entry_id, recovery=recovery)
        if ledger_id not in self._journaled_keys:
            self._journal_key(info)
        self.journal.append_entry(entry, ledger_id, entry_id, request)
        return request

    def fence_ledger(self, ledger_id: int, master_key: bytes) -> Request:
        """BookieFencesLedger: fenced at once in memory; the reply waits until the fence record is durable.

        A ledger already fenced is answered at once when its fence is
        durable (journaled and synced, flushed, or replayed); while its fence
        record waits for the fsync, the request waits with it
        (``fenceAndLogInJournal`` hands out the first request's future).
        """
        self._require_up()
        info = self._ledger_for_request(ledger_id, master_key)
        request = Request(next(self._seq), RequestKind.FENCE, ledger_id)
        if self.mutant == "fence_not_journaled":  # MUTANT: no journal record, reply at once
            info.fenced = True
            self._deliver(request)
            return request
        if info.fenced:
            followers = self._fence_followers.get(ledger_id)
            if followers is None:
                self._deliver(request)
            else:
                followers.append(request)
            return request
        info.fenced = True
        self._journal_key(info)
        self._fence_followers[ledger_id] = []
        self.journal.append(fence_record(ledger_id), ("fence", ledger_id, -1), request)
        return request

    def set_explicit_lac(self, lac_buffer: bytes, master_key: bytes) -> Request:
        """BookieSetsExplicitLac: the explicit LAC buffer (ledgerId, lac, digest) is kept and journaled."""
        self._require_up()
        try:
            ledger_id, lac = decode_lac(lac_buffer, self.config.digest_type)
        except EntryFormatError as exc:
            raise BadEntryError(str(exc)) from None
        info = self._ledger_for_request(ledger_id, master_key)
        info.explicit_lac = bytes(lac_buffer)
        request = Request(next(self._seq), RequestKind.LAC, ledger_id, lac=lac)
        self._journal_key(info)
        self.journal.append(explicit_lac_record(ledger_id, lac_buffer), ("lac", ledger_id, lac), request)
        return request

    def _ledger_for_request(self, ledger_id: int, master_key: bytes) -> LedgerInfo:
        info = self.storage.ledgers.get(ledger_id) or self.storage.ledger(ledger_id, master_key)
        if info.master_key is None:
            info.master_key = master_key
        elif info.master_key != master_key:
            raise UnauthorizedError(f"ledger {ledger_id}: the master key does not match")
        return info

    def _journal_key(self, info: LedgerInfo) -> None:
        """Journal the ledger's key before its first record of this run (``BookieImpl.addEntryInternal``)."""
        if info.ledger_id not in self._journaled_keys:
            self._journaled_keys.add(info.ledger_id)
            self.journal.append(ledger_key_record(info.ledger_id, info.master_key or b""), None, None)

    # ------------------------------------------------------------ journal: group commit

    def journal_flush(self) -> ForceWriteRequest[Request] | None:
        """Write the buffered records, padded, to the OS in one write; queue the batch for its fsync."""
        self._require_up()
        request = self.journal.flush()
        if request is None:
            return None
        if self.mutant == "ack_before_fsync":  # MUTANT: adds acknowledged before the fsync
            for waiter in [w for w in request.waiters if w.kind is RequestKind.ADD]:
                request.waiters.remove(waiter)
                self._deliver(waiter)
        self._queue.append(request)
        return request

    def has_batches(self) -> bool:
        """Some flushed batch waits for its fsync."""
        return bool(self._queue)

    def take_batch(self) -> list[ForceWriteRequest[Request]]:
        """The flushed batches waiting for their fsync, handed to whoever fsyncs them (the force-write step)."""
        batch, self._queue = self._queue, []
        self._in_flight += batch
        return batch

    @staticmethod
    def journal_sync(batch: list[ForceWriteRequest[Request]]) -> None:
        """Fsync the files of a batch, each once. Touches no bookie state: a force-write thread may run it."""
        for i, request in enumerate(batch):
            if i + 1 == len(batch) or batch[i + 1].file is not request.file:
                JournalWriter.sync(request)

    def journal_synced(self, batch: list[ForceWriteRequest[Request]]) -> list[Request]:
        """After the fsync: mark := end of the batch, and the batch's requests are acknowledged."""
        if not batch:
            return []
        self._in_flight = [r for r in self._in_flight if r not in batch]
        self.synced = max(self.synced, batch[-1].mark)
        self.mark = max(self.mark, batch[-1].mark)
        replies = []
        for waiter in (w for request in batch for w in request.waiters):
            replies.append(waiter)
            if waiter.kind is RequestKind.FENCE:  # the requests that waited for this fence record
                replies += self._fence_followers.pop(waiter.ledger_id, [])
        self.replies += replies
        if self.on_reply is not None:
            for waiter in replies:
                self.on_reply(waiter)
        for file in {id(r.file): r.file for r in batch}.values():
            self._close_if_rolled(file)
        return replies

    def force_write(self) -> list[Request]:
        """JournalForceWrites: flush, fsync, advance the mark, acknowledge; roll the journal over when full.

        Returns the replies this step delivered.
        """
        self.journal_flush()
        batch = self.take_batch()
        self.journal_sync(batch)
        replies = self.journal_synced(batch)
        if self.journal_full:
            self.roll_journal()
        return replies

    @property
    def journal_full(self) -> bool:
        """The current journal file has reached ``journal_max_bytes`` or ``journal_max_records``."""
        current = self.journal.current
        if current is None:
            return False
        limit = self.config.journal_max_records
        return current.written > self.config.journal_max_bytes or (limit is not None and current.records >= limit)

    def roll_journal(self) -> None:
        """JournalRollsOver: start the next journal file; the old one is closed once its last batch is durable."""
        self._require_up()
        self.journal_flush()
        old = self.journal.current
        assert old is not None
        self.journal.open_file(old.file_id + 1)
        self._close_if_rolled(old)

    def _close_if_rolled(self, file: JournalFile) -> None:
        """Close a journal file that is no longer written once no batch of it waits for an fsync."""
        if file is not self.journal.current and not any(r.file is file for r in [*self._queue, *self._in_flight]):
            file.handle.close()

    # ------------------------------------------------------------ checkpoint

    def start_checkpoint(self, flusher: int = SYNC_THREAD) -> LogMark:
        """FlusherTakesMark: the flusher takes the in-memory mark; everything before it is in the memtable or
        already flushed. The sync thread starts only when the mark is past the persisted one, the write
        cache's flush only with entries in the memtable."""
        self._require_up()
        return self._take_mark(flusher)

    def _take_mark(self, flusher: int) -> LogMark:
        if flusher in self.flusher_marks:
            raise BookieStateError(f"flusher {flusher} is under way (its mark {self.flusher_marks[flusher]})")
        if flusher == WRITE_CACHE and not self.storage.memtable:
            raise BookieStateError("the write cache is empty: no flush to trigger")
        if flusher == SYNC_THREAD and not self.persisted_mark < self.mark:
            raise BookieStateError(f"the mark {self.mark} is not past the persisted mark {self.persisted_mark}")
        self.flusher_marks[flusher] = self.mark
        return self.mark

    def flush_ledger_storage(self, flusher: int = SYNC_THREAD) -> None:
        """LedgerStorageFlushes: memtable to the entry log, locations and headers to the index, all fsynced."""
        self._require_up()
        self._flush_for(flusher)

    def _flush_for(self, flusher: int) -> None:
        if flusher not in self.flusher_marks:
            raise BookieStateError(f"flusher {flusher} has taken no mark: start_checkpoint() first")
        if flusher in self._flusher_flushed:
            raise BookieStateError(f"flusher {flusher} has flushed already for its mark")
        self.storage.flush()
        self._flusher_flushed.add(flusher)

    def persist_mark(self, flusher: int = SYNC_THREAD) -> None:
        """CheckpointPersistsMark, once a ledger directory: write the flusher's mark to each lastMark in turn.

        Only after the flush of this flusher; a mark older than the
        persisted one is not written (``checkpointComplete``, #4105), nor the
        write cache's with several ledger directories
        (``SingleDirectoryDbLedgerStorage.flush``: ``singleLedgerDirs``).
        """
        self._require_up()
        self._persist_mark(flusher)

    def _persist_mark(self, flusher: int) -> None:
        if flusher not in self.flusher_marks:
            raise BookieStateError(f"flusher {flusher} has taken no mark: start_checkpoint() first")
        if flusher not in self._flusher_flushed and self.mutant != "mark_before_flush":  # MUTANT: skip the guard
            raise BookieStateError("the ledger storage is not flushed for this mark: flush first")
        mark = self.flusher_marks.pop(flusher)
        self._flusher_flushed.discard(flusher)
        if flusher == WRITE_CACHE and len(self.layout.ledger_dirs) > 1:
            return
        if mark < self.persisted_mark and self.mutant != "mark_moves_backwards":  # MUTANT: no #4105 guard
            return
        for path in self.layout.last_mark_paths():  # LastLogMark.rollLog: each ledger directory in turn
            self.fs.replace_durably(path, encode_mark(mark))
            self.persisted_mark = mark if self.mutant == "mark_moves_backwards" else max(self.persisted_mark, mark)

    def deletable_journals(self) -> list[int]:
        """Journal files wholly before the persisted mark, beyond the ``max_backup_journals`` newest of them."""
        limit = self.persisted_mark.file_id
        ids = list_file_ids(self.fs, self.layout.journal_dir, JOURNAL_SUFFIX)
        if self.mutant == "delete_journal_at_mark":  # MUTANT: <= instead of <
            before = [i for i in ids if i <= limit]
        else:
            before = [i for i in ids if i < limit]
        return before[: max(0, len(before) - self.config.max_backup_journals)]

    def delete_journal(self, file_id: int) -> None:
        """JournalFileDeleted: remove the oldest journal file, when it is wholly before the persisted mark.

        Oldest first, as ``checkpointComplete`` deletes them: a crash between
        two deletions leaves no gap in the journal ids.
        """
        self._require_up()
        deletable = self.deletable_journals()
        if not deletable or file_id != deletable[0]:
            raise BookieStateError(
                f"journal {file_id:x}.txn is not the oldest journal wholly before the persisted mark "
                f"{self.persisted_mark} (deletable: {[f'{i:x}.txn' for i in deletable]})"
            )
        self.fs.delete(self.layout.journal_path(file_id))
        self.fs.fsync_dir(self.layout.journal_dir)

    def checkpoint(self, *, delete_journals: bool = True) -> None:
        """A whole checkpoint (``SyncThread.checkpoint``): capture the mark, flush, persist, delete old journals."""
        self._require_up()
        self._checkpoint(delete_journals=delete_journals)

    def _checkpoint(self, *, delete_journals: bool) -> None:
        if SYNC_THREAD in self.flusher_marks:
            raise BookieStateError(f"a checkpoint is already under way (mark {self.flusher_marks[SYNC_THREAD]})")
        if self.persisted_mark < self.mark:  # else nothing to persist, and nothing to flush
            self._take_mark(SYNC_THREAD)
            if self.mutant == "mark_before_flush":  # MUTANT: persist, then flush
                self._persist_mark(SYNC_THREAD)
                self.storage.flush()
            else:
                self._flush_for(SYNC_THREAD)
                self._persist_mark(SYNC_THREAD)
        if delete_journals:
            for file_id in self.deletable_journals():
                self.delete_journal(file_id)

    # ------------------------------------------------------------ reads

    def read_entry(self, ledger_id: int, entry_id: int) -> bytes:
        """The entry as the client sent it: a tailing read from the memtable or a catch-up read from the log.

        Entry :data:`LAST_ADD_CONFIRMED` (-1) reads the ledger's last stored
        entry, whose header carries the LAC a fencing read learns
        (``InterleavedLedgerStorage.getEntry``, BookKeeper 4.17.2: ``ledgerCache.getLastEntry``).
        """
        self._require_up()
        if ledger_id not in self.storage.ledgers:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        if entry_id == LAST_ADD_CONFIRMED:
            entry_id = max(self.storage.stored_entries(ledger_id), default=LAST_ADD_CONFIRMED)
        entry = self.storage.read(ledger_id, entry_id)
        if entry is None:
            raise NoSuchEntryError(f"ledger {ledger_id} entry {entry_id} is not on this bookie")
        return entry

    def list_entries(self, ledger_id: int) -> list[int]:
        """The ids of the ledger's entries this bookie stores, increasing (``Bookie.getListOfEntriesOfLedger``)."""
        self._require_up()
        if ledger_id not in self.storage.ledgers:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        return sorted(set(self.storage.stored_entries(ledger_id)))

    def read_path(self, ledger_id: int, entry_id: int) -> str | None:
        """Which path a read of the entry takes: ``"memtable"``, ``"entry_log"``, or ``None`` (not stored)."""
        return self.storage.read_path(ledger_id, entry_id)

    def read_last_add_confirmed(self, ledger_id: int) -> int:
        """The highest LAC this bookie has seen for the ledger: piggybacked on an entry, or explicit."""
        lac = self.read_piggybacked_lac(ledger_id)
        explicit = self.read_explicit_lac(ledger_id)
        return max(lac, explicit if explicit is not None else -1)

    def read_piggybacked_lac(self, ledger_id: int) -> int:
        """The highest LAC piggybacked on an entry of the ledger; -1 if none.

        What a fencing read of the LAC answers: ``ReadLastConfirmedOp`` takes
        the LAC from an entry's header, not the explicit LAC. It covers the
        entries added or replayed in this run, and the last entry flushed
        before it (as InterleavedLedgerStorage reads the LAC of a ledger it
        has not seen entries of since it started).
        """
        self._require_up()
        info = self.storage.ledgers.get(ledger_id)
        if info is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        lac = info.lac
        if info.flushed:
            last = self.read_entry(ledger_id, max(info.flushed))
            lac = max(lac, check_entry(last, self.config.digest_type)[2])
        return lac

    def read_explicit_lac(self, ledger_id: int) -> int | None:
        """The explicit LAC last set for the ledger, or ``None``."""
        buffer = self.read_explicit_lac_buffer(ledger_id)
        return None if buffer is None else decode_lac(buffer, self.config.digest_type)[1]

    def read_explicit_lac_buffer(self, ledger_id: int) -> bytes | None:
        """The explicit LAC buffer (ledgerId, lac, digest) as the client sent it, or ``None`` (``getExplicitLac``)."""
        self._require_up()
        info = self.storage.ledgers.get(ledger_id)
        if info is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} is not on this bookie")
        return info.explicit_lac

    def is_fenced(self, ledger_id: int) -> bool:
        info = self.storage.ledgers.get(ledger_id)
        return info is not None and info.fenced

    # ------------------------------------------------------------ state

    def pending(self) -> Iterator[Request]:
        """Requests waiting for the fsync of a record: in the buffer, in flushed batches, behind a fence."""
        yield from self.journal.buffered_waiters
        for request in [*self._in_flight, *self._queue]:
            yield from request.waiters
        for followers in self._fence_followers.values():
            yield from followers

    def memory_state(self) -> MemoryState:
        """A frozen copy of the bookie's memory, in the spec's terms (:class:`MemoryState`)."""
        ledgers = self.storage.ledgers.values()
        current = self.journal.current
        return MemoryState(
            up=self.up,
            memtable=frozenset(self.storage.memtable),
            flushed=frozenset((i.ledger_id, e) for i in ledgers for e in i.flushed),
            fenced=frozenset(i.ledger_id for i in ledgers if i.fenced),
            fenced_flushed=frozenset(i.ledger_id for i in ledgers if i.fenced_flushed),
            lac=tuple(
                sorted(
                    (i.ledger_id, decode_lac(i.explicit_lac, None)[1]) for i in ledgers if i.explicit_lac is not None
                )
            ),
            mark=self.mark,
            flusher_marks=tuple(sorted(self.flusher_marks.items())),
            flusher_flushed=frozenset(self._flusher_flushed),
            persisted_mark=self.persisted_mark,
            synced=self.synced,
            written=LogMark(current.file_id, current.written) if current is not None else self.synced,
            current_journal=current.file_id if current is not None else None,
            buffered=tuple(self.journal.buffered_records),
            pending=tuple(self.pending()),
            replies=tuple(self.replies),
        )

    def close(self) -> None:
        """Stop serving and close the files, flushing nothing (a clean stop is :meth:`shutdown`)."""
        self.up = False
        self.journal.close()
        for request in [*self._queue, *self._in_flight]:
            request.file.handle.close()
        self.storage.close()

    def shutdown(self) -> None:
        """Make everything durable (force write, checkpoint), then close."""
        self.force_write()
        self.checkpoint()
        self.close()

    def _deliver(self, request: Request) -> None:
        self.replies.append(request)
        if self.on_reply is not None:
            self.on_reply(request)

    def _require_up(self) -> None:
        if not self.up:
            raise BookieStateError("the bookie is not up: start() it (a crashed bookie is replaced by a new one)")
