"""The autorecovery spec's state of an :class:`~.run.AutorecoveryRun`, read from the real parts.

The metadata comes from the store (the ledger's znode decoded, the mark's
protobuf text, the lock's session), the data from the bookies' stores, the
rest from the run's own bookkeeping of what its processes did:

===================  ===========================================================
spec variable        read from
===================  ===========================================================
``meta_segments``    the ledger's znode: each segment's first entry and ensemble
``meta_version``     the znode's version since the ledger was written, from 1,
                     less the versions its closes wrote (the writer's, a
                     recovery's, its IN_RECOVERY mark), plus one for a
                     recovery's close that changed the ensemble: the spec
                     counts the ensembles' changes
``closed``           the ledger's znode: its state is CLOSED
``mark``             the ``urL`` znode's replica list (empty: no znode)
``lock``             the worker whose session owns the ephemeral lock znode
``lock_mark``        the replica list the lock holder read when it took the lock
``workers``          each worker's fragment and what it has left to copy, or
                     its grace period (DEFERRED)
``auditor``          the bookie whose auditor runs
``lost_seen``        the bookies the auditor's last check found lost, less those
                     back since
``data``             the entries each bookie stores (as it left them, when down;
                     nothing once its disk is lost)
``up``               the bookies registered under ``available``
===================  ===========================================================
"""

from __future__ import annotations

from ledgerspec.reference.autorecovery.run import AutorecoveryRun
from ledgerspec.reference.autorecovery.underreplication import UnderreplicationManager
from ledgerspec.spec.autorecovery.autorecovery import (
    DEFERRED,
    IDLE_WORKER,
    NO_ONE,
    REPLICATING,
    AutorecoveryState,
    Worker,
)

__all__ = ["abstract_state"]


def abstract_state(run: AutorecoveryRun) -> AutorecoveryState:
    number = run.number
    current = run.ledgers.read(run.ledger_id)
    metadata = current.metadata
    firsts = [s.first_entry_id for s in metadata.segments]
    marks = UnderreplicationManager(run.admin)
    holder = marks.holder(run.ledger_id)
    lock, lock_mark = NO_ONE, frozenset[int]()
    for w, worker in enumerate(run.workers, start=1):
        if worker.lock is not None and holder == worker.store.session_id:
            lock, lock_mark = w, frozenset(number(b) for b in worker.lock.mark_names)
    workers = []
    for worker in run.workers:
        task = worker.task
        if worker.deferred:
            workers.append(Worker(DEFERRED, 0, 0, 0))
        elif task is None:
            workers.append(IDLE_WORKER)
        else:
            seg = 1 + firsts.index(task.fragment.first_entry_id)
            left = frozenset(worker.missing())
            workers.append(Worker(REPLICATING, seg, number(task.old), number(task.new), left))
    return AutorecoveryState(
        meta_segments=tuple((s.first_entry_id, tuple(number(b) for b in s.ensemble)) for s in metadata.segments),
        meta_version=current.version - run.base_version + 1,
        closed=metadata.closed,
        mark=frozenset(number(b) for b in marks.lost_bookies(run.ledger_id) or ()),
        lock=lock,
        lock_mark=lock_mark,
        auditor=NO_ONE if run.auditor is None else number(run.auditor.bookie_id),
        lost_seen=frozenset(number(b) for b in run.lost_seen),
        data=tuple(frozenset(node.view(run.ledger_id).entries) for node in run.cluster.nodes.values()),
        up=frozenset(number(b) for b in run.available()),
        disk_lost=frozenset(number(b) for b in run.disk_lost),
        stops=run.stops,
        workers=tuple(workers),
        worker_crashes=sum(w.crashes for w in run.workers),
    )
