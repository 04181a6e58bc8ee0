"""A released Apache Pulsar broker on the BookKeeper cluster, in a JVM of its own, and a Pulsar client beside it.

:class:`PulsarBroker` runs ``org.apache.pulsar.PulsarStandaloneStarter
--only-broker`` (pulsar-broker 4.0.7): the broker alone, with its metadata
in the cluster's ZooKeeper and its managed ledgers on the cluster's bookies,
configured by a ``broker.conf`` it writes (:data:`BROKER_SETTINGS`, and the
topic's deduplication on or off). :meth:`~PulsarBroker.kill` is a crash
(SIGKILL: nothing closed, nothing flushed); :meth:`~PulsarBroker.start`
again is a new broker process on the same ports and the same metadata,
which loads the topic when a client comes back to it. The broker's metadata
session is short (:data:`SESSION_MS`), so that the killed broker's ownership
of the namespace lapses soon after it dies.

Its clients reach it through a :class:`~.holding_proxy.HoldingProxy`: the
broker advertises the proxy's port (``advertisedListeners``), so that every
connection a client makes after its lookup passes the proxy too, and a
scenario can keep the broker's answers from the client, then crash it.

:func:`start_pulsar_client` starts the client JVM
(``java/LedgerspecPulsarClient.java``, the released pulsar-client 4.0.7),
driven through the cluster's :class:`~.cluster.Harness` protocol.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from typing import Any

from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, ClusterError, Harness, free_ports, wait_for_port
from ledgerspec.conformance.adapters.holding_proxy import HoldingProxy
from ledgerspec.conformance.adapters.jars import JarSet, pulsar_client_classes

__all__ = ["BROKER_SETTINGS", "SESSION_MS", "PulsarBroker", "start_pulsar_client"]

#: The broker's metadata session (``metadataStoreSessionTimeoutMillis``; 30 s by default): a killed broker's
#: ownership of the namespace lasts until it expires, and its successor waits for that.
SESSION_MS = 2000
_READY_TIMEOUT = 120.0
_BROKER_JVM = ("-Xmx512m", "-XX:MaxDirectMemorySize=512m")

#: What the scenarios need of the broker beyond Pulsar's defaults, each with why.
BROKER_SETTINGS = {
    "clusterName": "ledgerspec",
    "bindAddress": "127.0.0.1",
    "metadataStoreSessionTimeoutMillis": str(SESSION_MS),
    # Entries of two bookies of the cluster's three, both to acknowledge (Pulsar's defaults are 2, 2, 2).
    "managedLedgerDefaultEnsembleSize": "2",
    "managedLedgerDefaultWriteQuorum": "2",
    "managedLedgerDefaultAckQuorum": "2",
    # The system topics, the transaction coordinator and the functions worker are other topics and ledgers:
    # the scenarios' topic is the only one the broker serves.
    "topicLevelPoliciesEnabled": "false",
    "systemTopicEnabled": "false",
    "transactionCoordinatorEnabled": "false",
    "functionsWorkerEnabled": "false",
    "brokerDeleteInactiveTopicsEnabled": "false",
}


class PulsarBroker:
    """One broker of the cluster, started and killed by a scenario (module docstring).

    ``deduplication`` is ``brokerDeduplicationEnabled``; ``max_entries_per_ledger`` is
    ``managedLedgerMaxEntriesPerLedger``. The caller starts the proxy
    (``proxy.start()``) before the broker, and closes it after the last kill.
    """

    def __init__(self, cluster: BookKeeperCluster, *, deduplication: bool, max_entries_per_ledger: int) -> None:
        self.cluster = cluster
        self.deduplication = deduplication
        self.max_entries_per_ledger = max_entries_per_ledger
        self.port, self.web_port = free_ports(2)
        self.proxy = HoldingProxy(self.port)
        self.conf = cluster.directory / "broker.conf"
        settings = {
            **BROKER_SETTINGS,
            "brokerServicePort": str(self.port),
            "webServicePort": str(self.web_port),
            "advertisedListeners": f"internal:pulsar://127.0.0.1:{self.proxy.port}",
            "metadataStoreUrl": f"zk:127.0.0.1:{cluster.zk_port}",
            "configurationMetadataStoreUrl": f"zk:127.0.0.1:{cluster.zk_port}",
            "bookkeeperMetadataServiceUri": cluster.metadata_uri,
            "brokerDeduplicationEnabled": str(deduplication).lower(),
            "managedLedgerMaxEntriesPerLedger": str(max_entries_per_ledger),
        }
        self.conf.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def service_url(self) -> str:
        """Where clients connect: the proxy."""
        return f"pulsar://127.0.0.1:{self.proxy.port}"

    def start(self) -> None:
        """Start a broker process; return once it serves the namespace ``public/default``."""
        self.starts += 1
        log = self.cluster.directory / f"broker-{self.starts}.log"
        self.process = self.cluster.start_jvm(
            log.name,
            *_BROKER_JVM,
            "org.apache.pulsar.PulsarStandaloneStarter",
            *("--config", str(self.conf), "--only-broker", "--no-functions-worker", "--no-stream-storage"),
            *("--zookeeper-port", str(self.cluster.zk_port)),
            # The standalone starter keeps its metadata in RocksDB unless told ZooKeeper (PulsarStandalone.start).
            env={"PULSAR_STANDALONE_USE_ZOOKEEPER": "1"},
        )
        wait_for_port(self.port, self.process, log, "the Pulsar broker")
        deadline = time.monotonic() + _READY_TIMEOUT
        # The port opens before the starter creates the namespace (PulsarStandalone.createNameSpace).
        while "public/default" not in (self._admin("namespaces/public") or ()):
            if self.process.poll() is not None:
                raise ClusterError(f"the Pulsar broker exited with status {self.process.returncode}: see {log}")
            if time.monotonic() > deadline:
                raise ClusterError(f"the Pulsar broker did not serve public/default within {_READY_TIMEOUT:.0f} s")
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL the broker, and close its clients' connections through the proxy, throwing away what it held."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.proxy.drop()

    def internal_stats(self, topic: str) -> dict[str, Any]:
        """The topic's managed ledger as the broker reports it (``/admin/v2/.../internalStats``)."""
        found = self._admin(f"persistent/{topic.removeprefix('persistent://')}/internalStats")
        if not isinstance(found, dict):
            raise ClusterError(f"the Pulsar broker reports no internal stats of {topic}")
        return found

    def _admin(self, path: str) -> Any:
        """GET ``/admin/v2/<path>`` of the broker's REST API; None while it does not answer, or answers an error."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/admin/v2/{path}", timeout=10) as reply:
                return json.loads(reply.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None


def start_pulsar_client(cluster: BookKeeperCluster, jars: JarSet, name: str = "pulsar-client") -> Harness:
    """The Pulsar client JVM (``java/LedgerspecPulsarClient.java``), logging to ``NAME.log``."""
    return cluster.start_harness(name, main="LedgerspecPulsarClient", classes=pulsar_client_classes(jars))
