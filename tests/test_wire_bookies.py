"""Reference bookies on TCP: BookKeeper's v3 frames over loopback sockets, and their registration in ZooKeeper.

The client here is a plain socket that writes frames by hand, so that a test
can send what no BookKeeper client sends (a broken frame, an operation the
bookie does not serve). The unmodified Java client is in
tests/test_wire_bookkeeper_client.py.
"""

from __future__ import annotations

import json
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from ledgerspec.reference.bookie import encode_entry, encode_lac
from ledgerspec.reference.metadata.protos import DataFormats_pb2 as formats
from ledgerspec.reference.wire import (
    AUTH_DISABLED_PLUGIN,
    MAX_FRAME_BYTES,
    BookieRegistration,
    RegistrationError,
    ServedBookies,
    decode_response,
    frame,
    v2,
)
from ledgerspec.reference.wire.codec import LENGTH
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb

KEY = b"ledgerspec"
LEDGER = 7


def _entry(entry_id: int, lac: int) -> bytes:
    payload = f"entry {entry_id}".encode()
    return encode_entry(LEDGER, entry_id, lac, 8 * (entry_id + 1), payload)


class Client:
    """One connection to a bookie, a frame written and read at a time."""

    def __init__(self, bookie_id: str) -> None:
        host, port = bookie_id.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.txn = 0

    def call(
        self,
        operation: pb.OperationType,
        version: pb.ProtocolVersion = pb.VERSION_THREE,
        **body: Any,
    ) -> pb.Response:
        self.txn += 1
        request = pb.Request(header=pb.BKPacketHeader(version=version, operation=operation, txnId=self.txn), **body)
        self.sock.sendall(frame(request))
        response = self.receive()
        assert response is not None, f"the bookie closed the connection instead of answering {request}"
        assert response.header.txnId == self.txn
        return response

    def receive(self) -> pb.Response | None:
        prefix = self._exactly(LENGTH.size)
        if prefix is None:
            return None
        (length,) = LENGTH.unpack(prefix)
        payload = self._exactly(length)
        assert payload is not None
        return decode_response(payload)

    def _exactly(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                assert not data, f"the bookie closed the connection inside a frame ({len(data)} of {n} bytes)"
                return None
            data += chunk
        return data

    def add(self, entry_id: int, lac: int, *, recovery: bool = False, key: bytes = KEY) -> pb.Response:
        add = pb.AddRequest(ledgerId=LEDGER, entryId=entry_id, masterKey=key, body=_entry(entry_id, lac))
        if recovery:
            add.flag = pb.AddRequest.RECOVERY_ADD
        return self.call(pb.ADD_ENTRY, addRequest=add)

    def read(self, entry_id: int, *, fence: bool = False) -> pb.Response:
        read = pb.ReadRequest(ledgerId=LEDGER, entryId=entry_id)
        if fence:
            read.flag, read.masterKey = pb.ReadRequest.FENCE_LEDGER, KEY
        return self.call(pb.READ_ENTRY, readRequest=read)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def bookies(tmp_path: Path) -> Iterator[ServedBookies]:
    with ServedBookies(tmp_path / "bookies", 1) as served:
        yield served


@pytest.fixture
def client(bookies: ServedBookies) -> Iterator[Client]:
    c = Client(bookies.bookie_ids[0])
    yield c
    c.close()


def test_entries_added_over_tcp_are_read_back_with_the_lac_the_bookie_knows(client: Client) -> None:
    assert [client.add(e, e - 1).status for e in range(3)] == [pb.EOK] * 3
    read = client.read(1)
    assert read.status == pb.EOK and read.readResponse.status == pb.EOK
    assert read.readResponse.body == _entry(1, 0) and read.readResponse.maxLAC == 1
    last = client.read(-1)  # entry -1: the last entry, whose header carries the LAC
    assert last.readResponse.body == _entry(2, 1)
    assert client.read(5).readResponse.status == pb.ENOENTRY
    missing = client.call(pb.READ_ENTRY, readRequest=pb.ReadRequest(ledgerId=LEDGER + 1, entryId=0))
    assert missing.status == missing.readResponse.status == pb.ENOLEDGER


def test_a_fencing_read_refuses_later_adds_but_not_recovery_adds(client: Client) -> None:
    client.add(0, -1)
    fenced = client.read(-1, fence=True)
    assert fenced.status == pb.EOK and fenced.readResponse.body == _entry(0, -1)
    assert not fenced.readResponse.HasField("maxLAC")  # sendFenceResponse sends the body alone
    assert client.add(1, 0).addResponse.status == pb.EFENCED
    assert client.add(1, 0, recovery=True).addResponse.status == pb.EOK
    assert client.add(2, 0, key=b"another").status == pb.EUA


def test_a_restarted_bookie_serves_what_its_journal_holds(tmp_path: Path) -> None:
    with ServedBookies(tmp_path, 1) as served:
        first = Client(served.bookie_ids[0])
        first.add(0, -1)
        first.call(
            pb.WRITE_LAC,
            writeLacRequest=pb.WriteLacRequest(ledgerId=LEDGER, lac=0, masterKey=KEY, body=encode_lac(LEDGER, 0)),
        )
        first.close()
    with ServedBookies(tmp_path, 1) as served:
        again = Client(served.bookie_ids[0])
        lac = again.call(pb.READ_LAC, readLacRequest=pb.ReadLacRequest(ledgerId=LEDGER))
        assert lac.status == pb.EOK
        assert lac.readLacResponse.lacBody == encode_lac(LEDGER, 0)
        assert lac.readLacResponse.lastEntryBody == _entry(0, -1)
        again.close()


def _long_poll(client: Client, previous_lac: int, timeout_ms: int) -> int:
    """Send a long-poll read (``ReadLastConfirmedAndEntryOp``'s: entry -1, ``ENTRY_PIGGYBACK``); its txnId."""
    client.txn += 1
    read = pb.ReadRequest(
        ledgerId=LEDGER, entryId=-1, flag=pb.ReadRequest.ENTRY_PIGGYBACK, previousLAC=previous_lac, timeOut=timeout_ms
    )
    header = pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=client.txn)
    client.sock.sendall(frame(pb.Request(header=header, readRequest=read)))
    return client.txn


