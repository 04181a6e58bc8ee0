"""The reference ledger client on the wire: its requests as BookKeeper's v3 or v2 messages to bookies over TCP.

:class:`WireNetwork` is a :class:`~ledgerspec.reference.ledger.client.Network`
for :class:`~ledgerspec.reference.ledger.client.BookKeeperClient`, as the
in-process cluster is, but the bookies are any that speak BookKeeper's v3
protocol: the released bookie from the jars, or the reference bookies of
:mod:`.server`. It speaks as ``PerChannelBookieClient`` (BookKeeper 4.17.2)
does with its default settings: one connection per bookie, requests
pipelined on it and told apart by their ``txnId``, no authentication message
(the default ``AuthenticationDisabledAuthProviderFactory`` sends none).

Each request of :mod:`ledgerspec.reference.ledger.protocol` becomes one v3
request, and its response one reply:

===============  ===========================================  ================================================
kind             v3 request                                   reply from the response
===============  ===========================================  ================================================
``ADD``          ``ADD_ENTRY`` (``RECOVERY_ADD`` flag for a   the status
                 recovery add), the entry as the client made
                 it
``FENCE``        ``READ_ENTRY`` of entry -1 with              the LAC in the last entry's header
                 ``FENCE_LEDGER`` and the master key          (``ReadLastConfirmedOp``: ENOENTRY and ENOLEDGER
                                                              are a valid answer, -1)
``RECOVERY_``    ``READ_ENTRY`` of the entry with             the entry, or ENOENTRY / ENOLEDGER
``READ``         ``FENCE_LEDGER``
``READ_ENTRY``   ``READ_ENTRY``                               the entry
``READ_LAC``     ``READ_LAC``                                 the larger of the explicit LAC and the LAC in the
                                                              last entry's header
``WRITE_LAC``    ``WRITE_LAC``                                the status
===============  ===========================================  ================================================

On the v2 protocol (``protocol="v2"``, Pulsar's brokers'
``bookkeeperUseV2WireProtocol``) each add, fencing read and read is the v2
message of :func:`.v2.encode_request`. A v2 response carries no ``txnId``:
it is matched to the oldest request still waiting with its ledger, entry
and operation, as ``PerChannelBookieClient`` matches it by its
``EntryCompletionKey`` (4.17.2). v2 has no message for the explicit LAC,
and BookKeeper's client sends its writes and reads of it on a second
connection to the bookie that speaks v3 (``BookieClientImpl.writeLac`` and
``readLac`` take a client of the pool's ``clientsV3Enforced`` when
``useV2WireProtocol`` is on, 4.17.2): so does this network, and the bookie,
which decodes each connection's frames by what it first read on it
(``BookieProtoEncoding.RequestDecoder``), answers each in its own protocol.

A bookie that cannot be reached, a connection that closes, a status the
client has no reply for (``EIO``, ``EREADONLY``, ``ETOOMANYREQUESTS``) and
a request unanswered after ``timeout`` seconds (``addEntryTimeoutSec`` and
``readEntryTimeoutSec``, 5 s by default) all end the same way: the client is
told no reply can come (``timeout``), as BookKeeper's client is by its
error callbacks, and its bookie-failure handling takes over. A reply that
arrives after that is dropped, as ``PerChannelBookieClient`` drops a
response whose ``txnId`` it no longer waits for.

The ledger spec's bookie serves a request and answers it in one step, so
a client must take a bookie's answers in an order in which the bookie could
have served the requests. BookKeeper's bookie does not always send them in
that order, and the network hands them over in the bookie's order of
serving, as a network may always delay a reply:

- An add refused as fenced (``EFENCED``) reaches its client only once the
  fencing reads this network has pending at the same bookie are answered (or
  given up), and after the answers to the plain adds sent to that bookie
  before it. BookKeeper's bookie may send the refusal first: adds and reads
  run on different thread pools, a fencing read is answered only once its
  fence is journaled, and an add is acknowledged only once its journal
  entry is synced, while a refusal goes out at once.
- The answer to a fencing read (of the LAC, or a recovery read) reaches its
  client only after the answers to the plain adds sent to the same bookie
  before it. On v2 BookKeeper's bookie buffers its add acknowledgements and
  flushes them after the journal's whole sync batch
  (``BookieRequestHandler.prepareSendResponseV2``, flushed by
  ``Journal.ForceWriteThread`` once every request of the batch is processed,
  4.17.2), but a fence journaled in the same batch completes its future
  while the batch is processed and the fencing read's answer is written at
  once (``ReadEntryProcessor.handleReadResultForFenceRead``): the answer can
  precede, on the same connection, the acknowledgements of adds the bookie
  stored and journaled before it fenced. An add acknowledged was served
  before the fence (a fenced bookie refuses plain adds), and one refused
  was served after it.

Only requests sent before the other answer are waited for: a bookie that
acknowledges an add sent after its fence was answered is what the oracle
must see.

Nothing here runs on its own: :meth:`WireNetwork.run_until` takes the
client's steps (replies, timeouts, local steps) in one thread until the
caller's condition holds.
"""

