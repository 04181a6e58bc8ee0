"""A Pulsar managed ledger: the ledger list, rollover, publish with dedup, broker crash and reopen, trimming.

The twin of ``managed_ledger.tla``: the same variables, actions and invariants,
by the same names; the explorer and TLC reach the same states
under the models of ``managed_ledger_models.py`` (tests/test_parity.py).

What is modelled (pulsar ``managed-ledger`` module, ``ManagedLedgerImpl``, and
the broker's ``MessageDeduplication``; BRIEF section 4, seeds 002 and 003):

- one topic partition: a managed ledger whose ledger list
  (``ManagedLedgerInfo.ledgerInfo``) lives in the metadata store. Only the
  last ledger of the list is written to (``WritesGoToLastLedger``); ledger ids
  come from one counter, so a new ledger's id is above every other;
- producers ``1 .. NumProducers``, each sending batches with sequence ids
  ``0 .. MaxMessages-1`` in order over one connection (FIFO); a batch of
  ``BatchSize`` messages is one entry. On reconnecting after a broker crash,
  after its connection dropped (``ConnectionDrops``, at most
  ``MaxDisconnects`` times) or was closed on a failed send, a producer sends
  again every batch not yet acknowledged, in order;
- the broker's dedup check (``MessageDeduplication.isDuplicate``), where
  ``Dedup`` (``brokerDeduplicationEnabled``) is on: a batch whose sequence id
  is at most the highest one persisted for that producer is a duplicate,
  answered without being written; one above that and at most the highest
  pushed is ``Unknown``: ``PersistentTopic`` fails the send, and the client
  closes its connection (``ClientCnx.handleSendError``) and sends again. With
  ``Dedup`` off every batch is written, so one sent again after a crash or a
  dropped connection can be written twice (``DedupPersistsNoDuplicate`` holds
  only with ``Dedup`` on);
- the add to BookKeeper (``OpAddEntry``): adds complete in order; the producer
  then gets the message ids ``ledgerId:entryId:partition:batchIndex``;
- rollover (``currentLedgerIsFull``, seed 002): the current ledger is full when
  it holds ``MaxEntriesPerLedger`` entries, or ``MaxSizePerLedger`` messages,
  or is ``MaximumRolloverTime`` ticks old; with ``MinimumRolloverTime > 0`` it
  must also be older than that. A limit of 0 is reached at once, as in
  Pulsar's ``ManagedLedgerConfig``, whose defaults (100 MB, 4 hours) lie
  beyond the model's batches and ``Ticks``. Pulsar judges it when an add
  is sent (``internalAsyncAddEntry``), counting that add and those in flight:
  the add that fills the ledger is its last (``closeWhenDone``); once it
  completes the ledger is closed and the next created (``ClosingLedger``,
  ``CreatingLedger``), and the adds that arrive meanwhile are queued
  (``queued``), then sent to the new ledger up to the one that fills it
  (``updateLedgersIdsComplete``). A timer rolls a ledger full by age that
  holds an entry (``rollCurrentLedgerIfFull``);
- creating the next ledger failing (``LedgerCreationFails``, at most
  ``MaxCreateFailures`` times; ``createComplete`` with an error): the ledger
  to close is closed and stays the last of the list, none is open
  (``ClosedLedger``), the adds queued for the new one fail, so their
  producers' connections close, the pushed ids go back to the persisted ones
  (``resetHighestSequenceIdPushed``), and the next add creates a ledger;
- a broker crash: the broker's memory is lost; of the adds in flight, a
  prefix may have reached the bookies without the broker learning it;
- opening the managed ledger after the crash (``ManagedLedgerImpl.initialize``):
  recover-open the last ledger (it holds what reached the bookies), drop it
  from the list if it is empty, create a new ledger, and rebuild the dedup
  state from the entries written (standing for Pulsar's dedup cursor snapshot
  and the replay of the entries after it);
- another broker taking the topic over while the old one still runs
  (``TopicMovesToAnotherBroker``, at most ``MaxTakeovers`` times): to the
  producers the old one is gone as in a crash, and ``ManagedLedgerOpens`` is
  the new owner's open; the old broker keeps the ledger list it read and its
  version, and when its current ledger is closed under it, it rolls over
  (``OldBrokerRollsOver``): it writes its list with a new ledger by
  compare-and-set, which fails once the new owner has written the list
  (``BadVersionException``, ``handleBadVersion``: the old managed ledger is
  fenced, its new ledger deleted);
- ``lastConfirmedEntry`` (``last_confirmed``), the last entry readers are
  shown: each add sets it; reopening sets it to the new ledger's ``(l, -1)``
  stepped back to the last entry of the latest ledger of the list that holds
  one (``initializeBookKeeper``), and a rollover leaves it be;
- durable cursors ``1 .. NumCursors``, reduced to two mark-delete positions,
  as ``ManagedCursorImpl`` keeps them (Pulsar 4.0.7): the one in the broker's
  memory (``markDeletePosition``, ``mark_delete``), which a consumer's
  acknowledgement moves forward one entry at a time, and the one its durable
  state holds (``persistentMarkDeletePosition``, ``persistent_mark_delete``),
  which a completed persist sets to the one in memory (``internalMarkDelete``'s
  callback; the cursor spec, ``cursor.py``, models the cursor ledger and the
  znode that hold it, and how their writes fail). A crash loses the
  acknowledgements not persisted: reopening restores the cursor from the
  durable one as ``recoveredCursor`` does: a position ``(l, -1)`` of the empty
  ledger just dropped moves to the next ledger, and none passes
  ``lastConfirmedEntry``, so it may step back over no entry
  (``MarkDeleteNeverMovesBackwards`` allows that: the same entries consumed).
  ``acknowledged`` is each consumer's own record of the furthest entry it
  acknowledged, which a crash does not take back: the promises are said of it;
- trimming by the position the managed ledger holds for each cursor
  (``slowest_position``, its entry in ``ManagedCursorContainer``; Pulsar
  4.0.7), as the cursor spec has it: each completed persist sets it to the
  persisted mark-delete (``onCursorMarkDeletePositionUpdated``), and so does
  the reopen (``addCursor``); ``maybeUpdateCursorBeforeTrimmingConsumedLedger``
  holds a cursor whose mark-delete in memory is the last entry of a ledger at
  ``(next ledger, -1)``, persisted or not, leaving its mark-delete where it
  is; then
  ``internalTrimLedgers`` deletes the ledgers before the slowest reader's
  ledger ``x``, and ``x`` too when that position is at the last entry of
  ``x`` and ``x`` is not the last ledger, but never the last ledger of the
  list (``currentLedger``), also while none is open after a failed creation.

Positions are ``(ledger id, entry id)`` (``positions.py``). ``entries`` holds
every ledger ever created, deleted ones too: their entries are the history
the invariants speak of.

What is left out, and why that is sound here:

- payloads and sizes: an entry's content is its ``(producer, sequence id)``,
  and its size is its number of messages (``MaxSizePerLedger`` counts messages);
- time: ``ClockTicks`` ages the current ledger, one tick at a time, up to
  ``Ticks`` and only as far as the rollover rules can tell ages apart;
- the replies lost with a dropped connection: the acks of the adds in
  flight still reach the producer (it would learn them as duplicates of
  what it sends again);
- what else an old broker does after a takeover: its adds in flight end as
  in a crash (none acknowledged, though BookKeeper may have completed some
  before the new owner fenced the ledger; their entries are in the ledger
  either way), and its one further write of the list is the rollover (a
  trim writes by the same compare-and-set, and fails the same way);
- retention, offloading, the ledger-creation timeout and the fencing of the
  previous owner's last ledger (recover-open in BookKeeper; ``ledger.py``);
- the dedup cursor: trimming here never asks for it. Its snapshot is assumed
  to cover every entry trimmed (Pulsar's dedup cursor is durable, so
  trimming stops at it).

Seeded bugs, chosen by the constant ``Bug``, make the spec wrong on purpose so
that tests can show the checkers catch each one.
"""

