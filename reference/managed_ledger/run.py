"""One topic with one durable cursor, on a broker that crashes and restarts: the cursor spec's world, run for real.

:class:`CursorRun` sets up an in-process BookKeeper cluster, a metadata
store (embedded unless one is given: a ZooKeeper store works the same), opens
the managed ledger ``public/default/persistent/topic`` and its subscription
``sub`` at the earliest position, and then takes one step per call, each
what a broker, a producer or a consumer does:

=========================  ===================================================
call                       steps (the cursor spec's actions)
=========================  ===================================================
``publish()``              ``EntryPublished``, ``LedgerRollsOver`` when full
``ack(position, index)``   ``ConsumerAcks`` (none for a message acked before)
``reset(position)``        ``CursorResetStarts``: read again (or on) after
                           ``position``; the next flush persists it
``flush()``                the persist: ``CursorCreatesLedger``,
                           ``CursorSwitchesLedger``, ``CursorDeletesOldLedger``,
                           ``CursorPersistsToLedger``, or a fallback to the
                           znode after a failure
``trim()``                 ``CursorSkipsConsumedLedger``, ``TrimConsumedLedgers``
``close_cursor()``         ``CursorCloses``, ``CursorDeletesOldLedger``
``crash()``                ``BrokerCrashes``: the broker's memory is dropped
``restart()``              ``ManagedLedgerOpens``, ``CursorRecovers``
``fail_next(call)``        the next BookKeeper ``creates`` or ``appends`` fails,
                           or (``znode_writes``) the next cursor-znode write
                           of a switch or a fallback, or (``first_appends``)
                           a new cursor ledger's first record and its fallback
``lose_cursor_ledger()``   ``CursorLedgerLost``: the ledger the znode names is
                           gone from BookKeeper
``age_ledger()``           ``LedgerRollsOver`` of a ledger holding an entry,
                           once it is ``maximumRolloverTimeMs`` old (the
                           managed ledger's timer; with ``rollover_by_time``)
=========================  ===================================================

``crash_at`` names a crash point (``reference/managed_ledger/cursor.py`` lists
them) at which the next step stops the broker, as a crash would: what was
written before stays, the rest never happens, and the run logs
``BrokerCrashes``.

The consumer's acknowledgements are kept (``acked``): the run is the
consumer, and what it acknowledged is what the spec's invariants speak of.
A reset that takes effect makes what precedes its position acknowledged and
nothing after it, beside the messages of trimmed ledgers, which no reset
brings back.
"""

from __future__ import annotations

import attrs
from ledgerspec.reference.constants import ConstantsTable
from ledgerspec.reference.ledger import InProcessCluster
from ledgerspec.reference.managed_ledger.bookkeeper import BookKeeperFaults, BookKeeperLedgers
from ledgerspec.reference.managed_ledger.cursor import CursorStateError, ManagedCursor
from ledgerspec.reference.managed_ledger.events import ManagedLedgerLog
from ledgerspec.reference.managed_ledger.managed_ledger import ManagedLedger, ManagedLedgerConfig
from ledgerspec.reference.managed_ledger.meta_store import ManagedLedgerStore
from ledgerspec.reference.metadata import ANY_VERSION, EmbeddedMetadataStore, LedgerMetadataStore, MetadataStore
from ledgerspec.spec.cursor.cursor import NO_MESSAGES_AFTER
from ledgerspec.spec.positions import Position
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = [
    "SPEC_CONSTANTS",
    "SUBSCRIPTION",
    "TOPIC",
    "UNBOUNDED",
    "BrokerCrashed",
    "BrokerHarness",
    "CursorRun",
    "RunConfig",
]

TOPIC = "public/default/persistent/topic"
SUBSCRIPTION = "sub"


class BrokerCrashed(Exception):  # noqa: N818 (a control-flow signal, not an error)
    """The broker stopped at a crash point."""


@attrs.frozen
class RunConfig:
    """The run's sizes (the cursor spec's constants of the same meaning) and a seeded bug."""

    max_entries_per_ledger: int = 2  # MaxEntriesPerLedger
    metadata_max_entries_per_ledger: int = 2  # MetadataMaxEntriesPerLedger
    batch_size: int = 1  # BatchSize: messages in an entry
    znode_fallback: str = NO_MESSAGES_AFTER  # ZnodeFallback: when a failed cursor-ledger creation writes the znode
    rollover_by_time: bool = False  # RolloverByTime: ledgers age past maximumRolloverTimeMs (age_ledger)
    bookies: int = 2
    mutant: str | None = None

    def managed_ledger_config(self) -> ManagedLedgerConfig:
        aging = {"maximum_rollover_ms": ROLLOVER_MS} if self.rollover_by_time else {}
        return ManagedLedgerConfig(
            max_entries_per_ledger=self.max_entries_per_ledger,
            **aging,
            minimum_rollover_ms=0,
            metadata_max_entries_per_ledger=self.metadata_max_entries_per_ledger,
            cursor_znode_fallback=self.znode_fallback,
            mutant=self.mutant,
        )

    def spec_constants(self) -> dict[str, int | str]:
        """The cursor spec's constants for runs of this configuration: its sizes, and bounds no run reaches."""
        return {**UNBOUNDED_BOUNDS, **SPEC_CONSTANTS.constants(self)}


