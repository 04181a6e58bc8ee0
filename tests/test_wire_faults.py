"""Faults on command for served reference bookies (``reference/wire/faults.py``): a plan given at the start, a
control port as they run, and what a client sees of each."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from ledgerspec.reference.bookie import Bookie, NoSuchEntryError, NoSuchLedgerError
from ledgerspec.reference.bookie.entry import encode_entry
from ledgerspec.reference.ledger.client import BookKeeperClient, ClientConfig, OrderedPlacement
from ledgerspec.reference.metadata.embedded import EmbeddedMetadataStore
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore
from ledgerspec.reference.wire import ServedBookies, decode_response, frame
from ledgerspec.reference.wire.codec import LENGTH
from ledgerspec.reference.wire.faults import FaultCommand, FaultError, parse_command, read_plan
from ledgerspec.reference.wire.network import WireNetwork
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb
from ledgerspec.tools.cli.main import main

KEY = b"ledgerspec"
LEDGER = 3


def _add(sock: socket.socket, entry_id: int, txn: int, *, priority: int = 0) -> pb.Response:
    body = encode_entry(LEDGER, entry_id, entry_id - 1, 8 * (entry_id + 1), f"entry {entry_id}".encode())
    header = pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.ADD_ENTRY, txnId=txn, priority=priority)
    add = pb.AddRequest(ledgerId=LEDGER, entryId=entry_id, masterKey=KEY, body=body)
    sock.sendall(frame(pb.Request(header=header, addRequest=add)))
    return _receive(sock)


def _receive(sock: socket.socket) -> pb.Response:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionResetError("the bookie closed the connection")
            data += chunk
        return data

    (length,) = LENGTH.unpack(exactly(LENGTH.size))
    return decode_response(exactly(length))


def _held(bookie: Bookie, ledger_id: int, upto: int = 8) -> list[int]:
    """The entries ``0 .. upto-1`` of the ledger the bookie serves."""
    held = []
    for entry_id in range(upto):
        with contextlib.suppress(NoSuchEntryError, NoSuchLedgerError):
            bookie.read_entry(ledger_id, entry_id)
            held.append(entry_id)
    return held


def _connect(bookie_id: str) -> socket.socket:
    host, port = bookie_id.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


class Control:
    """A client of the control port: one JSON command a line, one JSON answer a line."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.file = self.sock.makefile("rwb")

    def send(self, line: str) -> dict[str, object]:
        self.file.write(line.encode() + b"\n")
        self.file.flush()
        answer: dict[str, object] = json.loads(self.file.readline())
        return answer

    def close(self) -> None:
        self.file.close()
        self.sock.close()


@pytest.fixture
def controlled(tmp_path: Path) -> Iterator[tuple[ServedBookies, Control]]:
    with ServedBookies(tmp_path, 2, control=0) as served:
        assert served.control_port is not None
        control = Control(served.control_port)
        yield served, control
        control.close()


def test_the_control_port_crashes_restarts_and_makes_a_bookie_read_only(
    controlled: tuple[ServedBookies, Control],
) -> None:
    served, control = controlled
    sock = _connect(served.bookie_ids[0])
    assert _add(sock, 0, 1).addResponse.status == pb.EOK
    assert control.send('{"fault": "read-only", "bookie": 1}') == {
        "ok": True,
        "applied": {"fault": "read-only", "bookie": 1},
    }
    assert _add(sock, 1, 2).status == pb.EREADONLY  # WriteEntryProcessorV3: a normal add
    assert _add(sock, 1, 3, priority=1).status == pb.EOK  # a high-priority write (a recovery's) is still taken
    assert control.send('{"fault": "writable", "bookie": 1}')["ok"]
    assert _add(sock, 2, 4).status == pb.EOK
    assert control.send('{"fault": "crash", "bookie": 1}')["ok"]
    with pytest.raises(OSError):
        _add(sock, 3, 5)  # its connections were cut
    with pytest.raises(ConnectionRefusedError):
        _connect(served.bookie_ids[0])
    refused = control.send('{"fault": "crash", "bookie": 1}')
    assert refused == {"ok": False, "error": "bookie 1 is not running: it cannot crash"}
    assert control.send('{"fault": "restart", "bookie": 1}')["ok"]
    again = _connect(served.bookie_ids[0])
    assert _add(again, 3, 1).addResponse.status == pb.EOK  # its journal replayed, entries 0 .. 2 kept
    assert served.on_bookie(1, lambda b: _held(b, LEDGER)) == [0, 1, 2, 3]
    again.close()


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("crash bookie 1", "control line 1: not JSON"),
        ('{"fault": "melt", "bookie": 1}', 'unknown fault "melt"; faults: crash, restart'),
        ('{"fault": "crash", "bookie": 3}', "bookie must be a number from 1 to 2, not 3"),
        ('{"fault": "delay-replies", "bookie": 1}', "delay-replies needs ms"),
        ('{"fault": "crash", "bookie": 1, "ms": 5}', "crash takes no ms"),
        ('{"fault": "drop-replies", "bookie": 1, "operation": "WRITE"}', 'unknown operation "WRITE"'),
    ],
)
def test_a_bad_control_line_is_answered_with_what_is_wrong_and_the_port_stays_open(
    controlled: tuple[ServedBookies, Control], line: str, error: str
) -> None:
    served, control = controlled
    answer = control.send(line)
    assert answer["ok"] is False and error in str(answer["error"])
    assert control.send('{"fault": "heal", "bookie": 2}')["ok"]  # the same connection, the next line
    assert [c.fault for c in served.applied] == ["heal"]


