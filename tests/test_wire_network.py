"""The reference ledger client on bookies it reaches over TCP with BookKeeper's v3 or v2 protocol
(``reference/wire/network.py``): the messages both ways, bookies that fail in the ways a network shows, and the
scenarios of ``ledgerspec record reference-client`` on reference bookies and on BookKeeper's own."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
from ledgerspec.conformance.adapters.cluster import free_port
from ledgerspec.conformance.checker import check_trace
from ledgerspec.conformance.events import events_from_json
from ledgerspec.reference.bookie.entry import encode_entry
from ledgerspec.reference.ledger.client import BookKeeperClient, ClientConfig, OrderedPlacement
from ledgerspec.reference.ledger.errors import LedgerFencedError
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.metadata.embedded import EmbeddedMetadataStore
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore
from ledgerspec.reference.metadata.store import MetadataStore
from ledgerspec.reference.wire import ServedBookies, WireService, decode_request, frame, v2
from ledgerspec.reference.wire.codec import FrameError
from ledgerspec.reference.wire.network import PROTOCOLS, WireNetwork, to_reply, to_reply_v2, to_v3
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.recording.reference_client import (
    CLIENT_SCENARIOS,
    Run,
    real_bookies,
    record_reference_client,
    reference_bookies,
)

KEY = b"k" * 20


def _request(kind: RequestKind, entry: int = -1, **fields: object) -> Request:
    return Request(kind, 0, 1, "bookie", 7, entry, master_key=KEY, **fields)  # type: ignore[arg-type]


# -- the messages --------------------------------------------------------------------------------
def test_each_request_goes_out_as_the_v3_message_a_bookie_serves(tmp_path: Path) -> None:
    """Every kind of request, encoded, is served by a reference bookie's v3 service, and its reply read back."""
    with ServedBookies(tmp_path, 1) as served:
        service: WireService = served.bookies[0].service
        entry = encode_entry(7, 0, -1, 3, b"abc")
        add = _request(RequestKind.ADD, 0, data=entry)
        added = to_reply(add, service.respond(to_v3(add, 1)))
        assert added is not None and added.code is ReplyCode.OK
        fence = _request(RequestKind.FENCE, fence=True)
        fenced = to_reply(fence, service.respond(to_v3(fence, 2)))
        assert fenced is not None and (fenced.code, fenced.lac) == (ReplyCode.OK, -1)
        late = _request(RequestKind.ADD, 1, data=encode_entry(7, 1, 0, 6, b"def"))
        refused = to_reply(late, service.respond(to_v3(late, 3)))
        assert refused is not None and refused.code is ReplyCode.FENCED  # a plain add to a fenced ledger
        read = _request(RequestKind.RECOVERY_READ, 0, fence=True)
        found = to_reply(read, service.respond(to_v3(read, 4)))
        assert found is not None and found.data == entry
        missing = _request(RequestKind.RECOVERY_READ, 1, fence=True)
        none = to_reply(missing, service.respond(to_v3(missing, 5)))
        assert none is not None and none.code is ReplyCode.NO_SUCH_ENTRY
        lac = _request(RequestKind.READ_LAC)
        read_lac = to_reply(lac, service.respond(to_v3(lac, 6)))
        assert read_lac is not None and read_lac.lac == -1  # entry 0 carries LAC -1


