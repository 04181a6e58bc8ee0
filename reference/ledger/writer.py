"""The writer's side of one ledger, without I/O: BookKeeper's ``LedgerHandle`` and ``PendingAddOp``.

State and input in, requests and decisions out. The driver
(:mod:`.client`) sends the requests, delivers the replies, runs the
metadata compare-and-sets this object asks for, and tells it the outcome.

- ``add``: ``entryId = ++lastAddPushed``; the entry, with the writer's LAC
  piggybacked and its digest, goes to the entry's write set. The add keeps
  the LAC it was packaged with (``PendingAddOp.toSend``): every later send
  of it carries that LAC.
- ``on_reply``: an ack counts only from a bookie of the entry's current
  write set; the LAC then moves over every entry whose whole prefix has
  ``Qa`` acks, and those adds complete, in entry order
  (``sendAddSuccessCallbacks``). EFENCED stops the handle.
- ensemble change (``ensembleChangeLoop``), when the add to a bookie timed
  out: the new segment starts at LAC + 1 (replacing the last one if it
  starts there); the driver writes it with a compare-and-set; on success the
  pending adds lose the replaced bookie's acks and go to the replacement,
  each with the LAC it was packaged with. The change is one step of the engine, so no ack
  arrives while it runs: completions are held by construction. If the
  metadata moved on and the ledger is no longer OPEN, the handle is fenced.
- close (``doAsyncCloseInternal``): the pending adds are drained and fail,
  lastAddPushed drops to the LAC, and the metadata is closed at the LAC
  (compare-and-set). Their late acks find no pending add and move nothing.
- explicit LAC: when nothing is pending and the LAC has moved past the last
  one sent, piggybacked or explicit, the LAC goes on its own to its write set
  in the current ensemble (``ExplicitLacFlushPolicy``, ``PendingWriteLacOp``):
  the spec's ``WriterSendsExplicitLac``, for the LAC it sends.

The writer keeps the acks of completed adds too, until it closes: they are the spec's
``writer_acks`` (BookKeeper forgets an add once it completes); likewise the
LAC each add was packaged with, the spec's ``writer_add_lac``.
"""

from __future__ import annotations

import enum

import attrs
from ledgerspec.reference.bookie.entry import DigestType, encode_entry, encode_lac
from ledgerspec.reference.ledger.errors import LedgerClosedError, LedgerFencedError, TooManyPendingAddsError
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.ledger.schedule import RoundRobinSchedule
from ledgerspec.reference.metadata import LedgerMetadata, LedgerState, VersionedMetadata

__all__ = ["LedgerWriter", "PendingAdd", "WriterStatus"]


class WriterStatus(enum.Enum):
    WRITING = "WRITING"
    CLOSED = "CLOSED"  # closed by this writer
    FENCED = "FENCED"  # told to stop: EFENCED, or the metadata moved on


@attrs.define
class PendingAdd:
    entry_id: int
    payload: bytes
    length: int  # the ledger's length in bytes through this entry
    lac: int  # the LAC the entry was packaged with (PendingAddOp.toSend): every send of it carries this one


