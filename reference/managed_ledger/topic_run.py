"""Producers, subscriptions and a topic on a broker that crashes and restarts: the managed-ledger spec's world.

:class:`TopicRun` sets up an in-process BookKeeper cluster and an embedded
metadata store (or one given), opens the topic ``public/default/persistent/topic``
(:class:`~.topic.Topic` over a :class:`~.managed_ledger.ManagedLedger`) with
durable subscriptions ``sub-1 .. sub-C`` at the earliest position, and plays
the producers ``producer-1 .. producer-P`` as the spec's producers behave:
each sends its batches with sequence ids 0, 1, ... in order on its
connection; after a crash, once reconnected, it sends again every batch it
got no answer for. Each call is one step of the spec, logged in its words:

=================================  ==========================================
call                               the managed-ledger spec's action
=================================  ==========================================
``send(p)``                        ``ProducerSends(p)``
``resend(p)``                      ``ProducerResends(p)``
``drop_connection(p)``             ``ConnectionDrops(p)``
``receive(p)``                     ``BrokerReceives(p)`` (the topic logs it)
``complete_add()``                 ``BookKeeperCompletesAdd`` (the topic)
``roll_over()``                    ``LedgerRollsOver`` (the topic)
``fail_creation()``                ``LedgerCreationFails`` (the topic)
``tick()``                         ``ClockTicks``: a millisecond passes
``crash()``                        ``BrokerCrashes(k)``: k adds were written
``restart()``                      ``ManagedLedgerOpens`` (the topic)
``consume(c)``                     ``ConsumerAcks(c)``: ``sub-c`` acknowledges
                                   its next entry, in memory
``persist(c)``                     ``CursorPersists(c)``: ``sub-c`` persists
                                   its mark-delete (``flush``)
``skip_consumed()``                ``CursorsSkipConsumedLedgers``
``trim()``                         ``TrimConsumedLedgers`` (the topic)
=================================  ==========================================

``crash_at`` names a crash point of the topic (``add-write``, ``add-ack``)
at which the next ``complete_add`` stops the broker. The producers' side
(what each sent, what it got answered, what is in flight on its connection,
the last message id it was given) is kept here: it is the spec's producers;
so is each consumer's side: the furthest entry it acknowledged, and where
the broker's memory held its cursor when the broker went away.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from ledgerspec.reference.constants import ConstantsTable
from ledgerspec.reference.managed_ledger.bookkeeper import BookKeeperLedgers
from ledgerspec.reference.managed_ledger.cursor import ManagedCursor
from ledgerspec.reference.managed_ledger.events import ManagedLedgerLog
from ledgerspec.reference.managed_ledger.managed_ledger import (
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerFencedError,
)
from ledgerspec.reference.managed_ledger.message_id import MessageId
from ledgerspec.reference.managed_ledger.run import BrokerCrashed, BrokerHarness
from ledgerspec.reference.managed_ledger.topic import DUPLICATE, Topic
from ledgerspec.reference.metadata import MetadataStore
from ledgerspec.spec.positions import Position, next_position

__all__ = ["SPEC_CONSTANTS", "TOPIC", "TopicRun", "TopicRunConfig"]

TOPIC = "public/default/persistent/topic"


@attrs.frozen
class TopicRunConfig:
    """The run's sizes (the managed-ledger spec's constants of the same meaning) and seeded bugs."""

    producers: int = 1  # NumProducers
    messages: int = 3  # MaxMessages: batches each producer sends
    batch_size: int = 1  # BatchSize
    partitioned: bool = False  # Partitioned
    max_entries_per_ledger: int = 2  # MaxEntriesPerLedger
    maximum_rollover: int = 240  # MaximumRolloverTime, in milliseconds (0: at once)
    minimum_rollover: int = 0  # MinimumRolloverTime, in milliseconds
    cursors: int = 1  # NumCursors
    mutant: str | None = None  # a managed-ledger mutant
    topic_mutant: str | None = None  # a seeded bug of the topic (topic.MUTANTS)
    ticks: int = 0  # Ticks: how many milliseconds a ledger may age
    deduplication: bool = True  # Dedup
    disconnects: int = 0  # MaxDisconnects: producer connections dropped in all
    creation_failures: int = 0  # MaxCreateFailures: ledger creations that fail, in all
    takeovers: int = 0  # MaxTakeovers: times another broker takes the topic over while the old one runs

    def managed_ledger_config(self) -> ManagedLedgerConfig:
        return ManagedLedgerConfig(
            max_entries_per_ledger=self.max_entries_per_ledger,
            minimum_rollover_ms=self.minimum_rollover,
            maximum_rollover_ms=self.maximum_rollover,
            mutant=self.mutant,
        )

    def spec_constants(self) -> dict[str, int | bool]:
        """The managed-ledger spec's constants for runs of this configuration."""
        return SPEC_CONSTANTS.constants(self)


