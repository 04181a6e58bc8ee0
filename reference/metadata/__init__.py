"""The metadata store of the reference engine, and BookKeeper's ledger metadata in it.

==============================  ==============================================
module                          job
==============================  ==============================================
``store``                       the interface: versioned nodes, compare-and-set,
                                sequential and ephemeral nodes, watches; errors
``embedded``                    the store in-process: in memory, or in SQLite
``zookeeper``                   the store on a ZooKeeper server (kazoo)
``ledger_metadata``             a ledger's metadata as a value
``ledger_metadata_format``      those values as BookKeeper's znode bytes
``ledger_paths``                ledger id <-> znode path
``ledger_ids``                  new ledger ids from sequential nodes
``ledger_store``                ledger metadata in a store: create, read, CAS,
                                delete, watch, list
==============================  ==============================================

``zookeeper`` is not imported here, so that the embedded store works
without importing kazoo.
"""

from ledgerspec.reference.metadata.embedded import EmbeddedMetadataStore
from ledgerspec.reference.metadata.ledger_ids import LedgerIdAllocator
from ledgerspec.reference.metadata.ledger_metadata import (
    INVALID_ENTRY_ID,
    DigestType,
    InvalidLedgerMetadataError,
    LedgerMetadata,
    LedgerState,
    Segment,
)
from ledgerspec.reference.metadata.ledger_metadata_format import (
    LedgerMetadataFormatError,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from ledgerspec.reference.metadata.ledger_paths import ledger_id_from_path, ledger_path
from ledgerspec.reference.metadata.ledger_store import (
    LedgerExistsError,
    LedgerMetadataStore,
    NoSuchLedgerError,
    VersionedMetadata,
)
from ledgerspec.reference.metadata.store import (
    ANY_VERSION,
    BadVersionError,
    EventType,
    InvalidPathError,
    MetadataStore,
    MetadataStoreError,
    NoChildrenForEphemeralsError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionClosedError,
    Stat,
    StoreUnavailableError,
    Versioned,
    Watcher,
    WatchEvent,
    WatchHandle,
)

__all__ = [
    "ANY_VERSION",
    "INVALID_ENTRY_ID",
    "BadVersionError",
    "DigestType",
    "EmbeddedMetadataStore",
    "EventType",
    "InvalidLedgerMetadataError",
    "InvalidPathError",
    "LedgerExistsError",
    "LedgerIdAllocator",
    "LedgerMetadata",
    "LedgerMetadataFormatError",
    "LedgerMetadataStore",
    "LedgerState",
    "MetadataStore",
    "MetadataStoreError",
    "NoChildrenForEphemeralsError",
    "NoNodeError",
    "NoSuchLedgerError",
    "NodeExistsError",
    "NotEmptyError",
    "Segment",
    "SessionClosedError",
    "Stat",
    "StoreUnavailableError",
    "Versioned",
    "VersionedMetadata",
    "WatchEvent",
    "WatchHandle",
    "Watcher",
    "decode_ledger_metadata",
    "encode_ledger_metadata",
    "ledger_id_from_path",
    "ledger_path",
]
