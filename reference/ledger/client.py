"""The ledger client: create, write, close, recover and read ledgers over a network of bookies.

:class:`BookKeeperClient` is the driver around the I/O-free cores
(:mod:`.writer`, :mod:`.recovery`, :mod:`.reader`): it sends the requests
they hand out through a :class:`Network`, gives them the replies the
network delivers, runs the metadata compare-and-sets they ask for on a
:class:`~ledgerspec.reference.metadata.LedgerMetadataStore`, and completes
the application's futures. It does nothing on its own: every step is a
call, by the application (``create_ledger``, ``add_entry``, ``close``,
``open_ledger``) or by the network (``deliver``, ``timeout``), or a *local
step* it offers (``local_steps``: the close at the end of a recovery, an
explicit LAC) for whoever drives it to take. The in-process cluster (:mod:`.cluster`) drives it one step at a time.

Each step that the ledger spec names is logged to the :class:`~.events.EventLog`
by the part that takes it.

Mutants (``ClientConfig.mutant``) are real bugs made on purpose, each a
switch marked ``MUTANT`` in the code, for the refinement and conformance
checks to catch.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Protocol

import attrs
from ledgerspec.reference.bookie.entry import DigestType
from ledgerspec.reference.ledger.errors import (
    LedgerClosedError,
    LedgerFencedError,
    LedgerStateError,
    NotEnoughBookiesError,
    ReadBeyondLacError,
    RecoveryFailedError,
)
from ledgerspec.reference.ledger.events import EventLog
from ledgerspec.reference.ledger.protocol import Reply, Request, RequestKind
from ledgerspec.reference.ledger.reader import EntryRead, LacRead
from ledgerspec.reference.ledger.recovery import LedgerRecovery, RecoveryPhase
from ledgerspec.reference.ledger.writer import LedgerWriter, WriterStatus
from ledgerspec.reference.metadata import (
    BadVersionError,
    LedgerMetadata,
    LedgerMetadataStore,
    LedgerState,
    VersionedMetadata,
)
from ledgerspec.reference.metadata import DigestType as MetadataDigestType

__all__ = [
    "MUTANTS",
    "BookKeeperClient",
    "ClientConfig",
    "LedgerHandle",
    "LocalStep",
    "Network",
    "OrderedPlacement",
    "PlacementPolicy",
    "RandomPlacement",
    "ReadHandle",
    "RecoveryOpen",
    "master_key",
]

MUTANTS = {
    "lac_before_qa": "an add completes, and the LAC moves, on the first ack instead of Qa acks",
    "complete_out_of_order": "an add completes on its Qa acks without waiting for the adds before it",
    "fence_qa_total": "fencing counted complete after Qa replies in all, not Qw - Qa + 1 in every write set",
    "recovery_read_no_fence": "recovery reads do not set the fencing flag (apache/bookkeeper#2614)",
    "ensemble_change_local": "an ensemble change is kept in the writer only, not written to the metadata (#1591)",
    "resend_with_current_lac": (
        "after an ensemble change, a pending add is resent with the writer's current LAC, not the LAC it was "
        "packaged with"
    ),
    "resend_reused_buffer": (
        "after an ensemble change, a pending add is resent with the bytes of the newest add (a buffer reused too "
        "early), not the bytes it was packaged with"
    ),
    "close_at_last_add_pushed": "the writer closes the ledger at lastAddPushed with adds still pending, not at its LAC",
    "recovery_change_ends_at_lac": (
        "a recovery that replaces a bookie of its write-back drops the write-backs still pending and closes at its "
        "handle's LAC"
    ),
    "explicit_lac_sends_lap": (
        "the writer's explicit LAC is its lastAddPushed, sent while adds are pending, not its lastAddConfirmed"
    ),
    "undecided_read_ends_ledger": (
        "a recovery read left undecided by bookies that are down takes the entry for missing and closes the ledger "
        "before it, instead of failing the recovery"
    ),
}


def _check_mutant(_: object, __: object, value: str | None) -> None:
    if value is not None and value not in MUTANTS:
        raise ValueError(f"unknown mutant {value!r}; known mutants: {', '.join(MUTANTS)}")


@attrs.frozen
class ClientConfig:
    """The client's settings (BookKeeper's ``ClientConfiguration`` names in the comments)."""

    digest_type: DigestType = DigestType.CRC32C  # the digest of new ledgers' entries
    max_pending_adds: int = 0  # adds a handle keeps pending at most (the spec's Throttle); 0: no limit
    explicit_lac: bool = True  # send the LAC on its own when the writer is idle (explicitLacInterval > 0)
    mutant: str | None = attrs.field(default=None, validator=_check_mutant)  # a seeded bug from MUTANTS


def master_key(password: bytes) -> bytes:
    """The ledger's master key, as BookKeeper derives it: SHA-1 of ``"ledger"`` and the password."""
    return hashlib.sha1(b"ledger" + password).digest()