def test_each_request_goes_out_as_the_v2_message_a_bookie_serves(tmp_path: Path) -> None:
    """The same requests on v2, served by a reference bookie's v2 code: a fence reads entry -1, whose header tells
    the LAC; a recovery add passes the fence; the explicit LAC has no v2 message."""

    def served(request: Request) -> Reply:
        reply = to_reply_v2(request, v2.decode_response(v2.respond(service, v2.decode(v2.encode_request(request)))))
        assert reply is not None
        return reply

    with ServedBookies(tmp_path, 1) as bookies:
        service: WireService = bookies.bookies[0].service
        first, second, third = (encode_entry(7, e, e - 1, 3 * (e + 1), b"abc") for e in range(3))
        assert served(_request(RequestKind.ADD, 0, data=first)).code is ReplyCode.OK
        assert served(_request(RequestKind.ADD, 1, data=second)).code is ReplyCode.OK
        assert served(_request(RequestKind.READ_ENTRY, 1)).data == second
        fenced = served(_request(RequestKind.FENCE, fence=True))
        assert (fenced.code, fenced.lac) == (ReplyCode.OK, 0)
        assert served(_request(RequestKind.ADD, 2, data=third)).code is ReplyCode.FENCED
        assert served(_request(RequestKind.ADD, 2, data=third, recovery=True)).code is ReplyCode.OK
        assert served(_request(RequestKind.RECOVERY_READ, 2, fence=True)).data == third
        assert served(_request(RequestKind.RECOVERY_READ, 3, fence=True)).code is ReplyCode.NO_SUCH_ENTRY
    for kind in (RequestKind.WRITE_LAC, RequestKind.READ_LAC):  # sent as v3 (_V3_ENFORCED)
        with pytest.raises(ValueError, match=f"v2 has no message for {kind.name}"):
            v2.encode_request(_request(kind, lac=0, data=b""))


def test_a_v2_response_that_answers_no_add_or_read_is_bad_and_a_failure_code_is_no_reply() -> None:
    ids = (7).to_bytes(8, "big") + (0).to_bytes(8, "big")
    with pytest.raises(FrameError, match="shorter than its 24 bytes"):
        v2.decode_response(v2.encode_header(2, v2.ADDENTRY) + b"\x00")
    with pytest.raises(FrameError, match="a v2 response of op 3, which answers no add or read"):
        v2.decode_response(v2.encode_header(2, v2.AUTH) + (0).to_bytes(4, "big") + ids)
    add = _request(RequestKind.ADD, 0)
    for code in (101, 105, 106):  # EIO, EREADONLY, ETOOMANYREQUESTS
        answer = v2.decode_response(v2.encode_header(2, v2.ADDENTRY) + code.to_bytes(4, "big") + ids)
        assert to_reply_v2(add, answer) is None
    fence = _request(RequestKind.FENCE, fence=True)
    nothing = v2.decode_response(v2.encode_header(2, v2.READENTRY) + v2.ENOLEDGER.to_bytes(4, "big") + ids)
    reply = to_reply_v2(fence, nothing)
    assert reply is not None and (reply.code, reply.lac) == (ReplyCode.OK, -1)
    with pytest.raises(ValueError, match="no protocol 'v1'"):
        WireNetwork(list, lambda b: 1, protocol="v1")


def test_a_fence_of_a_ledger_with_no_entry_is_an_answer_and_a_failure_status_is_none() -> None:
    """ReadLastConfirmedOp takes ENOENTRY and ENOLEDGER as a valid answer; a status the client has no reply for
    (EIO, EREADONLY) is a failure, which it treats as a bookie that did not answer."""
    fence = _request(RequestKind.FENCE, fence=True)
    for status in (pb.ENOENTRY, pb.ENOLEDGER):
        reply = to_reply(fence, pb.Response(status=status, header=pb.BKPacketHeader(version=3, operation=1, txnId=1)))
        assert reply is not None and (reply.code, reply.lac) == (ReplyCode.OK, -1)
    add = _request(RequestKind.ADD, 0)
    header = pb.BKPacketHeader(version=3, operation=2, txnId=1)
    for status in (pb.EIO, pb.EREADONLY, pb.ETOOMANYREQUESTS):
        assert to_reply(add, pb.Response(status=status, header=header)) is None
    assert to_reply(add, pb.Response(status=pb.EFENCED, header=header)) is not None


