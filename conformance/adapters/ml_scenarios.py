"""Workloads run on a real Pulsar managed ledger and durable cursor, each recorded as one cursor trace.

A broker here is a harness JVM running Pulsar's ``ManagedLedgerFactoryImpl``
(managed-ledger 4.0.7) on the BookKeeper cluster; a crash kills that JVM
(SIGKILL: nothing is closed or flushed) and a new one opens the managed
ledger and the cursor again, as a broker that takes the topic over does. The
driver collects what every broker process reported, in order, and notes the
kills itself; the consumer's promise is checked twice: by the oracle, from
the trace, and here, through the API: a restored cursor must not skip a
message the consumer did not acknowledge.

A second broker may also open the managed ledger while the first still runs
(:meth:`BrokerDriver.take_over`), as after a bundle unload or an expired
metadata session; every observation a broker process reported carries its
number (``broker``: 1, 2, ...), so that a mapping can tell the owner's from
those of a broker that lost the topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
from kazoo.security import OPEN_ACL_UNSAFE, make_acl
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, ClusterError, Harness
from ledgerspec.conformance.adapters.managed_ledger import CURSOR_KEY

__all__ = ["ML_SCENARIOS", "BrokerDriver", "ManagedLedgerScenario", "SkippedMessageError"]

CURSOR = "subscription"
MANAGED_LEDGERS_ROOT = "/managed-ledgers"  # MetaStoreImpl: a cursor's znode is <root>/<managed ledger>/<cursor>
SWITCH_TIMEOUT = 30.0  # seconds to wait for a cursor-ledger switch that runs in the broker's background


class SkippedMessageError(Exception):
    """A restored cursor covers, or a cursor's reads pass over, a message the consumer never acknowledged: it will
    never be delivered."""


class BrokerDriver:
    """A scenario's broker processes, one managed ledger and its cursor."""

    def __init__(
        self,
        cluster: BookKeeperCluster,
        scenario: str,
        max_entries_per_ledger: int,
        metadata_max_entries_per_ledger: int,
        maximum_rollover_ms: int = 0,
    ) -> None:
        self.cluster = cluster
        self.scenario = scenario
        self.name = f"ledgerspec/real/persistent/{scenario}"  # tenant/namespace/persistent/topic, as Pulsar names it
        self.max_entries_per_ledger = max_entries_per_ledger
        self.metadata_max_entries_per_ledger = metadata_max_entries_per_ledger
        self.maximum_rollover_ms = maximum_rollover_ms  # 0: Pulsar's default (four hours), which no scenario reaches
        self.log: list[dict[str, Any]] = []  # every broker process's observations, numbered in order ("n")
        self.published: list[tuple[int, int]] = []
        self.acknowledged: set[tuple[int, int]] = set()
        self.brokers = 0  # broker processes started so far; the owner is the last one
        self._broker: Harness | None = None
        self._old_broker: tuple[Harness, int] | None = None  # a broker that lost the topic and still runs
        self._moved_at = -1  # the number of the observation that notes the takeover

    # -- the broker's lifetime ---------------------------------------------------------
    def open(self) -> None:
        """Start a broker; open the managed ledger and the cursor (a restore, when they exist)."""
        self.brokers += 1
        self._broker = self.cluster.start_harness(f"broker-{self.scenario}-{self.brokers}")
        self._call(
            "ml-open",
            max_entries_per_ledger=self.max_entries_per_ledger,
            metadata_max_entries_per_ledger=self.metadata_max_entries_per_ledger,
            maximum_rollover_ms=self.maximum_rollover_ms,
        )
        self._cursor_call("cursor-open")
        if self.brokers > 1:
            self._check_restore()

    def crash(self) -> None:
        """Kill the broker's JVM: the cursor's memory is gone, what it persisted stays."""
        assert self._broker is not None
        self._broker.kill()
        self._collect()
        self._note({"ev": "broker-killed", "broker": self.brokers})
        self._broker = None

    def take_over(self) -> None:
        """Another broker opens the managed ledger and the cursor while this one still runs (it is not told): its
        open recovers the last ledger, which fences it, and writes the ledger list anew (``initialize``,
        ManagedLedgerImpl, Pulsar 4.0.7); the old broker keeps its state until it writes."""
        assert self._broker is not None and self._old_broker is None
        self._collect()
        self._old_broker, self._broker = (self._broker, self.brokers), None
        self._moved_at = len(self.log)  # the number of the note that follows
        self._note({"ev": "topic-moved", "from": self.brokers, "to": self.brokers + 1})
        self.open()

    def publish_to_old_broker(self) -> str | None:
        """One add to the broker that lost the topic; the harness's error, or None if it was acknowledged.

        Its ledger is fenced: the add fails, the broker closes the ledger and rolls over
        (``addEntryFailedDueToConcurrentlyModified``, ``ledgerClosed``), and its write of the ledger list is
        refused (BadVersion): it deletes the ledger it created, fences its managed ledger and fails the add
        (``ManagedLedgerFencedException``, ``createComplete``'s ``operationFailed``, ManagedLedgerImpl, Pulsar
        4.0.7). The driver waits for that deletion, which completes after the add's answer.
        """
        assert self._old_broker is not None
        harness, number = self._old_broker
        try:
            reply = harness.call("ml-add", name=self.name, client=0, count=1)
        finally:
            self._collect_old()
        self.published += [(int(p[0]), int(p[1])) for p in reply["positions"]]
        failed = reply.get("failed")
        if failed is not None:
            self._await_old_broker_deletion(number)
        return None if failed is None else str(failed)

    def kill_old_broker(self) -> None:
        """SIGKILL the broker that lost the topic: nothing of it is closed or written."""
        assert self._old_broker is not None
        harness, number = self._old_broker
        harness.kill()
        self._collect_old()
        self._note({"ev": "broker-killed", "broker": number})
        self._old_broker = None

    def _await_old_broker_deletion(self, number: int) -> None:
        deadline = time.monotonic() + SWITCH_TIMEOUT
        while time.monotonic() < deadline:
            self._collect_old()
            created = {o["ledger"] for o in self.log if o.get("broker") == number and o["ev"] == "metadata"
                       and o["op"] == "create" and o["ok"] and o["n"] > self._moved_at}  # fmt: skip
            deleted = {o["ledger"] for o in self.log if o.get("broker") == number and o["ev"] == "ledger-deleted"}
            if created and created <= deleted:
                return
            time.sleep(0.1)
        raise ClusterError(f"{self.scenario}: the old broker did not delete its rollover's ledger within "
                           f"{SWITCH_TIMEOUT:.0f} s")  # fmt: skip

    def stop(self) -> None:
        """A clean stop: close the cursor and the managed ledger, then the broker goes away."""
        self._cursor_call("cursor-close")
        self._call("ml-close")
        self.crash()

    def finish(self) -> None:
        if self._old_broker is not None:
            self.kill_old_broker()  # closing it would write the stale state it holds
        if self._broker is not None:
            self._broker.close()
            self._collect()
            self._broker = None

    # -- the producer and the consumer ---------------------------------------------------
    def publish(self, count: int) -> None:
        reply = self._call("ml-add", count=count)
        self.published += [(int(p[0]), int(p[1])) for p in reply["positions"]]

    def ack(self, *indexes: int) -> None:
        """Acknowledge the published messages of these indexes, one by one."""
        for i in indexes:
            ledger, entry = self.published[i]
            self._cursor_call("cursor-ack", ledger=ledger, entry=entry)
            self.acknowledged.add(self.published[i])

    def ack_up_to(self, index: int) -> None:
        """A cumulative acknowledgement (markDelete) of every message up to the one of this index."""
        ledger, entry = self.published[index]
        self._cursor_call("cursor-mark-delete", ledger=ledger, entry=entry)
        self.acknowledged |= set(self.published[: index + 1])

    def reset(self, index: int) -> None:
        """``resetCursor`` to the published message of this index: it and every message after it are to be
        delivered again, so they are no longer acknowledged; the ones before it are."""
        ledger, entry = self.published[index]
        self._cursor_call("cursor-reset", ledger=ledger, entry=entry)
        self.acknowledged = set(self.published[:index])

    def rewind(self) -> None:
        """``rewind``: the cursor reads again from the entry after its mark-delete position."""
        self._cursor_call("cursor-rewind")

    def read_all(self) -> list[tuple[int, int]]:
        """Every message the cursor dispatches from its read position on, read until none is left. After an open
        or a rewind that holds every message published and not acknowledged: a :class:`SkippedMessageError` names
        those missing. (An acknowledgement a crash lost comes again; the oracle judges that, from the trace.)"""
        reply = self._cursor_call("cursor-read-all")
        delivered = [(int(p[0]), int(p[1])) for p in reply["positions"]]
        skipped = [p for p in self.published if p not in self.acknowledged and p not in delivered]
        if skipped:
            raise SkippedMessageError(
                f"{self.scenario}: the cursor dispatched {delivered}, without {skipped}, which the consumer never "
                "acknowledged: they will not be delivered"
            )
        return delivered

    def trim(self) -> None:
        self._call("ml-trim")

    # -- the bookies -------------------------------------------------------------------
    def kill_bookies(self, count: int) -> list[int]:
        """SIGKILL the cluster's first ``count`` bookies; their numbers."""
        killed = list(range(1, count + 1))
        for n in killed:
            self.cluster.kill_bookie(n)
        self._note({"ev": "bookies-killed", "bookies": killed})
        return killed

    def restart_bookies(self, numbers: list[int]) -> None:
        for n in numbers:
            self.cluster.restart_bookie(n)
        self.cluster.wait_for_bookies(len(self.cluster.bookie_ids))
        self._note({"ev": "bookies-restarted", "bookies": numbers})

    # -- the metadata store ----------------------------------------------------------------
    def refuse_cursor_writes(self) -> None:
        """Make the cursor's znode read-only (ACL world:anyone:READ|ADMIN): the broker's next write of it fails
        with NoAuth, as a metadata store that refuses a write; reads, and every other znode, are untouched."""
        read_only = [make_acl("world", "anyone", read=True, admin=True)]
        self.cluster.zookeeper.set_acls(self._cursor_znode(), read_only)
        self._note({"ev": "cursor-znode-read-only"})

    def allow_cursor_writes(self) -> None:
        self.cluster.zookeeper.set_acls(self._cursor_znode(), OPEN_ACL_UNSAFE)
        self._note({"ev": "cursor-znode-writable"})

    def await_failed_switch(self) -> None:
        """Wait until the broker deleted the newest cursor ledger it created: the write of the znode naming it
        failed (switchToNewLedger, which runs after a persist, in the background; ManagedCursorImpl, Pulsar
        4.0.7)."""
        deadline = time.monotonic() + SWITCH_TIMEOUT
        while time.monotonic() < deadline:
            self._collect()
            created = [o for o in self.log if o["ev"] == "metadata" and o["op"] == "create" and o["ok"]]
            deleted = {o["ledger"] for o in self.log if o["ev"] == "ledger-deleted" and o["ok"]}
            if created and CURSOR_KEY in created[-1]["written"]["custom"] and created[-1]["ledger"] in deleted:
                return
            time.sleep(0.1)
        raise ClusterError(f"{self.scenario}: no cursor-ledger switch failed within {SWITCH_TIMEOUT:.0f} s")

    def _cursor_znode(self) -> str:
        return f"{MANAGED_LEDGERS_ROOT}/{self.name}/{CURSOR}"

    # -- plumbing ----------------------------------------------------------------------
    def _call(self, cmd: str, **arguments: Any) -> dict[str, Any]:
        assert self._broker is not None
        try:
            return self._broker.call(cmd, name=self.name, client=0, **arguments)
        finally:
            self._collect()

    def _cursor_call(self, cmd: str, **arguments: Any) -> dict[str, Any]:
        published = [list(p) for p in self.published]
        return self._call(cmd, cursor=CURSOR, published=published, **arguments)

    def _collect(self) -> None:
        if self._broker is not None:
            for obs in self._broker.take_observations():
                self._note({**obs, "broker": self.brokers})

    def _collect_old(self) -> None:
        if self._old_broker is not None:
            harness, number = self._old_broker
            for obs in harness.take_observations():
                self._note({**obs, "broker": number})

    def _note(self, obs: dict[str, Any]) -> None:
        self.log.append({**obs, "n": len(self.log)})

    def _check_restore(self) -> None:
        opened = [o for o in self.log if o["ev"] == "cursor-opened"][-1]
        covered = {(int(p[0]), int(p[1])) for p in opened["covered"]}
        skipped = sorted(covered - self.acknowledged)
        if skipped:
            raise SkippedMessageError(
                f"{self.scenario}: the restored cursor (mark-delete {opened['mark_delete']}) covers "
                f"{skipped}, which the consumer never acknowledged: they will not be delivered"
            )


