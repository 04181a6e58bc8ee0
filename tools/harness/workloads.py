"""The engine's seeded fault workloads, recorded as traces in each observation mode and checked by the oracle.

A workload is a set of runs of the reference engine, each recorded once per
observation mode of its spec's trace mapping and checked against that spec:

- :class:`Workload`: seeded random runs of the in-process BookKeeper cluster
  (:class:`~ledgerspec.reference.ledger.simulation.LedgerSimulation`) with every
  fault on, checked against the ledger spec;
- :class:`BookieWorkload`: one reference bookie through the scripted
  crash-check workloads, each as written and with a crash after each step;
  :class:`RandomBookieWorkload`: seeded random runs of one bookie with crashes
  and restarts; both checked against the bookie spec;
- :class:`CursorWorkload`: seeded random runs of a topic and its durable cursor
  on a crashing broker, checked against the cursor spec;
- :class:`TopicWorkload`: seeded random runs of a topic partition, its producers
  (with deduplication) and subscriptions on a crashing broker that loses the
  topic to another now and then, checked against the managed-ledger spec;
- :class:`AutorecoveryWorkload`: seeded random runs of one closed ledger under
  autorecovery, checked against the autorecovery spec (its ``client`` mode is
  the mapping's ``metadata`` mode, a watcher of the metadata store).

A :class:`Mutant` put into a workload runs the engine with that seeded bug;
``None`` runs the engine as it is. The mutation score
(:mod:`~ledgerspec.tools.harness.mutants`) and the soak
(:mod:`~ledgerspec.tools.harness.soak`) run these workloads. Runs are
deterministic: the same workload gives the same traces on every machine.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar

import attrs
from ledgerspec.conformance.checker import Bounds, TraceChecker
from ledgerspec.conformance.events import events_from_json
from ledgerspec.conformance.verdict import Verdict
from ledgerspec.reference.autorecovery import RunConfig as AutorecoveryConfig
from ledgerspec.reference.autorecovery.trace import simulate_autorecovery_traces
from ledgerspec.reference.bookie import BookieConfig
from ledgerspec.reference.bookie.trace import BookieRun, bookie_runs, random_bookie_traces, record_run
from ledgerspec.reference.bookie.workloads import WORKLOAD_CONFIG, WORKLOAD_SPEC, random_spec
from ledgerspec.reference.bookie.workloads import WORKLOADS as BOOKIE_WORKLOADS
from ledgerspec.reference.ledger import LedgerSimulation, SimulationConfig
from ledgerspec.reference.ledger.trace import TraceRecorder
from ledgerspec.reference.managed_ledger import RunConfig
from ledgerspec.reference.managed_ledger.refinement import spec_for_config
from ledgerspec.reference.managed_ledger.simulation import simulate_cursor_traces
from ledgerspec.reference.managed_ledger.topic_run import TopicRunConfig
from ledgerspec.reference.managed_ledger.topic_simulation import simulate_topic_traces, spec_for, with_mutant
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.ledger.ledger import LedgerSpec

__all__ = [
    "AUTORECOVERY_OPEN_WORKLOAD",
    "AUTORECOVERY_WORKLOAD",
    "BOOKIE_STORAGE",
    "CURSOR_WORKLOAD",
    "LEDGER_WORKLOADS",
    "MODES",
    "TOPIC_WORKLOAD",
    "WORKLOADS",
    "AnyWorkload",
    "AutorecoveryWorkload",
    "BookieWorkload",
    "Checkers",
    "CursorWorkload",
    "Mutant",
    "RandomBookieWorkload",
    "SeededWorkload",
    "TopicWorkload",
    "Workload",
    "WorkloadRun",
    "workload_traces",
]

#: The score's observation modes: every spec's full mode, and its partial one (``client``, or the mapping's own).
MODES = ("full", "client")


@attrs.frozen
class Mutant:
    """A seeded bug of the engine: where it lives, what it breaks, and the specs whose traces can show it."""

    name: str
    layer: str  # "client", "bookie", "managed-ledger", "topic" or "autorecovery"
    description: str
    specs: tuple[str, ...] = ("ledger",)  # it runs under the workloads of these specs

    def configure(self, config: SimulationConfig) -> SimulationConfig:
        if self.layer == "client":
            return attrs.evolve(config, mutant=self.name)
        return attrs.evolve(config, bookie_mutant=self.name)

    def configure_bookie(self, config: BookieConfig) -> BookieConfig:
        return attrs.evolve(config, mutant=self.name)

    def configure_cursor(self, config: RunConfig) -> RunConfig:
        return attrs.evolve(config, mutant=self.name)

    def configure_topic(self, config: TopicRunConfig) -> TopicRunConfig:
        return with_mutant(config, self.name)

    def configure_autorecovery(self, config: AutorecoveryConfig) -> AutorecoveryConfig:
        return attrs.evolve(config, mutant=self.name)


C = TypeVar("C")


@attrs.frozen
class SeededWorkload(Generic[C]):
    """Seeded random runs of one configuration ``config``: ``traces`` runs of at most ``steps`` steps each, run
    ``i`` seeded with ``(seed, i)``."""

    name: str
    config: C
    traces: int
    steps: int
    seed: int = 0
    doc: str = ""
    modes: tuple[str, ...] = MODES  # the score's modes its runs are checked in
    spec: ClassVar[str]
    mode_names: ClassVar[dict[str, str]] = {}  # the score's mode -> the trace mapping's, where they differ

    def scaled(self, traces: int) -> Self:
        """The same runs, ``traces`` of them."""
        return attrs.evolve(self, traces=traces)

    def seeded(self, seed: int) -> Self:
        """Other runs of the same configuration: those of ``seed``."""
        return attrs.evolve(self, seed=seed)

    def run_count(self) -> int:
        return self.traces

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "doc": self.doc,
            "traces": self.traces,
            "steps": self.steps,
            "seed": self.seed,
            "modes": [self.mode_names.get(m, m) for m in self.modes],
        }


@attrs.frozen
class Workload(SeededWorkload[SimulationConfig]):
    """Seeded random runs of one cluster configuration, checked against the ledger spec."""

    spec: ClassVar[str] = "ledger"

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[WorkloadRun]:
        for trace_id, lines, sim in workload_traces(self, mutant, modes):
            yield WorkloadRun(trace_id, lines, LedgerSpec(**sim.config.spec_constants()), len(sim.read_problems))


@attrs.frozen
class BookieWorkload:
    """The scripted crash-check workloads of one bookie, as written and with a crash after each step, checked
    against the bookie spec (:mod:`ledgerspec.reference.bookie.trace`); ``traces``: only the first so many runs."""

    name: str
    scripts: tuple[str, ...]
    doc: str = ""
    traces: int | None = None
    spec: ClassVar[str] = "bookie"
    modes: ClassVar[tuple[str, ...]] = MODES
    mode_names: ClassVar[dict[str, str]] = {}

    def scaled(self, traces: int) -> BookieWorkload:
        return attrs.evolve(self, traces=traces)

    def runs(self) -> list[BookieRun]:
        runs = bookie_runs(self.scripts)
        return runs if self.traces is None else runs[: self.traces]

    def run_count(self) -> int:
        return len(self.runs())

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "spec": self.spec,
            "doc": self.doc,
            "traces": self.run_count(),
            "scripts": list(self.scripts),
        }

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[WorkloadRun]:
        config = WORKLOAD_CONFIG if mutant is None else mutant.configure_bookie(WORKLOAD_CONFIG)
        for run in self.runs():
            yield WorkloadRun(run.trace_id, record_run(run, config=config, modes=modes).lines, WORKLOAD_SPEC, 0)


@attrs.frozen
class RandomBookieWorkload(SeededWorkload[BookieConfig]):
    """Seeded random runs of one bookie with crashes and restarts, checked against the bookie spec
    (:func:`~ledgerspec.reference.bookie.workloads.random_steps`)."""

    spec: ClassVar[str] = "bookie"

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[WorkloadRun]:
        config = self.config if mutant is None else mutant.configure_bookie(self.config)
        spec = random_spec(self.config, self.steps)
        for run in random_bookie_traces(config, seed=self.seed, steps=self.steps, traces=self.traces, modes=modes):
            yield WorkloadRun(run.trace_id, run.lines, spec, 0)


@attrs.frozen
class CursorWorkload(SeededWorkload[RunConfig]):
    """Seeded random runs of a topic and its cursor on a crashing broker, checked against the cursor spec."""

    spec: ClassVar[str] = "cursor"
    modes: tuple[str, ...] = ("full",)

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[WorkloadRun]:
        config = self.config if mutant is None else mutant.configure_cursor(self.config)
        chosen = tuple(m for m in modes if m in self.modes)
        with tempfile.TemporaryDirectory(prefix="ledgerspec-broker-") as root:
            for run in simulate_cursor_traces(
                config, root, seed=self.seed, steps=self.steps, traces=self.traces, modes=chosen
            ):
                # Checked under the faults the harness caused, as a user's harness that injects them would be.
                yield WorkloadRun(run.trace_id, run.lines, spec_for_config(config, **run.bounds), 0)


@attrs.frozen
class TopicWorkload(SeededWorkload[TopicRunConfig]):
    """Seeded random runs of a topic partition, its producers and subscriptions on a crashing broker, checked
    against the managed-ledger spec."""

    spec: ClassVar[str] = "managed_ledger"
    max_crashes: int = 2  # the spec's MaxCrashes

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[WorkloadRun]:
        config = self.config if mutant is None else mutant.configure_topic(self.config)
        spec = spec_for(self.config, self.max_crashes)
        chosen = tuple(m for m in modes if m in self.modes)
        with tempfile.TemporaryDirectory(prefix="ledgerspec-topic-") as root:
            for trace_id, lines in simulate_topic_traces(
                config,
                root,
                seed=self.seed,
                steps=self.steps,
                traces=self.traces,
                max_crashes=self.max_crashes,
                modes=chosen,
            ):
                yield WorkloadRun(trace_id, lines, spec, 0)


@attrs.frozen
class AutorecoveryWorkload(SeededWorkload[AutorecoveryConfig]):
    """Seeded random runs of one closed ledger under autorecovery, checked against the autorecovery spec."""

    spec: ClassVar[str] = "autorecovery"
    mode_names: ClassVar[dict[str, str]] = {"client": "metadata"}  # a watcher of the metadata store

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[WorkloadRun]:
        config = self.config if mutant is None else mutant.configure_autorecovery(self.config)
        spec = AutorecoverySpec(**self.config.spec_constants())
        chosen = {m: self.mode_names.get(m, m) for m in modes if m in self.modes}
        with tempfile.TemporaryDirectory(prefix="ledgerspec-autorecovery-") as root:
            for trace_id, lines in simulate_autorecovery_traces(
                config, root, seed=self.seed, steps=self.steps, traces=self.traces, modes=tuple(chosen.values())
            ):
                yield WorkloadRun(trace_id, {m: lines[name] for m, name in chosen.items()}, spec, 0)


@attrs.frozen
class WorkloadRun:
    """One run of a workload: its lines in each mode, the spec to check them against, wrong reads seen."""

    trace_id: str
    lines: dict[str, list[dict[str, Any]]]
    spec: Spec[Any]
    read_problems: int


#: The cluster workloads, checked against the ledger spec; each allows every fault (ledger/simulation.py: FAULTS).
LEDGER_WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "striped",
        SimulationConfig(bookies=4, ensemble=3, write_quorum=2, ack_quorum=2, recoverers=2, max_entries=5),
        traces=12,
        steps=150,
        seed=1,
        doc="E=3 Qw=2 Qa=2 on four bookies, two recovering clients",
    ),
    # Without the writer's explicit LAC: with three of its requests per flush in flight to five bookies, some
    # crashed, the client-mode search of a run goes breadth first over up to 10,000 candidate states, ten times the
    # cost of the run without; the other workloads take the explicit LAC.
    Workload(
        "wide",
        SimulationConfig(
            bookies=5, ensemble=4, write_quorum=3, ack_quorum=2, recoverers=1, max_entries=5, explicit_lac=False
        ),
        traces=8,
        steps=150,
        seed=2,
        doc="E=4 Qw=3 Qa=2 on five bookies (the seeds' picture), no explicit LAC",
    ),
    Workload(
        "ack-one",
        SimulationConfig(bookies=3, ensemble=3, write_quorum=2, ack_quorum=1, recoverers=1, max_entries=3, max_loss=1),
        # 30 runs: a recovery read left undecided by two bookies down, after a fencing that heard from all three,
        # is rare (the mutant undecided_read_ends_ledger shows first in run 29)
        traces=30,
        steps=120,
        seed=3,
        doc="E=3 Qw=2 Qa=1 on three bookies: fencing must hear from every bookie, and a recovery may not decide",
    ),
    Workload(
        "pipelined",
        SimulationConfig(
            bookies=5,
            ensemble=3,
            write_quorum=2,
            ack_quorum=2,
            recoverers=1,
            max_entries=8,
            faults=("crash", "restart", "loss", "ensemble-change"),
        ),
        traces=8,
        steps=150,
        seed=4,
        doc="E=3 Qw=2 Qa=2 on five bookies, eight entries and no recovery: ensemble changes under a moving LAC",
    ),
)

#: One bookie's workloads, checked against the bookie spec.
BOOKIE_STORAGE = BookieWorkload(
    "bookie-storage",
    tuple(BOOKIE_WORKLOADS),
    doc="one bookie's scripted workloads (reference/bookie/workloads.py), with a power loss or a process crash "
    "and the restart after each step",
)

#: A topic and its cursor, checked against the cursor spec.
CURSOR_WORKLOAD = CursorWorkload(
    "cursor-restore",
    # The fallback to the znode after every failed creation (ZnodeFallback=always), so that its path is taken
    # often; the soak's other cursor workloads run Pulsar 4.0.7's condition.
    RunConfig(max_entries_per_ledger=2, metadata_max_entries_per_ledger=2, znode_fallback="always"),
    # 20 runs: a reset whose record keeps the old acks, restored before the next persist, shows first in run 19
    # (the mutant reset_keeps_acks, in client mode)
    traces=20,
    steps=120,
    seed=1,
    modes=MODES,
    doc="a topic and its durable cursor on a broker crashing at each persistence step, with failed BookKeeper "
    "calls, failed writes of the cursor's znode and lost cursor ledgers, falling back to the znode after every "
    "failed creation; checked in full observation and as its producer and consumer see it",
)

#: A topic partition with two producers and two subscriptions, checked against the managed-ledger spec.
TOPIC_WORKLOAD = TopicWorkload(
    "topic",
    # Ledgers do not age (Ticks=0): with ticks hidden, the client-mode search meets runs of hidden steps longer
    # than its default bound; rollover by age is the spec's and the soak's (topic-aging).
    TopicRunConfig(producers=2, messages=4, cursors=2, disconnects=2, creation_failures=1, takeovers=1),
    traces=40,
    steps=120,
    seed=1,
    doc="a topic with two producers (deduplication on) and two subscriptions on a broker that crashes, also "
    "between an add's write and its acknowledgement, loses the topic to another broker, fails to create a "
    "ledger, with dropped producer connections; checked in full observation and as its clients see it",
)

#: One closed ledger under autorecovery, checked against the autorecovery spec.
AUTORECOVERY_WORKLOAD = AutorecoveryWorkload(
    "autorecovery",
    AutorecoveryConfig(workers=2),
    traces=10,
    steps=60,
    seed=1,
    doc="a closed ledger (E=3 Qw=2) on four bookies that stop, come back and lose their disks, an auditor and "
    "two workers that crash",
)

#: The same ledger left open by its writer: workers that wait for its close, then recover it (OpenLedger=1).
AUTORECOVERY_OPEN_WORKLOAD = AutorecoveryWorkload(
    "autorecovery-open",
    AutorecoveryConfig(workers=2, open_ledger=True),
    traces=10,
    steps=80,
    seed=1,
    doc="the same ledger left open by its writer (E=3 Qw=2 Qa=2): workers that wait the grace period for its "
    "close, then recover it, fencing the writer, and replace a bookie its write-back cannot reach",
)

AnyWorkload = Workload | BookieWorkload | RandomBookieWorkload | CursorWorkload | TopicWorkload | AutorecoveryWorkload

#: Every workload, in the order they run.
WORKLOADS: tuple[AnyWorkload, ...] = (
    *LEDGER_WORKLOADS,
    BOOKIE_STORAGE,
    CURSOR_WORKLOAD,
    TOPIC_WORKLOAD,
    AUTORECOVERY_WORKLOAD,
    AUTORECOVERY_OPEN_WORKLOAD,
)


def workload_traces(
    workload: Workload, mutant: Mutant | None = None, modes: Sequence[str] = MODES
) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]], LedgerSimulation]]:
    """Each run of the workload: its trace id, its lines in each mode (one run, recorded once per mode), and
    the finished simulation. The same workload and mutant give the same runs."""
    config = workload.config if mutant is None else mutant.configure(workload.config)
    for i in range(workload.traces):
        trace_id = f"{workload.name}-{workload.seed}-{i}"
        sim = LedgerSimulation(config, seed=workload.seed * 1_000_003 + i)
        try:
            recorders = {mode: TraceRecorder(sim, mode, trace_id) for mode in modes}
            sim.run(workload.steps)
            yield trace_id, {mode: r.lines for mode, r in recorders.items()}, sim
        finally:
            sim.close()


class Checkers:
    """One checker per (spec, its constants, mode), kept across traces for their caches: the ``KEPT`` used last.

    Each checker's caches are bounded; the number of checkers is bounded too, since runs checked under the faults
    they spent give the same spec many sets of constants.
    """

    KEPT: ClassVar[int] = 4

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._checkers: dict[tuple[str, tuple[tuple[str, Any], ...], str], TraceChecker] = {}

    def check(self, spec: Spec[Any], mode: str, trace_id: str, lines: list[dict[str, Any]]) -> Verdict:
        key = (spec.name, tuple(sorted(spec.values.items())), mode)
        checker = self._checkers.pop(key, None)  # put back last: the dict runs from least to most recently used
        if checker is None:
            checker = TraceChecker(spec, mode, self.bounds, coverage=False)
            while len(self._checkers) >= self.KEPT:
                del self._checkers[next(iter(self._checkers))]
        self._checkers[key] = checker
        return checker.check(events_from_json(lines, file=f"{trace_id}.{mode}.ndjson"))