# -- bookies that fail -----------------------------------------------------------------------------
@pytest.fixture
def garbage_bookie() -> Iterator[str]:
    """A "bookie" that answers its first connection's request with bytes that are no v3 response, and takes no other
    connection: the client's next write to it fails at once."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            server.close()  # before the garbage: the client's reconnection after it is refused
            with conn, contextlib.suppress(OSError):
                conn.settimeout(5)
                conn.recv(1 << 16)
                conn.sendall(b"\x00\x00\x00\x05hello")  # a frame of 5 bytes, no protobuf Response
                while not stop.is_set() and conn.recv(1 << 16):
                    pass  # read on until the client closes
            return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("broken", ["garbage", "unreachable"])
def test_a_bookie_that_answers_garbage_or_cannot_be_reached_is_replaced(
    broken: str, garbage_bookie: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = garbage_bookie if broken == "garbage" else f"127.0.0.1:{free_port()}"
    with ServedBookies(tmp_path, 3) as served:
        ids = [bad, *served.bookie_ids]
        network = WireNetwork(lambda: ids, lambda b: ids.index(b) + 1)
        ledgers = LedgerMetadataStore(EmbeddedMetadataStore())
        writer = network.attach(
            BookKeeperClient(0, ledgers, network, config=ClientConfig(explicit_lac=False), placement=OrderedPlacement())
        )
        with caplog.at_level(logging.INFO, logger="ledgerspec.wire.client"):
            handle = writer.create_ledger(3, 3, 2)
            adds = [handle.add_entry(f"entry {i}".encode()) for i in range(3)]

            def ensemble() -> tuple[str, ...]:
                return ledgers.read(handle.ledger_id).metadata.segments[-1].ensemble

            network.run_until(lambda: all(f.done() for f in adds), within=20)
            # The two good bookies may acknowledge all three (Qa = 2) before the broken one fails: a failure after
            # the add completed replaces no bookie (4.17.2 delays it to the next add, LedgerHandle.notifyWriteFailed);
            # the next add's write to it fails at once and does.
            adds.append(handle.add_entry(b"entry 3"))
            network.run_until(lambda: all(f.done() for f in adds) and bad not in ensemble(), within=20)
        assert [f.result() for f in adds] == [0, 1, 2, 3]
        assert served.bookie_ids[2] in ensemble()  # the spare took its place
        assert bad in network.unreachable and bad not in network.writable_bookies()
        why = "a response that is no v3 message" if broken == "garbage" else "cannot be reached"
        assert any(why in r.getMessage() and bad in r.getMessage() for r in caplog.records)
        network.close()


def test_a_request_unanswered_in_time_is_given_up(tmp_path: Path) -> None:
    """A bookie that takes the connection and never answers: after the timeout the client is told, and the late
    reply would be dropped."""
    silent = socket.create_server(("127.0.0.1", 0))
    try:
        with ServedBookies(tmp_path, 2) as served:
            ids = [f"127.0.0.1:{silent.getsockname()[1]}", *served.bookie_ids]
            network = WireNetwork(lambda: ids, lambda b: ids.index(b) + 1, timeout=0.5)
            ledgers = LedgerMetadataStore(EmbeddedMetadataStore())
            writer = network.attach(
                BookKeeperClient(
                    0, ledgers, network, config=ClientConfig(explicit_lac=False), placement=OrderedPlacement()
                )
            )
            handle = writer.create_ledger(2, 2, 2)
            add = handle.add_entry(b"entry 0")
            network.run_until(add.done, within=20)
            assert add.result() == 0 and network.timeouts == 1
            assert ids[0] not in ledgers.read(handle.ledger_id).metadata.segments[-1].ensemble
            network.close()
    finally:
        silent.close()


class _ReadsOnAfterEachReply:
    """A client of the network alone: for each reply it takes it reads again from ``then``; it counts what it is
    told no reply can come for."""

    client_id = 0

    def __init__(self, network: WireNetwork, then: str) -> None:
        self.network, self.then = network, then
        self.replies: list[Reply] = []
        self.given_up: list[Request] = []

    def awaits(self, reply: Reply) -> bool:
        return True

    def deliver(self, reply: Reply) -> None:
        self.replies.append(reply)
        self.network.send(attrs.evolve(reply.request, bookie=self.then))

    def timeout(self, request: Request) -> bool:
        self.given_up.append(request)
        return False

    def local_steps(self) -> list[object]:
        return []


def test_a_connection_lost_while_an_earlier_reply_of_the_same_poll_is_handed_is_given_up_once() -> None:
    """Bookie A's answer and bookie B's reset arrive before one poll. Handing A's answer makes the client send to
    B, which fails: B's connection is lost there, and the poll then passes over B's readiness instead of reading a
    closed socket (a ``ValueError`` from the selector, which ended a recording of ``recover-with-bookie-down``
    once when a bookie was killed during recovery)."""
    answering, resetting = socket.create_server(("127.0.0.1", 0)), socket.create_server(("127.0.0.1", 0))
    a, b = (f"127.0.0.1:{s.getsockname()[1]}" for s in (answering, resetting))
    go = threading.Event()

    def answer() -> None:
        conn, _ = answering.accept()
        with conn:
            data = conn.recv(1 << 16)
            request = decode_request(data[4 : 4 + int.from_bytes(data[:4], "big")])
            response = pb.Response(header=request.header, status=pb.EOK)
            response.readResponse.status = pb.EOK
            response.readResponse.ledgerId, response.readResponse.entryId = 7, 0
            conn.sendall(frame(response))
            go.wait(5)

    def reset() -> None:
        conn, _ = resetting.accept()
        conn.recv(1 << 16)
        go.wait(5)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, (1).to_bytes(4, "little") + (0).to_bytes(4, "little"))
        conn.close()  # a reset: the client's next send on it fails
        resetting.close()  # and it cannot connect again

    threads = [threading.Thread(target=f, daemon=True) for f in (answer, reset)]
    for thread in threads:
        thread.start()
    network = WireNetwork(lambda: [a, b], [a, b].index)
    client = _ReadsOnAfterEachReply(network, b)
    network.attach(client)  # type: ignore[arg-type]
    try:
        network.send(attrs.evolve(_request(RequestKind.READ_ENTRY, 0), bookie=b))
        network.send(attrs.evolve(_request(RequestKind.READ_ENTRY, 0), bookie=a))
        time.sleep(0.3)  # A's answer is in
        go.set()
        time.sleep(0.3)  # B's reset is in too
        network.run_until(lambda: len(client.given_up) == 2, within=5)
    finally:
        network.close()
        answering.close()
    assert [r.request.bookie for r in client.replies] == [a]
    assert sorted(r.bookie for r in client.given_up) == [b, b] and b in network.unreachable


class _ScriptedBookie:
    """A bookie over TCP, on one connection, that stores adds and serves reads; subclasses choose the order of
    its answers (:meth:`_answer`)."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.bookie_id = f"127.0.0.1:{self.server.getsockname()[1]}"
        self.entries: dict[int, bytes] = {}
        self.fenced = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        with conn, contextlib.suppress(OSError):
            buffer = b""
            while data := conn.recv(1 << 16):
                buffer += data
                while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
                    length = int.from_bytes(buffer[:4], "big")
                    request = decode_request(buffer[4 : 4 + length])
                    buffer = buffer[4 + length :]
                    for response in self._answer(request):
                        conn.sendall(frame(response))

    def _answer(self, request: pb.Request) -> list[pb.Response]:
        raise NotImplementedError

    def _add(self, request: pb.Request) -> tuple[pb.Response, bool]:
        """The answer to an add, and whether it is a plain one (proto2: an unset flag reads as its first value)."""
        add = request.addRequest
        response = pb.Response(header=request.header, status=pb.EOK)
        response.addResponse.ledgerId, response.addResponse.entryId = add.ledgerId, add.entryId
        plain = not add.HasField("flag")
        if self.fenced and plain:
            response.status = response.addResponse.status = pb.EFENCED
        else:
            self.entries[add.entryId] = add.body
            response.addResponse.status = pb.EOK
        return response, plain

    def _read(self, request: pb.Request) -> tuple[pb.Response, bool]:
        """The answer to a read, and whether this read fenced the bookie."""
        read = request.readRequest
        response = pb.Response(header=request.header, status=pb.EOK)
        response.readResponse.ledgerId, response.readResponse.entryId = read.ledgerId, read.entryId
        entry = max(self.entries) if read.entryId == -1 and self.entries else read.entryId
        if entry in self.entries:
            response.readResponse.body = self.entries[entry]
        else:
            response.status = pb.ENOENTRY
        response.readResponse.status = response.status
        fences = read.HasField("flag") and read.flag == pb.ReadRequest.FENCE_LEDGER and not self.fenced
        self.fenced = self.fenced or fences
        return response, fences

    def close(self) -> None:
        self.server.close()


