"""An in-process BookKeeper cluster: reference bookies, a network of requests in flight, faults, one step at a time.

Nothing here moves on its own. Whoever drives the cluster (a test, the
simulation in :mod:`.simulation`, :meth:`InProcessCluster.run_until`) picks
each step, so a run is decided by its driver's choices and repeats exactly:

- ``deliver(request)``: the request's bookie serves it and the reply goes to
  its client at once, or is lost (``lose_reply``). This is the spec's
  atomicity: "a bookie's step serves a request and delivers its reply (or
  loses it)". A bookie journals and fsyncs what the request changed before
  it replies (its group commit runs inside the step), so what it answered
  is durable when the step ends;
- ``lose(request)``: the network drops a request;
- ``crash(bookie)``: the bookie stops; its file system loses power (or, with
  ``power_loss=False``, only its process dies). Requests in flight to it
  stay in flight, as in the spec: it serves them if it comes back;
- ``journal_unsynced(request)``, then ``power_off(bookie)``: the bookie takes
  an add into its journal and the machine loses power before the journal's
  fsync (two calls, so that a driver can look in between). A bookie that
  replies only after the fsync has sent nothing: for the spec the request
  was never served and stays in flight. A bookie that replied early has
  acknowledged an entry it no longer has;
- ``restart(bookie)``: a new reference bookie starts on the same files and
  replays its journal;
- ``timeout(client, request)``: the client gives up waiting for a reply that
  cannot come (the request or its reply was lost, or the bookie is down).

The bookies never checkpoint, so a restarted bookie replays its whole
journal and knows every LAC it was sent (after a checkpoint the reference
bookie would know the LAC of the ledger's last entry only, which a recovery
add, carrying none, can lower).

The network is a set of requests, as in the spec: sending a request equal
to one in flight sends nothing more. A request served to no effect (the
bookie had it all, the client ignored the reply) is, for the spec, still in
flight: its bookie step would be a stutter, which the spec leaves out. The
cluster keeps such requests aside (``unserved``) for the abstraction.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable

import attrs
from ledgerspec.reference.bookie import Bookie, BookieConfig, BookieLayout, FaultyFileSystem, NoSuchLedgerError
from ledgerspec.reference.ledger.client import BookKeeperClient
from ledgerspec.reference.ledger.errors import LedgerStateError
from ledgerspec.reference.ledger.events import EventLog, entry_payload
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.ledger.serving import answer, serve

__all__ = ["BookieNode", "BookieView", "InProcessCluster"]

# Journals roll over at 256 KiB (BookKeeper's maxJournalSizeMB, set low): the crash-injecting file
# system models each file's durable bytes, and a small current journal keeps each fsync cheap.
DEFAULT_BOOKIE_CONFIG = BookieConfig(journal_max_bytes=256 * 1024)

_SERVED_ACTION = {
    RequestKind.ADD: "BookieReceivesAdd",
    RequestKind.FENCE: "BookieReceivesFenceRead",
    RequestKind.RECOVERY_READ: "BookieReceivesRecoveryRead",
}


@attrs.frozen
class BookieView:
    """What a bookie holds of one ledger, in the spec's terms."""

    entries: frozenset[int]  # entry ids stored
    lac: int  # highest LAC piggybacked on an entry it stored
    fenced: bool
    payloads: frozenset[tuple[int, bytes | None]] = frozenset()  # (entry, the payload a read of it returns)
    explicit_lac: int = -1  # the explicit LAC it was sent last (-1: none)


