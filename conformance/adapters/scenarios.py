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
It keeps what decides a finding's cause, for the recording: what each
bookie's files said at the moments a scenario asks (:meth:`Driver.inspect`,
read by the recorder, which passes the reader in), and the log each bookie
wrote while it restarted, its journal replay.

A scenario that commands faults a bookie shows while it runs (a late answer,
a refusal as read-only: :meth:`Driver.fault`) needs bookies that take them,
the reference bookies (``Scenario.bookies``); the others run on either.

A scenario runs on a cluster whose bookies keep their ledgers in the storage
it needs (``Scenario.storage``, one of ``cluster.BOOKIE_STORAGES``), or, when
it needs none, in the storage the suite runs on (one of
``cluster.SUITE_STORAGES``); the recorder starts one cluster for each storage
the scenarios it runs need.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.adapters.cluster import (
    BOOKIE_STORAGES,
    CHECKPOINT_INTERVAL_MS,
    MEMTABLE_PRESSURE_STORAGE,
    SUITE_STORAGES,
    WRITE_CACHE_PRESSURE_STORAGE,
    ClusterError,
    FaultingCluster,
    ScenarioCluster,
)

__all__ = ["SCENARIOS", "BookieReader", "BrokenPromiseError", "Driver", "Ledger", "Scenario", "storages_showing"]

#: Reads what bookie ``n``'s files say now about the given ledgers: a JSON object with ``bookie`` (its id),
#: ``last_mark`` ([journal id, offset] of its lastMark file, or null when it has none), ``index_files`` (how
#: many .idx files it has) and ``ledgers``: for each ledger id (a string), ``fence_records`` and
#: ``ledger_key_records`` ([journal id, offset] of each in its journals) and ``index`` (null when the ledger has
#: no index file, else ``fenced`` and ``entries``). The recorder supplies it (tools/recording).
BookieReader = Callable[[int, Sequence[int]], dict[str, Any]]


class BrokenPromiseError(Exception):
    """The real system broke a promise its API makes, seen without the oracle: what and where."""


class Driver:
    """A scenario's hold on the cluster: ledgers it made, bookies it killed."""

    def __init__(self, cluster: ScenarioCluster, scenario: str, read_bookie: BookieReader | None = None) -> None:
        self.cluster = cluster
        self.scenario = scenario
        self.ledgers: list[Ledger] = []
        self.crashes = 0
        self._killed: set[int] = set()
        self._read_bookie = read_bookie
        self.inspections: list[dict[str, Any]] = []  # {"moment": ..., "bookies": [what BookieReader read]}
        self.restart_logs: list[tuple[int, str]] = []  # (bookie number, what its log gained while it restarted)

    def read_bookie(self, n: int, ledgers: Sequence[Ledger]) -> dict[str, Any]:
        """What bookie ``n``'s files say now about ``ledgers`` (see :data:`BookieReader`)."""
        if self._read_bookie is None:
            raise ValueError(f"{self.scenario}: the driver was given no reader of the bookies' files")
        return self._read_bookie(n, [ledger.ledger_id for ledger in ledgers])

    def inspect(self, moment: str, ledger: Ledger, numbers: Sequence[int]) -> list[dict[str, Any]]:
        """Keep what the ledger's bookies ``numbers`` (spec numbers) have on disk now, under ``moment``."""
        found = [self.read_bookie(ledger.bookie(n), [ledger]) for n in numbers]
        self.inspections.append({"moment": moment, "bookies": found})
        return found

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
        """Start the bookie again; keep what its log gained meanwhile (its journal replay)."""
        log = self.cluster.bookie_log(cluster_number)
        start = _size_of(log)
        self.cluster.restart_bookie(cluster_number)
        self._killed.discard(cluster_number)
        self.restart_logs.append((cluster_number, _read_from(log, start)))

    def fault(self, cluster_number: int, fault: str, **fields: int | str) -> None:
        """Have a bookie show ``fault`` from now on (``reference.wire.faults``: ``delay-replies`` with ``ms`` and
        ``operation``, ``read-only``, ``writable``, ``heal``); only bookies that take faults on command can."""
        if not isinstance(self.cluster, FaultingCluster):
            raise ClusterError(f"{self.scenario}: these bookies take no fault on command; it needs reference bookies")
        self.cluster.apply_fault(cluster_number, fault, **fields)

    def finish(self) -> None:
        """Bring back every bookie the scenario killed, and wait until all are registered."""
        for n in sorted(self._killed):
            self.cluster.restart_bookie(n)
        self._killed.clear()
        self.cluster.wait_for_bookies(len(self.cluster.bookie_ids))