class LateFenceBookie(_ScriptedBookie):
    """Answers a fencing read of the LAC only after it has refused the next plain add as fenced, as BookKeeper's
    bookie may (adds and reads on different thread pools, the fence's answer after its journal write)."""

    late: pb.Response | None = None  # the fencing read's answer, held until an add is refused

    def _answer(self, request: pb.Request) -> list[pb.Response]:
        if request.header.operation == pb.ADD_ENTRY:
            response, _ = self._add(request)
            if response.status != pb.EFENCED:
                return [response]
            late, self.late = self.late, None
            return [response, *([late] if late is not None else [])]  # the refusal first, then the fence
        response, fences = self._read(request)
        if fences and request.readRequest.entryId == -1:
            self.late = response
            return []
        return [response]


class LateAckBookie(_ScriptedBookie):
    """Stores each plain add at once but sends its acknowledgement only after the answer to the next fencing read,
    as BookKeeper's bookie on v2 may: it buffers add acknowledgements until the journal's sync batch is processed,
    and a fence journaled in that batch is answered at once (``BookieRequestHandler.prepareSendResponseV2``,
    ``ReadEntryProcessor.handleReadResultForFenceRead``, 4.17.2)."""

    def __init__(self) -> None:
        self.acks: list[pb.Response] = []  # acknowledgements not sent yet
        super().__init__()

    def _answer(self, request: pb.Request) -> list[pb.Response]:
        if request.header.operation == pb.ADD_ENTRY:
            response, plain = self._add(request)
            if plain and response.status == pb.EOK:
                self.acks.append(response)
                return []
            return [response]
        response, fences = self._read(request)
        if not fences:
            return [response]
        acks, self.acks = self.acks, []
        return [response, *acks]  # the fence's answer first, then the adds it journaled after


