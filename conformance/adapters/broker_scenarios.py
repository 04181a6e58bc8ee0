"""Workloads run with the released Pulsar Java client on a released Pulsar broker, each recorded as one topic trace.

The broker (``pulsar_broker.py``) runs on the BookKeeper cluster; the client
JVM (``java/LedgerspecPulsarClient.java``) publishes with explicit sequence
ids, one message an entry, and reads the topic back at the end. What the
client saw and what the driver did to the broker (``broker-killed``,
``broker-started``) go to one log, in order, numbered ``n``; the mapping to
the managed-ledger spec is :mod:`~ledgerspec.conformance.adapters.broker_topic`.

The point of these scenarios is the broker's deduplication across a crash
(``MessageDeduplication``, pulsar-broker 4.0.7), which no managed ledger on
its own has: the driver holds the broker's answers back (the proxy), waits
until the broker has written the messages they answer, and kills it; the
client, reconnected to the next broker, sends them again
(``ProducerImpl.resendMessages``). With deduplication on, that broker must
rebuild the producer's highest sequence id from the topic
(``MessageDeduplication.recoverSequenceIdsMap``, the dedup cursor's replay)
and answer each again-sent message as a duplicate, unwritten; with it off,
each is written a second time, as the spec allows there.

The driver checks the client's promise itself too: every message whose send
completed is read back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, ClusterError, Harness
from ledgerspec.conformance.adapters.jars import JarSet
from ledgerspec.conformance.adapters.pulsar_broker import PulsarBroker, start_pulsar_client

__all__ = ["BROKER_SCENARIOS", "PRODUCER", "SUBSCRIPTION", "BrokerScenario", "LostMessageError", "TopicDriver"]

PRODUCER = "producer-1"
SUBSCRIPTION = "subscription"
_WAIT_SECONDS = 60.0


class LostMessageError(Exception):
    """A message whose send completed is not in the topic, or is there twice where deduplication is on."""


class TopicDriver:
    """One broker, one topic, one producer and one durable subscription, on the cluster (module docstring)."""

    def __init__(self, cluster: BookKeeperCluster, jars: JarSet, scenario: BrokerScenario) -> None:
        self.scenario = scenario
        self.topic = f"persistent://public/default/{scenario.name}"
        self.broker = PulsarBroker(
            cluster, deduplication=scenario.deduplication, max_entries_per_ledger=scenario.max_entries_per_ledger
        )
        self.cluster = cluster
        self.jars = jars
        self.log: list[dict[str, Any]] = []  # the client's observations and the driver's notes, numbered "n"
        self.sent = 0  # the next sequence id
        self.answered: dict[int, tuple[int, int]] = {}  # sequence id -> the message id its send completed with
        self.read: list[tuple[int, int, str, int]] = []  # (ledger, entry, producer, sequence id), in order
        self._client: Harness | None = None

    # -- the broker's lifetime ---------------------------------------------------------
    def open(self) -> None:
        """Start the broker, the client, the subscription (from the first message) and the producer."""
        self.broker.proxy.start()
        self.broker.start()
        self._note({"ev": "broker-started", "broker": self.broker.starts})
        self._client = start_pulsar_client(self.cluster, self.jars, f"pulsar-client-{self.scenario.name}")
        self._call("connect", service_url=self.broker.service_url)
        self._call("subscribe", topic=self.topic, subscription=SUBSCRIPTION)
        self._call("producer", topic=self.topic, name=PRODUCER)

    def crash(self) -> None:
        """SIGKILL the broker; the client's connections close, and what the proxy held is lost."""
        self._collect()
        self.broker.kill()
        self._note({"ev": "broker-killed", "broker": self.broker.starts})

    def restart(self) -> None:
        """A new broker process; the client reconnects by itself and sends again what was not answered."""
        self.broker.start()
        self._note({"ev": "broker-started", "broker": self.broker.starts})
        self._await_answers()

    def finish(self) -> None:
        if self._client is not None:
            self._client.close()
            self._collect()
            self._client = None
        self.broker.kill()
        self.broker.proxy.close()

    # -- the producer and the reader -------------------------------------------------------
    def publish(self, count: int) -> None:
        """Send the next ``count`` messages; return once each is answered."""
        self._send(count)
        self._await_answers()

    def publish_unanswered(self, count: int) -> None:
        """Send the next ``count`` messages with the broker's answers held back; return once the broker has
        written them all (its ``entriesAddedCounter``): they are durable, and the client does not know."""
        self.broker.proxy.hold()
        self._send(count)
        deadline = time.monotonic() + _WAIT_SECONDS
        while int(self.broker.internal_stats(self.topic).get("entriesAddedCounter", -1)) < self.sent:
            if time.monotonic() > deadline:
                raise ClusterError(f"the broker did not write messages up to {self.sent - 1} in {_WAIT_SECONDS:.0f} s")
            time.sleep(0.05)

    def read_all(self) -> None:
        """Read the topic from its first message; check that every answered send is there, once if dedup is on."""
        self._call("read-all", topic=self.topic)
        self.read = [
            (int(o["id"][0]), int(o["id"][1]), str(o["producer"]), int(o["seq"])) for o in self.log if o["ev"] == "read"
        ]
        seqs = [seq for *_, seq in self.read]
        missing = sorted(set(self.answered) - set(seqs))
        if missing:
            raise LostMessageError(f"{self.scenario.name}: sends of {missing} completed; the topic lacks them")
        twice = sorted({seq for seq in seqs if seqs.count(seq) > 1})
        if twice and self.scenario.deduplication:
            raise LostMessageError(f"{self.scenario.name}: deduplication is on, and the topic holds {twice} twice")

    def _send(self, count: int) -> None:
        for _ in range(count):
            self._call("send", producer=PRODUCER, seq=self.sent)
            self.sent += 1

    def _await_answers(self) -> None:
        """Wait until the client has heard an answer to every message sent; a failed send is an error."""
        deadline = time.monotonic() + _WAIT_SECONDS
        while len(self.answered) < self.sent:
            self._collect()
            failed = [o for o in self.log if o["ev"] == "send-failed"]
            if failed:
                raise ClusterError(f"the send of {failed[0]['seq']} failed: {failed[0]['error']}")
            if time.monotonic() > deadline:
                raise ClusterError(f"{self.sent - len(self.answered)} sends unanswered after {_WAIT_SECONDS:.0f} s")
            time.sleep(0.05)

    # -- the log ---------------------------------------------------------------------------
    def _call(self, cmd: str, **arguments: Any) -> dict[str, Any]:
        assert self._client is not None
        try:
            return self._client.call(cmd, **arguments)
        finally:
            self._collect()

    def _collect(self) -> None:
        if self._client is not None:
            for obs in self._client.take_observations():
                if obs["ev"] == "receipt":
                    self.answered[int(obs["seq"])] = (int(obs["id"][0]), int(obs["id"][1]))
                self._note(obs)

    def _note(self, obs: dict[str, Any]) -> None:
        self.log.append({**obs, "n": len(self.log)})


