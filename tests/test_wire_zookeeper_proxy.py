"""The proxy in front of ZooKeeper that records the clients' metadata writes, and the served bookies' trace with them.

Against the real ZooKeeper server the tests start: kazoo, and the reference
client's ZooKeeper metadata store, talk to ZooKeeper through
:class:`~ledgerspec.reference.wire.zookeeper_proxy.ZooKeeperProxy`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from kazoo.protocol.serialization import Connect
from ledgerspec.conformance.checker import Bounds, check_trace
from ledgerspec.conformance.events import events_from_json
from ledgerspec.reference.ledger.client import BookKeeperClient, OrderedPlacement
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore
from ledgerspec.reference.metadata.zookeeper import ZooKeeperMetadataStore
from ledgerspec.reference.wire import ServedBookies
from ledgerspec.reference.wire.network import WireNetwork
from ledgerspec.reference.wire.zookeeper_proxy import MAX_FRAME, MetadataWrite, ZooKeeperProxy
from ledgerspec.spec.ledger.ledger import LedgerSpec

pytestmark = pytest.mark.zookeeper


@pytest.fixture
def proxied(zookeeper_server: Any) -> Iterator[tuple[ZooKeeperProxy, list[MetadataWrite]]]:
    """A proxy in front of the test ZooKeeper on a loop of its own, and the writes it recorded."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    recorded: list[MetadataWrite] = []
    proxy = ZooKeeperProxy(zookeeper_server.hosts, recorded.append)
    asyncio.run_coroutine_threadsafe(proxy.start(), loop).result(10)
    yield proxy, recorded
    asyncio.run_coroutine_threadsafe(proxy.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def _client(address: str) -> KazooClient:
    zk = KazooClient(hosts=address)
    zk.start(timeout=30)
    return zk


def test_the_proxy_records_each_write_zookeeper_accepted_with_its_version_and_none_it_refused(
    proxied: tuple[ZooKeeperProxy, list[MetadataWrite]], tmp_path: Path
) -> None:
    proxy, recorded = proxied
    root = f"/proxy-{tmp_path.name}"
    zk = _client(proxy.address)
    try:
        zk.create(root, b"one")
        zk.set(root, b"two")
        with pytest.raises(BadVersionError):
            zk.set(root, b"stale", version=0)  # refused: no write
        tx = zk.transaction()
        tx.check(root, 1)
        tx.set_data(root, b"three")
        tx.create(f"{root}/child", b"c")
        tx.delete(f"{root}/child")
        assert all(r is True or isinstance(r, str) or hasattr(r, "version") for r in tx.commit())
        refused = zk.transaction()
        refused.check(root, 0)  # fails, so the multi writes nothing
        refused.set_data(root, b"never")
        refused.commit()
        zk.delete(root)
    finally:
        zk.stop()
        zk.close()
    assert [(w.path, w.data, w.version) for w in recorded] == [
        (root, b"one", 0),
        (root, b"two", 1),
        (root, b"three", 2),
        (f"{root}/child", b"c", 0),
        (f"{root}/child", None, -1),
        (root, None, -1),
    ]
    zxids = [w.zxid for w in recorded]
    assert zxids == sorted(zxids) and zxids[2] == zxids[3] == zxids[4]  # a multi is one transaction
    assert proxy.unreadable == []


def test_a_frame_too_long_closes_its_own_connection_and_the_others_are_served(
    proxied: tuple[ZooKeeperProxy, list[MetadataWrite]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    proxy, recorded = proxied
    zk = _client(proxy.address)
    try:
        with (
            caplog.at_level(logging.WARNING, logger="ledgerspec.wire.zookeeper"),
            socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as bad,
        ):
            bad.sendall(struct.pack(">i", MAX_FRAME + 1))
            assert bad.recv(1) == b""  # closed
        assert f"a frame of {MAX_FRAME + 1} bytes" in caplog.text
        zk.create(f"/after-{tmp_path.name}", b"x")
    finally:
        zk.stop()
        zk.close()
    assert [w.path for w in recorded] == [f"/after-{tmp_path.name}"]


def test_a_write_the_proxy_cannot_read_is_counted_with_the_reason(
    proxied: tuple[ZooKeeperProxy, list[MetadataWrite]],
) -> None:
    proxy, recorded = proxied
    connect = Connect(0, 0, 10000, 0, b"\x00" * 16, False).serialize()
    cut_short = struct.pack(">ii", 1, 5) + struct.pack(">i", 100) + b"/ab"  # a setData whose path is cut short
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as raw:
        for frame in (bytes(connect), cut_short):
            raw.sendall(struct.pack(">i", len(frame)) + frame)
        deadline = time.monotonic() + 10
        while not proxy.unreadable and time.monotonic() < deadline:
            time.sleep(0.01)
    assert recorded == []
    (why,) = proxy.unreadable
    assert "a request of type 5 cut short or malformed" in why


@pytest.fixture
def cluster_root(zookeeper_server: Any, tmp_path: Path) -> Iterator[tuple[str, str, KazooClient]]:
    """A formatted ledgers root of the test's own, as ``initnewcluster`` leaves it for the bookies."""
    zk = _client(zookeeper_server.hosts)
    root = f"/served-{tmp_path.name}"
    zk.ensure_path(f"{root}/available/readonly")
    yield zookeeper_server.hosts, root, zk
    zk.stop()
    zk.close()


def _write_and_close(served: ServedBookies, root: str, entries: int) -> int:
    """The reference client writes ``entries`` entries and closes the ledger, its metadata through the proxy."""
    assert served.metadata_address is not None
    ids = served.bookie_ids
    store = ZooKeeperMetadataStore(served.metadata_address)
    network = WireNetwork(lambda: ids, lambda b: ids.index(b) + 1)
    try:
        writer = network.attach(
            BookKeeperClient(0, LedgerMetadataStore(store, root=root), network, placement=OrderedPlacement())
        )
        handle = writer.create_ledger(3, 2, 2)
        adds = [handle.add_entry(f"entry {i}".encode()) for i in range(entries)]
        network.run_until(lambda: all(f.done() for f in adds), within=20)
        closed = handle.close()
        network.run_until(closed.done, within=20)
        closed.result()
        return handle.ledger_id
    finally:
        network.close()
        store.close()


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _traced_bookies(tmp_path: Path, hosts: str, root: str, trace: Path) -> ServedBookies:
    """Three traced bookies registered under ``root``, with the proxy in front of ZooKeeper on any free port."""
    return ServedBookies(tmp_path / "bookies", 3, zookeeper=hosts, ledgers_root=root, trace=trace, metadata_proxy=0)


SMALL = {"NumBookies": 3, "E": 3, "Qw": 2, "Qa": 2, "MaxEntries": 3}
#: Every client step is hidden from the bookies: room for all of them between two events.
BOUNDS = Bounds(max_hidden_steps=20)


def test_the_served_trace_holds_the_writers_close_as_the_store_took_it_and_conforms(
    cluster_root: tuple[str, str, KazooClient], tmp_path: Path
) -> None:
    hosts, root, _ = cluster_root
    trace = tmp_path / "run" / "run.ndjson"
    with _traced_bookies(tmp_path, hosts, root, trace) as s:
        ledger = _write_and_close(s, root, 3)
    lines = _lines(trace)
    *served, close = lines
    assert (close["process"], close["type"]) == ("zookeeper", "WriterClosesLedger")
    assert {k: close["observed"][k] for k in ("meta_status", "meta_last_entry", "meta_version")} == {
        "meta_status": "CLOSED",
        "meta_last_entry": 2,
        "meta_version": 2,  # ZooKeeper's version 1: the creation, then the close
    }
    assert {x["type"] for x in served} == {"BookieReceivesAdd"} and len(served) == 6
    assert all(x["observed"]["meta_status"] == "OPEN" and x["observed"]["meta_version"] == 1 for x in served)
    manifest = json.loads((trace.parent / "manifest.json").read_text())
    (listed,) = manifest["traces"]
    assert (listed["trace"], listed["metadata_writes"]) == (f"run-L{ledger}", 1)
    verdict = check_trace(events_from_json(lines), LedgerSpec(**SMALL), "bookies", BOUNDS)
    assert verdict.status == "conforms", verdict.reason
    # A close at an entry no step of the spec closes at: the store's write is where the trace leaves the spec.
    close["observed"]["meta_last_entry"] = 1
    verdict = check_trace(events_from_json(lines), LedgerSpec(**SMALL), "bookies", BOUNDS)
    assert verdict.status == "violates" and verdict.failure is not None
    assert (verdict.failure.event_index, verdict.failure.process) == (len(lines) - 1, "zookeeper")
    assert "observed meta_last_entry = 1, the spec has 2" in verdict.reason


def test_a_write_that_did_not_pass_the_proxy_leaves_the_ledgers_metadata_out_of_its_trace(
    cluster_root: tuple[str, str, KazooClient], tmp_path: Path
) -> None:
    hosts, root, zk = cluster_root
    trace = tmp_path / "run" / "run.ndjson"
    with _traced_bookies(tmp_path, hosts, root, trace) as s:
        ledger = _write_and_close(s, root, 2)
        path = next(p for p in _ledger_paths(zk, root) if p.endswith(f"{ledger:04d}"))
        data, stat = zk.get(path)
        zk.set(path, data, version=stat.version)  # straight to ZooKeeper: the proxy never sees it
    lines = _lines(trace)
    assert {x["process"] for x in lines} == {"bookie-1", "bookie-2", "bookie-3"}
    assert not any(k.startswith("meta_") for x in lines for k in x["observed"])
    (listed,) = json.loads((trace.parent / "manifest.json").read_text())["traces"]
    assert listed["metadata_not_recorded"] == "ZooKeeper holds version 2, the proxy passed versions up to 1"
    assert listed["constants"]["E"] == 3  # the quorums still come from the metadata ZooKeeper holds


def _ledger_paths(zk: KazooClient, root: str) -> Iterator[str]:
    for top in zk.get_children(root):
        if top.isdigit():
            for middle in zk.get_children(f"{root}/{top}"):
                for leaf in zk.get_children(f"{root}/{top}/{middle}"):
                    yield f"{root}/{top}/{middle}/{leaf}"