def test_a_long_poll_read_waits_for_the_lac_while_the_connection_serves_the_adds_that_move_it(
    client: Client,
) -> None:
    """LongPollReadEntryProcessorV3: answered once the LAC passes previousLAC, with that LAC and the entry after
    previousLAC; the adds sent after it on the same connection are served meanwhile."""
    assert [client.add(e, e - 1).status for e in range(2)] == [pb.EOK] * 2  # the bookie's LAC is 0
    poll = _long_poll(client, 0, 10_000)
    assert client.add(2, 1).addResponse.status == pb.EOK  # answered before the poll: LAC 1 now
    answered = client.receive()
    assert answered is not None and answered.header.txnId == poll
    read = answered.readResponse
    assert answered.status == read.status == pb.EOK
    assert (read.maxLAC, read.entryId, read.body) == (1, 1, _entry(1, 0))
    # the LAC past previousLAC already: answered at once; a wait that times out: the LAC as it is, no entry
    assert _long_poll(client, -1, 10_000) and client.receive().readResponse.body == _entry(0, -1)  # type: ignore[union-attr]
    started = time.monotonic()
    _long_poll(client, 1, 200)
    timed_out = client.receive()
    assert timed_out is not None and time.monotonic() - started >= 0.2
    assert timed_out.readResponse.maxLAC == 1 and not timed_out.readResponse.HasField("body")


