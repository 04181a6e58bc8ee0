"""The abstraction function: the managed-ledger spec's state of a :class:`~.topic_run.TopicRun`.

The spec numbers a topic's ledgers 1, 2, ... in the order they were
created; BookKeeper's ids are shared by every ledger of the cluster (cursor
ledgers, other topics), so the abstraction renames: a ledger's spec number is
its place among the ledgers the topic's znode has ever listed. Read from the
engine's parts:

=======================  ======================================================
spec variables           read from
=======================  ======================================================
``ledgers``, ``deleted``  the topic's znode (the ledger list, decoded), and the
                         ledgers it listed before and lists no more
``entries``              each ledger's entries, read from the bookies and
                         decoded (``MessageMetadata``: producer, sequence id);
                         a deleted ledger's as they were when last read
``persistent_mark_delete`` each subscription's mark-delete position as its
                         durable state holds it: its znode's, or with
                         ``cursorsLedgerId`` set, the last record of that
                         cursor ledger (from the bookies)
``mark_delete``          each subscription's mark-delete in the broker's memory;
                         while the broker is down, where it was when it went
``acknowledged``         the furthest entry each subscription acknowledged
                         (the run's consumers)
``broker_up`` ...        the topic and its managed ledger: the ledger written,
``highest_pushed``,      its age, the adds waiting, whether the ledger closes,
``closing``, ``queued``, the adds queued for the next, the deduplication state
``highest_persisted``    (the highest ids accepted and written),
``last_confirmed``       its ``lastConfirmedEntry``
``slowest_position``     the position the managed ledger holds for each
                         subscription (``ManagedLedger.positions``)
``crashes``, ``sent``    the run's count of crashes and failed ledger
``create_failures``      creations, and its producers
``acked``, ``net``,      (and their connections)
``reconnecting``,
``disconnects``,
``last_id``
=======================  ======================================================
"""

from __future__ import annotations

from ledgerspec.reference.managed_ledger.abstraction import bookie_entries
from ledgerspec.reference.managed_ledger.entry_format import decode_message
from ledgerspec.reference.managed_ledger.topic_run import TOPIC, TopicRun
from ledgerspec.spec.managed_ledger.managed_ledger import (
    NO_LEDGER,
    NO_MESSAGE_ID,
    ManagedLedgerSpec,
    ManagedLedgerState,
)
from ledgerspec.spec.positions import NO_POSITION, Position

__all__ = ["TopicAbstraction"]


class TopicAbstraction:
    """The spec state of one run; it remembers the ledgers the topic listed and their entries."""

    def __init__(self, run: TopicRun, spec: ManagedLedgerSpec) -> None:
        self.run = run
        self.spec = spec
        self.listed: list[int] = []  # every ledger id the topic's znode listed, in the order they came
        self.entries: dict[int, tuple[tuple[int, int], ...]] = {}

    def number(self, ledger_id: int) -> int:
        return self.listed.index(ledger_id) + 1

    def __call__(self) -> ManagedLedgerState:
        run = self.run
        stored = run.store.read_ledgers(TOPIC)
        ids = [x.ledger_id for x in stored[0]] if stored is not None else []
        # in the order created: an old broker's ledger that its refused list write deleted is one of them
        self.listed += [x for x in (*ids, *run.abandoned) if x not in self.listed]
        for ledger in ids:
            self.entries[ledger] = self._entries(ledger)
        counts = {ledger: len(self.entries.get(ledger, ())) for ledger in self.listed}
        topic = run.topic
        current, age, highest = NO_LEDGER, 0, tuple(-1 for _ in run.producers)
        persisted = highest
        pending: tuple[tuple[int, int], ...] = ()
        queued: tuple[tuple[int, int], ...] = ()
        closing = False
        last_confirmed: Position = NO_POSITION
        slowest = tuple(NO_POSITION for _ in self.spec.cursors)
        marks = run.marks_at_stop
        if topic is not None:
            ml = topic.ml
            if ml.current is not None:
                current = self.number(ml.current.ledger_id)
                age = run.now - ml.created_ms
            pending = tuple((topic.producer_number(w.producer), w.sequence_id) for w in topic.waiting)
            queued = tuple((topic.producer_number(w.producer), w.sequence_id) for w in topic.queued)
            closing = topic.closing
            highest = tuple(topic.highest_pushed.get(p.name, -1) for p in run.producers)
            persisted = tuple(topic.highest_written.get(p.name, -1) for p in run.producers)
            ledger, entry = ml.last_confirmed()
            last_confirmed = (self.number(ledger), entry)
            held = [ml.positions[f"sub-{c}"] for c in self.spec.cursors]
            slowest = tuple((self.number(x), e) for x, e in held)
            marks = [run.subscription(c).mark_delete for c in self.spec.cursors]
        last = run.last_id
        return ManagedLedgerState(
            ledgers=tuple(self.number(x) for x in ids),
            entries=tuple(self.entries.get(x, ()) for x in self.listed),
            deleted=frozenset(self.number(x) for x in self.listed if x not in ids),
            persistent_mark_delete=tuple(self._mark_delete(f"sub-{c}", ids, counts) for c in self.spec.cursors),
            broker_up=run.up,
            current=current,
            age=age,
            pending=pending,
            closing=closing,
            queued=queued,
            highest_pushed=highest,
            highest_persisted=persisted,
            last_confirmed=last_confirmed,
            slowest_position=slowest,
            mark_delete=tuple((self.number(x), e) for x, e in marks),
            crashes=run.crashes,
            create_failures=run.create_failures,
            sent=tuple(p.sent for p in run.producers),
            acked=tuple(p.acked for p in run.producers),
            net=tuple(tuple(p.net) for p in run.producers),
            reconnecting=tuple(p.reconnecting for p in run.producers),
            disconnects=run.disconnects,
            last_id=NO_MESSAGE_ID
            if last.ledger_id == -1
            else (self.number(last.ledger_id), last.entry_id, last.partition, last.batch_index),
            acknowledged=tuple((self.number(x), e) for x, e in run.acknowledged),
            takeovers=run.takeovers,
            old_broker=tuple(self.number(x) for x in old.ids()) if (old := run.old_broker) is not None else (),
            old_broker_stale=old is not None and stored is not None and stored[1] != old.version,
        )

    def _entries(self, ledger: int) -> tuple[tuple[int, int], ...]:
        """The entries the bookies store of ``ledger``: (producer number, sequence id) each, in order."""
        messages = [decode_message(payload) for payload in bookie_entries(self.run.cluster, ledger)]
        return tuple((int(m.producer.rpartition("-")[2]), m.sequence_id) for m in messages)

    def _mark_delete(self, cursor: str, ids: list[int], counts: dict[int, int]) -> Position:
        """The subscription's mark-delete position as its durable state holds it, in the spec's numbering."""
        cursors_ledger, snapshot, _ = self.run.store.read_cursor(TOPIC, cursor, ids, lambda x: counts.get(x, 0))
        md = snapshot.mark_delete
        if cursors_ledger >= 0 and self.run.ledger_metadata_exists(cursors_ledger):
            records = self._records(cursors_ledger, ids, counts)
            if records:
                md = records[-1]
        return (self.number(md[0]), md[1])

    def _records(self, ledger: int, ids: list[int], counts: dict[int, int]) -> list[Position]:
        return [
            self.run.store.decode_position_info(data, ids, lambda x: counts.get(x, 0)).mark_delete
            for data in bookie_entries(self.run.cluster, ledger)
        ]
