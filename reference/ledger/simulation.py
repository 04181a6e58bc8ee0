"""One ledger on an in-process cluster, run step by step: by a seeded random choice, or by a test.

A :class:`LedgerSimulation` holds the system the ledger spec describes:
bookies ``bookie-1 .. bookie-N`` (:class:`~.cluster.InProcessCluster`), a
metadata store, the writer (client 0) with the ledger it created, recovering
clients ``1 .. R``, and a reader. At each point it lists the steps that can
be taken (:meth:`LedgerSimulation.steps`), each one atomic, as in the spec:

======================  ======================================================
step                    what happens
======================  ======================================================
``add``                 the writer pushes the next entry
``close``               the writer closes the ledger at its LAC; the adds
                        still pending fail
``deliver``             a bookie serves a request; its reply arrives, or is
                        lost (``lose_reply``)
``lose``                the network drops a request
``crash``, ``restart``  a bookie stops (power loss) / starts again
``crash-before-fsync``  a bookie journals an add and loses power before the
                        fsync (a crash, within the same bound)
``timeout``             a client gives up on a reply that cannot come: the
                        writer changes the ensemble, a recovery resends
``recover``             a recovering client opens the ledger with recovery
``local``               a client's own step: a recovery's close, the explicit LAC
``read``                the reader reads the LAC and the entries up to it
======================  ======================================================

:meth:`LedgerSimulation.run` picks steps with a seeded ``random.Random``:
a seed gives the same run, and the same events, on every machine. The
faults a run may use are named (:data:`FAULTS`); the bounds on them are the
ledger spec's constants (:meth:`SimulationConfig.spec_constants`), so every
run is a behaviour the spec's model can take.

The reader checks what it reads: every entry up to the LAC it learned must
be the payload the writer added (``read_problems`` lists any that is not).
With ``readers=1`` the reader is the spec's plain reader 1: it logs
``ReaderReadsLac`` when it learns a higher LAC, piggybacked or explicit, and
``ReaderReadsEntry`` when a bookie gives it an entry it had not read so.
"""

from __future__ import annotations

import enum
import random
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import attrs
from ledgerspec.reference.bookie import BookieConfig
from ledgerspec.reference.constants import ConstantsTable
from ledgerspec.reference.ledger.client import (
    BookKeeperClient,
    ClientConfig,
    LedgerHandle,
    LocalStep,
    RandomPlacement,
    ReadHandle,
    RecoveryOpen,
)
from ledgerspec.reference.ledger.cluster import DEFAULT_BOOKIE_CONFIG, InProcessCluster
from ledgerspec.reference.ledger.events import spec_data
from ledgerspec.reference.ledger.protocol import Request
from ledgerspec.reference.ledger.writer import WriterStatus
from ledgerspec.reference.metadata import EmbeddedMetadataStore, LedgerMetadataStore, MetadataStore
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["FAULTS", "SPEC_CONSTANTS", "LedgerSimulation", "SimulationConfig", "Step", "StepKind"]

FAULTS = ("crash", "restart", "loss", "reorder", "recovery", "ensemble-change")
PASSWORD = b"ledgerspec"
READER = 1000  # client id of the reader: not a client of the spec


def _faults(value: frozenset[str] | Sequence[str]) -> frozenset[str]:
    faults = frozenset(value)
    unknown = sorted(faults - set(FAULTS))
    if unknown:
        raise ValueError(f"unknown fault {', '.join(unknown)}; faults: {', '.join(FAULTS)}")
    return faults


@attrs.frozen
class SimulationConfig:
    """The system and the faults allowed; the bounds are the ledger spec's constants."""

    bookies: int = 4  # NumBookies: one more than the ensemble, so that an ensemble change has a bookie to take
    ensemble: int = 3  # E
    write_quorum: int = 2  # Qw
    ack_quorum: int = 2  # Qa
    recoverers: int = 1  # NumRecoverers
    max_entries: int = 5  # MaxEntries: entries the writer adds at most
    throttle: int = 0  # Throttle: adds pending at most, 0 for no limit
    max_crashes: int = 2  # MaxCrashes: bookie crashes in all
    max_loss: int = 2  # MaxLoss: requests and awaited replies lost in all
    faults: frozenset[str] = attrs.field(default=frozenset(FAULTS), converter=_faults)
    power_loss: bool = True  # a crash loses power (else only the bookie's process dies)
    sync_to_disk: bool = False  # pass the bookies' fsyncs to the disk (the crash model decides what survives)
    explicit_lac: bool = attrs.field(default=True, converter=bool)  # ExplicitLac: the writer sends its LAC when idle
    mutant: str | None = None  # a client mutant (client.MUTANTS)
    bookie_mutant: str | None = None  # a mutant of every bookie (bookie.MUTANTS, checked by BookieConfig)
    readers: int = 0  # NumReaders: 1 makes the reader the spec's plain reader

    def __attrs_post_init__(self) -> None:
        if self.readers not in (0, 1):
            raise ValueError(f"readers={self.readers}: a simulation has one reader, followed by the spec or not")

    def spec_constants(self) -> dict[str, int]:
        """The ledger spec's constants for runs of this configuration: a fault left out is a bound of 0."""
        constants: dict[str, int] = SPEC_CONSTANTS.constants(self)
        constants["ExplicitLac"] = int(self.explicit_lac)
        if "crash" not in self.faults:
            constants["MaxCrashes"] = 0
        if "loss" not in self.faults:
            constants["MaxLoss"] = 0
        return constants


