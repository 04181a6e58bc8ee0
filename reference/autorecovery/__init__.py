"""Autorecovery on the reference engine: the auditor and the replication workers, over a metadata store.

==================  ============================================================
module              job
==================  ============================================================
``znodes``          the znodes' paths and their text-format protobuf data, as
                    BookKeeper writes them (also read from a real cluster)
``election``        bookies' availability and the auditor's election, through
                    ephemeral znodes of their sessions
``underreplication`` marks and locks of under-replicated ledgers
``fragments``       a closed ledger's fragments, and which are lost
``bookies``         reading and writing stored entries on the bookies
``auditor``         the auditor's bookie check: lost bookies, marked ledgers
``replication``     a replication worker, one spec step at a time
``run``             a closed ledger under autorecovery, each step logged as
                    the spec's action
``abstraction``     the spec's state of a run, read from the real parts
``refinement``      the check that each step of a run is one the spec takes
==================  ============================================================

Everything talks to the metadata through the ``MetadataStore`` interface, so
it runs on the embedded store and on ZooKeeper alike.
"""

from ledgerspec.reference.autorecovery.abstraction import abstract_state
from ledgerspec.reference.autorecovery.auditor import AUDITOR_MUTANTS, Auditor
from ledgerspec.reference.autorecovery.bookies import BookieAccess, ClusterBookies
from ledgerspec.reference.autorecovery.election import (
    available_bookies,
    current_auditor,
    register_bookie,
    vote_for_auditor,
)
from ledgerspec.reference.autorecovery.fragments import Fragment, fragments, lost_fragments
from ledgerspec.reference.autorecovery.refinement import AutorecoveryRefinement
from ledgerspec.reference.autorecovery.replication import WORKER_MUTANTS, WORKER_STEPS, CopyTask, ReplicationWorker
from ledgerspec.reference.autorecovery.run import MUTANTS, SPEC_CONSTANTS, AutorecoveryRun, RunConfig
from ledgerspec.reference.autorecovery.underreplication import ReplicationLock, UnderreplicationManager
from ledgerspec.reference.autorecovery.znodes import AutorecoveryZnodeError, UnderreplicationPaths

__all__ = [
    "AUDITOR_MUTANTS",
    "MUTANTS",
    "SPEC_CONSTANTS",
    "WORKER_MUTANTS",
    "WORKER_STEPS",
    "Auditor",
    "AutorecoveryRefinement",
    "AutorecoveryRun",
    "AutorecoveryZnodeError",
    "BookieAccess",
    "ClusterBookies",
    "CopyTask",
    "Fragment",
    "ReplicationLock",
    "ReplicationWorker",
    "RunConfig",
    "UnderreplicationManager",
    "UnderreplicationPaths",
    "abstract_state",
    "available_bookies",
    "current_auditor",
    "fragments",
    "lost_fragments",
    "register_bookie",
    "vote_for_auditor",
]
