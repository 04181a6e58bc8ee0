"""A durable cursor (Pulsar's ``ManagedCursorImpl``): acknowledgements, their persistence, the restore.

The cursor spec (``spec/cursor/cursor.py``) is the design; each method takes the
spec's steps in order and logs each as it completes, and between two steps
calls the broker's crash hook with the name of the next one, so that a test
can stop the broker at every persistence step:

=================================  ==========================================
crash point                        the step that follows
=================================  ==========================================
``cursor-ledger-create``           create the cursor ledger and write the
                                   state as its first record
``cursor-ledger-switch``           point the znode at the new ledger
``cursor-ledger-delete``           delete the old cursor ledger
``cursor-ledger-append``           append the state to the cursor ledger
``cursor-znode-close``             the close's write of the state to the
                                   znode
=================================  ==========================================

A failed BookKeeper call and the znode write that stands in for it are one
step (``CursorLedgerCreationFails``, ``CursorLedgerWriteFails``): the spec
has no state between them; so are a new ledger's failed first record and its
failed fallback (``CursorLedgerFirstWriteFails``). When that znode write fails as well, the step is
``CursorZnodeWriteFails``; when the znode write naming a new cursor ledger
fails, ``CursorLedgerSwitchFails``. Either way the mark-delete fails: the
state stays in memory, dirty, and the flush stops there.

The state a persist writes is a :class:`~.snapshot.CursorSnapshot`; in the
cursor ledger as a ``PositionInfo`` record, in the znode as
``ManagedCursorInfo`` (:mod:`.meta_store`).

Acknowledgements are in memory until :meth:`ManagedCursor.flush` persists
them (Pulsar persists a mark-delete at once, rate-limited, and individual
acks on its flush task); a crash before the flush loses them, and the
messages come again.

A reset (:meth:`ManagedCursor.reset`, ``CursorResetStarts``) is persisted
by the next flush like any mark-delete, its record holding its position and
no individual acks; the cursor takes it in memory once that persist
completed (``CursorResetCompletes``), and a persist that fails fails the
reset.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import attrs
from ledgerspec.reference.ledger import LedgerHandle
from ledgerspec.reference.managed_ledger.bookkeeper import BookKeeperError, NoSuchLedgerError
from ledgerspec.reference.managed_ledger.meta_store import MetaStoreError
from ledgerspec.reference.managed_ledger.snapshot import CursorSnapshot
from ledgerspec.spec.cursor.cursor import ALWAYS
from ledgerspec.spec.positions import Position, next_position

if TYPE_CHECKING:
    from ledgerspec.reference.managed_ledger.managed_ledger import ManagedLedger

__all__ = ["CursorRecoveryError", "CursorStateError", "CursorStatus", "ManagedCursor"]

NO_LEDGER_ID = -1  # cursorsLedgerId when the state is in the znode
LOG = logging.getLogger("ledgerspec.managed_ledger")


class CursorStatus:
    """``ManagedCursorImpl.State``, by the spec's names."""

    UNINITIALIZED = "Uninitialized"
    NO_LEDGER = "NoLedger"
    OPEN = "Open"
    SWITCHING = "SwitchingLedger"
    CLOSED = "Closed"


ACTIVE = frozenset({CursorStatus.NO_LEDGER, CursorStatus.OPEN, CursorStatus.SWITCHING})


class CursorRecoveryError(Exception):
    """The cursor cannot be restored: its znode or its ledger's last record is not what Pulsar writes."""


class CursorStateError(Exception):
    """A call the cursor cannot take in its state (closed, say)."""


