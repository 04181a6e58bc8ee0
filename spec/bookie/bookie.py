"""One bookie's storage: journal, memtable, entry log and index, the LastLogMark, crashes and replay.

The twin of ``bookie.tla``: the same variables, actions and invariants, by the
same names; the explorer and TLC reach the same states
under the models of ``bookie_models.py`` (tests/test_parity.py).

What is modelled (bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/,
BRIEF section 3):

- the journal (``Journal.java``, ``JournalChannel.java``): files with
  increasing ids, each a sequence of records. A record is written to the
  operating system when the request arrives and is durable only once a force
  write (fsync) covers it; the force-write thread then sets the in-memory
  LastLogMark to the end of what it synced and acknowledges the batch. The
  journal thread keeps writing while the force-write thread syncs, so a force
  write covers a prefix of what was written (``JournalForceWrites(upto)``).
  Entries, fence records (``METAENTRY_ID_FENCE_KEY``) and explicit LAC
  records (``METAENTRY_ID_LEDGER_EXPLICITLAC``) all go through the journal,
  and each reply waits for the fsync. A fence request for a ledger already
  fenced is answered at once when the fence is durable, and otherwise waits
  for the fence record already written
  (``LedgerDescriptorImpl.fenceAndLogInJournal``);
- journal rollover: after a file holds ``RecordsPerJournal`` records the
  journal thread starts the next file (``maxJournalSize``, counted in records);
- the ledger storage (``SortedLedgerStorage`` over ``InterleavedLedgerStorage``,
  or ``DbLedgerStorage`` and its write cache, whose flushers come next):
  an entry goes into the memtable (``EntryMemTable``) before its journal record
  is written; a flush appends the memtable to the entry log, writes the index
  and the per-ledger index headers (``FileInfo``: the fenced bit and, from
  header version 1, the explicit LAC) and syncs them;
- two flushers, each taking the in-memory mark, flushing the ledger storage
  and persisting the mark it took, concurrently: the sync thread's checkpoint
  (``SyncThread.checkpoint``) and the write cache's flush when the add path
  finds it full (``SingleDirectoryDbLedgerStorage.triggerFlushAndAddEntry``,
  ``flush``). The flushes take turns (``flushMutex``); the marks need not
  reach ``Journal.checkpointComplete`` in order, so it skips a mark older
  than the last one it persisted (apache/bookkeeper#4105, fixed in 4.18.0;
  release-4.17.2 writes it, the seeded bug ``mark_moves_backwards``). Journal
  files wholly before the persisted mark may then be deleted
  (``JournalRollingFilter``: file id below the mark's file id);
- the ``lastMark`` file in each of ``NumLedgerDirs`` ledger directories,
  written one after the other (``LastLogMark.rollLog``), so a crash may leave
  the copies apart; a start reads the largest (``LastLogMark.readLog``). With
  several ledger directories the write cache's flush persists no mark
  (``SingleDirectoryDbLedgerStorage.flush``: only with ``singleLedgerDirs``);
- crashes: the machine loses its memory and every journal record not yet
  synced, except that a prefix of the unsynced records may have reached the
  disk (the tail is torn: a record cut in the middle is lost);
- restart (``BookieImpl.readJournal`` and ``replay``): read the persisted
  mark, replay every journal record at or after it (entries into the memtable,
  fence records into the fenced flags, explicit LAC records into the LAC: the
  last one replayed wins over the flushed one, as ``FileInfo.setExplicitLac``
  overwrites),
  advance the in-memory mark to the end of the replayed journal (the fix of
  apache/bookkeeper#2087), start a new journal file and serve again;
- reads are not steps: a tailing read is served by the memtable, a catch-up
  read through the index from the entry log (:meth:`BookieSpec.read_path`).

Journal positions are ``(journal file id, record index in that file)``,
compared lexicographically; a record at position ``p`` is before a mark ``m``
when ``p < m``. The real bookie keeps ``(file id, byte offset)``; a byte
offset maps to the number of whole records before it.

What is left out, and why that is sound here:

- payloads, digests and master keys (ledger key records): a bookie stores what
  it is given; ``(ledger, entry)`` names the content. Ledger key records are
  replayed like fence records and matter to nothing checked here;
- so the replay restores a fence from its fence record alone. Real 4.17.2
  needs the ledger's master key for it (``BookieImpl.readJournal``: the key
  from ``masterKeyCache``, else ``readMasterKey`` from the index on disk) and
  skips the record when it has none; a fencing read journals no key record,
  only a first add does. A ledger fenced with no entry on the bookie, whose
  index header no checkpoint flushed before a crash, is then unfenced: not a
  behaviour of this spec, so the oracle flags the old writer's add it lets
  through (docs/real-systems.md, ``fence-of-empty-ledger-lost``);
- adds the client asks to acknowledge before the fsync (``DEFERRED_SYNC``, whose
  durability comes from a later force-ledger request) and ``journalSyncData=false``,
  a configuration that gives up durability: the seeded bug ``ack_before_fsync`` is
  what they do to an ordinary add;
- recovery adds (accepted on a fenced ledger), duplicate adds of an entry the
  bookie holds, ledger deletion, compaction and garbage collection of entry
  logs: none of them removes an acknowledged entry that no deletion asked for;
- group commit timers: a force write syncs the records written before it
  began, any prefix of the unsynced ones, and acknowledges them together;
  when it happens is left open;
- a flush is one step. A crash in the middle of a real flush leaves part of
  the memtable in the entry log; the mark does not move until the flush is
  whole, so the replay restores the rest, as it does here;
- the write cache's flush starts only with entries in the cache (the real
  one when the cache is full), the sync thread's only when the mark is past
  the persisted one. A flusher whose mark is older than the last flush's
  skips its flush
  (``SingleDirectoryDbLedgerStorage.checkpoint``: ``lastCheckpoint``); here it
  flushes again, which keeps everything the skip relied on;
- what survives a crash is a prefix of the unsynced records: the replay scan
  stops at the first record not wholly on disk (length 0 or a short read), so
  anything after a hole is never read. A later journal file written back by
  the operating system before an earlier one's fsync is not modelled; no
  acknowledgement depends on it, since acknowledgements follow the fsyncs in
  file order;
- a crash is the loss of the machine (power loss): what is on disk when it
  comes back stays there. A process crash that keeps the page cache is the
  crash in which every unsynced record survives; that page cache being lost
  later, after the restart replayed it, is left out;
- one journal directory; a ledger directory that is full gets no ``lastMark``
  copy (``getWritableLedgerDirsForNewLog``): here every persist writes every
  copy, in directory order. A ``lastMark`` file is written whole (16 bytes in
  one sector); a torn copy, which the real bookie skips, is left out;
- ``maxBackupJournals``: the real bookie keeps that many files before the
  mark; deleting any file the rule allows, at any time, covers every such
  choice;
- the flush and persist of the mark that the real bookie does right after a
  replay, before it serves: here it is an ordinary flusher's that may come
  later, which allows more behaviours, not fewer.

Seeded bugs, chosen by the constant ``Bug``, make the spec wrong on purpose
so that tests can show the checkers catch each one.

>>> spec = BookieSpec(NumLedgers=1, MaxEntries=1)
>>> s = spec.initial_state()
>>> s = spec.BookieAddsEntry(s, 1, 0)
>>> (1, 0) in s.acked, spec.read_path(s, 1, 0)
(False, 'memtable')
>>> s = spec.JournalForceWrites(s, (1, 1))
>>> (1, 0) in s.acked, s.synced, s.mark
(True, (1, 1), (1, 1))
>>> s = spec.BookieReplaysJournal(spec.BookieCrashes(s, (1, 1)))
>>> spec.read_path(s, 1, 0), spec.invariant_failures(s)
('memtable', [])
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar

import attrs
from ledgerspec.spec.kernel import (
    Constant,
    ConstantError,
    Spec,
    action,
    action_property,
    evolve,
    int_constant,
    invariant,
    reachable,
)

__all__ = [
    "BUGS",
    "CATCH_UP",
    "ENTRY",
    "FENCE",
    "FLUSHERS",
    "LAC",
    "NONE",
    "NOT_FOUND",
    "SYNC_THREAD",
    "TAILING",
    "WRITE_CACHE",
    "ZERO_MARK",
    "BookieSpec",
    "BookieState",
    "JournalFile",
    "Position",
    "Record",
]

_T = TypeVar("_T")

#: A journal position: (journal file id, index of a record in that file). Compared lexicographically.
Position = tuple[int, int]
#: A journal record: (kind, ledger, value); value is the entry id, -1 for a fence, the LAC for "lac".
Record = tuple[str, int, int]
#: A journal file: (file id, its records in order).
JournalFile = tuple[int, tuple[Record, ...]]

# Record kinds (BookieImpl: an entry id >= 0, METAENTRY_ID_FENCE_KEY, METAENTRY_ID_LEDGER_EXPLICITLAC).
ENTRY, FENCE, LAC = "entry", "fence", "lac"

#: The mark of a bookie that never persisted one (``LastLogMark(0, 0)``): journal file
#: ids start at 1, so it is before every record.
ZERO_MARK: Position = (0, 0)
#: No mark: the flusher is idle (``flusher_mark``), or the bookie is down (``mark``).
NONE: Position = (-1, -1)

#: The flushers, numbered as the spec's ``flusher_*`` variables index them: the sync thread's periodic
#: checkpoint, and DbLedgerStorage's flush when its write cache fills.
SYNC_THREAD, WRITE_CACHE = 1, 2
FLUSHERS: dict[int, str] = {SYNC_THREAD: "sync thread", WRITE_CACHE: "write cache"}
IDLE_FLUSHERS: tuple[Position, ...] = (NONE, NONE)

# Which path serves a read (read_path).
TAILING, CATCH_UP, NOT_FOUND = "memtable", "entry_log", "none"

BUGS = {
    "none": "the bookie as BookKeeper implements it",
    "ack_before_fsync": "an add is acknowledged once written to the journal, before the fsync",
    "mark_before_flush": "the checkpoint persists its mark without waiting for the ledger storage flush",
    "fence_not_journaled": "fencing sets the flag in memory and replies at once; no fence record is journaled",
    "mark_not_advanced_in_replay": "the replay leaves the in-memory mark where it was (apache/bookkeeper#2087)",
    "delete_journal_at_mark": "journal files up to and including the mark's file are deleted, not only those before",
    "mark_moves_backwards": "a flusher persists its mark though it is older than the persisted one (#4105)",
}


@attrs.frozen(cache_hash=True)
class BookieState:
    """The variables of the spec. Every field has exactly the type given; build one from outside
    with :meth:`BookieSpec.make_state`, which checks and converts.

    Ledgers are ``1 .. NumLedgers``, entries ``0 .. MaxEntries-1``; an entry is ``(ledger, entry)``.
    """

    # -- on disk: survives a crash
    #: journal files in id order, ids consecutive: ``((file id, (record, ...)), ...)``, never empty
    journal: tuple[JournalFile, ...]
    #: records at positions before it are durable (fsynced); after a crash, all that is on disk is
    synced: Position
    #: entries flushed (durably) to the entry log and the index: catch-up reads find them
    flushed: frozenset[tuple[int, int]]
    #: ledgers whose fenced bit is flushed with the index (``FileInfo`` state bits)
    fenced_flushed: frozenset[int]
    #: explicit LAC flushed with the index header, per ledger (index ledger - 1); -1 for none
    lac_flushed: tuple[int, ...]
    #: the ``lastMark`` file of each ledger directory (index directory - 1); ZERO_MARK where none was written.
    #: A start replays from the largest (:meth:`BookieSpec.persisted_mark`)
    last_marks: tuple[Position, ...]
    # -- in memory: lost by a crash
    #: entries added (or replayed) and not yet flushed: the memtable / write cache
    memtable: frozenset[tuple[int, int]]
    #: ledgers fenced: normal adds are rejected
    fenced: frozenset[int]
    #: explicit LAC per ledger (index ledger - 1); -1 for none
    lac: tuple[int, ...]
    #: the in-memory LastLogMark: the end of what the last force write synced; NONE while down
    mark: Position
    #: per flusher (index flusher - 1), the mark it took and has yet to persist; NONE when it is idle
    flusher_mark: tuple[Position, ...]
    #: the flushers that have flushed the ledger storage since they took their mark
    flusher_flushed: frozenset[int]
    #: per flusher, the ``lastMark`` copies it has written of its mark, in directory order
    flusher_copies: tuple[int, ...]
    #: the bookie serves requests: FALSE from a crash until the replay is done
    up: bool
    # -- history: what clients were told, and how often the bookie crashed
    #: entries acknowledged to a client
    acked: frozenset[tuple[int, int]]
    #: ledgers whose fence was acknowledged
    fence_acked: frozenset[int]
    #: crashes so far (at most MaxCrashes)
    crashes: int


# -- parameter generators: the \E in front of each TLA+ action ---------------------------
def _each_entry(spec: BookieSpec, s: BookieState) -> Iterable[tuple[int, int]]:
    return ((ledger, e) for ledger in spec.ledgers for e in spec.entries)


def _each_ledger(spec: BookieSpec, s: BookieState) -> Iterable[tuple[int]]:
    return ((ledger,) for ledger in spec.ledgers)


def _each_flusher(spec: BookieSpec, s: BookieState) -> Iterable[tuple[int]]:
    return ((flusher,) for flusher in FLUSHERS)


def _each_journal_file(spec: BookieSpec, s: BookieState) -> Iterable[tuple[int]]:
    return ((f,) for f, _ in s.journal)


def _each_sync_end(spec: BookieSpec, s: BookieState) -> Iterable[tuple[Position]]:
    """Where a force write ends: just after an unsynced record (the records written after it began wait)."""
    return (((f, i + 1),) for (f, i), _ in spec.records(s) if (f, i) >= s.synced)


def _each_cut(spec: BookieSpec, s: BookieState) -> Iterable[tuple[Position]]:
    """Where a crash cuts the journal: at an unsynced record (it and all after it are lost), or at the end."""
    cuts = [pos for pos, _ in spec.records(s) if pos >= s.synced]
    cuts.append(spec.end_of_journal(s))
    return ((cut,) for cut in cuts)


class BookieSpec(Spec[BookieState]):
    """One bookie's storage; see the module docstring."""

    name = "bookie"
    state_type = BookieState
    constants = (
        int_constant("NumLedgers", 1, "ledgers written to the bookie, 1 .. NumLedgers"),
        int_constant("MaxEntries", 1, "entries per ledger, ids 0 .. MaxEntries-1"),
        int_constant("RecordsPerJournal", 2, "records a journal file holds before the journal rolls over"),
        int_constant("MaxCrashes", 1, "crashes of the bookie"),
        int_constant("NumLedgerDirs", 1, "ledger directories, each with its copy of the lastMark file"),
        Constant("Bug", str, "none", "a seeded bug, or none", choices=tuple(BUGS)),
    )

    NumLedgers: int
    MaxEntries: int
    RecordsPerJournal: int
    MaxCrashes: int
    NumLedgerDirs: int
    Bug: str

    def check_constants(self) -> None:
        if self.NumLedgers < 1:
            raise ConstantError(f"NumLedgers must be at least 1, got {self.NumLedgers}")
        if self.MaxEntries < 1:
            raise ConstantError(f"MaxEntries must be at least 1, got {self.MaxEntries}")
        if self.RecordsPerJournal < 1:
            raise ConstantError(f"RecordsPerJournal must be at least 1, got {self.RecordsPerJournal}")
        if self.MaxCrashes < 0:
            raise ConstantError(f"MaxCrashes must not be negative, got {self.MaxCrashes}")
        if self.NumLedgerDirs < 1:
            raise ConstantError(f"NumLedgerDirs must be at least 1, got {self.NumLedgerDirs}")
        self.ledgers = tuple(range(1, self.NumLedgers + 1))
        self.entries = tuple(range(self.MaxEntries))

    # -- operators ------------------------------------------------------------------
    @staticmethod
    def records(s: BookieState) -> Iterator[tuple[Position, Record]]:
        """Every journal record with its position, in journal order."""
        for f, recs in s.journal:
            for i, rec in enumerate(recs):
                yield (f, i), rec

    @staticmethod
    def persisted_mark(s: BookieState) -> Position:
        """The mark a start reads: the largest ``lastMark`` copy (``Journal.java``, ``LastLogMark.readLog``,
        release-4.17.2)."""
        return max(s.last_marks)

    @staticmethod
    def end_of_journal(s: BookieState) -> Position:
        """The position after the last record of the newest file (where the next record goes)."""
        f, recs = s.journal[-1]
        return (f, len(recs))

    def unsynced(self, s: BookieState) -> list[Record]:
        """Records written to the journal but not yet fsynced: their replies wait for the force write."""
        return [rec for pos, rec in self.records(s) if pos >= s.synced]

    def current_file_full(self, s: BookieState) -> bool:
        return len(s.journal[-1][1]) >= self.RecordsPerJournal

    def read_path(self, s: BookieState, ledger: int, entry: int) -> str:
        """Which path serves a read of (ledger, entry): the memtable (a tailing read), the index and
        the entry log (a catch-up read), or none (not stored, or the bookie is down)."""
        if not s.up:
            return NOT_FOUND
        if (ledger, entry) in s.memtable:
            return TAILING
        if (ledger, entry) in s.flushed:
            return CATCH_UP
        return NOT_FOUND

    def closed_by_crash(self, s: BookieState, f: int) -> bool:
        """File f is neither full nor the newest: a crash ended it (a rollover only leaves full files),
        so every record in it was written before that crash."""
        recs = dict(s.journal).get(f)
        return recs is not None and f != s.journal[-1][0] and len(recs) < self.RecordsPerJournal

    def _append(self, s: BookieState, rec: Record) -> tuple[JournalFile, ...]:
        f, recs = s.journal[-1]
        return (*s.journal[:-1], (f, (*recs, rec)))

    # -- Init ------------------------------------------------------------------------
    def init_states(self) -> Iterator[BookieState]:
        yield BookieState(
            journal=((1, ()),),
            synced=(1, 0),
            flushed=frozenset(),
            fenced_flushed=frozenset(),
            lac_flushed=tuple(-1 for _ in self.ledgers),
            last_marks=tuple(ZERO_MARK for _ in range(self.NumLedgerDirs)),
            memtable=frozenset(),
            fenced=frozenset(),
            lac=tuple(-1 for _ in self.ledgers),
            mark=ZERO_MARK,
            flusher_mark=IDLE_FLUSHERS,
            flusher_flushed=frozenset(),
            flusher_copies=(0, 0),
            up=True,
            acked=frozenset(),
            fence_acked=frozenset(),
            crashes=0,
        )

    def initial_state(self) -> BookieState:
        return next(iter(self.init_states()))

    # -- requests --------------------------------------------------------------------
    @action(_each_entry)
    def BookieAddsEntry(self, s: BookieState, ledger: int, entry: int) -> BookieState | None:
        """addEntry: into the memtable first, then a journal record; the ack waits for the fsync."""
        if not s.up or ledger in s.fenced or self.current_file_full(s):
            return None
        if (ledger, entry) in s.memtable or (ledger, entry) in s.flushed:
            return None
        acked = s.acked | {(ledger, entry)} if self.Bug == "ack_before_fsync" else s.acked
        return evolve(
            s,
            memtable=s.memtable | {(ledger, entry)},
            journal=self._append(s, (ENTRY, ledger, entry)),
            acked=acked,
        )

    @action(_each_ledger)
    def BookieFencesLedger(self, s: BookieState, ledger: int) -> BookieState | None:
        """fenceAndLogInJournal: set the fenced flag, journal a fence record; the reply waits for the fsync.
        A ledger already fenced is answered at once once its fence is durable; until then the request
        waits for the fence record already written, which is no step. Real 4.17.2 journals no master key
        here; this spec assumes the fence record is replayable alone."""
        if not s.up:
            return None
        if ledger in s.fenced:
            if ledger in s.fence_acked or (FENCE, ledger, -1) in self.unsynced(s):
                return None
            return evolve(s, fence_acked=s.fence_acked | {ledger})
        if self.Bug == "fence_not_journaled":
            return evolve(s, fenced=s.fenced | {ledger}, fence_acked=s.fence_acked | {ledger})
        if self.current_file_full(s):
            return None
        return evolve(s, fenced=s.fenced | {ledger}, journal=self._append(s, (FENCE, ledger, -1)))

    @action(_each_entry)
    def BookieSetsExplicitLac(self, s: BookieState, ledger: int, new_lac: int) -> BookieState | None:
        """setExplicitLac: keep the writer's newer explicit LAC and journal it (the reply waits for the fsync)."""
        if not s.up or new_lac <= s.lac[ledger - 1] or self.current_file_full(s):
            return None
        return evolve(s, lac=_replace(s.lac, ledger - 1, new_lac), journal=self._append(s, (LAC, ledger, new_lac)))

    # -- the journal -----------------------------------------------------------------
    @action(_each_sync_end)
    def JournalForceWrites(self, s: BookieState, upto: Position) -> BookieState | None:
        """Force-write thread: fsync the records written before ``upto``, set the mark there, acknowledge them."""
        if not s.up:
            return None
        batch = [rec for pos, rec in self.records(s) if s.synced <= pos < upto]
        if not batch:
            return None
        return evolve(
            s,
            synced=upto,
            mark=upto,
            acked=s.acked | {(ledger, v) for kind, ledger, v in batch if kind == ENTRY},
            fence_acked=s.fence_acked | {ledger for kind, ledger, _ in batch if kind == FENCE},
        )

    @action()
    def JournalRollsOver(self, s: BookieState) -> BookieState | None:
        """The current file reached maxJournalSize: the journal thread starts the next file."""
        if not s.up or not self.current_file_full(s):
            return None
        return evolve(s, journal=(*s.journal, (s.journal[-1][0] + 1, ())))

    # -- the flushers: SyncThread's checkpoint and the write cache's flush -------------------
    @action(_each_flusher)
    def FlusherTakesMark(self, s: BookieState, flusher: int) -> BookieState | None:
        """``Journal.newCheckpoint``, called by SyncThread's periodic task (``BookieImpl``'s ``SyncThread.start``:
        ``doCheckpoint(checkpointSource.newCheckpoint())``) or by ``SingleDirectoryDbLedgerStorage.flush`` when
        the add path finds the write cache full (``triggerFlushAndAddEntry``), release-4.17.2: the flusher takes
        the in-memory mark; everything journaled before it is in the write cache or flushed. The write cache's
        flush starts only with entries in the cache; the sync thread's only when the mark is past the persisted
        one."""
        if not s.up or s.flusher_mark[flusher - 1] != NONE:
            return None
        if flusher == WRITE_CACHE and not s.memtable:
            return None
        if flusher == SYNC_THREAD and not self.persisted_mark(s) < s.mark:
            return None
        return evolve(s, flusher_mark=_replace(s.flusher_mark, flusher - 1, s.mark))

    @action(_each_flusher)
    def LedgerStorageFlushes(self, s: BookieState, flusher: int) -> BookieState | None:
        """``SingleDirectoryDbLedgerStorage.checkpoint`` (release-4.17.2), called by ``SyncThread.checkpoint`` and
        by ``SingleDirectoryDbLedgerStorage.flush``: under ``flushMutex``, one flush at a time, swap the write cache
        and write it to the entry log and the index, with the fenced bits and explicit LACs; fsync."""
        if not s.up or s.flusher_mark[flusher - 1] == NONE or flusher in s.flusher_flushed:
            return None
        return evolve(
            s,
            flushed=s.flushed | s.memtable,
            memtable=frozenset(),
            fenced_flushed=s.fenced,
            lac_flushed=s.lac,
            flusher_flushed=s.flusher_flushed | {flusher},
        )

    @action(_each_flusher)
    def CheckpointPersistsMark(self, s: BookieState, flusher: int) -> BookieState | None:
        """``Journal.checkpointComplete`` after the flusher's flush (``SyncThread.checkpoint``;
        ``SingleDirectoryDbLedgerStorage.flush``, only with a single ledger directory): ``LastLogMark.rollLog``
        writes the mark to the ``lastMark`` file of each ledger directory in turn, one copy a step,
        release-4.17.2. A mark older than the persisted one is skipped, as 4.18.0 does (#4105); 4.17.2 writes it."""
        m = s.flusher_mark[flusher - 1]
        if not s.up or m == NONE:
            return None
        if flusher not in s.flusher_flushed and self.Bug != "mark_before_flush":
            return None
        copy = s.flusher_copies[flusher - 1] + 1
        done = {
            "flusher_mark": _replace(s.flusher_mark, flusher - 1, NONE),
            "flusher_flushed": s.flusher_flushed - {flusher},
            "flusher_copies": _replace(s.flusher_copies, flusher - 1, 0),
        }
        if (flusher == WRITE_CACHE and self.NumLedgerDirs > 1) or (
            copy == 1 and self.Bug != "mark_moves_backwards" and m < self.persisted_mark(s)
        ):
            return evolve(s, **done)
        last_marks = _replace(s.last_marks, copy - 1, m)
        if copy == self.NumLedgerDirs:
            return evolve(s, last_marks=last_marks, **done)
        return evolve(s, last_marks=last_marks, flusher_copies=_replace(s.flusher_copies, flusher - 1, copy))

    @action(_each_journal_file)
    def JournalFileDeleted(self, s: BookieState, f: int) -> BookieState | None:
        """Journal garbage collection, oldest file first: a file wholly before the persisted mark is not
        needed by any replay."""
        if not s.up or f != s.journal[0][0] or f == s.journal[-1][0]:
            return None
        if not (
            f <= self.persisted_mark(s)[0] if self.Bug == "delete_journal_at_mark" else f < self.persisted_mark(s)[0]
        ):
            return None
        return evolve(s, journal=tuple(file for file in s.journal if file[0] != f))

    # -- crash and restart -------------------------------------------------------------
    @action(_each_cut)
    def BookieCrashes(self, s: BookieState, cut: Position) -> BookieState | None:
        """Power loss: memory is gone, and of the unsynced records only those before ``cut`` reached the disk."""
        if not s.up or s.crashes >= self.MaxCrashes:
            return None
        journal = tuple((f, recs[: _kept(f, len(recs), cut)]) for f, recs in s.journal)
        f, recs = journal[-1]
        return evolve(
            s,
            journal=journal,
            synced=(f, len(recs)),  # whatever is on disk now stays there
            memtable=frozenset(),
            fenced=frozenset(),
            lac=tuple(-1 for _ in self.ledgers),
            mark=NONE,
            flusher_mark=IDLE_FLUSHERS,
            flusher_flushed=frozenset(),
            flusher_copies=(0, 0),
            up=False,
            crashes=s.crashes + 1,
        )

    @action()
    def BookieReplaysJournal(self, s: BookieState) -> BookieState | None:
        """Restart: replay every record at or after the persisted mark, advance the mark to the end, serve.

        Every fence record replayed fences its ledger. Real 4.17.2 skips one whose ledger has neither a key
        record replayed before it nor an index file on disk ("Skip replaying entries of ledger L since it was
        deleted"): the fence of an empty ledger is then lost, which this spec does not allow."""
        if s.up:
            return None
        memtable: set[tuple[int, int]] = set()
        fenced = set(s.fenced_flushed)
        lac = list(s.lac_flushed)
        for pos, (kind, ledger, v) in self.records(s):
            if pos < self.persisted_mark(s):
                continue
            if kind == ENTRY:
                memtable.add((ledger, v))
            elif kind == FENCE:
                fenced.add(ledger)
            else:
                lac[ledger - 1] = v  # FileInfo.setExplicitLac overwrites: the last record wins
        # #2087: the fixed replay sets the mark to the end of each file it scanned.
        mark = self.persisted_mark(s) if self.Bug == "mark_not_advanced_in_replay" else self.end_of_journal(s)
        return evolve(
            s,
            memtable=frozenset(memtable),
            fenced=frozenset(fenced),
            lac=tuple(lac),
            mark=mark,
            journal=(*s.journal, (s.journal[-1][0] + 1, ())),
            up=True,
        )

    # -- invariants ------------------------------------------------------------------
    @invariant
    def TypeOK(self, s: BookieState) -> str | None:
        """Every variable holds a value of its type, within the model's bounds."""
        ids = [f for f, _ in s.journal]
        if not ids or ids != list(range(ids[0], ids[0] + len(ids))):
            return f"journal file ids {ids} are not consecutive"
        for pos, rec in self.records(s):
            kind, ledger, v = rec
            if ledger not in self.ledgers or kind not in (ENTRY, FENCE, LAC):
                return f"malformed journal record {rec} at {pos}"
            if (kind == FENCE and v != -1) or (kind != FENCE and v not in self.entries):
                return f"malformed journal record {rec} at {pos}"
        for name in ("memtable", "flushed", "acked"):
            bad = [x for x in getattr(s, name) if x[0] not in self.ledgers or x[1] not in self.entries]
            if bad:
                return f"{name} holds {sorted(bad)}, not entries of ledgers 1..{self.NumLedgers}"
        if not s.fenced | s.fenced_flushed | s.fence_acked <= set(self.ledgers):
            return f"fenced ledgers {sorted(s.fenced | s.fenced_flushed | s.fence_acked)} outside 1..{self.NumLedgers}"
        if len(s.lac) != self.NumLedgers or len(s.lac_flushed) != self.NumLedgers:
            return f"lac {s.lac} and lac_flushed {s.lac_flushed} need one value per ledger"
        if not 0 <= s.crashes <= self.MaxCrashes:
            return f"{s.crashes} crashes, MaxCrashes is {self.MaxCrashes}"
        if s.up == (s.mark == NONE):
            return f"mark is {s.mark} while the bookie is {'up' if s.up else 'down'}"
        if len(s.last_marks) != self.NumLedgerDirs:
            return f"last_marks {s.last_marks} needs one lastMark per ledger directory"
        if len(s.flusher_mark) != len(FLUSHERS) or len(s.flusher_copies) != len(FLUSHERS):
            return f"flusher_mark {s.flusher_mark} and flusher_copies {s.flusher_copies} need one value per flusher"
        if not s.flusher_flushed <= set(FLUSHERS):
            return f"flusher_flushed {sorted(s.flusher_flushed)} names no flusher"
        for flusher in FLUSHERS:
            idle = s.flusher_mark[flusher - 1] == NONE
            copies = s.flusher_copies[flusher - 1]
            if idle and (flusher in s.flusher_flushed or copies != 0):
                return f"the {FLUSHERS[flusher]} flusher is idle but has flushed or written lastMark copies"
            if not 0 <= copies < self.NumLedgerDirs:
                return f"the {FLUSHERS[flusher]} flusher wrote {copies} lastMark copies of {self.NumLedgerDirs}"
        return None

    # The rules of the mechanism come first, so that a seeded bug is reported by the rule it
    # breaks; the promises to clients, which those rules keep, follow.
    @invariant
    def MarkNeverPassesUnflushedData(self, s: BookieState) -> str | None:
        """Every journal record before the persisted mark is in the flushed ledger storage, since no
        replay will read it again."""
        for pos, (kind, ledger, v) in self.records(s):
            if not pos < self.persisted_mark(s):
                break
            if kind == ENTRY and (ledger, v) not in s.flushed:
                lost = f"entry ({ledger}, {v}) is not in the entry log"
            elif kind == FENCE and ledger not in s.fenced_flushed:
                lost = f"the fenced bit of ledger {ledger} is not flushed"
            elif kind == LAC and s.lac_flushed[ledger - 1] < v:
                lost = f"the flushed explicit LAC of ledger {ledger} is {s.lac_flushed[ledger - 1]}, not {v}"
            else:
                continue
            persisted = self.persisted_mark(s)
            return f"the persisted mark {persisted} is past the record {(kind, ledger, v)} at {pos}, but {lost}"
        return None

    @invariant
    def JournalKeptFromMark(self, s: BookieState) -> str | None:
        """Every journal file from the persisted mark's file to the newest still exists: deletion only
        removes files wholly before the mark, whose records are flushed."""
        ids = {f for f, _ in s.journal}
        first_needed = max(self.persisted_mark(s)[0], 1)
        missing = [f for f in range(first_needed, s.journal[-1][0] + 1) if f not in ids]
        if not missing:
            return None
        message = (
            f"journal files {missing} are gone, but a replay from the persisted mark {self.persisted_mark(s)} "
            f"reads every file from {first_needed} on"
        )
        if self.persisted_mark(s)[0] in missing:
            message += f" (the real bookie refuses to start: 'Recovery log {self.persisted_mark(s)[0]} is missing')"
        return message

    @invariant
    def MarkCoversReplayedJournal(self, s: BookieState) -> str | None:
        """While the bookie is up with nothing waiting for an fsync, the in-memory mark is past every
        journal record, so the next checkpoint can let the replayed journal go (#2087)."""
        if not s.up or self.unsynced(s):
            return None
        for pos, rec in self.records(s):
            if not pos < s.mark:
                return f"the bookie is up and idle, but its mark {s.mark} is not past the record {rec} at {pos}"
        return None

    @invariant
    def AckedEntriesSurvive(self, s: BookieState) -> str | None:
        """Every acknowledged entry is flushed or in a synced journal record at or after the persisted mark
        (so any crash and restart keeps it), and while the bookie is up a read finds it."""
        replayable = self._replayable(s, ENTRY)
        for ledger, entry in sorted(s.acked):
            if (ledger, entry) not in s.flushed and (ledger, entry) not in replayable:
                return (
                    f"entry ({ledger}, {entry}) was acknowledged, but it is not in the entry log and no synced "
                    f"journal record at or after the persisted mark {self.persisted_mark(s)} holds it: "
                    "a crash now loses it"
                )
            if s.up and self.read_path(s, ledger, entry) == NOT_FOUND:
                return f"entry ({ledger}, {entry}) was acknowledged, but the bookie is up and no read finds it"
        return None

    @invariant
    def FencedLedgerStaysFenced(self, s: BookieState) -> str | None:
        """A ledger whose fence was acknowledged is fenced while the bookie is up, and its fence is durable:
        flushed, or in a synced journal record at or after the persisted mark."""
        replayable = self._replayable(s, FENCE)
        for ledger in sorted(s.fence_acked):
            if ledger not in s.fenced_flushed and (ledger, -1) not in replayable:
                return (
                    f"the fence of ledger {ledger} was acknowledged, but its fenced bit is not flushed and no "
                    f"synced journal record at or after the persisted mark {self.persisted_mark(s)} holds it: "
                    "a crash now unfences it"
                )
            if s.up and ledger not in s.fenced:
                return f"the fence of ledger {ledger} was acknowledged, but the bookie is up and accepts its adds"
        return None

    @action_property
    def MarkNeverMovesBackwards(self, s: BookieState, t: BookieState) -> str | None:
        """The persisted mark only moves forward: a later replay never starts before an earlier one would."""
        if self.persisted_mark(t) < self.persisted_mark(s):
            return f"the persisted mark moved back from {self.persisted_mark(s)} to {self.persisted_mark(t)}"
        return None

    def _replayable(self, s: BookieState, kind: str) -> set[tuple[int, int]]:
        """(ledger, value) of the synced records of a kind at or after the persisted mark."""
        return {
            (ledger, v)
            for pos, (k, ledger, v) in self.records(s)
            if k == kind and self.persisted_mark(s) <= pos < s.synced
        }

    # -- sometimes: the invariants above are not vacuous ----------------------------------
    # AckedEntriesSurvive: TailingReadOfAckedEntry, CatchUpReadOfAckedEntry, AckedEntryReadAfterCrash,
    #   UnackedRecordSurvivesCrash (a torn tail keeps part of what was unsynced);
    # FencedLedgerStaysFenced: FenceKeptAfterCrash; MarkNeverPassesUnflushedData: MarkPersistedPastRecords,
    #   ExplicitLacKeptAfterCrash; MarkCoversReplayedJournal and MarkNeverMovesBackwards:
    #   CheckpointAfterRestartCoversReplay; JournalKeptFromMark: OldJournalDeleted,
    #   AckedEntryReadAfterItsJournalDeleted.
    @reachable
    def TailingReadOfAckedEntry(self, s: BookieState) -> bool:
        """An acknowledged entry is served from the memtable."""
        return any(self.read_path(s, *x) == TAILING for x in s.acked)

    @reachable
    def CatchUpReadOfAckedEntry(self, s: BookieState) -> bool:
        """An acknowledged entry is served through the index from the entry log."""
        return any(self.read_path(s, *x) == CATCH_UP for x in s.acked)

    @reachable
    def AckedEntryReadAfterCrash(self, s: BookieState) -> bool:
        """An entry acknowledged before a crash is read after the restart, from the memtable the replay
        filled: it is not flushed and its record is in a file the crash closed."""
        return any(
            kind == ENTRY
            and (ledger, v) in s.acked
            and (ledger, v) not in s.flushed
            and self.read_path(s, ledger, v) == TAILING
            and self.closed_by_crash(s, pos[0])
            for pos, (kind, ledger, v) in self.records(s)
        )

    @reachable
    def FenceKeptAfterCrash(self, s: BookieState) -> bool:
        """A fence acknowledged before a crash holds after the restart, restored from the journal."""
        return s.up and any(
            kind == FENCE and ledger in s.fence_acked & s.fenced - s.fenced_flushed and self.closed_by_crash(s, pos[0])
            for pos, (kind, ledger, _) in self.records(s)
        )

    @reachable
    def ExplicitLacKeptAfterCrash(self, s: BookieState) -> bool:
        """An explicit LAC journaled before a crash is restored by the replay."""
        return s.up and any(
            kind == LAC and s.lac[ledger - 1] >= v > s.lac_flushed[ledger - 1] and self.closed_by_crash(s, pos[0])
            for pos, (kind, ledger, v) in self.records(s)
        )

    @reachable
    def MarkPersistedPastRecords(self, s: BookieState) -> bool:
        """A checkpoint persisted a mark past journal records, which the replay then skips."""
        return any(pos < self.persisted_mark(s) for pos, _ in self.records(s))

    @reachable
    def CheckpointAfterRestartCoversReplay(self, s: BookieState) -> bool:
        """After a restart, a checkpoint persisted a mark at or past the end of a file the crash closed."""
        return any(
            recs and self.closed_by_crash(s, f) and self.persisted_mark(s) >= (f, len(recs)) for f, recs in s.journal
        )

    @reachable
    def OldJournalDeleted(self, s: BookieState) -> bool:
        """A journal file wholly before the persisted mark was deleted."""
        return s.journal[0][0] > 1

    @reachable
    def AckedEntryReadAfterItsJournalDeleted(self, s: BookieState) -> bool:
        """An acknowledged entry whose journal record was deleted is read from the entry log."""
        recorded = {(ledger, v) for _, (kind, ledger, v) in self.records(s) if kind == ENTRY}
        return any(x not in recorded and self.read_path(s, *x) == CATCH_UP for x in s.acked)

    @reachable
    def UnackedRecordSurvivesCrash(self, s: BookieState) -> bool:
        """Part of the unsynced tail reached the disk: after a crash the journal holds an unacknowledged entry."""
        return not s.up and any(
            kind == ENTRY and (ledger, v) not in s.acked for _, (kind, ledger, v) in self.records(s)
        )

    # -- for checkers outside the explorer ------------------------------------------------
    def make_state(self, **fields: Any) -> BookieState:
        """A state from plain values (lists, sets, tuples): the initial state with ``fields`` replaced,
        converted to the exact types of :class:`BookieState`.

        Raises ValueError naming the field when a value has the wrong shape. A well-formed state
        outside the model (a journal with a gap in its file ids, a ledger beyond NumLedgers) is
        returned: :meth:`invariant_failures` reports it as a failure of TypeOK.

        A state read from disk after a crash has ``up=False``, ``mark=NONE``, the memory fields at
        their initial values, and ``synced`` at the end of the newest journal file (what is on disk
        after a crash stays there); a ledger directory without a lastMark file has ZERO_MARK in ``last_marks``.
        """
        known = {f.name for f in attrs.fields(BookieState)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"BookieState has no field {', '.join(unknown)}; fields: {', '.join(sorted(known))}")
        values: dict[str, Any] = {}
        for name, raw in fields.items():
            try:
                values[name] = _CONVERT[name](raw)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"BookieState field {name}: cannot read {raw!r} ({exc})") from None
        state: BookieState = evolve(self.initial_state(), **values)
        return state


