"""The BookKeeper ledger protocol: striped appends, LAC, ensemble change, fencing and recovery.

The twin of ``ledger.tla``: the same variables, actions and invariants, by
the same names; the explorer and TLC reach the same states under the models of
``ledger_models.py`` (tests/test_parity.py).

What is modelled (BookKeeper's ``client/`` package, BRIEF sections 1 and 2):

- one ledger whose metadata lives in a store with compare-and-set versions;
  it is created OPEN with the ensemble ``<<1, ..., E>>``;
- a writer (client 0) that pushes entries ``0 .. MaxEntries-1``, each to the
  ``Qw`` bookies of its write set (``RoundRobinDistributionSchedule``:
  ensemble indices ``(e + i) % E``), completes them in entry order once
  ``Qa`` of them ack, and piggybacks its LAC on every add: the LAC of the
  moment it pushed the entry, on the first send and on every resend
  (``PendingAddOp.toSend``), which with ``LacLag`` may lag the acks the
  writer has (its handle takes them in one by one); each add carries its
  data: the bytes the application added as entry ``e`` (``payload(e)``, a number that is not
  ``e``, so that a check of content cannot pass by comparing ids); a
  recovery add carries the bytes its client read;
- ensemble change when a bookie does not answer (``ensembleChangeLoop``);
- the writer's close at its LAC, at any time: the adds still pending fail,
  and their late acks complete nothing (``doAsyncCloseInternal``);
- recovering clients ``1 .. NumRecoverers`` that open the ledger with
  recovery while the writer may still be writing (``LedgerRecoveryOp``):
  fencing read of the LAC, per-write-set coverage, recovery reads that fence,
  write-back, and the close; a bookie that fails a write-back is replaced in
  the recovering client's own ensembles, which its close writes
  (``ReadOnlyLedgerHandle.handleBookieFailure``); a recovery whose fencing
  read or recovery read ends without a verdict fails, and the client may
  open the ledger with recovery again;
- plain readers ``1 .. NumReaders`` that open the ledger without recovery
  (``LedgerOpenOp``, ``doRecovery = false``), learn a LAC and read entries up
  to it while the writer may still be writing;
- with ``ExplicitLac = 1`` (``explicitLacInterval > 0``), the writer's
  explicit LAC: a timer sends its LAC to the bookies, which keep the last one
  they were sent (journaled, so a restart keeps it) and serve it to readers
  beside the piggybacked one;
- bookie crashes (the bookie stops; what it stored stays stored) and
  restarts (its journal replay brings back what it stored, fenced and the
  LACs it saw: it journals each of them before it replies), and the loss of
  any message; ``MaxCrashes`` bounds the crashes in all, ``MaxLoss`` the
  losses.

What is left out, and why that is sound here:

- digests, and payloads as bytes: the data of an entry is a number, and a
  resend sends the data its add was packaged with;
- a plain reader's requests: its read of the LAC and its read of an entry
  are each one step, served at once by bookies that are up. The invariants
  ``ReadersAgreeUpToLac`` (every entry a reader may read is in the closed
  ledger) and ``ReadersAgreeOnContent`` (every copy of it is the data the
  application added) speak of every read that could happen, the readers'
  own invariants of the reads they did;
- the explicit-LAC flush policy's skip when adds piggybacked a newer LAC
  since its last send (``ExplicitLacFlushPolicyImpl``): the spec's writer may
  send whenever its LAC is past the last it sent for, and a skip sends nothing;
- the window between a bookie taking an explicit LAC in memory and its
  journal write: a crash there forgets a LAC that no reply confirmed, and
  readers learn no more than they might have before;
- a reader's long poll (``ReadLastConfirmedAndEntryOp``): the bookie answers
  once its LAC passes the reader's, with the next entry; that is
  ``ReaderReadsLac`` followed by ``ReaderReadsEntry``;
- the bookie's journal: a bookie stores an add durably before it replies
  (the bookie spec models the journal);
- replies in flight, by default (``RepliesInFlight = 0``): a bookie's step
  serves a request and delivers its reply (or loses it, within ``MaxLoss``).
  A reply that would arrive after the client stopped waiting for it acts as
  a lost one; one that arrives in time acts as if the bookie had served the
  request later. With ``RepliesInFlight = 1`` the bookie's step sends its
  reply as a message (``REPLY_TYPES``), which the client takes in a step of
  its own (``ClientReceivesReply``) or the network loses: replies of two
  bookies then reach a client in either order, whatever order the bookies
  served in, which is what a trace that merges a client's log with the
  bookies' log needs (``ledgerspec merge``); the states are more, the
  behaviours of the clients and the bookies the same;
- time: a timeout is taken only when the reply can no longer come (the
  bookie crashed, or the request or its reply was lost). A timeout that
  fires early behaves, for the client, like the loss of the reply.
- recovery adds piggyback no LAC (``-1``): readers of a closed ledger use its
  last entry id, not the bookies' LAC;
- a writer whose close finds the ledger no longer OPEN gives up (FENCED).
  BookKeeper's close rereads the metadata and writes CLOSED at the writer's
  LAC over IN_RECOVERY (docs/real-systems.md, "A writer told it is fenced
  closes the ledger over a recovery"); the ledger then holds every entry the
  writer acknowledged, so the invariants speak of the same promises either way.

The quorum rules (write sets, fencing complete, entry missing) are the
functions of ``quorum.py``, which ``ledgerspec.tools.proofs.quorum_proofs`` proves
with Z3 for every configuration up to E = 12.

Seeded bugs, chosen by the constant ``Bug``, make the spec wrong on purpose
so that tests can show the checkers catch each one. ``fence_ensemble_coverage``
is the odd one: BP-46's fencing rule, stricter than BookKeeper's, kept to show
that it is safe but waits for more replies.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

import attrs
from ledgerspec.spec.kernel import (
    Constant,
    ConstantError,
    Spec,
    action,
    action_property,
    evolve,
    int_constant,
    invariant,
    reachable,
)
from ledgerspec.spec.quorum import FENCING_RULES, MISSING_RULES, PYTHON, Quorum, check_quorum

__all__ = [
    "BUGS",
    "IDLE_RECOVERER",
    "PAYLOAD_BASE",
    "REPLY_TYPES",
    "LedgerSpec",
    "LedgerState",
    "Msg",
    "Recoverer",
    "data_on",
    "payload",
]

# Ledger states in the metadata store (LedgerMetadataFormat.State).
OPEN, IN_RECOVERY, CLOSED = "OPEN", "IN_RECOVERY", "CLOSED"
# The writer's handle.
WRITING, WRITER_CLOSED, WRITER_FENCED = "WRITING", "CLOSED", "FENCED"
# A recovering client's phases (the steps of LedgerRecoveryOp).
IDLE, FENCING, READING, WRITING_BACK, DONE, FAILED = "IDLE", "FENCING", "READING", "WRITING_BACK", "DONE", "FAILED"

WRITER = 0  # client id of the writer; recovering clients are 1 .. NumRecoverers
PAYLOAD_BASE = 100  # the data of entry e is PAYLOAD_BASE + e: not e, so that content and ids are not confused
# A bookie's replies, with RepliesInFlight = 1: an add stored (AddAck) or refused as fenced (AddFenced, EFENCED), a
# fencing read's LAC (FenceResp), a recovery read's entry (ReadResp, its data) or NoSuchEntry.
REPLY_TYPES = ("AddAck", "AddFenced", "FenceResp", "ReadResp", "NoSuchEntry")
# A request a client awaits, and the replies that answer it: while one of them is in flight, it waits.
_ANSWERS = {
    "AddReq": ("AddReq", "AddAck", "AddFenced"),
    "FenceReq": ("FenceReq", "FenceResp"),
    "ReadReq": ("ReadReq", "ReadResp", "NoSuchEntry"),
}


def payload(e: int) -> int:
    """The data the application added as entry ``e`` (TLA+'s Payload(e))."""
    return PAYLOAD_BASE + e


def _default_data(m: Msg) -> int:
    return payload(m.entry) if m.type == "AddReq" else -1


BUGS = {
    "none": "the protocol as BookKeeper implements it",
    "recovery_read_no_fence": "recovery reads do not set the fencing flag (apache/bookkeeper#2614)",
    "fence_qa_total": "fencing counted complete after Qa replies in total, not Qw - Qa + 1 in every write set",
    "lac_before_qa": "the writer completes an entry, and advances its LAC, on its first ack instead of Qa acks",
    "missing_after_qa_no_such": "recovery declares an entry missing after Qa NoSuchEntry replies, not Qw - Qa + 1",
    "recovery_change_ends_at_lac": (
        "a recovering client that replaces a bookie of its write-back closes at the entries already written "
        "back (its handle's LAC), dropping the write-backs still pending"
    ),
    "resend_reused_buffer": (
        "after an ensemble change, a pending add is resent with the bytes of the newest add, as a buffer reused "
        "before the resend would hold, not the data it was packaged with"
    ),
    "reader_reads_unconfirmed": (
        "a plain reader reads entries past the LAC it learned, as readUnconfirmedEntries does, and takes them for "
        "confirmed ones"
    ),
    "explicit_lac_sends_lap": (
        "the writer's explicit-LAC timer sends lastAddPushed instead of lastAddConfirmed, so bookies serve readers "
        "a LAC past what Qa bookies stored"
    ),
    "fence_ensemble_coverage": (
        "fencing counted complete after E - Qa + 1 replies in total (BP-46's ensemble coverage): not a safety "
        "bug, as the rule is stricter than BookKeeper's; recovery waits for replies it does not need"
    ),
}
# Which rule of spec/quorum.py each seeded bug puts in place of BookKeeper's.
_FENCING_RULE_OF_BUG = {"fence_qa_total": "qa_total", "fence_ensemble_coverage": "ensemble_coverage"}
_MISSING_RULE_OF_BUG = {"missing_after_qa_no_such": "qa_no_such"}


@attrs.frozen(cache_hash=True)
class Msg:
    """A message in flight: a request, or with RepliesInFlight = 1 a bookie's reply. All kinds share one record
    shape, as in the TLA+ spec.

    ===============  ===================================  ======================
    ``type``         sent by                              fields that matter
    ===============  ===================================  ======================
    ``AddReq``       writer, or recovering client         entry, lac, data, recovery
    ``FenceReq``     recovering client (read of the LAC)  fence
    ``ReadReq``      recovering client                    entry, fence
    ``LacReq``       writer (its explicit LAC)            lac
    ``AddAck``       bookie, to an add it stored          entry, recovery
    ``AddFenced``    bookie, to a normal add it refused   entry
    ``FenceResp``    bookie, to a fencing read            lac (the bookie's)
    ``ReadResp``     bookie, to a recovery read           entry, data (what it stores)
    ``NoSuchEntry``  bookie, to a recovery read           entry
    ===============  ===================================  ======================

    A reply names the client it goes to and the bookie it comes from, as its request did. With RepliesInFlight =
    0 replies are not messages: the bookie's step delivers (or loses) its reply. ``data`` is -1 but for an add,
    whose data is by default the application's for its entry (``payload``), and a ``ReadResp``.
    """

    type: str
    client: int
    bookie: int
    entry: int = -1
    lac: int = -1
    recovery: bool = False
    fence: bool = False
    data: int = attrs.field(default=attrs.Factory(_default_data, takes_self=True))

    def __repr__(self) -> str:
        parts = [f"c{self.client}", f"b{self.bookie}"]
        if self.type not in ("FenceReq", "LacReq", "FenceResp"):
            parts.append(f"e{self.entry}")
        if self.type == "LacReq":
            parts.append(f"lac={self.lac}")
        if self.type in ("AddReq", "FenceResp"):
            parts.append(f"lac={self.lac}")
        if (self.type == "AddReq" and self.data != payload(self.entry)) or self.type == "ReadResp":
            parts.append(f"data={self.data}")
        parts += [flag for flag in ("recovery", "fence") if getattr(self, flag)]
        return f"{self.type}({' '.join(parts)})"


@attrs.frozen(cache_hash=True)
class Recoverer:
    """A client opening the ledger with recovery."""

    phase: str  # IDLE, FENCING, READING, WRITING_BACK, DONE or FAILED
    version: int  # metadata version this client last read or wrote
    fence_replies: frozenset[int]  # bookies that answered the fencing read of the LAC
    max_lac: int  # highest LAC among those answers
    start: int  # recovery starts after this entry: max(max_lac, first entry of last segment - 1)
    next: int  # entry being read
    no_such: frozenset[int]  # bookies that answered NoSuchEntry for entry ``next``
    last: int  # last entry found by the recovery reads
    wb_acks: frozenset[tuple[int, int]]  # (entry, bookie) acks of recovery adds (write-back)
    # the ledger's segments as this client read them when it opened the ledger: its own copy of the metadata,
    # which it fences, reads and writes back by (LedgerRecoveryOp's metadataForRecovery); empty until it opens it
    segments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (first entry id, ensemble) of the ensembles this client changed while writing back, to be written by its
    # close (ReadOnlyLedgerHandle.newEnsemblesFromRecovery); empty while no write-back failed
    ensembles: tuple[tuple[int, tuple[int, ...]], ...] = ()
    # (entry, data) of each entry this client read, which its write-back sends (its recovery adds' toSend)
    data: frozenset[tuple[int, int]] = frozenset()


#: a client that has not opened the ledger (or whose recovery failed and that opens it again)
IDLE_RECOVERER = Recoverer(IDLE, 0, frozenset(), -1, -1, -1, frozenset(), -1, frozenset())


@attrs.frozen(cache_hash=True)
class LedgerState:
    # -- metadata store (one znode, compare-and-set on its version)
    meta_status: str  # OPEN, IN_RECOVERY or CLOSED
    meta_segments: tuple[tuple[int, tuple[int, ...]], ...]  # (first entry id, ensemble) in order
    meta_last_entry: int  # lastEntryId once CLOSED, else -1
    meta_version: int  # bumped by every successful compare-and-set
    # -- bookies, indexed by bookie - 1
    bookie_entries: tuple[frozenset[int], ...]  # entries stored (durably) on each bookie
    bookie_data: tuple[frozenset[tuple[int, int]], ...]  # (entry, data) of each: the bytes a read of it returns
    bookie_lac: tuple[int, ...]  # highest LAC piggybacked on an add the bookie stored
    bookie_fenced: tuple[bool, ...]  # fenced bookies reject normal adds, accept recovery adds
    crashed: frozenset[int]  # bookies that are down; they answer nothing until they restart
    crashes: int  # bookie crashes so far (at most MaxCrashes)
    # -- network
    net: frozenset[Msg]  # messages in flight, delivered in any order
    lost: int  # messages lost so far (at most MaxLoss)
    # -- the writer (client 0)
    writer_status: str  # WRITING, CLOSED (closed it itself) or FENCED (told to stop)
    writer_version: int  # metadata version the writer last read or wrote
    writer_lap: int  # lastAddPushed: the highest entry id handed out
    writer_lac: int  # LastAddConfirmed: every entry <= it has Qa acks, completed in order
    writer_acks: frozenset[tuple[int, int]]  # (entry, bookie) acks of pending and completed adds; none after a close
    writer_add_lac: tuple[int, ...]  # entry -> the LAC its add carries, fixed when the writer pushed it; -1 before
    # -- recovering clients 1 .. NumRecoverers, indexed by client - 1
    rec: tuple[Recoverer, ...]
    # -- plain readers 1 .. NumReaders, indexed by reader - 1
    reader_lac: tuple[int, ...] = ()  # the LAC each learned (-1 before any)
    reader_read: tuple[frozenset[tuple[int, int]], ...] = ()  # (entry, data) of each entry it read
    # -- the explicit LAC (ExplicitLac = 1)
    bookie_explicit_lac: tuple[int, ...] = ()  # the explicit LAC each bookie was sent last (-1: none)
    writer_explicit_lac: int = -1  # the LAC the writer's explicit-LAC timer last sent for (-1: none)


# -- parameter generators: the \E in front of each TLA+ action ---------------------------
# Messages are tried in a fixed order: a set's own order follows string hashing,
# which changes from run to run, and counterexamples must not.
_MSG_ORDER = operator.attrgetter("type", "client", "bookie", "entry", "lac", "data", "recovery", "fence")


def _requests_of(type_: str) -> Any:
    """Each request of that type in flight, served with its reply delivered (or, with RepliesInFlight = 1, sent),
    or lost."""

    def each(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[Msg, bool]]:
        for m in sorted((m for m in s.net if m.type == type_), key=_MSG_ORDER):
            yield (m, True)
            if s.lost < spec.MaxLoss and not spec.RepliesInFlight:
                yield (m, False)

    return each


def _replies(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[Msg]]:
    return ((p,) for p in sorted((p for p in s.net if p.type in REPLY_TYPES), key=_MSG_ORDER))


def _each_bookie(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int]]:
    return ((b,) for b in spec.bookies)