class BookieNode:
    """One bookie of the cluster: a reference :class:`Bookie` on its own crash-injecting file system."""

    def __init__(self, number: int, address: str, root: str, *, sync_to_disk: bool, config: BookieConfig) -> None:
        self.number = number  # the spec's bookie number, 1 ..
        self.address = address  # its id in ledger metadata
        self.root = root
        os.makedirs(root, exist_ok=True)
        self.sync_to_disk = sync_to_disk
        self.fs = FaultyFileSystem(root, sync_to_disk=sync_to_disk)
        self.layout = BookieLayout.in_data_dir(root)
        self.config = config
        self.bookie: Bookie | None = None
        self._frozen: dict[int, BookieView] = {}  # views of a down bookie, taken when it stopped

    @property
    def up(self) -> bool:
        return self.bookie is not None

    def start(self) -> None:
        if self.bookie is not None:
            raise LedgerStateError(f"bookie {self.address} is already up")
        bookie = Bookie(self.layout, self.fs, self.config)
        bookie.start(checkpoint=False)
        self.bookie = bookie
        self._frozen = {}

    def stop(self, *, power_loss: bool) -> None:
        """The bookie's process dies (and, with ``power_loss``, the machine loses power)."""
        self._stop(self._views(self._live()), power_loss=power_loss)

    def lose_disk(self) -> None:
        """The stopped bookie's disk is gone: it is replaced by an empty one, and the bookie starts from nothing."""
        if self.bookie is not None:
            raise LedgerStateError(f"bookie {self.address} is up: only a stopped bookie loses its disk")
        self.fs.close()
        shutil.rmtree(self.root)
        os.makedirs(self.root)
        self.fs = FaultyFileSystem(self.root, sync_to_disk=self.sync_to_disk)
        self._frozen = {}

    def journals_add(self, request: Request) -> bool:
        """The bookie is up and would journal the add ``request``, its reply waiting for the fsync (no refusal)."""
        if self.bookie is None or request.kind is not RequestKind.ADD:
            return False
        return request.recovery or not self.bookie.is_fenced(request.ledger_id)

    def journal_unsynced(self, request: Request) -> tuple[bool, dict[int, BookieView]]:
        """The bookie takes the add ``request`` into its journal, written to the OS and not fsynced: whether it
        has acknowledged the add already (it should not have), and what it holds durably."""
        if not self.journals_add(request):
            raise LedgerStateError(f"{request!r}: bookie {self.address} would not journal this add")
        bookie = self._live()
        durable = self._views(bookie)  # every step before this one ended with the fsync: all of it is durable
        replies = len(bookie.replies)
        answer(bookie, request)
        bookie.journal_flush()
        return len(bookie.replies) > replies, durable

    def power_off(self, durable: dict[int, BookieView]) -> None:
        """The machine loses power in the middle of a step; ``durable`` is what the bookie holds on its disk."""
        self._stop(durable, power_loss=True)

    def _views(self, bookie: Bookie) -> dict[int, BookieView]:
        state = bookie.memory_state()
        ledgers = {lid for lid, _ in state.memtable} | state.fenced | {lid for lid, _ in state.lac}
        return {lid: self._view(bookie, lid) for lid in ledgers}

    def close(self) -> None:
        """Close the bookie's files (if it is up) and its file system, flushing nothing: the run is over."""
        if self.bookie is not None:
            self.bookie.close()
            self.bookie = None
        self.fs.close()

    def _stop(self, frozen: dict[int, BookieView], *, power_loss: bool) -> None:
        self._frozen = frozen
        self.bookie = None
        if power_loss:
            self.fs.power_loss()
        else:
            self.fs.restart_process()

    def _live(self) -> Bookie:
        if self.bookie is None:
            raise LedgerStateError(f"bookie {self.address} is down")
        return self.bookie

    def view(self, ledger_id: int) -> BookieView:
        """What the bookie holds of the ledger: read from it when up, as it was when it stopped when down."""
        if self.bookie is None:
            return self._frozen.get(ledger_id, BookieView(frozenset(), -1, False))
        return self._view(self.bookie, ledger_id)

    @staticmethod
    def _view(bookie: Bookie, ledger_id: int) -> BookieView:
        state = bookie.memory_state()
        entries = frozenset(e for lid, e in state.memtable | state.flushed if lid == ledger_id)
        try:
            lac = bookie.read_piggybacked_lac(ledger_id)
        except NoSuchLedgerError:
            lac = -1
        payloads = frozenset((e, entry_payload(bookie.read_entry(ledger_id, e))) for e in entries)
        explicit = dict(state.lac).get(ledger_id, -1)
        return BookieView(entries, lac, ledger_id in state.fenced, payloads, explicit)

    def serve(self, request: Request) -> tuple[Reply, bool]:
        """Serve one request, durably; the reply, and whether what the spec sees of the bookie changed."""
        bookie = self._live()
        before = self._seen(bookie, request) if request.in_spec else None
        reply = serve(bookie, request)
        changed = before is not None and self._seen(bookie, request) != before
        return reply, changed

    @staticmethod
    def _seen(bookie: Bookie, request: Request) -> tuple[bytes | None, int, bool]:
        """What the spec sees of the bookie that ``request`` can change: the entry stored (its payload), the LAC,
        the fence."""
        lid = request.ledger_id
        try:
            lac = bookie.read_piggybacked_lac(lid)
        except NoSuchLedgerError:
            return (None, -1, False)
        stored = None
        if bookie.read_path(lid, request.entry_id) is not None:
            stored = entry_payload(bookie.read_entry(lid, request.entry_id))
        return (stored, lac, bookie.is_fenced(lid))