from __future__ import annotations

import itertools
import logging
import selectors
import socket
import time
from collections import deque
from collections.abc import Callable

import attrs
from ledgerspec.reference.bookie.entry import EntryFormatError, decode_entry, decode_lac, detect_digest
from ledgerspec.reference.ledger.client import BookKeeperClient
from ledgerspec.reference.ledger.errors import LedgerStateError
from ledgerspec.reference.ledger.events import EventLog
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.wire import v2
from ledgerspec.reference.wire.codec import LENGTH, FrameError, decode_response, frame, frame_length
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb

__all__ = ["DEFAULT_TIMEOUT", "PROTOCOLS", "WireNetwork", "to_reply", "to_reply_v2", "to_v3"]

#: The protocols the reference client speaks: BookKeeper's v3 (protobuf) and v2 (binary).
PROTOCOLS = ("v3", "v2")

_log = logging.getLogger("ledgerspec.wire.client")

#: ``addEntryTimeoutSec`` and ``readEntryTimeoutSec``'s default (``ClientConfiguration``, 4.17.2).
DEFAULT_TIMEOUT = 5.0

# The spec's bookie steps a reply stands for, as the in-process cluster logs them.
_SERVED_ACTION = {
    RequestKind.ADD: "BookieReceivesAdd",
    RequestKind.FENCE: "BookieReceivesFenceRead",
    RequestKind.RECOVERY_READ: "BookieReceivesRecoveryRead",
}
#: The requests that fence the bookie they are served by.
_FENCING = (RequestKind.FENCE, RequestKind.RECOVERY_READ)
_CODES = {
    pb.EOK: ReplyCode.OK,
    pb.EFENCED: ReplyCode.FENCED,
    pb.ENOLEDGER: ReplyCode.NO_SUCH_LEDGER,
    pb.ENOENTRY: ReplyCode.NO_SUCH_ENTRY,
    pb.EUA: ReplyCode.UNAUTHORIZED,
    pb.EBADREQ: ReplyCode.REFUSED,
}
_V2_CODES = {
    v2.EOK: ReplyCode.OK,
    v2.EFENCED: ReplyCode.FENCED,
    v2.ENOLEDGER: ReplyCode.NO_SUCH_LEDGER,
    v2.ENOENTRY: ReplyCode.NO_SUCH_ENTRY,
    v2.EUA: ReplyCode.UNAUTHORIZED,
    v2.EBADREQ: ReplyCode.REFUSED,
}


def to_v3(request: Request, txn: int) -> pb.Request:
    """The v3 request for ``request``, numbered ``txn``."""
    kind = request.kind
    operation = {
        RequestKind.ADD: pb.ADD_ENTRY,
        RequestKind.WRITE_LAC: pb.WRITE_LAC,
        RequestKind.READ_LAC: pb.READ_LAC,
    }.get(kind, pb.READ_ENTRY)
    message = pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=operation, txnId=txn))
    if kind is RequestKind.ADD:
        add = message.addRequest
        add.ledgerId, add.entryId, add.masterKey, add.body = (
            request.ledger_id,
            request.entry_id,
            request.master_key,
            request.data,
        )
        if request.recovery:
            add.flag = pb.AddRequest.RECOVERY_ADD
    elif kind is RequestKind.WRITE_LAC:
        write = message.writeLacRequest
        write.ledgerId, write.lac, write.masterKey, write.body = (
            request.ledger_id,
            request.lac,
            request.master_key,
            request.data,
        )
    elif kind is RequestKind.READ_LAC:
        message.readLacRequest.ledgerId = request.ledger_id
    else:
        read = message.readRequest
        read.ledgerId = request.ledger_id
        read.entryId = -1 if kind is RequestKind.FENCE else request.entry_id
        if kind in (RequestKind.FENCE, RequestKind.RECOVERY_READ):
            read.flag = pb.ReadRequest.FENCE_LEDGER
            read.masterKey = request.master_key
    return message


