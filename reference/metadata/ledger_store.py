"""Ledger metadata kept in a metadata store, as BookKeeper's hierarchical ledger manager keeps it.

One znode per ledger at its hierarchical path (``ledger_paths.py``) holds the
metadata bytes (``ledger_metadata_format.py``); the znode's version is the
metadata's version, and every update is a compare-and-set on it. The
operations follow ``AbstractZkLedgerManager``:

- ``create`` writes version 0 with a fresh creator token (parents made as
  needed). If the znode exists and holds this creator's token, the create
  is taken as its own earlier attempt and succeeds (a retry after a lost
  reply); otherwise :class:`LedgerExistsError`.
- ``read`` returns the metadata with its version; a missing znode is
  :class:`NoSuchLedgerError`, bytes that do not decode are
  :class:`~ledgerspec.reference.metadata.ledger_metadata_format.LedgerMetadataFormatError`
  naming the path.
- ``write`` is the compare-and-set: it succeeds only at the version read,
  else :class:`~ledgerspec.reference.metadata.store.BadVersionError`.
- ``delete`` removes the znode at a version, then the directories it leaves
  empty; a ledger that is already gone counts as deleted.
- ``watch`` calls a listener with the new metadata after every change, and
  with None once the ledger is deleted (``registerLedgerMetadataListener``).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import NamedTuple

import attrs
from ledgerspec.reference.metadata.ledger_ids import LedgerIdAllocator
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata
from ledgerspec.reference.metadata.ledger_metadata_format import decode_ledger_metadata, encode_ledger_metadata
from ledgerspec.reference.metadata.ledger_paths import (
    DEFAULT_LEDGERS_ROOT,
    ledger_id_from_path,
    ledger_path,
)
from ledgerspec.reference.metadata.store import (
    ANY_VERSION,
    EventType,
    MetadataStore,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    WatchEvent,
    WatchHandle,
    parent_path,
)

__all__ = [
    "LedgerExistsError",
    "LedgerListener",
    "LedgerMetadataStore",
    "NoSuchLedgerError",
    "VersionedMetadata",
    "random_creator_token",
]


class VersionedMetadata(NamedTuple):
    """Ledger metadata and the version of the znode it was read from or written to."""

    metadata: LedgerMetadata
    version: int


LedgerListener = Callable[[int, VersionedMetadata | None], None]


class NoSuchLedgerError(NoNodeError):
    """No metadata for the ledger (``BKNoSuchLedgerExistsOnMetadataServerException``)."""

    def __init__(self, ledger_id: int, path: str) -> None:
        super().__init__(path, f"no metadata for ledger {ledger_id} (no node at {path})")
        self.ledger_id = ledger_id


class LedgerExistsError(NodeExistsError):
    """Another creator's metadata is at the ledger's path (``BKLedgerExistException``)."""

    def __init__(self, ledger_id: int, path: str) -> None:
        super().__init__(path, f"ledger {ledger_id} already exists: {path} was created by another client")
        self.ledger_id = ledger_id


def random_creator_token() -> int:
    """A creator token as BookKeeper draws it: uniform in 0 .. 2^63 - 2."""
    return random.SystemRandom().randrange(2**63 - 1)


@attrs.define(eq=False)
class _LedgerWatch:
    """A listener on one ledger: reads the metadata after each event and passes it on."""

    ledgers: LedgerMetadataStore
    ledger_id: int
    listener: LedgerListener
    handle: WatchHandle | None = None

    def on_event(self, event: WatchEvent) -> None:
        if event.type in (EventType.CREATED, EventType.CHANGED):
            try:
                current: VersionedMetadata | None = self.ledgers.read(self.ledger_id)
            except NoSuchLedgerError:
                return  # deleted again already: the DELETED event follows
            self.listener(self.ledger_id, current)
        elif event.type is EventType.DELETED:
            self.listener(self.ledger_id, None)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()


class LedgerMetadataStore:
    """The ledger metadata of one BookKeeper cluster, under ``root`` of a metadata store."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        root: str = DEFAULT_LEDGERS_ROOT,
        creator_tokens: Callable[[], int] = random_creator_token,
    ) -> None:
        self.store = store
        self.root = root
        self.ids = LedgerIdAllocator(store, root)
        self._creator_tokens = creator_tokens

    def path(self, ledger_id: int) -> str:
        return ledger_path(ledger_id, self.root)

    def new_ledger_id(self) -> int:
        return self.ids.next_id()

    def create(self, metadata: LedgerMetadata) -> VersionedMetadata:
        """Store the metadata of a new ledger, with a fresh creator token; version 0."""
        token = self._creator_tokens()
        metadata = attrs.evolve(metadata, creator_token=token)
        path = self.path(metadata.ledger_id)
        try:
            self.store.create(path, encode_ledger_metadata(metadata), make_parents=True)
        except NodeExistsError:
            existing = self.read(metadata.ledger_id)
            if existing.metadata.creator_token == token:
                return existing
            raise LedgerExistsError(metadata.ledger_id, path) from None
        return VersionedMetadata(metadata, 0)

    def read(self, ledger_id: int) -> VersionedMetadata:
        path = self.path(ledger_id)
        try:
            value, stat = self.store.get(path)
        except NoNodeError:
            raise NoSuchLedgerError(ledger_id, path) from None
        return VersionedMetadata(decode_ledger_metadata(value, ledger_id, where=path), stat.version)

    def write(self, metadata: LedgerMetadata, version: int) -> VersionedMetadata:
        """Compare-and-set: replace the metadata read at ``version``; return it with its new version."""
        path = self.path(metadata.ledger_id)
        try:
            stat = self.store.set(path, encode_ledger_metadata(metadata), version=version)
        except NoNodeError:
            raise NoSuchLedgerError(metadata.ledger_id, path) from None
        return VersionedMetadata(metadata, stat.version)

    def delete(self, ledger_id: int, version: int) -> None:
        """Delete the ledger's metadata at ``version``, and the directories left empty; missing is fine."""
        path = self.path(ledger_id)
        try:
            self.store.delete(path, version=version)
        except NoNodeError:
            return
        directory = parent_path(path)
        while directory != self.root:
            try:
                self.store.delete(directory, version=ANY_VERSION)
            except (NotEmptyError, NoNodeError):
                return
            directory = parent_path(directory)

    def watch(self, ledger_id: int, listener: LedgerListener) -> WatchHandle:
        """Call ``listener(ledger_id, metadata)`` after every change, ``(ledger_id, None)`` on deletion."""
        watch = _LedgerWatch(self, ledger_id, listener)
        watch.handle = self.store.watch(self.path(ledger_id), watch.on_event)
        return watch

    def ledger_ids(self) -> list[int]:
        """Every ledger with metadata, in id order."""
        found: list[int] = []
        with contextlib.suppress(NoNodeError):
            self._collect(self.root, 0, found)
        return sorted(found)

    def _collect(self, directory: str, depth: int, found: list[int]) -> None:
        for name in self.store.children(directory):
            if depth == 0 and not (name.isdigit() and len(name) in (2, 3)):
                continue  # idgen, available, LAYOUT...: not a ledger directory (HIERARCHICAL_LEDGER_PARENT_NODE_REGEX)
            path = f"{directory}/{name}"
            if name.isdigit():
                with contextlib.suppress(NoNodeError):  # deleted while listing
                    self._collect(path, depth + 1, found)
                continue
            try:
                found.append(ledger_id_from_path(path, self.root))
            except ValueError as exc:
                raise MetadataStoreError(f"unexpected node among the ledgers: {exc}", path) from None
