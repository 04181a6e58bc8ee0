"""A reference bookie's answers to BookKeeper's v3 requests: a decoded ``Request`` in, its ``Response`` out.

What this module knows: how each v3 operation maps onto the requests of
:mod:`ledgerspec.reference.ledger.protocol`, which the bookie serves with the
same code as in the in-process cluster (:func:`~ledgerspec.reference.ledger.serving.serve`),
and how the reply goes back into a v3 ``Response``. It does no I/O of its own:
the bookie's journal does (each change is fsynced before its response is made).

Each operation as BookKeeper 4.17.2's bookie answers it
(``bookkeeper-server/.../proto/``, ``BookieRequestProcessor.processRequest``):

=================================  ==========================================  ========================================
operation                          the reference bookie                        BookKeeper
=================================  ==========================================  ========================================
``ADD_ENTRY``                      ``ADD`` (``RECOVERY_ADD``: a recovery add)  ``WriteEntryProcessorV3.getAddResponse``
``READ_ENTRY``                     ``READ_ENTRY``; with ``FENCE_LEDGER`` a     ``ReadEntryProcessorV3.getReadResponse``
                                   fencing ``RECOVERY_READ`` (entry -1: the
                                   last entry)
``WRITE_LAC``                      ``WRITE_LAC``                               ``WriteLacProcessorV3``
``READ_LAC``                       the explicit LAC buffer and the last entry  ``ReadLacProcessorV3``
``GET_BOOKIE_INFO``                the free and total bytes of its disk        ``GetBookieInfoProcessorV3``
``FORCE_LEDGER``                   the journal's fsync (every add had it)      ``ForceLedgerProcessorV3``
``GET_LIST_OF_ENTRIES_OF_LEDGER``  the entries the bookie stores, as           ``GetListOfEntriesOfLedgerProcessorV3``
                                   ``AvailabilityOfEntriesOfLedger``
``AUTH``                           EOK, plugin ``AuthDisabledPlugin``          ``processRequest``, case ``AUTH``
``START_TLS``                      EBADREQ                                     ``processStartTLSRequestV3`` without TLS
anything else                      EBADREQ, the request's header echoed        ``processRequest``, ``default``
=================================  ==========================================  ========================================

A long-poll read (a ``READ_ENTRY`` with ``previousLAC``,
``LongPollReadEntryProcessorV3``) is answered once the bookie's LAC passes
``previousLAC`` or its ``timeOut`` ends: :meth:`WireService.long_poll` says
how long to wait, and the server (:mod:`.server`) waits without holding up
the other requests of the connection, then asks :meth:`WireService.respond`.

The list of a ledger's entries (``AvailabilityOfEntriesOfLedger.serializeStateOfEntriesOfLedger``,
BookKeeper 4.17.2) is a 64-byte header, the format version (0) and the number
of sequence groups as two big-endian ints and zeros after them, then 24 bytes
per group: its first and last sequence's first entries (longs), the sequence
size and the period between sequences (ints). A sequence is a run of
consecutive entries; 4.17.2 starts each group with its last sequence set to
its first and a period of 0, so that no later run joins it, and writes each
run as a group of its own: (start, start, length, 0).

An operation whose request body is missing (an ``ADD_ENTRY`` without
``addRequest``) is EBADREQ too: BookKeeper's would read the body's default
instance, ledger 0 entry 0.
"""

from __future__ import annotations

import logging
import shutil
import struct
from collections.abc import Callable
from typing import Any

from ledgerspec.reference.bookie import LAST_ADD_CONFIRMED, Bookie, NoSuchEntryError, NoSuchLedgerError
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.ledger.serving import serve
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb

__all__ = ["AUTH_DISABLED_PLUGIN", "WireService", "availability_of_entries"]

_log = logging.getLogger("ledgerspec.wire")

#: ``AuthProviderFactoryFactory.AUTHENTICATION_DISABLED_PLUGIN_NAME``: the plugin a bookie without auth names.
AUTH_DISABLED_PLUGIN = "AuthDisabledPlugin"

