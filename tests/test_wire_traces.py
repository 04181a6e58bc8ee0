"""What served bookies record is a trace: the released BookKeeper 4.17.2 client's run, checked with no adapter.

Reference bookies served with ``trace`` (``ledgerspec serve bookies --trace``)
write each request they served as ledger-spec events in the ``bookies``
observation mode (``reference/wire/trace.py``); ``ledgerspec check`` judges
the file by the manifest written beside it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from ledgerspec.conformance.adapters.cluster import BookKeeperCluster, Harness
from ledgerspec.conformance.adapters.jars import ensure_jars
from ledgerspec.reference.bookie import BookieConfig
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.tools.cli.main import main

pytestmark = pytest.mark.real_bookkeeper

#: Every step of the clients is hidden from the bookies: the breadth-first search needs room for all of a run's.
HIDDEN_STEPS = 30


@pytest.fixture(scope="module")
def bookkeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BookKeeperCluster]:
    with BookKeeperCluster(ensure_jars(), tmp_path_factory.mktemp("traced") / "cluster", bookies=0) as cluster:
        yield cluster


def _served(
    bookkeeper: BookKeeperCluster, root: Path, config: BookieConfig | None = None, *, count: int = 3, **options: Any
) -> ServedBookies:
    return ServedBookies(
        root / "bookies",
        count,
        zookeeper=f"127.0.0.1:{bookkeeper.zk_port}",
        config=config,
        trace=root / "run.ndjson",
        **options,
    )


def _harness(bookkeeper: BookKeeperCluster, served: ServedBookies) -> Harness:
    assert sorted(bookkeeper.wait_for_bookies(len(served.bookies))) == sorted(served.bookie_ids)
    assert bookkeeper.harness is not None
    return bookkeeper.harness


@contextlib.contextmanager
def _proxied_client(bookkeeper: BookKeeperCluster, served: ServedBookies, name: str) -> Iterator[Harness]:
    """A client harness whose ZooKeeper is the served bookies' proxy, so that its metadata writes are traced."""
    _harness(bookkeeper, served)
    client = bookkeeper.start_harness(name, metadata_uri=f"zk+hierarchical://{served.metadata_address}/ledgers")
    try:
        yield client
    finally:
        client.close()


def _write_and_fence(harness: Harness, served: ServedBookies) -> int:
    """A writer adds five entries; a second client opens the ledger with recovery while the writer has it open."""
    ledger = int(harness.call("create", client=0, ensemble=3, write=2, ack=2)["ledger"])
    assert harness.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
    opened = harness.call("open", client=2, ledger=ledger, recovery=True)
    assert opened["last_add_confirmed"] == 4 and opened["metadata"]["state"] == "CLOSED"
    live = [b.number for b in served.bookies if b.running]  # the ledger's ensemble: three bookies up
    assert all(served.on_bookie(n, lambda b: b.is_fenced(ledger)) for n in live)
    return ledger


