"""The soak: the unmutated engine over many seeded runs of every spec, checked in every observation mode.

The engine, unmutated, keeps every promise, so each of its traces must
conform. A spec narrower than the engine, or an engine that departs from the
real system where the spec follows it, shows as a rejected trace, and only at
some rate: one run in eighty took the path that showed the last one. A soak
runs enough seeded runs per spec and mode that such a rate shows: with ``n``
traces, a rate ``p`` leaves no rejected trace with probability ``(1 - p)^n``,
0.7 % for ``n`` = 500 and ``p`` = 1 %. A trace the checker's search bounds
leave undecided is checked again under larger ones (:data:`RETRY_BOUNDS`),
and counted apart when it then conforms (``decided_later``); one still
*inconclusive* counts against the soak: the oracle did not decide what a
user would have asked it.

Each spec has its soak workloads (:data:`SOAK_WORKLOADS`), all faults on (but for the ledger's ``pipelined``:
no recovery and no reordering, so that its writer keeps adding through ensemble changes):

- ledger: the mutation score's four cluster configurations;
- bookie: seeded random runs of one bookie with power losses, process
  crashes and restarts, and the scripted crash-check workloads once;
- cursor: runs with crashes at every persistence step, failed BookKeeper
  calls, failed cursor-znode writes and lost cursor ledgers; long runs
  checked in both modes (client mode hides every persistence step), long
  runs with batches and ledgers rolled over by age in full observation, and
  short runs in both;
- managed_ledger: the mutation score's topic runs (two producers with
  deduplication, two subscriptions, crashes, a takeover, a failed ledger
  creation, dropped connections) in both modes, and the same with ledgers
  that age and roll over by age, in full observation;
- autorecovery: the mutation score's configurations, the ledger closed and
  left open by its writer.

A :class:`SoakProfile` says how many traces each spec and mode gets at least,
and over which seeds; :func:`soak_workloads` spreads them over the spec's
workloads and the seeds. The ``ci`` profile is the mutation score's baseline
and runs with the tests; ``slow`` runs with ``pytest --run-slow``.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import traceback
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.checker import Bounds
from ledgerspec.conformance.manifest import manifest_json, write_manifest
from ledgerspec.conformance.verdict import CONFORMS, INCONCLUSIVE, VIOLATES
from ledgerspec.reference.bookie.workloads import WORKLOAD_CONFIG
from ledgerspec.reference.managed_ledger import RunConfig
from ledgerspec.spec.vocabulary import ndjson
from ledgerspec.tools.harness.workloads import (
    AUTORECOVERY_OPEN_WORKLOAD,
    AUTORECOVERY_WORKLOAD,
    BOOKIE_STORAGE,
    CURSOR_WORKLOAD,
    LEDGER_WORKLOADS,
    MODES,
    TOPIC_WORKLOAD,
    AnyWorkload,
    Checkers,
    CursorWorkload,
    RandomBookieWorkload,
    SeededWorkload,
    TopicWorkload,
    WorkloadRun,
)

__all__ = [
    "PROFILES",
    "RETRY_BOUNDS",
    "SOAK_WORKLOADS",
    "EngineFailure",
    "Flagged",
    "SoakProfile",
    "SoakRun",
    "Tally",
    "default_jobs",
    "run_soak",
    "seed_ranges",
    "soak_workloads",
    "write_soak",
]


@attrs.frozen
class SoakProfile:
    """At least ``traces`` traces per spec and mode, from runs seeded with each of ``seeds``."""

    name: str
    traces: int
    seeds: tuple[int, ...]
    doc: str = ""


PROFILES = {
    p.name: p
    for p in (
        SoakProfile("ci", 500, tuple(range(11, 16)), "a 1 % rate of rejected traces fails it with probability 99.3 %"),
        SoakProfile("slow", 10_000, tuple(range(11, 31)), "a rate of 1 in 2,000 fails it with probability 99.3 %"),
    )
}

#: The soak's workloads of each spec; the seeded ones are spread over a profile's seeds (module docstring).
SOAK_WORKLOADS: dict[str, tuple[AnyWorkload, ...]] = {
    "ledger": LEDGER_WORKLOADS,
    "bookie": (
        RandomBookieWorkload(
            "bookie-random",
            WORKLOAD_CONFIG,
            traces=1,
            steps=40,
            doc="one bookie: adds, fences, explicit LACs, group commit and checkpoints whole or in parts, journal "
            "deletions, power losses and process crashes, each crash followed by the restart",
        ),
        BOOKIE_STORAGE,
    ),
    "cursor": (
        CURSOR_WORKLOAD,
        CursorWorkload(
            "cursor-batches",
            RunConfig(batch_size=3, rollover_by_time=True),
            traces=1,
            steps=120,
            doc="the same with batches of three messages, acknowledged by batch index, and ledgers that also roll "
            "over by age (RolloverByTime)",
        ),
        CursorWorkload(
            "cursor-short",
            RunConfig(),
            traces=1,
            steps=30,
            modes=MODES,
            doc="short runs, also checked in client observation, where every persistence step is hidden",
        ),
    ),
    "managed_ledger": (
        TOPIC_WORKLOAD,
        TopicWorkload(
            "topic-aging",
            attrs.evolve(TOPIC_WORKLOAD.config, ticks=3),
            traces=1,
            steps=120,
            modes=("full",),
            doc="the same with ledgers that age three ticks, so that a ledger rolls over by age too; in full "
            "observation (with the clock hidden, the client-mode search meets runs of hidden steps longer than its "
            "default bound)",
        ),
    ),
    "autorecovery": (AUTORECOVERY_WORKLOAD, AUTORECOVERY_OPEN_WORKLOAD),
}


def soak_workloads(profile: SoakProfile, specs: Iterable[str] | None = None) -> tuple[AnyWorkload, ...]:
    """The runs of ``profile`` for ``specs`` (default every spec): each seeded workload once per seed, with as
    many runs as give every mode it is checked in its share of ``profile.traces``."""
    chosen = list(SOAK_WORKLOADS) if specs is None else list(specs)
    unknown = [s for s in chosen if s not in SOAK_WORKLOADS]
    if unknown:
        raise ValueError(f"no soak workloads for spec {', '.join(unknown)}; specs: {', '.join(SOAK_WORKLOADS)}")
    runs: list[AnyWorkload] = []
    for spec in chosen:
        seeded = [w for w in SOAK_WORKLOADS[spec] if isinstance(w, SeededWorkload)]
        for workload in SOAK_WORKLOADS[spec]:
            if not isinstance(workload, SeededWorkload):
                runs.append(workload)  # scripted: the same runs whatever the seed
                continue
            share = max(math.ceil(profile.traces / sum(m in w.modes for w in seeded)) for m in workload.modes)
            per_seed = math.ceil(share / len(profile.seeds))
            runs += [workload.seeded(seed).scaled(per_seed) for seed in profile.seeds]
    return tuple(runs)


@attrs.frozen
class Flagged:
    """A trace of the unmutated engine the oracle did not accept: rejected, or left undecided."""

    workload: str
    seed: int | None
    trace: str
    mode: str  # the score's mode
    status: str  # "violates" or "inconclusive"
    reason: str
    spec: str
    check_mode: str  # the trace mapping's name of the mode
    constants: dict[str, Any] = attrs.field(repr=False, eq=False)  # the spec's constants the trace was checked with
    lines: tuple[dict[str, Any], ...] = attrs.field(repr=False, eq=False)

    def path_under(self, out: Path) -> Path:
        """Where :func:`write_soak` writes this trace under ``out``."""
        return out / self.workload / self.mode / f"{self.trace}.ndjson"

    def check_command(self, path: str) -> str:
        """The command that checks this trace again, once written to ``path``."""
        consts = " ".join(f"--const {k}={v}" for k, v in self.constants.items() if k != "Bug")
        return f"ledgerspec check {path} --spec {self.spec} --mode {self.check_mode} {consts}".rstrip()

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in attrs.asdict(self).items() if k != "lines"}


@attrs.frozen
class EngineFailure:
    """A run of the unmutated engine that raised: the engine broke before it made a trace to judge. The
    workload's runs after it are not made (``skipped``); the same workload, seed and run index repeat it."""

    workload: str
    spec: str
    seed: int | None
    run: int  # the index of the run that raised (run ``i`` is seeded with ``(seed, i)``)
    skipped: int  # runs of the workload after it, not made
    error: str  # the exception, one line
    details: str = attrs.field(repr=False, eq=False)  # its traceback

    def path_under(self, out: Path) -> Path:
        """Where :func:`write_soak` writes the traceback under ``out``."""
        seed = "" if self.seed is None else f"-{self.seed}"
        return out / self.workload / "errors" / f"run{seed}-{self.run}.txt"

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class Tally:
    """What the oracle made of one spec's traces in one mode."""

    spec: str
    mode: str  # the score's mode
    check_mode: str = ""  # the trace mapping's name of it, where that differs
    traces: int = 0
    events: int = 0
    workloads: set[str] = attrs.Factory(set)
    seeds: set[int] = attrs.Factory(set)
    flagged: list[Flagged] = attrs.Factory(list)
    decided_later: int = 0  # traces the checker's bounds left undecided that conformed under RETRY_BOUNDS

    @property
    def rejected(self) -> int:
        return sum(f.status == VIOLATES for f in self.flagged)

    @property
    def inconclusive(self) -> int:
        return sum(f.status != VIOLATES for f in self.flagged)

    def merge(self, other: Tally) -> None:
        self.check_mode = self.check_mode or other.check_mode
        self.traces += other.traces
        self.events += other.events
        self.workloads |= other.workloads
        self.seeds |= other.seeds
        self.flagged += other.flagged
        self.decided_later += other.decided_later

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "mode": self.mode,
            "check_mode": self.check_mode or self.mode,
            "traces": self.traces,
            "events": self.events,
            "rejected": self.rejected,
            "inconclusive": self.inconclusive,
            "decided_later": self.decided_later,
            "workloads": sorted(self.workloads),
            "seeds": sorted(self.seeds),
            "flagged": [f.to_json() for f in self.flagged],
        }


