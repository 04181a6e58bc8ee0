"""Opening a ledger with recovery, without I/O: BookKeeper's ``LedgerRecoveryOp`` and ``ReadLastConfirmedOp``.

The steps, each an input this object takes and the requests or metadata it
hands back to the driver (:mod:`.client`):

1. ``start(current)``: a CLOSED ledger needs nothing (DONE). An OPEN one is
   marked IN_RECOVERY with a compare-and-set (``in_recovery_metadata``); one
   already IN_RECOVERY is recovered again by this client as well.
2. ``fence()``: the fencing read of the LAC (``FLAG_DO_FENCING``) goes to
   every bookie of the last segment. Fencing is complete once every write
   set has ``Qw - Qa + 1`` replies (``RRQuorumCoverageSet``); then no add of
   the old writer can reach ``Qa`` acks.
3. Recovery starts after ``max(highest LAC replied, first entry of the last
   segment - 1)``. Entry by entry, a recovery read (also fencing:
   apache/bookkeeper#2614) goes to the entry's write set. One reply with the
   entry (digest checked) recovers it: it is written back with recovery adds
   and the next entry is read. ``Qw - Qa + 1`` NoSuchEntry/NoSuchLedger
   replies show it cannot have reached ``Qa`` acks: the ledger ends before
   it. If every bookie of the write set answered with neither, recovery
   fails; so it does when every bookie still unheard of, for the fencing
   read or for an entry's read, is down (``give_up_if_undecided``:
   ``ReadLastConfirmedOp`` and ``PendingReadOp`` fail once no reply is
   pending).
4. Once every recovered entry has ``Qa`` acks of its write-back, the driver
   closes the ledger at the last recovered entry (``close_metadata``, a
   compare-and-set). If another client changed the metadata first, this
   recovery succeeds only if that client closed it at the same entry.

Recovery adds piggyback no LAC (-1), as in the spec. Timeouts: a request
whose reply cannot come is sent again (``on_timeout``); a write-back whose
bookie is down is sent to a bookie that replaces it instead
(``change_ensemble``, ``ReadOnlyLedgerHandle.handleBookieFailure``): the
recovering client keeps the new ensemble, from its handle's LAC + 1, to
itself, and its close writes it.

The fields are the spec's ``Recoverer`` record (``spec/ledger/ledger.py``), so the
abstraction reads them as they are.
"""

from __future__ import annotations

import enum

from ledgerspec.reference.bookie.entry import DigestType, Entry, EntryFormatError, decode_entry, encode_entry
from ledgerspec.reference.ledger.errors import LedgerStateError
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.ledger.schedule import RoundRobinSchedule
from ledgerspec.reference.metadata import LedgerMetadata, LedgerState, VersionedMetadata

__all__ = ["LedgerRecovery", "RecoveryPhase"]


class RecoveryPhase(enum.Enum):
    IDLE = "IDLE"
    FENCING = "FENCING"
    READING = "READING"
    WRITING_BACK = "WRITING_BACK"
    DONE = "DONE"
    FAILED = "FAILED"


_MISSING = (ReplyCode.NO_SUCH_ENTRY, ReplyCode.NO_SUCH_LEDGER)