_TO_METADATA = {DigestType.CRC32C: MetadataDigestType.CRC32C, DigestType.CRC32: MetadataDigestType.CRC32}
_FROM_METADATA = {v: k for k, v in _TO_METADATA.items()}


def _entry_digest(md: LedgerMetadata) -> DigestType:
    if md.digest_type not in _FROM_METADATA:
        name = md.digest_type.name if md.digest_type is not None else "none"
        raise LedgerStateError(f"ledger {md.ledger_id}: digest type {name} is not supported by this client")
    return _FROM_METADATA[md.digest_type]


class Network(Protocol):
    """What the client needs of the network: send a request; which bookies take new ledgers."""

    def send(self, request: Request) -> None: ...

    def writable_bookies(self) -> list[str]: ...


class PlacementPolicy(Protocol):
    """Chooses bookies for a new ensemble and replacements for failed ones (``EnsemblePlacementPolicy``)."""

    def new_ensemble(self, size: int, writable: Sequence[str]) -> list[str]: ...

    def replacement(self, ensemble: Sequence[str], writable: Sequence[str]) -> str | None: ...


def _enough(size: int, writable: Sequence[str]) -> None:
    if len(writable) < size:
        raise NotEnoughBookiesError(size, list(writable))


class RandomPlacement:
    """Bookies drawn at random, as BookKeeper's default policy does; seeded, so runs repeat."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def new_ensemble(self, size: int, writable: Sequence[str]) -> list[str]:
        _enough(size, writable)
        return self.rng.sample(list(writable), size)

    def replacement(self, ensemble: Sequence[str], writable: Sequence[str]) -> str | None:
        candidates = [b for b in writable if b not in ensemble]
        return self.rng.choice(candidates) if candidates else None


class OrderedPlacement:
    """The first writable bookies, in the order given: the spec's first ensemble is bookies 1 .. E."""

    def new_ensemble(self, size: int, writable: Sequence[str]) -> list[str]:
        _enough(size, writable)
        return list(writable[:size])

    def replacement(self, ensemble: Sequence[str], writable: Sequence[str]) -> str | None:
        return next((b for b in writable if b not in ensemble), None)


class StepKind(enum.Enum):
    RECOVERY_CLOSE = "recovery-close"  # a recovery's close, once its write-back is acked
    EXPLICIT_LAC = "explicit-lac"  # the writer's LAC, sent on its own


@attrs.frozen
class LocalStep:
    """A step a client can take on its own, offered to whoever drives it."""

    kind: StepKind
    client: int
    op: int


class _Operation:
    """An operation of the client that sends requests and takes their replies."""

    op: int

    def awaits(self, reply: Reply) -> bool:
        raise NotImplementedError

    def deliver(self, reply: Reply) -> None:
        raise NotImplementedError

    def awaited(self) -> list[Request]:
        return []

    def timeout(self, request: Request) -> bool:
        return False

    def local_steps(self) -> list[StepKind]:
        return []

    def run_local(self, kind: StepKind) -> None:
        raise LedgerStateError(f"operation {self.op} has no step {kind.value}")