@attrs.define
class SoakRun:
    """Every spec's tally in every mode it was checked in, keyed by (spec, mode)."""

    tallies: dict[tuple[str, str], Tally] = attrs.Factory(dict)
    read_problems: int = 0  # wrong data a ledger reader got up to the LAC (the simulation's own check)
    failures: list[EngineFailure] = attrs.Factory(list)  # runs in which the engine raised

    def tally(self, spec: str, mode: str) -> Tally:
        return self.tallies.setdefault((spec, mode), Tally(spec, mode))

    def merge(self, other: SoakRun) -> None:
        for (spec, mode), tally in other.tallies.items():
            self.tally(spec, mode).merge(tally)
        self.read_problems += other.read_problems
        self.failures += other.failures

    def in_mode(self, mode: str) -> Tally:
        """Every spec's traces in ``mode``, together."""
        total = Tally("every spec", mode)
        for (_, m), tally in self.tallies.items():
            if m == mode:
                total.merge(tally)
        return total

    @property
    def flagged(self) -> list[Flagged]:
        return [f for t in self.tallies.values() for f in t.flagged]

    @property
    def passed(self) -> bool:
        """Some trace was checked, every one conformed, and no run of the engine raised."""
        return bool(self.tallies) and not self.flagged and self.read_problems == 0 and not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "read_problems": self.read_problems,
            "engine_failures": [f.to_json() for f in self.failures],
            "tallies": [self.tallies[key].to_json() for key in sorted(self.tallies)],
        }


