"""BookKeeper's v2 binary protocol (the one Pulsar's brokers use): requests decoded, served, and answered.

What this module knows: the bytes of a v2 frame (after its length) in, the
bytes of the answer out, served by the same code as v3 and the in-process
cluster (:func:`~ledgerspec.reference.ledger.serving.serve`, through :meth:`.WireService.serve`); no sockets.

A v2 frame starts with a packet header, one int: ``version << 24 | opCode << 16 | flags``
(``BookieProtocol.PacketHeader.toInt``, BookKeeper 4.17.2); what follows is
as ``BookieProtoEncoding.RequestEnDeCoderPreV3.decode`` reads it:

========================  ================================================  ====================================
op                        request after the header                          the reference bookie
========================  ================================================  ====================================
``ADDENTRY`` (1)          the 20-byte master key, then the entry            ``ADD`` (``FLAG_RECOVERY_ADD``: a
                                                                            recovery add)
``READENTRY`` (2)         ledger id, entry id (8 bytes each); with          ``READ_ENTRY``; ``FLAG_DO_FENCING``:
                          ``FLAG_DO_FENCING`` the 20-byte master key        a fencing ``RECOVERY_READ``
``AUTH`` (3)              an ``AuthMessage``                                ``AuthDisabledPlugin``, EOK
``BATCH_READ_ENTRY`` (7)  ledger id, entry id, request id (8 bytes each),   ``READ_ENTRY`` of each entry from the
                          max count (4), max size (8); with                 first on (a fencing ``RECOVERY_READ``
                          ``FLAG_DO_FENCING`` the 20-byte master key        first), as ``readData`` reads them
========================  ================================================  ====================================

A response (``ResponseEnDeCoderPreV3.encode``) is the header (the request's
version and op, no flags), the error code, ledger id and entry id, then
for a read the entry; for a batch read the request id, then each entry
after its length (4 bytes). Any other op makes BookKeeper's decoder throw,
and the bookie closes the channel: here a :class:`~.codec.FrameError`.

The client's side (:func:`encode_request`, :func:`decode_response`) is the
reference client's on v2 (:mod:`.network`): its requests as
``BookieProtocol.AddRequest`` and ``ReadRequest`` (protocol version 2,
``CURRENT_PROTOCOL_VERSION``) and the responses read as
``ResponseEnDeCoderPreV3.decode`` reads them.

A batch read (BookKeeper 4.17.2, ``BatchedReadEntryProcessor.readData``)
answers with the entries from the first on, while each is found: at most
``max count`` of them (none, or a negative count: no limit) and, after the
first, only while the response stays within ``max size`` and the bookie's
own ``maxBatchReadSize`` (5 MiB by default), counting 36 bytes of header
and 4 per entry. Only a first entry that cannot be read is an error (its
code, and no entry); a later one ends the batch.
"""

from __future__ import annotations

import struct

import attrs
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.wire.codec import FrameError, parse
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb
from ledgerspec.reference.wire.service import AUTH_DISABLED_PLUGIN, WireService

__all__ = [
    "ADDENTRY",
    "AUTH",
    "BATCH_READ_ENTRY",
    "OP_NAMES",
    "READENTRY",
    "V2Request",
    "V2Response",
    "decode",
    "decode_response",
    "encode_header",
    "encode_request",
    "respond",
]

# BookieProtocol's op codes, error codes, flags, master key length and the version its clients send.
ADDENTRY, READENTRY, AUTH, BATCH_READ_ENTRY = 1, 2, 3, 7
EOK, ENOLEDGER, ENOENTRY, EBADREQ, EUA, EFENCED = 0, 1, 2, 100, 102, 104
CURRENT_PROTOCOL_VERSION = 2
FLAG_DO_FENCING, FLAG_RECOVERY_ADD = 0x0001, 0x0002
OP_NAMES = {ADDENTRY: "ADDENTRY", READENTRY: "READENTRY", AUTH: "AUTH", BATCH_READ_ENTRY: "BATCH_READ_ENTRY"}
MASTER_KEY_LENGTH = 20
MAX_BATCH_READ_SIZE = 5 * 1024 * 1024  # ServerConfiguration.DEFAULT_MAX_BATCH_READ_SIZE
_BATCH_FRAME_START = 24 + 8 + 4  # BatchedReadEntryProcessor.readData's count: headers, request id, one length

_INT = struct.Struct(">i")
_IDS = struct.Struct(">qq")
_BATCH = struct.Struct(">qqqiq")  # ledger, entry, request id, max count, max size
_CODE = {
    ReplyCode.OK: EOK,
    ReplyCode.FENCED: EFENCED,
    ReplyCode.NO_SUCH_LEDGER: ENOLEDGER,
    ReplyCode.NO_SUCH_ENTRY: ENOENTRY,
    ReplyCode.UNAUTHORIZED: EUA,
    ReplyCode.REFUSED: EBADREQ,
}