class LedgerWriter:
    """The writer of one ledger (see the module docstring)."""

    def __init__(
        self,
        client: int,
        op: int,
        metadata: VersionedMetadata,
        master_key: bytes,
        digest_type: DigestType,
        *,
        max_pending: int = 0,
        mutant: str | None = None,
    ) -> None:
        md = metadata.metadata
        self.client = client
        self.op = op
        self.ledger_id = md.ledger_id
        self.metadata = md  # the writer's copy of the ledger metadata
        self.version = metadata.version  # the metadata version it last read or wrote
        self.schedule = RoundRobinSchedule(md.ensemble_size, md.write_quorum_size, md.ack_quorum_size)
        self.master_key = master_key
        self.digest_type = digest_type
        self.max_pending = max_pending  # adds kept pending at most; 0: no limit
        self.mutant = mutant
        self.status = WriterStatus.WRITING
        self.lap = -1  # lastAddPushed
        self.lac = -1  # lastAddConfirmed
        self.length = 0  # bytes pushed
        self.pending: dict[int, PendingAdd] = {}  # entry -> add pushed, not yet completed
        self.acks: dict[int, set[str]] = {}  # entry -> bookies whose ack counts (completed adds too)
        self.sent: dict[tuple[int, str], Request] = {}  # (entry, bookie) -> the last add sent there
        self.add_lacs: list[int] = []  # entry -> the LAC its add was packaged with, completed adds too
        self.lac_sent = -1  # highest LAC sent to bookies, piggybacked or explicit
        self.explicit_lac_at = -1  # the LAC the last explicit LAC was sent for: the spec's writer_explicit_lac

    # -- reading the state -----------------------------------------------------------
    def write_set(self, entry_id: int) -> tuple[str, ...]:
        return self.schedule.write_set(self.metadata.ensemble_for(entry_id), entry_id)

    def acks_counted(self, entry_id: int) -> int:
        """Acks of the entry from bookies of its current write set."""
        acked = self.acks.get(entry_id, ())
        return sum(1 for b in self.write_set(entry_id) if b in acked)

    def can_add(self) -> bool:
        return self.status is WriterStatus.WRITING and (self.max_pending == 0 or self.lap - self.lac < self.max_pending)

    def can_close(self) -> bool:
        """Whether a close is a step now: while the handle writes, whatever adds are pending."""
        return self.status is WriterStatus.WRITING

    def awaited(self) -> list[Request]:
        """The adds whose ack the writer still waits for: pending entries, bookies of the write set not acked."""
        if self.status is not WriterStatus.WRITING:
            return []
        return [
            self.sent[(e, b)]
            for e in range(self.lac + 1, self.lap + 1)
            for b in self.write_set(e)
            if b not in self.acks.get(e, ())
        ]

    # -- adds ------------------------------------------------------------------------
    def add(self, payload: bytes) -> tuple[int, list[Request]]:
        """Push an entry: its id, and the adds to send."""
        if self.status is WriterStatus.CLOSED:
            raise LedgerClosedError(f"ledger {self.ledger_id} is closed: no more adds")
        if self.status is WriterStatus.FENCED:
            raise LedgerFencedError(f"ledger {self.ledger_id} was fenced: no more adds")
        if not self.can_add():
            raise TooManyPendingAddsError(
                f"ledger {self.ledger_id}: {self.lap - self.lac} adds pending, the limit is {self.max_pending}"
            )
        self.lap += 1
        self.length += len(payload)
        add = self.pending[self.lap] = PendingAdd(self.lap, bytes(payload), self.length, self.lac)
        self.add_lacs.append(self.lac)
        self.acks[self.lap] = set()
        return self.lap, [self._send(add, b) for b in self.write_set(add.entry_id)]

    def _send(self, add: PendingAdd, bookie: str, lac: int | None = None, payload: bytes | None = None) -> Request:
        """The add to ``bookie``, carrying the LAC and payload it was packaged with unless told otherwise."""
        lac = add.lac if lac is None else lac
        payload = add.payload if payload is None else payload
        data = encode_entry(self.ledger_id, add.entry_id, lac, add.length, payload, self.digest_type)
        request = Request(RequestKind.ADD, self.client, self.op, bookie, self.ledger_id, add.entry_id, lac, data=data)
        self.sent[(add.entry_id, bookie)] = request
        self.lac_sent = max(self.lac_sent, lac)
        return request

    def awaits(self, reply: Reply) -> bool:
        """Would this reply change the writer? (A reply it would ignore is never counted as lost.)"""
        if self.status is not WriterStatus.WRITING:
            return False
        request = reply.request
        if reply.code is ReplyCode.FENCED:
            return True
        if reply.code is not ReplyCode.OK:
            return False
        return request.bookie in self.write_set(request.entry_id) and request.bookie not in self.acks.get(
            request.entry_id, ()
        )

    def on_reply(self, reply: Reply) -> list[int]:
        """Take an add's reply; the entries it completes, in order."""
        if not self.awaits(reply):
            return []
        if reply.code is ReplyCode.FENCED:
            self.status = WriterStatus.FENCED
            return []
        self.acks[reply.request.entry_id].add(reply.request.bookie)
        return self._complete(reply.request.entry_id)

    def _complete(self, acked: int) -> list[int]:
        """Move the LAC over the entries whose whole prefix has its quorum (sendAddSuccessCallbacks)."""
        needed = 1 if self.mutant == "lac_before_qa" else self.schedule.ack_quorum  # MUTANT: first ack completes
        before = self.lac
        if self.mutant == "complete_out_of_order":  # MUTANT: an add completes without waiting for earlier ones
            if acked > self.lac and self.acks_counted(acked) >= needed:
                self.lac = acked
        else:
            while self.lac < self.lap and self.acks_counted(self.lac + 1) >= needed:
                self.lac += 1
        completed = list(range(before + 1, self.lac + 1))
        for e in completed:
            self.pending.pop(e, None)
        return completed

    def failed_adds(self) -> list[int]:
        """Entries pushed and not completed: they fail once the handle is fenced or closed."""
        return sorted(self.pending) if self.status is not WriterStatus.WRITING else []

    # -- ensemble change -------------------------------------------------------------
    def wants_replacement(self, request: Request) -> bool:
        """An add to this bookie timed out and still counts: replace the bookie (the spec's guard)."""
        e, b = request.entry_id, request.bookie
        return (
            self.status is WriterStatus.WRITING
            and self.lac < e <= self.lap
            and b in self.write_set(e)
            and b not in self.acks.get(e, ())
        )

    def ensemble_change(self, failed: str, replacement: str) -> LedgerMetadata:
        """The metadata with ``failed`` replaced by ``replacement`` from LAC + 1 on, for a compare-and-set."""
        ensemble = tuple(replacement if b == failed else b for b in self.metadata.last_ensemble)
        return self.metadata.with_ensemble_from(self.lac + 1, ensemble)

    def ensemble_changed(self, written: VersionedMetadata, failed: str, replacement: str) -> list[Request]:
        """The change is in the store: pending adds lose ``failed``'s acks and go to ``replacement``."""
        first = self.lac + 1
        self.metadata, self.version = written.metadata, written.version
        for e, acked in self.acks.items():
            if e >= first:
                acked.discard(failed)
        lac = self.lac if self.mutant == "resend_with_current_lac" else None  # MUTANT: repackaged with today's LAC
        # MUTANT: the newest add's bytes, as a buffer reused before the resend would hold
        newest = self.pending.get(self.lap)
        payload = newest.payload if newest is not None and self.mutant == "resend_reused_buffer" else None
        return [
            self._send(self.pending[e], replacement, lac, payload)
            for e in range(first, self.lap + 1)
            if replacement in self.write_set(e)
        ]

    def metadata_moved(self, current: VersionedMetadata) -> bool:
        """A compare-and-set failed; ``current`` is what the store holds. True: try again on it."""
        self.version = current.version
        if current.metadata.state is not LedgerState.OPEN:
            self.status = WriterStatus.FENCED  # in recovery or closed by another client
            return False
        self.metadata = current.metadata
        return True

    # -- close -----------------------------------------------------------------------
    def drain_for_close(self) -> list[int]:
        """The close's first step: the pending adds leave the handle, to fail; lastAddPushed drops to the LAC.

        ``drainPendingAddsAndAdjustLength`` and ``lastAddPushed = lastAddConfirmed`` in
        ``doAsyncCloseInternal``, before the metadata is written; the acks go with the adds. Returns the
        drained entries.
        """
        drained = sorted(self.pending)
        if self.mutant == "close_at_last_add_pushed":  # MUTANT: the close keeps lastAddPushed, and closes there
            return drained
        self.length = self.length_through(self.lac)
        self.pending.clear()
        self.acks.clear()  # the handle holds no add any more, so no ack
        self.lap = self.lac
        return drained

    def close_metadata(self) -> LedgerMetadata:
        """The metadata closed at lastAddPushed, which the drain set to the LAC, for a compare-and-set."""
        return self.metadata.closed_at(self.lap, self.length)

    def length_through(self, entry_id: int) -> int:
        return self.length - sum(len(self.pending[e].payload) for e in self.pending if e > entry_id)

    def closed(self, written: VersionedMetadata) -> None:
        self.metadata, self.version = written.metadata, written.version
        self.status = WriterStatus.CLOSED

    # -- explicit LAC ----------------------------------------------------------------
    def explicit_lac_due(self) -> bool:
        """Nothing pending, and the bookies have not been told the current LAC."""
        if self.status is not WriterStatus.WRITING:
            return False
        if self.mutant == "explicit_lac_sends_lap":  # MUTANT: the timer reads lastAddPushed, adds pending or not
            return self.lap > self.lac_sent
        return self.lac == self.lap and self.lac > self.lac_sent

    def explicit_lac(self) -> list[Request]:
        """The explicit LAC, to the write set of the LAC in the current ensemble (``PendingWriteLacOp.initiate``)."""
        lac = self.lap if self.mutant == "explicit_lac_sends_lap" else self.lac  # MUTANT: lastAddPushed
        buffer = encode_lac(self.ledger_id, lac, self.digest_type)
        self.lac_sent = self.explicit_lac_at = lac
        return [
            Request(RequestKind.WRITE_LAC, self.client, self.op, b, self.ledger_id, lac=lac, data=buffer)
            for b in self.schedule.write_set(self.metadata.last_ensemble, lac)
        ]
