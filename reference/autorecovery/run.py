"""One ledger under autorecovery, on the reference engine, one spec step at a time.

:class:`AutorecoveryRun` writes a ledger with the reference client (bookies
``bookie-1 ..``, the first ensemble ``bookie-1 .. bookie-E``), and closes it;
with ``open_ledger`` it leaves it open, its writer's handle kept, the bookies
holding the LAC each add carried. It then lets bookies register and vote in
metadata sessions of their own. Each method
is one step of ``spec/autorecovery/autorecovery.py`` and logs it as an
:class:`~ledgerspec.reference.ledger.events.EngineEvent` named by the spec
action, with the spec's values (bookie numbers 1 .., worker numbers 1 ..):

- ``bookie_stops(b)``: the bookie's process dies; its session ends, and with
  it its registration and its auditor vote (``BookieStops``);
- ``bookie_comes_back(b)``: it restarts on its files and registers and votes
  again (``BookieComesBack``); one whose disk was lost starts formatted, on
  an empty disk, under the same id;
- ``bookie_loses_disk(b)``: a stopped bookie's disk is replaced by an empty
  one (``BookieLosesDisk``); refused while the ledger is open, as in the spec;
- ``elect_auditor()``: with no auditor running, the bookie whose vote is now
  the lowest starts one (``AuditorIsElected``);
- ``auditor_checks()``: the auditor's bookie check (``AuditorChecksBookies``,
  or nothing when it changes nothing);
- ``auditor_checks_all_ledgers()``: its periodic check of all ledgers
  (``AuditorChecksAllLedgers``, or nothing when it changes nothing);
- ``worker_step(w, name)``: one step of worker ``w`` by its spec name;
  ``WorkerEndsGracePeriod`` is logged with the bookie the recovery put in
  place of one that was down (``nb``), ``NO_ONE`` when it replaced none;
- ``worker_crashes(w)``: the worker's process dies (``WorkerCrashes``);
- ``writer_closes_ledger()``: the open ledger's writer closes its handle
  (``WriterClosesLedger``); refused once a worker's recovery fenced it.

Steps a run refuses (a bound reached, a step not enabled) log nothing and
return False. The metadata sessions come from ``open_session``: the embedded
store by default, ZooKeeper when a test passes its sessions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

import attrs
from ledgerspec.reference.autorecovery.auditor import AUDITOR_MUTANTS, Auditor
from ledgerspec.reference.autorecovery.bookies import ClusterBookies
from ledgerspec.reference.autorecovery.election import (
    available_bookies,
    current_auditor,
    register_bookie,
    vote_for_auditor,
)
from ledgerspec.reference.autorecovery.replication import WORKER_MUTANTS, WORKER_STEPS, ReplicationWorker
from ledgerspec.reference.constants import ConstantsTable
from ledgerspec.reference.ledger.client import BookKeeperClient, ClientConfig, LedgerHandle, OrderedPlacement
from ledgerspec.reference.ledger.cluster import InProcessCluster
from ledgerspec.reference.ledger.writer import WriterStatus
from ledgerspec.reference.metadata.embedded import EmbeddedMetadataStore
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore
from ledgerspec.reference.metadata.store import MetadataStore
from ledgerspec.spec.autorecovery.autorecovery import NO_ONE, AutorecoverySpec
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["MUTANTS", "SPEC_CONSTANTS", "AutorecoveryRun", "RunConfig", "embedded_sessions"]

MUTANTS = {**AUDITOR_MUTANTS, **WORKER_MUTANTS}

P = ParamSpec("P")
T = TypeVar("T")


def _step(method: Callable[Concatenate[AutorecoveryRun, P], bool]) -> Callable[Concatenate[AutorecoveryRun, P], bool]:
    """A step of the run: once taken (or refused), each observer sees it, by name and arguments."""

    @functools.wraps(method)
    def step(run: AutorecoveryRun, /, *args: P.args, **kwargs: P.kwargs) -> bool:
        taken = method(run, *args, **kwargs)
        what = f"{method.__name__}({', '.join(map(repr, args))})"
        for observer in run.observers:
            observer(what)
        return taken

    return step


@attrs.frozen
class RunConfig:
    """The cluster, the ledger and the bounds of a run; ``spec_constants`` gives the spec's model of it."""

    bookies: int = 4
    ensemble: int = 3
    write_quorum: int = 2
    entries: int = 2
    segments: int = 1  # 2: an ensemble change at entry 1 put bookie E+1 in bookie 1's place
    workers: int = 1
    max_stops: int = 2
    max_disk_losses: int = 1
    max_worker_crashes: int = 1
    mutant: str | None = None
    open_ledger: bool = attrs.field(default=False, converter=bool)  # the writer leaves the ledger open
    # The acks an add waits for (the spec's Qa); None: the write quorum. A recovery whose write-back gets Qa acks
    # from the bookies of the write set that are up closes the ledger without replacing the one that is down.
    ack_quorum: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.mutant is not None and self.mutant not in MUTANTS:
            raise ValueError(f"unknown autorecovery mutant {self.mutant!r}; known: {', '.join(MUTANTS)}")
        if not 1 <= self.write_quorum <= self.ensemble <= self.bookies:
            raise ValueError(
                f"need 1 <= write_quorum <= ensemble <= bookies, got {self.write_quorum}, {self.ensemble}, "
                f"{self.bookies}"
            )
        if self.ack_quorum is not None and not 1 <= self.ack_quorum <= self.write_quorum:
            raise ValueError(f"need 1 <= ack_quorum <= write_quorum, got {self.ack_quorum}, {self.write_quorum}")
        if self.segments not in (1, 2):
            raise ValueError(f"segments must be 1 or 2, got {self.segments}")
        if self.segments == 2 and self.bookies <= self.ensemble:
            raise ValueError("two segments need a bookie outside the first ensemble to replace bookie 1")
        if self.open_ledger and self.segments == 2 and self.write_quorum != self.ensemble:
            # the open ledger's second segment comes from entry 1's failed write to bookie 1, which only a write
            # set of the whole ensemble names; a later change would start at a later entry than the spec's
            raise ValueError("an open ledger of two segments needs write_quorum == ensemble")
        if self.entries < self.segments:
            raise ValueError(f"{self.segments} segments need at least {self.segments} entries, got {self.entries}")

    def spec_constants(self) -> dict[str, int | str]:
        """The autorecovery spec's constants for runs of this configuration."""
        return {
            **SPEC_CONSTANTS.constants(self),
            "Qa": self.ack_quorum or self.write_quorum,
            "OpenLedger": int(self.open_ledger),
        }


