"""A replication worker (``ReplicationWorker.rereplicate``), one step at a time.

Each step is one action of ``spec/autorecovery/autorecovery.py``, by the same name, so a
driver (a test, a simulation) chooses the interleaving and a run repeats
exactly:

==========================  ===================================================
step                        what the worker does
==========================  ===================================================
``WorkerTakesLock``         takes the lock of a marked ledger (ephemeral, in
                            its session)
``WorkerStartsFragment``    finds a lost fragment of the locked ledger
                            (``LedgerChecker``) and an available bookie outside
                            the segment's ensemble to copy it to
``WorkerCopiesEntry``       reads one entry of the fragment from an available
                            bookie of its write set, writes it to the new
                            bookie with a recovery add
``WorkerUpdatesEnsemble``   every entry copied: replaces the old bookie by the
                            new one in the segment, by compare-and-set, skipped
                            if the old bookie is gone (``updateEnsembleInfo``)
``WorkerGivesUp``           the new bookie went away, or an entry has no
                            readable replica: drops the fragment
``WorkerReleasesLock``      nothing left it can start: removes the mark if no
                            fragment is lost (``markLedgerReplicated``), and
                            releases the lock
``WorkerReleasesLock-``     its pass left a fragment it could start (a copy
``AfterFailure``            failed), or could not open the ledger: releases the
                            lock and keeps the mark, for a later pass
                            (``deferLedgerLockReleaseOfFailedLedger``,
                            ``logBKExceptionAndReleaseLedger``)
``WorkerDefersLock``        the ledger is open, and an open fragment is lost or
                            its last segment misses a bookie: keeps the lock for
                            the grace period (``deferLedgerLockRelease``)
``WorkerEndsGracePeriod``   the grace period is over: if the ledger still waits
                            for a close, opens it with recovery (fencing its
                            writer), which closes it, replacing a bookie of the
                            write-back that is down when the others give fewer
                            than Qa acks (and failing, the ledger left open, when
                            no bookie can replace it); releases the lock,
                            keeping the mark
``WorkerCrashes``           its process dies: the session and its lock go; what
                            it copied stays on the new bookie
==========================  ===================================================

A worker sees an open ledger through a handle opened without recovery: the
LAC the bookies report (:func:`~.bookies.read_last_add_confirmed`) bounds its
last fragments, and only closed fragments are copied (:mod:`.fragments`).
When the bookies' replies do not cover the last ensemble the open fails, and
the pass releases the lock, keeping the mark; a grace period that ends so
recovers nothing.

The mutants the oracle must catch: ``mutant="metadata_before_copy"`` replaces
the bookie in the metadata when it starts a fragment, before copying;
``mutant="failed_pass_unmarks"`` removes the mark when its pass failed, as if
the ledger were repaired; ``mutant="copies_open_fragment"`` copies a fragment
of the open ledger's last segment up to the LAC it read, and names the new
bookie in its place.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from ledgerspec.reference.autorecovery.bookies import BookieAccess, read_last_add_confirmed, serves_entry
from ledgerspec.reference.autorecovery.election import available_bookies
from ledgerspec.reference.autorecovery.fragments import (
    Fragment,
    last_segment_open_and_missing,
    lost_fragments,
    write_set,
)
from ledgerspec.reference.autorecovery.underreplication import ReplicationLock, UnderreplicationManager
from ledgerspec.reference.autorecovery.znodes import UnderreplicationPaths
from ledgerspec.reference.ledger.client import master_key
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore, NoSuchLedgerError
from ledgerspec.reference.metadata.store import BadVersionError, MetadataStore

__all__ = ["WORKER_MUTANTS", "WORKER_STEPS", "CopyTask", "LedgerView", "ReplicationWorker"]

WORKER_MUTANTS = {
    "metadata_before_copy": "the worker replaces the bookie in the metadata before it copies the fragment",
    "failed_pass_unmarks": "a worker whose pass failed removes the ledger's mark as if it were repaired",
    "copies_open_fragment": "the worker copies a fragment of the open ledger's last segment, up to the LAC it read",
}

WORKER_STEPS = (
    "WorkerTakesLock",
    "WorkerStartsFragment",
    "WorkerCopiesEntry",
    "WorkerUpdatesEnsemble",
    "WorkerGivesUp",
    "WorkerReleasesLock",
    "WorkerReleasesLockAfterFailure",
    "WorkerDefersLock",
    "WorkerEndsGracePeriod",
)


@attrs.frozen
class CopyTask:
    """The fragment a worker copies, and where to."""

    fragment: Fragment
    new: str

    @property
    def old(self) -> str:
        return self.fragment.bookie


@attrs.frozen
class LedgerView:
    """What a pass sees of the locked ledger: its metadata, the LAC its handle knows (None: the bookies did not
    answer enough to open it), its lost fragments, and the bookies available."""

    metadata: LedgerMetadata
    lac: int | None
    lost: tuple[Fragment, ...]
    available: frozenset[str]

    @property
    def opened(self) -> bool:
        return self.lac is not None

    def waits_for_close(self) -> bool:
        """The ledger is open, and a lost fragment is open or its last segment misses a bookie: the pass defers
        it to the grace period."""
        # ReplicationWorker.rereplicate (release-4.17.2): foundOpenFragments || isLastSegmentOpenAndMissingBookies.
        if self.lac is None or self.metadata.closed:
            return False
        return any(not f.closed for f in self.lost) or last_segment_open_and_missing(
            self.metadata, self.lac, self.available
        )


class ReplicationWorker:
    """The replication worker of bookie ``bookie_id``, with a metadata session from ``open_session``."""

    def __init__(
        self,
        open_session: Callable[[], MetadataStore],
        bookies: BookieAccess,
        bookie_id: str,
        *,
        paths: UnderreplicationPaths | None = None,
        mutant: str | None = None,
    ) -> None:
        if mutant is not None and mutant not in WORKER_MUTANTS:
            raise ValueError(f"unknown worker mutant {mutant!r}; known: {', '.join(WORKER_MUTANTS)}")
        self.open_session = open_session
        self.bookies = bookies
        self.bookie_id = bookie_id
        self.paths = paths or UnderreplicationPaths()
        self.mutant = mutant
        self.lock: ReplicationLock | None = None
        self.task: CopyTask | None = None
        self.deferred = False  # it keeps the lock of an open ledger through the grace period
        self._left: list[int] = []  # the entries of the task the new bookie lacks
        self.crashes = 0
        self._connect()

    def _connect(self) -> None:
        self.store = self.open_session()
        self.marks = UnderreplicationManager(self.store, self.paths, owner=self.bookie_id)
        self.ledgers = LedgerMetadataStore(self.store, root=self.paths.root)

    # -- what the worker sees ---------------------------------------------------------
    def _has_entry(self, bookie: str, ledger_id: int, entry_id: int) -> bool:
        return serves_entry(self.bookies)(bookie, ledger_id, entry_id)

    def _metadata(self) -> LedgerMetadata | None:
        assert self.lock is not None
        try:
            return self.ledgers.read(self.lock.ledger_id).metadata
        except NoSuchLedgerError:
            return None

    def lost(self) -> list[Fragment]:
        """The lost fragments of the locked ledger."""
        view = self.view()
        return [] if view is None else list(view.lost)

    def _choices(self, view: LedgerView | None = None) -> list[CopyTask]:
        """Each lost closed fragment with each available bookie outside its segment's ensemble."""
        # ReplicationWorker.rereplicate (release-4.17.2) skips the fragments that are not closed.
        view = view or self.view()
        if view is None:
            return []
        return [
            CopyTask(f, new)
            for f in view.lost
            if f.closed or self.mutant == "copies_open_fragment"  # MUTANT: an open fragment copied up to the LAC
            for new in sorted(view.available)
            if new not in view.metadata.ensemble_for(f.first_entry_id)
        ]

    def view(self) -> LedgerView | None:
        """The locked ledger as a pass sees it (``admin.openLedgerNoRecovery``, then ``LedgerChecker``); None once
        it is deleted."""
        metadata = self._metadata()
        if metadata is None:
            return None
        available = frozenset(available_bookies(self.store, self.paths))
        if metadata.closed:
            lac: int | None = metadata.last_entry_id
        else:
            lac = read_last_add_confirmed(metadata, self.bookies)
        lost = () if lac is None else tuple(lost_fragments(metadata, available, self._has_entry, lac))
        return LedgerView(metadata, lac, lost, available)

    def missing(self) -> list[int]:
        """The entries of the task's fragment the new bookie does not hold yet: those it lacked when the task
        started (read from it then), less those copied since. Only the lock holder writes the ledger's entries
        to it, and a bookie keeps what it stored for as long as it can come back."""
        return list(self._left)

    def _source(self, entry_id: int) -> bytes | None:
        """The entry, read from an available bookie of its write set other than the old and the new one."""
        assert self.task is not None and self.lock is not None
        metadata = self._metadata()
        if metadata is None:
            return None
        for bookie in sorted(set(write_set(metadata, entry_id)) - {self.task.old, self.task.new}):
            entry = self.bookies.read(bookie, self.lock.ledger_id, entry_id)
            if entry is not None:
                return entry
        return None

    # -- steps: each a guard (``can_<step>``) and the step itself, which does nothing unless it is enabled ----
    def _lockable(self) -> list[int]:
        """Marked ledgers whose lock nobody holds."""
        return [ledger_id for ledger_id in self.marks.marked_ledgers() if self.marks.holder(ledger_id) is None]

    def can_WorkerTakesLock(self) -> bool:
        return self.lock is None and bool(self._lockable())

    def WorkerTakesLock(self) -> bool:
        if self.lock is not None:
            return False
        for ledger_id in self._lockable():
            self.lock = self.marks.try_lock(ledger_id)
            if self.lock is not None:
                return True
        return False

    def _idle_holder(self) -> bool:
        """It holds a lock, copies no fragment and does not wait out a grace period."""
        return self.lock is not None and self.task is None and not self.deferred

    def can_WorkerStartsFragment(self) -> bool:
        return self._idle_holder() and bool(self._choices())

    def WorkerStartsFragment(self) -> bool:
        if not self._idle_holder():
            return False
        choices = self._choices()
        if not choices:
            return False
        self.task = choices[0]
        lid, new = self.task.fragment.ledger_id, self.task.new
        self._left = [e for e in self.task.fragment.entries if not self._has_entry(new, lid, e)]
        if self.mutant == "metadata_before_copy":
            self._replace_in_metadata(self.task)
        return True

    def can_WorkerCopiesEntry(self) -> bool:
        if self.task is None or self.task.new not in available_bookies(self.store, self.paths):
            return False
        return any(self._source(e) for e in self.missing())

    def WorkerCopiesEntry(self) -> bool:
        if self.task is None or self.lock is None or self.task.new not in available_bookies(self.store, self.paths):
            return False
        for entry_id in self.missing():
            entry = self._source(entry_id)
            if entry is None:
                continue
            metadata = self._metadata()
            key = master_key(metadata.password if metadata is not None else b"")
            if not self.bookies.write(self.task.new, self.lock.ledger_id, entry_id, entry, key):
                return False
            self._left.remove(entry_id)
            return True
        return False

    def can_WorkerUpdatesEnsemble(self) -> bool:
        return self.task is not None and not self.missing()

    def WorkerUpdatesEnsemble(self) -> bool:
        if not self.can_WorkerUpdatesEnsemble():
            return False
        assert self.task is not None
        if self.mutant != "metadata_before_copy":
            self._replace_in_metadata(self.task)
        self.task = None
        return True

    def can_WorkerGivesUp(self) -> bool:
        if self.task is None:
            return False
        if self.task.new not in available_bookies(self.store, self.paths):
            return True
        return any(self._source(e) is None for e in self.missing())

    def WorkerGivesUp(self) -> bool:
        if not self.can_WorkerGivesUp():
            return False
        self.task = None
        return True

    def can_WorkerReleasesLock(self) -> bool:
        if not self._idle_holder():
            return False
        view = self.view()
        return view is None or (view.opened and not view.waits_for_close() and not self._choices(view))

    def WorkerReleasesLock(self) -> bool:
        if not self.can_WorkerReleasesLock():
            return False
        assert self.lock is not None
        view = self.view()
        if view is not None and not view.lost:
            self.marks.mark_replicated(self.lock)
        self.marks.release(self.lock)
        self.lock = None
        return True

    def can_WorkerReleasesLockAfterFailure(self) -> bool:
        if not self._idle_holder():
            return False
        view = self.view()
        if view is None:
            return False
        return not view.opened or (not view.waits_for_close() and bool(self._choices(view)))

    def WorkerReleasesLockAfterFailure(self) -> bool:
        """The pass gave up on a fragment it could start (a copy failed), or could not open the ledger (the LAC
        read of an open ledger not covered): the lock is released and the mark kept, so that a later pass of any
        worker tries again."""
        # ReplicationWorker.rereplicate (release-4.17.2): openLedgerNoRecovery throws a BKException when its
        # ReadLastConfirmedOp is not covered; logBKExceptionAndReleaseLedger catches it and releases the lock.
        if not self.can_WorkerReleasesLockAfterFailure():
            return False
        assert self.lock is not None
        if self.mutant == "failed_pass_unmarks":
            self.marks.mark_replicated(self.lock)
        self.marks.release(self.lock)
        self.lock = None
        return True

    def can_WorkerDefersLock(self) -> bool:
        if not self._idle_holder():
            return False
        view = self.view()
        return view is not None and view.waits_for_close()

    def WorkerDefersLock(self) -> bool:
        """The pass ends on an open ledger a close would let it repair: the lock is kept for the grace period
        (``openLedgerRereplicationGracePeriod``), in which the writer may close the ledger itself."""
        # ReplicationWorker.rereplicate (release-4.17.2) calls deferLedgerLockRelease and skips the release in its
        # finally block.
        if not self.can_WorkerDefersLock():
            return False
        self.deferred = True
        return True

    def can_WorkerEndsGracePeriod(self) -> bool:
        return self.lock is not None and self.deferred

    def WorkerEndsGracePeriod(self) -> bool:
        """The grace period is over: a ledger that still waits for a close is opened with recovery, which fences
        its writer and closes it; the lock is released, the mark kept for the next pass. The recovery is the
        reference client's: its write-back replaces a bookie that is down (an ensemble change from the LAC + 1,
        written with the close) once the others cannot give Qa acks, and it fails, leaving the ledger open (in
        recovery), when no available bookie outside the ensemble can take its place."""
        # PendingAddOp.writeComplete (release-4.17.2) counts the acks; a failed write before Qa of them is
        # ReadOnlyLedgerHandle.handleBookieFailure, which keeps the new ensemble for the close, and fails the
        # recovery with BKNotEnoughBookiesException when the placement finds no bookie.
        # The timer task of ReplicationWorker.deferLedgerLockRelease (release-4.17.2): openLedgerNoRecovery (a
        # failure is logged), then admin.openLedger when isLastSegmentOpenAndMissingBookies or a lost fragment is
        # not closed; releaseUnderreplicatedLedger in its finally block, never markLedgerReplicated.
        if not self.can_WorkerEndsGracePeriod():
            return False
        assert self.lock is not None
        view = self.view()
        if view is not None and view.waits_for_close():
            self.bookies.recover(self.ledgers, self.lock.ledger_id)
        self.marks.release(self.lock)
        self.lock = None
        self.deferred = False
        return True

    def WorkerCrashes(self) -> None:
        """The worker's process dies: its session ends, with the lock; it comes back idle, on a new session."""
        self.store.close()
        self.lock = None
        self.task = None
        self.deferred = False
        self.crashes += 1
        self._connect()

    def _replace_in_metadata(self, task: CopyTask) -> None:
        """The compare-and-set loop of ``updateEnsembleInfo``: re-read on a version clash, give up once the old
        bookie is no longer in the segment."""
        assert self.lock is not None
        while True:
            try:
                current = self.ledgers.read(self.lock.ledger_id)
            except NoSuchLedgerError:
                return
            ensemble = current.metadata.ensemble_for(task.fragment.first_entry_id)
            if task.old not in ensemble or task.new in ensemble:
                return
            replaced = current.metadata.with_replica_replaced(task.fragment.first_entry_id, task.old, task.new)
            try:
                self.ledgers.write(replaced, current.version)
                return
            except BadVersionError:
                continue

    # -- driving -----------------------------------------------------------------------
    def enabled(self) -> list[str]:
        """The steps the worker can take now, in :data:`WORKER_STEPS` order."""
        return [name for name in WORKER_STEPS if getattr(self, f"can_{name}")()]

    def step(self, name: str) -> bool:
        """Take one step by its spec name; whether it was enabled (and so taken)."""
        if name not in WORKER_STEPS:
            raise ValueError(f"unknown worker step {name!r}; known: {', '.join(WORKER_STEPS)}")
        return bool(getattr(self, name)())

    def run(self, max_steps: int = 10_000) -> list[str]:
        """One pass: take the first enabled step until the lock is released (or the grace period ends) or no step
        is enabled; the steps taken. (A ledger left marked, with no bookie to copy to, would be locked and released
        again forever.)"""
        taken: list[str] = []
        for _ in range(max_steps):
            for name in WORKER_STEPS:
                if self.step(name):
                    taken.append(name)
                    break
            else:
                return taken
            if taken[-1] in ("WorkerReleasesLock", "WorkerEndsGracePeriod"):
                return taken
        raise RuntimeError(f"worker {self.bookie_id} still busy after {max_steps} steps")
