"""Autorecovery: the auditor, under-replication marking and the re-replication of lost fragments.

The twin of ``autorecovery.tla``: the same variables, actions and invariants,
by the same names; the explorer and TLC reach the same states
under the models of ``autorecovery_models.py`` (tests/test_parity.py).

What is modelled (bookkeeper-server/src/main/java/org/apache/bookkeeper/
replication/ and client/, BRIEF section 5, seed 001):

- one ledger, its entries written to every bookie of their write set
  (``WriteSetIn``, as in the ledger spec), in one segment or two (the second
  after an ensemble change that replaced the first bookie); closed, or with
  ``OpenLedger = 1`` still open, its writer alive or gone;
- bookies stop (they leave the available set, keeping their data) and come
  back; a stopped bookie may lose its disk, and come back empty under the
  same id: its cookie is gone from its directories, so it starts only once
  formatted (``LegacyCookieValidation.checkCookies``, ``bookieformat
  -deleteCookie``);
- auditor election (``ZkLedgerAuditorManager``): every bookie bids with an
  ephemeral sequential vote, the lowest wins; the vote goes with the
  auditor's session when it stops, and another available bookie is elected;
- the auditor's bookie check (``AuditorBookieCheckTask``): the bookies named
  in the ledger's metadata that are not available are lost, and a ledger with
  a fragment on a lost bookie is marked under-replicated
  (``markLedgerUnderreplicatedAsync``: a ``urL`` znode naming the lost
  bookies; a later check adds the bookies it does not name yet, by a
  compare-and-set that changes the znode's version);
- the auditor's periodic check of all ledgers
  (``AuditorCheckAllLedgersTask.checkAllLedgers``): ``LedgerChecker`` finds a
  fragment lost when its bookie is not available or lacks the fragment's
  first or last entry (``verifyLedgerFragment`` reads those two with
  ``auditorLedgerVerificationPercentage`` at its default 0), and the ledger's
  mark gets the bookies of its lost fragments. Only this check finds a
  bookie that came back empty; the workers find lost fragments the same way;
- replication workers (``ReplicationWorker.rereplicate``): take the lock of
  a marked ledger (an ephemeral znode), find the fragments on unavailable
  bookies, copy each one's entries from a live replica to a new bookie
  (``LedgerFragmentReplicator.replicate``), then replace the old bookie by
  the new one in that segment's ensemble with a compare-and-set that is
  skipped when the old bookie is no longer there
  (``updateEnsembleInfo``, a ``MetadataUpdateLoop``); when no fragment is
  left under-replicated the mark is removed (``markLedgerReplicated``) by a
  delete at the version the worker read when it took the lock: a mark the
  auditor extended in the meantime stays, for the next worker to check;
  the lock is released in any case;
- an open ledger (``OpenLedger = 1``): a handle opened without recovery
  reads the LAC from the bookies, which the last add carried: the entry
  before it (``lac``). ``LedgerChecker.checkLedger`` gives the last
  segment's fragment the entries up to that LAC, and a fragment is closed
  (``LedgerFragment.isClosed``) when the ledger is, or when it is not the
  last and the LAC reaches the last segment's first entry less one. A worker
  copies closed fragments only; when an open fragment is lost, or the last
  segment misses a bookie (``isLastSegmentOpenAndMissingBookies``), it keeps
  the lock for ``openLedgerRereplicationGracePeriod``
  (``deferLedgerLockRelease``), in which the writer may close the ledger.
  After it, if the ledger still needs it, the worker opens it with recovery,
  fencing the writer, and the recovery closes it; the lock is released with
  the mark kept, and the next pass copies the now closed fragments. Reading
  the LAC of an open ledger, and fencing it, need Qw - Qa + 1 available
  bookies in every write set of its last ensemble (``covered``): a pass
  that cannot open the ledger releases the lock, and a recovery that cannot
  fence fails. The recovery writes the entries past the LAC back to their
  write set; the write to a bookie that is down fails, before or after the
  Qa acks (``PendingAddOp.writeComplete``), and before them the recovery
  replaces that bookie from the first of those entries on
  (``ReadOnlyLedgerHandle.handleBookieFailure``), as it must when the others
  are fewer than Qa;
- a worker that crashes midway: its lock goes with its session; the entries
  it copied stay on the new bookie, which the metadata does not name;
- a worker whose pass leaves a fragment it could have copied (a copy failed
  for a reason the spec does not see: a timeout, a full bookie) releases the
  lock after a back-off and keeps the mark, for a later pass
  (``deferLedgerLockReleaseOfFailedLedger``); starting a fragment is
  strongly fair, so the liveness holds once such failures stop.

What is left out, and why:

- entries lost one by one on a bookie that keeps the rest (a damaged entry
  log): a disk here is lost whole. With the checker's default, such a loss
  of a fragment's middle entry would go unnoticed (docs/real-systems.md);
- placement policies, ``lostBookieRecoveryDelay`` and the check's period:
  they change when the auditor looks, not what it marks;
- the open ledger's writer adds nothing more: its next add, and the ensemble
  change a failed write of it makes (which would give the worker a closed
  fragment, as ``Segments = 2`` does), are the ledger spec's matter. Every
  entry here was acknowledged, so the writer's close and the recovery both
  close the ledger at its last entry (the ledger spec shows that recovery
  keeps every acknowledged entry);
- a disk lost while the ledger is open: the LAC a covered read then finds
  may be lower, and the recovery may find the last entry missing on the
  empty bookie and close before it (the ledger spec's matter); here a disk
  is lost only once the ledger is closed, so the LAC read hears from a
  holder of the last entry and the recovery reads it;
- more than one bookie of the write-back's write set down: with ``Qa <= 2``
  (required with ``OpenLedger = 1``), coverage leaves at most one;
- the back-off before a failed pass's lock release: it changes when the
  ledger is tried again, not what is copied;
- garbage collection of entries a bookie holds that the metadata no longer
  names on it: it deletes nothing a reader can reach.

Seeded bugs, chosen by the constant ``Bug``, make the spec wrong on purpose
so that tests can show the checkers catch each one.

>>> spec = AutorecoverySpec()
>>> s = spec.BookieStops(spec.initial_state(), 1)
>>> s = spec.AuditorChecksBookies(spec.AuditorIsElected(s, 2))
>>> s.mark, spec.under_replicated(s)
(frozenset({1}), ((1, 1),))
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import ClassVar

import attrs
from ledgerspec.spec.kernel import (
    Constant,
    ConstantError,
    Spec,
    action,
    evolve,
    int_constant,
    invariant,
    reachable,
)

__all__ = [
    "BUGS",
    "DEFERRED",
    "IDLE",
    "IDLE_WORKER",
    "NO_ONE",
    "REPLICATING",
    "AutorecoverySpec",
    "AutorecoveryState",
    "Worker",
]

#: No auditor, no lock holder, no bookie chosen.
NO_ONE = 0
# Worker phases: holding no fragment, copying one to a new bookie, or keeping an open ledger's lock through the
# grace period.
IDLE, REPLICATING, DEFERRED = "IDLE", "REPLICATING", "DEFERRED"

BUGS = {
    "none": "autorecovery as BookKeeper implements it",
    "metadata_before_copy": "the worker replaces the bookie in the metadata before it copies the fragment",
    "auditor_marks_nothing": "the auditor's bookie check marks no ledger under-replicated",
    "copies_open_fragment": "the worker copies a fragment of the open ledger's last segment, up to the LAC it read",
    "grace_ends_without_recovery": "after the grace period the worker releases the open ledger's lock unrecovered",
}


@attrs.frozen(cache_hash=True)
class Worker:
    """A replication worker: the fragment it copies, as (segment, old bookie, new bookie)."""

    phase: str  # IDLE, REPLICATING or DEFERRED
    seg: int  # the segment (1-based) whose fragment it copies; 0 when idle
    old: int  # the bookie it replaces; 0 when idle
    new: int  # the bookie it copies to; 0 when idle
    left: frozenset[int] = frozenset()  # the fragment's entries it has still to write to the new bookie


IDLE_WORKER = Worker(IDLE, 0, 0, 0)


@attrs.frozen(cache_hash=True)
class AutorecoveryState:
    """The variables of the spec. Bookies are ``1 .. NumBookies``, workers ``1 .. NumWorkers``, entries
    ``0 .. NumEntries-1``."""

    # -- metadata store: the ledger's znode, and the under-replication znodes
    meta_segments: tuple[tuple[int, tuple[int, ...]], ...]  # (first entry id, ensemble) in order
    meta_version: int  # bumped by every successful compare-and-set
    closed: bool  # the ledger's metadata is closed (by its writer, or by a worker's recovery)
    mark: frozenset[int]  # the bookies the ledger's urL znode names; empty: not marked (no znode)
    lock: int  # the worker holding the ledger's replication lock (ephemeral); NO_ONE
    lock_mark: frozenset[int]  # the mark as the lock holder read it (the version it deletes at); empty when unlocked
    auditor: int  # the bookie whose vote won the election; NO_ONE while none is elected
    lost_seen: frozenset[int]  # the bookies the auditor's last check found lost and that did not come back since
    # -- bookies
    data: tuple[frozenset[int], ...]  # entries each bookie holds (on disk)
    up: frozenset[int]  # bookies available (registered)
    disk_lost: frozenset[int]  # bookies whose disk was lost; one that came back is empty, formatted
    stops: int  # bookie stops so far (at most MaxStops)
    # -- replication workers
    workers: tuple[Worker, ...]
    worker_crashes: int  # at most MaxWorkerCrashes


# -- parameter generators: the \E in front of each TLA+ action ---------------------------
def _each_bookie(spec: AutorecoverySpec, s: AutorecoveryState) -> Iterable[tuple[int]]:
    return ((b,) for b in spec.bookies)


def _each_worker(spec: AutorecoverySpec, s: AutorecoveryState) -> Iterable[tuple[int]]:
    return ((w,) for w in spec.worker_ids)


def _each_worker_entry(spec: AutorecoverySpec, s: AutorecoveryState) -> Iterable[tuple[int, int]]:
    return ((w, e) for w in spec.worker_ids for e in spec.entries)


def _each_grace_choice(spec: AutorecoverySpec, s: AutorecoveryState) -> Iterable[tuple[int, int]]:
    """(worker, the bookie a recovery's write-back puts in the place of one that is down, or NO_ONE)."""
    return ((w, nb) for w in spec.worker_ids for nb in (NO_ONE, *spec.bookies))


def _each_fragment_choice(spec: AutorecoverySpec, s: AutorecoveryState) -> Iterable[tuple[int, int, int, int]]:
    """(worker, segment, old bookie, new bookie): an under-replicated fragment and a bookie to copy it to."""
    for w in spec.worker_ids:
        for seg, old in spec.under_replicated(s):
            ensemble = s.meta_segments[seg - 1][1]
            for new in spec.bookies:
                if new not in ensemble:
                    yield (w, seg, old, new)


class AutorecoverySpec(Spec[AutorecoveryState]):
    """Autorecovery of one closed ledger; see the module docstring."""

    name = "autorecovery"
    state_type = AutorecoveryState
    constants = (
        int_constant("NumBookies", 4, "bookies in the cluster, 1 .. NumBookies"),
        int_constant("E", 3, "ensemble size"),
        int_constant("Qw", 2, "write quorum: bookies each entry is stored on"),
        int_constant("Qa", 2, "ack quorum: what the open ledger's LAC read, fencing and write-back need"),
        int_constant("NumEntries", 2, "entries of the closed ledger, ids 0 .. NumEntries-1"),
        int_constant("Segments", 1, "segments of the ledger: 1, or 2 after an ensemble change at entry 1"),
        int_constant("NumWorkers", 1, "replication workers"),
        int_constant("MaxStops", 1, "bookie stops in all (a bookie that came back may stop again)"),
        int_constant("MaxDiskLosses", 0, "stopped bookies that lose their disk"),
        int_constant("MaxWorkerCrashes", 1, "replication worker crashes"),
        int_constant("OpenLedger", 0, "1: the ledger starts open, its writer alive or gone; 0: closed"),
        Constant("Bug", str, "none", "a seeded bug, or none", choices=tuple(BUGS)),
    )
    liveness: ClassVar[Mapping[str, str]] = {
        "ReplicasRestored": "<>[](\\A e \\in Entries : Cardinality(LiveReplicas(e)) = Qw)",
    }

    NumBookies: int
    E: int
    Qw: int
    Qa: int
    NumEntries: int
    Segments: int
    NumWorkers: int
    MaxStops: int
    MaxDiskLosses: int
    MaxWorkerCrashes: int
    OpenLedger: int
    Bug: str

    def check_constants(self) -> None:
        if not 1 <= self.Qw <= self.E <= self.NumBookies:
            raise ConstantError(
                f"need 1 <= Qw <= E <= NumBookies, got Qw={self.Qw} E={self.E} NumBookies={self.NumBookies}"
            )
        if not 1 <= self.Qa <= self.Qw:
            raise ConstantError(f"need 1 <= Qa <= Qw, got Qa={self.Qa} Qw={self.Qw}")
        if self.OpenLedger == 1 and self.Qa > 2:
            # with coverage, at most Qa - 1 bookies of a write set are down: the recovery replaces at most one
            raise ConstantError(f"OpenLedger=1 needs Qa <= 2, got Qa={self.Qa}")
        if self.NumEntries < 1:
            raise ConstantError(f"NumEntries must be at least 1, got {self.NumEntries}")
        if self.Segments not in (1, 2):
            raise ConstantError(f"Segments must be 1 or 2, got {self.Segments}")
        if self.Segments == 2 and (self.NumEntries < 2 or self.NumBookies <= self.E):
            raise ConstantError("Segments=2 needs NumEntries >= 2 and a bookie outside the first ensemble")
        if self.NumWorkers < 1:
            raise ConstantError(f"NumWorkers must be at least 1, got {self.NumWorkers}")
        for name in ("MaxStops", "MaxDiskLosses", "MaxWorkerCrashes"):
            if getattr(self, name) < 0:
                raise ConstantError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.OpenLedger not in (0, 1):
            raise ConstantError(f"OpenLedger must be 0 or 1, got {self.OpenLedger}")
        self.bookies = tuple(range(1, self.NumBookies + 1))
        self.worker_ids = tuple(range(1, self.NumWorkers + 1))
        self.entries = tuple(range(self.NumEntries))

    # -- operators ------------------------------------------------------------------
    def initial_segments(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Bookies 1 .. E; with two segments, the second (from entry 1) has bookie E+1 in place of bookie 1."""
        first = tuple(range(1, self.E + 1))
        if self.Segments == 1:
            return ((0, first),)
        return ((0, first), (1, (self.E + 1, *first[1:])))

    @staticmethod
    def segment_of(segments: tuple[tuple[int, tuple[int, ...]], ...], e: int) -> int:
        """The segment (1-based) holding entry e: the last one whose first entry is <= e."""
        return max(i for i, (first, _) in enumerate(segments, start=1) if first <= e)

    def write_set_in(self, segments: tuple[tuple[int, tuple[int, ...]], ...], e: int) -> frozenset[int]:
        """Bookies entry e is stored on: ensemble indices (e + k) % E, k < Qw."""
        ensemble = segments[self.segment_of(segments, e) - 1][1]
        return frozenset(ensemble[(e + k) % self.E] for k in range(self.Qw))

    def fragment_entries(self, s: AutorecoveryState, seg: int, b: int) -> frozenset[int]:
        """The entries of segment seg that its ensemble stores on bookie b."""
        segments = s.meta_segments
        return frozenset(
            e for e in self.entries if self.segment_of(segments, e) == seg and b in self.write_set_in(segments, e)
        )

    def lac(self, s: AutorecoveryState) -> int:
        """The LAC a handle opened without recovery reads from the bookies: the closed ledger's last entry; an
        open ledger's last add carried the entry before it (a covered read hears from a holder of the last entry:
        no disk is lost while the ledger is open)."""
        return self.NumEntries - 1 if s.closed else self.NumEntries - 2

    def fragment_last(self, s: AutorecoveryState, seg: int) -> int:
        """The last entry ``LedgerChecker.checkLedger`` gives the fragment of segment seg: the next segment's
        first entry less one; for the last segment the LAC, or its first entry when the LAC is below it (the
        checker then reads that entry to learn whether it was written; here every segment's first entry was)."""
        if seg < len(s.meta_segments):
            return s.meta_segments[seg][0] - 1
        return max(self.lac(s), s.meta_segments[seg - 1][0])

    def fragment_closed(self, s: AutorecoveryState, seg: int) -> bool:
        """``LedgerFragment.isClosed``: the ledger is closed, or the segment is not the last and the LAC
        reaches the last segment's first entry less one; no writer can change a closed fragment."""
        last_first = s.meta_segments[-1][0]
        return s.closed or (seg < len(s.meta_segments) and self.lac(s) >= last_first - 1)

    def checked_entries(self, s: AutorecoveryState, seg: int, b: int) -> frozenset[int]:
        """The entries ``LedgerChecker.verifyLedgerFragment`` reads of a fragment: with
        ``auditorLedgerVerificationPercentage`` at its default 0, the first and the last the bookie stores up to
        the fragment's last entry."""
        fragment = self.copied_entries(s, seg, b)
        return frozenset((min(fragment), max(fragment))) if fragment else frozenset()

    def copied_entries(self, s: AutorecoveryState, seg: int, b: int) -> frozenset[int]:
        """The entries of a fragment stored on bookie b up to the fragment's last entry: what the checker reads
        from and the replicator copies (``LedgerFragmentReplicator.replicate``)."""
        last = self.fragment_last(s, seg)
        return frozenset(e for e in self.fragment_entries(s, seg, b) if e <= last)

    def under_replicated(self, s: AutorecoveryState) -> tuple[tuple[int, int], ...]:
        """(segment, bookie): the fragments ``LedgerChecker`` finds lost: the bookie is not available, or lacks
        one of the entries it reads."""
        return tuple(
            (seg, b)
            for seg, (_, ensemble) in enumerate(s.meta_segments, start=1)
            for b in ensemble
            if b not in s.up or not self.checked_entries(s, seg, b) <= s.data[b - 1]
        )

    def copyable(self, s: AutorecoveryState, seg: int) -> bool:
        """A worker copies the lost fragments of closed segments only (``ReplicationWorker.rereplicate`` skips
        the others); the seeded bug copies open ones too."""
        return self.fragment_closed(s, seg) or self.Bug == "copies_open_fragment"

    def last_segment_open_and_missing(self, s: AutorecoveryState) -> bool:
        """``ReplicationWorker.isLastSegmentOpenAndMissingBookies``: the ledger is open and a bookie of its last
        ensemble is not available (of the last two, when the LAC is below the last segment's first entry less
        one: that segment's first entries may not be written, and the one before it is then open too)."""
        if s.closed:
            return False
        last_first, ensemble = s.meta_segments[-1]
        named = set(ensemble)
        if len(s.meta_segments) > 1 and self.lac(s) < last_first - 1:
            named |= set(s.meta_segments[-2][1])
        return not named <= s.up

    def waits_for_close(self, s: AutorecoveryState) -> bool:
        """A pass defers the ledger to the grace period: it is open, and a fragment it cannot copy (an open
        one) is lost, or its last segment misses a bookie."""
        if s.closed:
            return False
        return any(not self.fragment_closed(s, seg) for seg, _ in self.under_replicated(s)) or (
            self.last_segment_open_and_missing(s)
        )

    def covered(self, s: AutorecoveryState) -> bool:
        """Every write set of the last ensemble has Qw - Qa + 1 available bookies: what a LAC read of the open
        ledger (``ReadLastConfirmedOp``, for an open without recovery) and the fencing of a recovery wait for."""
        _, ensemble = s.meta_segments[-1]
        need = self.Qw - self.Qa + 1
        return all(sum(ensemble[(i + k) % self.E] in s.up for k in range(self.Qw)) >= need for i in range(self.E))

    def opens(self, s: AutorecoveryState) -> bool:
        """``openLedgerNoRecovery`` succeeds: the ledger is closed (its metadata says all), or its LAC read is
        covered; otherwise it fails with a BKException."""
        return s.closed or self.covered(s)

    def write_back_set(self, s: AutorecoveryState) -> frozenset[int]:
        """Where a recovery writes back the entries past the LAC: their write sets (one entry here)."""
        return frozenset().union(*(self.write_set_in(s.meta_segments, e) for e in self.entries if e > self.lac(s)))

    @staticmethod
    def lost_bookies(s: AutorecoveryState) -> frozenset[int]:
        """What the bookie check finds: the bookies the metadata names that are not available."""
        return frozenset(b for _, ensemble in s.meta_segments for b in ensemble if b not in s.up)

    def live_replicas(self, s: AutorecoveryState, e: int) -> frozenset[int]:
        """The bookies of e's write set that are available and hold it."""
        return frozenset(b for b in self.write_set_in(s.meta_segments, e) if b in s.up and e in s.data[b - 1])

    # -- Init ------------------------------------------------------------------------
    def initial_state(self) -> AutorecoveryState:
        """The one initial state: every entry on its write set, every bookie available, nothing marked."""
        return next(iter(self.init_states()))

    def init_states(self) -> Iterator[AutorecoveryState]:
        segments = self.initial_segments()
        data = tuple(frozenset(e for e in self.entries if b in self.write_set_in(segments, e)) for b in self.bookies)
        yield AutorecoveryState(
            meta_segments=segments,
            meta_version=1,
            closed=not self.OpenLedger,
            mark=frozenset(),
            lock=NO_ONE,
            lock_mark=frozenset(),
            auditor=NO_ONE,
            lost_seen=frozenset(),
            data=data,
            up=frozenset(self.bookies),
            disk_lost=frozenset(),
            stops=0,
            workers=tuple(IDLE_WORKER for _ in self.worker_ids),
            worker_crashes=0,
        )

    # -- bookies ---------------------------------------------------------------------
    @action(_each_bookie)
    def BookieStops(self, s: AutorecoveryState, b: int) -> AutorecoveryState | None:
        """Bookie b stops: it leaves the available set; its auditor vote goes with its session."""
        if b not in s.up or s.stops >= self.MaxStops:
            return None
        return evolve(s, up=s.up - {b}, stops=s.stops + 1, auditor=NO_ONE if s.auditor == b else s.auditor)

    @action(_each_bookie)
    def BookieComesBack(self, s: AutorecoveryState, b: int) -> AutorecoveryState | None:
        """A stopped bookie registers again, with all its disk holds (nothing, formatted, once its disk was
        lost); the auditor's last check no longer counts it lost."""
        if b in s.up:
            return None
        return evolve(s, up=s.up | {b}, lost_seen=s.lost_seen - {b})

    @action(_each_bookie)
    def BookieLosesDisk(self, s: AutorecoveryState, b: int) -> AutorecoveryState | None:
        """A stopped bookie's disk is gone, its entries with it; only once the ledger is closed (the LAC read and
        the recovery of an open ledger after such a loss are left out: see the module docstring)."""
        if b in s.up or b in s.disk_lost or len(s.disk_lost) >= self.MaxDiskLosses or not s.closed:
            return None
        return evolve(s, disk_lost=s.disk_lost | {b}, data=_replace(s.data, b - 1, frozenset()))

    # -- the open ledger's writer -------------------------------------------------------------
    @action()
    def WriterClosesLedger(self, s: AutorecoveryState) -> AutorecoveryState | None:
        """The writer of the open ledger closes it, at its last entry: every entry here was acknowledged. Not
        fair: a writer may be gone, which is what the workers' recovery is for."""
        # LedgerHandle.doAsyncCloseInternal (release-4.17.2) writes the metadata closed by compare-and-set; a
        # ledger a recovery closed first fails it (the writer was fenced), which is no step here.
        if s.closed:
            return None
        return evolve(s, closed=True)

    # -- auditor ---------------------------------------------------------------------
    @action(_each_bookie, fairness="weak")
    def AuditorIsElected(self, s: AutorecoveryState, b: int) -> AutorecoveryState | None:
        """With no auditor, an available bookie's vote is the lowest left: it becomes the auditor, with no
        check done yet."""
        if s.auditor != NO_ONE or b not in s.up:
            return None
        return evolve(s, auditor=b, lost_seen=frozenset())

    @action(fairness="weak")
    def AuditorChecksBookies(self, s: AutorecoveryState) -> AutorecoveryState | None:
        """The bookies the metadata names that are not available are lost; a ledger with a fragment on one is
        marked under-replicated, its mark naming them (added to those it names already). A check that would
        change nothing is not a step."""
        if s.auditor == NO_ONE:
            return None
        lost = self.lost_bookies(s)
        mark = s.mark if self.Bug == "auditor_marks_nothing" else s.mark | lost
        if lost == s.lost_seen and mark == s.mark:
            return None
        return evolve(s, lost_seen=lost, mark=mark)

    @action(fairness="weak")
    def AuditorChecksAllLedgers(self, s: AutorecoveryState) -> AutorecoveryState | None:
        """The periodic check (``AuditorCheckAllLedgersTask.checkAllLedgers``, every
        ``auditorPeriodicCheckInterval``): ``LedgerChecker`` checks the ledger, and the bookies of its lost
        fragments are added to its mark. Only this check finds an available bookie that lacks what the metadata
        names it for. A check that would change nothing is not a step."""
        if s.auditor == NO_ONE or not self.opens(s):  # a ledger the auditor cannot open is checked next time
            return None
        found = frozenset(b for _, b in self.under_replicated(s))
        if found <= s.mark:
            return None
        return evolve(s, mark=s.mark | found)

    # -- replication workers ---------------------------------------------------------
    @action(_each_worker, fairness="weak")
    def WorkerTakesLock(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """An idle worker takes the lock of a marked ledger and reads its mark (``getLedgerToRereplicate``)."""
        if not s.mark or s.lock != NO_ONE:
            return None
        return evolve(s, lock=w, lock_mark=s.mark)

    @action(_each_fragment_choice, fairness="strong")
    def WorkerStartsFragment(
        self, s: AutorecoveryState, w: int, seg: int, old: int, new: int
    ) -> AutorecoveryState | None:
        """The lock holder picks an under-replicated fragment and an available bookie outside the segment's
        ensemble to copy it to."""
        if s.lock != w or s.workers[w - 1].phase != IDLE or new not in s.up:
            return None
        if (seg, old) not in self.under_replicated(s) or new in s.meta_segments[seg - 1][1]:
            return None
        if not self.copyable(s, seg) or not self.opens(s):
            return None
        # It writes the entries the new bookie lacks now, and counts a write done once it is acknowledged.
        left = self.copied_entries(s, seg, old) - s.data[new - 1]
        started = evolve(s, workers=_replace(s.workers, w - 1, Worker(REPLICATING, seg, old, new, left)))
        if self.Bug == "metadata_before_copy":
            return self._replace_bookie(started, seg, old, new)
        return started

    @action(_each_worker_entry, fairness="weak")
    def WorkerCopiesEntry(self, s: AutorecoveryState, w: int, e: int) -> AutorecoveryState | None:
        """The worker reads entry e of its fragment from an available bookie that holds it and writes it to
        the new bookie (``replicateLedgerFragment``)."""
        task = s.workers[w - 1]
        if task.phase != REPLICATING or task.new not in s.up or e not in task.left:
            return None
        if not any(b in s.up and e in s.data[b - 1] for b in self._sources(s, task, e)):
            return None
        done = attrs.evolve(task, left=task.left - {e})
        return evolve(
            s,
            data=_replace(s.data, task.new - 1, s.data[task.new - 1] | {e}),
            workers=_replace(s.workers, w - 1, done),
        )

    @action(_each_worker, fairness="weak")
    def WorkerUpdatesEnsemble(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """Every write of the fragment acknowledged: the old bookie is replaced by the new one in the segment's
        ensemble, by a compare-and-set, unless it is no longer there (``updateEnsembleInfo``)."""
        # LedgerFragmentReplicator.SingleFragmentCallback (release-4.17.2) updates the ensemble once every write
        # returned OK, and reads nothing back: had the new bookie lost its disk since, it is named all the same
        # (and the auditor finds its fragment lost again).
        task = s.workers[w - 1]
        if task.phase != REPLICATING or task.left:
            return None
        done = evolve(s, workers=_replace(s.workers, w - 1, IDLE_WORKER))
        if self.Bug == "metadata_before_copy":
            return done
        return self._replace_bookie(done, task.seg, task.old, task.new)

    @action(_each_worker, fairness="weak")
    def WorkerGivesUp(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """The copy cannot go on: the new bookie stopped, or an entry left to copy has no available
        replica. The worker drops the fragment (``tryReadingFaultyEntries`` fails, a write fails)."""
        task = s.workers[w - 1]
        if task.phase != REPLICATING:
            return None
        stuck = any(not any(b in s.up and e in s.data[b - 1] for b in self._sources(s, task, e)) for e in task.left)
        if task.new in s.up and not stuck:
            return None
        return evolve(s, workers=_replace(s.workers, w - 1, IDLE_WORKER))

    @action(_each_worker, fairness="weak")
    def WorkerReleasesLock(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """Once no fragment can be started (none left, or no available bookie to copy one to), the lock holder
        checks the ledger again: with no fragment left under-replicated it removes the mark, unless the auditor
        changed it since the lock was taken (``markLedgerReplicated``); it releases the lock either way."""
        if s.lock != w or s.workers[w - 1].phase != IDLE or not self.opens(s):
            return None
        if self._startable(s) or self.waits_for_close(s):
            return None
        repaired = not self.under_replicated(s) and s.mark == s.lock_mark
        return evolve(s, lock=NO_ONE, lock_mark=frozenset(), mark=frozenset() if repaired else s.mark)

    @action(_each_worker)
    def WorkerReleasesLockAfterFailure(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """The worker's pass left a fragment it could start, or could not open the ledger: it releases the lock
        and keeps the mark, for a later pass of any worker (``deferLedgerLockReleaseOfFailedLedger``,
        ``logBKExceptionAndReleaseLedger``)."""
        # ReplicationWorker.rereplicate (release-4.17.2) tries each lost fragment once; a copy may fail for a
        # reason the spec does not see (a timeout, a full bookie), so this may follow any pass that leaves one.
        # openLedgerNoRecovery of an open ledger whose LAC read is not covered throws a BKException, caught there.
        if s.lock != w or s.workers[w - 1].phase != IDLE:
            return None
        if self.opens(s) and (not self._startable(s) or self.waits_for_close(s)):
            return None
        return evolve(s, lock=NO_ONE, lock_mark=frozenset())

    def _startable(self, s: AutorecoveryState) -> bool:
        """Some under-replicated fragment a worker copies has an available bookie outside its ensemble to be
        copied to."""
        return any(
            self.copyable(s, seg) and any(self._spare(s, seg, new) for new in self.bookies)
            for seg, _ in self.under_replicated(s)
        )

    @staticmethod
    def _spare(s: AutorecoveryState, seg: int, new: int) -> bool:
        """Bookie ``new`` can take a fragment of segment ``seg``: it is available and not in the ensemble."""
        return new in s.up and new not in s.meta_segments[seg - 1][1]

    @action(_each_worker, fairness="weak")
    def WorkerDefersLock(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """The pass ends on an open ledger that a close would let it repair (an open fragment lost, or the last
        segment missing a bookie): the worker keeps the lock for the grace period, in which the writer may
        close the ledger or replace the bookie itself (``deferLedgerLockRelease``)."""
        # ReplicationWorker.rereplicate (release-4.17.2) copies the closed fragments first, then defers when
        # foundOpenFragments || isLastSegmentOpenAndMissingBookies; it checks this before the check that would
        # remove the mark or release the lock after a failure.
        if s.lock != w or s.workers[w - 1].phase != IDLE or not self.opens(s) or not self.waits_for_close(s):
            return None
        return evolve(s, workers=_replace(s.workers, w - 1, attrs.evolve(IDLE_WORKER, phase=DEFERRED)))

    @action(_each_grace_choice, fairness="weak")
    def WorkerEndsGracePeriod(self, s: AutorecoveryState, w: int, nb: int) -> AutorecoveryState | None:
        """``openLedgerRereplicationGracePeriod`` is over. If the ledger still waits for a close, the worker
        opens it with recovery, fencing the writer, and the recovery closes it; it releases the lock either way,
        and the mark stays for the next pass. The recovery writes the entries past the LAC back to their write
        set; a bookie of it that is down fails its write, and may be replaced from the first of them on by an
        available bookie ``nb`` outside the ensemble (``NO_ONE``: not replaced), as it must be when the others
        are fewer than Qa."""
        # The timer task of ReplicationWorker.deferLedgerLockRelease (release-4.17.2): openLedgerNoRecovery,
        # then admin.openLedger (with recovery) when isLastSegmentOpenAndMissingBookies or an open fragment is
        # lost; a recovery that fails (BKException: its fencing not covered) is logged, and
        # releaseUnderreplicatedLedger follows in any case, never markLedgerReplicated. The write-back's failure
        # on a bookie that is down reaches PendingAddOp.writeComplete before or after its Qa acks: before, it is
        # handleBookieFailure (ReadOnlyLedgerHandle: an ensemble change kept for the close).
        if s.lock != w or s.workers[w - 1].phase != DEFERRED:
            return None
        released = evolve(s, lock=NO_ONE, lock_mark=frozenset(), workers=_replace(s.workers, w - 1, IDLE_WORKER))
        recovers = self.waits_for_close(s) and self.covered(s) and self.Bug != "grace_ends_without_recovery"
        if not recovers:
            return released if nb == NO_ONE else None
        write_back = self.write_back_set(s)
        down = write_back - s.up  # at most one: coverage leaves Qw - Qa + 1 >= Qw - 1 of it up
        last = len(s.meta_segments)
        if nb == NO_ONE:
            if len(write_back & s.up) >= self.Qa:
                return evolve(released, closed=True)
            spare = any(self._spare(s, last, b) for b in self.bookies)
            # without a replacement the write-back cannot complete; with no bookie to replace it, the recovery's
            # ensemble change fails (BKNotEnoughBookiesException) and so does the recovery
            return None if spare else released
        if not down or not self._spare(s, last, nb):
            return None
        (old,) = down
        first = self.lac(s) + 1
        ensemble = tuple(nb if b == old else b for b in s.meta_segments[-1][1])
        segments = (*(seg for seg in s.meta_segments if seg[0] < first), (first, ensemble))
        written = frozenset(e for e in self.entries if e >= first)
        return evolve(
            released,
            closed=True,
            meta_segments=segments,
            meta_version=s.meta_version + 1,
            data=_replace(s.data, nb - 1, s.data[nb - 1] | written),
        )

    @action(_each_worker)
    def WorkerCrashes(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """The worker's process dies: its lock (ephemeral) goes with its session; what it copied stays."""
        if s.worker_crashes >= self.MaxWorkerCrashes or (s.lock != w and s.workers[w - 1].phase == IDLE):
            return None
        return evolve(
            s,
            lock=NO_ONE if s.lock == w else s.lock,
            lock_mark=frozenset() if s.lock == w else s.lock_mark,
            workers=_replace(s.workers, w - 1, IDLE_WORKER),
            worker_crashes=s.worker_crashes + 1,
        )

    def _sources(self, s: AutorecoveryState, task: Worker, e: int) -> frozenset[int]:
        """Where the worker reads entry e: the other bookies of its write set."""
        return self.write_set_in(s.meta_segments, e) - {task.old, task.new}

    @staticmethod
    def _replace_bookie(s: AutorecoveryState, seg: int, old: int, new: int) -> AutorecoveryState:
        first, ensemble = s.meta_segments[seg - 1]
        if old not in ensemble:
            return s
        replaced = (first, tuple(new if b == old else b for b in ensemble))
        return evolve(s, meta_segments=_replace(s.meta_segments, seg - 1, replaced), meta_version=s.meta_version + 1)

    # -- invariants ------------------------------------------------------------------
    @invariant
    def TypeOK(self, s: AutorecoveryState) -> str | None:
        """Every variable holds a value of its type, within the model's bounds."""
        if s.stops > self.MaxStops or len(s.disk_lost) > self.MaxDiskLosses:
            return f"{s.stops} stops and {len(s.disk_lost)} disks lost, above the model's bounds"
        if s.worker_crashes > self.MaxWorkerCrashes:
            return f"{s.worker_crashes} worker crashes, above MaxWorkerCrashes={self.MaxWorkerCrashes}"
        if any(len(set(ensemble)) != self.E for _, ensemble in s.meta_segments):
            return f"an ensemble does not have {self.E} distinct bookies: {s.meta_segments}"
        return None

    @invariant
    def NoEntryLostWhileReplicaRemains(self, s: AutorecoveryState) -> str | None:
        """An entry some bookie still holds on its disk is held by a bookie its write set names: a reader
        that follows the metadata finds it once that bookie is available."""
        for e in self.entries:
            holders = {b for b in self.bookies if e in s.data[b - 1]}
            if holders and not holders & self.write_set_in(s.meta_segments, e):
                return (
                    f"entry {e} is held only by bookie(s) {sorted(holders)}, which its write set "
                    f"{sorted(self.write_set_in(s.meta_segments, e))} does not name"
                )
        return None

    @invariant
    def MetadataNamesOnlyHolders(self, s: AutorecoveryState) -> str | None:
        """A bookie named in a segment's ensemble holds that fragment's entries, unless its disk was lost
        (what the auditor and the workers are there to repair)."""
        for seg, (_, ensemble) in enumerate(s.meta_segments, start=1):
            for b in ensemble:
                missing = self.fragment_entries(s, seg, b) - s.data[b - 1]
                if missing and b not in s.disk_lost:
                    return f"segment {seg} names bookie {b}, which lacks entries {sorted(missing)} of its fragment"
        return None

    @invariant
    def LostBookiesMarked(self, s: AutorecoveryState) -> str | None:
        """Once the auditor saw a bookie lost, the ledger's mark names it while its metadata names that bookie
        and the bookie is not available."""
        unnamed = s.lost_seen & self.lost_bookies(s) - s.mark
        if unnamed:
            return f"the auditor found bookie(s) {sorted(unnamed)} lost, and the ledger's mark does not name them"
        return None

    @invariant
    def LockHeldByOneWorker(self, s: AutorecoveryState) -> str | None:
        """Only the lock holder copies a fragment of the ledger or defers it."""
        busy = [w for w in self.worker_ids if s.workers[w - 1].phase != IDLE]
        if any(w != s.lock for w in busy):
            return f"workers {busy} copy fragments or defer the ledger while the lock is held by {s.lock or 'no one'}"
        return None

    # -- sometimes -----------------------------------------------------------------------
    @reachable
    def FragmentReplaced(self, s: AutorecoveryState) -> bool:
        """A bookie outside the first ensembles now stores a fragment the metadata names it for."""
        return s.meta_version > 1

    @reachable
    def LedgerRepairedAndUnmarked(self, s: AutorecoveryState) -> bool:
        """The ledger was repaired and its mark removed, every entry back on Qw available bookies."""
        return s.meta_version > 1 and not s.mark and all(len(self.live_replicas(s, e)) == self.Qw for e in self.entries)

    @reachable
    def ReplicaOutsideMetadata(self, s: AutorecoveryState) -> bool:
        """An available bookie holds an entry its write set does not name it for: a replaced bookie that came
        back, or the new bookie of a worker that crashed mid-copy."""
        return any(
            b in s.up and any(b not in self.write_set_in(s.meta_segments, e) for e in s.data[b - 1])
            for b in self.bookies
        )


def _replace(values: tuple, i: int, value: object) -> tuple:  # type: ignore[type-arg]
    return (*values[:i], value, *values[i + 1 :])