def _check(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["check", str(path), "--json", "--max-hidden-steps", str(HIDDEN_STEPS)])
    return code, json.loads(capsys.readouterr().out)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_a_run_of_the_java_client_on_traced_bookies_conforms(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _served(bookkeeper, tmp_path) as served:
        harness = _harness(bookkeeper, served)
        closed = int(harness.call("create", client=0, ensemble=3, write=2, ack=2)["ledger"])
        assert harness.call("add", client=0, ledger=closed, count=3)["results"] == [0] * 3
        assert harness.call("close", client=0, ledger=closed)["rc"] == 0
        assert harness.call("open", client=1, ledger=closed, recovery=True)["last_add_confirmed"] == 2
        fenced = _write_and_fence(harness, served)
        (refused,) = harness.call("add", client=0, ledger=fenced, count=1)["results"]
        assert refused != 0
    lines = _lines(tmp_path / "run.ndjson")
    by_trace = {t: [x["type"] for x in lines if x["trace"] == t] for t in (f"run-L{closed}", f"run-L{fenced}")}
    # Every add each bookie took, and for the fenced ledger the fencing reads and the refused add.
    assert by_trace[f"run-L{closed}"] == ["BookieReceivesAdd"] * 6
    fenced_lines = [x for x in lines if x["trace"] == f"run-L{fenced}"]
    assert {x["type"] for x in fenced_lines} == {
        "BookieReceivesAdd",
        "BookieReceivesFenceRead",
        "BookieReceivesRecoveryRead",
    }
    assert sum(1 for x in fenced_lines if x["type"] == "BookieReceivesFenceRead") == 3
    assert [
        x["x-reply"] for x in fenced_lines if x["params"]["m"].get("entry") == 5 and x["params"]["m"].get("client") == 0
    ] == ["fenced", "fenced"]
    assert [x["seq"] for x in lines] == sorted(x["seq"] for x in lines)
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert (code, verdicts["traces"], verdicts["conforms"], verdicts["mode"]) == (0, 2, 2, "bookies")


def test_adds_in_flight_carry_a_lac_behind_the_acks_the_bookies_sent_and_conform(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ten adds in flight on E=5 Qw=2 Qa=2: the handle takes the acks in one at a time, so an add may carry a LAC
    behind acks the bookies had already sent; the bookies' trace is checked with LacLag = 1, and conforms."""
    with _served(bookkeeper, tmp_path, count=5) as served:
        harness = _harness(bookkeeper, served)
        ledger = int(harness.call("create", client=0, ensemble=5, write=2, ack=2)["ledger"])
        for _ in range(3):
            assert harness.call("add", client=0, ledger=ledger, count=10)["results"] == [0] * 10
        assert harness.call("close", client=0, ledger=ledger)["rc"] == 0
    manifest = orjson.loads((tmp_path / "manifest.json").read_bytes())
    assert manifest["traces"][0]["constants"]["LacLag"] == 1
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert (code, verdicts["conforms"]) == (0, 1), verdicts["violations"]


def test_a_ledger_trace_holds_the_crashes_that_can_matter_to_it(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An orderly stop is the spec's crash; a ledger's trace holds the crashes of the bookies down as it starts,
    and after its last request those of the bookies that hold some of it: a restart could lose that."""
    with _served(bookkeeper, tmp_path, count=4) as served:
        harness = _harness(bookkeeper, served)
        first = int(harness.call("create", client=0, ensemble=3, write=3, ack=2)["ledger"])
        assert harness.call("add", client=0, ledger=first, count=2)["results"] == [0] * 2
        ensemble = harness.call("open", client=1, ledger=first, recovery=False)["metadata"]["ensembles"]["0"]
        assert harness.call("close", client=0, ledger=first)["rc"] == 0
        member = served.bookie_ids.index(ensemble[0]) + 1
        (spare,) = [n for n in range(1, 5) if served.bookie_ids[n - 1] not in ensemble]
        served.shut_down(spare)  # holds nothing of the first ledger
        served.shut_down(member)
        served.restart(member)
        assert len(bookkeeper.wait_for_bookies(3)) == 3
        second = int(harness.call("create", client=0, ensemble=3, write=3, ack=2)["ledger"])
        assert harness.call("add", client=0, ledger=second, count=2)["results"] == [0] * 2
        assert harness.call("close", client=0, ledger=second)["rc"] == 0
        served.restart(spare)
    lines = _lines(tmp_path / "run.ndjson")
    faults = {
        t: [x["type"] for x in lines if x["trace"] == t and x["type"] in ("BookieCrashes", "BookieRestarts")]
        for t in (f"run-L{first}", f"run-L{second}")
    }
    assert faults == {f"run-L{first}": ["BookieCrashes", "BookieRestarts"], f"run-L{second}": ["BookieCrashes"]}
    (down,) = [x for x in lines if x["trace"] == f"run-L{second}" and x["type"] == "BookieCrashes"]
    assert down["params"]["b"] == 4 and down["observed"]["crashed"] == [4]  # the spare: outside its ensemble
    constants = {
        t["trace"]: t["constants"]["MaxCrashes"]
        for t in orjson.loads((tmp_path / "manifest.json").read_bytes())["traces"]
    }
    assert constants == {f"run-L{first}": 1, f"run-L{second}": 1}
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert (code, verdicts["conforms"]) == (0, 2), verdicts["violations"]


def test_with_its_metadata_through_the_proxy_the_trace_holds_every_write_of_it_and_conforms(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The released client's ZooKeeper is the served bookies' proxy: its ensemble change, its close, and a
    recovery's IN_RECOVERY and close are events of the bookies' trace, and every event observes the metadata."""
    with (
        _served(bookkeeper, tmp_path, count=4, metadata_proxy=0) as served,
        _proxied_client(bookkeeper, served, "proxied") as client,
    ):
        changed = int(client.call("create", client=0, ensemble=3, write=2, ack=2)["ledger"])
        assert client.call("add", client=0, ledger=changed, count=3)["results"] == [0] * 3
        first = client.call("open", client=1, ledger=changed, recovery=False)["metadata"]["ensembles"]["0"]
        served.crash(served.bookie_ids.index(first[0]) + 1)
        assert client.call("add", client=0, ledger=changed, count=3)["results"] == [0] * 3
        assert client.call("close", client=0, ledger=changed)["rc"] == 0
        fenced = _write_and_fence(client, served)
    lines = _lines(tmp_path / "run.ndjson")
    writes = {
        t: [(x["type"], x.get("params")) for x in lines if x["trace"] == t and x["process"] == "zookeeper"]
        for t in (f"run-L{changed}", f"run-L{fenced}")
    }
    # the first ensemble is 1, 2, 3 as the spec numbers it, so the crashed bookie is 1, the fourth its replacement
    assert writes[f"run-L{changed}"] == [("WriterChangesEnsemble", {"b": 1, "nb": 4}), ("WriterClosesLedger", None)]
    assert writes[f"run-L{fenced}"] == [("RecovererStartsRecovery", None), ("RecovererClosesLedger", None)]
    (change,) = [x for x in lines if x["type"] == "WriterChangesEnsemble"]
    assert change["observed"]["meta_segments"] == [[0, [1, 2, 3]], [3, [4, 2, 3]]]
    assert all(x["observed"]["meta_version"] >= 1 for x in lines)
    manifest = orjson.loads((tmp_path / "manifest.json").read_bytes())
    assert [t.get("metadata_writes") for t in manifest["traces"]] == [2, 2]
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert (code, verdicts["traces"], verdicts["conforms"]) == (0, 2, 2), verdicts["violations"]


def test_bookies_replaced_in_one_write_are_as_many_steps_and_the_trace_conforms(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole ensemble crashes: the add's three failures reach the handle, the first starts a change, the
    other two wait for it (``delayedWriteFailedBookies``) and are replaced together in the next write, which the
    trace gives as one ``WriterChangesEnsemble`` a bookie, each counting a version of the spec's."""
    with (
        _served(bookkeeper, tmp_path, count=6, metadata_proxy=0) as served,
        _proxied_client(bookkeeper, served, "proxied-six") as client,
    ):
        ledger = int(client.call("create", client=0, ensemble=3, write=3, ack=2)["ledger"])
        assert client.call("add", client=0, ledger=ledger, count=2)["results"] == [0] * 2
        first = client.call("open", client=1, ledger=ledger, recovery=False)["metadata"]["ensembles"]["0"]
        for bookie_id in first:
            served.crash(served.bookie_ids.index(bookie_id) + 1)
        assert client.call("add", client=0, ledger=ledger, count=2)["results"] == [0] * 2
        assert client.call("close", client=0, ledger=ledger)["rc"] == 0
    lines = _lines(tmp_path / "run.ndjson")
    writes = [x for x in lines if x["process"] == "zookeeper"]
    changes = [(x["params"]["b"], x["params"]["nb"]) for x in writes if x["type"] == "WriterChangesEnsemble"]
    assert sorted(b for b, _ in changes) == [1, 2, 3] and sorted(nb for _, nb in changes) == [4, 5, 6]
    manifest = orjson.loads((tmp_path / "manifest.json").read_bytes())
    (trace,) = manifest["traces"]
    # ZooKeeper's versions: the creation, the changes' writes, the close; the spec's: one a bookie replaced. (The
    # failures after the first reach the handle within microseconds, the change takes a ZooKeeper round trip: they
    # are replaced together unless the machine holds them back that long; replace-two-in-one-write is sure to.)
    assert trace["metadata_writes"] <= len(writes) == 4
    assert writes[-1]["type"] == "WriterClosesLedger" and writes[-1]["observed"]["meta_version"] == 5
    assert sorted(writes[-1]["observed"]["meta_segments"][-1][1]) == [4, 5, 6]
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert (code, verdicts["conforms"]) == (0, 1), verdicts["violations"]


def test_a_run_of_a_client_on_the_v2_protocol_conforms_too(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As Pulsar's brokers speak to bookies: the same requests in v2 frames, the same trace."""
    with _served(bookkeeper, tmp_path) as served:
        _harness(bookkeeper, served)
        broker = bookkeeper.start_harness("v2-traced", {"ledgerspec.useV2WireProtocol": "true"})
        try:
            ledger = _write_and_fence(broker, served)
        finally:
            broker.close()
        assert not [op for b in served.bookies for op in b.operations if not op.startswith("v2:")]
    lines = _lines(tmp_path / "run.ndjson")
    assert {x["trace"] for x in lines} == {f"run-L{ledger}"}
    assert {x["type"] for x in lines} == {"BookieReceivesAdd", "BookieReceivesFenceRead", "BookieReceivesRecoveryRead"}
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert (code, verdicts["traces"], verdicts["conforms"]) == (0, 1, 1), verdicts["violations"]


def test_a_bookie_that_forgets_a_fence_in_its_restart_violates_at_the_restart(
    bookkeeper: BookKeeperCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _served(bookkeeper, tmp_path, BookieConfig(mutant="fence_not_journaled")) as served:
        harness = _harness(bookkeeper, served)
        ledger = _write_and_fence(harness, served)
        served.crash(1)
        served.restart(1)
        assert not served.on_bookie(1, lambda b: b.is_fenced(ledger))  # the mutant's fence was in memory only
    (crash,) = [x for x in _lines(tmp_path / "run.ndjson") if x["type"] == "BookieCrashes"]
    b = crash["params"]["b"]  # served bookie 1 as the spec numbers it: by its place in the first ensemble
    assert orjson.loads((tmp_path / "manifest.json").read_bytes())["mutant"] == "fence_not_journaled"
    code, verdicts = _check(capsys, tmp_path / "run.ndjson")
    assert code == 1
    (violation,) = verdicts["violations"]
    assert (violation["trace"], violation["event"], violation["process"]) == (
        f"run-L{ledger}",
        "BookieRestarts",
        f"bookie-{b}",
    )
    assert f"bookie_fenced[{b - 1}]: observed false, spec true" in violation["reason"]
