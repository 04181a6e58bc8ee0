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

Bookie mutants that only move the LastLogMark or delete journals
(``mark_before_flush``, ``mark_not_advanced_in_replay``,
``delete_journal_at_mark``) need checkpoints, which the ledger-level
cluster does not take: they are caught by ``ledgerspec crash-check bookie``
against the bookie spec, and are not part of this score.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import attrs
from ledgerspec.conformance.checker import Bounds, TraceChecker
from ledgerspec.conformance.events import events_from_json
from ledgerspec.conformance.verdict import CONFORMS, VIOLATES, Verdict
from ledgerspec.reference.bookie import MUTANTS as BOOKIE_MUTANTS
from ledgerspec.reference.ledger import MUTANTS as CLIENT_MUTANTS
from ledgerspec.reference.ledger import LedgerSimulation, SimulationConfig
from ledgerspec.reference.ledger.trace import TraceRecorder
from ledgerspec.spec.ledger import LedgerSpec

__all__ = [
    "MODES",
    "MUTANTS",
    "WORKLOADS",
    "Kill",
    "Mutant",
    "MutantResult",
    "MutationRun",
    "Workload",
    "run_mutants",
    "workload_traces",
]

MODES = ("full", "client")


@attrs.frozen
class Mutant:
    """A seeded bug of the engine: where it lives, and what it breaks."""

    name: str
    layer: str  # "client" or "bookie"
    description: str

    def configure(self, config: SimulationConfig) -> SimulationConfig:
        if self.layer == "client":
            return attrs.evolve(config, mutant=self.name)
        return attrs.evolve(config, bookie_mutant=self.name)


# Bookie mutants whose effect the ledger spec's traces can show: what a bookie acknowledged is gone after a crash.
_BOOKIE_MUTANTS_IN_SCORE = ("ack_before_fsync", "fence_not_journaled")

#: The mutants of the score, by name: every client mutant, and the bookie mutants a ledger trace can show.
MUTANTS: dict[str, Mutant] = {
    **{name: Mutant(name, "client", text) for name, text in CLIENT_MUTANTS.items()},
    **{name: Mutant(name, "bookie", BOOKIE_MUTANTS[name]) for name in _BOOKIE_MUTANTS_IN_SCORE},
}


@attrs.frozen
class Workload:
    """Seeded random runs of one cluster configuration: ``traces`` runs of ``steps`` steps each."""

    name: str
    config: SimulationConfig
    traces: int
    steps: int
    seed: int = 0
    doc: str = ""

    def scaled(self, traces: int) -> Workload:
        """The same runs, ``traces`` of them."""
        return attrs.evolve(self, traces=traces)


#: The fault workloads, in the order they run. Each allows every fault (ledger/simulation.py: FAULTS).
WORKLOADS: tuple[Workload, ...] = (
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
    workloads: tuple[Workload, ...]

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
            "workloads": [
                {"name": w.name, "doc": w.doc, "traces": w.traces, "steps": w.steps, "seed": w.seed}
                for w in self.workloads
            ],
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
    """One checker per (spec constants, mode), kept across traces for their caches."""

    def __init__(self, bounds: Bounds) -> None:
        self.bounds = bounds
        self._checkers: dict[tuple[tuple[tuple[str, int], ...], str], TraceChecker] = {}

    def check(self, config: SimulationConfig, mode: str, trace_id: str, lines: list[dict[str, Any]]) -> Verdict:
        constants = config.spec_constants()
        key = (tuple(sorted(constants.items())), mode)
        checker = self._checkers.get(key)
        if checker is None:
            checker = TraceChecker(LedgerSpec(**constants), mode, self.bounds, coverage=False)
            self._checkers[key] = checker
        return checker.check(events_from_json(lines, file=f"{trace_id}.{mode}.ndjson"))


def _run_one(
    mutant: Mutant | None,
    workloads: Iterable[Workload],
    checkers: _Checkers,
    modes: Sequence[str],
    progress: Callable[[str, int], None],
) -> MutantResult:
    """Run ``mutant`` (None: the unmutated engine) on the workloads. A mutant stops once every mode killed it;
    the unmutated engine runs every trace."""
    result = MutantResult(mutant)
    for workload in workloads:
        for trace_id, lines, sim in workload_traces(workload, mutant, modes):
            result.read_problems += len(sim.read_problems)
            for mode in modes:
                if mutant is not None and result.killed(mode):
                    continue
                verdict = checkers.check(sim.config, mode, trace_id, lines[mode])
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
            if mutant is not None and all(result.killed(m) for m in modes):
                return result
    return result


def run_mutants(
    mutants: Sequence[Mutant] | None = None,
    workloads: Sequence[Workload] = WORKLOADS,
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
