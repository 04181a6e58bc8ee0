"""How autorecovery reaches the bookies: read an entry from one, write it to another.

Re-replication moves entries as the bookies store them (header, payload,
digest), so a copy is checked against the ledger's digest by the bookie that
takes it, as BookKeeper's ``LedgerFragmentReplicator`` sends what it read
with a recovery add. ``ClusterBookies`` is this access over the reference
engine's in-process cluster: each call is one request served by the bookie,
durably (its journal is fsynced before it answers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ledgerspec.reference.ledger.cluster import InProcessCluster
from ledgerspec.reference.ledger.protocol import Request, RequestKind

__all__ = ["BookieAccess", "ClusterBookies", "serves_entry"]

# The client id of re-replication's requests: not a ledger client of the ledger spec.
REPLICATION_CLIENT = -1


class BookieAccess(Protocol):
    def read(self, bookie: str, ledger_id: int, entry_id: int) -> bytes | None:
        """The entry as the bookie stores it; None when the bookie is down or lacks it."""
        ...

    def write(self, bookie: str, ledger_id: int, entry_id: int, entry: bytes, master_key: bytes) -> bool:
        """A recovery add of the stored entry to the bookie; whether it took it, durably."""
        ...


def serves_entry(bookies: BookieAccess) -> Callable[[str, int, int], bool]:
    """Whether a bookie serves an entry when asked: the read by which ``LedgerChecker`` finds a fragment lost."""
    return lambda bookie, ledger_id, entry_id: bookies.read(bookie, ledger_id, entry_id) is not None


class ClusterBookies:
    """:class:`BookieAccess` to the bookies of an :class:`InProcessCluster`."""

    def __init__(self, cluster: InProcessCluster) -> None:
        self.cluster = cluster

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
