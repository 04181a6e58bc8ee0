"""The abstraction function: the reference bookie's memory and files, seen as a state of the bookie spec.

:class:`BookieAbstraction` maps a running bookie (its :class:`~.bookie.MemoryState`
plus its files as the OS holds them and as a power loss would leave them) or a
crashed bookie (its files alone) to a :class:`~ledgerspec.spec.bookie.bookie.BookieState`,
so that the spec's invariants can be checked on the reference bookie and each of
its steps can be checked to be a step of the spec (``reference/bookie/refinement.py``).
Data flows one way: this module reads the spec's types; the spec knows nothing of it.

The reference bookie works at a finer grain than the spec. Each choice below makes
the correct bookie refine the spec step for step; the checker enforces the ones
that are not this module's to make (marked *checker*).

Records and positions
    Only entries, fences and explicit LACs are spec records; ledger-key and padding
    records are not seen. A ``LogMark(file, byte offset)`` is the position
    ``(file, spec records that start before the offset)``. The record offsets of a
    journal file are remembered, so that a mark into a file deleted since still
    names the same position.

``journal``
    The journal files the OS lists, with the records written to them, and after
    the current file's records those still in the journal writer's buffer. The
    spec appends a record when the request arrives; the reference buffers it and
    writes the buffer on ``journal_flush``, which is therefore a stutter.

``synced``
    The bookie's own ``synced``, which moves when a force write acknowledges its
    batch (``journal_synced``), not the bytes an fsync made durable: the fsync
    (``journal_sync``) is a stutter, ``journal_synced`` is ``JournalForceWrites(upto)``
    with ``upto`` the end of the batch, a prefix of what was written (records
    written after the batch was taken wait for the next force write). What an
    fsync made durable before its acknowledgements survives a crash as part of
    the unsynced tail that the spec's crash may keep. *Checker*: every record
    before ``synced`` is durable. The spec writes the end of file ``f`` either as
    ``(f, n)`` or, once ``f + 1`` exists, as ``(f + 1, 0)``; both leave the same
    records unsynced, and the spec compares ``synced`` with record positions
    only, so states are compared with ``synced`` at the first unsynced record
    (:func:`canonical`).

``flushed``, ``fenced_flushed``, ``lac_flushed``, ``last_marks``
    What a power loss now would leave (the durable files): an entry is flushed
    when its index slot, durable, points at that entry in a durable entry log;
    the fenced bit and the explicit LAC of the durable index header; the durable
    ``lastMark`` of each ledger directory, in the layout's order (``(0, 0)``
    where there is none). The bookie's memory is not asked.

``memtable``, ``fenced``, ``lac``, ``mark``, ``up``
    The bookie's memory (:class:`~.bookie.MemoryState`); ``lac`` holds -1 for a
    ledger without an explicit LAC.

``flusher_mark``, ``flusher_flushed``, ``flusher_copies``
    The mark each flusher under way took, and whether it has flushed since.
    A persist writes every ``lastMark`` copy in one reference step, so between
    steps no flusher has written part of them: ``flusher_copies`` is ``(0, 0)``.

``acked``, ``fence_acked``, ``crashes``
    History the checker keeps across restarts: the normal adds and the fences
    answered, and the crashes of a bookie that had come up. *Checker*: a crash
    during a restart, before its replay is complete (its new journal file
    durable), is no crash to the spec: the bookie never came up, and what the
    files show must be a crash of a state the first crash could have left.

A crashed bookie
    From its files alone, as the spec's ``BookieCrashes`` leaves it: everything
    on disk is durable (``synced`` at the end of the journal), memory empty,
    ``mark`` ``NONE``, not up. After a process crash the files are what the OS
    holds, some of it not durable; the restart's replay and checkpoint build
    on them, so a second crash that is a power loss may take part of them
    back (the reference makes what it finds durable as it starts, see
    :mod:`.bookie`). *Checker*: what a power loss keeps of the journal's
    unsynced bytes is a prefix taken in file order, as the spec's crash keeps
    a prefix of the unsynced records (a later journal file written back before
    an earlier one is left out of the spec); other files may keep any prefix
    of their unsynced bytes. A crash matched with ``BookieCrashes`` of a state
    is a step from that state, for the action properties.

Steps that are several spec actions (*checker*)
    ``force_write`` is ``JournalForceWrites(upto)`` and, when the file is full,
    ``JournalRollsOver``; ``persist_mark`` is a ``CheckpointPersistsMark`` per ledger directory;
    ``checkpoint`` is the sync thread's ``FlusherTakesMark``,
    ``LedgerStorageFlushes``, its persist and a ``JournalFileDeleted(f)`` per
    file deleted; ``start`` is
    ``BookieReplaysJournal`` and a checkpoint (the reference creates the new
    journal file before the flush that follows the replay, see
    :mod:`.bookie`). A spec action of the list that is disabled must be a
    stutter of the reference. A crash inside such a step is a
    ``BookieCrashes(cut)`` of one of the spec states the step passes through.

A crash inside a flush (*checker*)
    The spec flushes in one step; the reference writes an entry log and then
    one index file after another. A crash in between leaves part of the
    memtable flushed. It is matched with the crash of the state before the flush
    with ``flushed``, ``fenced_flushed`` and ``lac_flushed`` between their values
    before and after it: the spec's own argument (the mark moves only after a
    whole flush, so the replay restores the rest), and the replay that follows
    is checked exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import attrs
from ledgerspec.reference.bookie.bookie import MemoryState
from ledgerspec.reference.bookie.disk import BookieFiles
from ledgerspec.reference.bookie.entry import EntryFormatError, decode_lac
from ledgerspec.reference.bookie.formats import LogMark, split_location
from ledgerspec.spec.bookie.bookie import FLUSHERS, NONE, ZERO_MARK, BookieSpec, BookieState, JournalFile, Position

__all__ = ["AbstractionError", "BookieAbstraction", "History", "NoJournalError", "canonical"]


class AbstractionError(Exception):
    """The files or the memory cannot be read as a spec state; the message names what and where."""


class NoJournalError(AbstractionError):
    """The journal directory holds no journal file: a bookie that never started, or one that lost them all."""


@attrs.frozen
class History:
    """What clients were told and how often the bookie crashed: the spec's history variables."""

    acked: frozenset[tuple[int, int]] = frozenset()  # (ledger, entry) of the normal adds answered
    fence_acked: frozenset[int] = frozenset()  # ledgers whose fence was answered
    crashes: int = 0  # crashes of a bookie that had come up