#: The bounds a trace left undecided at the checker's is checked again under: a soak asks whether the engine's
#: traces are accepted, and a search bound is no answer to that. Such a trace is counted apart
#: (:attr:`Tally.decided_later`), so that the rate at which the default bounds leave traces undecided shows.
RETRY_BOUNDS = Bounds(max_hidden_steps=12, max_candidates=200_000, max_examined=2_000_000, max_reduced_closure=200_000)


def _run_unmutated(workload: AnyWorkload, modes: Sequence[str], bounds: Bounds) -> SoakRun:
    """Every run of one workload by the unmutated engine, checked in each of ``modes`` the workload is
    checked in."""
    checkers = Checkers(bounds), Checkers(RETRY_BOUNDS)
    run = SoakRun()
    seed = _seed_of(workload)
    runs = iter(workload.recorded(None, modes))
    for made in itertools.count():
        try:
            recorded = next(runs, None)
        except Exception as exc:  # the engine broke: record it, and go on with the other workloads
            run.failures.append(
                EngineFailure(
                    workload.name,
                    workload.spec,
                    seed,
                    made,
                    workload.run_count() - made - 1,
                    f"{type(exc).__name__}: {exc}",
                    traceback.format_exc(),
                )
            )
            break
        if recorded is None:
            break
        _check_run(run, workload, recorded, modes, checkers)
    return run