def test_delayed_answers_and_a_slow_fsync_come_late(controlled: tuple[ServedBookies, Control]) -> None:
    served, control = controlled
    sock = _connect(served.bookie_ids[1])
    assert control.send('{"fault": "slow-fsync", "bookie": 2, "ms": 300}')["ok"]
    started = time.monotonic()
    assert _add(sock, 0, 1).addResponse.status == pb.EOK
    assert time.monotonic() - started >= 0.3
    assert control.send('{"fault": "heal", "bookie": 2}')["ok"]
    assert control.send('{"fault": "delay-replies", "bookie": 2, "ms": 200, "operation": "READ_ENTRY"}')["ok"]
    started = time.monotonic()
    assert _add(sock, 1, 2).addResponse.status == pb.EOK
    assert time.monotonic() - started < 0.2  # an add: not delayed
    header = pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=3)
    sock.sendall(frame(pb.Request(header=header, readRequest=pb.ReadRequest(ledgerId=LEDGER, entryId=0))))
    started = time.monotonic()
    assert _receive(sock).readResponse.status == pb.EOK
    assert time.monotonic() - started >= 0.2
    sock.close()


def test_a_plan_drops_an_answer_and_the_reference_client_replaces_the_bookie(tmp_path: Path) -> None:
    """Bookie 1 serves the add but its answer is lost (``replied = FALSE`` in the spec): the client's add times
    out, it changes the ensemble to bookie 3, and bookie 1 still holds the entry."""
    plan = [FaultCommand("drop-replies", 1, count=1, operation="ADD_ENTRY")]
    with ServedBookies(tmp_path, 3, plan=plan) as served:
        ids = served.bookie_ids
        network = WireNetwork(lambda: ids, lambda b: ids.index(b) + 1, timeout=0.5)
        ledgers = LedgerMetadataStore(EmbeddedMetadataStore())
        writer = network.attach(
            BookKeeperClient(0, ledgers, network, config=ClientConfig(explicit_lac=False), placement=OrderedPlacement())
        )
        handle = writer.create_ledger(2, 2, 2)
        add = handle.add_entry(b"entry 0")
        network.run_until(add.done, within=20)
        assert add.result() == 0 and network.timeouts == 1
        assert ledgers.read(handle.ledger_id).metadata.segments[-1].ensemble == (ids[2], ids[1])
        assert served.bookies[0].replies_dropped == 1
        assert served.on_bookie(1, lambda b: _held(b, handle.ledger_id)) == [0]
        network.close()


def test_a_plan_applies_each_command_once_the_bookies_answered_enough_requests(tmp_path: Path) -> None:
    plan = [FaultCommand("crash", 2, after=2), FaultCommand("restart", 2, after=3)]
    with ServedBookies(tmp_path, 2, plan=plan) as served:
        sock = _connect(served.bookie_ids[0])
        assert _add(sock, 0, 1).addResponse.status == pb.EOK
        assert [c.fault for c in served.applied] == []
        assert _add(sock, 1, 2).addResponse.status == pb.EOK  # the second answer: bookie 2 crashes
        time.sleep(0.1)
        assert [c.fault for c in served.applied] == ["crash"] and not served.bookies[1].running
        assert _add(sock, 2, 3).addResponse.status == pb.EOK  # the third: it restarts
        time.sleep(0.1)
        assert [c.fault for c in served.applied] == ["crash", "restart"] and served.bookies[1].running
        sock.close()


def test_a_bad_plan_names_its_file_and_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('[{"fault": "crash", "bookie": 1}, {"fault": "drop-replies", "bookie": 1, "count": 0}]')
    with pytest.raises(FaultError, match=r"plan\.json: command 2: count must be a whole number, at least 1, not 0"):
        read_plan(plan, 3)
    plan.write_text("{")
    with pytest.raises(FaultError, match=r"plan\.json: not JSON"):
        read_plan(plan, 3)
    with pytest.raises(FaultError, match="cannot read the fault plan"):
        read_plan(tmp_path / "missing.json", 3)
    plan.write_text('[{"fault": "crash", "bookie": 4}]')
    assert main(["serve", "bookies", "-n", "3", "--dir", str(tmp_path / "b"), "--faults", str(plan)]) == 2
    assert "command 1: bookie must be a number from 1 to 3, not 4" in " ".join(capsys.readouterr().err.split())
    assert parse_command({"fault": "heal", "bookie": 1}, "here", 1).to_json() == {"fault": "heal", "bookie": 1}


def test_a_read_only_bookie_moves_its_registration(tmp_path: Path, zookeeper_server: object) -> None:
    """A bookie turned read-only registers under ``available/readonly`` (``ZKRegistrationManager``), so a
    client's placement no longer picks it; back writable, under ``available`` again."""
    hosts: str = zookeeper_server.hosts  # type: ignore[attr-defined]
    zk = KazooClient(hosts=hosts)
    zk.start()
    root = f"/faults-{tmp_path.name}"
    zk.create(f"{root}/available/readonly", makepath=True)
    try:
        with ServedBookies(tmp_path, 2, zookeeper=hosts, ledgers_root=root) as served:
            bookie = served.bookie_ids[0]
            served.apply(FaultCommand("read-only", 1))
            assert zk.get_children(f"{root}/available/readonly") == [bookie]
            assert bookie not in zk.get_children(f"{root}/available")
            served.apply(FaultCommand("writable", 1))
            assert zk.get_children(f"{root}/available/readonly") == []
            assert bookie in zk.get_children(f"{root}/available")
    finally:
        zk.stop()
        zk.close()