@attrs.frozen
class V2Request:
    """One decoded v2 request."""

    version: int
    op: int
    flags: int
    ledger_id: int = -1
    entry_id: int = -1
    master_key: bytes | None = None  # ADDENTRY; READENTRY with FLAG_DO_FENCING
    body: bytes = b""  # ADDENTRY: the entry; AUTH: the AuthMessage
    request_id: int = 0  # BATCH_READ_ENTRY
    max_count: int = 0  # BATCH_READ_ENTRY: at most this many entries (0 or less: no limit)
    max_size: int = 0  # BATCH_READ_ENTRY: at most this many bytes of response, after the first entry


@attrs.frozen
class V2Response:
    """One decoded v2 response to an add or a read (a client's side)."""

    op: int
    code: int  # BookieProtocol's error code
    ledger_id: int
    entry_id: int
    body: bytes = b""  # READENTRY answered EOK: the entry


def encode_header(version: int, op: int, flags: int = 0) -> bytes:
    """``PacketHeader.toInt``."""
    return _INT.pack(((version & 0xFF) << 24) | ((op & 0xFF) << 16) | (flags & 0xFFFF))


def decode(payload: bytes) -> V2Request:
    """The v2 request in a frame's bytes; :class:`FrameError` naming what is wrong when they hold none."""
    if len(payload) < _INT.size:
        raise FrameError(f"a frame of {len(payload)} bytes has no v2 packet header either")
    (header,) = _INT.unpack_from(payload)
    version, op, flags = (header >> 24) & 0xFF, (header >> 16) & 0xFF, header & 0xFFFF
    if version == 0:  # PacketHeader.getOpCode: version 0 puts the op in the low byte, and has no flags
        op, flags = header & 0xFF, 0
    rest = payload[_INT.size :]
    try:
        if op == ADDENTRY:
            key, entry = rest[:MASTER_KEY_LENGTH], rest[MASTER_KEY_LENGTH:]
            ledger_id, entry_id = _IDS.unpack_from(entry)  # peeked, as ParsedAddRequest reads them
            return V2Request(version, op, flags, ledger_id, entry_id, key, entry)
        if op == READENTRY:
            ledger_id, entry_id = _IDS.unpack_from(rest)
            return V2Request(version, op, flags, ledger_id, entry_id, _fence_key(version, flags, rest, _IDS.size))
        if op == BATCH_READ_ENTRY:
            ledger_id, entry_id, request_id, max_count, max_size = _BATCH.unpack_from(rest)
            fence_key = _fence_key(version, flags, rest, _BATCH.size)
            return V2Request(version, op, flags, ledger_id, entry_id, fence_key, b"", request_id, max_count, max_size)
        if op == AUTH:  # the AuthMessage is built (builder.build()), which checks its required fields
            parse(pb.AuthMessage(), rest, "v2 AuthMessage")
            return V2Request(version, op, flags, body=rest)
    except struct.error as exc:
        raise FrameError(f"a v2 request of op {op} is cut short ({len(payload)} bytes): {exc}") from None
    raise FrameError(f"v2 op code {op} is not one a bookie decodes (RequestEnDeCoderPreV3.decode)")


def _fence_key(version: int, flags: int, rest: bytes, at: int) -> bytes | None:
    """The master key after a read's fields, which only a fencing read (``FLAG_DO_FENCING``, version 2 on)
    carries."""
    if not (flags & FLAG_DO_FENCING and version >= 2):
        return None
    key = rest[at : at + MASTER_KEY_LENGTH]
    if len(key) < MASTER_KEY_LENGTH:
        raise struct.error(f"a {len(key)}-byte master key")
    return key