class LedgerRecovery:
    """One client's recovery of one ledger (see the module docstring)."""

    def __init__(
        self,
        client: int,
        op: int,
        ledger_id: int,
        master_key: bytes,
        digest_type: DigestType,
        *,
        mutant: str | None = None,
    ) -> None:
        self.client = client
        self.op = op
        self.ledger_id = ledger_id
        self.master_key = master_key
        self.digest_type = digest_type
        self.mutant = mutant
        self.phase = RecoveryPhase.IDLE
        self.metadata: LedgerMetadata | None = None  # as read (and marked IN_RECOVERY) at the start
        self.version: int | None = None  # metadata version this client last read or wrote
        self.fence_replies: set[str] = set()  # bookies that answered the fencing read
        self.max_lac = -1  # highest LAC among those answers
        self.start = -1  # recovery reads start after this entry
        self.next = -1  # the entry being read
        self.no_such: set[str] = set()  # bookies that answered NoSuchEntry/NoSuchLedger for ``next``
        self.refused: set[str] = set()  # bookies whose answer for ``next`` was unusable (bad digest, ...)
        self.last = -1  # last entry recovered
        self.recovered: dict[int, Entry] = {}  # entries found, to write back
        self.wb_acks: set[tuple[int, str]] = set()  # (entry, bookie) acks of the write-back
        # the segments read when the recovery began: what it fences, reads and writes back by
        self.read_segments: tuple[tuple[int, tuple[str, ...]], ...] = ()
        # (first entry id, ensemble) of the ensembles the write-back changed, for the close to write
        self.ensembles: list[tuple[int, tuple[str, ...]]] = []
        self.start_length: int | None = None  # the ledger's length through ``start``, once known
        self.problem: str | None = None  # why the recovery FAILED

    @property
    def schedule(self) -> RoundRobinSchedule:
        md = self._metadata()
        return RoundRobinSchedule(md.ensemble_size, md.write_quorum_size, md.ack_quorum_size)

    def _metadata(self) -> LedgerMetadata:
        if self.metadata is None:
            raise LedgerStateError(f"recovery of ledger {self.ledger_id} has not read the metadata yet")
        return self.metadata

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        md = self._metadata()
        return self.schedule.write_set(md.ensemble_for(entry_id), entry_id)

    def _written_back_metadata(self) -> LedgerMetadata:
        """The metadata as the write-back sees it and the close writes it: with this client's ensemble changes."""
        md = self._metadata()
        for first, ensemble in self.ensembles:
            md = md.with_ensemble_from(first, ensemble)
        return md

    def write_back_set(self, entry_id: int) -> tuple[str, ...]:
        """The bookies entry ``entry_id`` is written back to."""
        md = self._written_back_metadata()
        return self.schedule.write_set(md.ensemble_for(entry_id), entry_id)

    @property
    def current_ensemble(self) -> tuple[str, ...]:
        return self._written_back_metadata().last_ensemble

    def handle_lac(self) -> int:
        """The recovering handle's LAC: the write-backs complete in entry order on Qa acks, from ``start``."""
        lac = self.start
        while lac < self.last and self._acked(lac + 1) >= self.schedule.ack_quorum:
            lac += 1
        return lac

    def _acked(self, entry_id: int) -> int:
        return sum(1 for b in self.write_back_set(entry_id) if (entry_id, b) in self.wb_acks)

    @property
    def finished(self) -> bool:
        return self.phase in (RecoveryPhase.DONE, RecoveryPhase.FAILED)

    # -- 1. start ---------------------------------------------------------------------
    def start_with(self, current: VersionedMetadata) -> LedgerMetadata | None:
        """Begin on the metadata read: the IN_RECOVERY metadata to write, or None (closed, or in recovery already)."""
        if self.phase is not RecoveryPhase.IDLE:
            raise LedgerStateError(f"recovery of ledger {self.ledger_id} started already ({self.phase.value})")
        self.metadata, self.version = current.metadata, current.version
        if current.metadata.state is LedgerState.CLOSED:
            self.phase = RecoveryPhase.DONE
            return None
        if current.metadata.state is LedgerState.OPEN:
            return current.metadata.in_recovery()
        return None

    def marked(self, written: VersionedMetadata) -> None:
        """The compare-and-set to IN_RECOVERY succeeded."""
        self.metadata, self.version = written.metadata, written.version

    # -- 2. fencing -------------------------------------------------------------------
    def fence(self) -> list[Request]:
        """The fencing read of the LAC, to every bookie of the last segment."""
        self.phase = RecoveryPhase.FENCING
        md = self._metadata()
        self.read_segments = tuple((s.first_entry_id, tuple(s.ensemble)) for s in md.segments)
        return [self._fence_request(b) for b in md.last_ensemble]

    def _fence_request(self, bookie: str) -> Request:
        return Request(RequestKind.FENCE, self.client, self.op, bookie, self.ledger_id, fence=True)

    def _fencing_complete(self) -> bool:
        if self.mutant == "fence_qa_total":  # MUTANT: Qa replies in all, not Qw - Qa + 1 in every write set
            return len(self.fence_replies) >= self.schedule.ack_quorum
        return self.schedule.covers(self._metadata().last_ensemble, self.fence_replies)

    # -- 3. recovery reads ------------------------------------------------------------
    def _read_requests(self, entry_id: int) -> list[Request]:
        return [self._read_request(b, entry_id) for b in self.write_set(entry_id)]

    def _read_request(self, bookie: str, entry_id: int) -> Request:
        fence = self.mutant != "recovery_read_no_fence"  # MUTANT: apache/bookkeeper#2614
        return Request(RequestKind.RECOVERY_READ, self.client, self.op, bookie, self.ledger_id, entry_id, fence=fence)

    def _write_back(self, entry: Entry, bookie: str) -> Request:
        data = encode_entry(self.ledger_id, entry.entry_id, -1, entry.length, entry.payload, self.digest_type)
        return Request(
            RequestKind.ADD, self.client, self.op, bookie, self.ledger_id, entry.entry_id, -1, recovery=True, data=data
        )

    def length_requests_to_close(self) -> list[Request]:
        """The reads that tell the ledger's length, when the recovery ends with no entry recovered and does not
        know it yet (none otherwise)."""
        if self.phase is RecoveryPhase.WRITING_BACK and self.last == self.start and self.start_length is None:
            return self._length_requests()
        return []

    def _length_requests(self) -> list[Request]:
        """Plain reads of entry ``start`` for the ledger's length, when no entry after it was found."""
        return [
            Request(RequestKind.READ_ENTRY, self.client, self.op, b, self.ledger_id, self.start)
            for b in self.write_set(self.start)
        ]

    # -- replies ----------------------------------------------------------------------
    def _found(self, reply: Reply) -> Entry | None:
        """The entry in a read reply, if it is the one asked for and its digest matches."""
        if reply.code is not ReplyCode.OK:
            return None
        try:
            entry = decode_entry(reply.data, self.digest_type)
        except EntryFormatError:
            return None
        if (entry.ledger_id, entry.entry_id) != (self.ledger_id, reply.request.entry_id):
            return None
        return entry

    def awaits(self, reply: Reply) -> bool:
        """Would this reply change the recovery? (A reply it would ignore is never counted as lost.)"""
        request = reply.request
        kind = request.kind
        if kind is RequestKind.FENCE:
            return (
                self.phase is RecoveryPhase.FENCING
                and reply.ok
                and (request.bookie not in self.fence_replies or reply.lac > self.max_lac)
            )
        if kind is RequestKind.RECOVERY_READ:
            if self.phase is not RecoveryPhase.READING or request.entry_id != self.next:
                return False
            if reply.code in _MISSING:
                return request.bookie not in self.no_such
            return self._found(reply) is not None or request.bookie not in self.refused
        if kind is RequestKind.ADD:
            return (
                self.phase in (RecoveryPhase.READING, RecoveryPhase.WRITING_BACK)
                and reply.ok
                and (request.entry_id, request.bookie) not in self.wb_acks
            )
        if kind is RequestKind.READ_ENTRY:
            return self.start_length is None and self._found(reply) is not None
        return False

    def on_reply(self, reply: Reply) -> list[Request]:
        """Take a reply; the requests to send next."""
        if not self.awaits(reply):
            return []
        request = reply.request
        if request.kind is RequestKind.FENCE:
            return self._on_fence_reply(request.bookie, reply.lac)
        if request.kind is RequestKind.RECOVERY_READ:
            return self._on_read_reply(reply)
        if request.kind is RequestKind.ADD:
            self.wb_acks.add((request.entry_id, request.bookie))
            return []
        found = self._found(reply)
        assert found is not None
        self.start_length = found.length
        return []

    def _on_fence_reply(self, bookie: str, lac: int) -> list[Request]:
        self.fence_replies.add(bookie)
        self.max_lac = max(self.max_lac, lac)
        if not self._fencing_complete():
            return []
        md = self._metadata()
        self.start = max(self.max_lac, md.segments[-1].first_entry_id - 1)
        self.phase = RecoveryPhase.READING
        self.next = self.start + 1
        self.last = self.start
        if self.start < 0:
            self.start_length = 0
        return self._read_requests(self.next)

    def _on_read_reply(self, reply: Reply) -> list[Request]:
        request = reply.request
        e = request.entry_id
        entry = self._found(reply)
        if entry is not None:
            # Recovered: write it back, and read the next entry.
            self.recovered[e] = entry
            self.last, self.next = e, e + 1
            self.no_such, self.refused = set(), set()
            return [self._write_back(entry, b) for b in self.write_back_set(e)] + self._read_requests(self.next)
        if reply.code in _MISSING:
            self.no_such.add(request.bookie)
            if len(self.no_such) >= self.schedule.missing_quorum:
                # Entry e cannot have reached Qa acks: the ledger ends at e - 1.
                self.phase = RecoveryPhase.WRITING_BACK
                return self.length_requests_to_close()
            return []
        self.refused.add(request.bookie)
        if self.no_such | self.refused >= set(self.write_set(e)):
            if self.mutant == "undecided_read_ends_ledger":  # MUTANT: the undecided entry taken for missing
                self.phase = RecoveryPhase.WRITING_BACK
                return self.length_requests_to_close()
            self.phase = RecoveryPhase.FAILED
            self.problem = (
                f"entry {e} of ledger {self.ledger_id}: every bookie of its write set answered, "
                f"{len(self.no_such)} without it (need {self.schedule.missing_quorum}), "
                f"{len(self.refused)} with an unusable reply"
            )
        return []

    # -- timeouts ---------------------------------------------------------------------
    def awaited(self) -> list[Request]:
        """Requests whose reply this recovery still waits for."""
        if self.phase is RecoveryPhase.FENCING:
            return [self._fence_request(b) for b in self._metadata().last_ensemble if b not in self.fence_replies]
        waiting: list[Request] = []
        if self.phase is RecoveryPhase.READING:
            waiting += [
                self._read_request(b, self.next)
                for b in self.write_set(self.next)
                if b not in self.no_such and b not in self.refused
            ]
        if self.phase in (RecoveryPhase.READING, RecoveryPhase.WRITING_BACK):
            waiting += [
                self._write_back(self.recovered[e], b)
                for e in range(self.start + 1, self.last + 1)
                for b in self.write_back_set(e)
                if (e, b) not in self.wb_acks
            ]
            if self.phase is RecoveryPhase.WRITING_BACK and self.start_length is None and self.last == self.start:
                waiting += self._length_requests()
        return waiting

    def on_timeout(self, request: Request) -> list[Request]:
        """No reply can come for ``request``: send it again, if this recovery still waits for it."""
        if request in self.awaited():
            return [request]
        return []

    def wants_replacement(self, request: Request) -> bool:
        """A write-back of an entry past the handle's LAC, still unacked, to a bookie of the current ensemble."""
        if request.kind is not RequestKind.ADD or self.phase not in (RecoveryPhase.READING, RecoveryPhase.WRITING_BACK):
            return False
        e, b = request.entry_id, request.bookie
        return (
            self.handle_lac() < e <= self.last
            and b in self.current_ensemble
            and b in self.write_back_set(e)
            and (e, b) not in self.wb_acks
        )

    def change_ensemble(self, failed: str, replacement: str) -> list[Request]:
        """Replace ``failed`` by ``replacement`` from the handle's LAC + 1: the write-backs to send the new bookie.

        As ReadOnlyLedgerHandle.handleBookieFailure: the new ensemble stays with this client
        (newEnsemblesFromRecovery) until the close; the pending write-backs lose the failed bookie's
        acks and go to the new one (unsetSuccessAndSendWriteRequest).
        """
        first = self.handle_lac() + 1
        ensemble = tuple(replacement if b == failed else b for b in self.current_ensemble)
        self.ensembles = [(f, ens) for f, ens in self.ensembles if f < first] + [(first, ensemble)]
        self.wb_acks = {(e, b) for e, b in self.wb_acks if not (b == failed and e >= first)}
        if self.mutant == "recovery_change_ends_at_lac":  # MUTANT: the pending write-backs dropped, closed at the LAC
            self.last, self.phase = first - 1, RecoveryPhase.WRITING_BACK
            return []
        return [
            self._write_back(self.recovered[e], replacement)
            for e in range(first, self.last + 1)
            if replacement in self.write_back_set(e)
        ]

    def give_up_if_undecided(self, up: set[str]) -> bool:
        """Fail the recovery if every bookie still unheard of is down (not in ``up``) and nothing is decided;
        whether it did.

        ReadLastConfirmedOp.readEntryComplete fails the fencing read once no reply is pending and the
        replies do not cover every write set; PendingReadOp.logErrorAndReattemptRead fails a recovery read
        once every bookie of the write set answered and fewer than Qw - Qa + 1 said NoSuchEntry. A bookie
        that is down answers with an error. LedgerRecoveryOp then fails: the ledger stays IN_RECOVERY.
        """
        if self.phase is RecoveryPhase.FENCING:
            unheard = set(self._metadata().last_ensemble) - self.fence_replies
        elif self.phase is RecoveryPhase.READING:
            unheard = set(self.write_set(self.next)) - self.no_such - self.refused
        else:
            return False
        if unheard & up:
            return False
        if self.mutant == "undecided_read_ends_ledger" and self.phase is RecoveryPhase.READING:
            # MUTANT: the entry no reply decided is taken for missing, and the ledger ends before it
            self.phase = RecoveryPhase.WRITING_BACK
            return True
        what = "the fencing read" if self.phase is RecoveryPhase.FENCING else f"the read of entry {self.next}"
        if self.phase is RecoveryPhase.FENCING:
            self.fence_replies = set()  # a fencing that never completed leaves no replies behind, as in the spec
        self.phase = RecoveryPhase.FAILED
        self.problem = f"recovery of ledger {self.ledger_id}: {what} is undecided; bookies {sorted(unheard)} are down"
        return True

    # -- 4. close ---------------------------------------------------------------------
    def ready_to_close(self) -> bool:
        """Reads are over and every recovered entry has Qa acks of its write-back."""
        if self.phase is not RecoveryPhase.WRITING_BACK:
            return False
        return self.handle_lac() == self.last and self.close_length() is not None

    def close_length(self) -> int | None:
        """The ledger's length in bytes through the last recovered entry, once known."""
        if self.last > self.start:
            return self.recovered[self.last].length
        return self.start_length

    def close_metadata(self) -> LedgerMetadata:
        """The metadata closed at the last recovered entry, for a compare-and-set."""
        length = self.close_length()
        if not self.ready_to_close() or length is None:
            raise LedgerStateError(f"recovery of ledger {self.ledger_id} cannot close yet ({self.phase.value})")
        return self._written_back_metadata().closed_at(self.last, length)

    def closed(self, written: VersionedMetadata) -> None:
        self.metadata, self.version = written.metadata, written.version
        self.phase = RecoveryPhase.DONE

    def close_conflict(self, current: VersionedMetadata) -> None:
        """The compare-and-set failed: another client changed the metadata. Closed at our last entry is success."""
        self.version = current.version
        md = current.metadata
        if md.state is LedgerState.CLOSED and md.last_entry_id == self.last:
            self.metadata = md
            self.phase = RecoveryPhase.DONE
        else:
            self.phase = RecoveryPhase.FAILED
            self.problem = (
                f"ledger {self.ledger_id} was changed by another client: {md.state.name}"
                + (f" at entry {md.last_entry_id}" if md.closed else "")
                + f", this recovery found entries through {self.last}"
            )