class BookKeeperClient:
    """One client of a BookKeeper cluster (see the module docstring)."""

    def __init__(
        self,
        client_id: int,
        ledgers: LedgerMetadataStore,
        network: Network,
        *,
        config: ClientConfig | None = None,
        placement: PlacementPolicy | None = None,
        events: EventLog | None = None,
    ) -> None:
        self.client_id = client_id  # the spec's client id: 0 for the writer, 1.. for recovering clients
        self.ledgers = ledgers
        self.network = network
        self.config = config or ClientConfig()
        self.placement = placement or RandomPlacement(random.Random(client_id))
        self.events = events
        self._ops: dict[int, _Operation] = {}
        self._op_ids = itertools.count(1)

    # -- the application's calls ---------------------------------------------------------
    def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        password: bytes = b"",
        ledger_id: int | None = None,
    ) -> LedgerHandle:
        """A new OPEN ledger on ``ensemble_size`` writable bookies; :class:`NotEnoughBookiesError` if too few."""
        ensemble = self.placement.new_ensemble(ensemble_size, self.network.writable_bookies())
        lid = self.ledgers.new_ledger_id() if ledger_id is None else ledger_id
        metadata = LedgerMetadata(
            lid,
            ensemble_size,
            write_quorum,
            ack_quorum,
            [(0, ensemble)],
            digest_type=_TO_METADATA[self.config.digest_type],
            password=password,
        )
        handle = LedgerHandle(self, next(self._op_ids), self.ledgers.create(metadata), password)
        self._ops[handle.op] = handle
        if self.events is not None:
            self.events.init()
        return handle

    def open_ledger(self, ledger_id: int, *, password: bytes = b"") -> ReadHandle:
        """Open without recovery: a reader of the entries up to the LAC (or the last entry, once closed)."""
        return ReadHandle(self, self.ledgers.read(ledger_id).metadata, password)

    def recover_ledger(self, ledger_id: int, *, password: bytes = b"") -> RecoveryOpen:
        """Open with recovery: fence the ledger, recover its last entries, close it (RecovererStartsRecovery).

        The returned operation's ``future`` gives a :class:`ReadHandle` on the closed ledger.
        """
        recovery = RecoveryOpen(self, next(self._op_ids), ledger_id, password)
        self._ops[recovery.op] = recovery
        recovery.start()
        return recovery

    def writers(self) -> list[LedgerHandle]:
        """The ledgers this client created and writes, in the order created."""
        return [op for op in self._ops.values() if isinstance(op, LedgerHandle)]

    def recoveries(self) -> list[RecoveryOpen]:
        """The opens with recovery this client started, in the order started."""
        return [op for op in self._ops.values() if isinstance(op, RecoveryOpen)]

    # -- the network's calls --------------------------------------------------------------
    def awaits(self, reply: Reply) -> bool:
        """Would this reply change the client?"""
        op = self._ops.get(reply.request.op)
        return op is not None and op.awaits(reply)

    def deliver(self, reply: Reply) -> bool:
        """Take a reply; whether it changed the client."""
        op = self._ops.get(reply.request.op)
        if op is None or not op.awaits(reply):
            return False
        op.deliver(reply)
        return True

    def awaited(self) -> list[Request]:
        """Every request whose reply the client still waits for."""
        return [r for op in self._ops.values() for r in op.awaited()]

    def timeout(self, request: Request) -> bool:
        """No reply can come for ``request``; whether the client did something about it."""
        op = self._ops.get(request.op)
        return op is not None and op.timeout(request)

    def local_steps(self) -> list[LocalStep]:
        return [LocalStep(kind, self.client_id, op.op) for op in self._ops.values() for kind in op.local_steps()]

    def run_local(self, step: LocalStep) -> None:
        self._ops[step.op].run_local(step.kind)

    # -- for the operations ---------------------------------------------------------------
    def _send(self, requests: list[Request]) -> None:
        for request in requests:
            self.network.send(request)

    def _register(self, op: _Operation) -> None:
        self._ops[op.op] = op

    def _new_op(self) -> int:
        return next(self._op_ids)


