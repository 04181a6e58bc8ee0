"""A topic partition on a broker: the publish path with deduplication, over a managed ledger.

The managed-ledger spec (``spec/managed_ledger/managed_ledger.py``) is the design; the topic
takes its broker steps and logs each in the spec's words as it completes:

- ``BrokerReceives(p)``: a batch from a producer passes the deduplication
  check (``MessageDeduplication.isDuplicate``), when deduplication is on: a
  sequence id at most the highest written for the producer is a duplicate,
  answered at once with message id ``-1:-1:-1:-1`` and not written; one
  above that and at most the highest accepted is unknown: the send fails
  (the reply carries no message id, ``MessageDupUnknownException``); a new
  one waits to be added.
  If, counted with the adds waiting, it fills the current ledger
  (``currentLedgerIsFull`` in ``internalAsyncAddEntry``), it is that ledger's
  last: the ledger is closing, and the batches that come meanwhile are queued
  for the next ledger;
- ``BookKeeperCompletesAdd``: the oldest batch waiting is added to the
  managed ledger (its entry is Pulsar's ``MessageMetadata`` and payload,
  :mod:`.entry_format`), and the producer gets its message ids;
- ``LedgerRollsOver``: with no add waiting, a closing ledger (or one the
  rollover timer finds full, holding an entry) is closed and the next
  created; the queued batches wait to be added to it, up to the one that
  fills it (``updateLedgersIdsComplete``); with none open (a creation
  failed) the next batch waits and a ledger is created for it;
- ``LedgerCreationFails``: the ledger to close is closed, but creating the
  next fails: the queued batches fail (their replies carry no message id)
  and the accepted ids go back to the written ones
  (``resetHighestSequenceIdPushed``);
- ``ManagedLedgerOpens``: after a restart, the managed ledger is open and the
  deduplication state rebuilt: each producer's highest sequence id from the
  last snapshot, then from the entries written after it;
- ``CursorsSkipConsumedLedgers``, ``TrimConsumedLedgers``: the consumed
  ledgers go, after a snapshot of the deduplication state.

The deduplication state is persisted as Pulsar does: in the properties of a
durable cursor named ``pulsar.dedup`` (each producer's highest sequence id),
whose mark-delete position is the last entry the snapshot covers. A snapshot
is taken before each trim, so that no entry it has not seen is trimmed.

Crash points (the topic calls the broker's crash hook between two steps):
``add-write`` before an add goes to BookKeeper, ``add-ack`` after it is
written and before the producer is answered.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from ledgerspec.reference.managed_ledger.cursor import ManagedCursor
from ledgerspec.reference.managed_ledger.entry_format import Message, decode_message, encode_message
from ledgerspec.reference.managed_ledger.events import ManagedLedgerLog
from ledgerspec.reference.managed_ledger.managed_ledger import ManagedLedger
from ledgerspec.reference.managed_ledger.message_id import MessageId
from ledgerspec.spec.managed_ledger.managed_ledger import BUGS

__all__ = ["DEDUP_CURSOR", "DUPLICATE", "MUTANTS", "Reply", "Topic", "TopicStateError"]

DEDUP_CURSOR = "pulsar.dedup"  # MessageDeduplication's cursor
DUPLICATE = MessageId(-1, -1)  # the id a duplicate is answered with

#: The topic's own seeded bugs: the engine twins of the managed-ledger spec's (forget_dedup_on_open is the spec's
#: dedup_forgets_on_reopen).
MUTANTS = {
    "forget_dedup_on_open": BUGS["dedup_forgets_on_reopen"],
    "unknown_answered_as_duplicate": BUGS["unknown_answered_as_duplicate"],
    "closing_ledger_takes_adds": BUGS["closing_ledger_takes_adds"],
    "failed_creation_acks_queued": BUGS["failed_creation_acks_queued"],
}

#: ``reply(sequence id, message ids)``: the producer's answer (``[DUPLICATE]`` for a duplicate, None for a send
#: that failed).
Reply = Callable[[int, list[MessageId] | None], None]


class TopicStateError(Exception):
    """A call the topic cannot take now (nothing waiting)."""


@attrs.define
class _Waiting:
    producer: str
    sequence_id: int
    payload: bytes
    messages: int
    reply: Reply


class Topic:
    """One topic partition's publish path (see the module docstring)."""

    def __init__(
        self,
        ml: ManagedLedger,
        *,
        partition: int = -1,
        log: ManagedLedgerLog | None = None,
        clock: Callable[[], int] = lambda: 0,
        mutant: str | None = None,
        deduplication: bool = True,
    ) -> None:
        if mutant is not None and mutant not in MUTANTS:
            raise ValueError(f"unknown topic mutant {mutant!r}; known: {', '.join(MUTANTS)}")
        self.ml = ml
        self.partition = partition
        self.log = log or ManagedLedgerLog()
        self.clock = clock
        self.mutant = mutant  # a seeded bug of MUTANTS, or None
        self.deduplication = deduplication  # brokerDeduplicationEnabled
        self.highest_pushed: dict[str, int] = {}  # producer -> highest sequence id accepted (highestSequencedPushed)
        self.highest_written: dict[str, int] = {}  # producer -> highest sequence id written (...Persisted)
        self.waiting: list[_Waiting] = []  # batches accepted and not yet added, in order
        self.closing = False  # ClosingLedger: the batch that fills the current ledger waits; it takes no other
        self.queued: list[_Waiting] = []  # batches accepted while the ledger closes, for the next ledger
        self.last_written: list[MessageId] = []  # the message ids of the last batch written, since the topic opened
        self.dedup = ml.cursors.get(DEDUP_CURSOR) or ml.open_cursor(DEDUP_CURSOR)

    # -- opening ---------------------------------------------------------------------
    def recover(self) -> None:
        """Rebuild the deduplication state: the last snapshot, then the entries after it (``ManagedLedgerOpens``)."""
        if not self.deduplication:
            self.log.emit("ManagedLedgerOpens")
            return
        self.highest_written = dict(self.dedup.properties)
        for data in self._entries_after(self.dedup.mark_delete):
            message = decode_message(data)
            self.highest_written[message.producer] = max(
                self.highest_written.get(message.producer, -1), message.sequence_id
            )
        if self.mutant != "forget_dedup_on_open":  # MUTANT: every batch is new again
            self.highest_pushed = dict(self.highest_written)
        self.log.emit("ManagedLedgerOpens")

    def _entries_after(self, position: tuple[int, int]) -> list[bytes]:
        found = []
        for ledger in self.ml.ids():
            if ledger >= position[0]:
                first = position[1] + 1 if ledger == position[0] else 0
                found += self.ml.read_entries(ledger)[first:]
        return found

    # -- publishing ------------------------------------------------------------------
    def receive(self, producer: str, sequence_id: int, payload: bytes, reply: Reply, *, messages: int = 1) -> None:
        """A batch from ``producer``: a duplicate is answered now; a new one waits to be added, or, while the
        ledger closes, is queued for the next."""
        if self.deduplication and sequence_id <= self.highest_pushed.get(producer, -1):
            written = sequence_id <= self.highest_written.get(producer, -1)
            if written or self.mutant == "unknown_answered_as_duplicate":  # MUTANT: pushed counts as written
                reply(sequence_id, [DUPLICATE])
            else:
                reply(sequence_id, None)  # MessageDupStatus.Unknown: the send fails
        else:
            if self.deduplication:
                self.highest_pushed[producer] = sequence_id
            batch = _Waiting(producer, sequence_id, payload, messages, reply)
            closing = self.closing and self.mutant != "closing_ledger_takes_adds"  # MUTANT: the closing ledger takes it
            if closing or self.ml.current is None:
                self.queued.append(batch)
            else:
                self._send(batch)
        self.log.emit("BrokerReceives", self.producer_number(producer))

    def _send(self, batch: _Waiting) -> None:
        """The batch waits to be added; if, counted with those waiting, it fills the ledger, it is the last."""
        self.waiting.append(batch)
        self.closing = self.ml.is_full(len(self.waiting))

    def producer_number(self, producer: str) -> int:
        """The spec's number of a producer named ``producer-<n>``."""
        return int(producer.rpartition("-")[2])

    def complete_add(self) -> None:
        """The oldest batch waiting is added to the managed ledger; its producer gets the message ids."""
        if not self.waiting:
            raise TopicStateError("no batch waits to be added")
        batch = self.waiting[0]
        self.ml.crash_point("add-write")
        message = Message(batch.producer, batch.sequence_id, self.clock(), batch.payload, batch.messages)
        position = self.ml.add_entry(encode_message(message), roll_over=False)
        self.ml.crash_point("add-ack")
        self.waiting.pop(0)
        if self.deduplication:  # recordMessagePersisted
            self.highest_written[batch.producer] = max(self.highest_written.get(batch.producer, -1), batch.sequence_id)
        self.last_written = MessageId.batch(position, batch.messages, partition=self.partition)
        batch.reply(batch.sequence_id, self.last_written)
        self.log.emit("BookKeeperCompletesAdd")

    def roll_over(self) -> bool:
        """Once no add waits for it, roll a closing ledger over, or one the rollover timer finds full holding an
        entry; the queued batches go to the new ledger up to the one that fills it (``LedgerRollsOver``)."""
        if not self.can_roll_over():
            return False
        self.ml.roll_over()
        self.closing = False
        while self.queued and not self.closing:
            self._send(self.queued.pop(0))
        self.log.emit("LedgerRollsOver")
        return True

    def can_roll_over(self) -> bool:
        """Is there a ledger to close, or one to create, so that the next ledger is created now?"""
        return self._to_close() or self._creating()

    def _to_close(self) -> bool:
        """The ledger is to be closed: its last add is done, or the rollover timer finds it full with an entry."""
        ml = self.ml
        if self.waiting or ml.current is None or ml.ledgers[-1].entries == 0:
            return False
        return self.closing or ml.is_full()

    def _creating(self) -> bool:
        """A ledger is to be created for the batches that came with none open."""
        return self.ml.current is None and bool(self.queued)

    def fail_creation(self) -> bool:
        """Close the ledger to close, if any, and fail to create the next (``LedgerCreationFails``): the queued
        batches fail, and the accepted ids go back to the written ones (``resetHighestSequenceIdPushed``)."""
        if not self.can_roll_over():
            return False
        self.ml.close_current()
        failed, self.queued, self.closing = self.queued, [], False
        self.highest_pushed = dict(self.highest_written)
        for batch in failed:
            if self.mutant == "failed_creation_acks_queued":
                # MUTANT: answered with the last written batch's ids (a duplicate's, if none was written since the
                # topic opened), as if it were written
                batch.reply(batch.sequence_id, self.last_written or [DUPLICATE])
            else:
                batch.reply(batch.sequence_id, None)  # clearPendingAddEntries
        self.log.emit("LedgerCreationFails")
        return True

    # -- consumed ledgers --------------------------------------------------------------
    def skip_consumed_ledgers(self, cursors: list[ManagedCursor]) -> bool:
        """The managed ledger holds the subscriptions at a ledger's last entry at the next ledger; their own
        mark-deletes stay (``CursorsSkipConsumedLedgers``). Whether one of ``cursors`` moved."""
        before = [self.ml.positions[c.name] for c in cursors]
        self.ml.skip_consumed_ledgers()
        moved = [c for c, position in zip(cursors, before, strict=True) if self.ml.positions[c.name] != position]
        if moved:
            self.log.emit("CursorsSkipConsumedLedgers")
        return bool(moved)

    def trim(self) -> list[int]:
        """Snapshot the deduplication state, then trim the consumed ledgers (``TrimConsumedLedgers``) by the
        positions the managed ledger holds for its cursors.

        The deduplication cursor, at the last entry after the snapshot, holds back no ledger the snapshot covers
        (``internalTrimLedgers`` passes a ledger whose last entry the slowest position is at); the subscriptions'
        positions move only by :meth:`skip_consumed_ledgers`.
        """
        self.snapshot_dedup()
        gone = self.ml.trim_consumed_ledgers(skip_consumed=False)
        if gone:
            self.log.emit("TrimConsumedLedgers")
        return gone

    def snapshot_dedup(self) -> None:
        """``MessageDeduplication.takeSnapshot``: the dedup cursor at the last entry, each producer's highest id."""
        self.dedup.mark_delete_to(max(self.ml.last_confirmed(), self.dedup.mark_delete), self.highest_written)
        self.dedup.flush()
