"""Reference bookies on TCP: each one a listening socket, BookKeeper's v3 and v2 protocols, its ZooKeeper registration.

:class:`ServedBookies` starts ``count`` reference bookies, each on its own
directory (real journal, entry log and index files, through
:class:`~ledgerspec.reference.bookie.OsFileSystem`) and its own port, and
serves them from one asyncio event loop on a thread of its own. Given a
ZooKeeper, it registers each bookie there as BookKeeper's bookie does
(:mod:`.registration`), so that an unmodified BookKeeper client finds them.

A connection is served one request at a time, in the order the frames
arrive, and every bookie is served from the loop's one thread: the
reference bookie is not thread-safe, and its steps stay the ones its specs
name. A request that changes the bookie is answered after the journal's
fsync (:func:`~ledgerspec.reference.ledger.serving.serve`); that fsync
holds up the loop, so the bookies serve one request at a time in all.

Given ``trace``, the bookies record each request they serve, and their
crashes and restarts, in that one order (:mod:`.trace`); :meth:`ServedBookies.stop`
writes them as ledger-spec traces in the ``bookies`` observation mode, one
per ledger, in that file, with a ``manifest.json`` beside it.

Given ``metadata_proxy`` (a port, 0 for any) and a ZooKeeper, a proxy in
front of it (:mod:`.zookeeper_proxy`) serves ZooKeeper clients on that port
(:attr:`ServedBookies.metadata_address`), on the same loop, and tells the
trace of each ledger metadata write ZooKeeper accepted.

Given a fault plan or a control port (:mod:`.faults`), the bookies crash,
restart, lose or delay answers, fsync slowly, or turn read-only on command.

A frame the bookie cannot take (:class:`~.codec.FrameError`: a negative or
too long length, bytes that are neither a v3 nor a v2 request, a stream cut in the middle
of a frame) is logged with its reason, on the logger ``ledgerspec.wire``,
and closes its connection only, as BookKeeper's bookie closes the channel
(``BookieRequestHandler.exceptionCaught``); the bookie goes on serving the
others.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from ledgerspec.reference.bookie import Bookie, BookieConfig, BookieLayout, OsFileSystem
from ledgerspec.reference.ledger.protocol import Reply, Request
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata
from ledgerspec.reference.metadata.ledger_metadata_format import LedgerMetadataFormatError, decode_ledger_metadata
from ledgerspec.reference.metadata.ledger_paths import ledger_path
from ledgerspec.reference.wire import v2 as v2_protocol
from ledgerspec.reference.wire.codec import LENGTH, FrameError, decode_request, frame_length
from ledgerspec.reference.wire.faults import BookieFaults, FaultCommand, FaultError, parse_command
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb
from ledgerspec.reference.wire.registration import BookieRegistration, connect
from ledgerspec.reference.wire.service import WireService
from ledgerspec.reference.wire.trace import ServedTrace
from ledgerspec.reference.wire.zookeeper_proxy import MetadataWrite, ZooKeeperProxy

__all__ = ["ServedBookie", "ServedBookies"]

_log = logging.getLogger("ledgerspec.wire")
_T = TypeVar("_T")
_LOOP_TIMEOUT = 60.0
#: How often a waiting long-poll read looks at the bookie's LAC again: the adds that move it run on the same loop.
_LONG_POLL_STEP = 0.002


class ServedBookie:
    """One reference bookie and its listening socket, on the loop of :class:`ServedBookies`."""

    def __init__(
        self, number: int, directory: Path, host: str, config: BookieConfig, trace: ServedTrace | None = None
    ) -> None:
        self.number = number
        self.trace = trace  # told of each request served, and of each restart
        self.directory = directory
        self.host = host
        self.layout = BookieLayout.in_data_dir(str(directory))
        os.makedirs(directory, exist_ok=True)
        self.config = config
        self.bookie = Bookie(self.layout, OsFileSystem(), config)
        self.port = 0
        self.service: WireService | None = None
        self.registration: BookieRegistration | None = None
        self._server: asyncio.Server | None = None
        self._open: dict[asyncio.Task[None], asyncio.StreamWriter] = {}  # the connections being served
        self.connections = 0  # connections accepted
        self.operations: collections.Counter[str] = collections.Counter()  # requests answered, by operation
        self.closed_for_bad_frames = 0  # connections closed because of a frame the bookie could not take
        self.faults = BookieFaults()  # what it is told to do wrong (:mod:`.faults`)
        self.replies_dropped = 0  # requests served whose answer a fault kept back
        self._traced: object | None = None  # the trace's step of the request being answered, if it made one
        self.on_answered: Callable[[], None] | None = None  # told after each request answered (a fault plan)

    @property
    def running(self) -> bool:
        """Is it listening (started, and not crashed or stopped since)?"""
        return self._server is not None

    @property
    def bookie_id(self) -> str:
        """Its id in ledger metadata: ``host:port``, as BookKeeper's bookie makes it with ``advertisedAddress``."""
        return f"{self.host}:{self.port}"

    async def listen(self, port: int) -> None:
        """Start the bookie (it replays its journal) and listen on ``port`` (0: one the system picks)."""
        if self.service is not None:  # a restart: a new bookie on the same files, as a new process
            self.bookie = Bookie(self.layout, OsFileSystem(), self.config)
        restart = self.service is not None
        self.bookie.start()
        self._server = await asyncio.start_server(self._serve_connection, self.host, port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        self.service = WireService(
            self.bookie, self.bookie_id, str(self.directory), self._served, self.trace.refused if self.trace else None
        )
        if restart and self.trace is not None:
            self.trace.restarted(self.number, self.bookie)

    def _served(self, request: Request, reply: Reply) -> None:
        if self.trace is not None:
            self._traced = self.trace.served(self.number, self.bookie, request, reply)

    async def close(self, *, clean: bool = True) -> None:
        """Stop listening and drop every connection; then stop the bookie: ``clean``, flushed and checkpointed;
        else as its process dying, its files left as they are (every answered request was fsynced)."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        # Server.close leaves the open connections open (Python 3.11): each is cut, and its reader sees the end.
        for writer in self._open.values():
            writer.transport.abort()
        await asyncio.gather(*self._open, return_exceptions=True)
        if self.bookie.up:
            if clean:
                self.bookie.shutdown()  # force write, checkpoint, close
            else:
                self.bookie.close()

    async def _serve_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        peer = writer.get_extra_info("peername")
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = writer
        v2 = False  # the connection speaks v2 from its first frame that is not v3 on (RequestDecoder.channelRead)
        polls: set[asyncio.Task[None]] = set()  # long-poll reads waiting, each answered on its own
        try:
            while (payload := await self._read_payload(reader)) is not None:
                request = self._decode(payload, v2, peer)
                v2 = isinstance(request, v2_protocol.V2Request)
                assert self.service is not None  # set before the bookie listens
                if isinstance(request, pb.Request) and (wait := self.service.long_poll(request)) is not None:
                    polls.add(asyncio.create_task(self._answer_long_poll(request, wait, writer)))
                    polls = {p for p in polls if not p.done()}
                    continue
                self._traced = None
                answer, operation, changes = self._answer(request)
                send, wait = self.faults.answer(operation, changes)
                if not send and self.trace is not None and self._traced is not None:
                    self.trace.reply_dropped(self._traced)  # before any await: the step this request made
                if wait:
                    await asyncio.sleep(wait)
                if send:
                    writer.write(LENGTH.pack(len(answer)) + answer)
                    await writer.drain()
                else:
                    self.replies_dropped += 1
                    _log.info("bookie %s: the answer to a %s request is dropped (a fault)", self.bookie_id, operation)
                if self.on_answered is not None:
                    self.on_answered()
        except FrameError as exc:
            self.closed_for_bad_frames += 1
            _log.warning("bookie %s: closing the connection from %s: %s", self.bookie_id, peer, exc)
        except ConnectionError as exc:
            _log.info("bookie %s: the connection from %s broke: %s", self.bookie_id, peer, exc)
        except Exception:
            _log.exception("bookie %s: closing the connection from %s after an error", self.bookie_id, peer)
        finally:
            for poll in polls:
                poll.cancel()
            self._open.pop(task, None)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer_long_poll(self, request: pb.Request, wait: float, writer: asyncio.StreamWriter) -> None:
        """Answer a long-poll read once the LAC passed its ``previousLAC`` or ``wait`` seconds went by; the requests
        after it on the connection are served meanwhile (``LongPollReadEntryProcessorV3`` waits on a watcher)."""
        assert self.service is not None
        deadline = asyncio.get_running_loop().time() + wait
        while not self.service.long_poll_done(request) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(_LONG_POLL_STEP)
        self.operations[pb.OperationType.Name(request.header.operation)] += 1
        answer = self.service.respond(request).SerializeToString()
        writer.write(LENGTH.pack(len(answer)) + answer)

    def _decode(self, payload: bytes, v2: bool, peer: object) -> pb.Request | v2_protocol.V2Request:
        """The request in one frame: a v3 one, until the first frame that is not (then v2 from there on)."""
        if not v2:
            try:
                return decode_request(payload)
            except FrameError as not_v3:
                try:
                    decoded = v2_protocol.decode(payload)
                except FrameError as not_v2:
                    raise FrameError(f"{not_v3}; nor is it v2: {not_v2}") from None
                _log.info("bookie %s: the connection from %s speaks the v2 protocol", self.bookie_id, peer)
                return decoded
        return v2_protocol.decode(payload)

    def _answer(self, request: pb.Request | v2_protocol.V2Request) -> tuple[bytes, str, bool]:
        """The answer to one request; its operation (a v2 one by its v3 name), and whether it changed the bookie
        (an add, a fencing read, an explicit LAC)."""
        assert self.service is not None
        if isinstance(request, v2_protocol.V2Request):
            return (self._answer_v2(request), *_v2_operation(request))
        operation = pb.OperationType.Name(request.header.operation)
        self.operations[operation] += 1
        read = request.readRequest
        fencing = request.HasField("readRequest") and read.HasField("flag") and read.flag == pb.ReadRequest.FENCE_LEDGER
        changes = operation in ("ADD_ENTRY", "WRITE_LAC") or fencing
        return self.service.respond(request).SerializeToString(), operation, changes

    def _answer_v2(self, request: v2_protocol.V2Request) -> bytes:
        assert self.service is not None
        self.operations[f"v2:{v2_protocol.OP_NAMES[request.op]}"] += 1
        return v2_protocol.respond(self.service, request)

    @staticmethod
    async def _read_payload(reader: asyncio.StreamReader) -> bytes | None:
        """The next frame's bytes, or None when the client closed the connection between two frames."""
        try:
            prefix = await reader.readexactly(LENGTH.size)
        except asyncio.IncompleteReadError as exc:
            if not exc.partial:
                return None
            raise FrameError(f"the connection closed inside a frame's length ({len(exc.partial)} of 4 bytes)") from None
        length = frame_length(prefix)
        try:
            payload = await reader.readexactly(length)
        except asyncio.IncompleteReadError as exc:
            raise FrameError(f"the connection closed after {len(exc.partial)} of the frame's {length} bytes") from None
        return payload


def _v2_operation(request: v2_protocol.V2Request) -> tuple[str, bool]:
    """A v2 request's operation by its v3 name, and whether it changes the bookie."""
    if request.op == v2_protocol.ADDENTRY:
        return "ADD_ENTRY", True
    if request.op == v2_protocol.READENTRY:
        return "READ_ENTRY", bool(request.flags & v2_protocol.FLAG_DO_FENCING)
    return v2_protocol.OP_NAMES.get(request.op, str(request.op)), False


class ServedBookies:
    """``count`` reference bookies under ``root`` (``bookie-1`` ..), served on ``host``; a context manager.

    ``ports`` fixes each bookie's port (0, the default: one the system picks).
    With ``zookeeper`` (``host:port``), each bookie registers under
    ``ledgers_root`` there, in a ZooKeeper session of its own. With
    ``trace``, a file, the bookies record what they serve and :meth:`stop`
    writes it there (module docstring). ``plan`` is a fault plan
    (:mod:`.faults`); with ``control`` (a port, 0 for any), a control port
    takes fault commands as the bookies run (:attr:`control_port`).
    """

    def __init__(
        self,
        root: Path,
        count: int,
        *,
        host: str = "127.0.0.1",
        ports: Sequence[int] | None = None,
        zookeeper: str | None = None,
        ledgers_root: str = "/ledgers",
        config: BookieConfig | None = None,
        trace: Path | None = None,
        plan: Sequence[FaultCommand] = (),
        control: int | None = None,
        metadata_proxy: int | None = None,
    ) -> None:
        if count < 1:
            raise ValueError(f"serve at least one bookie, not {count}")
        if ports is not None and len(ports) != count:
            raise ValueError(f"{len(ports)} ports given for {count} bookies")
        self.ports = list(ports) if ports is not None else [0] * count
        self.zookeeper = zookeeper
        self.ledgers_root = ledgers_root
        config = config or BookieConfig()
        self.trace = ServedTrace(trace, count, config.mutant, ledgers_root) if trace is not None else None
        if metadata_proxy is not None and zookeeper is None:
            raise ValueError("a proxy for the clients' metadata writes needs the ZooKeeper it passes them to")
        self.proxy: ZooKeeperProxy | None = None
        if metadata_proxy is not None and zookeeper is not None:
            self.proxy = ZooKeeperProxy(zookeeper, self._metadata_written, host)
            if self.trace is not None:
                self.trace.metadata_recorded = True
        self._proxy_port = metadata_proxy
        self.bookies = [ServedBookie(n, root / f"bookie-{n}", host, config, self.trace) for n in range(1, count + 1)]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="ledgerspec-bookies", daemon=True)
        bad = [c for c in plan if not 1 <= c.bookie <= count]
        if bad:
            raise FaultError(f"the fault plan names bookie {bad[0].bookie}; the bookies are 1 .. {count}")
        self._plan = list(plan)  # commands not applied yet
        self.answered = 0  # requests the bookies answered in all: a plan's clock
        self.applied: list[FaultCommand] = []  # fault commands applied so far, in order
        self._control = control
        self._control_server: asyncio.Server | None = None
        self.control_port: int | None = None
        for bookie in self.bookies:
            bookie.on_answered = self._answered

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(_LOOP_TIMEOUT)

    def start(self) -> ServedBookies:
        """Start every bookie (each replays its journal), listen, then register each with ZooKeeper; then apply
        the plan's first commands and open the control port."""
        self._thread.start()
        for bookie, port in zip(self.bookies, self.ports, strict=True):
            self._run(bookie.listen(port))
            _log.info("bookie %d serving on %s, files in %s", bookie.number, bookie.bookie_id, bookie.directory)
        for bookie in self.bookies:
            self._register(bookie)
        if self.proxy is not None:
            self._run(self.proxy.start(self._proxy_port or 0))
            _log.info("ZooKeeper %s served to clients on %s, its writes recorded", self.zookeeper, self.proxy.address)
        self._run(self._apply_due())
        if self._control is not None:
            self._run(self._open_control(self._control))
        return self

    # -- faults ---------------------------------------------------------------------------------
    def apply(self, command: FaultCommand) -> None:
        """Apply a fault command now (:mod:`.faults`); :class:`FaultError` when it cannot be (a restart of a
        bookie that runs)."""
        self._run(self._apply(command))

    async def _apply(self, command: FaultCommand) -> None:
        bookie = self.bookies[command.bookie - 1]
        running = bookie.running
        if command.fault == "crash":
            if not running:
                raise FaultError(f"bookie {command.bookie} is not running: it cannot crash")
            self._leave(bookie)
            await bookie.close(clean=False)
            if self.trace is not None:
                self.trace.crashed(command.bookie)
        elif command.fault == "restart":
            if running:
                raise FaultError(f"bookie {command.bookie} is running: crash it first")
            await bookie.listen(bookie.port)
            self._register(bookie)
        else:
            bookie.faults.apply(command)
            if command.fault in ("read-only", "writable"):
                assert bookie.service is not None
                bookie.service.read_only = bookie.faults.read_only
                if bookie.registration is not None:
                    bookie.registration.set_read_only(
                        bookie.bookie_id, bookie.host, bookie.port, bookie.faults.read_only
                    )
        self.applied.append(command)
        _log.info("bookie %d: fault %s", command.bookie, command.to_json())

    def _answered(self) -> None:
        self.answered += 1
        if any(c.after <= self.answered for c in self._plan):
            self._loop.create_task(self._apply_due())

    async def _apply_due(self) -> None:
        """Apply the plan's commands whose time has come, in the plan's order."""
        due = [c for c in self._plan if c.after <= self.answered]
        self._plan = [c for c in self._plan if c.after > self.answered]
        for command in due:
            try:
                await self._apply(command)
            except FaultError as exc:
                _log.warning("the fault plan's %s cannot be applied: %s", command.to_json(), exc)

    async def _open_control(self, port: int) -> None:
        self._control_server = await asyncio.start_server(self._serve_control, "127.0.0.1", port)
        self.control_port = int(self._control_server.sockets[0].getsockname()[1])
        _log.info("fault control port on 127.0.0.1:%d", self.control_port)

    @staticmethod
    async def _close_control(server: asyncio.Server) -> None:
        server.close()  # on the loop's thread: an asyncio server is not thread-safe
        await server.wait_closed()

    async def _serve_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One JSON command a line, answered with one JSON line; a bad one is answered with what is wrong."""
        line_number = 0
        with contextlib.suppress(ConnectionError):
            while line := await reader.readline():
                line_number += 1
                try:
                    try:
                        value = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise FaultError(f"control line {line_number}: not JSON: {exc.msg}") from None
                    command = parse_command(value, f"control line {line_number}", len(self.bookies))
                    await self._apply(command)
                    answer = {"ok": True, "applied": command.to_json()}
                except FaultError as exc:
                    answer = {"ok": False, "error": str(exc)}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        writer.close()

    def _register(self, bookie: ServedBookie) -> None:
        if self.zookeeper is not None:
            bookie.registration = BookieRegistration(self.zookeeper, self.ledgers_root)
            bookie.registration.register(
                bookie.bookie_id, bookie.host, bookie.port, bookie.layout.journal_dir, bookie.layout.ledger_dirs
            )

    @staticmethod
    def _leave(bookie: ServedBookie) -> None:
        if bookie.registration is not None:
            bookie.registration.close()
            bookie.registration = None

    def crash(self, n: int) -> None:
        """Bookie ``n``'s process dies: its connections drop, its files stay as they are, and it leaves ZooKeeper.

        Its ZooKeeper session ends at once: a real crash leaves the znode
        until the session times out, and a restart waits for that
        (``ZKRegistrationManager.checkRegNodeAndWaitExpired``).
        """
        self.apply(FaultCommand("crash", n))

    def shut_down(self, n: int) -> None:
        """Stop bookie ``n`` the orderly way: it leaves ZooKeeper, drops its connections, flushes and checkpoints."""
        bookie = self.bookies[n - 1]
        running = bookie.running
        self._leave(bookie)
        self._run(bookie.close(clean=True))
        if self.trace is not None and running:
            self.trace.crashed(n)  # the spec's bookie stops one way: its crash, which loses nothing it stored

    def restart(self, n: int) -> None:
        """Start bookie ``n`` again on its files and its port: it replays its journal and registers again."""
        self.apply(FaultCommand("restart", n))

    def on_bookie(self, n: int, look: Callable[[Bookie], _T]) -> _T:
        """``look(bookie)`` for bookie ``n``'s reference bookie, on the loop's thread, between two requests."""
        bookie = self.bookies[n - 1]

        async def call() -> _T:
            return look(bookie.bookie)

        return self._run(call())

    @property
    def bookie_ids(self) -> list[str]:
        return [b.bookie_id for b in self.bookies]

    @property
    def metadata_address(self) -> str | None:
        """``host:port`` of the proxy in front of ZooKeeper that records the clients' metadata writes, if any: the
        ZooKeeper a client should connect to."""
        return self.proxy.address if self.proxy is not None and self.proxy.port is not None else None

    def _metadata_written(self, write: MetadataWrite) -> None:
        if self.trace is not None:
            self.trace.metadata_written(write)

    def write_trace(self) -> Path | None:
        """Write what the bookies served so far as traces (module docstring); None when not tracing, or when no
        bookie has served a request of a ledger yet (a trace file holds at least one event)."""
        if self.trace is None or not self.trace.ledgers():
            return None
        if self.zookeeper is None:
            return self.trace.write()
        numbers = {b.bookie_id: b.number for b in self.bookies}
        unrecorded = self.proxy.unreadable if self.proxy is not None else ()
        zk = connect(self.zookeeper)
        try:
            return self.trace.write(lambda ledger: self._stored(zk, ledger), numbers, unrecorded)
        finally:
            zk.stop()
            zk.close()

    def _stored(self, zk: KazooClient, ledger: int) -> tuple[LedgerMetadata, int] | None:
        """A ledger's metadata in ZooKeeper now, and its version; None without, or where it is not BookKeeper's
        (logged: its trace is then written with the served bookies' numbers and no quorums)."""
        try:
            data, stat = zk.get(ledger_path(ledger, self.ledgers_root))
            return decode_ledger_metadata(data, ledger), stat.version
        except NoNodeError:
            return None
        except LedgerMetadataFormatError as exc:
            _log.warning("ledger %d: its metadata in ZooKeeper is not read: %s", ledger, exc)
            return None

    def stop(self) -> None:
        """Close the proxy in front of ZooKeeper, if any (no write is recorded after); write the trace, if any; leave
        ZooKeeper, stop listening, and stop each bookie the clean way (its files flushed)."""
        if self._thread.is_alive():
            if self.proxy is not None:
                self._run(self.proxy.close())
            self.write_trace()
        for bookie in self.bookies:
            self._leave(bookie)
        if self._thread.is_alive():
            if self._control_server is not None:
                self._run(self._close_control(self._control_server))
            for bookie in self.bookies:
                self._run(bookie.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_LOOP_TIMEOUT)
        self._loop.close()

    def __enter__(self) -> ServedBookies:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()