def _each_recoverer(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int]]:
    return ((c,) for c in spec.recoverers)


def _each_message(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[Msg]]:
    return ((m,) for m in sorted(s.net, key=_MSG_ORDER))


def _packaged_lacs(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int]]:
    return ((lac,) for lac in spec.packaged_lacs(s))


def _replacements(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int, int]]:
    ensemble = spec.writer_segments(s)[-1][1]
    return ((b, nb) for b in ensemble for nb in spec.bookies if nb not in ensemble)


def _recoverer_bookie(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int, int]]:
    return ((c, b) for c in spec.recoverers for b in spec.bookies)


def _write_backs(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int, int, int]]:
    for c in spec.recoverers:
        r = s.rec[c - 1]
        if r.phase in (READING, WRITING_BACK):
            for e in range(r.start + 1, r.last + 1):
                for b in spec.recovery_write_set(s, r, e):
                    yield (c, e, b)


def _recovery_replacements(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int, int, int]]:
    for c in spec.recoverers:
        r = s.rec[c - 1]
        if r.phase in (READING, WRITING_BACK):
            ensemble = spec.recovery_segments(s, r)[-1][1]
            for b in ensemble:
                for nb in spec.bookies:
                    if nb not in ensemble:
                        yield (c, b, nb)


def _explicit_lacs(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int]]:
    return ((at,) for at in range(s.writer_explicit_lac + 1, spec.explicit_lac_bound(s) + 1))