@attrs.define
class _OneBookie:
    bookie: _ScriptedBookie
    store: EmbeddedMetadataStore = attrs.field(factory=EmbeddedMetadataStore)

    @property
    def ids(self) -> list[str]:
        return [self.bookie.bookie_id]

    def crash(self, n: int) -> None:
        raise AssertionError("no crash here")

    def restart(self, n: int) -> None:
        raise AssertionError("no restart here")

    def metadata(self) -> MetadataStore:
        return self.store.open_session()

    def read_back(self, ledger_id: int, last: int) -> list[str] | None:
        return None


def _conforming_types(run: Run) -> list[str]:
    """The actions of the run's client-mode trace, which must conform to the ledger spec."""
    assert run.recorder is not None
    verdict = check_trace(events_from_json(run.recorder.lines), LedgerSpec(**run.constants), "client")
    assert verdict.status == "conforms", verdict.reason
    return [line["type"] for line in run.recorder.lines]


def test_a_refusal_as_fenced_waits_for_the_fencing_read_that_fenced_the_bookie() -> None:
    """The bookie refuses the writer's add as fenced before it answers the recovery's fencing read: the network
    hands the refusal to the writer after the fence's answer, and the client-mode trace conforms."""
    fake = LateFenceBookie()
    run = Run(_OneBookie(fake), "late-fence")
    try:
        handle = run.create(1, 1, 1, entries=2, recoverers=1)
        run.wait(*run.add(handle, 1))
        recovery = run.start_recovery(1, handle.ledger_id)
        run.network.poll(0.2)  # the fencing read is sent; its answer is held by the bookie
        assert not recovery.future.done() and fake.fenced
        late = run.add(handle, 1)
        run.wait(recovery.future, *late)
        assert run.network.held_back == 1
        assert isinstance(late[0].exception(), LedgerFencedError)
        assert recovery.future.result().last_add_confirmed == 0
    finally:
        run.close()
        fake.close()
    types = _conforming_types(run)
    # the fence's answer, then the refusal it explains
    assert types.index("BookieReceivesFenceRead") < len(types) - 1 - types[::-1].index("BookieReceivesAdd")


