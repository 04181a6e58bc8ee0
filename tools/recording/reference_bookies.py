"""BookKeeper's ZooKeeper and client harness from the jars, with reference bookies in place of BookKeeper's.

``ledgerspec record bookkeeper --bookies reference`` runs the scenario suite
of :mod:`ledgerspec.conformance.adapters.scenarios` with the released Java
client on reference bookies served over TCP
(:class:`~ledgerspec.reference.wire.ServedBookies`), registered in the
cluster's ZooKeeper as BookKeeper's bookies register. :class:`ReferenceBookieCluster`
stands in for :class:`~ledgerspec.conformance.adapters.cluster.BookKeeperCluster`
where a scenario and the recorder use it:

=======================  =============================================================
cluster call             with reference bookies
=======================  =============================================================
``kill_bookie(n)``       ``ServedBookies.crash``: connections cut, files as they are;
                         its registration goes at once (a killed JVM's stays until its
                         session expires)
``stop_bookie(n)``       ``ServedBookies.shut_down``: flushed and checkpointed
``restart_bookie(n)``    ``ServedBookies.restart``: the journal replayed, registered
                         again on the same port
``bookie_directory(n)``  the reference bookie's data directory, in BookKeeper's file
                         formats (``inspect-bookie`` reads it)
``bookie_log(n)``        an empty file: the reference bookies log through Python's
                         ``logging``, so a restart's replay log is empty
``apply_fault(n, ...)``  ``ServedBookies.apply``: a fault of ``reference.wire.faults``
                         from now on (BookKeeper's cluster has none: a scenario that
                         commands faults runs on reference bookies only)
=======================  =============================================================

The reference bookies have one ledger storage of their own, so the
scenarios that name BookKeeper's storages all run on them; and they cannot
show a finding of BookKeeper's bookie (``Finding.part``), which the
recorder then does not expect.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kazoo.client import KazooClient
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, ClusterError, Harness
from ledgerspec.conformance.adapters.jars import JarSet
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.reference.wire.faults import parse_command

__all__ = ["REFERENCE_STORAGE", "ReferenceBookieCluster"]

#: The ``storage`` a :class:`ReferenceBookieCluster` reports: the reference bookie's own.
REFERENCE_STORAGE = "reference"


class ReferenceBookieCluster:
    """ZooKeeper and the harness of a :class:`BookKeeperCluster` with no bookie of its own, and ``bookies``
    reference bookies; a context manager, as the cluster it stands in for."""

    def __init__(
        self, jars: JarSet, directory: Path, bookies: int, status: Callable[[str], None] | None = None
    ) -> None:
        self.directory = directory
        self.count = bookies
        self.storage = REFERENCE_STORAGE
        self._cluster = BookKeeperCluster(jars, directory, bookies=0, status=status)
        self._status = status or (lambda _step: None)
        self._served: ServedBookies | None = None
        self._stopped = False

    def start(self) -> ReferenceBookieCluster:
        self._cluster.start()
        self._status(f"starting {self.count} reference bookies")
        self._served = ServedBookies(
            self.directory / "reference-bookies", self.count, zookeeper=f"127.0.0.1:{self._cluster.zk_port}"
        ).start()
        for n in range(1, self.count + 1):
            self.bookie_log(n).touch()
        self._cluster.wait_for_bookies(self.count)
        return self

    @property
    def served(self) -> ServedBookies:
        if self._served is None:
            raise ClusterError("the reference bookies are not running")
        return self._served

    # -- what the scenarios and the recorder ask of a cluster -------------------------------------
    @property
    def harness(self) -> Harness | None:
        return self._cluster.harness

    @property
    def zookeeper(self) -> KazooClient:
        return self._cluster.zookeeper

    @property
    def bookie_ids(self) -> list[str]:
        return self.served.bookie_ids

    def number_of(self, bookie_id: str) -> int:
        ids = self.bookie_ids
        if bookie_id not in ids:
            raise ClusterError(f"no bookie of this cluster has id {bookie_id}")
        return ids.index(bookie_id) + 1

    def bookie_directory(self, n: int) -> Path:
        return self.served.bookies[n - 1].directory

    def bookie_log(self, n: int) -> Path:
        return self.directory / f"reference-bookie-{n}.log"

    def wait_for_bookies(self, count: int) -> list[str]:
        return self._cluster.wait_for_bookies(count)

    def kill_bookie(self, n: int) -> None:
        self.served.crash(n)

    def stop_bookie(self, n: int) -> None:
        self.served.shut_down(n)

    def apply_fault(self, n: int, fault: str, **fields: int | str) -> None:
        """Bookie ``n`` shows ``fault`` from now on (:mod:`ledgerspec.reference.wire.faults`)."""
        self.served.apply(parse_command({"fault": fault, "bookie": n, **fields}, "a scenario's fault", self.count))

    def restart_bookie(self, n: int) -> None:
        self.served.restart(n)

    def stop(self) -> None:
        """Stop the bookies the clean way, then ZooKeeper and the harness; the bookies' ids and directories stay
        known, for reading their files afterwards."""
        if self._served is not None and not self._stopped:
            self._served.stop()
        self._stopped = True
        self._cluster.stop()

    def __enter__(self) -> ReferenceBookieCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