class InProcessCluster:
    """Bookies ``bookie-1 .. bookie-N`` under ``root``, the network between them and the clients, and faults."""

    def __init__(
        self,
        root: str,
        bookies: int,
        *,
        sync_to_disk: bool = True,
        bookie_config: BookieConfig | None = None,
    ) -> None:
        config = bookie_config or DEFAULT_BOOKIE_CONFIG
        self.nodes: dict[str, BookieNode] = {}
        for n in range(1, bookies + 1):
            address = f"bookie-{n}"
            node = BookieNode(n, address, os.path.join(root, address), sync_to_disk=sync_to_disk, config=config)
            node.start()
            self.nodes[address] = node
        self.events = EventLog(self.number)
        self.clients: dict[int, BookKeeperClient] = {}
        self.in_flight: list[Request] = []  # requests sent and not yet served or lost, in the order sent
        self.unserved: set[Request] = set()  # served to no effect: in flight still, for the spec
        self.lost = 0  # spec messages lost: requests, and replies a client waited for
        self.crashes = 0

    # -- for clients (the Network protocol) --------------------------------------------
    def send(self, request: Request) -> None:
        if request.bookie not in self.nodes:
            raise LedgerStateError(f"{request!r}: no bookie {request.bookie} in this cluster")
        if request in self.unserved:
            self.unserved.discard(request)
        elif request in self.in_flight:
            return
        self.in_flight.append(request)

    def writable_bookies(self) -> list[str]:
        return [address for address, node in self.nodes.items() if node.up]

    def attach(self, client: BookKeeperClient) -> BookKeeperClient:
        self.clients[client.client_id] = client
        return client

    def number(self, address: str) -> int:
        """The spec's number of a bookie."""
        return self.nodes[address].number

    def node(self, bookie: str | int) -> BookieNode:
        return self.nodes[bookie if isinstance(bookie, str) else f"bookie-{bookie}"]

    # -- steps -------------------------------------------------------------------------
    def deliverable(self) -> list[Request]:
        """Requests in flight whose bookie is up."""
        return [r for r in self.in_flight if self.nodes[r.bookie].up]

    def deliver(self, request: Request, *, lose_reply: bool = False) -> bool:
        """The bookie serves ``request``; the reply reaches its client, or is lost. Whether anything changed."""
        node = self.nodes[request.bookie]
        if not node.up:
            raise LedgerStateError(f"{request!r}: bookie {request.bookie} is down")
        self.in_flight.remove(request)
        reply, changed = node.serve(request)
        client = self.clients.get(request.client)
        awaited = client is not None and client.awaits(reply)
        if lose_reply and awaited:
            replied = False
            if request.in_spec:
                self.lost += 1
        else:
            replied = True  # a reply nobody waits for is not lost: it arrives and is ignored
            if client is not None:
                client.deliver(reply)
        if request.kind is RequestKind.WRITE_LAC:
            self.events.bookie_took_lac(request)  # the spec's bookie takes every explicit LAC it is sent
        elif request.in_spec:
            if changed or awaited:
                self.events.bookie_served(_SERVED_ACTION[request.kind], request, replied)
            else:
                self.unserved.add(request)
        return changed or awaited

    def lose(self, request: Request) -> None:
        """The network drops a request in flight."""
        self.in_flight.remove(request)
        if request.in_spec:
            self.lost += 1
            self.events.lost(request)

    def close(self) -> None:
        """Close every bookie's files: the run is over (its directory may then be removed)."""
        for node in self.nodes.values():
            node.close()

    def crash(self, bookie: str, *, power_loss: bool = True) -> None:
        self.nodes[bookie].stop(power_loss=power_loss)
        self._crashed(bookie)

    def journal_unsynced(self, request: Request) -> dict[int, BookieView]:
        """First half of a crash before an fsync: the bookie of ``request`` (an add) journals it, not yet fsynced.

        A correct bookie sends nothing: for the spec it never took the request, which stays in flight. A bookie
        that acknowledges early has its reply delivered (and logged) here. Returns what the bookie holds durably,
        for :meth:`power_off`.
        """
        acknowledged, durable = self.nodes[request.bookie].journal_unsynced(request)
        if acknowledged:
            self.in_flight.remove(request)
            client = self.clients.get(request.client)
            if client is not None:
                client.deliver(Reply(request, ReplyCode.OK))
            self.events.bookie_served(_SERVED_ACTION[request.kind], request, True)
        return durable

    def power_off(self, bookie: str, durable: dict[int, BookieView]) -> None:
        """Second half of a crash before an fsync: the bookie's machine loses power; it keeps ``durable``."""
        self.nodes[bookie].power_off(durable)
        self._crashed(bookie)

    def _crashed(self, bookie: str) -> None:
        self.crashes += 1
        self.events.bookie("BookieCrashes", bookie)

    def restart(self, bookie: str) -> None:
        self.nodes[bookie].start()
        self.events.bookie("BookieRestarts", bookie)

    def reply_cannot_come(self, request: Request) -> bool:
        """The bookie is down, or no request like this one is in flight (the spec's ``timed_out``)."""
        if not self.nodes[request.bookie].up:
            return True
        key = request.spec_key
        return not any(r.spec_key == key for r in self.in_flight) and not any(r.spec_key == key for r in self.unserved)

    def timeouts(self) -> list[Request]:
        """Requests a client waits for whose reply cannot come."""
        return [r for c in self.clients.values() for r in c.awaited() if self.reply_cannot_come(r)]

    def timeout(self, request: Request) -> bool:
        """Client ``request.client`` gives up on ``request``; whether it did something about it."""
        if not self.reply_cannot_come(request):
            raise LedgerStateError(f"{request!r} can still be answered: no timeout")
        return self.clients[request.client].timeout(request)

    # -- driving it to an end, without faults ------------------------------------------
    def run_until(self, done: Callable[[], bool], *, max_steps: int = 1_000_000) -> int:
        """Deliver the oldest deliverable request, or take a local step, until ``done()``; the steps taken."""
        steps = 0
        while not done():
            if steps >= max_steps:
                raise LedgerStateError(f"not done after {max_steps} steps")
            deliverable = self.deliverable()
            if deliverable:
                self.deliver(deliverable[0])
            else:
                local = [s for c in self.clients.values() for s in c.local_steps()]
                if local:
                    self.clients[local[0].client].run_local(local[0])
                else:
                    stuck = self.timeouts()
                    if not stuck or not any(self.timeout(r) for r in stuck):
                        raise LedgerStateError("nothing left to do, and not done")
            steps += 1
        return steps

    def views(self, ledger_id: int) -> Iterable[tuple[int, BookieView]]:
        return ((node.number, node.view(ledger_id)) for node in self.nodes.values())