def test_the_list_of_a_ledgers_entries_is_in_bookkeepers_availability_format(client: Client) -> None:
    """GET_LIST_OF_ENTRIES_OF_LEDGER (GetListOfEntriesOfLedgerProcessorV3): a 64-byte header (version 0, the number
    of groups), then each run of consecutive entries as a group of its own, as BookKeeper 4.17.2 writes it."""
    for entry in (0, 1, 2, 5, 7, 8):
        assert client.add(entry, -1).status == pb.EOK

    def listed(ledger: int) -> pb.GetListOfEntriesOfLedgerResponse:
        request = pb.GetListOfEntriesOfLedgerRequest(ledgerId=ledger)
        response = client.call(pb.GET_LIST_OF_ENTRIES_OF_LEDGER, getListOfEntriesOfLedgerRequest=request)
        assert response.status == response.getListOfEntriesOfLedgerResponse.status
        return response.getListOfEntriesOfLedgerResponse

    found = listed(LEDGER)
    assert found.status == pb.EOK and found.ledgerId == LEDGER
    data = found.availabilityOfEntriesOfLedger
    assert struct.unpack_from(">ii", data) == (0, 3) and data[8:64] == bytes(56) and len(data) == 64 + 3 * 24
    groups = [struct.unpack_from(">qqii", data, 64 + 24 * i) for i in range(3)]
    assert groups == [(0, 0, 3, 0), (5, 5, 1, 0), (7, 7, 2, 0)]
    missing = listed(LEDGER + 1)
    assert missing.status == pb.ENOLEDGER and not missing.HasField("availabilityOfEntriesOfLedger")


