"""Mutation score of the oracle: does checking traces catch the engine's seeded bugs?

Each mutant is a real bug put into the reference engine on purpose: a
client mutant (``reference/ledger/client.py``, ``MUTANTS``) or a bookie
mutant (``reference/bookie/bookie.py``, ``MUTANTS``) running inside every
bookie of the cluster. Each runs under the same seeded fault workloads
(:data:`WORKLOADS`): random runs of a :class:`~ledgerspec.reference.ledger.simulation.LedgerSimulation`
with crashes (also between an add's journal write and its fsync), restarts,
lost and reordered messages, recoveries racing the writer and ensemble
changes. Every run is recorded once per observation mode of the ledger
spec's trace mapping (``full``: every step and variable; ``client``: what the
clients see) and checked by the oracle (:class:`~ledgerspec.conformance.checker.TraceChecker`).

A mutant is *killed* in a mode when some trace of it violates the spec
there; the first such trace is reported. The unmutated engine runs the
same workloads, every trace of them: each violation there is a *false
positive*. Runs are deterministic: the same workloads give the same traces
and verdicts on every machine.

Managed-ledger mutants (``reference/managed_ledger/managed_ledger.py``,
``MUTANTS``) run under a third: seeded random runs of a topic and its
durable cursor on a broker that crashes, also at each persistence step of the
cursor (:mod:`ledgerspec.reference.managed_ledger.simulation`), checked
against the cursor spec (``spec/cursor/cursor_trace.py``) in full observation; in
client observation the persistence steps are hidden and the search for them
reaches the checker's bounds, so those runs are checked in full mode only
(:attr:`CursorWorkload.modes`).

Autorecovery mutants (``reference/autorecovery/``, ``MUTANTS``: an auditor
that marks nothing, a worker that writes the metadata before its copy) run
under seeded random runs of one closed ledger whose bookies stop, come back
and lose their disks while an auditor and two workers repair it
(:mod:`ledgerspec.reference.autorecovery.trace`), checked against the
autorecovery spec (``spec/autorecovery/autorecovery_trace.py``); its partial observation,
in the score's ``client`` column, is a watcher of the metadata store (the
mapping's ``metadata`` mode).

Bookie mutants run under a second kind of workload as well, one bookie's
storage checked against the bookie spec (``spec/bookie/bookie_trace.py``): the
scripted crash-check workloads (``reference/bookie/workloads.py``), each as
written and with a power loss or a process crash after each of its steps,
recorded by :mod:`ledgerspec.reference.bookie.trace`. The mutants that only
misplace the LastLogMark or delete a journal file early
(``mark_before_flush``, ``mark_not_advanced_in_replay``,
``delete_journal_at_mark``) need checkpoints, which the ledger-level cluster
does not take: they run under that workload only. A mutant runs under every
workload of the specs it lists (:attr:`Mutant.specs`); the unmutated engine
runs under all of them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Generic, Self, TypeVar

import attrs
from ledgerspec.conformance.checker import Bounds, TraceChecker
from ledgerspec.conformance.events import events_from_json
from ledgerspec.conformance.verdict import CONFORMS, VIOLATES, Verdict
from ledgerspec.reference.autorecovery import MUTANTS as AUTORECOVERY_MUTANTS
from ledgerspec.reference.autorecovery import RunConfig as AutorecoveryConfig
from ledgerspec.reference.autorecovery.trace import simulate_autorecovery_traces
from ledgerspec.reference.bookie import MUTANTS as BOOKIE_MUTANTS
from ledgerspec.reference.bookie import BookieConfig
from ledgerspec.reference.bookie.trace import BookieRun, bookie_runs, record_run
from ledgerspec.reference.bookie.workloads import WORKLOAD_CONFIG, WORKLOAD_SPEC
from ledgerspec.reference.bookie.workloads import WORKLOADS as BOOKIE_WORKLOADS
from ledgerspec.reference.ledger import MUTANTS as CLIENT_MUTANTS
from ledgerspec.reference.ledger import LedgerSimulation, SimulationConfig
from ledgerspec.reference.ledger.trace import TraceRecorder
from ledgerspec.reference.managed_ledger import MUTANTS as MANAGED_LEDGER_MUTANTS
from ledgerspec.reference.managed_ledger import RunConfig
from ledgerspec.reference.managed_ledger.refinement import spec_for_config
from ledgerspec.reference.managed_ledger.simulation import simulate_cursor_traces
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.ledger.ledger import LedgerSpec

__all__ = [
    "AUTORECOVERY_WORKLOAD",
    "BOOKIE_STORAGE",
    "CURSOR_WORKLOAD",
    "LEDGER_WORKLOADS",
    "MODES",
    "MUTANTS",
    "WORKLOADS",
    "AutorecoveryWorkload",
    "BookieWorkload",
    "CursorWorkload",
    "Kill",
    "Mutant",
    "MutantResult",
    "MutationRun",
    "SeededWorkload",
    "Workload",
    "run_mutants",
    "workload_traces",
]

MODES = ("full", "client")


@attrs.frozen
class Mutant:
    """A seeded bug of the engine: where it lives, what it breaks, and the specs whose traces can show it."""

    name: str
    layer: str  # "client", "bookie", "managed-ledger" or "autorecovery"
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

    def configure_autorecovery(self, config: AutorecoveryConfig) -> AutorecoveryConfig:
        return attrs.evolve(config, mutant=self.name)


# Bookie mutants whose effect the ledger spec's traces can show too: what a bookie acknowledged is gone after a crash.
_BOOKIE_MUTANTS_SEEN_BY_LEDGER = ("ack_before_fsync", "fence_not_journaled")

#: The mutants of the score, by name: every client mutant and every bookie mutant.
MUTANTS: dict[str, Mutant] = {
    **{name: Mutant(name, "client", text) for name, text in CLIENT_MUTANTS.items()},
    **{
        name: Mutant(
            name, "bookie", text, ("ledger", "bookie") if name in _BOOKIE_MUTANTS_SEEN_BY_LEDGER else ("bookie",)
        )
        for name, text in BOOKIE_MUTANTS.items()
    },
    **{name: Mutant(name, "managed-ledger", text, ("cursor",)) for name, text in MANAGED_LEDGER_MUTANTS.items()},
    **{name: Mutant(name, "autorecovery", text, ("autorecovery",)) for name, text in AUTORECOVERY_MUTANTS.items()},
}


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
    spec: ClassVar[str]
    modes: ClassVar[tuple[str, ...]] = MODES
    mode_names: ClassVar[dict[str, str]] = {}  # the score's mode -> the trace mapping's, where they differ

    def scaled(self, traces: int) -> Self:
        """The same runs, ``traces`` of them."""
        return attrs.evolve(self, traces=traces)

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

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[_Recorded]:
        for trace_id, lines, sim in workload_traces(self, mutant, modes):
            yield _Recorded(trace_id, lines, LedgerSpec(**sim.config.spec_constants()), len(sim.read_problems))


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

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[_Recorded]:
        config = WORKLOAD_CONFIG if mutant is None else mutant.configure_bookie(WORKLOAD_CONFIG)
        for run in self.runs():
            yield _Recorded(run.trace_id, record_run(run, config=config, modes=modes).lines, WORKLOAD_SPEC, 0)


@attrs.frozen
class CursorWorkload(SeededWorkload[RunConfig]):
    """Seeded random runs of a topic and its cursor on a crashing broker, checked against the cursor spec."""

    spec: ClassVar[str] = "cursor"
    modes: ClassVar[tuple[str, ...]] = ("full",)  # client mode: the hidden persistence steps exceed the bounds

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[_Recorded]:
        config = self.config if mutant is None else mutant.configure_cursor(self.config)
        spec = spec_for_config(config)
        chosen = tuple(m for m in modes if m in self.modes)
        with tempfile.TemporaryDirectory(prefix="ledgerspec-broker-") as root:
            for trace_id, lines in simulate_cursor_traces(
                config, root, seed=self.seed, steps=self.steps, traces=self.traces, modes=chosen
            ):
                yield _Recorded(trace_id, lines, spec, 0)


@attrs.frozen
class AutorecoveryWorkload(SeededWorkload[AutorecoveryConfig]):
    """Seeded random runs of one closed ledger under autorecovery, checked against the autorecovery spec."""

    spec: ClassVar[str] = "autorecovery"
    mode_names: ClassVar[dict[str, str]] = {"client": "metadata"}  # a watcher of the metadata store

    def recorded(self, mutant: Mutant | None, modes: Sequence[str]) -> Iterator[_Recorded]:
        config = self.config if mutant is None else mutant.configure_autorecovery(self.config)
        spec = AutorecoverySpec(**self.config.spec_constants())
        chosen = {m: self.mode_names.get(m, m) for m in modes if m in self.modes}
        with tempfile.TemporaryDirectory(prefix="ledgerspec-autorecovery-") as root:
            for trace_id, lines in simulate_autorecovery_traces(
                config, root, seed=self.seed, steps=self.steps, traces=self.traces, modes=tuple(chosen.values())
            ):
                yield _Recorded(trace_id, {m: lines[name] for m, name in chosen.items()}, spec, 0)


@attrs.frozen
class _Recorded:
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
    Workload(
        "wide",
        SimulationConfig(bookies=5, ensemble=4, write_quorum=3, ack_quorum=2, recoverers=1, max_entries=5),
        traces=8,
        steps=150,
        seed=2,
        doc="E=4 Qw=3 Qa=2 on five bookies (the seeds' picture)",
    ),
    Workload(
        "ack-one",
        SimulationConfig(bookies=3, ensemble=3, write_quorum=2, ack_quorum=1, recoverers=1, max_entries=3, max_loss=1),
        traces=12,
        steps=120,
        seed=3,
        doc="E=3 Qw=2 Qa=1 on three bookies: fencing must hear from every bookie",
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
    RunConfig(max_entries_per_ledger=2, metadata_max_entries_per_ledger=2),
    traces=10,
    steps=120,
    seed=1,
    doc="a topic and its durable cursor on a broker crashing at each persistence step, with failed BookKeeper "
    "calls and lost cursor ledgers",
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

AnyWorkload = Workload | BookieWorkload | CursorWorkload | AutorecoveryWorkload

#: Every workload, in the order they run.
WORKLOADS: tuple[AnyWorkload, ...] = (*LEDGER_WORKLOADS, BOOKIE_STORAGE, CURSOR_WORKLOAD, AUTORECOVERY_WORKLOAD)


@attrs.frozen
class Kill:
    """The first trace that killed a mutant in one mode, and why."""

    workload: str
    trace: str
    event_index: int
    event: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class MutantResult:
    """What the oracle made of one mutant (or, with ``mutant`` None, of the unmutated engine)."""

    mutant: Mutant | None
    kills: dict[str, Kill | None] = attrs.Factory(lambda: dict.fromkeys(MODES))
    traces: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(MODES, 0))
    events: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(MODES, 0))
    violations: dict[str, list[Verdict]] = attrs.Factory(lambda: {m: [] for m in MODES})
    inconclusive: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(MODES, 0))
    read_problems: int = 0  # wrong data a reader got up to the LAC (the simulation's own check)

    @property
    def name(self) -> str:
        return self.mutant.name if self.mutant is not None else "none"

    def killed(self, mode: str) -> bool:
        return self.kills[mode] is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "mutant": self.name,
            "layer": self.mutant.layer if self.mutant is not None else None,
            "description": self.mutant.description if self.mutant is not None else "the unmutated engine",
            "read_problems": self.read_problems,
        }
        for mode in MODES:
            kill = self.kills[mode]
            data[mode] = {
                "killed": kill is not None,
                "by": kill.to_json() if kill is not None else None,
                "traces": self.traces[mode],
                "events": self.events[mode],
                "violations": len(self.violations[mode]),
                "inconclusive": self.inconclusive[mode],
            }
        return data


@attrs.define
class MutationRun:
    """The score: every mutant's result, and the unmutated engine's false positives."""

    mutants: list[MutantResult]
    baseline: MutantResult
    workloads: tuple[AnyWorkload, ...]

    def killed(self, mode: str) -> int:
        return sum(r.killed(mode) for r in self.mutants)

    def false_positives(self, mode: str) -> int:
        return len(self.baseline.violations[mode])

    @property
    def total(self) -> int:
        return len(self.mutants)

    def to_json(self) -> dict[str, Any]:
        return {
            "killed": self.killed("full"),
            "total": self.total,
            "false_positives": sum(self.false_positives(m) for m in MODES),
            "by_mode": {
                m: {
                    "killed": self.killed(m),
                    "kill_rate": self.killed(m) / self.total if self.total else 0.0,
                    "false_positives": self.false_positives(m),
                    "baseline_traces": self.baseline.traces[m],
                    "baseline_inconclusive": self.baseline.inconclusive[m],
                }
                for m in MODES
            },
            "mutants": [r.to_json() for r in self.mutants],
            "baseline": self.baseline.to_json(),
            "workloads": [w.to_json() for w in self.workloads],
        }


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


class _Checkers:
    """One checker per (spec, mode), kept across traces for their caches."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._checkers: dict[tuple[str, tuple[tuple[str, Any], ...], str], TraceChecker] = {}

    def check(self, spec: Spec[Any], mode: str, trace_id: str, lines: list[dict[str, Any]]) -> Verdict:
        key = (spec.name, tuple(sorted(spec.values.items())), mode)
        checker = self._checkers.get(key)
        if checker is None:
            checker = TraceChecker(spec, mode, self.bounds, coverage=False)
            self._checkers[key] = checker
        return checker.check(events_from_json(lines, file=f"{trace_id}.{mode}.ndjson"))