def encode_request(request: Request) -> bytes:
    """The v2 request's bytes (to be framed) for a client's add or read (``AddRequest``, ``ReadRequest``,
    ``RequestEnDeCoderPreV3.encode``, BookKeeper 4.17.2): an add carries the master key and the entry as the client
    made it; a fencing read (``FENCE``, ``RECOVERY_READ``: ``FLAG_DO_FENCING``) the master key after its ids; a
    fence reads entry -1, whose header tells the LAC (``ReadLastConfirmedOp``). v2 has no message for the explicit
    LAC's write or read: ``ValueError`` (BookKeeper's client sends those as v3, ``BookieClientImpl.useV3Enforced``)."""
    kind = request.kind
    if kind is RequestKind.ADD:
        flags = FLAG_RECOVERY_ADD if request.recovery else 0
        return encode_header(CURRENT_PROTOCOL_VERSION, ADDENTRY, flags) + _key(request.master_key) + request.data
    if kind in (RequestKind.FENCE, RequestKind.RECOVERY_READ):
        entry = -1 if kind is RequestKind.FENCE else request.entry_id
        header = encode_header(CURRENT_PROTOCOL_VERSION, READENTRY, FLAG_DO_FENCING)
        return header + _IDS.pack(request.ledger_id, entry) + _key(request.master_key)
    if kind is RequestKind.READ_ENTRY:
        return encode_header(CURRENT_PROTOCOL_VERSION, READENTRY) + _IDS.pack(request.ledger_id, request.entry_id)
    raise ValueError(
        f"v2 has no message for {kind.name}: the explicit LAC is v3 only (WriteLacRequest, ReadLacRequest)"
    )


def _key(master_key: bytes) -> bytes:
    if len(master_key) != MASTER_KEY_LENGTH:
        raise ValueError(f"a v2 master key is {MASTER_KEY_LENGTH} bytes, not {len(master_key)}")
    return master_key


def decode_response(payload: bytes) -> V2Response:
    """The v2 response to an add or a read in a frame's bytes; :class:`FrameError` naming what is wrong when they
    hold none (an op the client did not send, or fewer bytes than its fields)."""
    head = _INT.size * 2 + _IDS.size
    if len(payload) < head:
        raise FrameError(f"a v2 response of {len(payload)} bytes is shorter than its {head} bytes of fields")
    (header,) = _INT.unpack_from(payload)
    op = (header >> 16) & 0xFF
    if op not in (ADDENTRY, READENTRY):
        raise FrameError(f"a v2 response of op {op}, which answers no add or read")
    (code,) = _INT.unpack_from(payload, _INT.size)
    ledger_id, entry_id = _IDS.unpack_from(payload, _INT.size * 2)
    return V2Response(op, code, ledger_id, entry_id, payload[head:] if op == READENTRY else b"")


def respond(service: WireService, request: V2Request) -> bytes:
    """The answer's bytes (to be framed); what the request changed is durable before this returns."""
    header = encode_header(request.version, request.op)
    if request.op == AUTH:  # processRequest, case BookieProtocol.AUTH: auth is not enabled
        message = pb.AuthMessage(authPluginName=AUTH_DISABLED_PLUGIN, payload=b"")
        return header + message.SerializeToString()
    ids = _IDS.pack(request.ledger_id, request.entry_id)
    if request.op == BATCH_READ_ENTRY:
        batch_code, entries = _batch_read(service, request)
        lengths_and_entries = b"".join(_INT.pack(len(entry)) + entry for entry in entries)
        return header + _INT.pack(batch_code) + ids + struct.pack(">q", request.request_id) + lengths_and_entries
    reply = _serve(service, request)
    code = _INT.pack(_CODE[reply.code])
    if request.op == READENTRY and reply.ok:
        return header + code + ids + reply.data
    return header + code + ids


def _batch_read(service: WireService, request: V2Request) -> tuple[int, list[bytes]]:
    """The error code and the entries of a batch read (the module docstring)."""
    most = request.max_count if request.max_count > 0 else None
    max_size = min(request.max_size, MAX_BATCH_READ_SIZE)
    entries: list[bytes] = []
    size = _BATCH_FRAME_START
    while most is None or len(entries) < most:
        # The first read fences, when the request does (processPacket fences before readData); the others read.
        read = request
        if entries:
            read = attrs.evolve(
                request, entry_id=request.entry_id + len(entries), flags=request.flags & ~FLAG_DO_FENCING
            )
        reply = _serve(service, read)
        if not reply.ok:
            return (EOK, entries) if entries else (_CODE[reply.code], [])
        size += len(reply.data) + _INT.size
        if entries and size > max_size:
            break
        entries.append(reply.data)
    return EOK, entries


def _serve(service: WireService, request: V2Request) -> Reply:
    if request.op == ADDENTRY:
        kind, fence = RequestKind.ADD, False
    else:
        fence = bool(request.flags & FLAG_DO_FENCING) and request.version >= 2
        kind = RequestKind.RECOVERY_READ if fence else RequestKind.READ_ENTRY
    served = Request(
        kind,
        0,
        0,
        service.bookie_id,
        request.ledger_id,
        entry_id=request.entry_id,
        recovery=bool(request.flags & FLAG_RECOVERY_ADD),
        fence=fence,
        data=request.body,
        master_key=request.master_key or b"",
    )
    return service.serve(served)