class LedgerHandle(_Operation):
    """The writer's handle on a ledger it created."""

    def __init__(self, client: BookKeeperClient, op: int, metadata: VersionedMetadata, password: bytes) -> None:
        self.client = client
        self.op = op
        self.writer = LedgerWriter(
            client.client_id,
            op,
            metadata,
            master_key(password),
            _entry_digest(metadata.metadata),
            max_pending=client.config.max_pending_adds,
            mutant=client.config.mutant,
        )
        self._adds: dict[int, Future[int]] = {}
        self._close: Future[None] | None = None

    @property
    def ledger_id(self) -> int:
        return self.writer.ledger_id

    @property
    def last_add_confirmed(self) -> int:
        return self.writer.lac

    @property
    def last_add_pushed(self) -> int:
        return self.writer.lap

    @property
    def status(self) -> WriterStatus:
        return self.writer.status

    def _log(self, action: str, *bookies: str, at: float | None = None) -> None:
        if self.client.events is not None:
            self.client.events.writer(action, *bookies, at=at)

    def add_entry(self, payload: bytes) -> Future[int]:
        """Push an entry (WriterAddsEntry); the future gives its id once it and every entry before it completed."""
        entry_id, requests = self.writer.add(payload)
        future: Future[int] = Future()
        self._adds[entry_id] = future
        if self.client.events is not None:
            self.client.events.writer_added(entry_id, payload, self.writer.add_lacs[entry_id])
        self.client._send(self._with_key(requests))
        return future

    def _with_key(self, requests: list[Request]) -> list[Request]:
        return [attrs.evolve(r, master_key=self.writer.master_key) for r in requests]

    def awaits(self, reply: Reply) -> bool:
        return reply.request.kind is RequestKind.ADD and self.writer.awaits(reply)

    def deliver(self, reply: Reply) -> None:
        for entry_id in self.writer.on_reply(reply):
            self._adds.pop(entry_id).set_result(entry_id)
        self._fail_if_stopped()

    def _fail_if_stopped(self) -> None:
        if self.writer.status is WriterStatus.FENCED:
            for entry_id in self.writer.failed_adds():
                future = self._adds.pop(entry_id, None)
                if future is not None:
                    future.set_exception(LedgerFencedError(f"ledger {self.ledger_id}: add of entry {entry_id} failed"))
            if self._close is not None and not self._close.done():
                self._close.set_exception(LedgerFencedError(f"ledger {self.ledger_id} was fenced before it closed"))

    def awaited(self) -> list[Request]:
        return self.writer.awaited()

    def timeout(self, request: Request) -> bool:
        """An add timed out: replace its bookie (WriterChangesEnsemble), if a replacement is writable."""
        if request.kind is not RequestKind.ADD or not self.writer.wants_replacement(request):
            return False
        failed = request.bookie
        replacement = self.client.placement.replacement(
            self.writer.metadata.last_ensemble, self.client.network.writable_bookies()
        )
        if replacement is None:
            return False  # BKNotEnoughBookiesException: the add stays pending, to be retried
        taken = time.monotonic()  # before the change sends the pending adds to the replacement
        self._change_ensemble(failed, replacement)
        self._log("WriterChangesEnsemble", failed, replacement, at=taken)
        return True

    def _change_ensemble(self, failed: str, replacement: str) -> None:
        writer, ledgers = self.writer, self.client.ledgers
        while True:
            proposal = writer.ensemble_change(failed, replacement)
            if self.client.config.mutant == "ensemble_change_local":  # MUTANT: #1591, no metadata write
                written = VersionedMetadata(proposal, writer.version)
                break
            try:
                written = ledgers.write(proposal, writer.version)
                break
            except BadVersionError:
                if not writer.metadata_moved(ledgers.read(self.ledger_id)):
                    self._fail_if_stopped()
                    return
        self.client._send(self._with_key(writer.ensemble_changed(written, failed, replacement)))

    def close(self) -> Future[None]:
        """Close at the LAC (WriterClosesLedger): the adds still pending fail with LedgerClosedError.

        As ``LedgerHandle.asyncClose``: the pending adds are drained and failed, and the
        metadata is closed at lastAddConfirmed; acks that come later complete nothing.
        """
        if self._close is None:
            self._close = Future()
            if self.writer.status is WriterStatus.FENCED:
                self._fail_if_stopped()
            elif self.writer.can_close():
                self._run_close()
        return self._close

    def _run_close(self) -> None:
        writer, ledgers = self.writer, self.client.ledgers
        self._log("WriterClosesLedger")
        for entry_id in writer.drain_for_close():
            future = self._adds.pop(entry_id, None)
            if future is not None:
                future.set_exception(LedgerClosedError(f"ledger {self.ledger_id} closed before entry {entry_id}"))
        while True:
            try:
                writer.closed(ledgers.write(writer.close_metadata(), writer.version))
                break
            except BadVersionError:
                if not writer.metadata_moved(ledgers.read(self.ledger_id)):
                    self._fail_if_stopped()  # in recovery or closed by another client
                    return
        assert self._close is not None
        self._close.set_result(None)

    def send_explicit_lac(self) -> None:
        """Tell the bookies the LAC on its own (WriterSendsExplicitLac)."""
        requests = self.writer.explicit_lac()
        if self.client.events is not None:
            self.client.events.writer_sent_explicit_lac(self.writer.explicit_lac_at)
        self.client._send(self._with_key(requests))

    def local_steps(self) -> list[StepKind]:
        steps = []
        if self.client.config.explicit_lac and self.writer.explicit_lac_due():
            steps.append(StepKind.EXPLICIT_LAC)
        return steps

    def run_local(self, kind: StepKind) -> None:
        if kind is StepKind.EXPLICIT_LAC and StepKind.EXPLICIT_LAC in self.local_steps():
            self.send_explicit_lac()
        else:
            raise LedgerStateError(f"the writer of ledger {self.ledger_id} cannot take the step {kind.value} now")