class BookieAbstraction:
    """Maps reference bookies to states of ``spec``; one per bookie directory, as it remembers journal offsets."""

    def __init__(self, spec: BookieSpec) -> None:
        self.spec = spec
        self._offsets: dict[int, tuple[int, ...]] = {}  # journal file id -> offsets of its spec records

    def running(self, memory: MemoryState, written: BookieFiles, durable: BookieFiles, history: History) -> BookieState:
        """A bookie that is up (or between steps of its start): memory, the OS's files, the durable files."""
        journal = self._journal(written)
        if memory.buffered:
            if memory.current_journal is None or journal[-1][0] != memory.current_journal:
                raise AbstractionError(
                    f"records {list(memory.buffered)} wait in the journal buffer, but the current journal "
                    f"{memory.current_journal} is not the newest journal file {journal[-1][0]}"
                )
            f, recs = journal[-1]
            journal = (*journal[:-1], (f, (*recs, *memory.buffered)))
        lac = dict(memory.lac)
        marks = dict(memory.flusher_marks)
        return self._state(
            journal=journal,
            synced=self.position(memory.synced),
            last_marks=self._last_marks(durable),
            memtable=memory.memtable,
            fenced=memory.fenced,
            lac=tuple(lac.get(ledger, -1) for ledger in self.spec.ledgers),
            mark=self.position(memory.mark) if memory.up else NONE,
            flusher_mark=tuple(self.position(marks[f]) if f in marks else NONE for f in FLUSHERS),
            flusher_flushed=memory.flusher_flushed,
            flusher_copies=tuple(0 for _ in FLUSHERS),
            up=memory.up,
            storage=durable,
            history=history,
        )

    def crashed(self, disk: BookieFiles, history: History) -> BookieState:
        """A bookie that crashed and has not restarted: its files alone."""
        journal = self._journal(disk)
        f, recs = journal[-1]
        return self._state(
            journal=journal,
            synced=(f, len(recs)),
            last_marks=self._last_marks(disk),
            memtable=frozenset(),
            fenced=frozenset(),
            lac=tuple(-1 for _ in self.spec.ledgers),
            mark=NONE,
            flusher_mark=tuple(NONE for _ in FLUSHERS),
            flusher_flushed=frozenset(),
            flusher_copies=tuple(0 for _ in FLUSHERS),
            up=False,
            storage=disk,
            history=history,
        )

    def copy(self) -> BookieAbstraction:
        """A copy that goes on from what this one has seen (for a crash continued in several ways)."""
        other = BookieAbstraction(self.spec)
        other._offsets = dict(self._offsets)
        return other

    def position(self, mark: LogMark) -> Position:
        """``(file, spec records starting before the offset)``: a LogMark in the spec's terms."""
        offsets = self._offsets.get(mark.file_id, ())
        return mark.file_id, sum(1 for offset in offsets if offset < mark.offset)

    # -- internals

    def _last_marks(self, files: BookieFiles) -> tuple[Position, ...]:
        """The lastMark of each ledger directory, in the layout's order; ``(0, 0)`` where there is none."""
        copies = {c.path: c.mark for c in files.marks}
        return tuple(
            ZERO_MARK if copies.get(path) is None else self.position(copies[path])  # type: ignore[arg-type]
            for path in files.layout.last_mark_paths()
        )

    def _journal(self, files: BookieFiles) -> tuple[JournalFile, ...]:
        self._check_readable(files)
        journal: list[JournalFile] = []
        for scan in files.journals:
            records = list(scan.spec_records())
            self._offsets[scan.file_id] = tuple(offset for offset, _ in records)
            journal.append((scan.file_id, tuple(record for _, record in records)))
        if not journal:
            raise NoJournalError(f"{files.layout.journal_dir} holds no journal file; a bookie always has one")
        return tuple(journal)

    @staticmethod
    def _check_readable(files: BookieFiles) -> None:
        if files.errors:
            raise AbstractionError("; ".join(str(e) for e in files.errors))

    def _state(
        self,
        *,
        journal: tuple[JournalFile, ...],
        storage: BookieFiles,
        history: History,
        memtable: Iterable[tuple[int, int]],
        fenced: Iterable[int],
        **memory: object,
    ) -> BookieState:
        self._check_readable(storage)
        flushed, fenced_flushed, lac_flushed = self._ledger_storage(storage)
        try:
            return self.spec.make_state(
                journal=journal,
                flushed=flushed,
                fenced_flushed=fenced_flushed,
                lac_flushed=lac_flushed,
                memtable=frozenset(memtable),
                fenced=frozenset(fenced),
                acked=history.acked,
                fence_acked=history.fence_acked,
                crashes=history.crashes,
                **memory,
            )
        except ValueError as exc:
            raise AbstractionError(str(exc)) from None

    def _ledger_storage(self, files: BookieFiles) -> tuple[frozenset[tuple[int, int]], frozenset[int], tuple[int, ...]]:
        """What the durable entry logs and index say: flushed entries, fenced bits, explicit LACs."""
        entries = {(log.log_id, r.offset): (r.ledger_id, r.entry_id) for log in files.entry_logs for r in log.records}
        flushed = frozenset(
            (index.ledger_id, entry_id)
            for index in files.indexes
            for entry_id, location in index.locations.items()
            if entries.get(split_location(location)) == (index.ledger_id, entry_id)
        )
        fenced = frozenset(index.ledger_id for index in files.indexes if index.header.fenced)
        lacs: Mapping[int, int] = {
            index.ledger_id: _explicit_lac(index.path, index.header.explicit_lac)
            for index in files.indexes
            if index.header.explicit_lac is not None
        }
        return flushed, fenced, tuple(lacs.get(ledger, -1) for ledger in self.spec.ledgers)


def _explicit_lac(path: str, buffer: bytes | None) -> int:
    assert buffer is not None
    try:
        return decode_lac(buffer, None)[1]
    except EntryFormatError as exc:
        raise AbstractionError(f"{path}: explicit LAC in the index header: {exc}") from None


def canonical(spec: BookieSpec, state: BookieState) -> BookieState:
    """The state with ``synced`` at the first unsynced record (or the end of the journal): how states compare."""
    first = next((pos for pos, _ in spec.records(state) if pos >= state.synced), spec.end_of_journal(state))
    return state if first == state.synced else attrs.evolve(state, synced=first)
