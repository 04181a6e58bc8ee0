"""The reference managed ledger and cursor: Pulsar's storage of a topic on the reference BookKeeper.

Modules, each with one job:

- :mod:`.bookkeeper`: the BookKeeper calls a managed ledger makes, each run to
  its end on the in-process cluster, with failures on purpose;
- :mod:`.snapshot`: a cursor's acknowledgement state as a value, and as
  Pulsar's ranges and batch bitsets;
- :mod:`.meta_store`: the ledger list and the cursors' znodes, in Pulsar's
  paths and bytes;
- :mod:`.managed_ledger`: ``ManagedLedger``: open and recovery, publish and
  rollover, trimming;
- :mod:`.cursor`: ``ManagedCursor``: acknowledgements, their persistence to
  the cursor ledger and the znode, the restore;
- :mod:`.topic`: ``Topic``: the broker's publish path with deduplication;
  :mod:`.entry_format`: its entries in Pulsar's bytes (``MessageMetadata``
  and payload); :mod:`.message_id`: message ids as Pulsar prints and orders
  them;
- :mod:`.events`: the log, in the specs' words;
- :mod:`.run`, :mod:`.abstraction`: a topic and a cursor on a crashing broker,
  and its cursor-spec state; :mod:`.simulation`: seeded random runs of it,
  recorded as traces;
- :mod:`.topic_run`, :mod:`.topic_abstraction`: producers, subscriptions and
  a topic on a crashing broker, and its managed-ledger-spec state;
  :mod:`.topic_simulation`: seeded random runs of it, recorded as traces;
- :mod:`.refinement`: the checks that each step of a run is one its spec
  allows.
"""

from ledgerspec.reference.managed_ledger.abstraction import CursorAbstraction
from ledgerspec.reference.managed_ledger.bookkeeper import BookKeeperError, BookKeeperFaults, BookKeeperLedgers
from ledgerspec.reference.managed_ledger.cursor import (
    CursorRecoveryError,
    CursorStateError,
    CursorStatus,
    ManagedCursor,
)
from ledgerspec.reference.managed_ledger.events import ManagedLedgerLog
from ledgerspec.reference.managed_ledger.managed_ledger import (
    MUTANTS,
    TOPIC_ONLY_MUTANTS,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
)
from ledgerspec.reference.managed_ledger.meta_store import (
    ManagedLedgerStore,
    MetaStoreError,
    StoredStateError,
    ZnodeFaults,
)
from ledgerspec.reference.managed_ledger.refinement import CursorRefinement
from ledgerspec.reference.managed_ledger.run import SUBSCRIPTION, TOPIC, BrokerCrashed, CursorRun, RunConfig
from ledgerspec.reference.managed_ledger.snapshot import CursorSnapshot

__all__ = [
    "MUTANTS",
    "SUBSCRIPTION",
    "TOPIC",
    "TOPIC_ONLY_MUTANTS",
    "BookKeeperError",
    "BookKeeperFaults",
    "BookKeeperLedgers",
    "BrokerCrashed",
    "CursorAbstraction",
    "CursorRecoveryError",
    "CursorRefinement",
    "CursorRun",
    "CursorSnapshot",
    "CursorStateError",
    "CursorStatus",
    "ManagedCursor",
    "ManagedLedger",
    "ManagedLedgerConfig",
    "ManagedLedgerError",
    "ManagedLedgerLog",
    "ManagedLedgerStore",
    "MetaStoreError",
    "RunConfig",
    "StoredStateError",
    "ZnodeFaults",
]
