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
there; the first such trace is reported, with the promise its verdict
names, if any (docs/conformance.md, "Which promise a divergence breaks").
Where that first trace only diverges, the mutant's runs go on until one
names a broken promise, so that a mutant that breaks a promise is reported
with it: :attr:`MutantResult.promise_kills`. The unmutated engine runs the
*baseline*: by default the ``ci`` soak of the same specs
(:mod:`~ledgerspec.tools.harness.soak`), at least 500 traces per spec and
mode over five seeds, where a false positive that shows once in a hundred
runs would show. Each violation there is a *false positive*. Runs are
deterministic: the same workloads give the same traces and verdicts on
every machine. The workloads themselves are in
:mod:`~ledgerspec.tools.harness.workloads`.

Managed-ledger mutants (``reference/managed_ledger/managed_ledger.py``,
``MUTANTS``, but for ``TOPIC_ONLY_MUTANTS``) run under a third: seeded random runs of a topic and its
durable cursor on a broker that crashes, also at each persistence step of the
cursor (:mod:`ledgerspec.reference.managed_ledger.simulation`), checked
against the cursor spec (``spec/cursor/cursor_trace.py``) in full observation
and as the producer and consumer see it (client observation, the persistence
steps hidden), under the faults the run injected. The runs are short (120
steps): on longer ones the client-mode search for the hidden persistence
steps may reach the checker's bounds.