class ManagedCursor:
    """One durable cursor of a :class:`~.managed_ledger.ManagedLedger` (see the module docstring)."""

    def __init__(self, ml: ManagedLedger, name: str, snapshot: CursorSnapshot, znode_version: int) -> None:
        self.ml = ml
        self.name = name
        self.status = CursorStatus.NO_LEDGER
        self.mark_delete: Position = snapshot.mark_delete
        self.acked: set[Position] = set(snapshot.acked)  # individually acknowledged entries after the mark
        self.unacked_batch: dict[Position, frozenset[int]] = dict(snapshot.unacked_batch)
        self.properties: dict[str, int] = dict(snapshot.properties)  # kept with the mark-delete
        self.ledger: LedgerHandle | None = None  # the cursor ledger to append to
        self.ledger_id = NO_LEDGER_ID  # the cursor ledger held (written to, or restored from), or -1
        self.records = 0  # records appended to the current cursor ledger
        self.switching_to: LedgerHandle | None = None  # the new cursor ledger, not yet named in the znode
        self.switching_mark: Position = snapshot.mark_delete  # the mark-delete of its first record
        self.retired: set[int] = set()
        self.dirty = False
        self.resetting: Position | None = None  # the mark-delete of a pending reset
        self.reset_written = False  # its record is persisted: the cursor takes it next
        self.znode_version = znode_version
        self._drop_passed()

    # -- the spec's view -------------------------------------------------------------
    def snapshot(self) -> CursorSnapshot:
        return CursorSnapshot(self.mark_delete, frozenset(self.acked), self.unacked_batch, self.properties)

    def covers(self, position: Position, batch_index: int) -> bool:
        """Is the message at ``position`` (batch index ``batch_index``; 0 unbatched) acknowledged?"""
        if position <= self.mark_delete or position in self.acked:
            return True
        unacked = self.unacked_batch.get(position)
        return unacked is not None and batch_index not in unacked

    # -- the consumer ----------------------------------------------------------------
    def ack(self, position: Position, batch_index: int | None = None, batch_size: int = 1) -> bool:
        """An individual ack (``asyncDelete``) of an entry, or of one message of a batch of ``batch_size``.

        Whether it acknowledged anything: an ack of a message already acknowledged changes nothing.
        """
        self._require_active("acknowledge")
        index = 0 if batch_index is None else batch_index
        if batch_index is not None and not 0 <= batch_index < batch_size:
            raise ValueError(f"batch index {batch_index} is outside a batch of {batch_size}")
        if not self.ml.holds(position):
            raise ValueError(f"{position[0]}:{position[1]} is not an entry of managed ledger {self.ml.name}")
        if self.covers(position, index):
            return False
        if batch_index is None or batch_size == 1:
            self.unacked_batch.pop(position, None)
            self.acked.add(position)
        else:
            unacked = self.unacked_batch.get(position, frozenset(range(batch_size))) - {batch_index}
            if unacked:
                self.unacked_batch[position] = unacked
            else:
                del self.unacked_batch[position]
                self.acked.add(position)
        # The mark jumps over the acked entries that follow it (asyncDelete, then setAcknowledgedPosition), and
        # every individual ack at or before it goes (individualDeletedMessages.removeAtMost), also one in a
        # ledger trimmed since, which the jump passes without visiting (ManagedCursorImpl, pulsar 4.0.7).
        ids = self.ml.ids()
        while (nxt := next_position(ids, self.ml.entries_of, self.mark_delete)) in self.acked:
            assert nxt is not None
            self.mark_delete = nxt
        self._drop_passed()
        self.dirty = True
        self.ml.log.emit("ConsumerAcks", position[0], position[1], index)
        return True

    def mark_delete_to(self, position: Position, properties: dict[str, int]) -> None:
        """A cumulative ack (``asyncMarkDelete``) up to ``position``, with the properties to keep beside it.

        Not a step of the cursor spec, which models individual acks: the deduplication cursor uses it.
        """
        self._require_active("mark-delete")
        if position < self.mark_delete:
            raise ValueError(f"mark-delete {position} is before the cursor's {self.mark_delete}")
        self.mark_delete, self.properties = position, dict(properties)
        self._drop_passed()
        self.dirty = True

    def reset(self, target: Position) -> None:
        """``asyncResetCursor``: read again (or on) from the entry after ``target``, an entry of the managed ledger
        or its first position. Persisted by the next :meth:`flush`; refused while a reset is pending
        ("reset already in progress"). The acks not yet persisted are superseded by the reset's record."""
        self._require_active("reset")
        if self.status not in (CursorStatus.NO_LEDGER, CursorStatus.OPEN):
            raise CursorStateError(f"cursor {self.name} cannot reset while {self.status}")
        if self.resetting is not None:
            raise CursorStateError(f"cursor {self.name}: a reset to {self.resetting} is already in progress")
        if not self.ml.holds(target) and target != self.ml.first_position():
            raise ValueError(f"{target[0]}:{target[1]} is neither an entry nor the first position of {self.ml.name}")
        self.resetting, self.dirty = target, False
        self.ml.log.emit("CursorResetStarts", target)

    def _record(self) -> CursorSnapshot:
        """A record of the cursor's own state (``buildPositionInfo``: the mark-delete and what is acked after it)."""
        state = self.snapshot()
        if self.ml.config.mutant == "persists_read_position":  # MUTANT: the position read next, not the mark-delete
            read = next_position(self.ml.ids(), self.ml.entries_of, self.mark_delete)
            return state if read is None else attrs.evolve(state, mark_delete=read)
        return state

    def _to_persist(self) -> CursorSnapshot:
        """What the next persist writes: a pending reset's record (its position, no individual acks), else the
        state."""
        if self.resetting is None:
            return self._record()
        if self.ml.config.mutant == "reset_keeps_acks":  # MUTANT: the acks from before the reset are kept
            return CursorSnapshot(self.resetting, frozenset(self.acked), self.unacked_batch)
        return CursorSnapshot(self.resetting)

    def _persisted(self) -> None:
        """A persist completed: the managed ledger holds the cursor's mark-delete (``MarkDeleteEntry``'s callback);
        a pending reset's record is written, and the cursor takes it next (:meth:`_complete_reset`)."""
        if self.resetting is None:
            self.ml.on_mark_delete_persisted(self, self.mark_delete)
        else:
            self.reset_written = True

    def _complete_reset(self) -> None:
        """internalResetCursor's finalCallback, once the reset's record is written: the mark-delete moves to the
        reset's position, the acks are cleared, and the managed ledger holds the position for the cursor."""
        target = self.resetting
        if target is None or not self.reset_written:
            return
        self.mark_delete, self.acked, self.unacked_batch = target, set(), {}
        self.resetting, self.reset_written = None, False
        self.ml.on_mark_delete_persisted(self, target)
        self.ml.log.emit("CursorResetCompletes")

    def _persist_failed(self) -> None:
        """A persist failed: the mark-delete fails (isDirty), and so does a pending reset."""
        self.dirty, self.resetting = True, None

    def _drop_passed(self) -> None:
        self.acked = {p for p in self.acked if p > self.mark_delete}
        self.unacked_batch = {p: u for p, u in self.unacked_batch.items() if p > self.mark_delete}

    # -- persisting ------------------------------------------------------------------
    def flush(self) -> None:
        """Persist the acknowledgements not persisted yet: to the cursor ledger, or to the znode. A full cursor
        ledger's successor is created at once, whether or not anything waits to be persisted."""
        self._require_active("flush")
        while self._pending() or self._rolling_over():
            if self.status == CursorStatus.NO_LEDGER or self._rolling_over():
                persisted = self._create_ledger() and self._switch_ledger()
            else:
                persisted = self._append()
            self._complete_reset()
            if not persisted:
                return

    def _pending(self) -> bool:
        """A mark-delete waits to be persisted: acknowledgements, or a reset (``pendingMarkDeleteOps``)."""
        return self.dirty or self.resetting is not None

    def _rolling_over(self) -> bool:
        """A full cursor ledger's successor is to be created (SwitchingLedger, no new ledger yet)."""
        return self.status == CursorStatus.SWITCHING and self.switching_to is None

    def _creation_fails(self) -> None:
        """createNewMetadataLedger's operationFailed: NoLedger, and the mark-deletes waiting fail with it."""
        self.status = CursorStatus.NO_LEDGER
        if self._pending():
            self._persist_failed()

    def _create_ledger(self) -> bool:
        """createNewMetadataLedger: a new ledger and its first record, ``lastMarkDeleteEntry`` (the state, or a
        reset's record once written). What waits to be persisted stays pending: the flush writes it after the
        switch (flushPendingMarkDeletes). On failure the pending mark-delete runs in NoLedger (internalMarkDelete,
        Pulsar 4.0.7): the state goes to the znode where the configuration falls back
        (``cursor_znode_fallback``), else the mark-delete fails and stays dirty."""
        bk, snapshot = self.ml.bookkeeper, self._to_persist()
        first = snapshot if self.reset_written else self._record()
        self.ml.crash_point("cursor-ledger-create")
        try:
            handle = bk.create("cursor")
        except BookKeeperError:
            if not self._pending() or not self._falls_back_to_znode(snapshot):  # "Switch new cursor ledger failed"
                self._creation_fails()
                self.ml.log.emit("CursorLedgerCreationFails")
                return False
            self.status = CursorStatus.NO_LEDGER
            skips_store = self.ml.config.mutant == "no_store_fallback"  # MUTANT: reported done, not stored
            if not skips_store and not self._fall_back_to_znode(snapshot):
                return False
            self.dirty = False
            self._persisted()
            self.ml.log.emit("CursorLedgerCreationFails")
            return False
        try:
            if self.ml.config.mutant != "switch_before_first_record":  # MUTANT: the first record is left out
                bk.append(handle, self.ml.store.encode_position_info(first), "cursor", call="first_appends")
        except BookKeeperError:
            self._first_write_fails(handle.ledger_id, first)
            return False
        self.switching_to, self.switching_mark = handle, first.mark_delete
        self.status = CursorStatus.SWITCHING
        self.ml.log.emit("CursorCreatesLedger")
        return True

    def _first_write_fails(self, ledger_id: int, snapshot: CursorSnapshot) -> None:
        """The new ledger's first record fails (its id is spent): persistPositionToLedger writes the state to the
        znode instead (persistPositionToMetaStore). When that write fails too, the ledger is deleted
        (deleteLedgerAsync) and createNewMetadataLedger's operationFailed, on a MetaStoreException, fails the
        pending mark-deletes: NoLedger, dirty (ManagedCursorImpl, Pulsar 4.0.7). When it succeeds, Pulsar names
        the new ledger, which holds no record, in the znode: a step the cursor spec leaves out, refused here
        (``CursorRun.fail_next("first_appends")`` fails the znode write with it)."""
        try:
            self._write_znode(NO_LEDGER_ID, snapshot, injectable=True)
        except MetaStoreError:
            self.ml.bookkeeper.delete(ledger_id)
            self._creation_fails()
            self.ml.log.emit("CursorLedgerFirstWriteFails")
            return
        raise CursorStateError(
            f"the first record of cursor ledger {ledger_id} failed but its fallback to the znode succeeded: the "
            "switch to a ledger holding no record that follows is not a step of the cursor spec"
        )

    def _switch_ledger(self) -> bool:
        """switchToNewLedger: the znode names the new ledger, with the mark-delete only; the old one goes.

        When the znode write fails, the new ledger is deleted and the cursor keeps the one it held, NoLedger,
        with its state unpersisted (createNewMetadataLedger's operationFailed fails the pending mark-deletes on
        a MetaStoreException; ManagedCursorImpl, Pulsar 4.0.7). Whether the switch was made. No mark-delete
        completes here: what is pending is written next (flushPendingMarkDeletes).
        """
        new = self.switching_to
        assert new is not None
        self.ml.crash_point("cursor-ledger-switch")
        try:
            self._write_znode(new.ledger_id, CursorSnapshot(self.switching_mark), injectable=True)
        except MetaStoreError:
            self.switching_to = None
            if self.ml.config.mutant == "failed_switch_keeps_new_ledger":  # MUTANT: the new ledger is kept
                self.ledger, self.ledger_id, self.records = new, new.ledger_id, 1
                self._creation_fails()
                self.status = CursorStatus.OPEN
            else:
                self.ml.bookkeeper.delete(new.ledger_id)
                self._creation_fails()
            self.ml.log.emit("CursorLedgerSwitchFails")
            return False
        old = self._retire()
        records = 0 if self.ml.config.mutant == "switch_before_first_record" else 1
        self.ledger, self.ledger_id, self.records, self.switching_to = new, new.ledger_id, records, None
        self.status = CursorStatus.OPEN
        self.ml.log.emit("CursorSwitchesLedger")
        self._delete_retired(old)
        return True

    def _append(self) -> bool:
        """persistPositionToLedger; a failed append writes the znode instead (persistPositionToMetaStore).
        Whether the state is persisted (False: the znode write failed too)."""
        bk, snapshot, handle = self.ml.bookkeeper, self._to_persist(), self.ledger
        assert handle is not None
        self.ml.crash_point("cursor-ledger-append")
        try:
            bk.append(handle, self.ml.store.encode_position_info(snapshot), "cursor")
        except BookKeeperError:
            if not self._fall_back_to_znode(snapshot):
                return False
            self.status = CursorStatus.NO_LEDGER
            self.dirty = False
            self._persisted()
            self.ml.log.emit("CursorLedgerWriteFails")
            return True
        self.records += 1
        # shouldCloseLedger (ManagedCursorImpl, Pulsar 4.0.7): the ledger's LAC (records - 1) reached the limit.
        full = self.records - 1 >= self.ml.config.metadata_max_entries_per_ledger
        if full:  # rolloverLedgerIfNeeded: SwitchingLedger; the flush creates the successor next
            self.status = CursorStatus.SWITCHING
        self._persisted()
        self.dirty = False
        self.ml.log.emit("CursorPersistsToLedger")
        return True

    def _falls_back_to_znode(self, snapshot: CursorSnapshot) -> bool:
        """Does a failed creation write the state to the znode? Always, or (Pulsar 4.0.7) only when no message
        follows the mark-delete (``isNoMessagesAfterPos``)."""
        if self.ml.config.cursor_znode_fallback == ALWAYS:
            return True
        return self.ml.no_messages_after(snapshot.mark_delete)

    def _fall_back_to_znode(self, snapshot: CursorSnapshot) -> bool:
        """persistPositionToMetaStore: the state to the znode with cursorsLedgerId = -1, after a failed
        BookKeeper call. When that write fails too, the mark-delete fails (internalMarkDelete's operationFailed
        sets isDirty; ManagedCursorImpl, Pulsar 4.0.7): the cursor is NoLedger, its state unpersisted. Whether
        the znode was written."""
        try:
            self._write_znode(NO_LEDGER_ID, snapshot, injectable=True)
        except MetaStoreError:
            self.status = CursorStatus.NO_LEDGER
            self._persist_failed()
            if self.ml.config.mutant == "failed_znode_write_counted_persisted":  # MUTANT: taken for persisted
                self.dirty = False
            self.ml.log.emit("CursorZnodeWriteFails")
            return False
        return True

    def _retire(self) -> int:
        """The cursor ledger held, now to be deleted (or -1)."""
        old = self.ledger_id
        if old != NO_LEDGER_ID:
            self.retired.add(old)
        return old

    def _delete_retired(self, ledger_id: int) -> None:
        if ledger_id == NO_LEDGER_ID:
            return
        self.ml.crash_point("cursor-ledger-delete")
        self.ml.bookkeeper.delete(ledger_id)
        self.retired.discard(ledger_id)
        self.ml.log.emit("CursorDeletesOldLedger", ledger_id)

    def _write_znode(self, cursors_ledger_id: int, snapshot: CursorSnapshot, *, injectable: bool = False) -> None:
        self.znode_version = self.ml.store.write_cursor(
            self.ml.name, self.name, cursors_ledger_id, snapshot, self.znode_version, injectable=injectable
        )

    def close(self) -> None:
        """A clean close: the whole state to the znode with cursorsLedgerId = -1, then the cursor ledger goes."""
        if self.status not in (CursorStatus.NO_LEDGER, CursorStatus.OPEN):
            raise CursorStateError(f"cursor {self.name} cannot close while {self.status}")
        if self.resetting is not None:
            raise CursorStateError(f"cursor {self.name} cannot close while its reset to {self.resetting} is pending")
        self.ml.crash_point("cursor-znode-close")
        self._write_znode(NO_LEDGER_ID, self.snapshot())
        old = self._retire()
        self.status, self.ledger, self.ledger_id, self.dirty = CursorStatus.CLOSED, None, NO_LEDGER_ID, False
        self.ml.log.emit("CursorCloses")
        self._delete_retired(old)

    # -- the restore -----------------------------------------------------------------
    @classmethod
    def recover(cls, ml: ManagedLedger, name: str) -> ManagedCursor:
        """``ManagedCursorImpl.recover``: the znode's state when it says cursorsLedgerId = -1, else the last
        record of the cursor ledger; a ledger that is gone or empty rolls back to the znode's mark-delete."""
        cursors_ledger_id, stored, version = ml.store.read_cursor(ml.name, name, ml.ids(), ml.entries_of)
        rollback = None
        held = NO_LEDGER_ID
        if cursors_ledger_id == NO_LEDGER_ID and ml.config.mutant != "restore_ignores_no_ledger":
            snapshot = stored  # MUTANT (restore_ignores_no_ledger): the -1 is taken for a ledger to open
        else:
            LOG.info("[%s] Recovering from bookkeeper ledger %d cursor: %s", ml.name, cursors_ledger_id, name)
            last = cls._last_record(ml, cursors_ledger_id)
            if last is None:
                rollback = CursorSnapshot(max(stored.mark_delete, ml.first_position()), properties=stored.properties)
                LOG.info(
                    "[%s] Cursor %s: ledger %d is gone or empty; rolling back to %d:%d",
                    ml.name,
                    name,
                    cursors_ledger_id,
                    *rollback.mark_delete,
                )
                snapshot = rollback
            else:
                snapshot, held = last, cursors_ledger_id
        cursor = cls(ml, name, snapshot, version)
        if rollback is not None:  # initialize(getRollbackPosition): persisted with no individual acks
            cursor._write_znode(NO_LEDGER_ID, rollback)
        if ml.config.mutant == "restore_skips_unacked" and cursor.acked:  # MUTANT: jumps past the gaps
            cursor.mark_delete = max(cursor.mark_delete, *cursor.acked)
        cursor.mark_delete = ml.recovered_position(cursor.mark_delete)
        cursor._drop_passed()
        cursor.ledger_id = held
        ml.cursors[name] = cursor
        ml.add_cursor(cursor)
        LOG.info("[%s] Cursor %s recovered to position %d:%d", ml.name, name, *cursor.mark_delete)
        ml.log.emit("CursorRecovers")
        return cursor

    @staticmethod
    def _last_record(ml: ManagedLedger, ledger_id: int) -> CursorSnapshot | None:
        """The cursor ledger's last PositionInfo; None when the ledger is gone or holds no record."""
        if ledger_id < 0:
            return None
        try:
            handle = ml.bookkeeper.open_recovered(ledger_id)
        except NoSuchLedgerError:
            return None
        last = handle.metadata.last_entry_id
        if last < 0:
            return None
        data = ml.bookkeeper.read(handle, last, last)[0]
        try:
            return ml.store.decode_position_info(data, ml.ids(), ml.entries_of)
        except ValueError as e:
            raise CursorRecoveryError(
                f"cursor ledger {ledger_id}, entry {last}: not a PositionInfo record ({e})"
            ) from e

    def _require_active(self, what: str) -> None:
        if self.status not in ACTIVE:
            raise CursorStateError(f"cursor {self.name} cannot {what} while {self.status}")