class RecoveryOpen(_Operation):
    """An open with recovery: ``future`` gives a :class:`ReadHandle` on the ledger once it is closed."""

    def __init__(self, client: BookKeeperClient, op: int, ledger_id: int, password: bytes) -> None:
        self.client = client
        self.op = op
        self.password = password
        self.key = master_key(password)
        self.future: Future[ReadHandle] = Future()
        current = client.ledgers.read(ledger_id)
        self._current = current
        self.recovery = LedgerRecovery(
            client.client_id, op, ledger_id, self.key, _entry_digest(current.metadata), mutant=client.config.mutant
        )

    @property
    def ledger_id(self) -> int:
        return self.recovery.ledger_id

    def _log(
        self,
        action: str,
        *,
        entry: int | None = None,
        bookie: str | None = None,
        replacement: str | None = None,
        at: float | None = None,
    ) -> None:
        if self.client.events is not None:
            self.client.events.recoverer(
                action, self.client.client_id, entry=entry, bookie=bookie, replacement=replacement, at=at
            )

    def _send(self, requests: list[Request]) -> None:
        self.client._send([attrs.evolve(r, master_key=self.key) for r in requests])

    def start(self) -> None:
        """Mark the ledger IN_RECOVERY (compare-and-set) unless closed or in recovery already; fence."""
        ledgers, recovery = self.client.ledgers, self.recovery
        current = self._current
        while True:
            proposal = recovery.start_with(current)
            if proposal is None:
                break
            try:
                recovery.marked(ledgers.write(proposal, current.version))
                break
            except BadVersionError:
                current = ledgers.read(self.ledger_id)
        self._log("RecovererStartsRecovery")
        if recovery.phase is RecoveryPhase.DONE:
            self._finish()
            return
        self._send(recovery.fence())

    def awaits(self, reply: Reply) -> bool:
        return self.recovery.awaits(reply)

    def deliver(self, reply: Reply) -> None:
        self._send(self.recovery.on_reply(reply))
        self._finish()

    def awaited(self) -> list[Request]:
        return self.recovery.awaited()

    def timeout(self, request: Request) -> bool:
        """Send again a request whose reply cannot come, to a bookie that is up (RecovererResends*); replace a
        bookie that is down and fails a write-back (RecovererChangesEnsemble); fail a recovery whose bookies
        left unheard of are all down (RecovererGivesUp)."""
        writable = self.client.network.writable_bookies()
        if request.bookie not in writable:
            return self._bookie_down(request, writable)
        resend = self.recovery.on_timeout(request)
        if not resend:
            return False
        if request.kind is RequestKind.FENCE:
            self._log("RecovererResendsFenceRead", bookie=request.bookie)
        elif request.kind is RequestKind.RECOVERY_READ:
            self._log("RecovererResendsRead", bookie=request.bookie)
        elif request.kind is RequestKind.ADD:
            self._log("RecovererResendsWriteBack", entry=request.entry_id, bookie=request.bookie)
        self._send(resend)
        return True

    def _bookie_down(self, request: Request, writable: list[str]) -> bool:
        recovery = self.recovery
        if recovery.wants_replacement(request):
            replacement = self.client.placement.replacement(recovery.current_ensemble, writable)
            if replacement is None:
                return False  # no bookie to take its place: the write-back waits for the bookie
            taken = time.monotonic()  # before the write-backs go to the replacement
            self._send(recovery.change_ensemble(request.bookie, replacement))
            self._log("RecovererChangesEnsemble", bookie=request.bookie, replacement=replacement, at=taken)
            return True
        undecided = request.kind in (RequestKind.FENCE, RequestKind.RECOVERY_READ) and request in recovery.awaited()
        if undecided and recovery.give_up_if_undecided(set(writable)):
            if recovery.phase is not RecoveryPhase.FAILED:  # the mutant undecided_read_ends_ledger ends the ledger
                self._send(recovery.length_requests_to_close())
                return True
            self._log("RecovererGivesUp")
            self._finish()
            return True
        return False

    def local_steps(self) -> list[StepKind]:
        return [StepKind.RECOVERY_CLOSE] if self.recovery.ready_to_close() else []

    def run_local(self, kind: StepKind) -> None:
        """Close the ledger at the last recovered entry (RecovererClosesLedger), by compare-and-set."""
        if kind is not StepKind.RECOVERY_CLOSE or not self.recovery.ready_to_close():
            raise LedgerStateError(f"recovery of ledger {self.ledger_id} cannot take the step {kind.value} now")
        recovery, ledgers = self.recovery, self.client.ledgers
        assert recovery.version is not None
        try:
            recovery.closed(ledgers.write(recovery.close_metadata(), recovery.version))
        except BadVersionError:
            recovery.close_conflict(ledgers.read(self.ledger_id))
        self._log("RecovererClosesLedger")
        self._finish()

    def _finish(self) -> None:
        if self.future.done():
            return
        recovery = self.recovery
        if recovery.phase is RecoveryPhase.DONE:
            assert recovery.metadata is not None
            self.future.set_result(ReadHandle(self.client, recovery.metadata, self.password))
        elif recovery.phase is RecoveryPhase.FAILED:
            self.future.set_exception(RecoveryFailedError(recovery.problem or f"recovery of {self.ledger_id} failed"))


