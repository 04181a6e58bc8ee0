"""Workloads run against a real BookKeeper cluster, each recorded as one trace per ledger.

A scenario drives the cluster through a :class:`Driver`: it creates ledgers,
adds entries, closes, kills and restarts bookies, and opens ledgers with
recovery from other clients. Bookies are named by their number in the
spec's sense for the ledger at hand (:meth:`Ledger.bookie`): bookie 1 is the
first of the ledger's first ensemble. Each scenario checks what the client
API returned where the protocol promises something (entries read back equal
the ones added; recovery closes at or past every acknowledged entry);
everything else is the oracle's to judge, from the trace.

The driver counts the bookies it kills, so that the checker's bound on
hidden crashes is the scenario's own; it restarts every bookie it killed
when the scenario ends, so that the next scenario finds the whole cluster.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
from ledgerspec.conformance.adapters.cluster import CHECKPOINT_INTERVAL_MS, BookKeeperCluster

__all__ = ["SCENARIOS", "BrokenPromiseError", "Driver", "Ledger", "Scenario"]


class BrokenPromiseError(Exception):
    """The real system broke a promise its API makes, seen without the oracle: what and where."""


class Driver:
    """A scenario's hold on the cluster: ledgers it made, bookies it killed."""

    def __init__(self, cluster: BookKeeperCluster, scenario: str) -> None:
        self.cluster = cluster
        self.scenario = scenario
        self.ledgers: list[Ledger] = []
        self.crashes = 0
        self._killed: set[int] = set()

    def call(self, cmd: str, **arguments: Any) -> dict[str, Any]:
        assert self.cluster.harness is not None
        return self.cluster.harness.call(cmd, **arguments)

    def create(self, ensemble: int, write: int, ack: int) -> Ledger:
        reply = self.call("create", client=0, ensemble=ensemble, write=write, ack=ack)
        ledger = Ledger(self, int(reply["ledger"]), tuple(reply["metadata"]["ensembles"]["0"]))
        self.ledgers.append(ledger)
        return ledger

    def kill(self, cluster_number: int) -> None:
        self.cluster.kill_bookie(cluster_number)
        self._killed.add(cluster_number)
        self.crashes += 1

    def stop(self, cluster_number: int) -> None:
        """Stop a bookie the orderly way; it counts as a crash for the spec (a crash that loses nothing)."""
        self.cluster.stop_bookie(cluster_number)
        self._killed.add(cluster_number)
        self.crashes += 1

    def restart(self, cluster_number: int) -> None:
        self.cluster.restart_bookie(cluster_number)
        self._killed.discard(cluster_number)

    def finish(self) -> None:
        """Bring back every bookie the scenario killed, and wait until all are registered."""
        for n in sorted(self._killed):
            self.cluster.restart_bookie(n)
        self._killed.clear()
        self.cluster.wait_for_bookies(len(self.cluster.bookie_ids))


@attrs.define
class Ledger:
    """One ledger of a scenario, written by client 0."""

    driver: Driver
    ledger_id: int
    first_ensemble: tuple[str, ...]
    acknowledged: list[int] = attrs.field(factory=list)
    added: int = 0

    def bookie(self, n: int) -> int:
        """The cluster number of the ledger's bookie ``n`` (1 .. E: its first ensemble, in order)."""
        return self.driver.cluster.number_of(self.first_ensemble[n - 1])

    def spare(self, k: int = 1) -> int:
        """The cluster number of the ``k``-th bookie outside the ledger's first ensemble."""
        outside = [b for b in self.driver.cluster.bookie_ids if b not in self.first_ensemble]
        return self.driver.cluster.number_of(outside[k - 1])

    def add(self, count: int, *, wait: bool = True) -> list[int]:
        """Add ``count`` entries; with ``wait``, return each add's return code (0: acknowledged)."""
        reply = self.driver.call("add", client=0, ledger=self.ledger_id, count=count, wait=wait)
        first = self.added
        self.added += count
        results: list[int] = reply.get("results", [])
        self.acknowledged += [first + i for i, rc in enumerate(results) if rc == 0]
        return results

    def wait_adds(self) -> list[int]:
        results: list[int] = self.driver.call("wait-adds", client=0, ledger=self.ledger_id)["results"]
        first = self.added - len(results)
        self.acknowledged += [first + i for i, rc in enumerate(results) if rc == 0]
        return results

    def close(self) -> int:
        return int(self.driver.call("close", client=0, ledger=self.ledger_id)["rc"])

    def recover(self, client: int) -> dict[str, Any]:
        """Open the ledger with recovery from ``client``; check it kept every acknowledged entry."""
        reply = self.driver.call("open", client=client, ledger=self.ledger_id, recovery=True)
        last = int(reply["metadata"]["last_entry"])
        if self.acknowledged and last < max(self.acknowledged):
            raise BrokenPromiseError(
                f"{self.driver.scenario}: ledger {self.ledger_id} recovered by client {client} closed at entry "
                f"{last}, but entry {max(self.acknowledged)} was acknowledged to the writer"
            )
        return reply

    def read_back(self, client: int, last: int) -> None:
        """Read entries 0 .. last as ``client`` (which holds a handle) and check each is the one added."""
        if last < 0:
            return
        entries = self.driver.call("read", client=client, ledger=self.ledger_id, first=0, last=last)["entries"]
        for i, data in enumerate(entries):
            if data != f"entry {i} of ledger {self.ledger_id}":
                raise BrokenPromiseError(
                    f"{self.driver.scenario}: entry {i} of ledger {self.ledger_id} read back as {data!r}"
                )
        if len(entries) != last + 1:
            raise BrokenPromiseError(f"{self.driver.scenario}: read {len(entries)} entries of {last + 1}")


