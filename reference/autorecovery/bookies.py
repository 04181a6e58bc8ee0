"""How autorecovery reaches the bookies: read an entry from one, write it to another, read the LAC an open
ledger's bookies know, recover an open ledger.

Re-replication moves entries as the bookies store them (header, payload,
digest), so a copy is checked against the ledger's digest by the bookie that
takes it, as BookKeeper's ``LedgerFragmentReplicator`` sends what it read
with a recovery add. ``ClusterBookies`` is this access over the reference
engine's in-process cluster: each call is one request served by the bookie,
durably (its journal is fsynced before it answers). The recovery of an open
ledger is the reference client's open with recovery, driven on the cluster
until it ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ledgerspec.reference.ledger.client import BookKeeperClient, OrderedPlacement
from ledgerspec.reference.ledger.cluster import InProcessCluster
from ledgerspec.reference.ledger.errors import LedgerStateError
from ledgerspec.reference.ledger.protocol import Reply, Request, RequestKind
from ledgerspec.reference.ledger.reader import LacRead
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore

__all__ = ["BookieAccess", "ClusterBookies", "read_last_add_confirmed", "serves_entry"]

# The client id of re-replication's requests: not a ledger client of the ledger spec.
REPLICATION_CLIENT = -1
# The client ids of the workers' opens with recovery: apart from the writer's (0) and the ledger spec's recoverers.
RECOVERY_CLIENT_BASE = 1000


class BookieAccess(Protocol):
    def read(self, bookie: str, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry as the bookie stores it; None when the bookie is down or lacks it."""
        ...

    def write(self, bookie: str, ledger_id: int, entry_id: int, entry: bytes, master_key: bytes) -> bool:
        """A recovery add of the stored entry to the bookie; whether it took it, durably."""
        ...

    def ask(self, request: Request) -> Reply | None:
        """The bookie's reply to a read; None when the bookie is down."""
        ...

    def recover(self, ledgers: LedgerMetadataStore, ledger_id: int) -> bool:
        """Open the ledger with recovery (fencing its writer), which closes it; whether it is closed now."""
        ...


def serves_entry(bookies: BookieAccess) -> Callable[[str, int, int], bool]:
    """Whether a bookie serves an entry when asked: the read by which ``LedgerChecker`` finds a fragment lost."""
    return lambda bookie, ledger_id, entry_id: bookies.read(bookie, ledger_id, entry_id) is not None


def read_last_add_confirmed(metadata: LedgerMetadata, bookies: BookieAccess) -> int | None:
    """The LAC a handle opened without recovery starts from: the highest the bookies of the last segment report,
    once their replies cover every write set; None when they do not (the open fails)."""
    # LedgerOpenOp.openWithMetadata (release-4.17.2) without recovery: asyncReadLastConfirmed, whose
    # PendingReadLacOp takes the highest LAC of the replies once they cover the ensemble, and fails otherwise.
    read = LacRead(REPLICATION_CLIENT, 0, metadata)
    for request in read.requests():
        reply = bookies.ask(request)
        if reply is not None:
            read.on_reply(reply)
    return read.lac if read.done else None


class ClusterBookies:
    """:class:`BookieAccess` to the bookies of an :class:`InProcessCluster`."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self.cluster = cluster
        self._recoveries = 0

    def read(self, bookie: str, ledger_id: int, entry_id: int) -> bytes | None:
        node = self.cluster.nodes.get(bookie)
        if node is None or not node.up:
            return None
        reply, _ = node.serve(Request(RequestKind.READ_ENTRY, REPLICATION_CLIENT, 0, bookie, ledger_id, entry_id))
        return reply.data if reply.ok else None

    def write(self, bookie: str, ledger_id: int, entry_id: int, entry: bytes, master_key: bytes) -> bool:
        node = self.cluster.nodes.get(bookie)
        if node is None or not node.up:
            return False
        request = Request(
            RequestKind.ADD, REPLICATION_CLIENT, 0, bookie, ledger_id, entry_id,
            recovery=True, data=entry, master_key=master_key,
        )  # fmt: skip
        reply, _ = node.serve(request)
        return reply.ok

    def ask(self, request: Request) -> Reply | None:
        node = self.cluster.nodes.get(request.bookie)
        if node is None or not node.up:
            return None
        reply, _ = node.serve(request)
        return reply

    def recover(self, ledgers: LedgerMetadataStore, ledger_id: int) -> bool:
        """The reference client's open with recovery, on a client of its own, driven until it ends; the requests
        it leaves unanswered (to bookies that are down) go with its connections."""
        self._recoveries += 1
        client_id = RECOVERY_CLIENT_BASE + self._recoveries
        client = self.cluster.attach(BookKeeperClient(client_id, ledgers, self.cluster, placement=OrderedPlacement()))
        try:
            recovery = client.recover_ledger(ledger_id)
            try:
                self.cluster.run_until(recovery.future.done)
            except LedgerStateError:
                return False  # it waits for a bookie that is down: the open fails, leaving the ledger in recovery
            return recovery.future.exception() is None
        finally:
            for request in [r for r in self.cluster.in_flight if r.client == client_id]:
                self.cluster.lose(request)
            self.cluster.clients.pop(client_id, None)