class ReadHandle:
    """A reader of one ledger: entries up to the LAC it knows, or up to the last entry once the ledger is closed."""

    def __init__(self, client: BookKeeperClient, metadata: LedgerMetadata, password: bytes) -> None:
        self.client = client
        self.metadata = metadata
        self.key = master_key(password)
        self.digest_type = _entry_digest(metadata)
        # What may be read: a closed ledger's last entry, else the LAC last read (none yet).
        self.last_add_confirmed = metadata.last_entry_id if metadata.state is LedgerState.CLOSED else -1
        # Called with (entry, bookie, payload) as each entry read arrives; None: nobody listens.
        self.on_entry: Callable[[int, str, bytes], None] | None = None

    @property
    def ledger_id(self) -> int:
        return self.metadata.ledger_id

    def read_last_add_confirmed(self) -> Future[int]:
        """The highest LAC the bookies of the last segment know (readLastAddConfirmed)."""
        future: Future[int] = Future()
        if self.metadata.state is LedgerState.CLOSED:
            future.set_result(self.metadata.last_entry_id)
            return future
        op = _LacReadOp(self, future)
        self.client._register(op)
        self.client._send(op.read.requests())
        return future

    def read(self, first: int, last: int) -> Future[list[bytes]]:
        """Payloads of entries ``first .. last``, digests checked; only entries up to the LAC are readable."""
        if not 0 <= first <= last:
            raise ValueError(f"read of entries {first}..{last}: need 0 <= first <= last")
        if last > self.last_add_confirmed:
            raise ReadBeyondLacError(
                f"ledger {self.ledger_id}: entry {last} is past the last readable entry {self.last_add_confirmed}"
            )
        future: Future[list[bytes]] = Future()
        op = _EntryReadOp(self, future, first, last)
        self.client._register(op)
        self.client._send(op.read.requests())
        return future


