"""The abstraction function: the cursor spec's state (``CursorState``) of a :class:`~.run.CursorRun`.

Read from the engine's parts, each by its own interface:

=======================  ======================================================
spec variables           read from
=======================  ======================================================
``ledgers``              the managed ledger's znode (the ledger list, decoded
                         from Pulsar's bytes); each ledger's entries from the
                         bookies (the entry ids they store)
``deleted``              ledgers listed before and listed no more, with their
                         entries when last listed
``next_id``              one past the last ledger id BookKeeper handed out
``cursor_ledgers``       the ledgers that were never listed and whose metadata
                         BookKeeper still has, with their records read from the
                         bookies and decoded (PositionInfo)
``znode``                the cursor's znode, decoded (ManagedCursorInfo)
``status`` ...           the cursor's memory (``ManagedCursor``); while the
``dirty``                broker is down, or before the cursor is restored,
                         ``Uninitialized`` and empty
``slowest_position``     the managed ledger's position of the cursor
                         (``ManagedLedger.positions``); none while the
                         broker is down or the cursor not restored
``crashes``, ``faults``  the run's counts: crashes, BookKeeper calls and
``lost``, ``acked``      cursor-znode writes failed on purpose, cursor ledgers
                         lost; what the consumer acknowledged
``durable``              a history variable of the spec: taken from the spec's
                         state (nothing in the engine holds it)
=======================  ======================================================

Acknowledged batch indexes are the spec's ``batch``; the engine, as Pulsar,
keeps the indexes *not* acknowledged: the one is the other's complement in
``range(BatchSize)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ledgerspec.reference.bookie import DigestType
from ledgerspec.reference.bookie.entry import decode_entry
from ledgerspec.reference.ledger import InProcessCluster
from ledgerspec.reference.managed_ledger.cursor import NO_LEDGER_ID
from ledgerspec.reference.managed_ledger.run import SUBSCRIPTION, TOPIC, CursorRun
from ledgerspec.reference.managed_ledger.snapshot import CursorSnapshot
from ledgerspec.spec.cursor.cursor import UNINITIALIZED, CursorInfo, CursorState, Message, PositionInfo
from ledgerspec.spec.positions import NO_POSITION, Position

__all__ = ["CursorAbstraction", "bookie_entries"]


class CursorAbstraction:
    """The spec state of one run; it remembers the data ledgers it has seen listed (module docstring)."""

    def __init__(self, run: CursorRun) -> None:
        self.run = run
        self.listed: dict[int, int] = {}  # data ledger id -> entries when last listed

    def __call__(self, durable: frozenset[Message]) -> CursorState:
        run = self.run
        stored = run.store.read_ledgers(TOPIC)
        ids = tuple(x.ledger_id for x in stored[0]) if stored is not None else ()
        ledgers = tuple((ledger, len(self._entries(ledger))) for ledger in ids)
        self.listed.update(ledgers)
        counts = dict(self.listed)

        def count(ledger: int) -> int:
            return counts.get(ledger, 0)

        cursor_ledgers = tuple(
            (ledger, self._records(ledger, ids, count))
            for ledger in run.created
            if ledger not in self.listed and run.ledger_metadata_exists(ledger)
        )
        cursors_ledger, stored_cursor, _ = run.store.read_cursor(TOPIC, SUBSCRIPTION, ids, count)
        snap = self._spec_snapshot(stored_cursor)
        cursor = run.cursor
        memory = self._spec_snapshot(cursor.snapshot()) if cursor is not None else None
        return CursorState(
            ledgers=ledgers,
            deleted=frozenset((x, n) for x, n in self.listed.items() if x not in ids),
            next_id=run.created[-1] + 1,
            cursor_ledgers=cursor_ledgers,
            znode=CursorInfo(cursors_ledger, snap.mark_delete, snap.ranges, snap.batch),
            broker_up=run.up,
            crashes=run.crashes,
            status=cursor.status if cursor is not None else UNINITIALIZED,
            mark_delete=memory.mark_delete if memory is not None else NO_POSITION,
            ranges=memory.ranges if memory is not None else frozenset(),
            batch=memory.batch if memory is not None else frozenset(),
            cursor_ledger=cursor.ledger_id if cursor is not None else NO_LEDGER_ID,
            switching_to=cursor.switching_to.ledger_id
            if cursor is not None and cursor.switching_to is not None
            else NO_LEDGER_ID,
            retired=frozenset(cursor.retired) if cursor is not None else frozenset(),
            dirty=cursor.dirty if cursor is not None else False,
            slowest_position=cursor.ml.positions[cursor.name] if cursor is not None else NO_POSITION,
            resetting=cursor.resetting if cursor is not None and cursor.resetting is not None else NO_POSITION,
            resets=run.resets,
            reset_unapplied=run.reset_unapplied if run.reset_unapplied is not None else NO_POSITION,
            faults=run.failed_writes,
            lost=run.losses,
            acked=frozenset(run.acked),
            durable=durable,
        )

    def _spec_snapshot(self, snapshot: CursorSnapshot) -> PositionInfo:
        return PositionInfo(snapshot.mark_delete, snapshot.acked, self._acked_indexes(snapshot.unacked_batch))

    def _acked_indexes(self, unacked: Mapping[Position, frozenset[int]]) -> frozenset[Message]:
        size = self.run.config.batch_size
        return frozenset((p[0], p[1], i) for p, left in unacked.items() for i in range(size) if i not in left)

    def _entries(self, ledger: int) -> set[int]:
        """The entry ids the bookies store of ``ledger``."""
        return {e for _, view in self.run.cluster.views(ledger) for e in view.entries}

    def _records(self, ledger: int, ids: tuple[int, ...], count: Callable[[int], int]) -> tuple[PositionInfo, ...]:
        """The cursor ledger's records, in entry order, read from the bookies that store them."""
        return tuple(
            self._spec_snapshot(self.run.store.decode_position_info(payload, ids, count))
            for payload in bookie_entries(self.run.cluster, ledger)
        )


def bookie_entries(cluster: InProcessCluster, ledger: int) -> list[bytes]:
    """The payloads of the entries the bookies store of ``ledger``, in entry order, each read from a bookie that
    has it (bypassing the client: no fencing, no LAC)."""
    nodes = list(cluster.nodes.values())
    payloads = []
    for entry in sorted({e for node in nodes for e in node.view(ledger).entries}):
        node = next(n for n in nodes if n.up and entry in n.view(ledger).entries)
        assert node.bookie is not None
        payloads.append(decode_entry(node.bookie.read_entry(ledger, entry), DigestType.CRC32C).payload)
    return payloads