def test_a_fencing_reads_answer_waits_for_the_acknowledgements_of_adds_the_bookie_served_before_it() -> None:
    """The bookie stores the writer's add, then answers the recovery's fencing read before it acknowledges the add:
    the network hands the acknowledgement over first, as the bookie served the two, and the trace conforms (the
    other way round the spec's bookie would be fenced when it acknowledges)."""
    fake = LateAckBookie()
    run = Run(_OneBookie(fake), "late-ack")
    try:
        handle = run.create(1, 1, 1, entries=2, recoverers=1)
        adds = run.add(handle, 1)
        run.network.poll(0.2)  # the add is stored; its acknowledgement is held by the bookie
        assert not adds[0].done() and fake.entries
        recovery = run.start_recovery(1, handle.ledger_id)
        run.wait(recovery.future, *adds)
        assert run.network.held_back == 1
        assert adds[0].result() == 0
        assert recovery.future.result().last_add_confirmed == 0
    finally:
        run.close()
        fake.close()
    types = _conforming_types(run)
    assert types.index("BookieReceivesAdd") < types.index("BookieReceivesFenceRead")


# -- the scenarios -------------------------------------------------------------------------------------------
def _statuses(out: Path) -> dict[str, dict[str, object]]:
    return {d.name: json.loads((d / "verdict.json").read_text()) for d in sorted(out.iterdir()) if d.is_dir()}


def _assert_every_scenario_conforms(
    recorded: dict[str, dict[str, object]], *, read_back: bool, protocol: str = "v3"
) -> None:
    assert set(recorded) == set(CLIENT_SCENARIOS)
    for name, verdict in recorded.items():
        assert (verdict["status"], verdict["protocol"]) == ("conforms", protocol), (name, verdict)
        facts = verdict["facts"]
        assert isinstance(facts, dict)
        assert ("read_by_bookies_client" in facts) is read_back
    facts = {name: v["facts"] for name, v in recorded.items()}
    assert facts["write-close-read"]["last_entry"] == 5  # type: ignore[index]
    assert facts["recover-open-ledger"] == {  # every acknowledged entry kept; the writer's next add refused
        "late_add": "LedgerFencedError",
        "last_entry": 3,
        **({"read_by_bookies_client": 4} if read_back else {}),
    }
    assert len(facts["bookie-crashes-while-writing"]["ensembles"]) == 2  # type: ignore[index]
    assert facts["explicit-lac-read-while-open"]["lac_read_while_open"] == 2  # type: ignore[index]
    assert recorded["recover-with-bookie-down"]["bookies_crashed"] == [3]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_scenario_conforms_on_reference_bookies(tmp_path: Path, protocol: str) -> None:
    """On v2 too, the explicit LAC's scenario with it: its writes and reads of the explicit LAC go on a v3 connection
    beside the v2 one, as BookKeeper's client sends them, and the reader of the open ledger learns LAC 2 from it
    (read as entry -1 on v2 it would be -1: every add carried LAC -1)."""
    with reference_bookies(tmp_path / "bookies") as bookies:
        recordings = record_reference_client(list(CLIENT_SCENARIOS), bookies, tmp_path / "out", protocol=protocol)
    assert [r.status for r in recordings] == ["conforms"] * len(CLIENT_SCENARIOS)
    recorded = {k: v for k, v in _statuses(tmp_path / "out").items()}
    _assert_every_scenario_conforms(recorded, read_back=False, protocol=protocol)
    # The traces take the spec's fault paths, and each checks again from its manifest.
    actions = {
        name: {json.loads(line)["type"] for line in (tmp_path / "out" / name / "trace.ndjson").read_text().splitlines()}
        for name in CLIENT_SCENARIOS
    }
    assert "WriterChangesEnsemble" in actions["bookie-crashes-while-writing"]
    assert "RecovererChangesEnsemble" in actions["recover-with-bookie-down"]
    assert main(["check", str(tmp_path / "out" / "recover-with-bookie-down"), "--json"]) == 0