#: The ledger spec's constants a simulation sets, with their :class:`SimulationConfig` fields.
SPEC_CONSTANTS = ConstantsTable(
    {
        "NumBookies": "bookies",
        "E": "ensemble",
        "Qw": "write_quorum",
        "Qa": "ack_quorum",
        "NumRecoverers": "recoverers",
        "NumReaders": "readers",
        "MaxEntries": "max_entries",
        "Throttle": "throttle",
        "ExplicitLac": "explicit_lac",
        "MaxCrashes": "max_crashes",
        "MaxLoss": "max_loss",
    }
)


class StepKind(enum.Enum):
    ADD = "add"
    CLOSE = "close"
    DELIVER = "deliver"
    LOSE = "lose"
    CRASH = "crash"
    CRASH_BEFORE_FSYNC = "crash-before-fsync"
    RESTART = "restart"
    TIMEOUT = "timeout"
    RECOVER = "recover"
    LOCAL = "local"
    READ = "read"


@attrs.frozen
class Step:
    """One step the simulation can take."""

    kind: StepKind
    request: Request | None = None  # deliver, lose, timeout, crash-before-fsync
    lose_reply: bool = False  # deliver
    bookie: str | None = None  # crash, restart
    client: int | None = None  # recover
    local: LocalStep | None = None  # local

    def __str__(self) -> str:
        if self.kind is StepKind.DELIVER:
            return f"deliver {self.request!r}" + (" (reply lost)" if self.lose_reply else "")
        if self.kind in (StepKind.LOSE, StepKind.TIMEOUT, StepKind.CRASH_BEFORE_FSYNC):
            return f"{self.kind.value} {self.request!r}"
        if self.kind in (StepKind.CRASH, StepKind.RESTART):
            return f"{self.kind.value} {self.bookie}"
        if self.kind is StepKind.RECOVER:
            return f"recover (client {self.client})"
        if self.kind is StepKind.LOCAL:
            assert self.local is not None
            return f"{self.local.kind.value} (client {self.local.client})"
        return str(self.kind.value)


# How often each kind of step is picked, against the others enabled.
WEIGHTS = {
    StepKind.ADD: 3.0,
    StepKind.CLOSE: 0.15,
    StepKind.DELIVER: 10.0,
    StepKind.LOSE: 0.3,
    StepKind.CRASH: 0.3,
    StepKind.CRASH_BEFORE_FSYNC: 2.0,
    StepKind.RESTART: 0.6,
    StepKind.TIMEOUT: 2.0,
    StepKind.RECOVER: 0.2,
    StepKind.LOCAL: 3.0,
    StepKind.READ: 0.05,
}
LOST_REPLY_WEIGHT = 0.3


class _FirstBookiesFirst(RandomPlacement):
    """The first ensemble is bookies 1 .. E, as the spec's initial state; replacements are drawn at random."""

    def new_ensemble(self, size: int, writable: Sequence[str]) -> list[str]:
        return list(writable[:size]) if len(writable) >= size else super().new_ensemble(size, writable)