def _kept(f: int, n: int, cut: Position) -> int:
    """How many of the n records of file f are before the cut."""
    if f < cut[0]:
        return n
    if f == cut[0]:
        return min(n, cut[1])
    return 0


def _replace(values: tuple[_T, ...], i: int, value: _T) -> tuple[_T, ...]:
    return (*values[:i], value, *values[i + 1 :])


def _position(raw: Any) -> Position:
    f, i = raw
    return (_int(f), _int(i))


def _int(raw: Any) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise TypeError(f"{raw!r} is not an integer")
    return raw


def _pairs(raw: Any) -> frozenset[tuple[int, int]]:
    return frozenset((_int(a), _int(b)) for a, b in raw)


def _ints(raw: Any) -> frozenset[int]:
    return frozenset(_int(x) for x in raw)


def _record(raw: Any) -> Record:
    kind, ledger, v = raw
    if kind not in (ENTRY, FENCE, LAC):
        raise ValueError(f"record kind {kind!r} is not one of {ENTRY}, {FENCE}, {LAC}")
    return (kind, _int(ledger), _int(v))


def _journal(raw: Any) -> tuple[JournalFile, ...]:
    journal = tuple((_int(f), tuple(_record(r) for r in recs)) for f, recs in raw)
    if not journal:
        raise ValueError("a bookie always has a journal file")
    return journal


def _bool(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise TypeError(f"{raw!r} is not a boolean")
    return raw


_CONVERT: Mapping[str, Any] = {
    "journal": _journal,
    "synced": _position,
    "flushed": _pairs,
    "fenced_flushed": _ints,
    "lac_flushed": lambda raw: tuple(_int(x) for x in raw),
    "last_marks": lambda raw: tuple(_position(m) for m in raw),
    "memtable": _pairs,
    "fenced": _ints,
    "lac": lambda raw: tuple(_int(x) for x in raw),
    "mark": _position,
    "flusher_mark": lambda raw: tuple(_position(m) for m in raw),
    "flusher_flushed": _ints,
    "flusher_copies": lambda raw: tuple(_int(x) for x in raw),
    "up": _bool,
    "acked": _pairs,
    "fence_acked": _ints,
    "crashes": _int,
}