from __future__ import annotations

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

__all__ = ["BUGS", "ManagedLedgerSpec", "ManagedLedgerState", "MessageId"]

BUGS = {
    "none": "the managed ledger as Pulsar implements it",
    "trim_deletes_needed_ledger": "trimming also deletes the ledger the slowest cursor's mark-delete points into",
    "dedup_forgets_on_reopen": "reopening the managed ledger does not rebuild the dedup state from the entries",
    "unknown_answered_as_duplicate": "a batch pushed but not yet persisted, sent again, is answered as a duplicate",
    "failed_creation_acks_queued": "the adds queued for a ledger whose creation failed are answered as written",
    "closing_ledger_takes_adds": "a ledger whose last add is sent still takes the adds that arrive while it closes",
    "blind_ledger_list_write": (
        "the ledger list is written without compare-and-set: a broker that lost the topic overwrites the list of "
        "the broker that took it over"
    ),
    "reopen_confirms_new_ledger": (
        "reopening the managed ledger sets lastConfirmedEntry to the new ledger's (l, -1) without stepping back "
        "to the last entry written"
    ),
    "persists_read_position": (
        "the cursor persists the position it reads next instead of its mark-delete: a restore skips the entry "
        "read and not acknowledged"
    ),
}

NO_LEDGER = -1  # the broker writes to no ledger: it is down, or between two ledgers
#: A message id ``(ledgerId, entryId, partitionIndex, batchIndex)``.
MessageId = tuple[int, int, int, int]
NO_MESSAGE_ID: MessageId = (-1, -1, -1, -1)


@attrs.frozen(cache_hash=True)
class ManagedLedgerState:
    # -- the metadata store and the bookies
    ledgers: tuple[int, ...]  # the ledger list in ManagedLedgerInfo, increasing ids
    entries: tuple[tuple[tuple[int, int], ...], ...]  # ledger l -> its entries (producer, sequence id); all ledgers
    deleted: frozenset[int]  # ledgers taken out of the list and deleted
    persistent_mark_delete: tuple[Position, ...]  # cursor c -> the mark-delete its durable state holds
    # -- the broker
    broker_up: bool
    current: int  # the ledger being written, or -1 (NO_LEDGER)
    age: int  # ticks since the current ledger was created
    pending: tuple[tuple[int, int], ...]  # adds sent to BookKeeper and not yet completed, in order
    closing: bool  # ClosingLedger: the add that filled the current ledger is sent; it takes no other
    queued: tuple[tuple[int, int], ...]  # adds that arrived while the ledger closes, for the next (pendingAddEntries)
    highest_pushed: tuple[int, ...]  # producer -> highest sequence id accepted (highestSequencedPushed)
    highest_persisted: tuple[int, ...]  # producer -> highest sequence id written (highestSequencedPersisted)
    last_confirmed: Position  # lastConfirmedEntry: the last entry readers are shown; NO_POSITION while down
    slowest_position: tuple[Position, ...]  # cursor c -> the position trimming goes by (ManagedCursorContainer)
    mark_delete: tuple[Position, ...]  # cursor c -> its mark-delete in memory; kept while down, until the reopen
    crashes: int  # broker crashes so far (at most MaxCrashes)
    create_failures: int  # ledger creations failed so far (at most MaxCreateFailures)
    # -- producers
    sent: tuple[int, ...]  # producer -> sequence ids sent so far (the next one to send)
    acked: tuple[int, ...]  # producer -> highest sequence id acknowledged (acks come in order)
    net: tuple[tuple[int, ...], ...]  # producer -> sequence ids in flight to the broker, in order
    reconnecting: tuple[bool, ...]  # producer -> its connection closed: it sends every batch not acked again
    disconnects: int  # producer connections dropped so far (at most MaxDisconnects)
    last_id: MessageId  # the last message id handed to a producer
    # -- consumers
    acknowledged: tuple[Position, ...]  # cursor c -> the furthest entry its consumer acknowledged (a crash keeps it)
    # -- a broker that lost the topic to another and still runs
    takeovers: int = 0  # takeovers so far (at most MaxTakeovers)
    old_broker: tuple[int, ...] = ()  # the ledger list that broker holds; () when there is none
    old_broker_stale: bool = False  # the list in the store was written since that broker read it (its version is old)