class LedgerSimulation:
    """A ledger, its writer, recovering clients and a reader on an in-process cluster (module docstring)."""

    def __init__(
        self,
        config: SimulationConfig,
        root: str | None = None,
        *,
        seed: int = 0,
        store: MetadataStore | None = None,
        bookie_config: BookieConfig | None = None,
    ) -> None:
        self.config = config
        self._tmp = tempfile.TemporaryDirectory(prefix="ledger-sim-") if root is None else None
        self.root = root if root is not None else self._tmp.name  # type: ignore[union-attr]
        self.rng = random.Random(seed)
        if bookie_config is None and config.bookie_mutant is not None:
            bookie_config = attrs.evolve(DEFAULT_BOOKIE_CONFIG, mutant=config.bookie_mutant)
        self.cluster = InProcessCluster(
            self.root, config.bookies, sync_to_disk=config.sync_to_disk, bookie_config=bookie_config
        )
        self.store = store if store is not None else EmbeddedMetadataStore()
        tokens = iter(range(1, 2**62))
        self.ledgers = LedgerMetadataStore(self.store, creator_tokens=lambda: next(tokens))
        client_config = ClientConfig(
            max_pending_adds=config.throttle, explicit_lac=config.explicit_lac, mutant=config.mutant
        )
        placement = _FirstBookiesFirst(random.Random(self.rng.random()))
        events = self.cluster.events

        def client(client_id: int) -> BookKeeperClient:
            c = BookKeeperClient(
                client_id, self.ledgers, self.cluster, config=client_config, placement=placement, events=events
            )
            return self.cluster.attach(c)

        self.writer_client = client(0)
        self.recovering_clients = {c: client(c) for c in range(1, config.recoverers + 1)}
        self.reader_client = self.cluster.attach(
            BookKeeperClient(READER, self.ledgers, self.cluster, config=client_config, placement=placement)
        )
        self.handle: LedgerHandle = self.writer_client.create_ledger(
            config.ensemble, config.write_quorum, config.ack_quorum, password=PASSWORD
        )
        self.ledger_id = self.handle.ledger_id
        self.recoveries: dict[int, RecoveryOpen] = {}
        self.payloads: dict[int, bytes] = {}  # entry -> payload the writer added
        self.acknowledged: list[int] = []  # entries whose add completed, in the order the application saw them
        self.read_problems: list[str] = []  # what a reader read that it should not have
        self.reads = 0  # reads that completed
        self._reading: Future[list[bytes]] | Future[int] | None = None
        self.reader_lac = -1  # the highest LAC the reader learned: the spec's reader_lac[1]
        self.reader_read: set[tuple[int, int]] = set()  # (entry, spec data) it read: the spec's reader_read[1]
        self.observers: list[Callable[[Step, list[EngineEvent]], None]] = []

    def close(self) -> None:
        """Close the bookies' files, and release their directory (a temporary one)."""
        self.cluster.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    @property
    def events(self) -> list[EngineEvent]:
        return self.cluster.events.events

    @property
    def writer_done(self) -> bool:
        return self.handle.status is not WriterStatus.WRITING

    # -- the menu --------------------------------------------------------------------
    def can_add(self) -> bool:
        """The writer may push another entry: within its throttle and the spec's MaxEntries."""
        return self.handle.writer.can_add() and self.handle.last_add_pushed + 1 < self.config.max_entries

    def steps(self) -> list[Step]:
        """Every step that can be taken now, in a fixed order."""
        cfg, cluster, writer = self.config, self.cluster, self.handle.writer
        found: list[Step] = []
        if self.can_add():
            found.append(Step(StepKind.ADD))
        if writer.can_close():
            found.append(Step(StepKind.CLOSE))
        loss = "loss" in cfg.faults and cluster.lost < cfg.max_loss
        crash = "crash" in cfg.faults and cluster.crashes < cfg.max_crashes
        for request in self._deliverable():
            found.append(Step(StepKind.DELIVER, request))
            if loss:
                found.append(Step(StepKind.DELIVER, request, lose_reply=True))
            if crash and cluster.nodes[request.bookie].journals_add(request):
                found.append(Step(StepKind.CRASH_BEFORE_FSYNC, request))
        if loss:
            found += [Step(StepKind.LOSE, r) for r in cluster.in_flight]
        for address, node in cluster.nodes.items():
            if node.up and crash:
                found.append(Step(StepKind.CRASH, bookie=address))
            if not node.up and "restart" in cfg.faults:
                found.append(Step(StepKind.RESTART, bookie=address))
        for request in cluster.timeouts():
            if request.client != 0 or "ensemble-change" in cfg.faults:
                found.append(Step(StepKind.TIMEOUT, request))
        if "recovery" in cfg.faults:
            found += [Step(StepKind.RECOVER, client=c) for c in self.recovering_clients if c not in self.recoveries]
        found += [Step(StepKind.LOCAL, local=s) for c in cluster.clients.values() for s in c.local_steps()]
        if self._reading is None:
            found.append(Step(StepKind.READ))
        return found

    def _deliverable(self) -> list[Request]:
        deliverable = self.cluster.deliverable()
        if "reorder" in self.config.faults:
            return deliverable
        # Without reordering, each client's connection to a bookie delivers in the order sent.
        first: dict[tuple[int, str], Request] = {}
        for request in deliverable:
            first.setdefault((request.client, request.bookie), request)
        return list(first.values())

    # -- taking a step ---------------------------------------------------------------
    def take(self, step: Step) -> list[EngineEvent]:
        """Take one step; the events it logged. Observers see them after the step (a crash before an fsync
        that the bookie acknowledged early: the acknowledgement, then the crash)."""
        first = before = len(self.events)
        kind = step.kind
        if kind is StepKind.ADD:
            self.add()
        elif kind is StepKind.CLOSE:
            self.handle.close()
        elif kind is StepKind.DELIVER:
            assert step.request is not None
            self.cluster.deliver(step.request, lose_reply=step.lose_reply)
        elif kind is StepKind.LOSE:
            assert step.request is not None
            self.cluster.lose(step.request)
        elif kind is StepKind.CRASH:
            assert step.bookie is not None
            self.cluster.crash(step.bookie, power_loss=self.config.power_loss)
        elif kind is StepKind.CRASH_BEFORE_FSYNC:
            assert step.request is not None
            durable = self.cluster.journal_unsynced(step.request)
            if len(self.events) > before:  # acknowledged before the fsync: a step of its own, seen before the crash
                self._observe(step, self.events[before:])
                before = len(self.events)
            self.cluster.power_off(step.request.bookie, durable)
        elif kind is StepKind.RESTART:
            assert step.bookie is not None
            self.cluster.restart(step.bookie)
        elif kind is StepKind.TIMEOUT:
            assert step.request is not None
            self.cluster.timeout(step.request)
        elif kind is StepKind.RECOVER:
            assert step.client is not None
            self.recoveries[step.client] = self.recovering_clients[step.client].recover_ledger(
                self.ledger_id, password=PASSWORD
            )
        elif kind is StepKind.LOCAL:
            assert step.local is not None
            self.cluster.clients[step.local.client].run_local(step.local)
        else:
            self.start_read()
        self._observe(step, self.events[before:])
        return self.events[first:]

    def _observe(self, step: Step, events: list[EngineEvent]) -> None:
        for observer in self.observers:
            observer(step, events)

    def add(self) -> int:
        """The writer adds the next entry; its id."""
        payload = f"entry {self.handle.last_add_pushed + 1} of ledger {self.ledger_id}: {self.rng.random():.6f}"
        future = self.handle.add_entry(payload.encode())
        entry_id = self.handle.last_add_pushed
        self.payloads[entry_id] = payload.encode()
        future.add_done_callback(self._acknowledged)
        return entry_id

    def _acknowledged(self, future: Future[int]) -> None:
        if future.exception() is None:
            self.acknowledged.append(future.result())

    def start_read(self) -> None:
        """The reader opens the ledger without recovery and reads its LAC; then the entries up to it."""
        handle = self.reader_client.open_ledger(self.ledger_id, password=PASSWORD)
        if self.config.readers:
            handle.on_entry = self._reader_read_entry
        lac_future = handle.read_last_add_confirmed()
        self._reading = lac_future
        lac_future.add_done_callback(lambda f: self._read_entries(handle, f))

    def _reader_read_entry(self, entry_id: int, bookie: str, payload: bytes) -> None:
        """ReaderReadsEntry(1, e, b), when the reader had not read that entry with those bytes."""
        read = (entry_id, spec_data(payload, self.cluster.events.added))
        if read not in self.reader_read:
            self.reader_read.add(read)
            self.cluster.events.reader("ReaderReadsEntry", 1, entry_id, bookie)

    def _read_entries(self, handle: ReadHandle, lac: Future[int]) -> None:
        if self.config.readers and lac.exception() is None and lac.result() > self.reader_lac:
            self.reader_lac = lac.result()
            self.cluster.events.reader("ReaderReadsLac", 1, lac.result())
        if lac.result() < 0:
            self._reading = None
            self.reads += 1
            return
        entries = handle.read(0, lac.result())
        self._reading = entries
        entries.add_done_callback(lambda f: self._check_read(lac.result(), f))

    def _check_read(self, lac: int, future: Future[list[bytes]]) -> None:
        self._reading = None
        self.reads += 1
        if future.exception() is not None:
            return  # no bookie of some write set could answer: unreadable now, not wrong
        for entry_id, payload in enumerate(future.result()):
            added = self.payloads.get(entry_id)
            if added != payload:
                self.read_problems.append(
                    f"entry {entry_id} <= LAC {lac} read as {payload!r}, the writer added {added!r}"
                )

    # -- random runs -----------------------------------------------------------------
    def run(self, max_steps: int) -> int:
        """Take up to ``max_steps`` steps, each chosen by the seeded random generator; the steps taken."""
        taken = 0
        while taken < max_steps:
            options = self.steps()
            if not options:
                break
            weights = [WEIGHTS[s.kind] * (LOST_REPLY_WEIGHT if s.lose_reply else 1.0) for s in options]
            self.take(self.rng.choices(options, weights)[0])
            taken += 1
        return taken