The managed ledger's mutants of trimming, of what its cursors persist and
of its own state (``TOPIC_ONLY_MUTANTS``: its lastConfirmedEntry after a
reopen, its ledger list after a takeover), and the topic's own
(``reference/managed_ledger/topic_simulation.py``, ``MUTANTS``: a reopen
that forgets the deduplication state, a batch sent again answered as a
duplicate before it is written, a closing ledger that takes more adds, the
adds of a failed ledger creation answered) run under a fourth: seeded random runs
of a topic partition with two producers and two subscriptions on a broker
that crashes and loses the topic to another
(:mod:`ledgerspec.reference.managed_ledger.topic_simulation`), checked
against the managed-ledger spec (``spec/managed_ledger/managed_ledger_trace.py``)
in full observation and as the producers and consumers see it.

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
``delete_journal_at_mark``, ``mark_moves_backwards``) need checkpoints, which the ledger-level cluster
does not take: they run under that workload only. A mutant runs under every
workload of the specs it lists (:attr:`Mutant.specs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import attrs
from ledgerspec.conformance.checker import Bounds
from ledgerspec.conformance.verdict import VIOLATES, Verdict
from ledgerspec.reference.autorecovery import MUTANTS as AUTORECOVERY_MUTANTS
from ledgerspec.reference.bookie import MUTANTS as BOOKIE_MUTANTS
from ledgerspec.reference.ledger import MUTANTS as CLIENT_MUTANTS
from ledgerspec.reference.managed_ledger import MUTANTS as MANAGED_LEDGER_MUTANTS
from ledgerspec.reference.managed_ledger import TOPIC_ONLY_MUTANTS
from ledgerspec.reference.managed_ledger.topic_simulation import MUTANTS as TOPIC_MUTANTS
from ledgerspec.tools.harness.soak import PROFILES, SoakRun, run_soak, soak_workloads
from ledgerspec.tools.harness.workloads import MODES, WORKLOADS, AnyWorkload, Checkers, Mutant

__all__ = ["MUTANTS", "Kill", "MutantResult", "MutationRun", "run_mutants"]


# Bookie mutants whose effect the ledger spec's traces can show too: what a bookie acknowledged is gone after a crash.
_BOOKIE_MUTANTS_SEEN_BY_LEDGER = ("ack_before_fsync", "fence_not_journaled")


def _managed_ledger_mutant_specs(name: str) -> tuple[str, ...]:
    """The specs whose workloads run the managed-ledger mutant ``name``: the cursor spec's, and the topic's where
    the topic runs it."""
    if name in TOPIC_ONLY_MUTANTS:
        return ("managed_ledger",)
    return ("cursor", "managed_ledger") if name in TOPIC_MUTANTS else ("cursor",)


#: The mutants of the score, by name: every client, bookie, managed-ledger, topic and autorecovery mutant.
MUTANTS: dict[str, Mutant] = {
    **{name: Mutant(name, "client", text) for name, text in CLIENT_MUTANTS.items()},
    **{
        name: Mutant(
            name, "bookie", text, ("ledger", "bookie") if name in _BOOKIE_MUTANTS_SEEN_BY_LEDGER else ("bookie",)
        )
        for name, text in BOOKIE_MUTANTS.items()
    },
    **{
        name: Mutant(name, "managed-ledger", text, _managed_ledger_mutant_specs(name))
        for name, text in MANAGED_LEDGER_MUTANTS.items()
    },
    **{
        name: Mutant(name, "topic", text, ("managed_ledger",))
        for name, text in TOPIC_MUTANTS.items()
        if name not in MANAGED_LEDGER_MUTANTS
    },
    **{name: Mutant(name, "autorecovery", text, ("autorecovery",)) for name, text in AUTORECOVERY_MUTANTS.items()},
}


@attrs.frozen
class Kill:
    """The first trace that killed a mutant in one mode, and why."""

    workload: str
    trace: str
    event_index: int
    event: str
    reason: str
    finding: str = "difference"  # bug: the verdict names a broken promise
    promises: tuple[str, ...] = ()  # the promises it names, in the order of its divergences

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["promises"] = list(self.promises)
        return data

    @classmethod
    def of(cls, workload: str, trace: str, verdict: Verdict) -> Kill:
        failure = verdict.failure
        assert failure is not None and verdict.finding is not None
        promises = verdict.promise_names
        return cls(workload, trace, failure.event_index, failure.event_type, verdict.reason, verdict.finding, promises)


@attrs.define
class MutantResult:
    """What the oracle made of one mutant: in each mode, the first trace that killed it, and the traces checked."""

    mutant: Mutant
    kills: dict[str, Kill | None] = attrs.Factory(lambda: dict.fromkeys(MODES))
    # the first trace whose verdict names a broken promise, in each mode: the first kill, or a later trace
    promise_kills: dict[str, Kill | None] = attrs.Factory(lambda: dict.fromkeys(MODES))
    traces: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(MODES, 0))
    events: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(MODES, 0))
    inconclusive: dict[str, int] = attrs.Factory(lambda: dict.fromkeys(MODES, 0))
    read_problems: int = 0  # wrong data a reader got up to the LAC (the simulation's own check)
    runs: int = 0  # runs of the mutated engine made

    @property
    def name(self) -> str:
        return self.mutant.name

    def killed(self, mode: str) -> bool:
        return self.kills[mode] is not None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "mutant": self.name,
            "layer": self.mutant.layer,
            "description": self.mutant.description,
            "read_problems": self.read_problems,
        }
        for mode in MODES:
            kill, promise_kill = self.kills[mode], self.promise_kills[mode]
            data[mode] = {
                "killed": kill is not None,
                "by": kill.to_json() if kill is not None else None,
                "promises": list(promise_kill.promises) if promise_kill is not None else [],
                "promise_by": promise_kill.to_json() if promise_kill is not None else None,
                "traces": self.traces[mode],
                "events": self.events[mode],
                "inconclusive": self.inconclusive[mode],
            }
        return data


@attrs.define
class MutationRun:
    """The score: every mutant's result, and the unmutated engine's false positives over the baseline's runs."""

    mutants: list[MutantResult]
    baseline: SoakRun
    workloads: tuple[AnyWorkload, ...]
    baseline_workloads: tuple[AnyWorkload, ...]

    def killed(self, mode: str) -> int:
        return sum(r.killed(mode) for r in self.mutants)

    def false_positives(self, mode: str) -> int:
        return self.baseline.in_mode(mode).rejected

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
                    "baseline_traces": self.baseline.in_mode(m).traces,
                    "baseline_inconclusive": self.baseline.in_mode(m).inconclusive,
                }
                for m in MODES
            },
            "mutants": [r.to_json() for r in self.mutants],
            "baseline": self.baseline.to_json(),
            "workloads": [w.to_json() for w in self.workloads],
            "baseline_workloads": [w.to_json() for w in self.baseline_workloads],
        }


def _run_one(
    mutant: Mutant,
    workloads: Iterable[AnyWorkload],
    checkers: Checkers,
    modes: Sequence[str],
    progress: Callable[[str, int], None],
) -> MutantResult:
    """Run ``mutant`` on the workloads of its specs, until every mode killed it and, in full observation, a trace
    names the promise it breaks (where none does, every run is checked there)."""
    result = MutantResult(mutant)

    def done(mode: str) -> bool:
        return result.promise_kills[mode] is not None or (mode != "full" and result.killed(mode))

    for workload in workloads:
        if workload.spec not in mutant.specs:
            continue
        for run in workload.recorded(mutant, modes):
            trace_id, lines = run.trace_id, run.lines
            result.read_problems += run.read_problems
            for mode in modes:
                if mode not in lines or done(mode):
                    continue
                verdict = checkers.check(run.spec, workload.mode_names.get(mode, mode), trace_id, lines[mode])
                result.traces[mode] += 1
                result.events[mode] += verdict.events
                if verdict.status == VIOLATES:
                    kill = Kill.of(workload.name, trace_id, verdict)
                    if result.kills[mode] is None:
                        result.kills[mode] = kill
                    if kill.promises:
                        result.promise_kills[mode] = kill
                elif verdict.failure is not None or verdict.bound is not None or verdict.input_errors:
                    result.inconclusive[mode] += 1
            result.runs += 1
            progress(result.name, 1)
            if all(done(m) for m in modes if m in workload.modes):
                return result
    return result


_worker_checkers: Checkers | None = None  # a worker process's checkers, kept for every mutant it runs


def _run_in_worker(
    mutant: Mutant, workloads: Sequence[AnyWorkload], modes: Sequence[str], bounds: Bounds
) -> MutantResult:
    """:func:`_run_one` in a worker process of :func:`run_mutants`."""
    global _worker_checkers
    if _worker_checkers is None:
        _worker_checkers = Checkers(bounds)
    return _run_one(mutant, workloads, _worker_checkers, modes, lambda _name, _traces: None)


def run_mutants(
    mutants: Sequence[Mutant] | None = None,
    workloads: Sequence[AnyWorkload] = WORKLOADS,
    *,
    baseline: Sequence[AnyWorkload] | None = None,
    modes: Sequence[str] = MODES,
    bounds: Bounds | None = None,
    jobs: int = 1,
    progress: Callable[[str, int], None] = lambda _name, _traces: None,
) -> MutationRun:
    """The mutation score of the oracle over ``workloads`` (module docstring).

    ``baseline``: the unmutated engine's runs, where a false positive would show; by default the ``ci`` soak
    of the specs of ``workloads`` (:mod:`~ledgerspec.tools.harness.soak`). The unmutated runs and the mutants run
    in ``jobs`` processes; the result does not depend on ``jobs`` (each mutant's runs are seeded, and a mutant runs
    in one process). ``progress(name, traces)`` is called after each run of the engine named (``none``:
    unmutated), or with ``jobs`` above 1 as each mutant is done.
    """
    chosen = list(MUTANTS.values()) if mutants is None else list(mutants)
    if baseline is None:
        baseline = soak_workloads(PROFILES["ci"], dict.fromkeys(w.spec for w in workloads))
    unmutated = run_soak(baseline, modes=modes, bounds=bounds, jobs=jobs, progress=lambda _w, n: progress("none", n))
    bounds = bounds or Bounds()
    if jobs <= 1:
        checkers = Checkers(bounds)
        results = [_run_one(m, workloads, checkers, modes, progress) for m in chosen]
    else:
        results = []
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(_run_in_worker, m, tuple(workloads), tuple(modes), bounds) for m in chosen]
            for future in futures:  # in order: the same result for any jobs
                results.append(future.result())
                progress(results[-1].name, results[-1].runs)
    return MutationRun(results, unmutated, tuple(workloads), tuple(baseline))