def _write_lacs(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[Msg]]:
    return ((m,) for m in sorted((m for m in s.net if m.type == "LacReq"), key=_MSG_ORDER))


def _reader_lacs(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int, int]]:
    return ((r, lac) for r in spec.readers for lac in spec.entries)


def _reader_reads(spec: LedgerSpec, s: LedgerState) -> Iterable[tuple[int, int, int]]:
    return ((r, e, b) for r in spec.readers for e in spec.entries for b in spec.bookies)


class LedgerSpec(Spec[LedgerState]):
    """The ledger protocol; see the module docstring."""

    name = "ledger"
    state_type = LedgerState
    constants = (
        int_constant("NumBookies", 3, "bookies in the cluster, 1 .. NumBookies"),
        int_constant("E", 3, "ensemble size"),
        int_constant("Qw", 2, "write quorum: bookies each entry is sent to"),
        int_constant("Qa", 2, "ack quorum: acks an add needs to complete"),
        int_constant("NumRecoverers", 1, "clients that open the ledger with recovery"),
        int_constant("NumReaders", 0, "clients that open the ledger without recovery and read it"),
        int_constant("MaxEntries", 2, "entries the writer pushes (ids 0 .. MaxEntries-1)"),
        int_constant(
            "Throttle", 0, "adds the writer keeps pending at most (BookKeeper's client throttle); 0: no limit"
        ),
        int_constant(
            "LacLag",
            0,
            "1: an add may carry a LAC behind the writer's, down to the one its last add carried "
            "(BookKeeper's handle takes acks in one by one); 0: every add carries the writer's LAC",
        ),
        int_constant(
            "ExplicitLac",
            0,
            "1: the writer sends its LAC to the bookies on a timer (explicitLacInterval > 0); 0: never (the default)",
        ),
        int_constant("MaxCrashes", 0, "bookie crashes in all (a bookie that restarted may crash again)"),
        int_constant("MaxLoss", 0, "messages the network may lose"),
        int_constant(
            "RepliesInFlight",
            0,
            "1: a bookie's reply is a message in flight, which its client takes in a step of its own; 0: the "
            "bookie's step delivers it (the default)",
        ),
        Constant("Bug", str, "none", "a seeded bug, or none", choices=tuple(BUGS)),
    )
    liveness: ClassVar[Mapping[str, str]] = {
        "RecoveryCloses": '(\\E c \\in Recoverers : rec[c].phase # "IDLE") ~> meta_status = "CLOSED"',
    }

    NumBookies: int
    E: int
    Qw: int
    Qa: int
    NumRecoverers: int
    NumReaders: int
    MaxEntries: int
    Throttle: int
    LacLag: int
    ExplicitLac: int
    MaxCrashes: int
    MaxLoss: int
    RepliesInFlight: int
    Bug: str

    def check_constants(self) -> None:
        check_quorum(self.E, self.Qw, self.Qa)
        if self.NumBookies < self.E:
            raise ConstantError(
                f"not enough bookies for the ensemble: NumBookies={self.NumBookies} < E={self.E} "
                "(BookKeeper fails the create with BKNotEnoughBookiesException)"
            )
        for name in ("NumRecoverers", "NumReaders", "MaxEntries", "Throttle", "MaxCrashes", "MaxLoss"):
            if getattr(self, name) < 0:
                raise ConstantError(f"{name} must not be negative, got {getattr(self, name)}")
        for name in ("LacLag", "ExplicitLac", "RepliesInFlight"):
            if getattr(self, name) not in (0, 1):
                raise ConstantError(f"{name} is 0 or 1, got {getattr(self, name)}")
        # Precomputed tables; the TLA+ text computes the same with operators.
        self.bookies = tuple(range(1, self.NumBookies + 1))
        self.recoverers = tuple(range(1, self.NumRecoverers + 1))
        self.readers = tuple(range(1, self.NumReaders + 1))
        self.entries = tuple(range(self.MaxEntries))
        self.quorum = Quorum(self.E, self.Qw, self.Qa)
        # Write sets as ensemble indices (0-based): window i is i, i+1, .., i+Qw-1 mod E.
        self.windows = self.quorum.windows
        # The quorum rules (spec/quorum.py) recovery follows; the seeded bugs swap in weaker ones.
        self.fencing_rule = FENCING_RULES[_FENCING_RULE_OF_BUG.get(self.Bug, "write_set_coverage")]
        self.missing_rule = MISSING_RULES[_MISSING_RULE_OF_BUG.get(self.Bug, "write_set_coverage")]
        # A missing-entry rule counts NoSuchEntry replies, so it is tabulated by count, off the hot path:
        # missing_after[k] is the rule's verdict when k members of the write set said NoSuchEntry.
        self.missing_after = tuple(
            self.missing_rule.holds(self.quorum, [i < k for i in range(self.Qw)], PYTHON) for k in range(self.Qw + 1)
        )
        self._write_sets: dict[tuple[Any, int], tuple[int, ...]] = {}  # a cache: few segment lists occur

    # -- operators ------------------------------------------------------------------
    def segment_of(self, s: LedgerState, e: int) -> tuple[int, tuple[int, ...]]:
        """The segment holding entry e: the one with the largest first entry <= e."""
        found = s.meta_segments[0]
        for seg in s.meta_segments:
            if seg[0] <= e:
                found = seg
        return found

    def write_set(self, s: LedgerState, e: int) -> tuple[int, ...]:
        """Bookies entry e is written to: ensemble indices (e + i) % E, i < Qw."""
        return self.write_set_in(s.meta_segments, e)

    def write_set_in(self, segments: tuple[tuple[int, tuple[int, ...]], ...], e: int) -> tuple[int, ...]:
        key = (segments, e)
        found = self._write_sets.get(key)
        if found is None:
            ensemble = segments[0][1]
            for first, members in segments:
                if first <= e:
                    ensemble = members
            found = self._write_sets[key] = tuple(ensemble[i] for i in self.windows[e % self.E])
        return found

    def writer_segments(self, s: LedgerState) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """The segments the writer's handle knows: the metadata's, but for a recovery's close that changed them.

        Only the writer changes the segments while the ledger is OPEN, so a recovering client reads them as
        the writer knows them; a close that writes the recovery's own ensembles is the one change the writer
        does not see (its handle keeps its copy of the metadata until a compare-and-set of its own fails).
        """
        for r in s.rec:
            if r.ensembles:
                return r.segments
        return s.meta_segments

    def writer_write_set(self, s: LedgerState, e: int) -> tuple[int, ...]:
        """Bookies the writer sends entry e to, and counts the acks of."""
        return self.write_set_in(self.writer_segments(s), e)

    def recovery_segments(self, s: LedgerState, r: Recoverer) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """The segments as a recovering client writes back and closes: those it read, with its own ensemble
        changes after them (one starting where the last segment starts replaces it, as closeRecovered does)."""
        if not r.ensembles:
            return r.segments
        first = r.ensembles[0][0]
        return (*(seg for seg in r.segments if seg[0] < first), *r.ensembles)

    def recovery_write_set(self, s: LedgerState, r: Recoverer, e: int) -> tuple[int, ...]:
        """Bookies a recovering client writes entry e back to (its handle's current ensembles)."""
        return self.write_set_in(self.recovery_segments(s, r), e)

    def recovery_lac(self, s: LedgerState, r: Recoverer) -> int:
        """The LAC of the recovering client's handle: the last entry whose write-back, and every one before it,
        has Qa acks (the recovery adds complete in order, as the writer's do)."""
        segments = self.recovery_segments(s, r)
        lac = r.start
        while lac < r.last and self.acks_of(r.wb_acks, lac + 1, self.write_set_in(segments, lac + 1)) >= self.Qa:
            lac += 1
        return lac

    def last_ensemble(self, s: LedgerState) -> tuple[int, ...]:
        return s.meta_segments[-1][1]

    def acks_of(self, acks: frozenset[tuple[int, int]], e: int, write_set: tuple[int, ...]) -> int:
        return sum(1 for b in write_set if (e, b) in acks)

    def completed_lac(self, s: LedgerState, acks: frozenset[tuple[int, int]], lap: int) -> int:
        """The highest entry whose whole prefix has its quorum of acks (sendAddSuccessCallbacks)."""
        needed = 1 if self.Bug == "lac_before_qa" else self.Qa
        lac = s.writer_lac
        while lac < lap and self.acks_of(acks, lac + 1, self.writer_write_set(s, lac + 1)) >= needed:
            lac += 1
        return lac

    def fencing_complete(self, r: Recoverer, ensemble: tuple[int, ...]) -> bool:
        """RRQuorumCoverageSet: every write set has Qw - Qa + 1 fencing replies."""
        return self.fencing_rule.holds(self.quorum, [b in r.fence_replies for b in ensemble], PYTHON)

    def declared_missing(self, no_such: frozenset[int]) -> bool:
        """Qw - Qa + 1 bookies of the entry's write set said NoSuchEntry: it never reached Qa acks.

        ``no_such`` holds members of the write set only: reads go to the write set.
        """
        return self.missing_after[len(no_such)]

    # -- Init ------------------------------------------------------------------------
    def init_states(self) -> Iterator[LedgerState]:
        yield LedgerState(
            meta_status=OPEN,
            meta_segments=((0, tuple(range(1, self.E + 1))),),
            meta_last_entry=-1,
            meta_version=1,
            bookie_entries=tuple(frozenset() for _ in self.bookies),
            bookie_data=tuple(frozenset() for _ in self.bookies),
            bookie_lac=tuple(-1 for _ in self.bookies),
            bookie_fenced=tuple(False for _ in self.bookies),
            crashed=frozenset(),
            crashes=0,
            net=frozenset(),
            lost=0,
            writer_status=WRITING,
            writer_version=1,
            writer_lap=-1,
            writer_lac=-1,
            writer_acks=frozenset(),
            writer_add_lac=tuple(-1 for _ in self.entries),
            rec=tuple(IDLE_RECOVERER for _ in self.recoverers),
            reader_lac=tuple(-1 for _ in self.readers),
            reader_read=tuple(frozenset() for _ in self.readers),
            bookie_explicit_lac=tuple(-1 for _ in self.bookies),
        )

    # -- the writer ------------------------------------------------------------------
    def packaged_lacs(self, s: LedgerState) -> range:
        """The LACs the writer's next add may carry: its own, or with ``LacLag`` any since its last add's.

        LedgerHandle.sendAddSuccessCallbacks (4.17.2) sets ``lastAddConfirmed`` to one completed
        add at a time and runs that add's callback before it takes the next; an add the
        application issues from a callback, or while the ledger's thread has not yet taken in
        acks the bookies sent, is packaged with the LAC of that moment (PendingAddOp.initiate).
        The spec's writer takes an ack in at once, so that LAC may be behind its own, though
        never behind the one the add before carried.
        """
        if self.LacLag == 0:
            return range(s.writer_lac, s.writer_lac + 1)
        last = s.writer_add_lac[s.writer_lap] if s.writer_lap >= 0 else -1
        return range(last, s.writer_lac + 1)

    @action(_packaged_lacs)
    def WriterAddsEntry(self, s: LedgerState, lac: int) -> LedgerState | None:
        """entryId = ++lastAddPushed; the add goes to the write set with the LAC ``lac``.

        PendingAddOp.initiate (4.17.2) packages the entry once, with the LAC of that moment, into
        ``toSend``; every later send of the add, a resend after an ensemble change included, sends
        those bytes. ``writer_add_lac`` keeps that LAC: it is not recoverable from the rest of the
        state, since the add's first requests may all have been served or lost by the time of a resend.
        """
        if s.writer_status != WRITING or s.writer_lap + 1 >= self.MaxEntries:
            return None
        if self.Throttle > 0 and s.writer_lap - s.writer_lac >= self.Throttle:
            return None
        if lac not in self.packaged_lacs(s):
            return None
        e = s.writer_lap + 1
        sends = {Msg("AddReq", WRITER, b, e, lac, data=payload(e)) for b in self.writer_write_set(s, e)}
        return evolve(s, writer_lap=e, net=s.net | sends, writer_add_lac=_replace(s.writer_add_lac, e, lac))

    @action(_replacements)
    def WriterChangesEnsemble(self, s: LedgerState, b: int, nb: int) -> LedgerState | None:
        """Replace bookie b, whose ack for an add it was sent will not come, by nb (compare-and-set).

        The add need not be pending (4.17.2): a failure that reaches an add which already has its Qa acks is kept
        (PendingAddOp.writeComplete calls LedgerHandle.notifyWriteFailed), and the next add's initiate replaces the
        bookie (maybeHandleDelayedWriteBookieFailure), whether or not that add's write set holds it. So some add
        is pending when the writer changes its ensemble.
        """
        if s.writer_status != WRITING or nb in s.crashed or s.writer_lap == s.writer_lac:
            return None
        if not self.writer_gave_up_on(s, b):
            return None
        pending = range(s.writer_lac + 1, s.writer_lap + 1)
        if s.meta_version != s.writer_version or s.meta_status != OPEN:
            # The compare-and-set fails; the writer rereads the metadata, finds the
            # ledger in recovery or closed, and gives up (BKLedgerFencedException).
            return evolve(s, writer_status=WRITER_FENCED, writer_version=s.meta_version)
        first = s.writer_lac + 1
        ensemble = tuple(nb if x == b else x for x in self.writer_segments(s)[-1][1])
        kept = tuple(seg for seg in s.meta_segments if seg[0] < first)  # a segment starting at LAC+1 is replaced
        segments = (*kept, (first, ensemble))
        t = evolve(s, meta_segments=segments, meta_version=s.meta_version + 1, writer_version=s.meta_version + 1)
        # Pending adds lose the replaced bookie's acks and go to the new bookie, each with the LAC and data it
        # was packaged with (PendingAddOp.unsetSuccessAndSendWriteRequest sends its toSend buffer again).
        acks = frozenset((e, x) for (e, x) in s.writer_acks if not (x == b and e >= first))
        resend = {
            Msg("AddReq", WRITER, nb, e, s.writer_add_lac[e], data=self._resent_data(s, e))
            for e in pending
            if nb in self.writer_write_set(t, e)
        }
        return evolve(t, writer_acks=acks, net=s.net | resend)

    def writer_gave_up_on(self, s: LedgerState, b: int) -> bool:
        """Has the writer given up on bookie b's ack for some add it sent b, pending or already complete?"""
        return any(
            b in self.writer_write_set(s, e)
            and (e, b) not in s.writer_acks
            and self.timed_out(s, "AddReq", WRITER, b, e)
            for e in range(s.writer_lap + 1)
        )

    def _resent_data(self, s: LedgerState, e: int) -> int:
        if self.Bug == "resend_reused_buffer":
            return payload(s.writer_lap)  # SEEDED BUG: the newest add's bytes, as a buffer reused too early
        return payload(e)

    @action()
    def WriterClosesLedger(self, s: LedgerState) -> LedgerState | None:
        """The writer closes the ledger at its LAC (compare-and-set), failing the adds still pending.

        LedgerHandle.doAsyncCloseInternal (4.17.2) drains the pending adds, sets lastAddPushed to
        lastAddConfirmed, fails the drained adds and writes the metadata CLOSED with that lastEntryId.
        Their requests stay in flight: a bookie may still store them, but a late ack finds no pending
        add and moves nothing (``_writer_acked``), so entries past the LAC stay out of the ledger.
        The handle then holds no add, so no ack either: ``writer_acks`` empties.
        """
        if s.writer_status != WRITING:
            return None
        drained = evolve(s, writer_lap=s.writer_lac, writer_acks=frozenset())
        if s.meta_version != s.writer_version or s.meta_status != OPEN:
            return evolve(drained, writer_status=WRITER_FENCED, writer_version=s.meta_version)
        return evolve(
            drained,
            writer_status=WRITER_CLOSED,
            meta_status=CLOSED,
            meta_last_entry=s.writer_lac,
            meta_version=s.meta_version + 1,
            writer_version=s.meta_version + 1,
        )

    def explicit_lac_bound(self, s: LedgerState) -> int:
        """The highest LAC the explicit-LAC timer may send: the writer's (the seeded bug: its lastAddPushed)."""
        return s.writer_lap if self.Bug == "explicit_lac_sends_lap" else s.writer_lac

    @action(_explicit_lacs)
    def WriterSendsExplicitLac(self, s: LedgerState, at: int) -> LedgerState | None:
        """The explicit-LAC timer sends the writer's LAC to the write set of ``at`` in the current ensemble.

        ExplicitLacFlushPolicyImpl (4.17.2), with ``explicitLacInterval > 0``: a timer, finding the writer's LAC
        ``at`` past the one it last sent for, sends a WriteLac to the write set of ``at`` in the current ensemble
        (PendingWriteLacOp.initiate). The bytes are packaged later, on a worker thread, with the handle's LAC of
        that moment: they carry ``writer_lac``, which may have moved past ``at``. The replies change nothing (the
        callback only logs). A close stops the timer (tearDownWriteHandleState); a writer fenced while the ledger
        is in recovery keeps it.
        """
        bound = self.explicit_lac_bound(s)
        if self.ExplicitLac != 1 or s.writer_status == WRITER_CLOSED or not s.writer_explicit_lac < at <= bound:
            return None
        ensemble = self.writer_segments(s)[-1][1]
        sends = {Msg("LacReq", WRITER, ensemble[i], lac=bound) for i in self.windows[at % self.E]}
        return evolve(s, net=s.net | sends, writer_explicit_lac=at)

    def timed_out(self, s: LedgerState, request: str, c: int, b: int, e: int) -> bool:
        """Client c gives up waiting on bookie b about entry e: b crashed, or neither the request nor (with
        RepliesInFlight = 1) its reply is in flight: it was lost, or served with its reply lost. Replies already
        received are in the client's state. (TLA+'s TimedOut.)"""
        if b in s.crashed:
            return True
        answers = _ANSWERS[request]
        return not any(m.type in answers and m.client == c and m.bookie == b and m.entry == e for m in s.net)

    # -- bookies: each serves one request and replies in the same step ------------------
    # A reply is either delivered (the client acts on it at once) or lost. A reply
    # that would arrive after the client stopped waiting for it acts as a lost one.
    # A request whose serving would change nothing (a fenced bookie rejecting an add
    # that nobody awaits, a repeated fence) is left unserved: serving it is a
    # stuttering step, and leaving it keeps the interleavings down.
    # With RepliesInFlight = 1 the step sends its reply instead, to be taken by
    # ClientReceivesReply, and every request is served: whether its reply will
    # matter depends on what the client does before it arrives.
    @action(_requests_of("AddReq"))
    def BookieReceivesAdd(self, s: LedgerState, m: Msg, replied: bool) -> LedgerState | None:
        """A fenced bookie rejects normal adds and accepts recovery adds; it stores, then acks."""
        b, i = m.bookie, m.bookie - 1
        if b in s.crashed:
            return None
        if s.bookie_fenced[i] and not m.recovery:
            return self._reply(s, evolve(s, net=s.net - {m}), _reply_to(m, "AddFenced"), replied)
        # An entry added again replaces the data a read returns (the entry index points at the newest copy).
        data = frozenset(p for p in s.bookie_data[i] if p[0] != m.entry) | {(m.entry, m.data)}
        served = evolve(
            s,
            net=s.net - {m},
            bookie_entries=_replace(s.bookie_entries, i, s.bookie_entries[i] | {m.entry}),
            bookie_data=_replace(s.bookie_data, i, data),
            bookie_lac=_replace(s.bookie_lac, i, max(s.bookie_lac[i], m.lac)),
        )
        return self._reply(s, served, _reply_to(m, "AddAck"), replied)

    @action(_requests_of("FenceReq"))
    def BookieReceivesFenceRead(self, s: LedgerState, m: Msg, replied: bool) -> LedgerState | None:
        """Read of the LAC with FLAG_DO_FENCING: the bookie fences itself (journaled), then answers its LAC."""
        b = m.bookie
        if b in s.crashed:
            return None
        served = evolve(s, net=s.net - {m}, bookie_fenced=_replace(s.bookie_fenced, b - 1, True))
        return self._reply(s, served, _reply_to(m, "FenceResp", lac=s.bookie_lac[b - 1]), replied)

    @action(_requests_of("ReadReq"))
    def BookieReceivesRecoveryRead(self, s: LedgerState, m: Msg, replied: bool) -> LedgerState | None:
        """A recovery read fences the bookie when its flag is set, then answers found or NoSuchEntry."""
        b = m.bookie
        if b in s.crashed:
            return None
        fenced = _replace(s.bookie_fenced, b - 1, True) if m.fence else s.bookie_fenced
        served = evolve(s, net=s.net - {m}, bookie_fenced=fenced)
        data = data_on(s, b, m.entry)
        reply = _reply_to(m, "NoSuchEntry") if data is None else _reply_to(m, "ReadResp", data=data)
        return self._reply(s, served, reply, replied)

    @action(_write_lacs)
    def BookieReceivesWriteLac(self, s: LedgerState, m: Msg) -> LedgerState | None:
        """The bookie replaces its explicit LAC with the one sent, and journals it; the writer ignores the reply.

        BookieImpl.setExplicitLac (4.17.2) replaces the ledger's explicit LAC with the bytes sent
        (FileInfo.setExplicitLac keeps no maximum: an older one arriving later wins) and journals them before it
        replies; a fenced bookie takes it too, as that path checks no fence. The reply has nothing to lose.
        """
        if m.bookie in s.crashed:
            return None
        return evolve(s, net=s.net - {m}, bookie_explicit_lac=_replace(s.bookie_explicit_lac, m.bookie - 1, m.lac))

    def _reply(self, s: LedgerState, served: LedgerState, reply: Msg, replied: bool) -> LedgerState | None:
        """The bookie's step: ``served`` is the bookie's side, then its ``reply`` is sent (RepliesInFlight = 1), or
        taken by the client at once, or lost.

        A reply the client ignores is never lost (that would only spend the loss
        budget), and a request whose serving changes nothing is left unserved.
        """
        if self.RepliesInFlight:
            return evolve(served, net=served.net | {reply})
        answered = self._answer(served, reply)
        unanswered = answered is served or answered == served  # most replies change nothing: no field compares
        if not replied:
            return evolve(served, lost=s.lost + 1) if not unanswered else None
        if unanswered and (
            served.bookie_data == s.bookie_data
            and served.bookie_lac == s.bookie_lac
            and served.bookie_fenced == s.bookie_fenced
        ):
            return None
        return answered

    @action(_replies, fairness="weak")
    def ClientReceivesReply(self, s: LedgerState, p: Msg) -> LedgerState | None:
        """With RepliesInFlight = 1, client p.client takes bookie p.bookie's reply p and acts on it, as the bookie's
        step does at once with RepliesInFlight = 0. A late reply changes nothing but the messages in flight."""
        return self._answer(evolve(s, net=s.net - {p}), p)

    @action(_each_bookie)
    def BookieCrashes(self, s: LedgerState, b: int) -> LedgerState | None:
        """The bookie stops; what it stored stays on its disk, unreachable until it restarts."""
        if b in s.crashed or s.crashes >= self.MaxCrashes:
            return None
        return evolve(s, crashed=s.crashed | {b}, crashes=s.crashes + 1)

    @action(_each_bookie)
    def BookieRestarts(self, s: LedgerState, b: int) -> LedgerState | None:
        """A crashed bookie starts again: its journal replay restores every entry, fence and LAC it had."""
        if b not in s.crashed:
            return None
        return evolve(s, crashed=s.crashed - {b})

    # -- the network -----------------------------------------------------------------
    @action(_each_message)
    def NetworkLosesMessage(self, s: LedgerState, m: Msg) -> LedgerState | None:
        """A request may be lost, up to MaxLoss losses of requests and replies together."""
        if s.lost >= self.MaxLoss:
            return None
        return evolve(s, net=s.net - {m}, lost=s.lost + 1)

    # -- what a client does with a reply (part of the bookie's step, or ClientReceivesReply) -
    def _answer(self, s: LedgerState, p: Msg) -> LedgerState:
        """Client p.client acts on reply p (the CASE of TLA+'s ClientReceivesReply)."""
        if p.type == "AddAck":
            return self._writer_acked(s, p) if p.client == WRITER else self._write_back_acked(s, p)
        if p.type == "AddFenced":
            return self._writer_rejected(s, p)
        if p.type == "FenceResp":
            return self._fence_replied(s, p.client, p.bookie, p.lac)
        return self._read_replied(s, p, p.data if p.type == "ReadResp" else None)

    def _writer_acked(self, s: LedgerState, m: Msg) -> LedgerState:
        """An ack counts only from a bookie still in the entry's write set; completion is in entry order."""
        if s.writer_status != WRITING or m.bookie not in self.writer_write_set(s, m.entry):
            return s
        acks = s.writer_acks | {(m.entry, m.bookie)}
        return evolve(s, writer_acks=acks, writer_lac=self.completed_lac(s, acks, s.writer_lap))

    def _writer_rejected(self, s: LedgerState, m: Msg) -> LedgerState:
        """EFENCED: the writer's handle stops; its pending adds fail."""
        if m.client != WRITER or s.writer_status != WRITING:
            return s
        return evolve(s, writer_status=WRITER_FENCED)

    def _write_back_acked(self, s: LedgerState, m: Msg) -> LedgerState:
        r = s.rec[m.client - 1]
        if r.phase not in (READING, WRITING_BACK):
            return s
        return _set_rec(s, m.client, evolve(r, wb_acks=r.wb_acks | {(m.entry, m.bookie)}))

    def _fence_replied(self, s: LedgerState, c: int, b: int, lac: int) -> LedgerState:
        """Collect fencing replies; once they cover every write set, start the recovery reads."""
        r = s.rec[c - 1]
        if r.phase != FENCING:
            return s
        r = evolve(r, fence_replies=r.fence_replies | {b}, max_lac=max(r.max_lac, lac))
        if not self.fencing_complete(r, r.segments[-1][1]):
            return _set_rec(s, c, r)
        start = max(r.max_lac, r.segments[-1][0] - 1)
        r = evolve(r, phase=READING, start=start, next=start + 1, last=start)
        return _set_rec(evolve(s, net=s.net | self._read_requests(r, c, start + 1)), c, r)

    def _read_requests(self, r: Recoverer, c: int, e: int) -> frozenset[Msg]:
        fence = self.Bug != "recovery_read_no_fence"
        return frozenset(Msg("ReadReq", c, b, e, fence=fence) for b in self.write_set_in(r.segments, e))

    def _read_replied(self, s: LedgerState, m: Msg, data: int | None) -> LedgerState:
        """One reply with the entry (its data; None for NoSuchEntry) recovers it; Qw - Qa + 1 NoSuchEntry
        replies end the reads."""
        c, e = m.client, m.entry
        r = s.rec[c - 1]
        if r.phase != READING or e != r.next:
            return s
        if data is not None:
            # Recovered: write back the data read with recovery adds, and read the next one.
            wb = {Msg("AddReq", c, b, e, -1, recovery=True, data=data) for b in self.recovery_write_set(s, r, e)}
            r = evolve(r, next=e + 1, last=e, no_such=frozenset(), data=r.data | {(e, data)})
            return _set_rec(evolve(s, net=s.net | wb | self._read_requests(r, c, e + 1)), c, r)
        no_such = r.no_such | {m.bookie}
        if self.declared_missing(no_such):
            # Entry e cannot have reached Qa acks: the ledger ends at e - 1.
            return _set_rec(s, c, evolve(r, phase=WRITING_BACK, no_such=no_such))
        return _set_rec(s, c, evolve(r, no_such=no_such))

    # -- recovering clients ----------------------------------------------------------
    @action(_each_recoverer, fairness="weak")
    def RecovererStartsRecovery(self, s: LedgerState, c: int) -> LedgerState | None:
        """Open with recovery: CAS OPEN -> IN_RECOVERY (or join a recovery under way), then fence.

        A client whose recovery failed may open the ledger with recovery again, afresh: the application
        retries (ReadOnlyLedgerHandle.recover, release-4.17.2, runs LedgerRecoveryOp again on a ledger
        still IN_RECOVERY).
        """
        if s.rec[c - 1].phase not in (IDLE, FAILED):
            return None
        r = IDLE_RECOVERER
        if s.meta_status == CLOSED:
            return _set_rec(s, c, evolve(r, phase=DONE, version=s.meta_version))
        version = s.meta_version + 1 if s.meta_status == OPEN else s.meta_version
        sends = {Msg("FenceReq", c, b, fence=True) for b in self.last_ensemble(s)}
        t = evolve(s, meta_status=IN_RECOVERY, meta_version=version, net=s.net | sends)
        return _set_rec(t, c, evolve(r, phase=FENCING, version=version, segments=s.meta_segments))

    @action(_each_recoverer, fairness="weak")
    def RecovererClosesLedger(self, s: LedgerState, c: int) -> LedgerState | None:
        """With every recovered entry on Qa bookies, CAS IN_RECOVERY -> CLOSED at the last entry."""
        r = s.rec[c - 1]
        if r.phase != WRITING_BACK or self.recovery_lac(s, r) < r.last:
            return None
        if s.meta_version != r.version:
            # Another client changed the metadata: reread it. Closed at the same
            # entry is success; anything else fails this recovery.
            ok = s.meta_status == CLOSED and s.meta_last_entry == r.last
            return _set_rec(s, c, evolve(r, phase=DONE if ok else FAILED, version=s.meta_version))
        # The close writes the ensembles the write-back changed with it (closeRecovered).
        t = evolve(
            s,
            meta_status=CLOSED,
            meta_segments=self.recovery_segments(s, r),
            meta_last_entry=r.last,
            meta_version=s.meta_version + 1,
        )
        return _set_rec(t, c, evolve(r, phase=DONE, version=s.meta_version + 1))

    @action(_recovery_replacements)
    def RecovererChangesEnsemble(self, s: LedgerState, c: int, b: int, nb: int) -> LedgerState | None:
        """Replace bookie b, whose ack of a write-back will not come, by nb in this client's ensembles.

        ReadOnlyLedgerHandle.handleBookieFailure (release-4.17.2): a recovering handle keeps the new ensemble,
        from its LAC + 1, in newEnsemblesFromRecovery instead of writing the metadata (the close writes it),
        and sends the pending write-backs to the new bookie (unsetSuccessAndSendWriteRequest). The write-backs
        are recovery adds of the same PendingAddOp as the writer's, so a failure that reaches one already
        complete is kept (notifyWriteFailed, which ReadOnlyLedgerHandle inherits) and the next write-back's
        initiate acts on it (maybeHandleDelayedWriteBookieFailure): some write-back is pending.
        """
        r = s.rec[c - 1]
        if r.phase not in (READING, WRITING_BACK) or nb in s.crashed:
            return None
        segments = self.recovery_segments(s, r)
        if b not in segments[-1][1] or nb not in self.bookies or nb in segments[-1][1]:
            return None
        lac = self.recovery_lac(s, r)
        if lac == r.last or not self.recoverer_gave_up_on(s, c, b):
            return None
        pending = range(lac + 1, r.last + 1)
        first = lac + 1
        ensemble = tuple(nb if x == b else x for x in segments[-1][1])
        ensembles = (*(seg for seg in r.ensembles if seg[0] < first), (first, ensemble))
        acks = frozenset((e, x) for (e, x) in r.wb_acks if not (x == b and e >= first))
        changed = evolve(r, ensembles=ensembles, wb_acks=acks)
        if self.Bug == "recovery_change_ends_at_lac":
            # SEEDED BUG: the pending write-backs are dropped and the recovery ends at its LAC.
            return _set_rec(s, c, evolve(changed, phase=WRITING_BACK, last=lac))
        resend = {
            Msg("AddReq", c, nb, e, -1, recovery=True, data=_recovered_data(r, e))
            for e in pending
            if nb in self.recovery_write_set(s, changed, e)
        }
        return _set_rec(evolve(s, net=s.net | resend), c, changed)

    def recoverer_gave_up_on(self, s: LedgerState, c: int, b: int) -> bool:
        """Has recovering client c given up on bookie b's ack for some write-back it sent b, pending or already
        complete?"""
        r = s.rec[c - 1]
        segments = self.recovery_segments(s, r)
        return any(
            b in self.write_set_in(segments, e) and (e, b) not in r.wb_acks and self.timed_out(s, "AddReq", c, b, e)
            for e in range(r.start + 1, r.last + 1)
        )

    @action(_each_recoverer)
    def RecovererGivesUp(self, s: LedgerState, c: int) -> LedgerState | None:
        """Every bookie asked has answered or timed out, and neither fencing nor the entry read is decided.

        ReadLastConfirmedOp.readEntryComplete (release-4.17.2) fails the fencing read once no reply is
        pending and the replies do not cover every write set; PendingReadOp's logErrorAndReattemptRead
        fails a recovery read with the first error once every bookie of the write set answered and fewer
        than Qw - Qa + 1 said NoSuchEntry. LedgerRecoveryOp then fails the recovery: the ledger stays
        IN_RECOVERY, its bookies fenced, and the application may open it with recovery again.
        """
        r = s.rec[c - 1]
        if r.phase == FENCING:
            undecided = all(b in r.fence_replies or self.timed_out(s, "FenceReq", c, b, -1) for b in r.segments[-1][1])
        elif r.phase == READING:
            undecided = all(
                b in r.no_such or self.timed_out(s, "ReadReq", c, b, r.next)
                for b in self.write_set_in(r.segments, r.next)
            )
        else:
            return None
        if not undecided:
            return None
        # A fencing that never completed leaves no replies behind: NoNewAcksToFencedWriter reads fence_replies
        # of a FAILED client as a fencing that did complete.
        replies = r.fence_replies if r.phase == READING else frozenset()
        return _set_rec(s, c, evolve(r, phase=FAILED, fence_replies=replies))

    # -- retries after a timeout (a lost request or reply is sent again) ----------------
    @action(_recoverer_bookie, fairness="weak")
    def RecovererResendsFenceRead(self, s: LedgerState, c: int, b: int) -> LedgerState | None:
        """No fencing reply from b, and none can come: ask again."""
        r = s.rec[c - 1]
        if r.phase != FENCING or b in r.fence_replies or b in s.crashed or b not in r.segments[-1][1]:
            return None
        if not self.timed_out(s, "FenceReq", c, b, -1):
            return None
        return evolve(s, net=s.net | {Msg("FenceReq", c, b, fence=True)})

    @action(_recoverer_bookie, fairness="weak")
    def RecovererResendsRead(self, s: LedgerState, c: int, b: int) -> LedgerState | None:
        """No read reply from b for the entry being recovered, and none can come: ask again."""
        r = s.rec[c - 1]
        if r.phase != READING or b in s.crashed or b in r.no_such or b not in self.write_set_in(r.segments, r.next):
            return None
        if not self.timed_out(s, "ReadReq", c, b, r.next):
            return None
        return evolve(s, net=s.net | {Msg("ReadReq", c, b, r.next, fence=self.Bug != "recovery_read_no_fence")})

    @action(_write_backs, fairness="weak")
    def RecovererResendsWriteBack(self, s: LedgerState, c: int, e: int, b: int) -> LedgerState | None:
        """A recovery add to b got no ack, and none can come: send it again."""
        r = s.rec[c - 1]
        if b in s.crashed or (e, b) in r.wb_acks or not self.timed_out(s, "AddReq", c, b, e):
            return None
        return evolve(s, net=s.net | {Msg("AddReq", c, b, e, -1, recovery=True, data=_recovered_data(r, e))})

    # -- plain readers ---------------------------------------------------------------
    def max_bookie_lac(self, s: LedgerState) -> int:
        """The highest LAC a bookie serves: piggybacked on the last entry it stored, or its explicit LAC."""
        return max(max(s.bookie_lac), max(s.bookie_explicit_lac))

    @action(_reader_lacs)
    def ReaderReadsLac(self, s: LedgerState, r: int, lac: int) -> LedgerState | None:
        """The reader learns LAC lac: a closed ledger's lastEntryId, or a LAC bookies serve.

        LedgerOpenOp.openWithMetadata (release-4.17.2), doRecovery = false: a closed ledger's LAC is its
        lastEntryId; an open one's comes from LedgerHandle.asyncReadLastConfirmed (PendingReadLacOp with the v3
        wire protocol: the highest LAC among the replies, once they cover every write set), each reply the higher
        of the bookie's explicit LAC and the one piggybacked on its last entry (ReadLacProcessorV3). A reader
        learns a higher LAC by reading it again. Replies carry a LAC a bookie held when it answered: any LAC up to
        the highest a bookie serves now. A long poll (ReadLastConfirmedAndEntryOp) is this step, then
        ReaderReadsEntry.
        """
        if not s.reader_lac[r - 1] < lac <= max(self.max_bookie_lac(s), s.meta_last_entry):
            return None
        return evolve(s, reader_lac=_replace(s.reader_lac, r - 1, lac))

    @action(_reader_reads)
    def ReaderReadsEntry(self, s: LedgerState, r: int, e: int, b: int) -> LedgerState | None:
        """The reader reads entry e, up to its LAC, from bookie b, which holds it.

        LedgerHandle.asyncReadEntries (release-4.17.2; a ReadOnlyLedgerHandle inherits it) refuses entries past
        the handle's LAC; PendingReadOp reads entry e from a bookie that holds it and returns its data. The
        reader's copy of the metadata may be older than the store's, so any bookie holding e may be asked.
        """
        if self.Bug != "reader_reads_unconfirmed" and e > s.reader_lac[r - 1]:
            return None  # the seeded bug reads past the LAC, as readUnconfirmedEntries does
        data = data_on(s, b, e)
        if b in s.crashed or data is None or (e, data) in s.reader_read[r - 1]:
            return None
        return evolve(s, reader_read=_replace(s.reader_read, r - 1, s.reader_read[r - 1] | {(e, data)}))

    # -- invariants ------------------------------------------------------------------
    @invariant
    def TypeOK(self, s: LedgerState) -> str | None:
        """Every variable holds a value of its type, within the model's bounds."""
        if s.meta_status not in (OPEN, IN_RECOVERY, CLOSED):
            return f"meta_status is {s.meta_status!r}"
        if s.writer_status not in (WRITING, WRITER_CLOSED, WRITER_FENCED):
            return f"writer_status is {s.writer_status!r}"
        if not -1 <= s.writer_lac <= s.writer_lap < self.MaxEntries:
            return f"need -1 <= writer_lac ({s.writer_lac}) <= writer_lap ({s.writer_lap}) < MaxEntries"
        for e, lac in enumerate(s.writer_add_lac):
            if not -1 <= lac < e:
                return f"the add of entry {e} carries LAC {lac}, not one in -1 .. {e - 1}"
        for b in self.bookies:
            if s.bookie_entries[b - 1] != {e for e, _ in s.bookie_data[b - 1]}:
                stored, data = sorted(s.bookie_entries[b - 1]), sorted(s.bookie_data[b - 1])
                return f"bookie {b} stores entries {stored} but data of {data}"
        if not s.crashed <= set(self.bookies) or len(s.crashed) > s.crashes:
            return f"crashed is {sorted(s.crashed)} after {s.crashes} crashes"
        if s.crashes > self.MaxCrashes or s.lost > self.MaxLoss:
            return f"{s.crashes} crashes and {s.lost} losses exceed the bounds"
        for first, ensemble in s.meta_segments:
            if len(ensemble) != self.E or len(set(ensemble)) != self.E or not 0 <= first <= self.MaxEntries:
                return f"malformed segment {first}: {ensemble}"
        for r in s.rec:
            if r.phase not in (IDLE, FENCING, READING, WRITING_BACK, DONE, FAILED):
                return f"recoverer phase {r.phase!r}"
        for lac in s.reader_lac:
            if not -1 <= lac < self.MaxEntries:
                return f"a reader learned LAC {lac}, not one in -1 .. {self.MaxEntries - 1}"
        for lac in (s.writer_explicit_lac, *s.bookie_explicit_lac):
            if not -1 <= lac < self.MaxEntries:
                return f"an explicit LAC is {lac}, not one in -1 .. {self.MaxEntries - 1}"
        return None

    @invariant
    def NoAckedEntryLost(self, s: LedgerState) -> str | None:
        """Every entry acknowledged to the writer's application is in the closed ledger."""
        if s.meta_status == CLOSED and s.writer_lac > s.meta_last_entry:
            return (
                f"the writer acknowledged entries up to {s.writer_lac}, "
                f"but the ledger was closed at lastEntryId {s.meta_last_entry}"
            )
        return None

    @invariant
    def ReadersAgreeUpToLac(self, s: LedgerState) -> str | None:
        """A reader may read any entry up to a LAC a bookie serves: all of them are in the closed ledger."""
        if s.meta_status != CLOSED:
            return None
        for b in self.bookies:
            served = max(s.bookie_lac[b - 1], s.bookie_explicit_lac[b - 1])
            if served > s.meta_last_entry:
                return (
                    f"bookie {b} serves LAC {served}, so readers may have read entry "
                    f"{served}, but the ledger was closed at lastEntryId {s.meta_last_entry}"
                )
        return None

    @invariant
    def ExplicitLacIsDurable(self, s: LedgerState) -> str | None:
        """No bookie serves an explicit LAC past what is durable: every entry up to it is stored on Qa bookies."""
        for b in self.bookies:
            for e in range(s.bookie_explicit_lac[b - 1] + 1):
                holders = sorted(x for x in self.bookies if e in s.bookie_entries[x - 1])
                if len(holders) < self.Qa:
                    return (
                        f"bookie {b} serves explicit LAC {s.bookie_explicit_lac[b - 1]}, but entry {e} is stored "
                        f"on bookies {holders} only, fewer than Qa={self.Qa}: a reader may read past what is durable"
                    )
        return None

    @invariant
    def ReadersAgreeOnContent(self, s: LedgerState) -> str | None:
        """Every copy of an entry up to the LAC, the ledger open or closed, is the data the application added."""
        # A reader may read any entry up to the writer's LAC (or the last entry once closed) from any bookie
        # holding it: readers agree on its content only if every copy is the same.
        readable = max(s.writer_lac, s.meta_last_entry)
        for b in self.bookies:
            for e, data in sorted(s.bookie_data[b - 1]):
                if e <= readable and data != payload(e):
                    return (
                        f"bookie {b} holds data {data} for entry {e} <= {readable}, "
                        f"but the application added {payload(e)}: readers may disagree on its content"
                    )
        return None

    @invariant
    def ReaderSeesOnlyConfirmed(self, s: LedgerState) -> str | None:
        """A plain reader never sees past the LAC: what it learned and read is acknowledged (or closed in)."""
        confirmed = max(s.writer_lac, s.meta_last_entry)
        for r, (lac, read) in enumerate(zip(s.reader_lac, s.reader_read, strict=True), start=1):
            beyond = sorted(e for e, _ in read if e > confirmed)
            if lac > confirmed or beyond:
                return (
                    f"reader {r} learned LAC {lac} and read entries {sorted(e for e, _ in read)}, "
                    f"but only entries up to {confirmed} are acknowledged or in the closed ledger"
                )
        return None

    @invariant
    def ReaderReadsWhatWriterWrote(self, s: LedgerState) -> str | None:
        """What a plain reader read is what the writer's application added."""
        for r, read in enumerate(s.reader_read, start=1):
            for e, data in sorted(read):
                if data != payload(e):
                    return f"reader {r} read data {data} as entry {e}, but the application added {payload(e)}"
        return None

    @invariant
    def ClosedLedgerIsReadable(self, s: LedgerState) -> str | None:
        """Every entry of a closed ledger is stored on a bookie of its write set."""
        if s.meta_status != CLOSED:
            return None
        for e in range(s.meta_last_entry + 1):
            if not any(e in s.bookie_entries[b - 1] for b in self.write_set(s, e)):
                return f"entry {e} <= lastEntryId {s.meta_last_entry} is on no bookie of {self.write_set(s, e)}"
        return None

    @invariant
    def NoNewAcksToFencedWriter(self, s: LedgerState) -> str | None:
        """Once fencing completes, no write set has Qa bookies that still accept the writer's adds."""
        if not any(r.phase in (READING, WRITING_BACK, DONE, FAILED) and r.fence_replies for r in s.rec):
            return None
        ensemble = self.writer_segments(s)[-1][1]  # where the writer sends its adds
        for window in self.windows:
            open_bookies = [ensemble[i] for i in window if not s.bookie_fenced[ensemble[i] - 1]]
            if len(open_bookies) >= self.Qa:
                return (
                    f"fencing completed, yet bookies {open_bookies} of write set "
                    f"{[ensemble[i] for i in window]} are not fenced: Qa={self.Qa} of them can still ack the writer"
                )
        return None

    @action_property
    def ClosedLedgerNeverChanges(self, s: LedgerState, t: LedgerState) -> str | None:
        """Once CLOSED, the ledger's metadata stays as it is."""
        if s.meta_status == CLOSED and (
            t.meta_status != CLOSED or t.meta_last_entry != s.meta_last_entry or t.meta_segments != s.meta_segments
        ):
            return (
                f"closed ledger changed: lastEntryId {s.meta_last_entry} -> {t.meta_last_entry}, status {t.meta_status}"
            )
        return None

    # -- sometimes: the invariants above are not vacuous ----------------------------------
    @reachable
    def WriterCompletesAnEntry(self, s: LedgerState) -> bool:
        """The writer gets an entry acknowledged."""
        return s.writer_lac >= 0

    @reachable
    def RecoveryClosesAfterAckedEntries(self, s: LedgerState) -> bool:
        """A recovering client closes a ledger that holds acknowledged entries."""
        return s.meta_status == CLOSED and s.meta_last_entry >= 0 and any(r.phase == DONE for r in s.rec)

    @reachable
    def WriterIsFenced(self, s: LedgerState) -> bool:
        """The old writer learns that it was fenced."""
        return s.writer_status == WRITER_FENCED

    @reachable
    def RecoveryRecoversUnackedEntry(self, s: LedgerState) -> bool:
        """Recovery closes past the writer's LAC: it recovered an entry the writer had not seen complete."""
        return s.meta_status == CLOSED and s.meta_last_entry > s.writer_lac and s.writer_status != WRITER_CLOSED

    # -- symmetry --------------------------------------------------------------------
    # Recovering clients are interchangeable. TLC's SYMMETRY permutes model values, and the clients here are
    # numbers (the writer is client 0), so both engines tell states apart by their orbit instead: the set of
    # the state under every renaming of the recovering clients, TLA+'s RecovererOrbit used as TLC's VIEW.
    tla_view: ClassVar[str | None] = "RecovererOrbit"

    def symmetry(self, state: LedgerState) -> Any:
        """The state's orbit under the renamings of the recovering clients (itself when there is one)."""
        if len(state.rec) < 2:
            return state
        return frozenset(_renamed(state, p) for p in itertools.permutations(range(1, len(state.rec) + 1)))


