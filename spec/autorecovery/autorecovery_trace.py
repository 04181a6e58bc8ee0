"""How traces of an autorecovery implementation map onto the autorecovery spec (``autorecovery.py``).

An event's type is an ``AutorecoverySpec`` action name; its params that
action's parameters: ``b`` a bookie (1 ..), ``w`` a replication worker
(1 ..), ``seg`` a segment of the ledger's metadata (1 ..), ``old`` and
``new`` the bookie a fragment is copied from and to, ``e`` an entry id.
Its observed values are ``AutorecoveryState`` variables.

Two observation modes:

``full``
    A harness that sees the bookies' disks, the workers' memory and the
    metadata store: every step is logged, by the bookie that stops, comes
    back, loses its disk or is elected (``bookie-<b>``), by the ``auditor``,
    by the worker (``worker-<w>``), or by the open ledger's ``writer``;
    every variable may be reported.
``metadata``
    A watcher of the metadata store (ZooKeeper): it sees the ledger's
    znode, the under-replication mark and its lock, the auditor's vote and
    the bookies' registrations, so it logs the steps that change one of
    them, as the ``zookeeper`` process. Hidden, so allowed between two
    logged events: a lost disk, a worker starting, copying or dropping a
    fragment, and a worker deferring an open ledger to the grace period
    (it keeps the lock it holds); none of them changes what the watcher
    sees, so a worker that writes the metadata before its copy is seen
    doing what no hidden step can. Observable: ``meta_segments``,
    ``meta_version``, ``closed``, ``mark``, ``lock``, ``auditor``, ``up``.

A trace is the autorecovery of one ledger (no partition key).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from ledgerspec.spec.autorecovery.autorecovery import (
    DEFERRED,
    IDLE,
    NO_ONE,
    REPLICATING,
    AutorecoverySpec,
    AutorecoveryState,
)
from ledgerspec.spec.tracing import Explanation, Guard, ObservationMode, TraceMapping

__all__ = ["FULL", "GUARDS", "METADATA", "METADATA_OBSERVES", "TRACE"]


# -- who logs a step ---------------------------------------------------------------------
def _process(action: str, args: tuple[Any, ...]) -> str:
    if action == "WriterClosesLedger":
        return "writer"
    if action.startswith("Worker"):
        return f"worker-{args[0]}"
    if action in ("AuditorChecksBookies", "AuditorChecksAllLedgers"):
        return "auditor"
    if args:
        return f"bookie-{args[0]}"
    return "cluster"  # Init


def _zookeeper(_action: str, _args: tuple[Any, ...]) -> str:
    return "zookeeper"


FULL = ObservationMode(
    "full",
    "every step, by the bookie, the auditor or the worker that takes it; every variable",
    frozenset(a.name for a in attrs.fields(AutorecoveryState)),
    logged_by=_process,
)

METADATA_OBSERVES = frozenset({"meta_segments", "meta_version", "closed", "mark", "lock", "auditor", "up"})

METADATA = ObservationMode(
    "metadata",
    "what a watcher of the metadata store sees: the ledger's znode, the mark and its lock, the auditor's vote, "
    "the bookies' registrations",
    METADATA_OBSERVES,
    hidden=dict.fromkeys(
        ("BookieLosesDisk", "WorkerStartsFragment", "WorkerCopiesEntry", "WorkerGivesUp", "WorkerDefersLock")
    ),
    logged_by=_zookeeper,
)


# -- explanations: which guard of a disabled action fails -------------------------------------
def _bookie(spec: AutorecoverySpec, b: int) -> str | None:
    return None if b in spec.bookies else f"there is no bookie {b} (bookies 1 .. {spec.NumBookies})"


def _worker(spec: AutorecoverySpec, s: AutorecoveryState, w: int, *, copying: bool) -> str | None:
    if w not in spec.worker_ids:
        return f"there is no worker {w} (workers 1 .. {spec.NumWorkers})"
    phase = s.workers[w - 1].phase
    if copying and phase != REPLICATING:
        return f"worker {w} copies no fragment"
    if not copying and phase == REPLICATING:
        return f"worker {w} is copying a fragment of segment {s.workers[w - 1].seg}"
    if not copying and phase == DEFERRED:
        return f"worker {w} keeps the open ledger's lock for the grace period"
    return None


def _holds_lock(s: AutorecoveryState, w: int) -> str | None:
    if s.lock != w:
        return f"worker {w} does not hold the ledger's lock (held by {s.lock or 'no one'})"
    return None


def _cannot_open(spec: AutorecoverySpec, s: AutorecoveryState) -> str | None:
    if spec.opens(s):
        return None
    return (
        f"the ledger is open and its LAC read is not covered (a write set of its last ensemble has fewer than "
        f"Qw - Qa + 1 = {spec.Qw - spec.Qa + 1} available bookies): openLedgerNoRecovery fails"
    )


def _waits_for_close(spec: AutorecoverySpec, s: AutorecoveryState) -> str:
    """Why the pass defers the ledger: what is lost in it while it is open."""
    if spec.last_segment_open_and_missing(s):
        return "the ledger is open and its last segment names a bookie that is not available"
    return "the ledger is open and a fragment no worker copies while it is open (an open one) is lost"


def _explain_stops(spec: AutorecoverySpec, s: AutorecoveryState, b: int) -> str | None:
    if why := _bookie(spec, b):
        return why
    if b not in s.up:
        return f"bookie {b} is stopped already"
    if s.stops >= spec.MaxStops:
        return f"{s.stops} bookies have stopped; MaxStops is {spec.MaxStops}"
    return None


def _explain_comes_back(spec: AutorecoverySpec, s: AutorecoveryState, b: int) -> str | None:
    if why := _bookie(spec, b):
        return why
    if b in s.up:
        return f"bookie {b} is up"
    return None


def _explain_loses_disk(spec: AutorecoverySpec, s: AutorecoveryState, b: int) -> str | None:
    if why := _bookie(spec, b):
        return why
    if b in s.up:
        return f"bookie {b} is up: only a stopped bookie loses its disk"
    if b in s.disk_lost:
        return f"bookie {b} lost its disk already"
    if len(s.disk_lost) >= spec.MaxDiskLosses:
        return f"{len(s.disk_lost)} disks are lost; MaxDiskLosses is {spec.MaxDiskLosses}"
    if not s.closed:
        return "the ledger is open: the spec loses a disk only once it is closed"
    return None


def _explain_elected(spec: AutorecoverySpec, s: AutorecoveryState, b: int) -> str | None:
    if why := _bookie(spec, b):
        return why
    if s.auditor != NO_ONE:
        return f"bookie {s.auditor} is the auditor"
    if b not in s.up:
        return f"bookie {b} is stopped: it has no vote"
    return None


def _explain_checks(spec: AutorecoverySpec, s: AutorecoveryState) -> str | None:
    if s.auditor == NO_ONE:
        return "no auditor is elected"
    if spec.AuditorChecksBookies(s) is None:
        lost = sorted(spec.lost_bookies(s))
        return f"the check finds the same lost bookies ({lost}) and changes no mark: it is not a step"
    return None


def _explain_checks_all(spec: AutorecoverySpec, s: AutorecoveryState) -> str | None:
    if s.auditor == NO_ONE:
        return "no auditor is elected"
    if why := _cannot_open(spec, s):
        return why + ": the check leaves the ledger for its next round"
    if spec.AuditorChecksAllLedgers(s) is None:
        found = sorted({b for _, b in spec.under_replicated(s)})
        return f"the ledger's mark names every bookie of a lost fragment already ({found}): it is not a step"
    return None


def _explain_takes_lock(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if w not in spec.worker_ids:
        return f"there is no worker {w} (workers 1 .. {spec.NumWorkers})"
    if not s.mark:
        return "the ledger is not marked under-replicated"
    if s.lock != NO_ONE:
        return f"worker {s.lock} holds the ledger's lock"
    return None


def _explain_starts(spec: AutorecoverySpec, s: AutorecoveryState, w: int, seg: int, old: int, new: int) -> str | None:
    if why := _worker(spec, s, w, copying=False):
        return why
    if why := _holds_lock(s, w):
        return why
    if (seg, old) not in spec.under_replicated(s):
        return f"the fragment of bookie {old} in segment {seg} is not under-replicated"
    if why := _cannot_open(spec, s):
        return why
    if not spec.copyable(s, seg):
        return (
            f"segment {seg} is open (the ledger is open, and the LAC {spec.lac(s)} does not close it): a worker "
            "copies no fragment a writer may still change"
        )
    if new not in s.up:
        return f"bookie {new} is not available"
    if new in s.meta_segments[seg - 1][1]:
        return f"bookie {new} is in the ensemble of segment {seg} already"
    return None


def _explain_copies(spec: AutorecoverySpec, s: AutorecoveryState, w: int, e: int) -> str | None:
    if why := _worker(spec, s, w, copying=True):
        return why
    task = s.workers[w - 1]
    if task.new not in s.up:
        return f"bookie {task.new}, the copy's destination, is not available"
    if e not in task.left:
        return f"entry {e} is not among the writes worker {w} has left ({sorted(task.left)})"
    if not any(b in s.up and e in s.data[b - 1] for b in spec._sources(s, task, e)):
        return f"no available bookie of entry {e}'s write set holds it"
    return None


def _explain_updates(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if why := _worker(spec, s, w, copying=True):
        return why
    task = s.workers[w - 1]
    if task.left:
        return f"worker {w} has entries {sorted(task.left)} of the fragment left to write: the copy is not done"
    return None


def _explain_gives_up(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if why := _worker(spec, s, w, copying=True):
        return why
    if spec.WorkerGivesUp(s, w) is None:
        return f"the copy can go on: bookie {s.workers[w - 1].new} is available and every entry left has a replica"
    return None


def _explain_releases(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if why := _worker(spec, s, w, copying=False):
        return why
    if why := _holds_lock(s, w):
        return why
    if why := _cannot_open(spec, s):
        return why + ", and the pass releases the lock as after a failure"
    if spec.waits_for_close(s):
        return _waits_for_close(spec, s) + ": the pass keeps the lock for the grace period"
    if spec._startable(s):
        return "a fragment can still be started: it has an available bookie outside its ensemble to go to"
    return None


def _explain_releases_after_failure(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if why := _worker(spec, s, w, copying=False):
        return why
    if why := _holds_lock(s, w):
        return why
    if not spec.opens(s):
        return None
    if spec.waits_for_close(s):
        return _waits_for_close(spec, s) + ": the pass keeps the lock for the grace period"
    if not spec._startable(s):
        return "no fragment is left that could be started: the pass did not fail, and the lock is released as usual"
    return None


def _explain_defers(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if why := _worker(spec, s, w, copying=False):
        return why
    if why := _holds_lock(s, w):
        return why
    if s.closed:
        return "the ledger is closed: every fragment is closed, and a worker copies it without waiting"
    if why := _cannot_open(spec, s):
        return why
    if not spec.waits_for_close(s):
        return "no fragment of the open ledger is lost and its last segment misses no bookie: nothing waits for a close"
    return None


def _explain_ends_grace(spec: AutorecoverySpec, s: AutorecoveryState, w: int, nb: int) -> str | None:
    if w not in spec.worker_ids:
        return f"there is no worker {w} (workers 1 .. {spec.NumWorkers})"
    if s.workers[w - 1].phase != DEFERRED:
        return f"worker {w} keeps no lock for a grace period"
    if spec.WorkerEndsGracePeriod(s, w, nb) is not None:
        return None
    if not (spec.waits_for_close(s) and spec.covered(s)) or spec.Bug == "grace_ends_without_recovery":
        return f"no recovery follows the grace period, so its write-back replaces no bookie (nb {nb}, not 0)"
    down = sorted(spec.write_back_set(s) - s.up)
    if nb == NO_ONE:
        return (
            f"the recovery's write-back to bookies {sorted(spec.write_back_set(s))} has fewer than Qa={spec.Qa} "
            f"of them available: it replaces bookie {down[0]}, by a bookie outside the ensemble"
        )
    if not down:
        return "every bookie the recovery writes back to is available: it replaces none"
    return f"bookie {nb} cannot take bookie {down[0]}'s place: it is not available, or in the ensemble already"


def _explain_writer_closes(spec: AutorecoverySpec, s: AutorecoveryState) -> str | None:
    if s.closed:
        return "the ledger is closed already (by its writer, or by a worker's recovery that fenced the writer)"
    return None


def _explain_crashes(spec: AutorecoverySpec, s: AutorecoveryState, w: int) -> str | None:
    if w not in spec.worker_ids:
        return f"there is no worker {w} (workers 1 .. {spec.NumWorkers})"
    if s.worker_crashes >= spec.MaxWorkerCrashes:
        return f"{s.worker_crashes} workers have crashed; MaxWorkerCrashes is {spec.MaxWorkerCrashes}"
    if s.lock != w and s.workers[w - 1].phase == IDLE:
        return f"worker {w} holds no lock and copies nothing: its crash changes nothing"
    return None


EXPLAIN: dict[str, Explanation] = {
    "BookieStops": _explain_stops,
    "BookieComesBack": _explain_comes_back,
    "BookieLosesDisk": _explain_loses_disk,
    "WriterClosesLedger": _explain_writer_closes,
    "AuditorIsElected": _explain_elected,
    "AuditorChecksBookies": _explain_checks,
    "AuditorChecksAllLedgers": _explain_checks_all,
    "WorkerTakesLock": _explain_takes_lock,
    "WorkerStartsFragment": _explain_starts,
    "WorkerCopiesEntry": _explain_copies,
    "WorkerUpdatesEnsemble": _explain_updates,
    "WorkerGivesUp": _explain_gives_up,
    "WorkerReleasesLock": _explain_releases,
    "WorkerReleasesLockAfterFailure": _explain_releases_after_failure,
    "WorkerDefersLock": _explain_defers,
    "WorkerEndsGracePeriod": _explain_ends_grace,
    "WorkerCrashes": _explain_crashes,
}


# -- guards: the antecedents of the invariants --------------------------------------------
def _entry_off_its_write_set(spec: AutorecoverySpec, s: AutorecoveryState) -> bool:
    return any(b not in spec.write_set_in(s.meta_segments, e) for b in spec.bookies for e in s.data[b - 1])


GUARDS: dict[str, Sequence[Guard]] = {
    "NoEntryLostWhileReplicaRemains": (
        Guard("EntryOffItsWriteSet", _entry_off_its_write_set, "a bookie holds an entry its write set does not name"),
    ),
    "MetadataNamesOnlyHolders": (
        Guard("EnsembleChanged", lambda spec, s: s.meta_version > 1, "re-replication changed an ensemble"),
    ),
    "LostBookiesMarked": (
        Guard(
            "AuditorSawLoss",
            lambda spec, s: bool(s.lost_seen & spec.lost_bookies(s)),
            "the auditor found a bookie lost that the metadata still names",
        ),
    ),
    "LockHeldByOneWorker": (
        Guard(
            "WorkerBusy",
            lambda spec, s: any(t.phase != IDLE for t in s.workers),
            "a worker copies, or keeps an open ledger's lock for the grace period",
        ),
    ),
}

PROCESSES = ("bookie", "auditor", "worker", "writer", "zookeeper")

# What an event says nothing without: the mark an audit leaves, the ensemble a worker's update writes.
REQUIRES = {
    "AuditorChecksBookies": {"mark"},
    "AuditorChecksAllLedgers": {"mark"},
    "WorkerUpdatesEnsemble": {"meta_segments"},
}

TRACE = TraceMapping(
    AutorecoverySpec,
    (FULL, METADATA),
    requires=REQUIRES,
    explain=EXPLAIN,
    guards=GUARDS,
    processes=PROCESSES,
)
