"""A managed ledger (Pulsar's ``ManagedLedgerImpl``): a topic partition's list of BookKeeper ledgers.

Only the last ledger of the list is written to. Its life, step by step as
the cursor spec (``spec/cursor/cursor.py``) and the managed-ledger spec
(``spec/managed_ledger/managed_ledger.py``) take it:

- **open** (:meth:`ManagedLedger.open`, the spec's ``ManagedLedgerOpens``):
  read the ledger list from the znode; recover-open its last ledger (fence
  it, close it at its last entry, fix its ``LedgerInfo``), drop it if it is
  empty; create a new ledger and write the list; then restore every durable
  cursor stored under the znode (``CursorRecovers``);
- **publish** (:meth:`ManagedLedger.add_entry`, ``EntryPublished``): add the
  entry to the last ledger; when that ledger is full (``currentLedgerIsFull``),
  roll over (``LedgerRollsOver``): close it, create the next, write the list;
- **trim** (:meth:`ManagedLedger.trim_consumed_ledgers`): the managed ledger
  holds a position for each cursor (``ManagedCursorContainer``: the
  mark-delete at the cursor's open, then each mark-delete a persist
  completed); a cursor whose mark-delete is at the last entry of a ledger is
  held at the start of the next (``CursorSkipsConsumedLedger``,
  ``maybeUpdateCursorBeforeTrimmingConsumedLedger``: its own mark-delete
  stays); the ledgers before the slowest of those positions' ledger (past it,
  when the position is at its last entry and it is not the current ledger)
  leave the list, never the last one (``TrimConsumedLedgers``,
  ``internalTrimLedgers``), and are deleted from BookKeeper.

A restart is :meth:`ManagedLedger.close` and :meth:`ManagedLedger.open` again;
a broker crash is dropping the object: nothing is written, the store and the
bookies keep what they have.

Rollover (seed 002, ``currentLedgerIsFull``): the ledger is full when it holds
``max_entries_per_ledger`` entries or ``max_size_per_ledger_bytes`` bytes, or is
``maximum_rollover_ms`` old; and, if ``minimum_rollover_ms`` is set, it is older
than that. A limit of 0 is reached at once, as in Pulsar's ``ManagedLedgerConfig``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

import attrs
from ledgerspec.reference.ledger import LedgerHandle
from ledgerspec.reference.managed_ledger.bookkeeper import BookKeeperError, BookKeeperLedgers, NoSuchLedgerError
from ledgerspec.reference.managed_ledger.cursor import ACTIVE, CursorStatus, ManagedCursor
from ledgerspec.reference.managed_ledger.events import ManagedLedgerLog
from ledgerspec.reference.managed_ledger.meta_store import ManagedLedgerStore, StoredLedger
from ledgerspec.reference.managed_ledger.snapshot import CursorSnapshot
from ledgerspec.reference.metadata import ANY_VERSION, BadVersionError
from ledgerspec.spec.cursor.cursor import NO_MESSAGES_AFTER, ZNODE_FALLBACKS
from ledgerspec.spec.managed_ledger.managed_ledger import BUGS
from ledgerspec.spec.positions import NO_POSITION, Position, no_messages_after, recovered_position

__all__ = [
    "LOG",
    "MUTANTS",
    "TOPIC_ONLY_MUTANTS",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "faults_injected",
]

#: The broker's log lines, in the words of Pulsar's ManagedLedgerImpl and ManagedCursorImpl (seed 003).
LOG = logging.getLogger("ledgerspec.managed_ledger")


@contextlib.contextmanager
def faults_injected() -> Iterator[None]:
    """While a run injects faults on purpose: what they make the broker warn of, as Pulsar's does (a ledger it
    cannot close, which another broker fenced or deleted), is their expected outcome, which the run's trace
    records; only errors are logged."""
    level = LOG.level
    LOG.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        LOG.setLevel(level)


MUTANTS = {
    "restore_ignores_no_ledger": "the restore takes cursorsLedgerId = -1 for a ledger to open, and rolls back",
    "no_store_fallback": (
        "when the cursor ledger cannot be created, the mark-delete is reported done but not written to the "
        "metadata store (apache/pulsar#20935)"
    ),
    "restore_skips_unacked": "the restore moves the mark-delete past the gaps to the last individually acked entry",
    "trim_deletes_needed_ledger": (
        "trimming also deletes the ledger the managed ledger's position of the slowest cursor points into"
    ),
    "skip_unconsumed_ledger": (
        "the skip over a consumed ledger holds a cursor at the next ledger before it acknowledged its ledger's last "
        "entry"
    ),
    "failed_switch_keeps_new_ledger": (
        "when the znode write naming a new cursor ledger fails, the cursor writes on to that ledger instead of "
        "deleting it"
    ),
    "failed_znode_write_counted_persisted": (
        "when the znode write standing in for a failed BookKeeper call fails too, the cursor counts its state as "
        "persisted"
    ),
    "switch_before_first_record": (
        "a new cursor ledger is named in the znode before its first record is written (createNewMetadataLedger "
        "writes it first), so a crash in between restores from an empty ledger"
    ),
    "reset_keeps_acks": (
        "a reset's record keeps the individual acks from before the reset, as Pulsar 4.0.7 writes it "
        "(internalResetCursor)"
    ),
    "persists_read_position": BUGS["persists_read_position"],  # the managed-ledger spec's seeded bug's twin
    "reopen_confirms_new_ledger": BUGS["reopen_confirms_new_ledger"],  # and these two too
    "blind_ledger_list_write": BUGS["blind_ledger_list_write"],
}

#: The mutants a cursor's run cannot show, only a topic's: they change the managed ledger's lastConfirmedEntry after
#: a reopen, or its ledger list after another broker took the topic over, which the cursor spec leaves out.
TOPIC_ONLY_MUTANTS = frozenset({"reopen_confirms_new_ledger", "blind_ledger_list_write"})


def _check_mutant(_: object, __: object, value: str | None) -> None:
    if value is not None and value not in MUTANTS:
        raise ValueError(f"unknown managed-ledger mutant {value!r}; known: {', '.join(MUTANTS)}")


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


@attrs.frozen
class ManagedLedgerConfig:
    """The managed ledger's settings (Pulsar's broker.conf defaults; see the module docstring on rollover)."""

    max_entries_per_ledger: int = 50_000  # managedLedgerMaxEntriesPerLedger
    max_size_per_ledger_bytes: int = 2048 * 1024 * 1024  # managedLedgerMaxSizePerLedgerMbytes
    minimum_rollover_ms: int = 10 * 60_000  # managedLedgerMinLedgerRolloverTimeMinutes
    maximum_rollover_ms: int = 240 * 60_000  # managedLedgerMaxLedgerRolloverTimeMinutes
    metadata_max_entries_per_ledger: int = 50_000  # managedLedgerCursorMaxEntriesPerLedger
    # When a failed cursor-ledger creation writes the cursor's state to the znode (the cursor spec's ZnodeFallback):
    # Pulsar 4.0.7 does only when no message follows the mark-delete.
    cursor_znode_fallback: str = attrs.field(
        default=NO_MESSAGES_AFTER, validator=attrs.validators.in_(tuple(ZNODE_FALLBACKS))
    )
    mutant: str | None = attrs.field(default=None, validator=_check_mutant)  # a seeded bug from MUTANTS


class ManagedLedgerError(Exception):
    """The managed ledger cannot do what was asked: the message says what, and which ledger."""


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another broker wrote the ledger list since this one read it (``handleBadVersion``): it is fenced."""


