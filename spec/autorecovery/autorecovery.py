"""Autorecovery: the auditor, under-replication marking and the re-replication of lost fragments.

The twin of ``autorecovery.tla``: the same variables, actions and invariants,
by the same names; the explorer and TLC reach the same states
under the models of ``autorecovery_models.py`` (tests/test_parity.py).

What is modelled (bookkeeper-server/src/main/java/org/apache/bookkeeper/
replication/ and client/, BRIEF section 5, seed 001):

- one closed ledger, its entries written to every bookie of their write set
  (``WriteSetIn``, as in the ledger spec), in one segment or two (the second
  after an ensemble change that replaced the first bookie);
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
- open ledgers: a worker defers one whose last segment is open and misses a
  bookie, and after ``openLedgerRereplicationGracePeriod`` opens it with
  recovery, fencing the writer (``deferLedgerLockRelease``); what that
  recovery closes the ledger at is the ledger spec's matter. The ledger here
  is closed, as in seed 001's recovery of closed ledgers;
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

__all__ = ["BUGS", "IDLE", "IDLE_WORKER", "NO_ONE", "REPLICATING", "AutorecoverySpec", "AutorecoveryState", "Worker"]

#: No auditor, no lock holder, no bookie chosen.
NO_ONE = 0
# Worker phases: holding no fragment, or copying one to a new bookie.
IDLE, REPLICATING = "IDLE", "REPLICATING"

BUGS = {
    "none": "autorecovery as BookKeeper implements it",
    "metadata_before_copy": "the worker replaces the bookie in the metadata before it copies the fragment",
    "auditor_marks_nothing": "the auditor's bookie check marks no ledger under-replicated",
}


@attrs.frozen(cache_hash=True)
class Worker:
    """A replication worker: the fragment it copies, as (segment, old bookie, new bookie)."""

    phase: str  # IDLE or REPLICATING
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
        int_constant("NumEntries", 2, "entries of the closed ledger, ids 0 .. NumEntries-1"),
        int_constant("Segments", 1, "segments of the ledger: 1, or 2 after an ensemble change at entry 1"),
        int_constant("NumWorkers", 1, "replication workers"),
        int_constant("MaxStops", 1, "bookie stops in all (a bookie that came back may stop again)"),
        int_constant("MaxDiskLosses", 0, "stopped bookies that lose their disk"),
        int_constant("MaxWorkerCrashes", 1, "replication worker crashes"),
        Constant("Bug", str, "none", "a seeded bug, or none", choices=tuple(BUGS)),
    )
    liveness: ClassVar[Mapping[str, str]] = {
        "ReplicasRestored": "<>[](\\A e \\in Entries : Cardinality(LiveReplicas(e)) = Qw)",
    }

    NumBookies: int
    E: int
    Qw: int
    NumEntries: int
    Segments: int
    NumWorkers: int
    MaxStops: int
    MaxDiskLosses: int
    MaxWorkerCrashes: int
    Bug: str

    def check_constants(self) -> None:
        if not 1 <= self.Qw <= self.E <= self.NumBookies:
            raise ConstantError(
                f"need 1 <= Qw <= E <= NumBookies, got Qw={self.Qw} E={self.E} NumBookies={self.NumBookies}"
            )
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

    def checked_entries(self, s: AutorecoveryState, seg: int, b: int) -> frozenset[int]:
        """The entries ``LedgerChecker.verifyLedgerFragment`` reads of a fragment: with
        ``auditorLedgerVerificationPercentage`` at its default 0, the first and the last the bookie stores."""
        fragment = self.fragment_entries(s, seg, b)
        return frozenset((min(fragment), max(fragment))) if fragment else frozenset()

    def under_replicated(self, s: AutorecoveryState) -> tuple[tuple[int, int], ...]:
        """(segment, bookie): the fragments ``LedgerChecker`` finds lost: the bookie is not available, or lacks
        one of the entries it reads."""
        return tuple(
            (seg, b)
            for seg, (_, ensemble) in enumerate(s.meta_segments, start=1)
            for b in ensemble
            if b not in s.up or not self.checked_entries(s, seg, b) <= s.data[b - 1]
        )

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
        """A stopped bookie's disk is gone, its entries with it."""
        if b in s.up or b in s.disk_lost or len(s.disk_lost) >= self.MaxDiskLosses:
            return None
        return evolve(s, disk_lost=s.disk_lost | {b}, data=_replace(s.data, b - 1, frozenset()))

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
        if s.auditor == NO_ONE:
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
        # It writes the entries the new bookie lacks now, and counts a write done once it is acknowledged.
        left = self.fragment_entries(s, seg, old) - s.data[new - 1]
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
        if s.lock != w or s.workers[w - 1].phase != IDLE or self._startable(s):
            return None
        repaired = not self.under_replicated(s) and s.mark == s.lock_mark
        return evolve(s, lock=NO_ONE, lock_mark=frozenset(), mark=frozenset() if repaired else s.mark)

    @action(_each_worker)
    def WorkerReleasesLockAfterFailure(self, s: AutorecoveryState, w: int) -> AutorecoveryState | None:
        """The worker's pass left a fragment it could start: it releases the lock after a back-off and keeps the
        mark, for a later pass of any worker (``deferLedgerLockReleaseOfFailedLedger``)."""
        # ReplicationWorker.rereplicate (release-4.17.2) tries each lost fragment once; a copy may fail for a
        # reason the spec does not see (a timeout, a full bookie), so this may follow any pass that leaves one.
        if s.lock != w or s.workers[w - 1].phase != IDLE or not self._startable(s):
            return None
        return evolve(s, lock=NO_ONE, lock_mark=frozenset())

    def _startable(self, s: AutorecoveryState) -> bool:
        """Some under-replicated fragment has an available bookie outside its ensemble to be copied to."""
        return any(
            any(new in s.up and new not in s.meta_segments[seg - 1][1] for new in self.bookies)
            for seg, _ in self.under_replicated(s)
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
        """Only the lock holder copies a fragment of the ledger."""
        busy = [w for w in self.worker_ids if s.workers[w - 1].phase == REPLICATING]
        if any(w != s.lock for w in busy):
            return f"workers {busy} copy fragments while the lock is held by {s.lock or 'no one'}"
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