def _check_run(
    run: SoakRun,
    workload: AnyWorkload,
    recorded: WorkloadRun,
    modes: Sequence[str],
    checkers: tuple[Checkers, Checkers],
) -> None:
    """Check one run of ``workload`` in each of ``modes`` it is checked in, and count it in ``run``."""
    seed = _seed_of(workload)
    run.read_problems += recorded.read_problems
    for mode in modes:
        if mode not in recorded.lines or mode not in workload.modes:
            continue
        lines = recorded.lines[mode]
        check_mode = workload.mode_names.get(mode, mode)
        verdict = checkers[0].check(recorded.spec, check_mode, recorded.trace_id, lines)
        tally = run.tally(workload.spec, mode)
        if verdict.status == INCONCLUSIVE and verdict.bound is not None:  # a search bound, not bad input
            verdict = checkers[1].check(recorded.spec, check_mode, recorded.trace_id, lines)
            tally.decided_later += verdict.status == CONFORMS
        tally.check_mode = check_mode
        tally.traces += 1
        tally.events += verdict.events
        tally.workloads.add(workload.name)
        if seed is not None:
            tally.seeds.add(seed)
        if verdict.status != CONFORMS:
            tally.flagged.append(
                Flagged(
                    workload.name,
                    seed,
                    recorded.trace_id,
                    mode,
                    verdict.status,
                    verdict.reason,
                    recorded.spec.name,
                    check_mode,
                    dict(recorded.spec.values),
                    tuple(lines),
                )
            )


def _seed_of(workload: AnyWorkload) -> int | None:
    return workload.seed if isinstance(workload, SeededWorkload) else None


def run_soak(
    workloads: Sequence[AnyWorkload],
    *,
    modes: Sequence[str] = MODES,
    bounds: Bounds | None = None,
    jobs: int = 1,
    progress: Callable[[str, int], None] = lambda _name, _traces: None,
) -> SoakRun:
    """The unmutated engine over ``workloads``, in ``jobs`` processes; the result does not depend on ``jobs``.
    ``progress(workload, traces)`` is called as each workload's runs are done."""
    bounds = bounds or Bounds()
    total = SoakRun()
    if jobs <= 1:
        for workload in workloads:
            total.merge(_run_unmutated(workload, modes, bounds))
            progress(workload.name, workload.run_count())
        return total
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(_run_unmutated, w, modes, bounds) for w in workloads]
        for workload, future in zip(workloads, futures, strict=True):  # in order: the same result for any jobs
            total.merge(future.result())
            progress(workload.name, workload.run_count())
    return total


def default_jobs() -> int:
    """One process per core this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def seed_ranges(seeds: Sequence[int]) -> str:
    """Sorted seeds as text: ``11-15`` for a run of three or more, else listed."""
    if not seeds:
        return "-"
    if len(seeds) > 2 and list(seeds) == list(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def write_soak(out: Path, run: SoakRun, summary: dict[str, Any]) -> None:
    """``summary`` as ``out/summary.json``, every flagged trace as NDJSON (:meth:`Flagged.path_under`) with a
    ``manifest.json`` beside it, and the traceback of every run in which the engine raised
    (:meth:`EngineFailure.path_under`)."""
    by_directory: dict[Path, list[Flagged]] = {}
    for f in run.flagged:
        path = f.path_under(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(ndjson(f.lines))
        by_directory.setdefault(path.parent, []).append(f)
    for directory, flagged in by_directory.items():  # what each was checked under, for ``ledgerspec check DIR``
        first = flagged[0]
        write_manifest(
            directory,
            manifest_json(
                spec=first.spec,
                mode=first.check_mode,
                constants={},
                files=[f.path_under(out).name for f in flagged],
                traces=[{"trace": f.trace, "constants": f.constants, "status": f.status} for f in flagged],
                workload=first.workload,
            ),
        )
    for failure in run.failures:
        path = failure.path_under(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(failure.details)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
