"""Ledger metadata in a metadata store, and new ledger ids, on each store implementation."""

from __future__ import annotations

import itertools

import attrs
import pytest
from ledgerspec.reference.metadata import (
    BadVersionError,
    LedgerExistsError,
    LedgerIdAllocator,
    LedgerMetadata,
    LedgerMetadataFormatError,
    LedgerMetadataStore,
    LedgerState,
    MetadataStore,
    MetadataStoreError,
    NoSuchLedgerError,
    VersionedMetadata,
)
from metadata_backends import Events, MetadataBackend

ENSEMBLE = ["bookie-1:3181", "bookie-2:3181", "bookie-3:3181"]


def new_ledger(ledger_id: int = 1) -> LedgerMetadata:
    return LedgerMetadata(ledger_id, 3, 3, 2, [(0, ENSEMBLE)])


def ledgers_on(store: MetadataStore, tokens: itertools.count[int] | None = None) -> LedgerMetadataStore:
    token_source = tokens if tokens is not None else itertools.count(1000)
    return LedgerMetadataStore(store, creator_tokens=lambda: next(token_source))


def test_create_writes_bookkeepers_bytes_at_the_hierarchical_path(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    ledgers = ledgers_on(store)
    created = ledgers.create(new_ledger(1))
    assert created == VersionedMetadata(attrs.evolve(new_ledger(1), creator_token=1000), 0)
    value, stat = store.get("/ledgers/00/0000/L0001")
    assert value.startswith(b"BookieMetadataFormatVersion\t3\n")
    assert stat.version == 0
    assert ledgers.read(1) == created


def test_compare_and_set_of_ledger_metadata(metadata_backend: MetadataBackend) -> None:
    writer, recoverer = ledgers_on(metadata_backend.open()), ledgers_on(metadata_backend.open())
    opened = writer.create(new_ledger(1))
    seen = recoverer.read(1)
    recovering = recoverer.write(seen.metadata.in_recovery(), seen.version)
    assert recovering.version == 1
    # The writer's ensemble change, made from what it read before, loses.
    with pytest.raises(BadVersionError, match="/ledgers/00/0000/L0001: expected version 0, the node has version 1"):
        writer.write(opened.metadata.with_ensemble_from(5, ["bookie-1:3181", "bookie-4:3181", "bookie-3:3181"]), 0)
    closed = recoverer.write(recovering.metadata.closed_at(last_entry_id=4, length=500), recovering.version)
    assert writer.read(1) == closed
    assert (closed.metadata.state, closed.metadata.last_entry_id, closed.version) == (LedgerState.CLOSED, 4, 2)


def test_create_of_an_existing_ledger(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    ledgers_on(store, itertools.count(7)).create(new_ledger(1))
    # Another creator: BKLedgerExistException.
    with pytest.raises(LedgerExistsError, match="ledger 1 already exists: /ledgers/00/0000/L0001"):
        ledgers_on(store, itertools.count(8)).create(new_ledger(1))
    # The same creator again (its first reply was lost): success, at the stored version.
    again = ledgers_on(store, itertools.count(7)).create(new_ledger(1))
    assert (again.version, again.metadata.creator_token) == (0, 7)


def test_reading_a_missing_ledger(metadata_backend: MetadataBackend) -> None:
    ledgers = ledgers_on(metadata_backend.open())
    with pytest.raises(NoSuchLedgerError, match=r"no metadata for ledger 42 \(no node at /ledgers/00/0000/L0042\)"):
        ledgers.read(42)
    with pytest.raises(NoSuchLedgerError):
        ledgers.write(new_ledger(42), 0)


def test_corrupt_metadata_is_reported_with_its_path(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    store.create("/ledgers/00/0000/L0009", b"BookieMetadataFormatVersion\t3\n\x05\x08", make_parents=True)
    with pytest.raises(LedgerMetadataFormatError, match="at /ledgers/00/0000/L0009 is unreadable: length prefix"):
        ledgers_on(store).read(9)


def test_watch_reports_each_new_version_then_the_deletion(metadata_backend: MetadataBackend) -> None:
    writer, watcher = ledgers_on(metadata_backend.open()), ledgers_on(metadata_backend.open())
    created = writer.create(new_ledger(3))
    seen: list[VersionedMetadata | None] = []
    events = Events()

    def listener(ledger_id: int, current: VersionedMetadata | None) -> None:
        assert ledger_id == 3
        seen.append(current)
        events(current)

    handle = watcher.watch(3, listener)
    recovering = writer.write(created.metadata.in_recovery(), created.version)
    events.wait_for(1)
    writer.delete(3, recovering.version)
    events.wait_for(2)
    handle.cancel()
    assert seen == [recovering, None]


def test_delete_removes_the_directories_it_empties(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    ledgers = ledgers_on(store)
    for ledger_id in (1, 2, 10001):
        ledgers.create(new_ledger(ledger_id))
    assert store.children("/ledgers/00") == ["0000", "0001"]
    with pytest.raises(BadVersionError):
        ledgers.delete(10001, 3)
    ledgers.delete(10001, 0)
    assert store.children("/ledgers/00") == ["0000"]
    ledgers.delete(1, 0)
    ledgers.delete(2, 0)
    assert store.children("/ledgers") == []
    ledgers.delete(2, 0)  # already gone: fine, as in BookKeeper


def test_ledger_ids_lists_both_layouts_and_skips_bookkeepers_other_nodes(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    ledgers = ledgers_on(store)
    for ledger_id in (2**32, 5, 1234567890, 0):
        ledgers.create(new_ledger(ledger_id))
    for other in ("available/bookie-1:3181", "LAYOUT", "INSTANCEID", "idgen/ID-0000000001", "underreplication"):
        store.create(f"/ledgers/{other}", make_parents=True)
    assert ledgers.ledger_ids() == [0, 5, 1234567890, 2**32]
    store.create("/ledgers/00/0000/stray")
    with pytest.raises(MetadataStoreError, match="unexpected node among the ledgers: /ledgers/00/0000/stray"):
        ledgers.ledger_ids()


def test_no_ledgers_yet(metadata_backend: MetadataBackend) -> None:
    assert ledgers_on(metadata_backend.open()).ledger_ids() == []


def test_ids_count_up_from_zero_and_leave_no_nodes(metadata_backend: MetadataBackend) -> None:
    first, second = metadata_backend.open(), metadata_backend.open()
    ids = [LedgerIdAllocator(store).next_id() for store in (first, second, first, second)]
    assert ids == [0, 1, 2, 3]
    assert first.children("/ledgers/idgen") == []


def test_long_ids_once_idgen_long_exists(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    allocator = LedgerIdAllocator(store)
    assert allocator.next_id() == 0
    store.create("/ledgers/idgen-long")  # as the first overflow of the 31-bit ids leaves it
    assert [allocator.next_id(), allocator.next_id()] == [1 << 32, (1 << 32) + 1]
    assert store.children("/ledgers/idgen-long") == ["HOB-0000000001"]


def test_long_ids_use_the_newest_hob_directory_and_keep_three(metadata_backend: MetadataBackend) -> None:
    store = metadata_backend.open()
    for high_bits in range(1, 6):
        store.create(f"/ledgers/idgen-long/HOB-{high_bits:010d}", make_parents=True)
    assert LedgerIdAllocator(store).next_id() == 5 << 32
    assert store.children("/ledgers/idgen-long") == ["HOB-0000000003", "HOB-0000000004", "HOB-0000000005"]
