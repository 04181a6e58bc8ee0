"""The reference ledger client: BookKeeper's write path, recovery and reads, over an in-process cluster.

Modules, each with one job:

- :mod:`.schedule`: the striping (write sets) and the quorum rules;
- :mod:`.protocol`: requests and replies between clients and bookies;
- :mod:`.writer`, :mod:`.recovery`, :mod:`.reader`: the client's cores,
  without I/O: state and input in, requests and decisions out;
- :mod:`.client`: the driver around them (``BookKeeperClient``): metadata
  through a ``LedgerMetadataStore``, requests through a network, futures
  for the application;
- :mod:`.cluster`: reference bookies and the network between them, in
  process, one step at a time, with faults;
- :mod:`.events`: the engine's log, in the ledger spec's words;
- :mod:`.simulation`: one ledger run by a seeded random choice of steps;
- :mod:`.abstraction`, :mod:`.refinement`: the spec state of a simulation,
  and the check that each step is one the spec allows;
- :mod:`.trace`: simulated runs as trace files the conformance checker reads.
"""

from ledgerspec.reference.ledger.client import (
    MUTANTS,
    BookKeeperClient,
    ClientConfig,
    LedgerHandle,
    LocalStep,
    Network,
    OrderedPlacement,
    PlacementPolicy,
    RandomPlacement,
    ReadHandle,
    RecoveryOpen,
    master_key,
)
from ledgerspec.reference.ledger.cluster import BookieNode, BookieView, InProcessCluster
from ledgerspec.reference.ledger.errors import (
    BadEntryError,
    LedgerClientError,
    LedgerClosedError,
    LedgerFencedError,
    LedgerStateError,
    NotEnoughBookiesError,
    ReadBeyondLacError,
    ReadFailedError,
    RecoveryFailedError,
    TooManyPendingAddsError,
)
from ledgerspec.reference.ledger.events import EventLog
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.ledger.reader import EntryRead, LacRead
from ledgerspec.reference.ledger.recovery import LedgerRecovery, RecoveryPhase
from ledgerspec.reference.ledger.schedule import RoundRobinSchedule
from ledgerspec.reference.ledger.simulation import (
    FAULTS,
    SPEC_CONSTANTS,
    LedgerSimulation,
    SimulationConfig,
    Step,
    StepKind,
)
from ledgerspec.reference.ledger.writer import LedgerWriter, WriterStatus

__all__ = [
    "FAULTS",
    "MUTANTS",
    "SPEC_CONSTANTS",
    "BadEntryError",
    "BookKeeperClient",
    "BookieNode",
    "BookieView",
    "ClientConfig",
    "EntryRead",
    "EventLog",
    "InProcessCluster",
    "LacRead",
    "LedgerClientError",
    "LedgerClosedError",
    "LedgerFencedError",
    "LedgerHandle",
    "LedgerRecovery",
    "LedgerSimulation",
    "LedgerStateError",
    "LedgerWriter",
    "LocalStep",
    "Network",
    "NotEnoughBookiesError",
    "OrderedPlacement",
    "PlacementPolicy",
    "RandomPlacement",
    "ReadBeyondLacError",
    "ReadFailedError",
    "ReadHandle",
    "RecoveryFailedError",
    "RecoveryOpen",
    "RecoveryPhase",
    "Reply",
    "ReplyCode",
    "Request",
    "RequestKind",
    "RoundRobinSchedule",
    "SimulationConfig",
    "Step",
    "StepKind",
    "TooManyPendingAddsError",
    "WriterStatus",
    "master_key",
]