class _LacReadOp(_Operation):
    def __init__(self, handle: ReadHandle, future: Future[int]) -> None:
        self.handle = handle
        self.future = future
        self.op = handle.client._new_op()
        self.read = LacRead(handle.client.client_id, self.op, handle.metadata)

    def awaits(self, reply: Reply) -> bool:
        return not self.future.done() and reply.request.bookie not in self.read.replies

    def deliver(self, reply: Reply) -> None:
        self.read.on_reply(reply)
        if self.read.done:
            self.handle.last_add_confirmed = max(self.handle.last_add_confirmed, self.read.lac)
            self.future.set_result(self.read.lac)

    def awaited(self) -> list[Request]:
        return [] if self.future.done() else self.read.awaited()

    def timeout(self, request: Request) -> bool:
        if request not in self.awaited() or request.bookie not in self.handle.client.network.writable_bookies():
            return False
        self.handle.client._send([request])
        return True


class _EntryReadOp(_Operation):
    def __init__(self, handle: ReadHandle, future: Future[list[bytes]], first: int, last: int) -> None:
        self.handle = handle
        self.future = future
        self.op = handle.client._new_op()
        self.read = EntryRead(handle.client.client_id, self.op, handle.metadata, handle.digest_type, first, last)

    def awaits(self, reply: Reply) -> bool:
        return not self.future.done() and reply.request in self.read.awaited()

    def deliver(self, reply: Reply) -> None:
        before = set(self.read.payloads)
        self.handle.client._send(self.read.on_reply(reply))
        if self.handle.on_entry is not None:
            for entry_id in sorted(set(self.read.payloads) - before):
                self.handle.on_entry(entry_id, reply.request.bookie, self.read.payloads[entry_id])
        self._finish()

    def _finish(self) -> None:
        if self.read.done and not self.future.done():
            try:
                self.future.set_result(self.read.result())
            except Exception as exc:
                self.future.set_exception(exc)

    def awaited(self) -> list[Request]:
        return [] if self.future.done() else self.read.awaited()

    def timeout(self, request: Request) -> bool:
        if request not in self.awaited():
            return False
        self.handle.client._send(self.read.on_timeout(request))
        self._finish()
        return True
