"""A Pulsar durable cursor: acknowledgements, their persistence, a broker crash and the cursor's restore.

The twin of ``cursor.tla``: the same variables, actions and invariants, by the
same names; the explorer and TLC reach the same states
under the models of ``cursor_models.py`` (tests/test_parity.py).

What is modelled (pulsar ``managed-ledger`` module, ``ManagedCursorImpl`` and
the parts of ``ManagedLedgerImpl`` a cursor depends on; BRIEF section 4,
seed 003):

- the managed ledger the cursor reads, reduced to its ledger list
  ``(ledger id, entries)``: entries are published to the last ledger, which
  rolls over after ``MaxEntriesPerLedger`` entries or, with
  ``RolloverByTime``, once it holds an entry and has aged (time is not
  modelled: it may roll at any such moment); each entry holds a batch
  of ``BatchSize`` messages. Data ledgers and cursor ledgers take their ids
  from one counter, as BookKeeper hands them out;
- the consumer's acknowledgements: an individual ack of one message
  (``asyncDelete``), a whole entry when it is not batched, one batch index
  otherwise. The cursor keeps its mark-delete position (everything up to it
  is acknowledged), the individually acknowledged entries after it
  (``individualDeletedMessages``, kept here as a set of positions) and the
  acknowledged indexes of partly acknowledged batches
  (``batchDeletedIndexes``). When the entries after the mark-delete position
  are acknowledged, the mark jumps over them;
- persisting that state (``persistPositionToLedger``,
  ``persistPositionMetaStore``): a ``PositionInfo`` record appended to the
  cursor's own ledger, and ``ManagedCursorInfo`` in the cursor's znode, which
  names the cursor ledger (``cursorsLedgerId``). A new cursor ledger is
  created when a mark-delete finds none to write to, or at once when the
  current one's LAC reaches ``MetadataMaxEntriesPerLedger`` (it then holds
  one record more, ``shouldCloseLedger`` in ManagedCursorImpl, 4.0.7): a
  first record goes into the new ledger, then the znode is switched to it
  (with the mark-delete position but not the individual acks), then the old
  ledger is deleted. The mark-deletes queued meanwhile
  (``pendingMarkDeleteOps``: the one that found no ledger among them) are
  written after the switch as one more record, and complete only then
  (``flushPendingMarkDeletes``); a rollover with none queued writes one.
  When the cursor ledger cannot be created, or an append to it fails, the
  state goes to the znode instead with ``cursorsLedgerId = -1``
  (apache/pulsar#1461, #20935). A clean close writes the znode with
  ``cursorsLedgerId = -1`` and the individual acks, then deletes the ledger.
  A new ledger whose first record fails is deleted, its id spent;
- a broker crash (the cursor's memory is lost) and the restore
  (``ManagedCursorImpl.recover``, seed 003): ``cursorsLedgerId = -1`` takes
  the state from the znode; otherwise the last record of the cursor ledger;
  when that ledger is missing, unreadable or empty, the cursor rolls back to
  the znode's mark-delete position (raised to the first position of the
  managed ledger) with no individual acks, and persists that
  (``getRollbackPosition``, ``initialize``). ``recoveredCursor`` then moves a
  mark-delete at ``(l, -1)`` of a ledger that is gone to the next ledger, and
  one past the last entry back to it;
- opening the managed ledger (drop the last ledger if empty, create a new
  one) and the trimming of consumed ledgers, by the position the managed
  ledger holds for the cursor (``slowest_position``, its entry in
  ``ManagedCursorContainer``; Pulsar 4.0.7), not by the cursor's mark-delete:
  each completed persist sets it to the persisted mark-delete
  (``onCursorMarkDeletePositionUpdated`` in ``internalMarkDelete``'s
  callback), the open to the restored one (``addCursor``), and
  ``maybeUpdateCursorBeforeTrimmingConsumedLedger`` to ``(next ledger, -1)``
  when the mark-delete in memory is at its ledger's last entry, leaving the
  cursor's own mark-delete where it is. ``internalTrimLedgers`` deletes the
  ledgers before that position's ledger ``x``, or up to ``x`` when the
  position is at the last entry of ``x`` and ``x`` is not the current ledger.
  So a ledger the durable state points into may be trimmed (by that rule, or
  after a skip while the mark-delete is unpersisted), and a restored
  mark-delete may lie in a trimmed ledger (``recoveredCursor`` moves only a
  position ``(l, -1)``): docs/real-systems.md. What trimming keeps is every
  message the consumer did not acknowledge;
- a failed write of the znode while the broker keeps running: the write that
  names a new cursor ledger (``switchToNewLedger``: the new ledger is deleted,
  the cursor keeps the one it held, and the pending mark-deletes fail), and
  the fallback write after a failed creation or append
  (``persistPositionToMetaStore``: the mark-delete fails). Either way the
  znode keeps what it held and the state stays in memory, to be persisted
  again;
- a reset (``asyncResetCursor``, ``internalResetCursor``; ``MaxResets``):
  the application names the position to read after; the reset persists it as
  a mark-delete with no individual acks, through the same steps as any
  persist, and the cursor takes it in memory once that persist completed
  (``CursorResetCompletes``; a restore takes a persisted reset too). A failed
  persist fails the reset. Afterwards what precedes the position counts as
  acknowledged and nothing after it (``acked``), but the messages of ledgers
  trimmed meanwhile. Two 4.0.7 paths that keep less are seeded bugs
  (``reset_keeps_acks``, ``ack_persists_over_reset``); a third, and the loss of
  a cursor ledger after a reset, are left out (docs/real-systems.md);
- faults of the environment: a failed write to BookKeeper or to the znode
  (``MaxFaults``, each failed call one fault) and the loss of a cursor ledger
  (``MaxLedgerLoss``), the case the rollback is for.

``acked`` (what the consumer acknowledged, or a reset made acknowledged),
``durable`` (the acknowledgements a completed persist covers) and
``reset_unapplied`` (a reset persisted but not yet taken) are history variables: no process reads them;
the invariants are stated with them.

What is left out, and why that is sound here:

- reads and dispatch: a message is redelivered after a restore exactly when
  the restored cursor does not cover it, which is what the invariants speak
  of;
- the read position: it is never persisted; the restore and a rewind set it
  to the entry after the mark-delete, and reads pass over the individually
  acknowledged entries (``isMessageDeleted``), so it follows from the state
  modelled; a reset sets it with the mark-delete; a ``seek`` moves it alone,
  and the next restore sets it again, so it cannot make a restored cursor
  skip a message (the recording ``rewind-read-restart`` checks what a
  restored cursor of the real broker dispatches);
- properties, ``lastActive`` and rate limiting of mark-deletes; of the queue
  of pending mark-delete operations, only whether it is empty (``dirty``):
  each persist writes the cursor's whole current state, which covers every
  acknowledgement queued before it;
- the mark-delete of a new cursor ledger's first record: Pulsar 4.0.7 writes
  the one of ``lastMarkDeleteEntry`` (the last mark-delete submitted) with
  the individual acks in memory, here the mark-delete in memory; the two
  differ only until the record that follows the switch, and only a restore
  in between tells them apart (docs/real-systems.md);
- ``maxUnackedRangesToPersist`` (a cap on the individual acks persisted, which
  gives up their durability past the cap) and closes that write the ranges to
  the cursor ledger because there are too many for the znode;
- the znode's version check (one broker owns the topic);
- when the skip over a consumed ledger runs: Pulsar 4.0.7 runs it at the open
  and after each rollover, here it may run at any time the cursor is active
  (more behaviours, the ones Pulsar has among them); ``advanceCursorsIfNecessary``,
  which acks trimmed entries for cursors behind them, changes nothing for one
  durable cursor, which the trim never passes (``TrimPositionBehindCursor``);
- a failed znode write of a close (``persistPositionWhenClosing``: the close
  fails and the cursor stays in state Closing, taking no further step) and of
  the restore's rollback: neither changes a store, and what follows is a
  broker stop, which the crash step covers;
- a new cursor ledger's deletion after a failed switch failing: the ledger is
  then left over, named by nothing, as after a crash before the switch;
- a new cursor ledger whose first record fails but whose fallback write to the
  znode succeeds: Pulsar 4.0.7 then names that ledger, which holds no record,
  in the znode, and a restore before the next persist rolls back without the
  individual acks persisted before (docs/real-systems.md). The spec has the
  branch where the fallback fails too (``CursorLedgerFirstWriteFails``).

The fallback to the znode after a failed cursor-ledger creation is the
constant ``ZnodeFallback``. By default it follows Pulsar 4.0.7: the state goes
to the znode only when no message follows the mark-delete position
(``internalMarkDelete`` in NoLedger, ``isNoMessagesAfterPos``); otherwise the
mark-delete fails and stays in memory, to be persisted again
(apache/pulsar#26485 reports it). ``always`` falls back every time, as
apache/pulsar#20935 meant to.

Seeded bugs, chosen by the constant ``Bug``, make the spec wrong on purpose so
that tests can show the checkers catch each one.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from typing import Any

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
from ledgerspec.spec.positions import (
    NO_POSITION,
    Position,
    next_ledger,
    next_position,
    no_messages_after,
    recovered_position,
    slowest_reader_ledger,
)

__all__ = [
    "BUGS",
    "CursorInfo",
    "CursorSpec",
    "CursorState",
    "Message",
    "PositionInfo",
    "ledger_entry",
    "reset_targets",
]

BUGS = {
    "none": "the cursor as Pulsar implements it",
    "restore_ignores_no_ledger": "the restore treats cursorsLedgerId = -1 as a ledger to read, and rolls back",
    "no_store_fallback": (
        "when the cursor ledger cannot be created, the mark-delete is reported done but not written to the "
        "metadata store (apache/pulsar#20935)"
    ),
    "restore_skips_unacked": "the restore moves the mark-delete to the last individually acked entry",
    "trim_deletes_needed_ledger": (
        "trimming also deletes the ledger the managed ledger's position of the cursor points into"
    ),
    "skip_unconsumed_ledger": (
        "the skip over a consumed ledger moves the managed ledger's position of the cursor past a ledger whose "
        "last entry the cursor has not acknowledged"
    ),
    "reset_keeps_acks": (
        "a reset's record keeps the individual and batch acks from before the reset (internalResetCursor, Pulsar 4.0.7)"
    ),
    "ack_persists_over_reset": (
        "an ack during a pending reset appends the state from before the reset after the reset's record "
        "(Pulsar 4.0.7; the outcome apache/pulsar#26304 reports on master)"
    ),
}

#: When a failed cursor-ledger creation falls back to the znode (the constant ``ZnodeFallback``).
NO_MESSAGES_AFTER, ALWAYS = "no_messages_after", "always"
ZNODE_FALLBACKS = {
    NO_MESSAGES_AFTER: "when no message follows the mark-delete (isNoMessagesAfterPos, Pulsar 4.0.7)",
    ALWAYS: "every time, as apache/pulsar#20935 meant",
}

# The cursor's states (ManagedCursorImpl.State). The broker being down is Uninitialized too.
UNINITIALIZED, NO_LEDGER, OPEN, SWITCHING, CLOSED = "Uninitialized", "NoLedger", "Open", "SwitchingLedger", "Closed"
ACTIVE = frozenset({NO_LEDGER, OPEN, SWITCHING})  # the cursor takes acks and persists them
NONE = -1  # no ledger (cursorsLedgerId = -1)

#: A message: (ledger id, entry id, batch index); the batch index is 0 for a message that is not batched.
Message = tuple[int, int, int]


@functools.lru_cache(maxsize=1 << 12)
def _ledger_ids(ledgers: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """``CursorSpec.ids``, kept: the actions and invariants ask it of every state."""
    return tuple(ledger for ledger, _ in ledgers)


@functools.lru_cache(maxsize=1 << 16)
def _covered(
    ledgers: tuple[tuple[int, int], ...],
    deleted: frozenset[tuple[int, int]],
    md: Position,
    ranges: frozenset[Position],
    batch: frozenset[Message],
    batch_size: int,
) -> frozenset[Message]:
    """``CursorSpec.covered``, kept for the states that ask it again: every invariant asks it of every state."""
    covered = set(batch)
    for ledger, count in (*ledgers, *deleted):
        for e in range(count):
            if (ledger, e) <= md or (ledger, e) in ranges:
                covered.update((ledger, e, i) for i in range(batch_size))
    return frozenset(covered)


@attrs.frozen(cache_hash=True)
class PositionInfo:
    """A record of the cursor ledger (MLDataFormats.PositionInfo)."""

    mark_delete: Position
    ranges: frozenset[Position]  # individually acknowledged entries after the mark-delete
    batch: frozenset[Message]  # acknowledged indexes of partly acknowledged batches


@attrs.frozen(cache_hash=True)
class CursorInfo:
    """The cursor's znode (MLDataFormats.ManagedCursorInfo)."""

    cursors_ledger: int  # the cursor ledger to restore from, or -1: the state is in this znode
    mark_delete: Position
    ranges: frozenset[Position]
    batch: frozenset[Message]