#: The autorecovery spec's constants a run sets, with their :class:`RunConfig` fields.
SPEC_CONSTANTS = ConstantsTable(
    {
        "NumBookies": "bookies",
        "E": "ensemble",
        "Qw": "write_quorum",
        "Qa": "ack_quorum",
        "NumEntries": "entries",
        "Segments": "segments",
        "NumWorkers": "workers",
        "MaxStops": "max_stops",
        "MaxDiskLosses": "max_disk_losses",
        "MaxWorkerCrashes": "max_worker_crashes",
        "OpenLedger": "open_ledger",
    }
)


def embedded_sessions(directory: str | None = None) -> Callable[[], MetadataStore]:
    """Sessions on one embedded store: in memory, or in SQLite files under ``directory``."""
    first: list[EmbeddedMetadataStore] = []

    def open_session() -> MetadataStore:
        if not first:
            first.append(EmbeddedMetadataStore(directory))
            return first[0]
        return first[0].open_session()

    return open_session


class AutorecoveryRun:
    """A cluster with one ledger, closed or open, its bookies' sessions, an auditor and replication workers."""

    def __init__(
        self,
        directory: str,
        config: RunConfig,
        open_session: Callable[[], MetadataStore] | None = None,
        *,
        sync_to_disk: bool = False,
    ) -> None:
        self.config = config
        self.open_session = open_session or embedded_sessions()
        self.cluster = InProcessCluster(directory, config.bookies, sync_to_disk=sync_to_disk)
        self.admin = self.open_session()
        self.ledgers = LedgerMetadataStore(self.admin)
        self.writer: LedgerHandle | None = None  # the open ledger's writer, until it closes it
        self.ledger_id, self.base_version = self._write_ledger()
        self.sessions: dict[str, MetadataStore] = {}
        for address in self.cluster.nodes:
            self._join(address)
        self.bookies = ClusterBookies(self.cluster)
        auditor_mutant = config.mutant if config.mutant in AUDITOR_MUTANTS else None
        worker_mutant = config.mutant if config.mutant in WORKER_MUTANTS else None
        self._auditor_mutant = auditor_mutant
        self.auditor: Auditor | None = None
        self.lost_seen: set[str] = set()  # what the auditor's last check found lost, less the bookies back since
        self.workers = [
            ReplicationWorker(self.open_session, self.bookies, f"worker-{w}", mutant=worker_mutant)
            for w in range(1, config.workers + 1)
        ]
        self.stops = 0
        self.disk_lost: set[str] = set()
        self.events: list[EngineEvent] = [EngineEvent("Init", (), "cluster", None)]
        self.observers: list[Callable[[str], None]] = []

    def _write_ledger(self) -> tuple[int, int]:
        """The ledger as the spec's initial state has it: its id, and the version of its metadata then."""
        client = BookKeeperClient(
            0, self.ledgers, self.cluster, config=ClientConfig(explicit_lac=False), placement=OrderedPlacement()
        )
        self.cluster.attach(client)
        c = self.config
        handle = client.create_ledger(c.ensemble, c.write_quorum, c.ack_quorum or c.write_quorum)
        settle = functools.partial(self.cluster.run_until, lambda: not self.cluster.deliverable())
        if c.open_ledger:
            self._write_open(handle, settle)
            self.writer = handle
        elif c.segments == 2:
            # Entry 0 is confirmed; bookie 1 stops with the other adds in flight, and the writer gives up on it:
            # the ensemble change replaces it by the first bookie outside the ensemble, from entry 1 on.
            handle.add_entry(b"entry 0")
            settle()
            for i in range(1, c.entries):
                handle.add_entry(f"entry {i}".encode())
            self.cluster.crash("bookie-1", power_loss=False)
            for request in self.cluster.timeouts():
                self.cluster.timeout(request)
            settle()
            for request in [r for r in self.cluster.in_flight if r.bookie == "bookie-1"]:
                self.cluster.lose(request)  # its connections died with it
            self.cluster.restart("bookie-1")
        else:
            for i in range(c.entries):
                handle.add_entry(f"entry {i}".encode())
            settle()
        if not c.open_ledger:
            closing = handle.close()
            settle()
            closing.result()
        written = self.ledgers.read(handle.ledger_id)
        expected = AutorecoverySpec(**c.spec_constants()).initial_segments()
        actual = tuple((s.first_entry_id, tuple(self.number(b) for b in s.ensemble)) for s in written.metadata.segments)
        if actual != expected:
            raise RuntimeError(f"the client wrote the segments {actual}, not the spec's initial {expected}")
        return handle.ledger_id, written.version

    def _write_open(self, handle: LedgerHandle, settle: Callable[[], object]) -> None:
        """Each add confirmed before the next is sent, so that the last one carries the LAC just below it; with
        two segments, bookie 1 stops while entry 1 is written, and the writer replaces it from entry 1 on."""
        for i in range(self.config.entries):
            if i == 1 and self.config.segments == 2:
                self.cluster.crash("bookie-1", power_loss=False)
                handle.add_entry(b"entry 1")
                for request in self.cluster.timeouts():
                    self.cluster.timeout(request)
                settle()
                for request in [r for r in self.cluster.in_flight if r.bookie == "bookie-1"]:
                    self.cluster.lose(request)
                self.cluster.restart("bookie-1")
            else:
                handle.add_entry(f"entry {i}".encode())
                settle()

    def _join(self, address: str) -> None:
        session = self.open_session()
        register_bookie(session, address)
        vote_for_auditor(session, address)
        self.sessions[address] = session

    def number(self, address: str) -> int:
        return self.cluster.number(address)

    def _log(self, action: str, args: tuple[object, ...], process: str) -> bool:
        self.events.append(EngineEvent(action, args, process, process))
        return True

    # -- what can happen now: the arguments each step is enabled for -----------------------
    def can_stop(self) -> list[str]:
        """The bookies that may stop: those up, while the bound on stops is not reached."""
        return sorted(self.sessions) if self.stops < self.config.max_stops else []

    def can_come_back(self) -> list[str]:
        """The stopped bookies."""
        return [b for b in self.cluster.nodes if b not in self.sessions]

    def can_lose_disk(self) -> list[str]:
        """The stopped bookies whose disk is still theirs, while the bound on lost disks is not reached and once
        the ledger is closed (the spec leaves out a disk lost while the ledger is open: its LAC read and its
        recovery would then need more than the replies of the bookies that are up)."""
        if len(self.disk_lost) >= self.config.max_disk_losses or not self.ledgers.read(self.ledger_id).metadata.closed:
            return []
        return [b for b in self.can_come_back() if b not in self.disk_lost]

    def can_elect(self) -> bool:
        """No auditor runs, and some bookie votes."""
        return self.auditor is None and bool(self.sessions)

    def can_writer_close(self) -> bool:
        """The open ledger's writer still writes: it has not closed the ledger, nor learnt it was fenced."""
        return self.writer is not None and self.writer.status is WriterStatus.WRITING

    def can_crash(self) -> list[int]:
        """The workers whose crash loses something (a lock, a fragment), while the bound on crashes is not
        reached."""
        if sum(worker.crashes for worker in self.workers) >= self.config.max_worker_crashes:
            return []
        return [w for w, worker in enumerate(self.workers, 1) if worker.lock is not None or worker.task is not None]

    # -- bookies -----------------------------------------------------------------------
    @_step
    def bookie_stops(self, address: str) -> bool:
        if address not in self.can_stop():
            return False
        self.cluster.crash(address, power_loss=False)
        self.sessions.pop(address).close()
        self.stops += 1
        if self.auditor is not None and self.auditor.bookie_id == address:
            self.auditor = None  # its vote went with its session
        return self._log("BookieStops", (self.number(address),), address)

    @_step
    def bookie_comes_back(self, address: str) -> bool:
        if address not in self.can_come_back():
            return False
        self.cluster.restart(address)
        self._join(address)
        self.lost_seen.discard(address)
        return self._log("BookieComesBack", (self.number(address),), address)

    @_step
    def bookie_loses_disk(self, address: str) -> bool:
        if address not in self.can_lose_disk():
            return False
        self.cluster.nodes[address].lose_disk()
        self.disk_lost.add(address)
        return self._log("BookieLosesDisk", (self.number(address),), address)

    # -- the auditor -------------------------------------------------------------------
    @_step
    def elect_auditor(self) -> bool:
        if not self.can_elect():
            return False
        elected = current_auditor(self.admin)
        if elected is None:
            return False
        self.auditor = Auditor(self.sessions[elected], elected, mutant=self._auditor_mutant)
        self.lost_seen = set()
        return self._log("AuditorIsElected", (self.number(elected),), elected)

    @_step
    def auditor_checks(self) -> bool:
        """The bookie check; logged only when it changed what the spec sees (the found set, or the mark)."""
        if self.auditor is None:
            return False
        mark_before = self.auditor.marks.lost_bookies(self.ledger_id)
        lost = set(self.auditor.check_bookies())
        changed = lost != self.lost_seen or self.auditor.marks.lost_bookies(self.ledger_id) != mark_before
        self.lost_seen = lost
        if not changed:
            return False
        return self._log("AuditorChecksBookies", (), self.auditor.bookie_id)

    @_step
    def auditor_checks_all_ledgers(self) -> bool:
        """The check of all ledgers; logged only when it changed the mark."""
        if self.auditor is None:
            return False
        mark_before = self.auditor.marks.lost_bookies(self.ledger_id)
        self.auditor.check_all_ledgers(self.bookies)
        if self.auditor.marks.lost_bookies(self.ledger_id) == mark_before:
            return False
        return self._log("AuditorChecksAllLedgers", (), self.auditor.bookie_id)

    def auditor_has_news(self) -> bool:
        """A check now would find a different set of lost bookies, or lost bookies the mark does not name."""
        if self.auditor is None:
            return False
        metadata = self.ledgers.read(self.ledger_id).metadata
        available = self.available()
        lost = {b for segment in metadata.segments for b in segment.ensemble if b not in available}
        named = set(self.auditor.marks.lost_bookies(self.ledger_id) or ())
        return lost != self.lost_seen or not lost <= named

    # -- the open ledger's writer ---------------------------------------------------------
    @_step
    def writer_closes_ledger(self) -> bool:
        """The writer closes its handle at its LAC; refused when the close fails (a recovery fenced the ledger)."""
        if not self.can_writer_close():
            return False
        assert self.writer is not None
        closing, _ = self._closing_ledger(self.writer.close)  # a metadata write: no bookie is asked
        if not closing.done() or closing.exception() is not None:
            return False
        return self._log("WriterClosesLedger", (), "writer")

    def _closing_ledger(self, close: Callable[[], T]) -> tuple[T, str | None]:
        """Run ``close``, a step that may close the ledger's metadata: what it returned, and the bookie its
        recovery's write-back put in the last ensemble in place of one that was down (None: no ensemble change).
        The spec's ``meta_version`` counts the ensembles' changes, not the closes: the versions a close or a
        recovery writes are left out of it, less one for the ensemble change a recovery's close writes."""
        before = self.ledgers.read(self.ledger_id)
        result = close()
        after = self.ledgers.read(self.ledger_id)
        replacement: str | None = None
        if after.metadata.segments != before.metadata.segments:
            # ReadOnlyLedgerHandle.handleBookieFailure (release-4.17.2): the recovery replaces one bookie, and its
            # close writes the new ensemble (newEnsemblesFromRecovery) with the closed state, in one version.
            (replacement,) = set(after.metadata.last_ensemble) - set(before.metadata.last_ensemble)
        self.base_version += after.version - before.version - (replacement is not None)
        return result, replacement

    # -- the workers -------------------------------------------------------------------
    @_step
    def worker_step(self, w: int, name: str) -> bool:
        if name not in WORKER_STEPS:
            raise ValueError(f"unknown worker step {name!r}; known: {', '.join(WORKER_STEPS)}")
        worker = self.workers[w - 1]
        task = worker.task
        copied = worker.missing() if name == "WorkerCopiesEntry" and task is not None else []
        process = f"worker-{w}"
        if name == "WorkerEndsGracePeriod":
            # the spec's nb: the bookie the recovery's write-back put in place of one that was down, or NO_ONE
            ended, replacement = self._closing_ledger(functools.partial(worker.step, name))
            if not ended:
                return False
            return self._log(name, (w, NO_ONE if replacement is None else self.number(replacement)), process)
        if not worker.step(name):
            return False
        if name == "WorkerStartsFragment":
            assert worker.task is not None
            metadata = self.ledgers.read(self.ledger_id).metadata
            seg = 1 + [s.first_entry_id for s in metadata.segments].index(worker.task.fragment.first_entry_id)
            return self._log(name, (w, seg, self.number(worker.task.old), self.number(worker.task.new)), process)
        if name == "WorkerCopiesEntry":
            assert task is not None
            entry = next(e for e in copied if e not in worker.missing())
            return self._log(name, (w, entry), process)
        return self._log(name, (w,), process)

    @_step
    def worker_crashes(self, w: int) -> bool:
        if w not in self.can_crash():
            return False
        self.workers[w - 1].WorkerCrashes()
        return self._log("WorkerCrashes", (w,), f"worker-{w}")

    def enabled_worker_steps(self, w: int) -> list[str]:
        return self.workers[w - 1].enabled()

    def available(self) -> set[str]:
        return available_bookies(self.admin)

    def close(self) -> None:
        for worker in self.workers:
            worker.store.close()
        for session in self.sessions.values():
            session.close()
        self.admin.close()
        self.cluster.close()