def test_operations_not_served_get_bookkeepers_own_status_on_a_connection_that_stays_open(client: Client) -> None:
    unserved = client.call(pb.RANGE_READ_ENTRY, readRequest=pb.ReadRequest(ledgerId=LEDGER, entryId=0))
    assert unserved.status == pb.EBADREQ and unserved.header.operation == pb.RANGE_READ_ENTRY
    assert client.call(pb.START_TLS, startTLSRequest=pb.StartTLSRequest()).status == pb.EBADREQ
    assert client.call(pb.ADD_ENTRY).status == pb.EBADREQ  # no addRequest
    add = pb.AddRequest(ledgerId=LEDGER, entryId=0, masterKey=KEY, body=_entry(0, -1))
    old = client.call(pb.ADD_ENTRY, version=pb.VERSION_TWO, addRequest=add)
    assert old.status == old.addResponse.status == pb.EBADVERSION
    auth = client.call(pb.AUTH, authRequest=pb.AuthMessage(authPluginName="sasl", payload=b"x"))
    assert auth.status == pb.EOK and auth.authResponse.authPluginName == AUTH_DISABLED_PLUGIN
    info = client.call(pb.GET_BOOKIE_INFO, getBookieInfoRequest=pb.GetBookieInfoRequest(requested=3))
    assert (
        info.status == pb.EOK
        and 0 < info.getBookieInfoResponse.freeDiskSpace <= info.getBookieInfoResponse.totalDiskCapacity
    )
    assert client.add(0, -1).status == pb.EOK


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (struct.pack(">i", -5), "is negative"),
        (struct.pack(">i", MAX_FRAME_BYTES + 1), "over the limit"),
        (struct.pack(">i", 4) + b"\x02\x09\x00\x00", "v2 op code 9 is not one a bookie decodes"),
        (struct.pack(">i", 12) + b"\x02\x07\x00\x00" + bytes(8), "a v2 request of op 7 is cut short"),  # a batch read
        (struct.pack(">i", 4) + b"\x00\x00\x00\x03", "are not a v2 AuthMessage"),  # a v2 AUTH, its message empty
        # A header whose operation is 99, a value OperationType does not have: proto2 leaves the field unset.
        (struct.pack(">i", 8) + bytes([0x0A, 0x06, 0x08, 3, 0x10, 99, 0x18, 1]), "header.operation missing"),
        (struct.pack(">i", 100) + b"\x0a", "closed after 1 of the frame's 100 bytes"),
    ],
)
def test_a_malformed_frame_closes_its_connection_only_with_the_reason_logged(
    bookies: ServedBookies, client: Client, raw: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    bad = Client(bookies.bookie_ids[0])
    with caplog.at_level("WARNING", logger="ledgerspec.wire"):
        bad.sock.sendall(raw)
        bad.sock.shutdown(socket.SHUT_WR)
        assert bad.receive() is None  # closed without an answer
    bad.close()
    assert any(reason in record.getMessage() for record in caplog.records), caplog.text
    assert bookies.bookies[0].closed_for_bad_frames == 1
    assert client.add(0, -1).status == pb.EOK  # the connection opened before is served still
    fresh = Client(bookies.bookie_ids[0])
    assert fresh.read(0).readResponse.body == _entry(0, -1)
    fresh.close()


@pytest.fixture
def zookeeper(tmp_path: Path, zookeeper_server: object) -> Iterator[tuple[str, KazooClient, str]]:
    """The test ZooKeeper's address, a client of it, and a ledgers root of the test's own, not yet formatted."""
    hosts: str = zookeeper_server.hosts  # type: ignore[attr-defined]
    zk = KazooClient(hosts=hosts)
    zk.start(timeout=30)
    yield hosts, zk, f"/wire-{tmp_path.name}"
    zk.stop()
    zk.close()


@pytest.mark.zookeeper
def test_bookies_register_as_bookkeepers_bookie_does_and_leave_when_stopped(
    tmp_path: Path, zookeeper: tuple[str, KazooClient, str]
) -> None:
    hosts, zk, root = zookeeper
    with pytest.raises(RegistrationError, match=f"{root}/available does not exist"):
        registration = BookieRegistration(hosts, root)
        try:
            registration.register("127.0.0.1:1", "127.0.0.1", 1, "/j", ("/l",))
        finally:
            registration.close()
    zk.ensure_path(f"{root}/available/readonly")
    zk.create(f"{root}/INSTANCEID", b"instance-1")
    with ServedBookies(tmp_path, 2, zookeeper=hosts, ledgers_root=root) as served:
        assert sorted(zk.get_children(f"{root}/available")) == sorted([*served.bookie_ids, "readonly"])
        data, stat = zk.get(f"{root}/available/{served.bookie_ids[0]}")
        assert stat.ephemeralOwner != 0
        info = formats.BookieServiceInfoFormat.FromString(data)
        (endpoint,) = info.endpoints
        assert (endpoint.protocol, endpoint.host, endpoint.port) == (
            "bookie-rpc",
            "127.0.0.1",
            served.bookies[0].port,
        )
        cookie = zk.get(f"{root}/cookies/{served.bookie_ids[0]}")[0].decode()
        assert cookie.startswith("5\n") and 'instanceId: "instance-1"' in cookie
        assert f'bookieHost: "{served.bookie_ids[0]}"' in cookie
    assert zk.get_children(f"{root}/available") == ["readonly"]


@pytest.mark.zookeeper
def test_the_serve_command_registers_its_bookies_and_stops_them_cleanly_on_sigterm(
    tmp_path: Path, zookeeper: tuple[str, KazooClient, str]
) -> None:
    hosts, zk, root = zookeeper
    command = [sys.executable, "-m", "ledgerspec.tools.cli.main", "serve", "bookies", "-n", "2"]
    command += ["--dir", str(tmp_path), "--zookeeper", hosts, "--ledgers-root", root, "--json"]
    command += ["--trace", str(tmp_path / "run" / "run.ndjson")]
    unformatted = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert unformatted.returncode == 2 and f"{root}/available does not exist" in unformatted.stderr
    assert not (tmp_path / "run").exists()  # no request served, no trace
    zk.ensure_path(f"{root}/available/readonly")
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as process:
        assert process.stdout is not None
        ready = json.loads(process.stdout.readline())
        ids = [b["id"] for b in ready["bookies"]]
        assert sorted(zk.get_children(f"{root}/available")) == sorted([*ids, "readonly"])
        client = Client(ids[1])
        assert client.add(0, -1).status == pb.EOK
        client.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0
    assert zk.get_children(f"{root}/available") == ["readonly"]
    # What bookie 2 served, as a trace: ledger LEDGER has no metadata here, so the served bookies' numbers stand.
    (line,) = [json.loads(text) for text in (tmp_path / "run" / "run.ndjson").read_text().splitlines()]
    assert (line["trace"], line["process"], line["type"]) == (f"run-L{LEDGER}", "bookie-2", "BookieReceivesAdd")
    assert json.loads((tmp_path / "run" / "manifest.json").read_text())["mode"] == "bookies"
    with ServedBookies(tmp_path, 2) as again:  # the same directories: bookie-2 replays the entry
        client = Client(again.bookie_ids[1])
        assert client.read(0).readResponse.body == _entry(0, -1)
        client.close()


def _v2_call(sock: socket.socket, op: int, flags: int, body: bytes) -> tuple[int, int, int, int, bytes]:
    """One v2 request; the answer's op, error code, ledger, entry and entry bytes."""
    payload = v2.encode_header(2, op, flags) + body
    sock.sendall(LENGTH.pack(len(payload)) + payload)
    (length,) = LENGTH.unpack(sock.recv(4))
    data = b""
    while len(data) < length:
        data += sock.recv(length - len(data))
    header, code, ledger, entry = struct.unpack_from(">iiqq", data)
    return (header >> 16) & 0xFF, code, ledger, entry, data[24:]


def test_a_connection_whose_first_frame_is_v2_is_served_in_v2(client: Client) -> None:
    key = KEY.ljust(v2.MASTER_KEY_LENGTH, b"\0")
    sock = client.sock
    assert _v2_call(sock, v2.ADDENTRY, 0, key + _entry(0, -1))[:4] == (v2.ADDENTRY, v2.EOK, LEDGER, 0)
    ids = struct.pack(">qq", LEDGER, 0)
    assert _v2_call(sock, v2.READENTRY, 0, ids) == (v2.READENTRY, v2.EOK, LEDGER, 0, _entry(0, -1))
    assert _v2_call(sock, v2.READENTRY, 0, struct.pack(">qq", LEDGER, 3))[1] == v2.ENOENTRY
    fenced = _v2_call(sock, v2.READENTRY, v2.FLAG_DO_FENCING, struct.pack(">qq", LEDGER, -1) + key)
    assert fenced[1] == v2.EOK and fenced[4] == _entry(0, -1)
    assert _v2_call(sock, v2.ADDENTRY, 0, key + _entry(1, 0))[1] == v2.EFENCED
    assert _v2_call(sock, v2.ADDENTRY, v2.FLAG_RECOVERY_ADD, key + _entry(1, 0))[1] == v2.EOK
    # Batch reads (BatchedReadEntryProcessor): the entries from the first on, within the count and the size.
    both = [_entry(0, -1), _entry(1, 0)]
    assert _v2_batch_read(sock, 0, 10, 1 << 20) == (v2.EOK, 7, both)
    assert _v2_batch_read(sock, 0, 0, 1 << 20) == (v2.EOK, 7, both)  # no count: until an entry is missing
    assert _v2_batch_read(sock, 0, 1, 1 << 20) == (v2.EOK, 7, both[:1])
    assert _v2_batch_read(sock, 1, 10, 1 << 20) == (v2.EOK, 7, both[1:])
    fits = 36 + sum(len(e) + 4 for e in both)  # readData counts 36 bytes before the entries, 4 with each
    assert _v2_batch_read(sock, 0, 10, fits) == (v2.EOK, 7, both)
    assert _v2_batch_read(sock, 0, 10, fits - 1) == (v2.EOK, 7, both[:1])
    assert _v2_batch_read(sock, 0, 10, 1) == (v2.EOK, 7, both[:1])  # the first entry is always sent
    assert _v2_batch_read(sock, 2, 10, 1 << 20) == (v2.ENOENTRY, 7, [])
    assert _v2_batch_read(sock, 0, 10, 1 << 20, ledger=LEDGER + 100) == (v2.ENOLEDGER, 7, [])


def _v2_batch_read(
    sock: socket.socket, first: int, count: int, size: int, ledger: int = LEDGER
) -> tuple[int, int, list[bytes]]:
    """A v2 batch read (request id 7); the answer's error code, request id and entries."""
    op, code, answered_ledger, answered_entry, rest = _v2_call(
        sock, v2.BATCH_READ_ENTRY, 0, struct.pack(">qqqiq", ledger, first, 7, count, size)
    )
    assert (op, answered_ledger, answered_entry) == (v2.BATCH_READ_ENTRY, ledger, first)
    (request_id,) = struct.unpack_from(">q", rest)
    entries, at = [], 8
    while at < len(rest):
        (length,) = struct.unpack_from(">i", rest, at)
        entries.append(rest[at + 4 : at + 4 + length])
        at += 4 + length
    return code, request_id, entries