def _renamed(s: LedgerState, p: tuple[int, ...]) -> LedgerState:
    """``s`` with recovering client c renamed p[c - 1]: TLA+'s Renamed(p)."""
    rename = {c: p[c - 1] for c in range(1, len(p) + 1)}
    rec = [s.rec[0]] * len(p)
    for c, r in enumerate(s.rec, start=1):
        rec[rename[c] - 1] = r
    net = frozenset(evolve(m, client=rename[m.client]) if m.client in rename else m for m in s.net)
    return evolve(s, rec=tuple(rec), net=net)


def _replace(values: tuple[Any, ...], i: int, value: Any) -> tuple[Any, ...]:
    return (*values[:i], value, *values[i + 1 :])


def _set_rec(s: LedgerState, c: int, r: Recoverer) -> LedgerState:
    return evolve(s, rec=_replace(s.rec, c - 1, r))


def _reply_to(m: Msg, type_: str, *, lac: int = -1, data: int = -1) -> Msg:
    """Bookie m.bookie's reply to request m, to its client (TLA+'s Reply)."""
    return Msg(type_, m.client, m.bookie, m.entry, lac, m.recovery, m.fence, data)


def data_on(s: LedgerState, b: int, e: int) -> int | None:
    """The data bookie b returns for entry e; None if it does not store it (TLA+'s DataOn)."""
    return next((d for x, d in s.bookie_data[b - 1] if x == e), None)


def _recovered_data(r: Recoverer, e: int) -> int:
    """The data a recovering client read for entry e, which its write-back sends (TLA+'s RecoveredData)."""
    return next(d for x, d in r.data if x == e)