def _run_one(
    mutant: Mutant | None,
    workloads: Iterable[AnyWorkload],
    checkers: _Checkers,
    modes: Sequence[str],
    progress: Callable[[str, int], None],
) -> MutantResult:
    """Run ``mutant`` (None: the unmutated engine) on the workloads of its specs. A mutant stops once every mode
    killed it; the unmutated engine runs every trace."""
    result = MutantResult(mutant)
    for workload in workloads:
        if mutant is not None and workload.spec not in mutant.specs:
            continue
        for run in workload.recorded(mutant, modes):
            trace_id, lines = run.trace_id, run.lines
            result.read_problems += run.read_problems
            for mode in modes:
                if mode not in lines or (mutant is not None and result.killed(mode)):
                    continue
                verdict = checkers.check(run.spec, workload.mode_names.get(mode, mode), trace_id, lines[mode])
                result.traces[mode] += 1
                result.events[mode] += verdict.events
                if verdict.status == VIOLATES:
                    result.violations[mode].append(verdict)
                    failure = verdict.failure
                    assert failure is not None
                    if result.kills[mode] is None:
                        result.kills[mode] = Kill(
                            workload.name, trace_id, failure.event_index, failure.event_type, failure.reason
                        )
                elif verdict.status != CONFORMS:
                    result.inconclusive[mode] += 1
            progress(result.name, 1)
            if mutant is not None and all(result.killed(m) for m in modes if m in workload.modes):
                return result
    return result


def run_mutants(
    mutants: Sequence[Mutant] | None = None,
    workloads: Sequence[AnyWorkload] = WORKLOADS,
    *,
    modes: Sequence[str] = MODES,
    bounds: Bounds | None = None,
    progress: Callable[[str, int], None] = lambda _name, _traces: None,
) -> MutationRun:
    """The mutation score of the oracle over ``workloads`` (module docstring).

    ``progress(name, traces)`` is called after each run of the engine named (``none``: unmutated).
    """
    chosen = list(MUTANTS.values()) if mutants is None else list(mutants)
    checkers = _Checkers(bounds or Bounds())
    baseline = _run_one(None, workloads, checkers, modes, progress)
    results = [_run_one(m, workloads, checkers, modes, progress) for m in chosen]
    return MutationRun(results, baseline, tuple(workloads))
