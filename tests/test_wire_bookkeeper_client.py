"""The released BookKeeper 4.17.2 client, unmodified, on three reference bookies served over TCP.

The project's real cluster (:class:`BookKeeperCluster`) brings ZooKeeper and
the client harness JVM, with no BookKeeper bookie of its own; the bookies
are reference bookies (:class:`ServedBookies`) that register in that
ZooKeeper as BookKeeper's bookies do, so that the client finds them by its
usual metadata and talks to them with its default v3 protocol.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, Harness
from ledgerspec.conformance.adapters.jars import ensure_jars
from ledgerspec.reference.wire import ServedBookies

pytestmark = pytest.mark.real_bookkeeper

ENTRIES = 10


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BookKeeperCluster, ServedBookies]]:
    directory = tmp_path_factory.mktemp("wire")
    with (
        BookKeeperCluster(ensure_jars(), directory / "cluster", bookies=0) as bookkeeper,
        ServedBookies(directory / "bookies", 3, zookeeper=f"127.0.0.1:{bookkeeper.zk_port}") as served,
    ):
        assert sorted(bookkeeper.wait_for_bookies(3)) == sorted(served.bookie_ids)
        yield bookkeeper, served


def _harness(cluster: tuple[BookKeeperCluster, ServedBookies]) -> Harness:
    assert cluster[0].harness is not None
    return cluster[0].harness


def _operations(served: ServedBookies) -> Counter[str]:
    """How many requests of each operation the bookies have served so far (``v2:`` before a v2 one's)."""
    return sum((b.operations for b in served.bookies), Counter[str]())


def _expected(ledger: int, count: int) -> list[str]:
    return [f"entry {n} of ledger {ledger}" for n in range(count)]  # what the harness adds


def test_a_ledger_written_closed_and_recovered_reads_the_same_entries(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    harness = _harness(cluster)
    created = harness.call("create", client=0, ensemble=3, write=2, ack=2)
    ledger = created["ledger"]
    assert harness.call("add", client=0, ledger=ledger, count=ENTRIES)["results"] == [0] * ENTRIES
    assert harness.call("read", client=0, ledger=ledger, first=0, last=ENTRIES - 1)["entries"] == _expected(
        ledger, ENTRIES
    )
    assert harness.call("close", client=0, ledger=ledger)["rc"] == 0
    opened = harness.call("open", client=1, ledger=ledger, recovery=True)
    assert opened["last_add_confirmed"] == ENTRIES - 1
    assert harness.call("read", client=1, ledger=ledger, first=0, last=ENTRIES - 1)["entries"] == _expected(
        ledger, ENTRIES
    )


def test_a_recovery_open_fences_the_bookies_and_the_writer_is_refused(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    harness, served = _harness(cluster), cluster[1]
    ledger = harness.call("create", client=0, ensemble=3, write=2, ack=2)["ledger"]
    assert harness.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
    opened = harness.call("open", client=2, ledger=ledger, recovery=True)  # the writer still has it open
    assert opened["last_add_confirmed"] == 4 and opened["metadata"]["state"] == "CLOSED"
    assert harness.call("read", client=2, ledger=ledger, first=0, last=4)["entries"] == _expected(ledger, 5)
    assert all(served.on_bookie(n, lambda b: b.is_fenced(ledger)) for n in (1, 2, 3))  # the ensemble is all three
    (refused,) = harness.call("add", client=0, ledger=ledger, count=1)["results"]
    assert refused != 0
    seen = _operations(served)
    assert seen["ADD_ENTRY"] >= 2 * 5 and seen["READ_ENTRY"] > 0
    assert "AUTH" not in seen  # a client without an auth plugin sends none (NullClientAuthProviderFactory)


def test_a_crashed_bookie_is_replaced_and_its_entries_are_read_after_its_restart(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    bookkeeper, served = cluster
    harness = _harness(cluster)
    created = harness.call("create", client=0, ensemble=2, write=2, ack=2)
    ledger, (first,) = created["ledger"], created["metadata"]["ensembles"].values()
    assert harness.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
    crashed = next(b.number for b in served.bookies if b.bookie_id == first[0])
    served.crash(crashed)
    try:
        # The writer's next add finds the connection gone and changes the ensemble to the third bookie.
        assert harness.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
        changed = harness.call("metadata", client=0, ledger=ledger)["metadata"]["ensembles"]
        assert len(changed) == 2 and first[0] not in changed["5"]
    finally:
        served.restart(crashed)
    bookkeeper.wait_for_bookies(3)
    assert harness.call("close", client=0, ledger=ledger)["rc"] == 0
    opened = harness.call("open", client=3, ledger=ledger, recovery=True)
    assert opened["last_add_confirmed"] == 9
    assert harness.call("read", client=3, ledger=ledger, first=0, last=9)["entries"] == _expected(ledger, 10)
    # The restarted bookie holds the first five entries again, replayed from its journal.
    held = served.on_bookie(crashed, lambda b: b.memory_state().memtable | b.memory_state().flushed)
    assert {entry for lid, entry in held if lid == ledger} == set(range(5))


def test_a_client_on_the_v2_protocol_writes_fences_and_recovers_as_pulsars_brokers_do(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    bookkeeper, served = cluster
    before = _operations(served)
    broker = bookkeeper.start_harness("v2", {"ledgerspec.useV2WireProtocol": "true"})
    try:
        ledger = broker.call("create", client=0, ensemble=3, write=2, ack=2)["ledger"]
        assert broker.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
        assert broker.call("read", client=0, ledger=ledger, first=0, last=4)["entries"] == _expected(ledger, 5)
        opened = broker.call("open", client=1, ledger=ledger, recovery=True)  # fencing reads, in v2
        assert opened["last_add_confirmed"] == 4 and opened["metadata"]["state"] == "CLOSED"
        assert broker.call("read", client=1, ledger=ledger, first=0, last=4)["entries"] == _expected(ledger, 5)
        (refused,) = broker.call("add", client=0, ledger=ledger, count=1)["results"]
        assert refused != 0
    finally:
        broker.close()
    seen = _operations(served) - before
    assert seen["v2:ADDENTRY"] >= 2 * 5 and seen["v2:READENTRY"] > 0
    assert not [op for op in seen if not op.startswith("v2:")]  # not one v3 request


def test_a_client_on_the_v2_protocol_batch_reads_entries_within_its_count_and_size(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    """``LedgerHandle.batchReadAsync`` sends one BATCH_READ_ENTRY to a bookie of the ensemble (v2, batchReadEnabled,
    E = Qw) and returns what it answered: within the count, and past the first entry within the size."""
    bookkeeper, served = cluster
    before = _operations(served)
    broker = bookkeeper.start_harness("v2-batch", {"ledgerspec.useV2WireProtocol": "true"})
    try:
        ledger = broker.call("create", client=0, ensemble=2, write=2, ack=2)["ledger"]
        assert broker.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
        read = {
            (first, count, size): broker.call(
                "batch-read", client=0, ledger=ledger, first=first, count=count, size=size
            )
            for first, count, size in [(0, 5, 1 << 20), (1, 3, 1 << 20), (0, 5, 1)]
        }
    finally:
        broker.close()
    expected = _expected(ledger, 5)
    assert read[0, 5, 1 << 20]["entries"] == expected
    assert read[1, 3, 1 << 20]["entries"] == expected[1:4]
    assert read[0, 5, 1]["entries"] == expected[:1]  # the first entry whatever the size, and no other
    seen = _operations(served) - before
    assert seen["v2:BATCH_READ_ENTRY"] == 3 and not seen["v2:READENTRY"]


def test_the_client_learns_which_entries_each_bookie_holds(cluster: tuple[BookKeeperCluster, ServedBookies]) -> None:
    """``BookieClient.getListOfEntriesOfLedger`` (GET_LIST_OF_ENTRIES_OF_LEDGER, as the replication worker's
    LedgerChecker asks it) decodes each bookie's answer: the entries of its write sets, E=3, Qw=2."""
    served = cluster[1]
    harness = _harness(cluster)
    before = _operations(served)
    created = harness.call("create", client=0, ensemble=3, write=2, ack=2)
    ledger, ensemble = created["ledger"], created["metadata"]["ensembles"]["0"]
    assert harness.call("add", client=0, ledger=ledger, count=6)["results"] == [0] * 6
    for index, bookie in enumerate(ensemble):
        listed = harness.call("entries-of-ledger", client=0, ledger=ledger, bookie=bookie, last=10)
        striped = [e for e in range(6) if index in (e % 3, (e + 1) % 3)]  # RoundRobinDistributionSchedule
        assert listed["entries"] == striped and listed["total"] == len(striped), bookie
    seen = _operations(served) - before
    assert seen["GET_LIST_OF_ENTRIES_OF_LEDGER"] == 3


def test_a_tailing_reader_long_polls_the_lac_and_gets_the_next_entry_once_it_is_confirmed(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    """The Java client's long poll (``readLastAddConfirmedAndEntry``, v3 ``READ_ENTRY`` with ``previousLAC`` and
    ``ENTRY_PIGGYBACK``) waits on the reference bookies until the writer's next add confirms the entry."""
    bookkeeper, served = cluster
    harness = _harness(cluster)
    ledger = harness.call("create", client=0, ensemble=3, write=3, ack=3)["ledger"]
    for _ in range(3):  # one at a time, each add carrying the LAC of the one before: the bookies' LAC is 1
        assert harness.call("add", client=0, ledger=ledger, count=1)["results"] == [0]
    before = _operations(served)
    reader = bookkeeper.start_harness("tailer")
    try:
        assert reader.call("open", client=1, ledger=ledger, recovery=False)["last_add_confirmed"] == 1
        answers: list[dict[str, object]] = []
        poll = threading.Thread(
            target=lambda: answers.append(
                reader.call("read-lac-and-entry", client=1, ledger=ledger, entry=2, timeout=20_000)
            )
        )
        poll.start()
        time.sleep(1.0)
        assert poll.is_alive()  # entry 2 is not confirmed yet: the bookies hold the poll
        assert harness.call("add", client=0, ledger=ledger, count=1)["results"] == [0]  # carries LAC 2
        poll.join(20)
        assert [(a["lac"], a["entry"]) for a in answers] == [(2, _expected(ledger, 3)[2])]
        timed_out = reader.call("read-lac-and-entry", client=1, ledger=ledger, entry=4, timeout=300)
        assert (timed_out["lac"], timed_out["entry"]) == (2, None)  # nothing past LAC 2: it waited, then answered
    finally:
        reader.close()
    assert _operations(served)["READ_ENTRY"] > before["READ_ENTRY"]


def test_the_wire_benchmark_times_adds_that_all_reached_the_bookies(
    cluster: tuple[BookKeeperCluster, ServedBookies],
) -> None:
    """The benchmark's measure (``tools/bench/wire.py``) on these bookies: each round's adds are acknowledged and
    held by the bookies, so a rate counts only adds that happened."""
    from ledgerspec.tools.bench.wire import Settings, measure

    served = cluster[1]
    before = _operations(served)["ADD_ENTRY"]
    rate = measure("reference", _harness(cluster), Settings(adds=300, size=64, window=20, rounds=2, quorums=(3, 3, 2)))
    assert (rate.adds, len(rate.seconds)) == (300, 2) and rate.per_second > 0
    after = _operations(served)["ADD_ENTRY"]
    # The warm-up round and two timed ones: each add acknowledged by Qa = 2 bookies, and sent to Qw = 3 (the last
    # few may still be on their way to the third when the ledger closes).
    assert 2 * 900 <= after - before <= 3 * 900 and after - before > 3 * 900 - 20


def test_the_wire_benchmark_refuses_quorums_it_cannot_place(capsys: pytest.CaptureFixture[str]) -> None:
    from ledgerspec.tools.bench.wire import main as bench

    for bad in ("3,2", "4,3,2", "3,2,3", "a,b,c"):
        with pytest.raises(SystemExit) as exited:
            bench(["--quorums", bad])
        assert exited.value.code == 2 and "--quorums" in capsys.readouterr().err