@attrs.frozen
class BrokerScenario:
    name: str
    summary: str
    run: Callable[[TopicDriver], None]
    deduplication: bool  # brokerDeduplicationEnabled
    max_entries_per_ledger: int = 1000  # managedLedgerMaxEntriesPerLedger: no scenario fills a ledger
    expects: str | None = None  # a finding (findings.py) the scenario shows, or None: it must conform
    may_show: tuple[str, ...] = ()


BROKER_SCENARIOS: dict[str, BrokerScenario] = {}


def _scenario(name: str, summary: str, **options: Any) -> Callable[[Callable[[TopicDriver], None]], None]:
    def register(run: Callable[[TopicDriver], None]) -> None:
        BROKER_SCENARIOS[name] = BrokerScenario(name, summary, run, **options)

    return register


def _resend_after_crash(driver: TopicDriver) -> None:
    driver.open()
    driver.publish(3)
    driver.publish_unanswered(2)
    driver.crash()
    driver.restart()
    driver.publish(1)
    driver.read_all()


_scenario(
    "dedup-across-restart",
    "dedup on: 3 messages answered, 2 written with their answers lost, the broker killed; the client sends the 2 "
    "again to the next broker, which answers them as duplicates, unwritten; 1 more",
    deduplication=True,
)(_resend_after_crash)
_scenario(
    "no-dedup-across-restart",
    "dedup off: the same; the next broker writes the 2 sent again a second time",
    deduplication=False,
)(_resend_after_crash)
