"""A loopback proxy in front of ZooKeeper that records each write ZooKeeper accepted, in ZooKeeper's own order.

A served bookie sees a ledger's requests, not its metadata: the client
writes that to ZooKeeper (the ledger's creation, its ensemble changes,
IN_RECOVERY, CLOSED). A ZooKeeper watch cannot record those writes one by
one (it fires on a change, and the data read after it may already be a
later version), nor can a read at the end of a run (it sees the last one
only). So the clients reach ZooKeeper through this proxy, which passes every
frame as it is and reads the writes off the wire: each create, set and
delete, alone or in a ``multi``, that ZooKeeper answered without error, with
the zxid and the znode version ZooKeeper gave it. It tells of a write
(:class:`MetadataWrite`) as the reply passes, before the client has it, so a
step the client takes because of the write is told of after it on the same
loop; the write carries the time its request passed, when the client had
decided it.

The protocol (ZooKeeper 3.x's client protocol, ``ClientCnxn`` and
``zookeeper.jute``): each frame is a big-endian int32 length, then that
many bytes. The first frame each way is the session's ``ConnectRequest``
and ``ConnectResponse``. After them a client frame starts with a
``RequestHeader`` (``int xid; int type``) and a server frame with a
``ReplyHeader`` (``int xid; long zxid; int err``), the server answering a
session's requests in the order they were sent; a watch notification
(xid -1) and a ping's answer (xid -2) answer no write. The records read
here:

=========================  ====  ===============================================================
request                    type  what the proxy reads
=========================  ====  ===============================================================
``CreateRequest``          1     path, data (the ACL list and flags are skipped); version 0
``Create2Request``         15    as ``create``; the reply's ``Stat`` is not needed
``CreateContainer``        19    as ``create``
``CreateTTLRequest``       21    as ``create`` (the TTL follows the flags)
``SetDataRequest``         5     path, data; the version is the reply's ``Stat.version``
``DeleteRequest``          2     path
``MultiOperationRecord``   14    each op after its ``MultiHeader`` (``int type; boolean done;
                                 int err``) to the header with ``done``; each result likewise,
                                 and none if one is an error (the multi wrote nothing)
=========================  ====  ===============================================================

A write request the proxy cannot read is still passed on; the proxy counts
it in :attr:`ZooKeeperProxy.unreadable`, with the reason, so that a
recording that may miss a write says so instead of judging from it. A frame
longer than ZooKeeper's own ceiling (``jute.maxbuffer``, 1 MiB by default,
here :data:`MAX_FRAME`) closes both sides of its connection with the reason
logged; other connections are not touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
import time
from collections.abc import Callable
from typing import Any

import attrs
from kazoo.protocol.serialization import int_struct, read_buffer, read_string, reply_header_struct, stat_struct

__all__ = ["MAX_FRAME", "MetadataWrite", "ZooKeeperProxy"]

_log = logging.getLogger("ledgerspec.wire.zookeeper")

#: A frame's length above this closes its connection: a generous multiple of ZooKeeper's ``jute.maxbuffer``.
MAX_FRAME = 16 * 1024 * 1024

# ZooDefs.OpCode values
_CREATE, _DELETE, _SET_DATA, _MULTI, _CREATE2, _CREATE_CONTAINER, _CREATE_TTL = 1, 2, 5, 14, 15, 19, 21
_CREATES = frozenset({_CREATE, _CREATE2, _CREATE_CONTAINER, _CREATE_TTL})
_WRITES = _CREATES | {_DELETE, _SET_DATA}
_CHECK = 13  # a multi's version check: no write
_MULTI_END = -1  # the MultiHeader type that ends a multi
_LENGTH = struct.Struct(">i")
_MULTI_HEADER = struct.Struct(">i?i")


@attrs.frozen
class MetadataWrite:
    """One write ZooKeeper accepted: ``data`` None for a delete; ``version`` the znode's version after it (-1 for
    a delete); ``zxid`` ZooKeeper's transaction id, its order of writes; ``time`` when its request passed the
    proxy (``time.monotonic``): the write took effect between then and its reply, and what the client wrote it
    from (its LAC, say) it had when it sent it."""

    path: str
    data: bytes | None
    version: int
    zxid: int
    time: float = attrs.field(factory=time.monotonic)


@attrs.frozen
class _Op:
    """A write of a request, as sent: its type, path and data."""

    type: int
    path: str
    data: bytes | None


class _UnreadableError(ValueError):
    """A record the proxy cannot read."""


def _read_op(op_type: int, payload: bytes, offset: int) -> tuple[_Op | None, int]:
    """The write a request record holds, and the offset after it; None for a record that writes nothing."""
    try:
        if op_type in _CREATES:
            path, offset = read_string(payload, offset)
            data, offset = read_buffer(payload, offset)
            (acls,) = int_struct.unpack_from(payload, offset)
            offset += int_struct.size
            for _ in range(max(acls, 0)):  # ACL: int perms; Id: ustring scheme, ustring id
                offset += int_struct.size
                _, offset = read_string(payload, offset)
                _, offset = read_string(payload, offset)
            offset += int_struct.size + (8 if op_type == _CREATE_TTL else 0)  # int flags; long ttl
            return _Op(op_type, path, data), offset
        if op_type == _SET_DATA:
            path, offset = read_string(payload, offset)
            data, offset = read_buffer(payload, offset)
            return _Op(op_type, path, data), offset + int_struct.size
        if op_type in (_DELETE, _CHECK):
            path, offset = read_string(payload, offset)
            return (_Op(op_type, path, None) if op_type == _DELETE else None), offset + int_struct.size
    except (struct.error, UnicodeDecodeError, IndexError) as exc:
        raise _UnreadableError(f"a request of type {op_type} cut short or malformed: {exc}") from None
    raise _UnreadableError(f"a multi holds an operation of type {op_type}, which the proxy does not read")


def _read_request(op_type: int, payload: bytes) -> list[_Op]:
    """The writes of a request frame (its header already read)."""
    offset = 8
    if op_type != _MULTI:
        op, _ = _read_op(op_type, payload, offset)
        return [op] if op is not None else []
    ops: list[_Op] = []
    while True:
        try:
            sub_type, done, _ = _MULTI_HEADER.unpack_from(payload, offset)
        except struct.error as exc:
            raise _UnreadableError(f"a multi cut short: {exc}") from None
        offset += _MULTI_HEADER.size
        if done or sub_type == _MULTI_END:
            return ops
        op, offset = _read_op(sub_type, payload, offset)
        ops.append(op if op is not None else _Op(sub_type, "", None))  # a check: its result is counted too


def _versions(ops: list[_Op], payload: bytes) -> list[int] | None:
    """The version each operation of a multi left, from its results (``MultiResponse``, one for each operation):
    a create's 0, a set's from its ``Stat``, a delete's and a check's -1. None for a multi that failed: its
    results are errors (``ErrorResult``, type -1) and, a multi being atomic, it wrote nothing, though its
    ``ReplyHeader`` may say no error."""
    offset = reply_header_struct.size
    versions = []
    for _ in ops:
        sub_type, _, err = _MULTI_HEADER.unpack_from(payload, offset)
        offset += _MULTI_HEADER.size
        if sub_type == _MULTI_END or err != 0:
            return None
        version = -1
        if sub_type in _CREATES:
            _, offset = read_string(payload, offset)
            offset += stat_struct.size if sub_type != _CREATE else 0  # Create2Response: path, Stat
            version = 0
        elif sub_type == _SET_DATA:
            version = stat_struct.unpack_from(payload, offset)[4]
            offset += stat_struct.size
        versions.append(version)
    return versions


class _Session:
    """One client connection and its connection to ZooKeeper: the writes sent and not yet answered, by xid."""

    def __init__(self, proxy: ZooKeeperProxy, peer: object) -> None:
        self.proxy = proxy
        self.peer = peer
        # xid -> the request's type, its operations, when it passed the proxy
        self.pending: dict[int, tuple[int, list[_Op], float]] = {}

    def sent(self, payload: bytes) -> None:
        if len(payload) < 8:
            return
        xid, op_type = struct.unpack_from(">ii", payload)
        if op_type not in _WRITES and op_type != _MULTI:
            return
        try:
            ops = _read_request(op_type, payload)
        except _UnreadableError as exc:
            self._unreadable(f"from {self.peer}: {exc}")
            return
        if ops:
            self.pending[xid] = (op_type, ops, time.monotonic())

    def answered(self, payload: bytes) -> None:
        if len(payload) < reply_header_struct.size:
            return
        xid, zxid, err = reply_header_struct.unpack_from(payload)
        request = self.pending.pop(xid, None)
        if request is None or err != 0:
            return
        op_type, ops, requested = request
        try:
            if op_type == _MULTI:
                versions = _versions(ops, payload)
                if versions is None:
                    return
            elif op_type == _SET_DATA:
                versions = [stat_struct.unpack_from(payload, reply_header_struct.size)[4]]
            else:
                versions = [0 if op_type in _CREATES else -1]
        except (struct.error, UnicodeDecodeError) as exc:
            self._unreadable(f"to {self.peer}: the reply to a write: {exc}")
            return
        for op, version in zip(ops, versions, strict=True):
            if op.type in _WRITES:
                self.proxy.record(MetadataWrite(op.path, op.data, version, zxid, requested))

    def _unreadable(self, why: str) -> None:
        self.proxy.unreadable.append(why)
        _log.warning("ZooKeeper proxy: a write not recorded: %s", why)


class ZooKeeperProxy:
    """Listens on ``host`` (``port`` 0: any free one) and passes each connection to ZooKeeper at ``upstream``
    (``host:port``); calls ``record`` with each write ZooKeeper accepted (module docstring), on the proxy's loop."""

    def __init__(self, upstream: str, record: Callable[[MetadataWrite], None], host: str = "127.0.0.1") -> None:
        zk_host, _, zk_port = upstream.rpartition(":")
        if not zk_host or not zk_port.isdigit():
            raise ValueError(f"ZooKeeper's address must be host:port, got {upstream!r}")
        self.upstream = (zk_host, int(zk_port))
        self.record = record
        self.host = host
        self.port: int | None = None
        self.unreadable: list[str] = []  # write requests or replies the proxy could not read, with the reason
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    @property
    def address(self) -> str:
        """``host:port`` for a client's ZooKeeper connect string."""
        return f"{self.host}:{self.port}"

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        peer = client_writer.get_extra_info("peername")
        try:
            server_reader, server_writer = await asyncio.open_connection(*self.upstream)
        except OSError as exc:
            _log.warning("ZooKeeper proxy: cannot reach ZooKeeper at %s:%s for %s: %s", *self.upstream, peer, exc)
            client_writer.close()
            return
        session = _Session(self, peer)
        pumps = [
            asyncio.ensure_future(self._pump(client_reader, server_writer, session.sent, f"from {peer}")),
            asyncio.ensure_future(self._pump(server_reader, client_writer, session.answered, f"to {peer}")),
        ]
        self._connections.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self._connections.difference_update(pumps)
            for writer in (client_writer, server_writer):
                writer.close()
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await writer.wait_closed()

    @staticmethod
    async def _pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, read: Callable[[bytes], None], where: str
    ) -> None:
        """Pass whole frames from ``reader`` to ``writer``; each after the first (the session's connect) read
        first. Returns when either side closes, or on a frame too long."""
        first = True
        while True:
            try:
                header = await reader.readexactly(_LENGTH.size)
                (length,) = _LENGTH.unpack(header)
                if not 0 <= length <= MAX_FRAME:
                    _log.warning("ZooKeeper proxy: a frame of %d bytes %s; its connection closed", length, where)
                    return
                payload = await reader.readexactly(length)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            if not first:
                read(payload)
            first = False
            writer.write(header + payload)
            try:
                await writer.drain()
            except ConnectionError:
                return
