"""What served bookies record is a trace: the released BookKeeper 4.17.2 client's run, checked with no adapter.

Reference bookies served with ``trace`` (``ledgerspec serve bookies --trace``)
write each request they served as ledger-spec events in the ``bookies``
observation mode (``reference/wire/trace.py``); ``ledgerspec check`` judges
the file by the manifest written beside it.
"""

from __future__ import annotations

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


def _served(bookkeeper: BookKeeperCluster, root: Path, config: BookieConfig | None = None) -> ServedBookies:
    return ServedBookies(
        root / "bookies", 3, zookeeper=f"127.0.0.1:{bookkeeper.zk_port}", config=config, trace=root / "run.ndjson"
    )


def _harness(bookkeeper: BookKeeperCluster, served: ServedBookies) -> Harness:
    assert sorted(bookkeeper.wait_for_bookies(3)) == sorted(served.bookie_ids)
    assert bookkeeper.harness is not None
    return bookkeeper.harness


def _write_and_fence(harness: Harness, served: ServedBookies) -> int:
    """A writer adds five entries; a second client opens the ledger with recovery while the writer has it open."""
    ledger = int(harness.call("create", client=0, ensemble=3, write=2, ack=2)["ledger"])
    assert harness.call("add", client=0, ledger=ledger, count=5)["results"] == [0] * 5
    opened = harness.call("open", client=2, ledger=ledger, recovery=True)
    assert opened["last_add_confirmed"] == 4 and opened["metadata"]["state"] == "CLOSED"
    assert all(served.on_bookie(n, lambda b: b.is_fenced(ledger)) for n in (1, 2, 3))
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
