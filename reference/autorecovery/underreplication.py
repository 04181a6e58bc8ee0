"""Marks and locks of under-replicated ledgers in a metadata store (``ZkLedgerUnderreplicationManager``).

- ``mark(ledger, lost)``: create the ledger's mark naming the lost bookies,
  or add the ones it does not name yet to an existing mark by a
  compare-and-set (``markLedgerUnderreplicatedAsync``);
- ``try_lock(ledger)``: create the ledger's lock, ephemeral, in this
  session, and remember the mark's version (``getLedgerToRereplicate``);
  ``None`` when another session holds it or the ledger is not marked;
- ``mark_replicated(lock)``: delete the mark at the version read when the
  lock was taken, so that a mark the auditor extended in between survives,
  then the empty hierarchy above it (``markLedgerReplicated``);
- ``release(lock)``: delete the lock (``releaseUnderreplicatedLedger``). A
  session that ends loses its locks with it.
"""

from __future__ import annotations

import contextlib
import time

import attrs
from ledgerspec.reference.autorecovery.znodes import (
    UnderreplicationPaths,
    decode_underreplicated,
    encode_lock,
    encode_underreplicated,
)
from ledgerspec.reference.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    MetadataStore,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

__all__ = ["ReplicationLock", "UnderreplicationManager"]


@attrs.frozen
class ReplicationLock:
    """A lock this session holds on a marked ledger, with the mark it saw: its version, and the bookies it named."""

    ledger_id: int
    mark_version: int
    mark_names: tuple[str, ...]


class UnderreplicationManager:
    """One session's view of the under-replication marks and locks of a cluster."""

    def __init__(self, store: MetadataStore, paths: UnderreplicationPaths | None = None, *, owner: str = "") -> None:
        self.store = store
        self.paths = paths or UnderreplicationPaths()
        self.owner = owner  # the bookie id written into the locks this session takes

    def mark(self, ledger_id: int, lost: list[str]) -> bool:
        """Mark the ledger under-replicated for ``lost``; whether the mark changed."""
        path = self.paths.mark(ledger_id)
        while True:
            try:
                self.store.create(
                    path, encode_underreplicated(sorted(lost), int(time.time() * 1000)), make_parents=True
                )
                return True
            except NodeExistsError:
                pass
            try:
                data, stat = self.store.get(path)
            except NoNodeError:
                continue  # marked replicated in between: create it again
            named = decode_underreplicated(path, data)
            added = [b for b in sorted(lost) if b not in named]
            if not added:
                return False
            try:
                self.store.set(
                    path, encode_underreplicated(named + added, int(time.time() * 1000)), version=stat.version
                )
                return True
            except (BadVersionError, NoNodeError):
                continue  # changed in between: read it again

    def lost_bookies(self, ledger_id: int) -> list[str] | None:
        """The bookies the ledger's mark names, or None when it is not marked."""
        path = self.paths.mark(ledger_id)
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return None
        return decode_underreplicated(path, data)

    def marked_ledgers(self) -> list[int]:
        """Every marked ledger, in id order."""
        found: list[int] = []
        with contextlib.suppress(NoNodeError):
            self._collect(self.paths.marks, 0, found)
        return sorted(found)

    def _collect(self, directory: str, depth: int, found: list[int]) -> None:
        for name in self.store.children(directory):
            path = f"{directory}/{name}"
            if depth < 4:
                with contextlib.suppress(NoNodeError):  # removed while listing
                    self._collect(path, depth + 1, found)
            else:
                found.append(UnderreplicationPaths.ledger_of(path))

    def try_lock(self, ledger_id: int) -> ReplicationLock | None:
        """Take the ledger's lock in this session, if it is marked and nobody holds it."""
        path = self.paths.mark(ledger_id)
        try:
            data, stat = self.store.get(path)
        except NoNodeError:
            return None
        try:
            self.store.create(self.paths.lock(ledger_id), encode_lock(self.owner), ephemeral=True, make_parents=True)
        except NodeExistsError:
            return None
        return ReplicationLock(ledger_id, stat.version, tuple(decode_underreplicated(path, data)))

    def holder(self, ledger_id: int) -> int | None:
        """The session holding the ledger's lock, or None."""
        stat = self.store.exists(self.paths.lock(ledger_id))
        return None if stat is None else stat.ephemeral_owner

    def mark_replicated(self, lock: ReplicationLock) -> bool:
        """Remove the mark the lock was taken on; False when it changed since (the auditor found more lost)."""
        path = self.paths.mark(lock.ledger_id)
        try:
            self.store.delete(path, version=lock.mark_version)
        except BadVersionError:
            return False
        except NoNodeError:
            return True
        directory = path
        for _ in range(4):  # the four hex levels, as far up as they are empty
            directory = directory.rsplit("/", 1)[0]
            try:
                stat = self.store.exists(directory)
                if stat is None:
                    continue
                self.store.delete(directory, version=stat.version)
            except (NotEmptyError, BadVersionError):
                break  # another mark lives below (or was just created there)
            except NoNodeError:
                continue
        return True

    def release(self, lock: ReplicationLock) -> None:
        with contextlib.suppress(NoNodeError):
            self.store.delete(self.paths.lock(lock.ledger_id), version=ANY_VERSION)