def _size_of(log: Path) -> int:
    """A log's length now (0 before it exists): where what it gains from now on starts."""
    return log.stat().st_size if log.exists() else 0


def _read_from(log: Path, offset: int) -> str:
    """What a log gained since it was ``offset`` bytes long."""
    with open(log, "rb") as f:
        f.seek(offset)
        return f.read().decode(errors="replace")


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

    def add(self, count: int, *, wait: bool = True, size: int = 0) -> list[int]:
        """Add ``count`` entries, each padded to ``size`` bytes if longer than its text; with ``wait``, return each
        add's return code (0: acknowledged)."""
        arguments: dict[str, Any] = {"size": size} if size else {}
        reply = self.driver.call("add", client=0, ledger=self.ledger_id, count=count, wait=wait, **arguments)
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

    def read_back(self, client: int, last: int, *, size: int = 0) -> None:
        """Read entries 0 .. last as ``client`` (which holds a handle) and check each is the one added, of ``size``
        bytes if it was padded to that."""
        if last < 0:
            return
        reply = self.driver.call("read", client=client, ledger=self.ledger_id, first=0, last=last)
        entries, sizes = reply["entries"], reply["sizes"]
        for i, (data, length) in enumerate(zip(entries, sizes, strict=True)):
            if data != f"entry {i} of ledger {self.ledger_id}" or (size and length != size):
                raise BrokenPromiseError(
                    f"{self.driver.scenario}: entry {i} of ledger {self.ledger_id} read back as {data!r} "
                    f"({length} bytes)"
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
    # The bookies' ledger storage the scenario is about (cluster.BOOKIE_STORAGES), or None: the suite's.
    storage: str | None = None
    # The bookies it needs: "reference" when it commands their faults (Driver.fault), or None: any.
    bookies: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.storage is not None and self.storage not in BOOKIE_STORAGES:
            raise ValueError(f"{self.name}: unknown bookie storage {self.storage!r}; the storages: "
                             f"{', '.join(BOOKIE_STORAGES)}")  # fmt: skip

    def storage_in(self, suite_storage: str) -> str:
        """The storage the scenario runs on in a suite run on ``suite_storage``."""
        return self.storage or suite_storage

    def storages(self) -> tuple[str, ...]:
        """The storages the scenario can run on (``reference``: the reference bookies' own, and no other)."""
        if self.bookies == "reference":
            return ("reference",)
        return (self.storage,) if self.storage is not None else SUITE_STORAGES

    def runs_on(self, bookies: str) -> bool:
        """Can it run on ``bookies`` (``bookkeeper``: BookKeeper's own; ``reference``)?"""
        return self.bookies is None or self.bookies == bookies


SCENARIOS: dict[str, Scenario] = {}


def storages_showing(finding: str, scenarios: Iterable[Scenario]) -> tuple[str, ...]:
    """The ledger storages on which ``finding`` can show: those each scenario that expects it, or may show it,
    runs on, in the order of ``cluster.BOOKIE_STORAGES``."""
    on = {storage for s in scenarios if finding in (s.expects, *s.may_show) for storage in s.storages()}
    return tuple(storage for storage in BOOKIE_STORAGES if storage in on)


def _scenario(
    name: str,
    summary: str,
    expects: str | None = None,
    may_show: tuple[str, ...] = (),
    storage: str | None = None,
    bookies: str | None = None,
) -> Callable[[Callable[[Driver], None]], Callable[[Driver], None]]:
    def register(run: Callable[[Driver], None]) -> Callable[[Driver], None]:
        SCENARIOS[name] = Scenario(name, summary, run, expects, may_show, storage, bookies)
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


#: How long a create waits for the client to see a restarted bookie (its BookieWatcher follows the available
#: znodes by a ZooKeeper watch, a little after the restart registered it).
_WATCHER_CATCH_UP_S = 10.0


def _refused_for_too_few_bookies(error: ClusterError) -> bool:
    return "BKNotEnoughBookiesException" in str(error)


@_scenario(
    "create-with-too-few-bookies",
    "with two bookies up, a create of E=3 fails (BKNotEnoughBookiesException) and writes no metadata; with a "
    "third back, it succeeds, and the ledger is written, closed and read back",
)
def _create_with_too_few_bookies(driver: Driver) -> None:
    # LedgerCreateOp.initiate (release-4.17.2) asks BookieWatcher.newEnsemble for E writable bookies before it
    # writes any metadata; with fewer it fails with BKNotEnoughBookiesException.
    for n in range(3, len(driver.cluster.bookie_ids) + 1):
        driver.stop(n)
    registered = driver.call("bookies", wait_for=2, at_most=2)["bookies"]
    if len(registered) != 2:
        raise ClusterError(f"create-with-too-few-bookies: bookies {registered} are registered, not two")
    try:
        ledger = driver.create(3, 2, 2)
    except ClusterError as error:
        if not _refused_for_too_few_bookies(error):
            raise
    else:
        raise BrokenPromiseError(
            f"create-with-too-few-bookies: ledger {ledger.ledger_id} was created for E=3 with two bookies up, "
            f"on {list(ledger.first_ensemble)}"
        )
    driver.restart(3)
    deadline = time.monotonic() + _WATCHER_CATCH_UP_S
    while True:
        try:
            ledger = driver.create(3, 2, 2)
            break
        except ClusterError as error:
            if not _refused_for_too_few_bookies(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    ledger.add(5)
    ledger.close()
    ledger.read_back(0, 4)


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


#: The writer's explicitLacInterval in the scenario that turns it on: short, so that a pause of a few sends it.
EXPLICIT_LAC_INTERVAL_MS = 100


@_scenario(
    "explicit-lac-reader",
    "the writer sends its LAC on a timer (explicitLacInterval); a reader learns the LAC no add carried",
)
def _explicit_lac_reader(driver: Driver) -> None:
    driver.call("configure-client", client=0, explicit_lac_interval=EXPLICIT_LAC_INTERVAL_MS)
    ledger = driver.create(3, 2, 2)
    for round_ in range(2):
        ledger.add(3)
        # the flush policy's first tick after the adds takes their piggybacked LAC, the next sends the LAC
        time.sleep(5 * EXPLICIT_LAC_INTERVAL_MS / 1000)
        if round_ == 0:
            lac = int(driver.call("open", client=1, ledger=ledger.ledger_id, recovery=False)["last_add_confirmed"])
        else:
            lac = int(driver.call("read-lac", client=1, ledger=ledger.ledger_id)["lac"])
        if lac > max(ledger.acknowledged):
            raise BrokenPromiseError(f"explicit-lac-reader: a reader saw LAC {lac} past the last acknowledged entry")
        ledger.read_back(1, lac)
    ledger.close()
    driver.call("configure-client", client=0, explicit_lac_interval=0)  # the default, for the scenarios after


@_scenario("long-poll-reader", "a tailing reader long-polls the LAC and the next entry while the writer adds")
def _long_poll_reader(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(3)
    lac = int(driver.call("open", client=1, ledger=ledger.ledger_id, recovery=False)["last_add_confirmed"])
    ledger.add(3, wait=False)
    # ReadHandle.readLastAddConfirmedAndEntry: the bookies answer once their LAC passes the entry before it
    polled = driver.call("read-lac-and-entry", client=1, ledger=ledger.ledger_id, entry=lac + 1, timeout=5000)
    ledger.wait_adds()
    if int(polled["lac"]) > max(ledger.acknowledged):
        raise BrokenPromiseError(f"long-poll-reader: a long poll saw LAC {polled['lac']} past the acknowledged")
    expected = f"entry {lac + 1} of ledger {ledger.ledger_id}"
    if int(polled["lac"]) > lac and polled["entry"] != expected:
        raise BrokenPromiseError(f"long-poll-reader: the long poll returned {polled['entry']!r}, not {expected!r}")
    ledger.close()


@_scenario(
    "close-with-adds-pending",
    "the writer closes with adds in flight: the ledger is closed at its LAC, the adds still pending fail",
)
def _close_with_adds_pending(driver: Driver) -> None:
    ledger = driver.create(3, 2, 2)
    ledger.add(5)
    ledger.add(300, wait=False)  # the close comes while most of them are still pending
    ledger.close()
    ledger.wait_adds()  # LedgerHandle.doAsyncCloseInternal fails the adds it drained
    last = int(driver.call("metadata", client=0, ledger=ledger.ledger_id)["metadata"]["last_entry"])
    if last < max(ledger.acknowledged):
        raise BrokenPromiseError(
            f"close-with-adds-pending: closed at entry {last}, but entry {max(ledger.acknowledged)} was acknowledged"
        )
    ledger.read_back(0, last)


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


#: How late the refusing bookie answers, and how long the writer waits before its next add: the refusal reaches
#: the writer after the add it refuses has its Qa acks, and before the next add.
_LATE_REFUSAL_MS, _BEFORE_NEXT_ADD_S = 300, 2.0


def _refused_late_then_next_add(driver: Driver, ledger: Ledger, late: list[int]) -> None:
    """The ``late`` bookies answer adds late and refuse them as read-only: the next add completes on the others
    before their refusals arrive, and the add after it replaces them first; then they heal, and the ledger closes."""
    for bookie in late:
        driver.fault(bookie, "delay-replies", ms=_LATE_REFUSAL_MS, operation="ADD_ENTRY")
        driver.fault(bookie, "read-only")
    ledger.add(1)  # completes on the other bookies of its write set; refused by the late ones after
    time.sleep(_BEFORE_NEXT_ADD_S)
    ledger.add(1)  # replaces the late bookies before it sends
    for bookie in late:
        driver.fault(bookie, "writable")
        driver.fault(bookie, "heal")
    ledger.close()


@_scenario(
    "replace-after-late-refusal",
    "an add completes on E=4 Qw=3 Qa=2 before its third bookie refuses it; the next add, which goes to the other "
    "three, replaces that bookie first",
    bookies="reference",
)
def _replace_after_late_refusal(driver: Driver) -> None:
    # PendingAddOp.writeComplete (4.17.2) keeps a failure that reaches an add already complete
    # (LedgerHandle.notifyWriteFailed); the next add's initiate replaces the bookie
    # (maybeHandleDelayedWriteBookieFailure) before it sends, though its own write set leaves the bookie out.
    ledger = driver.create(4, 3, 2)
    ledger.add(4)
    # entry 4 goes to bookies 1, 2 and 3: acked by 2 and 3, refused by 1 later; entry 5 to bookies 2, 3 and 4
    _refused_late_then_next_add(driver, ledger, [ledger.bookie(1)])
    ledger.read_back(0, 5)


@_scenario(
    "replace-two-in-one-write",
    "an add completes on E=3 Qw=3 Qa=1 before its other two bookies refuse it; the next add replaces both in one "
    "metadata write",
    bookies="reference",
)
def _replace_two_in_one_write(driver: Driver) -> None:
    # Both late failures wait in LedgerHandle.delayedWriteFailedBookies (notifyWriteFailed, 4.17.2); the next
    # add's initiate hands them to handleBookieFailure together, and ensembleChangeLoop replaces both bookies
    # in one write of the metadata, where the spec replaces one a step.
    ledger = driver.create(3, 3, 1)
    ledger.add(3)
    # entry 3 goes to bookies 1, 2 and 3: acked by 1, refused by 2 and 3 later; entry 4 replaces both
    _refused_late_then_next_add(driver, ledger, [ledger.bookie(2), ledger.bookie(3)])
    ledger.read_back(0, 4)


@_scenario("recover-with-bookie-down", "a bookie is down while a second client recovers the ledger")
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


#: What a bookie logs when adds that fill its buffer of entries make it checkpoint, in each storage with a small
#: buffer (4.17.2): the flush of a full memtable that rolls the entry log (EntryLogManagerForSingleEntryLog.
#: commitEntryMemTableFlush), a full write cache (SingleDirectoryDbLedgerStorage.triggerFlushAndAddEntry).
_BUFFER_FULL = {
    MEMTABLE_PRESSURE_STORAGE: "Rolling entry logger since it reached size limitation",
    WRITE_CACHE_PRESSURE_STORAGE: "Write cache is full, triggering flush",
}
#: 40 entries of 64 KB: 2.5 MB to each bookie (Qw = E = 3), more than twice the 1 MB memtable, five times the
#: 512 KB write cache that takes adds.
_PRESSURE_ENTRIES, _PRESSURE_ENTRY_BYTES = 40, 64 * 1024


def _pressure_then_crash(driver: Driver) -> None:
    """Fill the bookies' buffer of entries with adds, so that the add path flushes it and checkpoints; kill the
    ledger's bookies at once, restart them, recover the ledger and read every entry back. The checkpoint moves
    the lastMark to the journal position taken before the flush: an entry journaled before that mark must be in
    the flushed buffer, the rest replayed from the journal after the crash."""
    ledger = driver.create(3, 3, 2)
    full = _BUFFER_FULL.get(driver.cluster.storage)  # none on reference bookies
    logs = [driver.cluster.bookie_log(ledger.bookie(n)) for n in (1, 2, 3)] if full else []
    start = [_size_of(log) for log in logs]
    ledger.add(_PRESSURE_ENTRIES, size=_PRESSURE_ENTRY_BYTES)
    if full and not any(full in _read_from(log, at) for log, at in zip(logs, start, strict=True)):
        raise ClusterError(
            f"{driver.scenario}: no bookie of the ledger logged {full!r} during the adds: its buffer of entries "
            "never filled, so the scenario did not test what it is for"
        )
    for n in (1, 2, 3):  # at once: the adds since the last flush are in the journal and the lost buffer only
        driver.kill(ledger.bookie(n))
    driver.inspect("after the kill", ledger, (1, 2, 3))
    for n in (1, 2, 3):
        driver.restart(ledger.bookie(n))
    driver.cluster.wait_for_bookies(len(driver.cluster.bookie_ids))
    ledger.recover(1)
    ledger.read_back(1, _PRESSURE_ENTRIES - 1, size=_PRESSURE_ENTRY_BYTES)


_scenario(
    "memtable-pressure-then-crash",
    "on the default storage with a 1 MB memtable and 1 MB entry logs, 64 KB adds fill the memtable, so the add "
    "path flushes it, rolls the entry log and checkpoints; the ledger's bookies are killed and restarted, and a "
    "second client recovers every acknowledged entry",
    storage=MEMTABLE_PRESSURE_STORAGE,
)(_pressure_then_crash)  # SortedLedgerStorage.onSizeLimitReached: memTable.flush, the roll, startCheckpoint

_scenario(
    "write-cache-pressure-then-crash",
    "on DbLedgerStorage with a 1 MB write cache, 64 KB adds fill it, so the add path flushes it and checkpoints; "
    "the ledger's bookies are killed and restarted, and a second client recovers every acknowledged entry",
    storage=WRITE_CACHE_PRESSURE_STORAGE,
)(_pressure_then_crash)  # SingleDirectoryDbLedgerStorage.triggerFlushAndAddEntry: flush, checkpoint, checkpointComplete


# -- a fence of a ledger that has no entry on the bookie, across a crash ------------------------------
# A fencing read makes the bookie set the master key and the fence in its ledger storage, in memory, and journal a
# fence record; no ledger-key record, which only a first add journals (BookieImpl.addEntryInternal). Replay takes
# the fence record's master key from the ledger storage (BookieImpl.readJournal), so the fence survives a crash only
# if the ledger storage wrote the ledger's index to disk first: a real checkpoint (the default storage's index
# header, with the fence bit) does; a crash before one loses it. The bookies' lastMark and index files are kept
# just before the kill, and their logs of the replay after it.
_CHECKPOINT_WAIT_S = 10.0


def _mark_passed_fence(files: dict[str, Any], ledger_id: int) -> bool:
    """The bookie's lastMark file is past its fence record of the ledger."""
    fences = files["ledgers"][str(ledger_id)]["fence_records"]
    return bool(fences) and files["last_mark"] is not None and bool(files["last_mark"] > max(fences))


def _fence_on_disk(files: dict[str, Any], ledger_id: int) -> bool:
    """The lastMark is past the fence record, and the ledger's index file says fenced."""
    index = files["ledgers"][str(ledger_id)]["index"]
    return _mark_passed_fence(files, ledger_id) and index is not None and bool(index["fenced"])


_Checkpointed = Callable[[dict[str, Any], int], bool]


def _fence_empty_ledger_then_restart(checkpointed: _Checkpointed | None) -> Callable[[Driver], None]:
    """Recover an empty ledger, crash and restart its bookies, add with the old handle.

    ``checkpointed``: wait (up to ten seconds) until it holds on every bookie
    of the ledger; None: wait as long as three checkpoints of the storages
    that take them on a timer, during which the default storage takes none.
    """

    def run(driver: Driver) -> None:
        # A DbLedgerStorage checkpoint writes the fence only along with entries it flushes (checkpoint returns
        # when the write cache is empty): an earlier scenario's last writes, a recovery's write-back, may still be
        # in the cache. Two of the SyncThread's intervals flush them before the fence is set.
        time.sleep(2 * CHECKPOINT_INTERVAL_MS / 1000)
        ledger = driver.create(3, 3, 2)
        ledger.recover(1)
        if checkpointed is None:
            time.sleep(3 * CHECKPOINT_INTERVAL_MS / 1000)
        else:
            deadline = time.monotonic() + _CHECKPOINT_WAIT_S
            while time.monotonic() < deadline and not all(
                checkpointed(driver.read_bookie(ledger.bookie(n), [ledger]), ledger.ledger_id) for n in (1, 2, 3)
            ):
                time.sleep(0.2)
            # Without a checkpoint in time the scenario goes on: what the files said is kept below.
        for n in (1, 2, 3):
            driver.inspect("before the kill", ledger, (n,))
            driver.kill(ledger.bookie(n))
            driver.restart(ledger.bookie(n))
        driver.cluster.wait_for_bookies(len(driver.cluster.bookie_ids))
        driver.inspect("after the restart", ledger, (1, 2, 3))
        results = ledger.add(1)
        if results[0] == 0:
            raise BrokenPromiseError(
                f"{driver.scenario}: the old writer's add was acknowledged after recovery closed the ledger at -1: "
                "the acknowledged entry 0 is not in the closed ledger"
            )

    return run


_scenario(
    "fence-empty-ledger-then-restart",
    "on the default storage, an empty ledger is recovered; its bookies crash before any checkpoint and restart; "
    "the old writer adds",
    expects="fence-of-empty-ledger-lost",
    storage="default",  # DbLedgerStorage checkpoints on a timer: fence-empty-ledger-db-storage-then-restart
)(_fence_empty_ledger_then_restart(None))

_scenario(
    "fence-empty-ledger-checkpoint-then-restart",
    "as fence-empty-ledger-then-restart, with an entry log per ledger: a checkpoint writes the fenced index "
    "before the crash, and the old writer's add is refused",
    storage="entry-log-per-ledger",
)(_fence_empty_ledger_then_restart(_fence_on_disk))

_scenario(
    "fence-empty-ledger-db-storage-before-checkpoint-then-restart",
    "as fence-empty-ledger-then-restart, on DbLedgerStorage before its first checkpoint: the replay finds no "
    "master key for the fence record, as on the default storage",
    expects="fence-of-empty-ledger-lost",
    storage="db-hourly-checkpoints",  # SingleDirectoryDbLedgerStorage.readMasterKey: NoLedgerException
)(_fence_empty_ledger_then_restart(None))

_scenario(
    "fence-empty-ledger-db-storage-then-restart",
    "as fence-empty-ledger-then-restart, on DbLedgerStorage: a checkpoint moves the lastMark past the fence "
    "record without writing the ledger's metadata",
    expects="fence-lost-by-db-ledger-storage",
    storage="db",
)(_fence_empty_ledger_then_restart(_mark_passed_fence))