def test_the_command_line_records_on_reference_bookies_and_refuses_what_it_cannot_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["record", "reference-client", "--bookies", "reference", "--out", str(tmp_path)]
    assert main([*argv, "--scenario", "write-close-read", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["status"] for s in report["scenarios"]] == ["conforms"]
    assert main([*argv, "--recheck", str(tmp_path)]) == 2
    assert "nothing to --recheck" in capsys.readouterr().err
    assert main(["record", "managed-ledger", "--bookies", "reference", "--list"]) == 2
    assert "--bookies is an option of bookkeeper and reference-client only" in capsys.readouterr().err
    assert main(["record", "managed-ledger", "--protocol", "v2", "--list"]) == 2
    assert "--protocol is an option of reference-client only" in capsys.readouterr().err
    assert main([*argv, "--protocol", "v2", "--scenario", "write-close-read", "--json"]) == 0
    assert [s["status"] for s in json.loads(capsys.readouterr().out)["scenarios"]] == ["conforms"]
    manifest = json.loads((tmp_path / "write-close-read" / "manifest.json").read_text())
    assert manifest["protocol"] == "v2"


@pytest.mark.real_bookkeeper
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_scenario_conforms_on_bookkeepers_bookies_and_its_client_reads_each_ledger_back(
    tmp_path: Path, protocol: str
) -> None:
    """The released 4.17.2 bookies serve the reference client, on v3 and on v2 as Pulsar's brokers speak it; the
    released Java client opens each ledger it wrote, from the metadata it wrote to ZooKeeper, and reads every
    entry."""
    with real_bookies(tmp_path / "cluster") as bookies:
        recordings = record_reference_client(list(CLIENT_SCENARIOS), bookies, tmp_path / "out", protocol=protocol)
    why = {r.name: (r.failure, [x.verdict.reason for x in r.ledgers]) for r in recordings if r.status != "conforms"}
    assert not why
    _assert_every_scenario_conforms(_statuses(tmp_path / "out"), read_back=True, protocol=protocol)


def test_served_bookies_record_the_writers_explicit_lac_and_the_bookies_mode_judges_it(tmp_path: Path) -> None:
    """The reference client with its explicit LAC on: the served bookies log each ``BookieReceivesWriteLac`` with
    the explicit LAC they then hold, the ledger's trace is checked with ``ExplicitLac = 1``, and it conforms."""
    trace = tmp_path / "trace" / "bookies.ndjson"
    with ServedBookies(tmp_path / "bookies", 3, trace=trace) as served:
        ids = served.bookie_ids
        network = WireNetwork(lambda: ids, lambda b: ids.index(b) + 1)
        ledgers = LedgerMetadataStore(EmbeddedMetadataStore())
        writer = network.attach(BookKeeperClient(0, ledgers, network, placement=OrderedPlacement()))
        handle = writer.create_ledger(3, 2, 2)
        adds = [handle.add_entry(f"entry {i}".encode()) for i in range(2)]
        # once nothing is pending, LAC 1, which no add carried, is due as an explicit LAC (a local step)
        network.run_until(lambda: handle.writer.explicit_lac_at == 1 and not network.unanswered, within=20)
        assert [f.result() for f in adds] == [0, 1]
        network.close()
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    sent = [line for line in lines if line["type"] == "BookieReceivesWriteLac"]
    # the write set of LAC 1 in the ensemble 1, 2, 3 (E=3, Qw=2): bookies 2 and 3
    assert sorted(line["params"]["m"]["bookie"] for line in sent) == [2, 3]
    assert all(line["params"]["m"]["lac"] == 1 for line in sent)
    assert sent[-1]["observed"]["bookie_explicit_lac"] == [-1, 1, 1]
    manifest = json.loads((trace.parent / "manifest.json").read_text())
    (constants,) = [t["constants"] for t in manifest["traces"]]
    assert constants["ExplicitLac"] == 1
    small = {"NumBookies": 3, "E": 3, "Qw": 2, "Qa": 2, "NumRecoverers": 0, "MaxEntries": 2}
    verdict = check_trace(events_from_json(lines), LedgerSpec(ExplicitLac=1, **small), "bookies")
    assert verdict.status == "conforms", verdict.reason
    # without the explicit LAC the same trace leaves the spec at the first of those steps
    assert check_trace(events_from_json(lines), LedgerSpec(**small), "bookies").status != "conforms"