# -- parameter generators: the \E in front of each TLA+ action ---------------------------
def _each_producer(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> Iterable[tuple[int]]:
    return ((p,) for p in spec.producers)


def _each_cursor(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> Iterable[tuple[int]]:
    return ((c,) for c in spec.cursors)


def _crash_cuts(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> Iterable[tuple[int]]:
    """How many of the adds in flight reached the bookies before the crash."""
    return ((k,) for k in range(len(s.pending) + 1))


class ManagedLedgerSpec(Spec[ManagedLedgerState]):
    """The managed ledger of one topic partition; see the module docstring."""

    name = "managed_ledger"
    state_type = ManagedLedgerState
    constants = (
        int_constant("NumProducers", 1, "producers publishing to the topic"),
        int_constant("MaxMessages", 3, "batches each producer sends (sequence ids 0 .. MaxMessages-1)"),
        int_constant("BatchSize", 1, "messages in a batch, one entry; 1: not batched (batch index -1)"),
        Constant(
            "Partitioned", bool, False, "the topic is partition 0 of a partitioned topic; else partition index -1"
        ),
        int_constant(
            "MaxEntriesPerLedger", 2, "maxEntriesPerLedger: entries after which a ledger is full (0: at once)"
        ),
        int_constant("MaxSizePerLedger", 100, "messages after which a ledger is full (maxSizePerLedgerMb; 0: at once)"),
        int_constant(
            "MaximumRolloverTime", 240, "ticks after which a ledger is full (maximumRolloverTimeMs; 0: at once)"
        ),
        int_constant("MinimumRolloverTime", 0, "ticks a ledger must be older than to roll over; 0: none"),
        int_constant("Ticks", 0, "how old the model lets a ledger grow: later ticks are not modelled"),
        int_constant("NumCursors", 1, "durable cursors (subscriptions)"),
        int_constant("MaxCrashes", 1, "broker crashes in all"),
        Constant("Dedup", bool, True, "brokerDeduplicationEnabled for the topic"),
        int_constant("MaxDisconnects", 0, "producer connections dropped in all"),
        int_constant("MaxCreateFailures", 0, "ledger creations that fail, in all"),
        int_constant("MaxTakeovers", 0, "times another broker takes the topic over while the old one still runs"),
        Constant("Bug", str, "none", "a seeded bug, or none", choices=tuple(BUGS)),
    )

    NumProducers: int
    MaxMessages: int
    BatchSize: int
    Partitioned: bool
    MaxEntriesPerLedger: int
    MaxSizePerLedger: int
    MaximumRolloverTime: int
    MinimumRolloverTime: int
    Ticks: int
    NumCursors: int
    MaxCrashes: int
    Dedup: bool
    MaxDisconnects: int
    MaxCreateFailures: int
    MaxTakeovers: int
    Bug: str

    def check_constants(self) -> None:
        for name in (
            "NumProducers",
            "MaxMessages",
            "NumCursors",
            "MaxCrashes",
            "MaxEntriesPerLedger",
            "MaxDisconnects",
            "MaxCreateFailures",
            "MaxTakeovers",
        ):
            if getattr(self, name) < 0:
                raise ConstantError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("MaxSizePerLedger", "MaximumRolloverTime", "MinimumRolloverTime", "Ticks"):
            if getattr(self, name) < 0:
                raise ConstantError(f"{name} must not be negative (0 is Pulsar's 0), got {getattr(self, name)}")
        if self.MaximumRolloverTime < self.MinimumRolloverTime:
            raise ConstantError(
                f"MaximumRolloverTime={self.MaximumRolloverTime} is below MinimumRolloverTime="
                f"{self.MinimumRolloverTime} (ManagedLedgerConfig.setMaximumRolloverTime refuses it)"
            )
        if self.BatchSize < 1:
            raise ConstantError(f"BatchSize must be at least 1, got {self.BatchSize}")
        self.partition = 0 if self.Partitioned else -1  # the partition index in message ids
        self.producers = tuple(range(1, self.NumProducers + 1))
        self.cursors = tuple(range(1, self.NumCursors + 1))
        # Ages beyond this one are alike for the rollover rules: the clock stops there.
        # The clock stops at Ticks, or earlier where later ages are alike for the rollover rules.
        alike = self.MaximumRolloverTime
        if self.MinimumRolloverTime > 0:
            alike = max(self.MaximumRolloverTime, self.MinimumRolloverTime + 1)
        self.max_age = min(self.Ticks, alike)

    # -- operators ------------------------------------------------------------------
    def ledger_is_full(self, entries: int, age: int) -> bool:
        """``currentLedgerIsFull`` (ManagedLedgerImpl, Pulsar 4.0.7): a space or time limit is reached, and the
        ledger is old enough. A limit of 0 is reached at once."""
        space = entries >= self.MaxEntriesPerLedger or entries * self.BatchSize >= self.MaxSizePerLedger
        time = age >= self.MaximumRolloverTime
        if not (space or time):
            return False
        return self.MinimumRolloverTime == 0 or age > self.MinimumRolloverTime

    def written(self, s: ManagedLedgerState) -> int:
        """Entries of the current ledger, those in flight included."""
        return len(s.entries[s.current - 1]) + len(s.pending)

    def taken(self, queued: tuple[tuple[int, int], ...]) -> int:
        """How many of the queued adds a new ledger takes: up to the one that fills it, or all."""
        return next((i for i in range(1, len(queued) + 1) if self.ledger_is_full(i, 0)), len(queued))

    def message_ids(self, pos: Position) -> tuple[MessageId, ...]:
        """The ids of the messages of the entry at ``pos``: one per batch index, -1 when not batched."""
        if self.BatchSize == 1:
            return ((pos[0], pos[1], self.partition, -1),)
        return tuple((pos[0], pos[1], self.partition, i) for i in range(self.BatchSize))

    def opened_last_confirmed(self, s: ManagedLedgerState, kept: tuple[int, ...], ledger: int) -> Position:
        """``lastConfirmedEntry`` as ``ManagedLedgerImpl.initializeBookKeeper`` sets it once the new ledger is
        created (Pulsar 4.0.7): ``(ledger, -1)``, stepped back over the ledgers of the list that hold no entry to
        the last entry of the latest that holds one."""
        written = [x for x in kept if s.entries[x - 1]]
        if not written or self.Bug == "reopen_confirms_new_ledger":
            return (ledger, -1)
        return (written[-1], len(s.entries[written[-1] - 1]) - 1)

    def recovered_dedup(self, entries: tuple[tuple[tuple[int, int], ...], ...]) -> tuple[int, ...]:
        """The highest sequence id each producer has in the entries written."""
        highest = [-1] * self.NumProducers
        for ledger in entries:
            for p, seq in ledger:
                highest[p - 1] = max(highest[p - 1], seq)
        return tuple(highest)

    # -- Init ------------------------------------------------------------------------
    def init_states(self) -> Iterator[ManagedLedgerState]:
        yield ManagedLedgerState(
            ledgers=(1,),
            entries=((),),
            deleted=frozenset(),
            persistent_mark_delete=tuple((1, -1) for _ in self.cursors),
            broker_up=True,
            current=1,
            age=0,
            pending=(),
            closing=False,
            queued=(),
            highest_pushed=tuple(-1 for _ in self.producers),
            highest_persisted=tuple(-1 for _ in self.producers),
            last_confirmed=(1, -1),
            slowest_position=tuple((1, -1) for _ in self.cursors),
            mark_delete=tuple((1, -1) for _ in self.cursors),
            crashes=0,
            create_failures=0,
            sent=tuple(0 for _ in self.producers),
            acked=tuple(-1 for _ in self.producers),
            net=tuple(() for _ in self.producers),
            reconnecting=tuple(False for _ in self.producers),
            disconnects=0,
            last_id=NO_MESSAGE_ID,
            acknowledged=tuple((1, -1) for _ in self.cursors),
        )

    # -- producers -------------------------------------------------------------------
    def awaits_resend(self, s: ManagedLedgerState, p: int) -> bool:
        """The producer's connection closed, or it has batches not acknowledged that are neither in flight nor at
        the broker: lost in a crash."""
        return s.reconnecting[p - 1] or (
            s.acked[p - 1] + 1 < s.sent[p - 1]
            and not s.net[p - 1]
            and all(q != p for q, _ in s.pending)
            and all(q != p for q, _ in s.queued)
        )

    @action(_each_producer)
    def ProducerSends(self, s: ManagedLedgerState, p: int) -> ManagedLedgerState | None:
        """The producer sends its next batch on its connection; batches lost in a crash go first."""
        if not s.broker_up or s.sent[p - 1] >= self.MaxMessages or self.awaits_resend(s, p):
            return None
        seq = s.sent[p - 1]
        return evolve(s, sent=_replace(s.sent, p - 1, seq + 1), net=_replace(s.net, p - 1, (*s.net[p - 1], seq)))

    @action(_each_producer)
    def ProducerResends(self, s: ManagedLedgerState, p: int) -> ManagedLedgerState | None:
        """Reconnected, the producer sends again, in order, every batch not acknowledged
        (``ProducerImpl.resendMessages``, Pulsar client 4.0.7)."""
        if not s.broker_up or not self.awaits_resend(s, p):
            return None
        return evolve(
            s,
            net=_replace(s.net, p - 1, tuple(range(s.acked[p - 1] + 1, s.sent[p - 1]))),
            reconnecting=_replace(s.reconnecting, p - 1, False),
        )

    @action(_each_producer)
    def ConnectionDrops(self, s: ManagedLedgerState, p: int) -> ManagedLedgerState | None:
        """The producer's connection drops while a batch is not acknowledged: the batches on it are lost; the broker
        keeps the adds it accepted."""
        if not s.broker_up or s.disconnects >= self.MaxDisconnects or s.reconnecting[p - 1]:
            return None
        if s.acked[p - 1] + 1 >= s.sent[p - 1]:
            return None
        return evolve(
            s,
            net=_replace(s.net, p - 1, ()),
            reconnecting=_replace(s.reconnecting, p - 1, True),
            disconnects=s.disconnects + 1,
        )

    # -- the broker ------------------------------------------------------------------
    @action(_each_producer)
    def BrokerReceives(self, s: ManagedLedgerState, p: int) -> ManagedLedgerState | None:
        """The dedup check (``MessageDeduplication.isDuplicate``, Pulsar 4.0.7; with Dedup off every batch is new):
        a duplicate, at most the highest persisted, is acked unwritten; one above that and at most the highest
        pushed is Unknown: the send fails and the client closes its connection (``ClientCnx.handleSendError``),
        to send again. A new batch goes to BookKeeper as the next entry; if, counted with the adds in flight, it
        fills the ledger, it is the ledger's last (closeWhenDone). While the ledger closes a new batch is queued
        (``ManagedLedgerImpl.internalAsyncAddEntry``, Pulsar 4.0.7)."""
        if not s.broker_up or not s.net[p - 1]:
            return None
        seq, rest = s.net[p - 1][0], s.net[p - 1][1:]
        net = _replace(s.net, p - 1, rest)
        if self.Dedup and seq <= s.highest_pushed[p - 1]:
            if seq <= s.highest_persisted[p - 1] or self.Bug == "unknown_answered_as_duplicate":
                # A duplicate: answered with message id -1:-1 and not written (MessageDupStatus.Dup).
                return evolve(s, net=net, acked=_replace(s.acked, p - 1, max(s.acked[p - 1], seq)))
            # MessageDupStatus.Unknown: the send fails; the client closes its connection.
            return evolve(s, net=_replace(s.net, p - 1, ()), reconnecting=_replace(s.reconnecting, p - 1, True))
        pushed = _replace(s.highest_pushed, p - 1, seq) if self.Dedup else s.highest_pushed
        if (s.closing and self.Bug != "closing_ledger_takes_adds") or s.current == NO_LEDGER:
            return evolve(s, net=net, highest_pushed=pushed, queued=(*s.queued, (p, seq)))
        closing = s.closing or self.ledger_is_full(self.written(s) + 1, s.age)
        return evolve(s, net=net, highest_pushed=pushed, pending=(*s.pending, (p, seq)), closing=closing)

    @action()
    def BookKeeperCompletesAdd(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """The oldest add in flight reaches its ack quorum; the producer gets its message ids, readers the entry
        (``OpAddEntry.run`` sets ``lastConfirmedEntry``, Pulsar 4.0.7)."""
        if not s.broker_up or not s.pending:
            return None
        (p, seq), rest = s.pending[0], s.pending[1:]
        ledger = s.entries[s.current - 1]
        ids = self.message_ids((s.current, len(ledger)))
        return evolve(
            s,
            entries=_replace(s.entries, s.current - 1, (*ledger, (p, seq))),
            pending=rest,
            acked=_replace(s.acked, p - 1, max(s.acked[p - 1], seq)),
            highest_persisted=_replace(s.highest_persisted, p - 1, max(s.highest_persisted[p - 1], seq))
            if self.Dedup
            else s.highest_persisted,  # recordMessagePersisted
            last_id=ids[-1],
            last_confirmed=(s.current, len(ledger)),
        )

    @action()
    def LedgerRollsOver(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """The ledger to close is closed and the next created and listed (``ledgerClosed``,
        ``createLedgerAfterClosed``, ``createComplete``), or the one being created is; the queued adds go to it in
        order, each counted, up to the one that fills it (``updateLedgersIdsComplete``). Pulsar 4.0.7."""
        if not s.broker_up or not (self.to_close(s) or self.creating(s)):
            return None
        new = len(s.entries) + 1
        k = self.taken(s.queued)
        return evolve(
            s,
            ledgers=(*s.ledgers, new),
            entries=(*s.entries, ()),
            current=new,
            age=0,
            pending=s.queued[:k],
            queued=s.queued[k:],
            closing=k > 0 and self.ledger_is_full(k, 0),
            old_broker_stale=bool(s.old_broker),
        )

    def to_close(self, s: ManagedLedgerState) -> bool:
        """The current ledger is to be closed: its last add completed (``OpAddEntry.run`` with closeWhenDone), or the
        rollover timer finds it full with an entry and nothing in flight (``rollCurrentLedgerIfFull``)."""
        if s.current == NO_LEDGER or s.pending:
            return False
        count = len(s.entries[s.current - 1])
        return count > 0 and (s.closing or self.ledger_is_full(count, s.age))

    def creating(self, s: ManagedLedgerState) -> bool:
        """A ledger is being created for the adds that came with none open (internalAsyncAddEntry in ClosedLedger)."""
        return s.current == NO_LEDGER and bool(s.queued)

    @action()
    def LedgerCreationFails(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """Creating the next ledger fails (``createComplete`` with an error, ManagedLedgerImpl, Pulsar 4.0.7): the
        ledger to close is closed and stays the last of the list; none is open (ClosedLedger, WriteFailed); the
        queued adds fail (``clearPendingAddEntries``), so their producers' connections close; PersistentTopic resets
        the pushed ids to the persisted ones (``resetHighestSequenceIdPushed``) and the next add creates a ledger."""
        if not s.broker_up or s.create_failures >= self.MaxCreateFailures:
            return None
        if not (self.to_close(s) or self.creating(s)):
            return None
        failed = {p for p, _ in s.queued}
        acked, net, reconnecting = s.acked, s.net, s.reconnecting
        if self.Bug == "failed_creation_acks_queued":
            acked = tuple(
                max([a, *(seq for q, seq in s.queued if q == p)]) for p, a in zip(self.producers, s.acked, strict=True)
            )
        else:
            net = tuple(() if p in failed else n for p, n in zip(self.producers, s.net, strict=True))
            reconnecting = tuple(r or p in failed for p, r in zip(self.producers, s.reconnecting, strict=True))
        return evolve(
            s,
            current=NO_LEDGER,
            age=0,
            closing=False,
            queued=(),
            highest_pushed=s.highest_persisted,
            create_failures=s.create_failures + 1,
            acked=acked,
            net=net,
            reconnecting=reconnecting,
        )

    @action()
    def ClockTicks(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """Time passes for the current ledger (only as far as the rollover rules can tell)."""
        if not s.broker_up or s.current == NO_LEDGER or s.age >= self.max_age:
            return None
        return evolve(s, age=s.age + 1)

    def _broker_stops(self, s: ManagedLedgerState, k: int) -> ManagedLedgerState:
        """The broker stops serving the topic: its memory and connections are gone; the first k adds in flight
        reached the bookies."""
        entries = s.entries
        if k > 0:
            entries = _replace(entries, s.current - 1, (*entries[s.current - 1], *s.pending[:k]))
        return evolve(
            s,
            entries=entries,
            broker_up=False,
            current=NO_LEDGER,
            age=0,
            pending=(),
            closing=False,
            queued=(),
            highest_pushed=tuple(-1 for _ in self.producers),
            highest_persisted=tuple(-1 for _ in self.producers),
            last_confirmed=NO_POSITION,
            slowest_position=tuple(NO_POSITION for _ in self.cursors),
            net=tuple(() for _ in self.producers),
        )

    @action(_crash_cuts)
    def BrokerCrashes(self, s: ManagedLedgerState, k: int) -> ManagedLedgerState | None:
        """The broker dies: its memory and connections are gone; the first k adds in flight reached the bookies."""
        if not s.broker_up or s.crashes >= self.MaxCrashes:
            return None
        return evolve(self._broker_stops(s, k), crashes=s.crashes + 1)

    @action(_crash_cuts)
    def TopicMovesToAnotherBroker(self, s: ManagedLedgerState, k: int) -> ManagedLedgerState | None:
        """Another broker takes the topic over (the bundle is unloaded, or the broker's metadata session expired)
        while this one still runs: to the producers it is gone as in a crash, and ``ManagedLedgerOpens`` is the new
        owner's open; the old broker keeps the ledger list it read, with its version (``ledgersStat``)."""
        if not s.broker_up or s.takeovers >= self.MaxTakeovers or s.old_broker:
            return None
        stopped = self._broker_stops(s, k)
        return evolve(stopped, takeovers=s.takeovers + 1, old_broker=s.ledgers, old_broker_stale=False)

    @action()
    def OldBrokerRollsOver(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """The old broker's current ledger is closed under it and it rolls over: it creates a ledger and writes the
        list it holds with it, by compare-and-set on the version it read (``updateLedgersListAfterRollover``,
        ``asyncUpdateLedgerIds``). After the new owner wrote the list the version is old: BadVersionException,
        ``handleBadVersion`` fences the old managed ledger and the new ledger is deleted (``createComplete``'s
        ``operationFailed``, ManagedLedgerImpl, Pulsar 4.0.7). Its last ledger, closed with no entry, leaves its
        list, and is deleted once the list is written (``ledgerClosed``, ``updateLedgersIdsComplete``); a durable
        mark-delete at (that ledger, -1) stays, and the next open restores it at the next ledger
        (``recoveredCursor``). The seeded bug writes without the compare."""
        if not s.old_broker:
            return None
        new = len(s.entries) + 1
        entries = (*s.entries, ())
        done = evolve(s, entries=entries, old_broker=(), old_broker_stale=False)
        if s.old_broker_stale and self.Bug != "blind_ledger_list_write":
            return evolve(done, deleted=s.deleted | {new})
        last, deleted = s.old_broker[-1], s.deleted
        listed = (*s.old_broker, new)
        if not s.entries[last - 1]:
            listed, deleted = (*s.old_broker[:-1], new), deleted | {last}
        return evolve(done, ledgers=listed, deleted=deleted)

    @action()
    def ManagedLedgerOpens(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """initialize: recover-open the last ledger, drop it if empty, create a new one, rebuild the dedup state,
        restore the cursors (``ManagedLedgerImpl.initialize``, ``initializeBookKeeper``, ``initializeCursors``;
        ``ManagedCursorImpl.recoveredCursor``; Pulsar 4.0.7)."""
        if s.broker_up:
            return None
        ledgers, deleted = s.ledgers, s.deleted
        if ledgers and not s.entries[ledgers[-1] - 1]:
            ledgers, deleted = ledgers[:-1], deleted | {ledgers[-1]}
        new = len(s.entries) + 1
        dedup = tuple(-1 for _ in self.producers)
        if self.Bug != "dedup_forgets_on_reopen" and self.Dedup:
            dedup = self.recovered_dedup(s.entries)  # replayCursor: both the pushed and the persisted ids
        listed, entries = (*ledgers, new), (*s.entries, ())
        last = self.opened_last_confirmed(s, ledgers, new)
        # The cursors are restored from their durable state (recoveredCursor): a mark at (l, -1) of the ledger
        # dropped moves on, and none passes lastConfirmedEntry. The acknowledgements not persisted are lost.
        marks = tuple(
            min(recovered_position(listed, lambda x: len(entries[x - 1]), md), last) for md in s.persistent_mark_delete
        )
        return evolve(
            s,
            ledgers=listed,
            entries=entries,
            deleted=deleted,
            persistent_mark_delete=marks,
            mark_delete=marks,
            broker_up=True,
            current=new,
            highest_pushed=dedup,
            highest_persisted=dedup,
            last_confirmed=last,
            slowest_position=marks,  # addCursor: the managed ledger holds each cursor at its restored mark-delete
            old_broker_stale=bool(s.old_broker),
        )

    # -- cursors and trimming ----------------------------------------------------------
    @action(_each_cursor)
    def ConsumerAcks(self, s: ManagedLedgerState, c: int) -> ManagedLedgerState | None:
        """The subscription acknowledges the next entry cumulatively: the mark-delete in memory moves there
        (``setAcknowledgedPosition`` in ``asyncMarkDelete``); its persist is ``CursorPersists`` (ManagedCursorImpl,
        Pulsar 4.0.7)."""
        if not s.broker_up:
            return None
        nxt = next_position(s.ledgers, lambda x: len(s.entries[x - 1]), s.mark_delete[c - 1])
        if nxt is None:
            return None
        return evolve(
            s,
            mark_delete=_replace(s.mark_delete, c - 1, nxt),
            acknowledged=_replace(s.acknowledged, c - 1, max(s.acknowledged[c - 1], nxt)),
        )

    @action(_each_cursor)
    def CursorPersists(self, s: ManagedLedgerState, c: int) -> ManagedLedgerState | None:
        """The cursor's latest mark-delete is persisted (``internalMarkDelete``: ``persistPositionToLedger``, or the
        znode): its callback sets ``persistentMarkDeletePosition`` (``MarkDeleteEntry``), and the managed ledger
        holds the cursor there (``onCursorMarkDeletePositionUpdated``; ManagedCursorImpl, Pulsar 4.0.7).
        Mark-deletes persist in order and a later one supersedes those queued before it, so the latest one is what
        a restore can find."""
        if not s.broker_up or s.persistent_mark_delete[c - 1] == s.mark_delete[c - 1]:
            return None
        md = durable = s.mark_delete[c - 1]
        if self.Bug == "persists_read_position":
            durable = next_position(s.ledgers, lambda x: len(s.entries[x - 1]), md) or md
        return evolve(
            s,
            persistent_mark_delete=_replace(s.persistent_mark_delete, c - 1, durable),
            slowest_position=_replace(s.slowest_position, c - 1, md),
        )

    @action()
    def CursorsSkipConsumedLedgers(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """maybeUpdateCursorBeforeTrimmingConsumedLedger (ManagedLedgerImpl, Pulsar 4.0.7): the managed ledger
        holds a cursor whose mark-delete is at a ledger's last entry at (next ledger, -1); the cursor's own
        mark-delete stays where it is."""
        if not s.broker_up:
            return None
        held = tuple(
            skipped if (skipped := self._skipped(s, md)) != md else position
            for md, position in zip(s.mark_delete, s.slowest_position, strict=True)
        )
        if held == s.slowest_position:
            return None
        return evolve(s, slowest_position=held)

    def _skipped(self, s: ManagedLedgerState, md: Position) -> Position:
        ledger, entry = md
        after = next_ledger(s.ledgers, ledger)
        if ledger not in s.ledgers or after is None or entry == -1 or entry + 1 < len(s.entries[ledger - 1]):
            return md
        return (after, -1)

    @action()
    def TrimConsumedLedgers(self, s: ManagedLedgerState) -> ManagedLedgerState | None:
        """internalTrimLedgers (ManagedLedgerImpl, Pulsar 4.0.7): the ledgers before the slowest reader's ledger are
        deleted, never the last of the list: ``currentLedger``, the ledger written or, after a failed creation
        (ClosedLedger), the one closed, which Pulsar trims around as well."""
        if not s.broker_up:
            return None
        last = s.ledgers[-1]
        if not s.slowest_position:
            slowest = last + 1
        elif self.Bug == "trim_deletes_needed_ledger":
            slowest = min(s.slowest_position)[0] + 1
        else:
            slowest = slowest_reader_ledger(s.ledgers, lambda x: len(s.entries[x - 1]), min(s.slowest_position))
        gone = frozenset(x for x in s.ledgers if x < slowest and x != last)
        if not gone:
            return None
        return evolve(
            s,
            ledgers=tuple(x for x in s.ledgers if x not in gone),
            deleted=s.deleted | gone,
            old_broker_stale=bool(s.old_broker),
        )

    # -- invariants ------------------------------------------------------------------
    @invariant
    def TypeOK(self, s: ManagedLedgerState) -> str | None:
        """Every variable holds a value of its type, within the model's bounds."""
        if list(s.ledgers) != sorted(set(s.ledgers)) or any(not 1 <= x <= len(s.entries) for x in s.ledgers):
            return f"ledgers {list(s.ledgers)} is not an increasing list of created ledgers"
        if s.crashes > self.MaxCrashes or s.takeovers > self.MaxTakeovers:
            return f"{s.crashes} crashes and {s.takeovers} takeovers exceed the bounds"
        if any(not -1 <= a < n <= self.MaxMessages for a, n in zip(s.acked, s.sent, strict=True)):
            return f"acked {list(s.acked)} and sent {list(s.sent)} are out of bounds"
        return None

    @invariant
    def WritesGoToLastLedger(self, s: ManagedLedgerState) -> str | None:
        """Only the last ledger of the list is open: the broker writes to no other."""
        if s.current != NO_LEDGER and (not s.ledgers or s.current != s.ledgers[-1]):
            return f"the broker writes to ledger {s.current}, but the last ledger of the list is {s.ledgers[-1:]}"
        return None

    @invariant
    def ListedLedgersExist(self, s: ManagedLedgerState) -> str | None:
        """Every ledger the list names exists: a reader, or the next owner's open, can open it."""
        if s.deleted & set(s.ledgers):
            return f"the list names ledgers {sorted(s.deleted & set(s.ledgers))}, which were deleted"
        return None

    @invariant
    def NoAcknowledgedMessageLost(self, s: ManagedLedgerState) -> str | None:
        """Every batch acknowledged to its producer is in a ledger of the list, or every cursor consumed it."""
        where: dict[tuple[int, int], list[Position]] = {}  # (producer, sequence id) -> its positions
        for ledger, es in enumerate(s.entries, 1):
            for e, m in enumerate(es):
                where.setdefault(m, []).append((ledger, e))
        for p in self.producers:
            for seq in range(s.acked[p - 1] + 1):
                places = where.get((p, seq), [])
                if not places:
                    return f"producer {p}'s batch {seq} was acknowledged but is in no ledger"
                if not any(pos[0] in s.ledgers or all(pos <= a for a in s.acknowledged) for pos in places):
                    pos = places[0]
                    return (
                        f"producer {p}'s batch {seq} was acknowledged at {pos[0]}:{pos[1]}, whose ledger was "
                        f"deleted before every cursor consumed it (acknowledged {_positions(s.acknowledged)})"
                    )
        return None

    @invariant
    def LastConfirmedIsLastEntry(self, s: ManagedLedgerState) -> str | None:
        """lastConfirmedEntry is the last entry of the list, or (l, -1) with no entry in a ledger of the list below
        l: readers are shown every entry."""
        if not s.broker_up:
            return None
        ledger, entry = s.last_confirmed
        if not no_messages_after(s.ledgers, lambda x: len(s.entries[x - 1]), s.last_confirmed):
            return f"lastConfirmedEntry {ledger}:{entry} is before the last entry of the ledger list"
        if entry == -1:
            below = [x for x in s.ledgers if x < ledger and s.entries[x - 1]]
            if below:
                return f"lastConfirmedEntry {ledger}:-1 hides the entries of ledger {below[-1]}"
        elif entry >= len(s.entries[ledger - 1]):
            return f"lastConfirmedEntry {ledger}:{entry} is no entry written"
        return None

    @invariant
    def LedgerHoldsItsLimit(self, s: ManagedLedgerState) -> str | None:
        """Without a minimum rollover time no ledger takes more entries than its limit allows: the add that fills
        it is its last (at least one entry)."""
        if self.MinimumRolloverTime > 0:
            return None
        limit = max(self.MaxEntriesPerLedger, 1)
        for ledger, es in enumerate(s.entries, 1):
            count = len(es) + (len(s.pending) if ledger == s.current else 0)
            if count > limit:
                return (
                    f"ledger {ledger} takes {count} entries, more than MaxEntriesPerLedger={self.MaxEntriesPerLedger}"
                )
        return None

    @invariant
    def DedupPersistsNoDuplicate(self, s: ManagedLedgerState) -> str | None:
        """With Dedup on, no (producer, sequence id) is written twice; with it off a batch sent again after a crash
        or a dropped connection may be."""
        if not self.Dedup:
            return None
        seen: dict[tuple[int, int], Position] = {}
        for ledger, es in enumerate(s.entries, 1):
            for e, msg in enumerate(es):
                if msg in seen:
                    first = seen[msg]
                    return (
                        f"producer {msg[0]}'s batch {msg[1]} is written twice: at {first[0]}:{first[1]} "
                        f"and at {ledger}:{e}"
                    )
                seen[msg] = (ledger, e)
        return None

    @invariant
    def TrimKeepsUnconsumedEntries(self, s: ManagedLedgerState) -> str | None:
        """No deleted ledger holds an entry some durable cursor's consumer has not acknowledged. (A ledger whose
        entries were acknowledged and not yet persisted may go: a restore then resumes after it.)"""
        for ledger in sorted(s.deleted):
            count = len(s.entries[ledger - 1])
            for c, a in zip(self.cursors, s.acknowledged, strict=True):
                if count > 0 and a < (ledger, count - 1):
                    return (
                        f"ledger {ledger} was deleted, but cursor {c}'s consumer (acknowledged up to {a[0]}:{a[1]}) "
                        f"has not acknowledged its entry {ledger}:{count - 1}"
                    )
        return None

    @invariant
    def DurableMarkDeleteAcknowledged(self, s: ManagedLedgerState) -> str | None:
        """A cursor's durable mark-delete passes no entry its consumer has not acknowledged: a restore never skips
        an unacknowledged message."""
        for c, durable, a in zip(self.cursors, s.persistent_mark_delete, s.acknowledged, strict=True):
            if passed := _first_entry_between(s, a, durable):
                return (
                    f"cursor {c}'s durable mark-delete {durable[0]}:{durable[1]} passes entry {passed[0]}:"
                    f"{passed[1]}, which its consumer has not acknowledged (up to {a[0]}:{a[1]})"
                )
        return None

    @invariant
    def TrimPositionBehindCursor(self, s: ManagedLedgerState) -> str | None:
        """The position the managed ledger holds for a cursor passes no entry the cursor has not consumed: trimming
        never goes past what the cursor acknowledged."""
        for c, md, held in zip(self.cursors, s.mark_delete, s.slowest_position, strict=True):
            if passed := _first_entry_between(s, md, held):
                return (
                    f"the managed ledger holds cursor {c} at {held[0]}:{held[1]}, past entry {passed[0]}:"
                    f"{passed[1]}, which it has not consumed (mark-delete {md[0]}:{md[1]})"
                )
        return None

    @action_property
    def MessageIdsIncrease(self, s: ManagedLedgerState, t: ManagedLedgerState) -> str | None:
        """Message ids handed to producers strictly increase within the partition."""
        if t.last_id != s.last_id and not t.last_id > s.last_id:
            return f"message id {_message_id(t.last_id)} was handed out after {_message_id(s.last_id)}"
        return None

    @action_property
    def MarkDeleteNeverMovesBackwards(self, s: ManagedLedgerState, t: ManagedLedgerState) -> str | None:
        """A cursor's durable mark-delete position only moves forward, or back over no entry: recoveredCursor
        caps (l, -1) of a ledger dropped at the last entry before it, the same entries consumed. (The one in memory
        moves back on a restore, over the acknowledgements not persisted.)"""
        for c, before, after in zip(self.cursors, s.persistent_mark_delete, t.persistent_mark_delete, strict=True):
            if after < before and any(
                after < (x, e) <= before for x, es in enumerate(t.entries, 1) for e in range(len(es))
            ):
                return f"cursor {c}'s mark-delete moved back from {before[0]}:{before[1]} to {after[0]}:{after[1]}"
        return None

    # -- sometimes: the invariants above are not vacuous ----------------------------------
    @reachable
    def LedgerRolledOver(self, s: ManagedLedgerState) -> bool:
        """The managed ledger has written to more than one ledger."""
        return any(len(es) > 0 for es in s.entries[1:])

    @reachable
    def ConsumedLedgerTrimmed(self, s: ManagedLedgerState) -> bool:
        """A ledger that held entries was trimmed."""
        return any(len(s.entries[x - 1]) > 0 for x in s.deleted)

    @reachable
    def DuplicateAnsweredUnknown(self, s: ManagedLedgerState) -> bool:
        """A producer's connection was closed with a batch pushed and not yet persisted at the broker."""
        return any(r and any(q == p for q, _ in s.pending) for p, r in zip(self.producers, s.reconnecting, strict=True))

    @reachable
    def UnpersistedAckLost(self, s: ManagedLedgerState) -> bool:
        """After a crash, a cursor resumes before an entry its consumer acknowledged: the ack was not persisted."""
        written = [(x, e) for x, es in enumerate(s.entries, 1) for e in range(len(es))]
        return s.broker_up and any(
            md < pos <= a for md, a in zip(s.mark_delete, s.acknowledged, strict=True) for pos in written
        )

    @reachable
    def UnacknowledgedEntryRecovered(self, s: ManagedLedgerState) -> bool:
        """After a crash, the log holds a batch its producer was never told about."""
        return s.broker_up and any(seq > s.acked[p - 1] for es in s.entries for p, seq in es)


def _first_entry_between(s: ManagedLedgerState, after: Position, upto: Position) -> Position | None:
    """The first entry written (in any ledger, deleted ones too) after ``after`` and at or before ``upto``."""
    return next(((x, e) for x, es in enumerate(s.entries, 1) for e in range(len(es)) if after < (x, e) <= upto), None)


def _replace(values: tuple[Any, ...], i: int, value: Any) -> tuple[Any, ...]:
    return (*values[:i], value, *values[i + 1 :])


def _positions(positions: Iterable[Position]) -> str:
    return ", ".join(f"{ledger}:{entry}" for ledger, entry in positions)


def _message_id(mid: MessageId) -> str:
    return ":".join(str(x) for x in mid)