def _header_lac(body: bytes) -> int:
    """The LAC in an entry's header, its digest checked (either type: the bookie does not say which)."""
    digest_type = detect_digest(body)
    if digest_type is None:
        raise EntryFormatError(f"{len(body)} bytes are no entry with a known digest")
    return decode_entry(body, digest_type).lac


def to_reply(request: Request, response: pb.Response) -> Reply | None:
    """The reply ``response`` gives ``request``; None when the client has no reply for its status (a failure)."""
    status = response.status
    if request.kind is RequestKind.FENCE and status in (pb.ENOENTRY, pb.ENOLEDGER):
        return Reply(request, ReplyCode.OK, lac=-1)  # ReadLastConfirmedOp: a valid answer, nothing written
    code = _CODES.get(status)
    if code is None:
        return None
    if code is not ReplyCode.OK:
        return Reply(request, code)
    if request.kind is RequestKind.FENCE:
        return Reply(request, code, lac=_header_lac(response.readResponse.body))
    if request.kind in (RequestKind.RECOVERY_READ, RequestKind.READ_ENTRY):
        return Reply(request, code, data=response.readResponse.body)
    if request.kind is RequestKind.READ_LAC:
        read = response.readLacResponse
        lacs = [-1]
        if read.HasField("lacBody"):
            lacs.append(decode_lac(read.lacBody, None)[1])
        if read.HasField("lastEntryBody"):
            lacs.append(_header_lac(read.lastEntryBody))
        return Reply(request, code, lac=max(lacs))
    return Reply(request, code)


def to_reply_v2(request: Request, response: v2.V2Response) -> Reply | None:
    """The reply a v2 ``response`` gives ``request``; None when the client has no reply for its code (a failure)."""
    reads_lac = request.kind is RequestKind.FENCE
    if reads_lac and response.code in (v2.ENOENTRY, v2.ENOLEDGER):
        return Reply(request, ReplyCode.OK, lac=-1)  # ReadLastConfirmedOp: a valid answer, nothing written
    code = _V2_CODES.get(response.code)
    if code is None:
        return None
    if code is not ReplyCode.OK:
        return Reply(request, code)
    if reads_lac:
        return Reply(request, code, lac=_header_lac(response.body))
    if request.kind in (RequestKind.RECOVERY_READ, RequestKind.READ_ENTRY):
        return Reply(request, code, data=response.body)
    return Reply(request, code)


def _v2_key(request: Request) -> tuple[int, int, int]:
    """The ledger, entry and op a v2 response to ``request`` carries (``EntryCompletionKey``)."""
    if request.kind is RequestKind.ADD:
        return request.ledger_id, request.entry_id, v2.ADDENTRY
    reads_last = request.kind is RequestKind.FENCE
    return request.ledger_id, -1 if reads_last else request.entry_id, v2.READENTRY


@attrs.define
class _Pending:
    request: Request
    deadline: float
    txn: int  # the order it was sent in
    protocol: str  # of the connection it was sent on


#: The requests BookKeeper's client sends as v3 even when it speaks v2 (``BookieClientImpl``'s ``useV3Enforced``).
_V3_ENFORCED = (RequestKind.WRITE_LAC, RequestKind.READ_LAC)