#: The cursor spec's constants a run sets, with their :class:`RunConfig` fields.
SPEC_CONSTANTS = ConstantsTable(
    {
        "MaxEntriesPerLedger": "max_entries_per_ledger",
        "MetadataMaxEntriesPerLedger": "metadata_max_entries_per_ledger",
        "BatchSize": "batch_size",
        "RolloverByTime": "rollover_by_time",
        "ZnodeFallback": "znode_fallback",
    }
)
UNBOUNDED = 1_000_000  # a bound of the spec that no run reaches
#: maximumRolloverTimeMs of a run whose ledgers age (``rollover_by_time``); the clock moves only by it.
ROLLOVER_MS = 1_000
#: The cursor spec's bounds on what a run does: entries, crashes, failed writes, lost cursor ledgers.
UNBOUNDED_BOUNDS = {
    "MaxEntries": UNBOUNDED,
    "MaxCrashes": UNBOUNDED,
    "MaxFaults": UNBOUNDED,
    "MaxLedgerLoss": UNBOUNDED,
    "MaxResets": UNBOUNDED,
}


class BrokerHarness:
    """What a run of a broker keeps across its crashes: the bookies, the metadata store, the armed crash point."""

    def __init__(self, root: str, bookies: int, store: MetadataStore | None) -> None:
        self.cluster = InProcessCluster(root, bookies=bookies, sync_to_disk=False)
        self.metadata = store or EmbeddedMetadataStore()
        self.ledger_metadata = LedgerMetadataStore(self.metadata)
        self.store = ManagedLedgerStore(self.metadata)
        self.crash_at: str | None = None

    def _crash_point(self, point: str) -> None:
        if point == self.crash_at:
            self.crash_at = None
            raise BrokerCrashed(point)

    def close(self) -> None:
        """Close the bookies' files: the run is over (its directory may then be removed)."""
        self.cluster.close()

    def ledger_metadata_exists(self, ledger_id: int) -> bool:
        return self.metadata.exists(self.ledger_metadata.path(ledger_id)) is not None