@attrs.frozen(cache_hash=True)
class CursorState:
    # -- the managed ledger (metadata store) and BookKeeper
    ledgers: tuple[tuple[int, int], ...]  # the ledger list: (ledger id, entries), increasing ids
    deleted: frozenset[tuple[int, int]]  # data ledgers trimmed or dropped: (ledger id, entries)
    next_id: int  # the next ledger id BookKeeper hands out
    cursor_ledgers: tuple[tuple[int, tuple[PositionInfo, ...]], ...]  # readable cursor ledgers and their records
    znode: CursorInfo  # the cursor's znode
    # -- the broker
    broker_up: bool
    crashes: int  # broker crashes so far (at most MaxCrashes)
    status: str  # the cursor's state (Uninitialized while the broker is down)
    mark_delete: Position
    ranges: frozenset[Position]  # individually acknowledged entries after the mark-delete
    batch: frozenset[Message]  # acknowledged batch indexes of entries not wholly acknowledged
    cursor_ledger: int  # the cursor ledger the cursor holds (to write to when Open), or -1
    switching_to: int  # the new cursor ledger written but not yet named in the znode, or -1
    retired: frozenset[int]  # old cursor ledgers to delete
    dirty: bool  # acknowledgements in memory that no persist covers yet
    slowest_position: Position  # the managed ledger's position of the cursor (ManagedCursorContainer): trimming's
    resetting: Position  # the mark-delete a pending reset persists, or NO_POSITION
    resets: int  # cursor resets so far (at most MaxResets)
    # -- the environment
    faults: int  # failed writes to BookKeeper and to the znode so far (at most MaxFaults)
    lost: int  # cursor ledgers lost so far (at most MaxLedgerLoss)
    # -- history
    acked: frozenset[Message]  # every message acknowledged, by the consumer or by a reset past it
    durable: frozenset[Message]  # acknowledgements covered by a completed persist
    reset_unapplied: Position  # a reset whose record is persisted, not yet taken by the cursor or a restore