@attrs.frozen
class ManagedLedgerScenario:
    name: str
    summary: str
    run: Callable[[BrokerDriver], None]
    max_entries_per_ledger: int = 3
    metadata_max_entries_per_ledger: int = 2
    maximum_rollover_ms: int = 0  # maximumRolloverTimeMs; 0: Pulsar's default, four hours
    expects: str | None = None  # a finding (findings.py) the scenario shows, or None: it must conform
    may_show: tuple[str, ...] = ()  # findings a race in the scenario may or may not bring about


ML_SCENARIOS: dict[str, ManagedLedgerScenario] = {}


def _scenario(
    name: str, summary: str, **options: Any
) -> Callable[[Callable[[BrokerDriver], None]], Callable[[BrokerDriver], None]]:
    def register(run: Callable[[BrokerDriver], None]) -> Callable[[BrokerDriver], None]:
        ML_SCENARIOS[name] = ManagedLedgerScenario(name, summary, run, **options)
        return run

    return register


@_scenario("publish-rollover", "7 entries over ledgers of 3: two rollovers; every message acknowledged in order")
def _publish_rollover(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(7)
    driver.ack(*range(7))


@_scenario("individual-acks-restart", "acks with gaps, then a broker crash: the restored cursor keeps the gaps")
def _individual_acks_restart(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(6)
    driver.ack(0, 2, 3, 5)
    driver.crash()
    driver.open()
    driver.ack(1, 4)


@_scenario("mark-delete-restart", "a cumulative ack, a crash, a restore, more acks")
def _mark_delete_restart(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(5)
    driver.ack_up_to(2)
    driver.crash()
    driver.open()
    driver.ack(3, 4)


@_scenario("close-reopen", "the cursor and the managed ledger closed cleanly, then opened again by a new broker")
def _close_reopen(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(5)
    driver.ack(0, 1, 3)
    driver.stop()
    driver.open()
    driver.ack(2)


@_scenario("trim-consumed-ledgers", "the consumed ledgers trimmed, then a crash and a restore")
def _trim(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(7)
    driver.ack_up_to(5)
    driver.trim()
    driver.crash()
    driver.open()
    driver.ack(6)


@_scenario(
    "crash-twice",
    "two crashes with acks between: the cursor ledger is switched and restored twice",
)
def _crash_twice(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(4)
    driver.ack(1, 2)
    driver.crash()
    driver.open()
    driver.ack(0)
    driver.publish(2)
    driver.ack(4)
    driver.crash()
    driver.open()
    driver.ack(3, 5)


@_scenario(
    "time-rollover",
    "ledgers of up to 10 entries that roll over at 2 s old: by the timer after two entries and after one, and by "
    "the add that finds its ledger aged; a crash, a restore, more acks",
    max_entries_per_ledger=10,
    maximum_rollover_ms=2_000,
)
def _time_rollover(driver: BrokerDriver) -> None:
    """``currentLedgerIsFull`` (ManagedLedgerImpl, Pulsar 4.0.7) counts a ledger's age too: the timer set when a
    ledger is created (``rollCurrentLedgerIfFull``, ``maximumRolloverTimeMs`` later) rolls it over if it holds an
    entry, and an add that finds its ledger aged is that ledger's last. The sleeps only make each way likely; any
    order of them is a behaviour of the cursor spec with ``RolloverByTime``."""
    driver.open()
    driver.publish(2)
    time.sleep(3.0)  # the first ledger's timer: two entries, rolled over
    driver.publish(1)
    time.sleep(4.0)  # the second ledger's timer: one entry; the third's fires while it is empty
    driver.publish(2)  # the first finds the third ledger aged: it is its last
    driver.ack(0, 1, 2)
    driver.crash()
    driver.open()
    driver.ack(3, 4)


@_scenario(
    "reset-back-restart",
    "acks with a gap, a reset back over them, a broker crash: the restored cursor must deliver again what the "
    "reset made unacknowledged",
    expects="reset-record-keeps-acks",
)
def _reset_back_restart(driver: BrokerDriver) -> None:
    driver.open()
    driver.publish(4)
    driver.ack(0, 1, 3)
    driver.reset(1)
    driver.crash()
    driver.open()


@_scenario(
    "cursor-ledger-write-fails",
    "four of the five bookies killed: the cursor ledger's next record fails, and the mark-delete goes to the "
    "cursor's znode instead; the bookies back, a broker crash, a restore from the znode",
)
def _cursor_ledger_write_fails(driver: BrokerDriver) -> None:
    """persistPositionToLedger's failure falls back to persistPositionToMetaStore (ManagedCursorImpl, Pulsar 4.0.7):
    the znode gets the state with cursorsLedgerId = -1, the cursor goes NoLedger, the mark-delete completes."""
    driver.open()
    driver.publish(3)
    driver.ack(0)  # the cursor's first ledger: two records
    killed = driver.kill_bookies(4)  # no write set of the cursor ledger is whole, and no bookie to replace one
    driver.ack(1)
    driver.restart_bookies(killed)
    driver.crash()
    driver.open()
    driver.ack(2)


@_scenario(
    "cursor-switch-fails",
    "the cursor's znode made read-only while its full ledger is switched: the new cursor ledger is deleted and the "
    "cursor keeps its old one; the znode writable again, more acks, a broker crash, a restore",
)
def _cursor_switch_fails(driver: BrokerDriver) -> None:
    """switchToNewLedger's failure (ManagedCursorImpl, Pulsar 4.0.7): the new ledger, which holds the first record,
    is deleted; createNewMetadataLedger's operationFailed sets NoLedger and fails the mark-deletes queued meanwhile.
    The next mark-delete creates a ledger again."""
    driver.open()
    driver.publish(5)
    driver.ack(0)  # the cursor's first ledger: its first record, then this mark-delete's
    driver.refuse_cursor_writes()
    driver.ack(1)  # its third record: the ledger is full (shouldCloseLedger), and its successor is never named
    driver.await_failed_switch()
    driver.allow_cursor_writes()
    driver.ack(2, 3)
    driver.crash()
    driver.open()
    driver.ack(4)


@_scenario(
    "rewind-read-restart",
    "acks with gaps; the consumer reads what is left, the cursor rewinds and it reads the same again; a crash, and "
    "the restored cursor dispatches those messages once more",
)
def _rewind_read_restart(driver: BrokerDriver) -> None:
    """The read position is no durable state: an open and a rewind both set it to the entry after the mark-delete
    (``initializeCursorPosition``, ``rewind``), and reads skip the individually deleted entries
    (``filterReadEntries``; ManagedCursorImpl, Pulsar 4.0.7). The cursor mapping takes what the restored cursor
    dispatches as what it covers."""
    driver.open()
    driver.publish(6)
    driver.ack_up_to(0)
    driver.ack(2, 4)
    driver.read_all()
    driver.rewind()
    driver.read_all()
    driver.crash()
    driver.open()
    driver.read_all()
    driver.ack(1, 3, 5)


@_scenario(
    "second-broker-takes-over",
    "a second broker opens the managed ledger and the cursor while the first still runs; the first's next add "
    "fails, its ledger list refused, and it is killed; the new owner publishes and acknowledges, crashes, and a "
    "third broker restores and publishes",
)
def _second_broker_takes_over(driver: BrokerDriver) -> None:
    """The old broker's add must fail (``ManagedLedgerFencedException``): an acknowledgement from it, a message in
    a ledger that the owner's ledger list does not hold, is in both traces for the oracle to judge."""
    driver.open()
    driver.publish(2)
    driver.ack(0)
    driver.take_over()
    driver.publish_to_old_broker()
    driver.kill_old_broker()
    driver.publish(2)
    driver.ack(1, 2)
    driver.crash()
    driver.open()
    driver.publish(1)  # its ledger's number tells whether the old broker's rollover took one
    driver.ack(3, 4)
