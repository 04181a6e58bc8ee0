"""The managed ledger's znodes: the ledger list and each cursor's state, in Pulsar's paths and bytes.

``/managed-ledgers/<tenant>/<namespace>/persistent/<topic>`` holds the
``ManagedLedgerInfo`` (the ledger list); each durable cursor is a child znode
holding its ``ManagedCursorInfo``. The bytes are Pulsar's protobuf
(``reference/metadata/managed_ledger_format.py``), so a real broker reads what
this store writes and the other way round. Writes are compare-and-set on the
version last read or written: a second broker writing the same managed ledger
fails with :class:`~ledgerspec.reference.metadata.BadVersionError`, as
Pulsar's ``MetaStoreImpl`` does.

The cursor ledger's records (``PositionInfo``) are encoded here too, so that
the bytes of a cursor's state have one home.

:class:`ZnodeFaults` fails cursor-znode writes on purpose, as a metadata store
that does not answer: only the writes the caller marks ``injectable`` (the
cursor's switch to a new ledger and its fallback after a failed BookKeeper
call, the two whose failure the cursor spec models), with
:class:`MetaStoreError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
from ledgerspec.reference.managed_ledger.snapshot import CursorSnapshot
from ledgerspec.reference.metadata import ANY_VERSION, MetadataStore, NodeExistsError, NoNodeError
from ledgerspec.reference.metadata.managed_ledger_format import (
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerFormatError,
    ManagedLedgerInfo,
    PositionInfo,
    decode_managed_cursor_info,
    decode_managed_ledger_info,
    decode_position_info,
    encode_managed_cursor_info,
    encode_managed_ledger_info,
    encode_position_info,
)
from ledgerspec.reference.metadata.managed_ledger_format import Position as WirePosition
from ledgerspec.reference.metadata.managed_ledger_paths import cursor_path, managed_ledger_path

__all__ = ["ManagedLedgerStore", "MetaStoreError", "StoredLedger", "StoredStateError", "ZnodeFaults"]

StoredLedger = LedgerInfo


class StoredStateError(Exception):
    """A znode or a cursor-ledger record that does not decode: the message names the path or the record."""


class MetaStoreError(Exception):
    """A write to the metadata store failed (Pulsar's ``MetaStoreException``)."""


@attrs.define
class ZnodeFaults:
    """Cursor-znode writes to fail on purpose: the next ``writes`` injectable ones."""

    writes: int = 0
    failed: int = 0  # writes failed on purpose so far

    def take(self) -> bool:
        if self.writes > 0:
            self.writes -= 1
            self.failed += 1
            return True
        return False


class ManagedLedgerStore:
    """Managed ledgers and their cursors in a metadata store (see the module docstring)."""

    def __init__(self, store: MetadataStore, faults: ZnodeFaults | None = None) -> None:
        self.store = store
        self.faults = faults or ZnodeFaults()

    # -- the ledger list -------------------------------------------------------------
    def read_ledgers(self, name: str) -> tuple[list[LedgerInfo], int] | None:
        """The ledger list and the znode's version; None for a managed ledger never created."""
        path = managed_ledger_path(name)
        try:
            node = self.store.get(path)
        except NoNodeError:
            return None
        try:
            info = decode_managed_ledger_info(node.value)
        except ManagedLedgerFormatError as e:
            raise StoredStateError(f"{path}: not a ManagedLedgerInfo ({e})") from e
        return list(info.ledgers), node.stat.version

    def write_ledgers(self, name: str, ledgers: Sequence[LedgerInfo], version: int | None) -> int:
        """Write the ledger list at ``version`` (``None``: create it); the new version."""
        path = managed_ledger_path(name)
        data = encode_managed_ledger_info(ManagedLedgerInfo(tuple(ledgers)))
        if version is None:
            self.store.create(path, data, make_parents=True)
            return 0
        return self.store.set(path, data, version=version).version

    # -- cursors ---------------------------------------------------------------------
    def cursor_names(self, name: str) -> list[str]:
        return sorted(self.store.children(managed_ledger_path(name)))

    def create_cursor(self, name: str, cursor: str, snapshot: CursorSnapshot) -> int:
        """A new cursor's znode: its state with cursorsLedgerId = -1; version 0."""
        try:
            self.store.create(cursor_path(name, cursor), self._cursor_info(-1, snapshot))
        except NodeExistsError as e:
            raise StoredStateError(f"cursor {cursor} of {name} exists already") from e
        return 0

    def delete_cursor(self, name: str, cursor: str) -> None:
        self.store.delete(cursor_path(name, cursor), version=ANY_VERSION)

    def read_cursor(
        self, name: str, cursor: str, ledgers: Sequence[int], count: Callable[[int], int]
    ) -> tuple[int, CursorSnapshot, int]:
        """The cursor's znode: cursorsLedgerId, the state it holds, its version."""
        path = cursor_path(name, cursor)
        node = self.store.get(path)
        try:
            info = decode_managed_cursor_info(node.value)
        except ManagedLedgerFormatError as e:
            raise StoredStateError(f"{path}: not a ManagedCursorInfo ({e})") from e
        snapshot = CursorSnapshot.from_wire(
            info.mark_delete, info.individual_deleted, info.batched_deletion, ledgers, count, info.properties
        )
        return info.cursors_ledger_id, snapshot, node.stat.version

    def write_cursor(
        self,
        name: str,
        cursor: str,
        cursors_ledger_id: int,
        snapshot: CursorSnapshot,
        version: int,
        *,
        injectable: bool = False,
    ) -> int:
        """Compare-and-set the cursor's znode; the new version. ``injectable``: a write the faults may fail."""
        path = cursor_path(name, cursor)
        if injectable and self.faults.take():
            raise MetaStoreError(f"writing {path} failed: the metadata store did not answer (injected)")
        return self.store.set(path, self._cursor_info(cursors_ledger_id, snapshot), version=version).version

    @staticmethod
    def _cursor_info(cursors_ledger_id: int, snapshot: CursorSnapshot) -> bytes:
        return encode_managed_cursor_info(
            ManagedCursorInfo(
                cursors_ledger_id,
                WirePosition(*snapshot.mark_delete),
                snapshot.wire_ranges(),
                snapshot.properties,
                batched_deletion=snapshot.wire_batches(),
            )
        )

    # -- the cursor ledger's records ---------------------------------------------------
    @staticmethod
    def encode_position_info(snapshot: CursorSnapshot) -> bytes:
        return encode_position_info(
            PositionInfo(
                WirePosition(*snapshot.mark_delete),
                snapshot.wire_ranges(),
                snapshot.properties,
                snapshot.wire_batches(),
            )
        )

    @staticmethod
    def decode_position_info(data: bytes, ledgers: Sequence[int], count: Callable[[int], int]) -> CursorSnapshot:
        info = decode_position_info(data)
        return CursorSnapshot.from_wire(
            info.mark_delete, info.individual_deleted, info.batched_deletion, ledgers, count, info.properties
        )