# -- parameter generators: the \E in front of each TLA+ action ---------------------------
def _messages(spec: CursorSpec, s: CursorState) -> Iterable[tuple[int, int, int]]:
    for ledger, count in s.ledgers:
        for e in range(count):
            for i in range(spec.BatchSize):
                yield (ledger, e, i)


def _named_ledger(spec: CursorSpec, s: CursorState) -> Iterable[tuple[int]]:
    """The cursor ledger the znode names, if any: the one whose loss the restore has to survive."""
    named = s.znode.cursors_ledger
    return ((named,),) if any(ledger == named for ledger, _ in s.cursor_ledgers) else ()


def _retired(spec: CursorSpec, s: CursorState) -> Iterable[tuple[int]]:
    return ((ledger,) for ledger in sorted(s.retired))


def reset_targets(spec: CursorSpec, s: CursorState) -> Iterable[tuple[Position]]:
    """The mark-deletes a reset may persist: the entry before a read position of the list, every entry of the
    list (asyncResetCursor moves any other read position to the next valid one), or the first position."""
    targets = {(ledger, e) for ledger, count in s.ledgers for e in range(count)} | {spec.first_position(s)}
    return ((p,) for p in sorted(targets))


class CursorSpec(Spec[CursorState]):
    """One durable cursor over a managed ledger; see the module docstring."""

    name = "cursor"
    state_type = CursorState
    constants = (
        int_constant("MaxEntries", 3, "entries published in all"),
        int_constant("MaxEntriesPerLedger", 2, "maxEntriesPerLedger of the data ledgers"),
        int_constant("BatchSize", 1, "messages in an entry; above 1 the consumer acknowledges batch indexes"),
        int_constant(
            "MetadataMaxEntriesPerLedger", 2, "the cursor ledger's LAC at which it is replaced (one record more)"
        ),
        int_constant("MaxCrashes", 1, "broker crashes in all"),
        int_constant(
            "MaxFaults",
            1,
            "failed writes: BookKeeper's (cursor ledger creations and appends) and the metadata store's (the znode)",
        ),
        int_constant("MaxLedgerLoss", 0, "cursor ledgers lost (unreadable) in all"),
        int_constant("MaxResets", 0, "cursor resets (resetCursor) in all"),
        Constant(
            "RolloverByTime",
            bool,
            False,
            "maximumRolloverTimeMs can pass: a data ledger that holds an entry rolls over however few it holds",
        ),
        Constant(
            "ZnodeFallback",
            str,
            NO_MESSAGES_AFTER,
            "when a failed cursor-ledger creation falls back to the znode: "
            + "; ".join(f"{name}, {doc}" for name, doc in ZNODE_FALLBACKS.items()),
            choices=tuple(ZNODE_FALLBACKS),
        ),
        Constant("Bug", str, "none", "a seeded bug, or none", choices=tuple(BUGS)),
    )

    MaxEntries: int
    MaxEntriesPerLedger: int
    BatchSize: int
    MetadataMaxEntriesPerLedger: int
    MaxCrashes: int
    MaxFaults: int
    MaxLedgerLoss: int
    MaxResets: int
    RolloverByTime: bool
    ZnodeFallback: str
    Bug: str

    def check_constants(self) -> None:
        for name in ("MaxEntries", "MaxCrashes", "MaxFaults", "MaxLedgerLoss", "MaxResets"):
            if getattr(self, name) < 0:
                raise ConstantError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("MaxEntriesPerLedger", "BatchSize", "MetadataMaxEntriesPerLedger"):
            if getattr(self, name) < 1:
                raise ConstantError(f"{name} must be at least 1, got {getattr(self, name)}")

    # -- operators ------------------------------------------------------------------
    @staticmethod
    def ids(s: CursorState) -> tuple[int, ...]:
        return _ledger_ids(s.ledgers)

    @staticmethod
    def counter(s: CursorState) -> Any:
        """Entries of a data ledger, deleted ones included."""
        counts = dict(s.ledgers) | dict(s.deleted)
        return lambda ledger: counts.get(ledger, 0)

    def entry_messages(self, ledger: int, e: int) -> frozenset[Message]:
        return frozenset((ledger, e, i) for i in range(self.BatchSize))

    def covered(
        self, s: CursorState, md: Position, ranges: frozenset[Position], batch: frozenset[Message]
    ) -> frozenset[Message]:
        """The messages a cursor state acknowledges: up to the mark-delete, the ranges, the batch indexes."""
        return _covered(s.ledgers, s.deleted, md, ranges, batch, self.BatchSize)

    def cursor_covers(self, s: CursorState) -> frozenset[Message]:
        return self.covered(s, s.mark_delete, s.ranges, s.batch)

    def snapshot(self, s: CursorState) -> PositionInfo:
        return PositionInfo(s.mark_delete, s.ranges, s.batch)

    def records_of(self, s: CursorState, ledger: int) -> tuple[PositionInfo, ...] | None:
        """The records of a readable cursor ledger, or None when it is gone."""
        return next((records for x, records in s.cursor_ledgers if x == ledger), None)

    def advanced(
        self, s: CursorState, md: Position, ranges: frozenset[Position], batch: frozenset[Message]
    ) -> tuple[Position, frozenset[Position], frozenset[Message]]:
        """The mark-delete jumps over the acknowledged entries that follow it (``setAcknowledgedPosition``); every
        individual ack at or before it is dropped, also one in a ledger trimmed since (``removeAtMost``)."""
        count = self.counter(s)
        while (nxt := next_position(self.ids(s), count, md)) is not None and nxt in ranges:
            md = nxt
        return md, frozenset(p for p in ranges if p > md), frozenset(m for m in batch if (m[0], m[1]) > md)

    def first_position(self, s: CursorState) -> Position:
        """``ManagedLedgerImpl.getFirstPosition``: before the first entry of the first ledger of the list."""
        return (s.ledgers[0][0], -1) if s.ledgers else NO_POSITION

    def falls_back_to_znode(self, s: CursorState) -> bool:
        """Does a failed cursor-ledger creation write the state to the znode (``ZnodeFallback``)?"""
        md = self.persisted(s).mark_delete
        return self.ZnodeFallback == ALWAYS or no_messages_after(self.ids(s), self.counter(s), md)

    def persisted(self, s: CursorState) -> PositionInfo:
        """What the next persist writes: a pending reset's record (its mark-delete, no individual acks; Pulsar
        4.0.7 keeps the acks from before the reset, which ``internalResetCursor`` clears only in its callback: the
        seeded bug ``reset_keeps_acks``), else the cursor's state."""
        if s.resetting == NO_POSITION:
            return self.snapshot(s)
        if self.Bug == "reset_keeps_acks":
            return PositionInfo(s.resetting, s.ranges, s.batch)
        return PositionInfo(s.resetting, frozenset(), frozenset())

    def persist_completes(self, s: CursorState, **changes: Any) -> CursorState:
        """A persist of ``persisted`` completed (internalMarkDelete's callback): the managed ledger holds its
        mark-delete for the cursor. A pending reset's record is now what a restore finds; the cursor takes it in
        memory next (CursorResetCompletes)."""
        if s.resetting == NO_POSITION:
            return evolve(s, durable=s.durable | self.cursor_covers(s), slowest_position=s.mark_delete, **changes)
        reset = self.covered(s, s.resetting, frozenset(), frozenset())
        return evolve(s, reset_unapplied=s.resetting, durable=reset, **changes)

    def reset_acked(self, s: CursorState, target: Position) -> frozenset[Message]:
        """What a reset to ``target`` leaves acknowledged: what precedes it, beside the messages of ledgers trimmed
        meanwhile, which no reset brings back."""
        listed = set(self.ids(s))
        before = self.covered(s, target, frozenset(), frozenset())
        return before | frozenset(m for m in s.acked if m[0] not in listed)

    @staticmethod
    def persist_fails(s: CursorState, **changes: Any) -> CursorState:
        """A persist failed: the mark-delete fails and the cursor, its state in memory, is dirty (isDirty); a
        pending reset fails with it (internalResetCursor's operationFailed)."""
        return evolve(s, dirty=True, resetting=NO_POSITION, **changes)

    @staticmethod
    def to_persist(s: CursorState) -> bool:
        """Something in memory for a persist to write: acknowledgements, or a reset. Nothing while a persisted
        reset waits to take effect (Pulsar 4.0.7 may write then: the seeded bug ack_persists_over_reset)."""
        return s.reset_unapplied == NO_POSITION and (s.dirty or s.resetting != NO_POSITION)

    @staticmethod
    def rolling_over(s: CursorState) -> bool:
        """A full cursor ledger's successor is being created (rolloverLedgerIfNeeded: SwitchingLedger at once, the
        creation once the persist that filled it completed), no new ledger written yet."""
        return s.status == SWITCHING and s.switching_to == NONE

    def creates(self, s: CursorState) -> bool:
        """Is a cursor ledger to be created: a mark-delete found no ledger (internalAsyncMarkDelete in NoLedger
        queues itself and starts the creation), or a rollover's creation is under way?"""
        return (s.status == NO_LEDGER and self.to_persist(s)) or self.rolling_over(s)

    def first_record(self, s: CursorState) -> PositionInfo:
        """A new cursor ledger's first record: Pulsar writes ``lastMarkDeleteEntry``, the last mark-delete
        submitted: a reset's once its record is written, else the state in memory (a reset still queued is not
        in it)."""
        return self.persisted(s) if s.reset_unapplied != NO_POSITION else self.snapshot(s)

    def creation_fails(self, s: CursorState, **changes: Any) -> CursorState:
        """createNewMetadataLedger's operationFailed: NoLedger, and the mark-deletes queued fail with the
        creation; with none queued (a rollover no ack followed), nothing else changes."""
        if not self.to_persist(s):
            return evolve(s, status=NO_LEDGER, **changes)
        return self.persist_fails(s, status=NO_LEDGER, **changes)

    def durable_covers(self, s: CursorState) -> frozenset[Message]:
        """The messages the durable state covers: the znode's state when it names no cursor ledger, else the last
        record of the ledger it names, or the znode's mark-delete when that ledger holds none."""
        info = s.znode
        records = self.records_of(s, info.cursors_ledger) if info.cursors_ledger != NONE else None
        if info.cursors_ledger == NONE:
            return self.covered(s, info.mark_delete, info.ranges, info.batch)
        if records:
            return self.covered(s, records[-1].mark_delete, records[-1].ranges, records[-1].batch)
        return self.covered(s, info.mark_delete, frozenset(), frozenset())

    def recovered_position(self, s: CursorState, md: Position) -> Position:
        """``recoveredCursor`` (``positions.recovered_position``) over the managed ledger's list."""
        return recovered_position(self.ids(s), self.counter(s), md)

    # -- Init ------------------------------------------------------------------------
    def init_states(self) -> Iterator[CursorState]:
        # The managed ledger's first ledger has id 0 (BookKeeper's first id); the subscription is created
        # at its start, with no cursor ledger yet: its znode says so (initialize).
        start = (0, -1)
        yield CursorState(
            ledgers=((0, 0),),
            deleted=frozenset(),
            next_id=1,
            cursor_ledgers=(),
            znode=CursorInfo(NONE, start, frozenset(), frozenset()),
            broker_up=True,
            crashes=0,
            status=NO_LEDGER,
            mark_delete=start,
            ranges=frozenset(),
            batch=frozenset(),
            cursor_ledger=NONE,
            switching_to=NONE,
            retired=frozenset(),
            dirty=False,
            slowest_position=start,
            resetting=NO_POSITION,
            resets=0,
            faults=0,
            lost=0,
            acked=frozenset(),
            durable=frozenset(),
            reset_unapplied=NO_POSITION,
        )

    # -- the managed ledger ----------------------------------------------------------
    @action()
    def EntryPublished(self, s: CursorState) -> CursorState | None:
        """A producer's entry is added to the last ledger of the list."""
        published = sum(count for _, count in (*s.ledgers, *s.deleted))
        if s.status not in ACTIVE or published >= self.MaxEntries or s.ledgers[-1][1] >= self.MaxEntriesPerLedger:
            return None
        ledger, count = s.ledgers[-1]
        return evolve(s, ledgers=(*s.ledgers[:-1], (ledger, count + 1)))

    @action()
    def LedgerRollsOver(self, s: CursorState) -> CursorState | None:
        """The last ledger is full: a new ledger is created and added to the list. ``currentLedgerIsFull``
        (ManagedLedgerImpl, Pulsar 4.0.7) counts its entries, its size and its age; with ``RolloverByTime`` the age
        may pass ``maximumRolloverTimeMs`` at any moment, and then a ledger that holds an entry is rolled over, by
        the timer (``rollCurrentLedgerIfFull``, ``currentLedgerEntries > 0``) or by the next add."""
        count = s.ledgers[-1][1]
        if s.status not in ACTIVE or (count < self.MaxEntriesPerLedger and not (self.RolloverByTime and count > 0)):
            return None
        return evolve(s, ledgers=(*s.ledgers, (s.next_id, 0)), next_id=s.next_id + 1)

    # -- the consumer ----------------------------------------------------------------
    @action(_messages)
    def ConsumerAcks(self, s: CursorState, ledger: int, entry: int, index: int) -> CursorState | None:
        """An individual ack of one message (asyncDelete); an entry whose batch is all acked counts whole."""
        if s.status not in ACTIVE or (ledger, entry, index) in self.cursor_covers(s):
            return None
        batch = s.batch | {(ledger, entry, index)}
        ranges = s.ranges
        whole = self.entry_messages(ledger, entry)
        if whole <= batch:
            batch, ranges = batch - whole, ranges | {(ledger, entry)}
        md, ranges, batch = self.advanced(s, s.mark_delete, ranges, batch)
        return evolve(
            s, mark_delete=md, ranges=ranges, batch=batch, dirty=True, acked=s.acked | {(ledger, entry, index)}
        )

    @action(reset_targets)
    def CursorResetStarts(self, s: CursorState, target: Position) -> CursorState | None:
        """ManagedCursorImpl.asyncResetCursor and internalResetCursor (Pulsar 4.0.7): the application moves the
        cursor to read from the entry after ``target``. The reset persists ``target`` as a mark-delete
        (internalAsyncMarkDelete) and changes the cursor in memory only when that persist completes; a second reset
        is refused while one is pending. Its record supersedes the acks not yet persisted: they are redone by the
        reset or, when its persist fails, dirty again. A reset asked for while a new cursor ledger is being switched
        to waits in pendingMarkDeleteOps: taken here as a reset after the switch."""
        if s.status not in (NO_LEDGER, OPEN) or s.resetting != NO_POSITION or s.resets >= self.MaxResets:
            return None
        return evolve(s, resetting=target, resets=s.resets + 1, dirty=False)

    @action()
    def CursorResetCompletes(self, s: CursorState) -> CursorState | None:
        """internalResetCursor's finalCallback, after the reset's persist: the mark-delete moves to its position,
        individual and batch acks are cleared (the acks taken since the reset began too), and the managed ledger
        holds the position for the cursor (onCursorReadPositionUpdated; Pulsar sets it a moment before, in the
        persist's own callback). What is acknowledged becomes what precedes the position, beside the messages of
        ledgers trimmed meanwhile (``reset_acked``). The application is told (resetComplete): a client sees this
        step."""
        if s.resetting == NO_POSITION or s.reset_unapplied == NO_POSITION:
            return None
        return evolve(
            s,
            mark_delete=s.resetting,
            ranges=frozenset(),
            batch=frozenset(),
            resetting=NO_POSITION,
            reset_unapplied=NO_POSITION,
            slowest_position=s.resetting,
            acked=self.reset_acked(s, s.resetting),
        )

    # -- persisting the cursor -------------------------------------------------------
    @action()
    def CursorCreatesLedger(self, s: CursorState) -> CursorState | None:
        """createNewMetadataLedger (Pulsar 4.0.7): create the cursor ledger and append a first record
        (``first_record``). The mark-deletes queued stay queued (``dirty``, a pending reset):
        flushPendingMarkDeletes writes them after the switch."""
        if not self.creates(s):
            return None
        new = s.next_id
        return evolve(
            s,
            next_id=new + 1,
            cursor_ledgers=(*s.cursor_ledgers, (new, (self.first_record(s),))),
            status=SWITCHING,
            switching_to=new,
        )

    @action()
    def CursorSwitchesLedger(self, s: CursorState) -> CursorState | None:
        """switchToNewLedger: the znode names the new ledger (mark-delete only); the old one is retired. No
        mark-delete completes here: the queued ones are written next, from Open (createNewMetadataLedger's
        operationComplete calls flushPendingMarkDeletes, whose internalMarkDelete completes them; Pulsar
        4.0.7)."""
        if s.status != SWITCHING or s.switching_to == NONE:
            return None
        first = (self.records_of(s, s.switching_to) or ())[-1]
        retired = s.retired | {s.cursor_ledger} if s.cursor_ledger != NONE else s.retired
        return evolve(
            s,
            znode=CursorInfo(s.switching_to, first.mark_delete, frozenset(), frozenset()),
            status=OPEN,
            cursor_ledger=s.switching_to,
            switching_to=NONE,
            retired=retired,
        )

    @action()
    def CursorLedgerCreationFails(self, s: CursorState) -> CursorState | None:
        """BookKeeper cannot create the cursor ledger (createNewMetadataLedger's operationFailed, Pulsar 4.0.7): the
        cursor is NoLedger and the pending mark-delete runs there (internalMarkDelete). Where it falls back
        (``falls_back_to_znode``) the state goes to the znode (persistPositionToMetaStore, #20935); elsewhere the
        mark-delete fails ("Switch new cursor ledger failed"): isDirty, the znode keeps what it held. A rollover's
        creation with no mark-delete queued only leaves the cursor NoLedger."""
        if not self.creates(s) or s.faults >= self.MaxFaults:
            return None
        if not self.to_persist(s) or not self.falls_back_to_znode(s):
            return self.creation_fails(s, faults=s.faults + 1)
        znode = s.znode
        if self.Bug != "no_store_fallback":
            record = self.persisted(s)
            znode = CursorInfo(NONE, record.mark_delete, record.ranges, record.batch)
        return self.persist_completes(s, znode=znode, status=NO_LEDGER, dirty=False, faults=s.faults + 1)

    @action()
    def CursorLedgerFirstWriteFails(self, s: CursorState) -> CursorState | None:
        """ManagedCursorImpl.createNewMetadataLedger (Pulsar 4.0.7): BookKeeper creates the cursor ledger, so its
        id is spent, but the append of its first record fails. persistPositionToLedger falls back to the znode
        (persistPositionToMetaStore) and that write fails too: the new ledger is deleted (deleteLedgerAsync, never
        read) and operationFailed, seeing a MetaStoreException, fails the pending mark-deletes: NoLedger, the state
        in memory only. Two failed calls, as CursorZnodeWriteFails. When the fallback write succeeds instead,
        Pulsar names the new ledger, which holds no record, in the znode: left out (docs/real-systems.md)."""
        if not self.creates(s) or s.faults + 2 > self.MaxFaults:
            return None
        return self.creation_fails(s, next_id=s.next_id + 1, faults=s.faults + 2)

    @action()
    def CursorPersistsToLedger(self, s: CursorState) -> CursorState | None:
        """persistPositionToLedger: append the state to the cursor ledger; a full ledger is then replaced. With the
        seeded bug ack_persists_over_reset, an ack during a pending reset appends the state from before the reset
        after the reset's record, as Pulsar 4.0.7 can (asyncDelete persists while resetCursorInProgress).
        apache/pulsar#26304 reports the same outcome on master: a mark-delete queued after a reset discards it."""
        if s.status != OPEN or not self.to_persist(s):
            return None
        records = self.records_of(s, s.cursor_ledger)
        if records is None:
            return None  # the ledger is gone: the append fails (CursorLedgerWriteFails)
        records = (*records, self.persisted(s))
        if self.Bug == "ack_persists_over_reset" and s.resetting != NO_POSITION and s.dirty:
            records = (*records, self.snapshot(s))
        ledgers = tuple((x, records if x == s.cursor_ledger else r) for x, r in s.cursor_ledgers)
        # shouldCloseLedger (ManagedCursorImpl, Pulsar 4.0.7): lh.getLastAddConfirmed() >= MetadataMaxEntriesPerLedger,
        # so a ledger holds M+1 records. Its other condition, a rollover timeout, is not modelled.
        full = len(records) - 1 >= self.MetadataMaxEntriesPerLedger
        # rolloverLedgerIfNeeded: SwitchingLedger, and the successor's creation starts once this persist completed.
        return self.persist_completes(s, cursor_ledgers=ledgers, status=SWITCHING if full else OPEN, dirty=False)

    @action()
    def CursorLedgerWriteFails(self, s: CursorState) -> CursorState | None:
        """An append to the cursor ledger fails: the state goes to the znode instead (persistPositionToMetaStore)."""
        if s.status != OPEN or not self.to_persist(s):
            return None
        gone = self.records_of(s, s.cursor_ledger) is None  # a lost ledger fails every append, no fault needed
        if not gone and s.faults >= self.MaxFaults:
            return None
        faults = s.faults if gone else s.faults + 1
        record = self.persisted(s)
        return self.persist_completes(
            s,
            znode=CursorInfo(NONE, record.mark_delete, record.ranges, record.batch),
            status=NO_LEDGER,
            dirty=False,
            faults=faults,
        )

    @action()
    def CursorLedgerSwitchFails(self, s: CursorState) -> CursorState | None:
        """ManagedCursorImpl.switchToNewLedger (Pulsar 4.0.7): the metadata-store write that names the new ledger
        fails. The new ledger is deleted (deleteLedgerAsync), the cursor keeps the ledger it held, and
        createNewMetadataLedger's operationFailed, seeing a MetaStoreException, sets NoLedger and fails the
        pending mark-deletes: the state stays in memory only, to persist again (isDirty)."""
        if s.status != SWITCHING or s.switching_to == NONE or s.faults >= self.MaxFaults:
            return None
        return self.creation_fails(
            s,
            cursor_ledgers=tuple(x for x in s.cursor_ledgers if x[0] != s.switching_to),
            switching_to=NONE,
            faults=s.faults + 1,
        )

    def znode_write_failure_cost(self, s: CursorState) -> int:
        """The failed writes of a persist whose fallback to the znode fails: the BookKeeper call (none when the
        cursor ledger is gone, which fails every append by itself) and the metadata-store write."""
        gone = s.status == OPEN and self.records_of(s, s.cursor_ledger) is None
        return 1 if gone else 2

    @action()
    def CursorZnodeWriteFails(self, s: CursorState) -> CursorState | None:
        """ManagedCursorImpl.persistPositionToMetaStore (Pulsar 4.0.7): the cursor ledger cannot be created
        (internalMarkDelete in NoLedger) or an append to it fails (persistPositionToLedger), and the fallback
        write of the state to the znode fails too. The mark-delete fails (internalMarkDelete's operationFailed:
        isDirty = true, persistentMarkDeletePosition unchanged): the znode keeps what it held, the state stays
        in memory only, and the cursor is NoLedger."""
        if s.status not in (NO_LEDGER, OPEN) or not self.to_persist(s):
            return None
        if s.status == NO_LEDGER and not self.falls_back_to_znode(s):
            return None  # no znode write to fail: CursorLedgerCreationFails fails the mark-delete
        cost = self.znode_write_failure_cost(s)
        if s.faults + cost > self.MaxFaults:
            return None
        return self.persist_fails(s, status=NO_LEDGER, faults=s.faults + cost)

    @action(_retired)
    def CursorDeletesOldLedger(self, s: CursorState, ledger: int) -> CursorState | None:
        """A cursor ledger no longer named by the znode is deleted."""
        if not s.broker_up or ledger not in s.retired:
            return None
        return evolve(
            s, cursor_ledgers=tuple(x for x in s.cursor_ledgers if x[0] != ledger), retired=s.retired - {ledger}
        )

    @action()
    def CursorCloses(self, s: CursorState) -> CursorState | None:
        """A clean close: the znode gets the whole state with cursorsLedgerId = -1; the cursor ledger is retired.
        persistPositionWhenClosing tells the managed ledger nothing: its position of the cursor stays. Not while a
        reset is pending (docs/real-systems.md)."""
        if s.status not in (NO_LEDGER, OPEN) or s.resetting != NO_POSITION:
            return None
        retired = s.retired | {s.cursor_ledger} if s.cursor_ledger != NONE else s.retired
        return evolve(
            s,
            znode=CursorInfo(NONE, s.mark_delete, s.ranges, s.batch),
            status=CLOSED,
            cursor_ledger=NONE,
            retired=retired,
            dirty=False,
            durable=s.durable | self.cursor_covers(s),
        )

    # -- the broker's crash and the restore -----------------------------------------------
    @action()
    def BrokerCrashes(self, s: CursorState) -> CursorState | None:
        """The broker dies (or stops after a clean close): the cursor's memory is gone, the stores stay."""
        if not s.broker_up or s.crashes >= self.MaxCrashes:
            return None
        return evolve(
            s,
            broker_up=False,
            crashes=s.crashes + 1,
            status=UNINITIALIZED,
            mark_delete=NO_POSITION,
            ranges=frozenset(),
            batch=frozenset(),
            cursor_ledger=NONE,
            switching_to=NONE,
            retired=frozenset(),
            dirty=False,
            slowest_position=NO_POSITION,
            resetting=NO_POSITION,
        )

    @action()
    def ManagedLedgerOpens(self, s: CursorState) -> CursorState | None:
        """The broker opens the managed ledger again: an empty last ledger is dropped and a new one created."""
        if s.broker_up:
            return None
        ledgers, deleted = s.ledgers, s.deleted
        if ledgers[-1][1] == 0:
            ledgers, deleted = ledgers[:-1], deleted | {ledgers[-1]}
        return evolve(s, ledgers=(*ledgers, (s.next_id, 0)), deleted=deleted, next_id=s.next_id + 1, broker_up=True)

    @action()
    def CursorRecovers(self, s: CursorState) -> CursorState | None:
        """recover: from the znode when cursorsLedgerId = -1, else from the cursor ledger's last record;
        when that ledger cannot be read, roll back to the znode's mark-delete and persist it. Then
        recoveredCursor; the managed ledger holds the restored mark-delete for the cursor (addCursor,
        ManagedLedgerImpl, Pulsar 4.0.7)."""
        if not s.broker_up or s.status != UNINITIALIZED:
            return None
        info = s.znode
        records = self.records_of(s, info.cursors_ledger) if info.cursors_ledger != NONE else None
        if info.cursors_ledger == NONE and self.Bug != "restore_ignores_no_ledger":
            md, ranges, batch, znode, holds = info.mark_delete, info.ranges, info.batch, info, NONE
        elif records:
            last = records[-1]
            md, ranges, batch, znode, holds = last.mark_delete, last.ranges, last.batch, info, info.cursors_ledger
        else:
            # getRollbackPosition: the znode's mark-delete, raised to the first position; no individual acks.
            md = max(info.mark_delete, self.first_position(s))
            ranges, batch, holds = frozenset(), frozenset(), NONE
            znode = CursorInfo(NONE, md, frozenset(), frozenset())
        if self.Bug == "restore_skips_unacked" and ranges:
            md = max(md, *ranges)
        md = self.recovered_position(s, md)
        ranges = frozenset(p for p in ranges if p > md)
        batch = frozenset(m for m in batch if (m[0], m[1]) > md)
        # A reset persisted but not taken before the crash is taken now: the restore finds its record.
        unapplied = s.reset_unapplied
        return evolve(
            s,
            znode=znode,
            status=NO_LEDGER,
            mark_delete=md,
            ranges=ranges,
            batch=batch,
            cursor_ledger=holds,
            slowest_position=md,
            acked=s.acked if unapplied == NO_POSITION else self.reset_acked(s, unapplied),
            reset_unapplied=NO_POSITION,
        )

    @action()
    def CursorSkipsConsumedLedger(self, s: CursorState) -> CursorState | None:
        """ManagedLedgerImpl.maybeUpdateCursorBeforeTrimmingConsumedLedger (Pulsar 4.0.7, at the open and after a
        rollover; here at any time): when the cursor's mark-delete in memory is at its ledger's last entry and a
        later ledger is listed, the managed ledger's position of the cursor moves to (next ledger, -1)
        (onCursorMarkDeletePositionUpdated). The cursor's own mark-delete stays, and nothing is persisted:
        trimming may then delete the ledger the cursor's durable state points into (the restore keeps such a
        mark-delete: recoveredCursor moves only (l, -1))."""
        if s.status not in ACTIVE:
            return None
        ledger, entry = s.mark_delete
        ids = self.ids(s)
        after = next_ledger(ids, ledger)
        if ledger not in ids or after is None or entry == -1:
            return None
        if entry + 1 < self.counter(s)(ledger) and self.Bug != "skip_unconsumed_ledger":
            return None
        if s.slowest_position == (after, -1):
            return None
        return evolve(s, slowest_position=(after, -1))

    def slowest_reader_ledger(self, s: CursorState) -> int:
        """internalTrimLedgers: the ledger before which the ledgers of the list may go (``positions.py``)."""
        return slowest_reader_ledger(self.ids(s), self.counter(s), s.slowest_position)

    @action()
    def TrimConsumedLedgers(self, s: CursorState) -> CursorState | None:
        """internalTrimLedgers: the ledgers before the slowest reader's ledger are deleted, never the current one.
        Trimming by the cursor's mark-delete in memory instead would lose no unacknowledged message either (that
        mark-delete covers only acknowledged ones): no invariant here tells the two apart."""
        if s.status not in ACTIVE:
            return None
        if self.Bug == "trim_deletes_needed_ledger":
            slowest = s.slowest_position[0] + 1
        else:
            slowest = self.slowest_reader_ledger(s)
        last = s.ledgers[-1][0]
        gone = frozenset(x for x in s.ledgers if x[0] < slowest and x[0] != last)
        if not gone:
            return None
        return evolve(s, ledgers=tuple(x for x in s.ledgers if x not in gone), deleted=s.deleted | gone)

    # -- faults of the environment -----------------------------------------------------
    @action(_named_ledger)
    def CursorLedgerLost(self, s: CursorState, ledger: int) -> CursorState | None:
        """BookKeeper loses the cursor ledger the znode names: it can no longer be read. Not after a reset: the
        rollback would take the znode's mark-delete (getRollbackPosition), which a reset back leaves ahead of the
        cursor, and skip what the reset made unacknowledged (docs/real-systems.md)."""
        if s.lost >= self.MaxLedgerLoss or s.resets > 0 or ledger != s.znode.cursors_ledger:
            return None
        return evolve(
            s,
            cursor_ledgers=tuple(x for x in s.cursor_ledgers if x[0] != ledger),
            retired=s.retired - {ledger},
            lost=s.lost + 1,
        )

    # -- invariants ------------------------------------------------------------------
    @invariant
    def TypeOK(self, s: CursorState) -> str | None:
        """Every variable holds a value of its type, within the model's bounds."""
        ids = self.ids(s)
        if not ids or list(ids) != sorted(set(ids)) or any(x >= s.next_id for x in ids):
            return f"the ledger list {list(ids)} is not increasing, or names ledgers not yet created"
        if s.status not in (UNINITIALIZED, NO_LEDGER, OPEN, SWITCHING, CLOSED):
            return f"the cursor's state is {s.status!r}"
        if s.crashes > self.MaxCrashes or s.faults > self.MaxFaults or s.lost > self.MaxLedgerLoss:
            return f"{s.crashes} crashes, {s.faults} faults and {s.lost} losses exceed the bounds"
        if s.resets > self.MaxResets:
            return f"{s.resets} resets exceed the bound {self.MaxResets}"
        if s.resetting != NO_POSITION and s.status not in ACTIVE:
            return f"a reset to {ledger_entry(s.resetting)} is pending while the cursor is {s.status}"
        if s.switching_to != NONE and s.status != SWITCHING:
            return f"cursor ledger {s.switching_to} is written but not switched to, while the cursor is {s.status}"
        if s.reset_unapplied not in (NO_POSITION, s.resetting) and s.status != UNINITIALIZED:
            return f"the reset to {ledger_entry(s.reset_unapplied)} is persisted, but not the one pending"
        if any(p <= s.mark_delete for p in s.ranges) or any((m[0], m[1]) <= s.mark_delete for m in s.batch):
            return f"individual acks {sorted(s.ranges)} or batch acks at or before the mark-delete {s.mark_delete}"
        return None

    @invariant
    def CursorSkipsNoUnackedMessage(self, s: CursorState) -> str | None:
        """The cursor never covers a message the consumer did not acknowledge, also after a restore; after a reset,
        what the reset left acknowledged."""
        if s.status == UNINITIALIZED:
            return None
        skipped = sorted(self.cursor_covers(s) - s.acked)
        if skipped:
            ledger, entry, index = skipped[0]
            return (
                f"message {ledger}:{entry} (batch index {index}) was never acknowledged, but the cursor "
                f"(mark-delete {ledger_entry(s.mark_delete)}, acked {_entries(s.ranges)}) covers it: it is skipped"
            )
        return None

    @invariant
    def OnlyUnpersistedAcksRedelivered(self, s: CursorState) -> str | None:
        """Every acknowledgement a completed persist covered is kept by the cursor, also after a restore
        (unless BookKeeper lost the cursor ledger); by the reset the cursor is taking, when its record is
        persisted."""
        if s.status == UNINITIALIZED or s.lost > 0:
            return None
        if s.reset_unapplied != NO_POSITION:
            keeps = self.covered(s, s.reset_unapplied, frozenset(), frozenset())
        else:
            keeps = self.cursor_covers(s)
        forgotten = sorted(s.durable - keeps)
        if forgotten:
            ledger, entry, index = forgotten[0]
            return (
                f"the ack of message {ledger}:{entry} (batch index {index}) was persisted, but the cursor "
                f"(mark-delete {ledger_entry(s.mark_delete)}, acked {_entries(s.ranges)}) would deliver it again"
            )
        return None

    @invariant
    def TrimPositionBehindCursor(self, s: CursorState) -> str | None:
        """The managed ledger's position of the cursor covers no message the cursor does not: trimming never
        passes what the cursor acknowledged."""
        if s.status not in ACTIVE:
            return None
        ahead = sorted(self.covered(s, s.slowest_position, frozenset(), frozenset()) - self.cursor_covers(s))
        if ahead:
            ledger, entry, index = ahead[0]
            return (
                f"the managed ledger trims up to {ledger_entry(s.slowest_position)}, past message {ledger}:{entry} "
                f"(batch index {index}), which the cursor (mark-delete {ledger_entry(s.mark_delete)}) does not cover"
            )
        return None

    @invariant
    def TrimKeepsUnconsumedEntries(self, s: CursorState) -> str | None:
        """No trimmed ledger holds a message the consumer did not acknowledge."""
        for ledger, count in sorted(s.deleted):
            for e in range(count):
                missing = sorted(self.entry_messages(ledger, e) - s.acked)
                if missing:
                    return f"ledger {ledger} was deleted, but its message {ledger}:{e} was never acknowledged"
        return None

    @action_property
    def MarkDeleteNeverMovesBackwards(self, s: CursorState, t: CursorState) -> str | None:
        """While the cursor is active, its mark-delete position only moves forward, but where a reset takes effect."""
        reset_done = s.resetting != NO_POSITION and t.resetting == NO_POSITION
        if s.status in ACTIVE and t.status in ACTIVE and not reset_done and t.mark_delete < s.mark_delete:
            return f"the mark-delete moved back from {ledger_entry(s.mark_delete)} to {ledger_entry(t.mark_delete)}"
        return None

    # -- sometimes: the invariants above are not vacuous ----------------------------------
    @reachable
    def RestoredWithIndividualAcks(self, s: CursorState) -> bool:
        """After a crash, the restored cursor holds individual acks."""
        return s.crashes > 0 and s.status in ACTIVE and bool(s.ranges)

    @reachable
    def RestoredFromCursorLedger(self, s: CursorState) -> bool:
        """After a crash, the cursor was restored from its ledger's last record."""
        return s.crashes > 0 and s.status == NO_LEDGER and s.cursor_ledger != NONE

    @reachable
    def CursorResetToNextLedger(self, s: CursorState) -> bool:
        """The managed ledger moved its position of the cursor past a consumed ledger to (next ledger, -1), as in
        seed 003, and the cursor's mark-delete stayed at the last entry."""
        return s.status in ACTIVE and s.slowest_position[1] == -1 and s.mark_delete < s.slowest_position

    @reachable
    def TrimmedPastDurableState(self, s: CursorState) -> bool:
        """A trimmed ledger holds a message the cursor's durable state does not cover: the skip read the
        mark-delete in memory, not persisted (Pulsar 4.0.7)."""
        durable = self.durable_covers(s)
        return any(not self.entry_messages(x, e) <= durable for x, n in s.deleted for e in range(n))

    @reachable
    def RestoredIntoTrimmedLedger(self, s: CursorState) -> bool:
        """After a crash, the restored mark-delete lies in a ledger that was trimmed (Pulsar 4.0.7 trims by the
        skip before the cursor persists past that ledger; recoveredCursor keeps the position)."""
        return s.crashes > 0 and s.status in ACTIVE and s.mark_delete[0] not in self.ids(s)

    @reachable
    def AckedWhileResetPending(self, s: CursorState) -> bool:
        """The consumer acknowledged a message while a reset was pending: where an ack can undo the reset."""
        return s.resetting != NO_POSITION and s.dirty

    @reachable
    def RestoredAfterReset(self, s: CursorState) -> bool:
        """The broker crashed after a reset and the cursor was restored."""
        return s.crashes > 0 and s.resets > 0 and s.status in ACTIVE

    @reachable
    def ConsumedLedgerTrimmed(self, s: CursorState) -> bool:
        """A ledger that held entries was trimmed."""
        return any(count > 0 for _, count in s.deleted)

    @reachable
    def AckRedeliveredAfterRestore(self, s: CursorState) -> bool:
        """A restore forgot an acknowledgement that was never persisted: the message will come again."""
        return s.crashes > 0 and s.status in ACTIVE and bool(s.acked - self.cursor_covers(s))


def ledger_entry(pos: Position) -> str:
    return f"{pos[0]}:{pos[1]}"


def _entries(positions: Iterable[Position]) -> str:
    return "{" + ", ".join(ledger_entry(p) for p in sorted(positions)) + "}"