_STATUS = {
    ReplyCode.OK: pb.EOK,
    ReplyCode.FENCED: pb.EFENCED,
    ReplyCode.NO_SUCH_LEDGER: pb.ENOLEDGER,
    ReplyCode.NO_SUCH_ENTRY: pb.ENOENTRY,
    ReplyCode.UNAUTHORIZED: pb.EUA,
    ReplyCode.REFUSED: pb.EBADREQ,
}
# The request body each served operation needs: a field of Request, answered in the Response field of the same stem.
_BODY = {
    pb.ADD_ENTRY: "addRequest",
    pb.READ_ENTRY: "readRequest",
    pb.WRITE_LAC: "writeLacRequest",
    pb.READ_LAC: "readLacRequest",
    pb.GET_BOOKIE_INFO: "getBookieInfoRequest",
    pb.FORCE_LEDGER: "forceLedgerRequest",
    pb.GET_LIST_OF_ENTRIES_OF_LEDGER: "getListOfEntriesOfLedgerRequest",
}
_IDS = ("ledgerId", "entryId")  # copied from the request body to the response body, where both have them


class WireService:
    """One reference bookie, answering v3 requests; ``bookie_id`` is its id in ledger metadata (``host:port``)."""

    def __init__(
        self,
        bookie: Bookie,
        bookie_id: str,
        disk: str,
        on_served: Callable[[Request, Reply], None] | None = None,
        on_refused: Callable[[int], None] | None = None,
    ) -> None:
        self.bookie = bookie
        self.bookie_id = bookie_id
        self.disk = disk  # a directory on the bookie's disk, for GET_BOOKIE_INFO
        self.on_served = on_served  # told of each request of :mod:`.protocol` served, and its reply (a trace)
        self.on_refused = on_refused  # told of the ledger of each add refused unserved, read-only (a trace)
        self.read_only = False  # a fault (:mod:`.faults`): normal adds are refused EREADONLY
        # Each takes the request's header, its body and the response body to fill, status included.
        self._handlers: dict[int, Callable[[pb.BKPacketHeader, Any, Any], None]] = {
            pb.ADD_ENTRY: self._add,
            pb.READ_ENTRY: self._read,
            pb.WRITE_LAC: self._write_lac,
            pb.READ_LAC: self._read_lac,
            pb.GET_BOOKIE_INFO: self._bookie_info,
            pb.FORCE_LEDGER: self._force_ledger,
            pb.GET_LIST_OF_ENTRIES_OF_LEDGER: self._list_entries,
        }

    def respond(self, request: pb.Request) -> pb.Response:
        """The response to ``request``; the bookie has made what it changed durable before this returns."""
        header = request.header
        operation = header.operation
        handler = self._handlers.get(operation)
        if handler is None:
            return self._unserved(request)
        # PacketProcessorBaseV3.getHeader: the request's operation and txnId, version 3, no priority.
        response = pb.Response(
            header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=operation, txnId=header.txnId)
        )
        field = _BODY[operation]
        if not request.HasField(field):
            _log.info(
                "bookie %s: %s request %d without %s: EBADREQ", self.bookie_id, _name(request), header.txnId, field
            )
            response.status = pb.EBADREQ
            return response
        body, out = getattr(request, field), getattr(response, field.removesuffix("Request") + "Response")
        for name in _IDS:
            if name in body.DESCRIPTOR.fields_by_name and name in out.DESCRIPTOR.fields_by_name:
                setattr(out, name, getattr(body, name))
        if header.version != pb.VERSION_THREE:  # PacketProcessorBaseV3.isVersionCompatible
            out.status = pb.EBADVERSION
        else:
            handler(header, body, out)
        # Each processor copies its operation's status into the Response's (e.g. WriteEntryProcessorV3's callback).
        response.status = out.status
        return response

    def _unserved(self, request: pb.Request) -> pb.Response:
        """AUTH, START_TLS and the operations not served: the request's own header echoed (processRequest)."""
        response = pb.Response(header=request.header)
        operation = request.header.operation
        if operation == pb.AUTH:
            # The bookie's AuthHandler.ServerSideHandler (AuthenticationDisabledAuthProviderFactory) lets the
            # message through, and processRequest answers it: auth is not enabled.
            response.status = pb.EOK
            response.authResponse.authPluginName = AUTH_DISABLED_PLUGIN
            response.authResponse.payload = b""
            return response
        reason = "TLS is not configured" if operation == pb.START_TLS else "the operation is not served"
        _log.info("bookie %s: %s request %d: %s: EBADREQ", self.bookie_id, _name(request), request.header.txnId, reason)
        response.status = pb.EBADREQ
        return response

    def serve(self, request: Request) -> Reply:
        """Serve a request of :mod:`.protocol` (v3's and v2's alike), made durable before this returns."""
        reply = serve(self.bookie, request)
        if self.on_served is not None:
            self.on_served(request, reply)
        return reply

    def _serve(self, kind: RequestKind, header: pb.BKPacketHeader, ledger_id: int, **fields: Any) -> Reply:
        """Serve the request of :mod:`.protocol` that stands for this one: client 0, its operation the txnId."""
        return self.serve(Request(kind, 0, header.txnId, self.bookie_id, ledger_id, **fields))

    # -- the operations --------------------------------------------------------------------
    def _add(self, header: pb.BKPacketHeader, add: pb.AddRequest, out: pb.AddResponse) -> None:
        # DEFERRED_SYNC in writeFlags lets BookKeeper answer before the fsync; the reference bookie always waits.
        recovery = add.HasField("flag") and add.flag == pb.AddRequest.RECOVERY_ADD
        if self.read_only and header.priority <= 0:
            # WriteEntryProcessorV3.processPacket: a read-only bookie refuses all but high-priority writes (the
            # Java client sends a recovery's write-backs with priority); this one has room left for those.
            out.status = pb.EREADONLY
            if self.on_refused is not None:
                self.on_refused(add.ledgerId)
            return
        reply = self._serve(
            RequestKind.ADD,
            header,
            add.ledgerId,
            entry_id=add.entryId,
            recovery=recovery,
            data=add.body,
            master_key=add.masterKey,
        )
        out.status = _STATUS[reply.code]

    def long_poll(self, request: pb.Request) -> float | None:
        """Seconds a long-poll read waits for the bookie's LAC to pass its ``previousLAC`` (its ``timeOut``); None
        when it is not one, or is answered at once: the LAC is past already, the ledger is unknown, no ``timeOut``
        (``LongPollReadEntryProcessorV3.getLongPollReadResponse``)."""
        read = request.readRequest
        if request.header.operation != pb.READ_ENTRY or not _is_long_poll(read) or not read.HasField("timeOut"):
            return None
        if self.long_poll_done(request):
            return None
        return max(read.timeOut, 0) / 1000

    def long_poll_done(self, request: pb.Request) -> bool:
        """Has the bookie's LAC passed the long-poll read's ``previousLAC`` (or is the ledger unknown to it)?"""
        read = request.readRequest
        try:
            return self.bookie.read_last_add_confirmed(read.ledgerId) > read.previousLAC
        except NoSuchLedgerError:
            return True

    def _read(self, header: pb.BKPacketHeader, read: pb.ReadRequest, out: pb.ReadResponse) -> None:
        fence = read.HasField("flag") and read.flag == pb.ReadRequest.FENCE_LEDGER
        if _is_long_poll(read) and read.HasField("flag") and read.flag == pb.ReadRequest.ENTRY_PIGGYBACK:
            self._long_poll_read(header, read, out)
            return
        if fence and not read.HasField("masterKey"):  # ReadEntryProcessorV3: a fence needs the key
            out.status = pb.EUA
            return
        kind = RequestKind.RECOVERY_READ if fence else RequestKind.READ_ENTRY
        reply = self._serve(kind, header, read.ledgerId, entry_id=read.entryId, fence=fence, master_key=read.masterKey)
        out.status = _STATUS[reply.code]
        if reply.ok:
            out.body = reply.data
            # ReadEntryProcessorV3.readEntry: a plain read piggybacks the LAC the bookie knows, unless the
            # client asked for ENTRY_PIGGYBACK; a fencing read (sendFenceResponse) sends the body alone.
            if not fence and not (read.HasField("flag") and read.flag == pb.ReadRequest.ENTRY_PIGGYBACK):
                out.maxLAC = self.bookie.read_last_add_confirmed(read.ledgerId)

    def _long_poll_read(self, header: pb.BKPacketHeader, read: pb.ReadRequest, out: pb.ReadResponse) -> None:
        """``LongPollReadEntryProcessorV3.readEntry`` with ``ENTRY_PIGGYBACK``, once the wait is over: the LAC
        the bookie knows, and the entry after ``previousLAC`` when the LAC passed it (none when the bookie does
        not hold it: piggyback is best effort, the entries are striped)."""
        if read.entryId != LAST_ADD_CONFIRMED:  # a client bug, BookKeeper's bookie says
            _log.info(
                "bookie %s: entry piggyback asked for entry %d, not the LAC: EBADREQ", self.bookie_id, read.entryId
            )
            out.status = pb.EBADREQ
            return
        try:
            known = self.bookie.read_last_add_confirmed(read.ledgerId)
        except NoSuchLedgerError:
            out.status = pb.ENOLEDGER
            return
        out.maxLAC = known
        out.status = pb.EOK
        if known <= read.previousLAC:
            return
        reply = self._serve(RequestKind.READ_ENTRY, header, read.ledgerId, entry_id=read.previousLAC + 1)
        if reply.ok:  # ReadEntryProcessorV3.readEntry with readLACPiggyBack: the entry, under its own id
            out.body = reply.data
            out.entryId = read.previousLAC + 1

    def _write_lac(self, header: pb.BKPacketHeader, write: pb.WriteLacRequest, out: pb.WriteLacResponse) -> None:
        reply = self._serve(
            RequestKind.WRITE_LAC, header, write.ledgerId, lac=write.lac, data=write.body, master_key=write.masterKey
        )
        out.status = _STATUS[reply.code]

    def _read_lac(self, _: pb.BKPacketHeader, read: pb.ReadLacRequest, out: pb.ReadLacResponse) -> None:
        """ReadLacProcessorV3.getReadLacResponse: the explicit LAC buffer and the last entry, each if there is one."""
        try:
            explicit = self.bookie.read_explicit_lac_buffer(read.ledgerId)
        except NoSuchLedgerError:
            out.status = pb.ENOLEDGER
            return
        try:
            last: bytes | None = self.bookie.read_entry(read.ledgerId, LAST_ADD_CONFIRMED)
        except NoSuchEntryError:
            last = None
        if explicit is not None:
            out.lacBody = explicit
        if last is not None:
            out.lastEntryBody = last
        out.status = pb.ENOENTRY if explicit is None and last is None else pb.EOK

    def _bookie_info(self, _: pb.BKPacketHeader, info: pb.GetBookieInfoRequest, out: pb.GetBookieInfoResponse) -> None:
        usage = shutil.disk_usage(self.disk)
        if info.requested & pb.GetBookieInfoRequest.FREE_DISK_SPACE:
            out.freeDiskSpace = usage.free
        if info.requested & pb.GetBookieInfoRequest.TOTAL_DISK_CAPACITY:
            out.totalDiskCapacity = usage.total
        out.status = pb.EOK

    def _force_ledger(self, _: pb.BKPacketHeader, __: pb.ForceLedgerRequest, out: pb.ForceLedgerResponse) -> None:
        self.bookie.force_write()  # Journal.forceLedger: answered once the journal is fsynced
        out.status = pb.EOK

    def _list_entries(
        self, _: pb.BKPacketHeader, listed: pb.GetListOfEntriesOfLedgerRequest, out: pb.GetListOfEntriesOfLedgerResponse
    ) -> None:
        try:
            entries = self.bookie.list_entries(listed.ledgerId)
        except NoSuchLedgerError:
            out.status = pb.ENOLEDGER
            return
        out.availabilityOfEntriesOfLedger = availability_of_entries(entries)
        out.status = pb.EOK


_AVAILABILITY_HEADER = 64  # AvailabilityOfEntriesOfLedger.HEADER_SIZE
_SEQUENCE_GROUP = struct.Struct(">qqii")  # first sequence start, last sequence start, sequence size, period


def availability_of_entries(entries: list[int]) -> bytes:
    """Increasing entry ids in ``AvailabilityOfEntriesOfLedger``'s serialized form (the module docstring)."""
    runs: list[list[int]] = []  # [start, length]
    for entry in entries:
        if runs and runs[-1][0] + runs[-1][1] == entry:
            runs[-1][1] += 1
        else:
            runs.append([entry, 1])
    header = struct.pack(">ii", 0, len(runs)).ljust(_AVAILABILITY_HEADER, b"\0")
    return header + b"".join(_SEQUENCE_GROUP.pack(start, start, length, 0) for start, length in runs)


def _is_long_poll(read: pb.ReadRequest) -> bool:
    """``RequestUtils.isLongPollReadRequest``: not a fencing read, and a ``previousLAC``."""
    fence = read.HasField("flag") and read.flag == pb.ReadRequest.FENCE_LEDGER
    return not fence and read.HasField("previousLAC")


def _name(request: pb.Request) -> str:
    return str(pb.OperationType.Name(request.header.operation))