@attrs.define
class _Ledger:
    ledger_id: int
    entries: int
    size: int
    timestamp: int  # when it was closed; 0 while open


def _ignore(point: str) -> None:
    pass


class ManagedLedger:
    """One topic partition's ledger list and its durable cursors (see the module docstring)."""

    def __init__(
        self,
        name: str,
        store: ManagedLedgerStore,
        bookkeeper: BookKeeperLedgers,
        config: ManagedLedgerConfig | None = None,
        *,
        log: ManagedLedgerLog | None = None,
        clock: Callable[[], int] = _wall_clock_ms,
        crash_point: Callable[[str], None] = _ignore,
    ) -> None:
        """A managed ledger not opened yet: :meth:`initialize` opens it (:meth:`open` does both)."""
        self.name = name
        self.store = store
        self.bookkeeper = bookkeeper
        self.config = config or ManagedLedgerConfig()
        self.log = log or ManagedLedgerLog()
        self.clock = clock
        self.crash_point = crash_point
        self.ledgers: list[_Ledger] = []
        self.current: LedgerHandle | None = None
        self.created_ms = 0
        self.last_confirmed_entry: Position = NO_POSITION  # lastConfirmedEntry: the last entry readers are shown
        self.version: int | None = None  # the znode's version last written or read
        self.cursors: dict[str, ManagedCursor] = {}
        self.positions: dict[str, Position] = {}  # ManagedCursorContainer: each cursor's position for trimming
        self.closed = False
        self.abandoned: list[int] = []  # ledgers created and deleted, as the list could not name them
        self._discarded: list[int] = []  # closed with no entry, left out of the list: deleted once it is written

    # -- opening ---------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        name: str,
        store: ManagedLedgerStore,
        bookkeeper: BookKeeperLedgers,
        config: ManagedLedgerConfig | None = None,
        *,
        log: ManagedLedgerLog | None = None,
        clock: Callable[[], int] = _wall_clock_ms,
        crash_point: Callable[[str], None] = _ignore,
    ) -> ManagedLedger:
        """Open the managed ledger ``name`` (``tenant/namespace/persistent/topic``), new or stored."""
        ml = cls(name, store, bookkeeper, config, log=log, clock=clock, crash_point=crash_point)
        ml.initialize()
        return ml

    def initialize(self) -> None:
        """Read the ledger list, recover its last ledger, create a new one, restore the cursors."""
        LOG.info("Opening managed ledger %s", self.name)
        stored = self.store.read_ledgers(self.name)
        if stored is not None:
            ledgers, self.version = stored
            self.ledgers = [_Ledger(x.ledger_id, x.entries, x.size, x.timestamp) for x in ledgers]
            self._recover_last_ledger()
        self._create_current()
        self.last_confirmed_entry = self._opened_last_confirmed()
        if stored is not None:
            self.log.emit("ManagedLedgerOpens")
            for cursor in self.store.cursor_names(self.name):
                ManagedCursor.recover(self, cursor)

    def _recover_last_ledger(self) -> None:
        """Fence and close the last ledger at its last entry; drop it when it holds none."""
        if not self.ledgers:
            return
        last = self.ledgers[-1]
        try:
            handle = self.bookkeeper.open_recovered(last.ledger_id)
        except NoSuchLedgerError as e:
            raise ManagedLedgerError(
                f"managed ledger {self.name}: its last ledger {last.ledger_id} is gone from BookKeeper"
            ) from e
        entries = handle.metadata.last_entry_id + 1
        if entries == 0:
            self.ledgers.pop()
            self.bookkeeper.delete(last.ledger_id)
        else:
            last.entries, last.size = entries, handle.metadata.length
            last.timestamp = last.timestamp or self.clock()

    def _opened_last_confirmed(self) -> Position:
        """``lastConfirmedEntry`` once the new ledger is created (``initializeBookKeeper``, Pulsar 4.0.7): the new
        ledger's ``(l, -1)``, stepped back over the ledgers that hold no entry to the last entry of the latest
        that holds one."""
        written = [x for x in self.ledgers[:-1] if x.entries > 0]
        if not written or self.config.mutant == "reopen_confirms_new_ledger":  # MUTANT: no step back
            return (self.ledgers[-1].ledger_id, -1)
        return (written[-1].ledger_id, written[-1].entries - 1)

    def _create_current(self) -> None:
        handle = self.bookkeeper.create()
        LOG.info("[%s] Created ledger %d", self.name, handle.ledger_id)
        self.ledgers.append(_Ledger(handle.ledger_id, 0, 0, 0))
        self.current, self.created_ms = handle, self.clock()
        try:
            self._write_ledgers()
        except BadVersionError as e:
            # createComplete's operationFailed (ManagedLedgerImpl, Pulsar 4.0.7): handleBadVersion fences the
            # managed ledger, and the ledger just created is deleted.
            self.ledgers.pop()
            self.current, self.closed = None, True
            self.bookkeeper.delete(handle.ledger_id)
            self.abandoned.append(handle.ledger_id)
            raise ManagedLedgerFencedError(
                f"managed ledger {self.name}: the ledger list changed since version {self.version} was read; "
                f"ledger {handle.ledger_id} deleted"
            ) from e
        for ledger_id in self._discarded:
            self.bookkeeper.delete(ledger_id)
        self._discarded.clear()

    def _write_ledgers(self) -> None:
        listed = [
            StoredLedger(x.ledger_id, x.entries, x.size, x.timestamp)
            if self.current is None or x.ledger_id != self.current.ledger_id
            else StoredLedger(x.ledger_id, 0, 0, 0)  # the open ledger: its entries are known once it is closed
            for x in self.ledgers
        ]
        version = self.version
        if version is not None and self.config.mutant == "blind_ledger_list_write":  # MUTANT: no compare-and-set
            version = ANY_VERSION
        self.version = self.store.write_ledgers(self.name, listed, version)

    # -- positions -------------------------------------------------------------------
    def ids(self) -> tuple[int, ...]:
        return tuple(x.ledger_id for x in self.ledgers)

    def entries_of(self, ledger_id: int) -> int:
        return next((x.entries for x in self.ledgers if x.ledger_id == ledger_id), 0)

    def holds(self, position: Position) -> bool:
        return 0 <= position[1] < self.entries_of(position[0])

    def first_position(self) -> Position:
        """``getFirstPosition``: before the first entry of the first ledger of the list."""
        return (self.ledgers[0].ledger_id, -1) if self.ledgers else NO_POSITION

    def last_confirmed(self) -> Position:
        """``getLastPosition``: ``lastConfirmedEntry``, set by each add and when the managed ledger is opened; a
        rollover leaves it at the last entry of the ledger closed."""
        return self.last_confirmed_entry

    def no_messages_after(self, position: Position) -> bool:
        """``isNoMessagesAfterPos``: no entry of the list lies after the position."""
        return no_messages_after(self.ids(), self.entries_of, position)

    def recovered_position(self, mark_delete: Position) -> Position:
        """``recoveredCursor``: a mark at (l, -1) of a ledger gone moves to the next; none passes
        ``lastConfirmedEntry``."""
        return min(recovered_position(self.ids(), self.entries_of, mark_delete), self.last_confirmed_entry)

    # -- publishing ------------------------------------------------------------------
    def add_entry(self, data: bytes, *, roll_over: bool = True) -> Position:
        """Add an entry to the last ledger; its position. A full ledger is rolled over after the add, unless
        ``roll_over`` is false (the caller has more adds for this ledger in flight)."""
        self._require_open("add an entry")
        if self.current is None:
            self._create_current()
        assert self.current is not None
        entry_id = self.bookkeeper.append(self.current, data)
        last = self.ledgers[-1]
        last.entries, last.size = last.entries + 1, last.size + len(data)
        self.last_confirmed_entry = (last.ledger_id, entry_id)  # OpAddEntry.run
        self.log.emit("EntryPublished")
        if roll_over:
            self.roll_over_if_full()
        return (last.ledger_id, entry_id)

    def is_full(self, in_flight: int = 0) -> bool:
        """``currentLedgerIsFull`` (see the module docstring), counting ``in_flight`` adds as written."""
        c, last = self.config, self.ledgers[-1]
        age = self.clock() - self.created_ms
        entries = last.entries + in_flight
        space = entries >= c.max_entries_per_ledger or last.size >= c.max_size_per_ledger_bytes
        aged = age >= c.maximum_rollover_ms
        return (space or aged) and (c.minimum_rollover_ms == 0 or age > c.minimum_rollover_ms)

    def read_entries(self, ledger_id: int) -> list[bytes]:
        """Every entry of a closed ledger of the list, in order."""
        count = self.entries_of(ledger_id)
        if count == 0:
            return []
        return self.bookkeeper.read(self.bookkeeper.open_closed(ledger_id), 0, count - 1)

    def roll_over_if_full(self) -> bool:
        """Close a full last ledger (one with entries), create the next and list it (``LedgerRollsOver``)."""
        self._require_open("roll over")
        if self.current is None or self.ledgers[-1].entries == 0 or not self.is_full():
            return False
        self.roll_over()
        return True

    def roll_over(self) -> None:
        """Close the last ledger if one is open, create the next and list it (``ledgerClosed``,
        ``createLedgerAfterClosed``; with none open, ``internalAsyncAddEntry`` in ``ClosedLedger``)."""
        self.close_current()
        self._create_current()
        self.log.emit("LedgerRollsOver")

    def close_current(self) -> None:
        """Close the ledger being written, if any (``ledgerClosed``): no ledger is open until the next is created."""
        self._require_open("close the current ledger")
        if self.current is None:
            return
        self.crash_point("ledger-rollover")
        try:
            self.bookkeeper.close(self.current)
        except BookKeeperError as e:
            # closeComplete with an error is logged, and ledgerClosed goes on (rollCurrentLedgerIfFull): another
            # broker recovered and closed the ledger under this one.
            LOG.warning("[%s] Error when closing ledger %d: %s", self.name, self.current.ledger_id, e)
        self.ledgers[-1].timestamp = self.clock()
        self.current = None
        if self.ledgers[-1].entries == 0:
            # The last ledger was empty, so we can discard it (ledgerClosed); it is deleted once the list without
            # it is written (updateLedgersIdsComplete).
            self._discarded.append(self.ledgers.pop().ledger_id)

    # -- cursors ---------------------------------------------------------------------
    def open_cursor(self, name: str, *, earliest: bool = False) -> ManagedCursor:
        """A durable cursor: restored if stored, else new, at the last entry (``Latest``) or before the first."""
        self._require_open("open a cursor")
        if name in self.cursors:
            return self.cursors[name]
        start = self.first_position() if earliest else self.last_confirmed()
        snapshot = CursorSnapshot(start)
        version = self.store.create_cursor(self.name, name, snapshot)
        cursor = self.cursors[name] = ManagedCursor(self, name, snapshot, version)
        self.add_cursor(cursor)
        return cursor

    def add_cursor(self, cursor: ManagedCursor) -> None:
        """``addCursor``: the position the managed ledger holds for the cursor is its mark-delete at the open."""
        self.positions[cursor.name] = cursor.mark_delete

    def on_mark_delete_persisted(self, cursor: ManagedCursor, position: Position) -> None:
        """``onCursorMarkDeletePositionUpdated``, called when a persist of the cursor completes (Pulsar 4.0.7)."""
        self.positions[cursor.name] = position

    def skip_consumed_ledgers(self) -> None:
        """``maybeUpdateCursorBeforeTrimmingConsumedLedger``: a cursor whose mark-delete (in memory) is at its
        ledger's last entry, with a later ledger listed, is held at (next ledger, -1); its own mark-delete stays
        (``CursorSkipsConsumedLedger``)."""
        ids = self.ids()
        for cursor in self.cursors.values():
            ledger, entry = cursor.mark_delete
            later = [x for x in ids if x > ledger]
            if cursor.status not in ACTIVE or ledger not in ids or not later or entry == -1:
                continue
            unconsumed = entry + 1 < self.entries_of(ledger)
            if self.config.mutant == "skip_unconsumed_ledger":  # MUTANT: the last entry is not looked at
                unconsumed = False
            if unconsumed or self.positions[cursor.name] == (later[0], -1):
                continue
            LOG.info(
                "Reset cursor:ManagedCursorImpl{ledger=%s, name=%s, ackPos=%d:%d} to %d:-1 since ledger consumed "
                "completely",
                self.name,
                cursor.name,
                ledger,
                entry,
                later[0],
            )
            self.positions[cursor.name] = (later[0], -1)
            self.log.emit("CursorSkipsConsumedLedger")

    def _slowest_reader_ledger(self, active: list[ManagedCursor]) -> int:
        """``internalTrimLedgers``: the slowest reader's ledger x, or x + 1 when its position is at the last entry
        of x and x is not the current ledger; with no cursor, one past the current ledger."""
        current = self.ledgers[-1].ledger_id
        if not active:
            return current + 1
        ledger, entry = min(self.positions[c.name] for c in active)
        if self.config.mutant == "trim_deletes_needed_ledger":  # MUTANT: one ledger too far
            return ledger + 1
        if ledger in self.ids() and ledger != current and self.entries_of(ledger) == entry + 1:
            return ledger + 1
        return ledger

    def delete_cursor(self, name: str) -> None:
        """``deleteCursor``: the cursor's znode goes, and its cursor ledger if it holds one."""
        self._require_open("delete a cursor")
        cursor = self.cursors.pop(name)
        self.store.delete_cursor(self.name, name)
        for ledger_id in {cursor.ledger_id, *cursor.retired} - {-1}:
            self.bookkeeper.delete(ledger_id)

    def trim_consumed_ledgers(self, *, skip_consumed: bool = True) -> list[int]:
        """``internalTrimLedgers``, after ``maybeUpdateCursorBeforeTrimmingConsumedLedger``, by the positions the
        managed ledger holds for its cursors; the ledgers trimmed. ``skip_consumed=False``: the positions are
        taken as they are (the caller skips consumed ledgers as a step of its own, the managed-ledger spec's
        ``CursorsSkipConsumedLedgers``)."""
        self._require_open("trim")
        active = [c for c in self.cursors.values() if c.status in ACTIVE]
        current = self.ledgers[-1].ledger_id
        if skip_consumed:
            self.skip_consumed_ledgers()
        slowest = self._slowest_reader_ledger(active)
        gone = [x for x in self.ledgers if x.ledger_id < slowest and x.ledger_id != current]
        if not gone:
            return []
        self.ledgers = [x for x in self.ledgers if x not in gone]
        self._write_ledgers()
        LOG.info("[%s] End TrimConsumedLedgers. ledgers=%d", self.name, len(self.ledgers))
        for x in gone:
            LOG.info("[%s] Removing ledger %d - size: %d", self.name, x.ledger_id, x.size)
            self.bookkeeper.delete(x.ledger_id)
        self.log.emit("TrimConsumedLedgers")
        return [x.ledger_id for x in gone]

    # -- closing ---------------------------------------------------------------------
    def close(self) -> None:
        """Close every cursor (their state goes to their znodes) and the last ledger."""
        if self.closed:
            return
        for cursor in self.cursors.values():
            if cursor.status in (CursorStatus.NO_LEDGER, CursorStatus.OPEN):
                cursor.close()
        if self.current is not None:
            self.bookkeeper.close(self.current)
        self.closed = True

    def _require_open(self, what: str) -> None:
        if self.closed:
            raise ManagedLedgerError(f"managed ledger {self.name} is closed: cannot {what}")