class _Connection:
    """One TCP connection to a bookie in one protocol, and the bytes of the frame it is reading."""

    def __init__(self, bookie: str, protocol: str, sock: socket.socket) -> None:
        self.bookie = bookie
        self.protocol = protocol
        self.sock = sock
        self.buffer = bytearray()

    def frames(self) -> list[bytes]:
        """The whole frames received so far, taken out of the buffer."""
        out = []
        while len(self.buffer) >= LENGTH.size:
            length = frame_length(bytes(self.buffer[: LENGTH.size]))
            if len(self.buffer) < LENGTH.size + length:
                break
            out.append(bytes(self.buffer[LENGTH.size : LENGTH.size + length]))
            del self.buffer[: LENGTH.size + length]
        return out


class WireNetwork:
    """The network of reference clients to bookies over TCP (module docstring).

    ``bookies`` gives the bookies that take new ledgers now (the registrations
    under ``/ledgers/available``, for instance); ``number`` gives a bookie id's
    number in the ledger spec, for the events logged in ``events``.
    """

    def __init__(
        self,
        bookies: Callable[[], list[str]],
        number: Callable[[str], int],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        connect_timeout: float = 2.0,
        protocol: str = "v3",
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"no protocol {protocol!r}; the protocols: {', '.join(PROTOCOLS)}")
        self.protocol = protocol
        self._bookies = bookies
        self.events = EventLog(number)
        self.timeout_seconds = timeout
        self.connect_timeout = connect_timeout
        self.clients: dict[int, BookKeeperClient] = {}
        self._connections: dict[tuple[str, str], _Connection] = {}  # by bookie and protocol
        self._selector = selectors.DefaultSelector()
        self._pending: dict[int, _Pending] = {}
        # v2: the requests waiting for each (ledger, entry, op), oldest first (txns given up on are skipped)
        self._v2_waiting: dict[tuple[str, tuple[int, int, int]], deque[int]] = {}
        self._failed: list[Request] = []  # sent to a bookie that could not be reached: no reply can come
        self._txn = itertools.count(1)
        self.given_up: list[Request] = []  # requests the clients gave up on: no reply, a closed connection, ...
        # Bookies that refused a connection or closed one, until a connection succeeds again: a client does not
        # choose them for an ensemble (BookKeeper's client quarantines such bookies), though a killed bookie's
        # registration outlives it until its ZooKeeper session expires.
        self.unreachable: set[str] = set()
        self.observers: list[Callable[[], None]] = []  # told when each step of run_until is over
        # answers handed over in the order their bookie served them (module docstring): (txn, reply), by bookie
        self._held_refusals: dict[str, list[tuple[int, Reply]]] = {}
        self._held_fences: dict[str, list[tuple[int, Reply]]] = {}
        self.held_back = 0  # answers held back so far

    # -- the Network protocol -----------------------------------------------------------
    def send(self, request: Request) -> None:
        protocol = "v3" if request.kind in _V3_ENFORCED else self.protocol
        if protocol == "v2":
            try:
                payload = LENGTH.pack(len(body := v2.encode_request(request))) + body
            except ValueError as exc:
                raise LedgerStateError(f"{request!r} cannot be sent on v2: {exc}") from None
        connection = self._connection(request.bookie, protocol)
        if connection is None:
            self._failed.append(request)
            return
        txn = next(self._txn)
        self._pending[txn] = _Pending(request, time.monotonic() + self.timeout_seconds, txn, protocol)
        if protocol == "v2":
            self._v2_waiting.setdefault((request.bookie, _v2_key(request)), deque()).append(txn)
        else:
            payload = frame(to_v3(request, txn))
        try:
            connection.sock.sendall(payload)
        except OSError as exc:
            self._lost_connection(connection, f"sending failed: {exc}")

    def writable_bookies(self) -> list[str]:
        return [b for b in self._bookies() if b not in self.unreachable]

    def attach(self, client: BookKeeperClient) -> BookKeeperClient:
        self.clients[client.client_id] = client
        return client

    # -- connections --------------------------------------------------------------------
    def _connection(self, bookie: str, protocol: str) -> _Connection | None:
        connection = self._connections.get((bookie, protocol))
        if connection is not None:
            return connection
        host, _, port = bookie.rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=self.connect_timeout)
        except (OSError, ValueError) as exc:
            _log.info("bookie %s cannot be reached: %s", bookie, exc)
            self.unreachable.add(bookie)
            return None
        self.unreachable.discard(bookie)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        connection = _Connection(bookie, protocol, sock)
        self._connections[bookie, protocol] = connection
        self._selector.register(sock, selectors.EVENT_READ, connection)
        return connection

    def _open(self, connection: _Connection) -> bool:
        return self._connections.get((connection.bookie, connection.protocol)) is connection

    def _lost_connection(self, connection: _Connection, why: str) -> None:
        """The connection is gone: what was sent on it gets no reply."""
        if not self._open(connection):
            return  # already gone
        _log.info("connection to bookie %s closed: %s", connection.bookie, why)
        self._selector.unregister(connection.sock)
        connection.sock.close()
        del self._connections[connection.bookie, connection.protocol]
        self.unreachable.add(connection.bookie)
        sent_on_it = [
            t
            for t, p in self._pending.items()
            if p.request.bookie == connection.bookie and p.protocol == connection.protocol
        ]
        for txn in sent_on_it:
            self._failed.append(self._pending.pop(txn).request)
        if connection.protocol == "v2":
            for key in [k for k in self._v2_waiting if k[0] == connection.bookie]:
                del self._v2_waiting[key]

    def close(self) -> None:
        for connection in list(self._connections.values()):
            self._selector.unregister(connection.sock)
            connection.sock.close()
        self._connections.clear()
        self._selector.close()

    # -- replies ------------------------------------------------------------------------
    def poll(self, wait: float) -> int:
        """Read what arrived within ``wait`` seconds and hand each reply to its client; the replies handed."""
        handed = 0
        for key, _ in self._selector.select(wait):
            connection: _Connection = key.data
            if not self._open(connection):
                continue  # lost while an earlier reply of this poll was handed (a send on it failed)
            try:
                data = connection.sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError as exc:
                self._lost_connection(connection, str(exc))
                continue
            if not data:
                self._lost_connection(connection, "closed by the bookie")
                continue
            connection.buffer += data
            try:
                frames = connection.frames()
            except FrameError as exc:
                self._lost_connection(connection, str(exc))
                continue
            for payload in frames:
                if not self._open(connection):
                    break  # lost as a reply was handed: what was sent on it is given up on already
                handed += self._take(connection, payload)
        return handed

    def _step_done(self) -> None:
        for observer in self.observers:
            observer()

    def _take(self, connection: _Connection, payload: bytes) -> int:
        try:
            if connection.protocol == "v2":
                answer = v2.decode_response(payload)
                pending = self._v2_pending(connection.bookie, answer)
            else:
                response = decode_response(payload)
                pending = self._pending.get(response.header.txnId)
                if pending is not None and (pending.request.bookie, pending.protocol) == (connection.bookie, "v3"):
                    del self._pending[response.header.txnId]
                else:
                    pending = None  # not sent on this connection
        except FrameError as exc:
            self._lost_connection(connection, f"a response that is no {connection.protocol} message: {exc}")
            return 0
        if pending is None:
            return 0  # given up on already: PerChannelBookieClient drops it
        request = pending.request
        try:
            reply = to_reply_v2(request, answer) if connection.protocol == "v2" else to_reply(request, response)
        except EntryFormatError as exc:
            _log.info("bookie %s: %r answered with a bad entry: %s", connection.bookie, request, exc)
            reply = None
        if reply is None:
            status = f"v2 code {answer.code}" if connection.protocol == "v2" else pb.StatusCode.Name(response.status)
            _log.info("bookie %s: %r failed with %s", connection.bookie, request, status)
            self._failed.append(request)
            return 0
        held = None
        if request.kind is RequestKind.ADD and reply.code is ReplyCode.FENCED:
            held = self._held_refusals
        elif request.kind in _FENCING and self._plain_adds_before(request.bookie, pending.txn):
            held = self._held_fences
        if held is not None:
            held.setdefault(request.bookie, []).append((pending.txn, reply))
            handed = self._release(request.bookie)  # at once, if nothing it waits for is left
            self.held_back += any(txn == pending.txn for txn, _ in held.get(request.bookie, ()))
            return handed
        return self._hand(reply) + self._release(request.bookie)

    def _v2_pending(self, bookie: str, answer: v2.V2Response) -> _Pending | None:
        """The oldest request to ``bookie`` still waiting with the answer's ledger, entry and op."""
        key = (bookie, (answer.ledger_id, answer.entry_id, answer.op))
        waiting = self._v2_waiting.get(key)
        pending = None
        while waiting and pending is None:
            pending = self._pending.pop(waiting.popleft(), None)
        if not waiting:
            self._v2_waiting.pop(key, None)
        return pending

    def _hand(self, reply: Reply) -> int:
        """Give ``reply`` to its client, if it waits for it (a step, over once this returns); 1 if it did.

        A reply the client no longer waits for (the third ack of an add that completed, a fencing read's
        answer after the recovery ended) still tells that the bookie took the request: the spec's bookie step
        is logged, its reply reaching a client that ignores it, as the in-process cluster logs it.
        """
        request = reply.request
        client = self.clients.get(request.client)
        if client is None:
            return 0
        taken = time.monotonic()  # before the client acts on it and sends what it calls for
        awaited = client.awaits(reply)
        if awaited:
            client.deliver(reply)
        elif not (reply.ok and request.kind in _SERVED_ACTION):
            return 0
        if request.kind in _SERVED_ACTION:
            self.events.bookie_served(_SERVED_ACTION[request.kind], request, True, at=taken)
        self._step_done()
        return int(awaited)

    def _fencing(self, bookie: str) -> bool:
        """Does a fencing read to ``bookie`` wait for its answer, or its answer for adds served before it?"""
        waiting = any(p.request.bookie == bookie and p.request.kind in _FENCING for p in self._pending.values())
        return waiting or bool(self._held_fences.get(bookie))

    def _plain_adds_before(self, bookie: str, txn: int) -> bool:
        """Does a plain add sent to ``bookie`` before request ``txn`` wait for its answer?"""
        return any(
            p.request.bookie == bookie and p.request.kind is RequestKind.ADD and not p.request.recovery and p.txn < txn
            for p in self._pending.values()
        )

    def _release(self, bookie: str) -> int:
        """Hand the answers held back for ``bookie`` that wait for nothing any more, in the order they were sent;
        the replies handed that their clients awaited.

        A fencing read's answer waits for the plain adds sent before it; a refusal as fenced for those and for
        every fencing read to the bookie, answered or held.
        """
        handed = 0
        for held in (self._held_fences, self._held_refusals):
            queue = sorted(held.pop(bookie, []), key=lambda item: item[0])
            while queue and not self._plain_adds_before(bookie, queue[0][0]):
                if held is self._held_refusals and self._fencing(bookie):
                    break
                handed += self._hand(queue.pop(0)[1])
            if queue:
                held[bookie] = queue
        return handed

    @property
    def timeouts(self) -> int:
        """How many requests the clients gave up on."""
        return len(self.given_up)

    # -- driving --------------------------------------------------------------------------
    def _give_up(self) -> bool:
        """Tell each client of the requests whose reply cannot come; whether there were any."""
        now = time.monotonic()
        expired = [t for t, p in self._pending.items() if p.deadline <= now]
        gone = self._failed + [self._pending.pop(t).request for t in expired]
        self._failed = []
        for request in gone:
            client = self.clients.get(request.client)
            if client is not None:
                self.given_up.append(request)
                client.timeout(request)
                self._step_done()
        for bookie in {r.bookie for r in gone}:
            self._release(bookie)
        return bool(gone)

    @property
    def unanswered(self) -> int:
        """Requests sent and neither answered nor given up on."""
        return len(self._pending)

    def run_until(self, done: Callable[[], bool], *, within: float = 60.0) -> None:
        """Take the clients' steps until ``done()``: replies as they arrive, the requests given up on, the clients'
        local steps; :class:`LedgerStateError` when ``within`` seconds pass first."""
        deadline = time.monotonic() + within
        while not done():
            if time.monotonic() > deadline:
                raise LedgerStateError(f"not done within {within:g} s; {len(self._pending)} request(s) unanswered")
            if self._give_up():
                continue
            local = [s for c in self.clients.values() for s in c.local_steps()]
            if local:
                self.clients[local[0].client].run_local(local[0])
                self._step_done()
                continue
            self.poll(0.05)