class CursorRun(BrokerHarness):
    """A topic, its subscription and a broker, driven one step at a time (see the module docstring)."""

    def __init__(self, root: str, config: RunConfig | None = None, *, store: MetadataStore | None = None) -> None:
        self.config = config or RunConfig()
        super().__init__(root, self.config.bookies, store)
        self.faults = BookKeeperFaults()
        self.log = ManagedLedgerLog()
        self.log.listeners.append(self._follow)  # first: every check after it reads the record it keeps
        self.created: list[int] = []  # every ledger id BookKeeper handed out, in order
        self.crashes = 0
        self.losses = 0
        self.resets = 0
        self.reset_unapplied: Position | None = None  # a reset whose record is written, not yet taken
        self.acked: set[tuple[int, int, int]] = set()  # (ledger, entry, batch index) the consumer acknowledged
        self.ml: ManagedLedger | None = None
        self.now = 0  # the broker's clock, in milliseconds: it moves only when a ledger is let age (age_ledger)
        self._start()
        assert self.ml is not None
        self.ml.open_cursor(SUBSCRIPTION, earliest=True)

    # -- the broker ------------------------------------------------------------------
    def _start(self) -> None:
        bookkeeper = BookKeeperLedgers(
            self.cluster, self.ledger_metadata, faults=self.faults, on_create=self.created.append
        )
        self.ml = ManagedLedger(
            TOPIC,
            self.store,
            bookkeeper,
            self.config.managed_ledger_config(),
            log=self.log,
            clock=lambda: self.now,
            crash_point=self._crash_point,
        )
        self.ml.initialize()

    @property
    def up(self) -> bool:
        return self.ml is not None

    @property
    def cursor(self) -> ManagedCursor | None:
        return self.ml.cursors.get(SUBSCRIPTION) if self.ml is not None else None

    def _live(self) -> tuple[ManagedLedger, ManagedCursor]:
        if self.ml is None or self.cursor is None:
            raise BrokerCrashed("the broker is down")
        return self.ml, self.cursor

    def crash(self) -> None:
        """The broker dies: its memory is gone; the store and the bookies keep what they have."""
        self.ml = None
        self.crash_at = None
        # Failures meant for this broker's calls.
        self.faults.creates = self.faults.appends = self.faults.first_appends = 0
        self.store.faults.writes = 0
        self.crashes += 1
        self.log.emit("BrokerCrashes")

    def restart(self) -> None:
        """A new broker opens the managed ledger: recovery, a new ledger, the cursor's restore."""
        if self.ml is not None:
            raise ValueError("the broker is up: crash it first")
        self._guarded(self._start)

    def _guarded(self, step: object) -> bool:
        """Take a step; a crash point reached on the way crashes the broker. Whether it crashed."""
        try:
            step()  # type: ignore[operator]
        except BrokerCrashed:
            self.crash()
            return True
        return False

    def age_ledger(self) -> bool:
        """Time passes until the ledger being written is ``maximumRolloverTimeMs`` old, and the timer the managed
        ledger set at its creation fires (``rollCurrentLedgerIfFull``): it rolls the ledger over if it holds an
        entry (the cursor spec's ``LedgerRollsOver`` with ``RolloverByTime``). Whether it rolled."""
        ml, _ = self._live()
        self.now = ml.created_ms + ml.config.maximum_rollover_ms
        rolled: list[bool] = []
        self._guarded(lambda: rolled.append(ml.roll_over_if_full()))
        return bool(rolled and rolled[0])

    # -- the producer and the consumer -------------------------------------------------
    def publish(self) -> Position | None:
        ml, _ = self._live()
        published: list[Position] = []
        self._guarded(lambda: published.append(ml.add_entry(b"entry %d" % len(self.created))))
        return published[0] if published else None

    def ack(self, position: Position, index: int = 0) -> bool:
        """The consumer acknowledges one message; whether the cursor took it (not acknowledged before)."""
        _, cursor = self._live()
        batched = self.config.batch_size > 1
        if cursor.covers(position, index):
            return False
        self.acked.add((position[0], position[1], index))  # the consumer's record, before the broker takes it
        return cursor.ack(position, index if batched else None, self.config.batch_size)

    def reset(self, position: Position) -> None:
        """The application resets the subscription to read after ``position`` (an entry, or the first position)."""
        _, cursor = self._live()
        self.resets += 1  # counted before the cursor logs the step
        try:
            cursor.reset(position)
        except (ValueError, CursorStateError):
            self.resets -= 1
            raise

    def _follow(self, event: EngineEvent) -> None:
        """Before any check reads them, the consumer's record and the reset's history follow the step: a reset whose
        record is written waits (``reset_unapplied``), and is taken when the cursor or a restore takes it."""
        cursor = self.cursor
        if event.action in ("CursorResetCompletes", "CursorRecovers") and self.reset_unapplied is not None:
            self._reset_taken(self.reset_unapplied)
            self.reset_unapplied = None
        elif cursor is not None and cursor.reset_written and self.reset_unapplied is None:
            self.reset_unapplied = cursor.resetting

    def _reset_taken(self, position: Position) -> None:
        ml = self.ml
        assert ml is not None
        listed = ml.ids()
        before = {
            (ledger, e, i)
            for ledger in listed
            for e in range(ml.entries_of(ledger))
            if (ledger, e) <= position
            for i in range(self.config.batch_size)
        }
        self.acked = {m for m in self.acked if m[0] not in listed} | before

    # -- the cursor's persistence ------------------------------------------------------
    def flush(self) -> bool:
        _, cursor = self._live()
        return self._guarded(cursor.flush)

    def trim(self) -> bool:
        ml, _ = self._live()
        return self._guarded(ml.trim_consumed_ledgers)

    def close_cursor(self) -> bool:
        _, cursor = self._live()
        return self._guarded(cursor.close)

    # -- faults ----------------------------------------------------------------------
    def fail_next(self, call: str) -> None:
        """The next BookKeeper ledger creation (``creates``) or add (``appends``) fails, or the next write of the
        cursor's znode that names a new cursor ledger or stands in for a failed BookKeeper call
        (``znode_writes``). ``first_appends`` fails the first record of the next cursor ledger created and the
        znode write that stands in for it (``CursorLedgerFirstWriteFails``)."""
        if call in ("znode_writes", "first_appends"):
            self.store.faults.writes += 1
            if call == "znode_writes":
                return
        setattr(self.faults, call, getattr(self.faults, call) + 1)

    @property
    def faults_pending(self) -> bool:
        """Is a failure armed by :meth:`fail_next` still to come?"""
        f = self.faults
        return bool(f.creates or f.appends or f.first_appends or self.store.faults.writes)

    @property
    def failed_writes(self) -> int:
        """The writes failed on purpose so far, to BookKeeper and to the cursor's znode (the spec's ``faults``)."""
        return self.faults.failed + self.store.faults.failed

    def lose_cursor_ledger(self) -> int | None:
        """BookKeeper loses the cursor ledger the znode names, if it still has it; its id. Never after a reset
        (the cursor spec's ``CursorLedgerLost``: the rollback would skip what the reset made unacknowledged)."""
        if self.resets:
            return None
        ml_ids = self._listed_ids()
        named = self.store.read_cursor(TOPIC, SUBSCRIPTION, ml_ids, lambda _: 0)[0]
        if named < 0 or not self.ledger_metadata_exists(named):
            return None
        self.ledger_metadata.delete(named, ANY_VERSION)
        self.losses += 1
        self.log.emit("CursorLedgerLost", named, process="bookkeeper")
        return named

    def _listed_ids(self) -> tuple[int, ...]:
        stored = self.store.read_ledgers(TOPIC)
        return tuple(x.ledger_id for x in stored[0]) if stored is not None else ()