@attrs.frozen
class Scenario:
    name: str
    summary: str
    run: Callable[[Driver], None]
    expects: str | None = None  # a finding (findings.py) the scenario shows, or None: it must conform
    may_show: tuple[str, ...] = ()  # findings a race in the scenario may or may not bring about


SCENARIOS: dict[str, Scenario] = {}


def _scenario(
    name: str, summary: str, expects: str | None = None, may_show: tuple[str, ...] = ()
) -> Callable[[Callable[[Driver], None]], Callable[[Driver], None]]:
    def register(run: Callable[[Driver], None]) -> Callable[[Driver], None]:
        SCENARIOS[name] = Scenario(name, summary, run, expects, may_show)
        return run

    return register


# -- create, add, read, LAC ---------------------------------------------------------------
def _write_close_read(ensemble: int, write: int, ack: int, entries: int) -> Callable[[Driver], None]:
    def run(driver: Driver) -> None:
        ledger = driver.create(ensemble, write, ack)
        ledger.add(entries)
        ledger.close()
        ledger.read_back(0, entries - 1)

    return run


for _e, _w, _a, _n in ((3, 2, 2, 12), (3, 3, 2, 10), (4, 3, 2, 10), (5, 2, 2, 10), (5, 3, 3, 10), (3, 2, 1, 10)):
    _scenario(f"stripe-e{_e}-w{_w}-a{_a}", f"{_n} entries on E={_e} Qw={_w} Qa={_a}, closed, read back")(
        _write_close_read(_e, _w, _a, _n)
    )


@_scenario("empty-ledger", "a ledger created and closed with no entry")
def _empty_ledger(driver: Driver) -> None:
    driver.create(3, 2, 2).close()