#: The managed-ledger spec's constants a topic run sets, with their :class:`TopicRunConfig` fields.
SPEC_CONSTANTS = ConstantsTable(
    {
        "NumProducers": "producers",
        "MaxMessages": "messages",
        "BatchSize": "batch_size",
        "Partitioned": "partitioned",
        "MaxEntriesPerLedger": "max_entries_per_ledger",
        "MaximumRolloverTime": "maximum_rollover",
        "MinimumRolloverTime": "minimum_rollover",
        "Ticks": "ticks",
        "Dedup": "deduplication",
        "MaxDisconnects": "disconnects",
        "MaxCreateFailures": "creation_failures",
        "MaxTakeovers": "takeovers",
        "NumCursors": "cursors",
    }
)


@attrs.define
class Producer:
    """One producer, as the spec's producers behave."""

    name: str
    sent: int = 0  # sequence ids sent so far
    acked: int = -1  # highest sequence id answered (answers come in order)
    net: list[int] = attrs.Factory(list)  # sequence ids on the connection, not yet at the broker
    reconnecting: bool = False  # its connection closed: it sends every batch not answered again


class TopicRun(BrokerHarness):
    """A topic, its producers and subscriptions, and a broker, driven one step at a time (module docstring)."""

    def __init__(self, root: str, config: TopicRunConfig | None = None, *, store: MetadataStore | None = None) -> None:
        self.config = config or TopicRunConfig()
        super().__init__(root, 2, store)
        self.log = ManagedLedgerLog()  # in the managed-ledger spec's words
        self.now = 0
        self.crashes = 0
        self.disconnects = 0
        self.create_failures = 0
        self.takeovers = 0
        self.old_broker: ManagedLedger | None = None  # a broker that lost the topic and still runs: its managed ledger
        self.abandoned: list[int] = []  # ledgers an old broker created and deleted, its list write refused
        self.producers = [Producer(f"producer-{p}") for p in range(1, self.config.producers + 1)]
        self.last_id = MessageId(-1, -1, -1, -1)
        self.topic: Topic | None = None
        self._start()
        assert self.ml is not None
        for c in range(1, self.config.cursors + 1):
            self.ml.open_cursor(f"sub-{c}", earliest=True)
        first = (self.ml.ids()[0], -1)
        # cursor c -> the furthest entry its consumer acknowledged; and its mark-delete in the memory of the
        # broker that went away, until the next open restores it
        self.acknowledged: list[Position] = [first for _ in range(self.config.cursors)]
        self.marks_at_stop: list[Position] = list(self.acknowledged)

    # -- the broker ------------------------------------------------------------------
    def _start(self) -> None:
        bookkeeper = BookKeeperLedgers(self.cluster, self.ledger_metadata)
        ml = ManagedLedger(
            TOPIC,
            self.store,
            bookkeeper,
            self.config.managed_ledger_config(),
            clock=lambda: self.now,
            crash_point=self._crash_point,
        )
        ml.initialize()
        self.topic = Topic(
            ml,
            partition=0 if self.config.partitioned else -1,
            log=self.log,
            clock=lambda: self.now,
            mutant=self.config.topic_mutant,
            deduplication=self.config.deduplication,
        )

    @property
    def up(self) -> bool:
        return self.topic is not None

    @property
    def ml(self) -> ManagedLedger | None:
        return self.topic.ml if self.topic is not None else None

    def _topic(self) -> Topic:
        if self.topic is None:
            raise BrokerCrashed("the broker is down")
        return self.topic

    def subscription(self, c: int) -> ManagedCursor:
        ml = self._topic().ml
        return ml.cursors[f"sub-{c}"]

    def crash(self, written: int = 0) -> None:
        """The broker dies; ``written`` of the adds it had accepted reached the bookies (``BrokerCrashes(k)``)."""
        self._stop()
        self.crashes += 1
        self.log.emit("BrokerCrashes", written)

    def take_over(self) -> None:
        """Another broker takes the topic over while this one runs on (``TopicMovesToAnotherBroker(0)``): the
        producers' connections are gone, the next :meth:`restart` is the new owner's open, and the old broker
        keeps its managed ledger, with the ledger list and the version it read."""
        if self.old_broker is not None:
            raise ValueError("a broker that lost the topic still runs")
        self.old_broker = self._topic().ml
        self._stop()
        self.takeovers += 1
        self.log.emit("TopicMovesToAnotherBroker", 0)

    def old_broker_rolls_over(self) -> bool:
        """The old broker's current ledger is closed under it and it rolls over (``OldBrokerRollsOver``): its list
        write by compare-and-set fails once the new owner wrote the list; whether it was written."""
        old = self.old_broker
        if old is None:
            raise ValueError("no broker that lost the topic runs")
        self.old_broker = None
        try:
            old.roll_over()
        except ManagedLedgerFencedError:
            self.abandoned += old.abandoned
            self.log.emit("OldBrokerRollsOver")
            return False
        self.log.emit("OldBrokerRollsOver")
        return True

    def _stop(self) -> None:
        if self.topic is not None:
            self.marks_at_stop = [self.subscription(c).mark_delete for c in range(1, self.config.cursors + 1)]
        self.topic = None
        self.crash_at = None
        for producer in self.producers:
            producer.net.clear()  # the connections are gone

    def restart(self) -> None:
        if self.topic is not None:
            raise ValueError("the broker is up: crash it first")
        self._start()
        # recoveredCursor caps a mark at (l, -1) of a ledger dropped at lastConfirmedEntry; the subscription
        # persists what it restored, as its next mark-delete would (the spec's cursor is the restored one).
        for c in range(1, self.config.cursors + 1):
            cursor = self.subscription(c)
            cursor.mark_delete_to(cursor.mark_delete, cursor.properties)
            cursor.flush()
        self._topic().recover()

    # -- producers ---------------------------------------------------------------------
    def awaits_resend(self, p: int) -> bool:
        """The producer has unanswered batches that are neither in flight nor at the broker: lost in a crash."""
        producer = self.producers[p - 1]
        waiting = self.topic is not None and any(
            w.producer == producer.name for w in (*self.topic.waiting, *self.topic.queued)
        )
        return producer.reconnecting or (producer.acked + 1 < producer.sent and not producer.net and not waiting)

    def send(self, p: int) -> None:
        producer = self.producers[p - 1]
        producer.net.append(producer.sent)
        producer.sent += 1
        self.log.emit("ProducerSends", p)

    def resend(self, p: int) -> None:
        producer = self.producers[p - 1]
        producer.net = list(range(producer.acked + 1, producer.sent))
        producer.reconnecting = False
        self.log.emit("ProducerResends", p)

    def drop_connection(self, p: int) -> None:
        """The producer's connection drops: what is on it is lost; it will send again (``ConnectionDrops(p)``)."""
        producer = self.producers[p - 1]
        producer.net.clear()
        producer.reconnecting = True
        self.disconnects += 1
        self.log.emit("ConnectionDrops", p)

    def _answer(self, p: int) -> Callable[[int, list[MessageId] | None], None]:
        producer = self.producers[p - 1]

        def reply(sequence_id: int, ids: list[MessageId] | None) -> None:
            if ids is None:  # the send failed: the client closes the connection (ClientCnx.handleSendError)
                producer.net.clear()
                producer.reconnecting = True
                return
            producer.acked = max(producer.acked, sequence_id)
            if ids != [DUPLICATE]:
                self.last_id = ids[-1]

        return reply

    def receive(self, p: int) -> None:
        producer = self.producers[p - 1]
        sequence_id = producer.net.pop(0)
        payload = b"m" * self.config.batch_size
        self._topic().receive(producer.name, sequence_id, payload, self._answer(p), messages=self.config.batch_size)

    def complete_add(self) -> bool:
        """The oldest waiting add completes; whether the broker crashed on the way (at ``crash_at``)."""
        topic = self._topic()
        try:
            topic.complete_add()
        except BrokerCrashed as crash:
            self.crash(1 if str(crash) == "add-ack" else 0)
            return True
        return False

    def roll_over(self) -> bool:
        return self._topic().roll_over()

    def fail_creation(self) -> bool:
        """Creating the next ledger fails; whether there was one to create."""
        topic = self._topic()
        if not topic.can_roll_over():
            return False
        self.create_failures += 1
        return topic.fail_creation()

    def tick(self) -> None:
        self.now += 1
        self.log.emit("ClockTicks")

    # -- subscriptions ---------------------------------------------------------------
    def consume(self, c: int) -> bool:
        """``sub-c`` acknowledges its next entry: its mark-delete moves in memory (``ConsumerAcks``)."""
        topic = self._topic()
        cursor = self.subscription(c)
        nxt = next_position(topic.ml.ids(), topic.ml.entries_of, cursor.mark_delete)
        if nxt is None:
            return False
        cursor.ack(nxt)
        self.acknowledged[c - 1] = max(self.acknowledged[c - 1], nxt)
        self.log.emit("ConsumerAcks", c)
        return True

    def persist(self, c: int) -> bool:
        """``sub-c`` persists its mark-delete, and the managed ledger holds it there (``CursorPersists``); whether
        it had acknowledgements to persist."""
        cursor = self.subscription(c)
        if not cursor.dirty:
            return False
        cursor.flush()
        self.log.emit("CursorPersists", c)
        return True

    def skip_consumed(self) -> bool:
        topic = self._topic()
        return topic.skip_consumed_ledgers([self.subscription(c) for c in range(1, self.config.cursors + 1)])

    def trim(self) -> list[int]:
        return self._topic().trim()