@_scenario("pipelined-adds", "50 adds in flight at once, acknowledged in order, then closed")
def _pipelined(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(50, wait=False)
    ledger.wait_adds()
    ledger.close()
    ledger.read_back(0, 49)


@_scenario("reader-lac", "a reader without recovery follows the LAC while the writer adds")
def _reader_lac(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.add(5)
    driver.call("open", client=1, ledger=ledger.ledger_id, recovery=False)
    lac = int(driver.call("read-lac", client=1, ledger=ledger.ledger_id)["lac"])
    if lac > max(ledger.acknowledged):
        raise BrokenPromiseError(f"reader-lac: a reader saw LAC {lac} past the last acknowledged entry")
    ledger.read_back(1, lac)
    ledger.add(5)
    ledger.close()


# -- recovery and fencing -------------------------------------------------------------------
@_scenario("recover-closed", "a second client opens a closed ledger with recovery: nothing to recover")
def _recover_closed(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(6)
    ledger.close()
    ledger.recover(1)
    ledger.read_back(1, 5)


@_scenario("recover-closed-twice", "two clients open a closed ledger with recovery, one after the other")
def _recover_closed_twice(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.add(4)
    ledger.close()
    ledger.recover(1)
    ledger.recover(2)


@_scenario("recover-open", "the writer stops without closing; a second client recovers and closes the ledger")
def _recover_open(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(7)
    ledger.recover(1)
    ledger.read_back(1, 6)


@_scenario("recover-empty", "a second client recovers a ledger the writer never wrote to")
def _recover_empty(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.recover(1)


@_scenario("fenced-writer", "after a recovery, the old writer's next add is refused: it is fenced")
def _fenced_writer(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.add(5)
    ledger.recover(1)
    results = ledger.add(1)
    if results[0] == 0:
        raise BrokenPromiseError("fenced-writer: the writer's add after recovery was acknowledged")


@_scenario(
    "recovery-races-writer",
    "a second client recovers while 40 adds of the writer are in flight",
    may_show=("fenced-writer-closes-ledger",),
)
def _recovery_races_writer(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(3)
    ledger.add(40, wait=False)
    ledger.recover(1)
    ledger.wait_adds()


@_scenario("recover-again-after-recovery", "two clients recover an open ledger one after the other")
def _recover_twice(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.add(5)
    ledger.recover(1)
    ledger.recover(2)


# -- crashes and ensemble changes ---------------------------------------------------------
@_scenario("crash-ensemble-change", "a bookie of the ensemble is killed mid-ledger: the writer replaces it")
def _crash_ensemble_change(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(5)
    driver.kill(ledger.bookie(2))
    ledger.add(5)
    ledger.close()
    ledger.read_back(0, 9)


@_scenario("crash-before-first-add", "a bookie is killed before the first add: the first entry changes the ensemble")
def _crash_before_first_add(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    driver.kill(ledger.bookie(1))
    ledger.add(4)
    ledger.close()
    ledger.read_back(0, 3)


@_scenario("crash-restart", "a bookie is killed and restarted while the writer adds")
def _crash_restart(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.add(5)
    driver.kill(ledger.bookie(3))
    ledger.add(5)
    driver.restart(ledger.bookie(3))
    ledger.add(5)
    ledger.close()
    ledger.read_back(0, 14)


@_scenario("two-ensemble-changes", "two bookies are killed one after the other: two ensemble changes")
def _two_changes(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(4)
    driver.kill(ledger.bookie(1))
    ledger.add(4)
    driver.kill(ledger.bookie(3))
    ledger.add(4)
    ledger.close()
    driver.finish()  # entries 2 and 3 were on bookies 3 and 1 alone (Qw=2): readable once they are back
    ledger.read_back(0, 11)


@_scenario(
    "recover-with-bookie-down",
    "a bookie is down while a second client recovers the ledger",
    expects="recovery-changes-ensemble",
)
def _recover_with_bookie_down(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.add(6)
    driver.kill(ledger.bookie(1))
    ledger.recover(1)
    ledger.read_back(1, 5)


@_scenario("recover-after-ensemble-change", "a second client recovers a ledger whose ensemble changed")
def _recover_after_change(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(5)
    driver.kill(ledger.bookie(2))
    ledger.add(5)
    ledger.recover(1)
    ledger.read_back(1, 9)


@_scenario("crash-restart-recover", "a bookie is killed and restarted, then a second client recovers the ledger")
def _crash_restart_recover(driver: Driver) -> None:
    ledger = driver.create(3, 3, 3)
    ledger.add(4)
    driver.kill(ledger.bookie(2))
    driver.restart(ledger.bookie(2))
    ledger.recover(1)
    ledger.read_back(1, 3)


@_scenario(
    "fence-empty-ledger-then-restart",
    "an empty ledger is recovered; after a checkpoint its bookies crash and restart; the old writer adds",
    expects="fence-of-empty-ledger-lost",
)
def _fence_empty_then_restart(driver: Driver) -> None:
    ledger = driver.create(3, 3, 2)
    ledger.recover(1)
    time.sleep(3 * CHECKPOINT_INTERVAL_MS / 1000)  # the bookies checkpoint: their lastMark passes the fence
    for n in (1, 2, 3):
        driver.kill(ledger.bookie(n))
        driver.restart(ledger.bookie(n))
    driver.cluster.wait_for_bookies(len(driver.cluster.bookie_ids))
    results = ledger.add(1)
    if results[0] == 0:
        raise BrokenPromiseError(
            "fence-empty-ledger-then-restart: the old writer's add was acknowledged after recovery closed the "
            "ledger at -1: the acknowledged entry 0 is not in the closed ledger"
        )
