"""Seeded random runs of autorecovery on the reference engine, recorded as traces for the oracle.

:func:`random_steps` drives an :class:`~.run.AutorecoveryRun` by a seeded
``random.Random``: bookies stop, come back and lose their disks, an auditor
is elected and checks the bookies and all ledgers, workers take their enabled steps and now and then
crash, and an open ledger's writer may close it. The same seed gives the same run on every machine.

:class:`AutorecoveryTraceRecorder` turns each event the run logs into one
line of the trace format (docs/trace-format.md): ``type`` the spec's action,
``params`` its parameters, ``observed`` every value the observation mode may
report (``spec/autorecovery/autorecovery_trace.py``), read through the abstraction
function: an observer that reads the metadata after each step, so that a
step that should have changed a value (an auditor that marks nothing) and
did not is seen as well as one that changed it wrongly. In ``metadata`` mode the steps the
mode hides are left out.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any

from ledgerspec.reference.autorecovery.abstraction import abstract_state
from ledgerspec.reference.autorecovery.run import AutorecoveryRun, RunConfig
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.autorecovery.autorecovery_trace import TRACE
from ledgerspec.spec.tracing import INIT, ObservedChanges
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["AutorecoveryTraceRecorder", "random_steps", "simulate_autorecovery_traces"]


class AutorecoveryTraceRecorder:
    """Records a run's events as trace lines in one observation mode (module docstring)."""

    def __init__(self, run: AutorecoveryRun, mode: str, trace_id: str) -> None:
        self.run = run
        self.mode = TRACE.mode(mode)
        self.trace_id = trace_id
        self.spec = AutorecoverySpec(**run.config.spec_constants())
        self.lines: list[dict[str, Any]] = []
        self._observed = ObservedChanges(TRACE, self.spec, self.mode.observes)
        self._seen = len(run.events)
        self._record(EngineEvent(INIT, (), self.mode.logged_by(INIT, ()), None))
        run.observers.append(self.on_step)

    def on_step(self, _what: str) -> None:
        for event in self.run.events[self._seen :]:
            if not self.mode.hides(event.action, event.args):
                self._record(event)
        self._seen = len(self.run.events)

    def _record(self, event: EngineEvent) -> None:
        process = self.mode.logged_by(event.action, event.args)
        observed = self._observed.every(abstract_state(self.run))
        self.lines.append(TRACE.event_line(self.trace_id, len(self.lines) + 1, process, event, observed))


# A pass that fails is rarer than one that copies what it can; a grace period lasts, giving the writer and the
# bookies time to act.
_WORKER_STEP_WEIGHTS = {"WorkerReleasesLockAfterFailure": 0.5, "WorkerEndsGracePeriod": 0.7}


def _one_of(step: Callable[[str], object], rng: random.Random, bookies: Sequence[str]) -> object:
    """The step on one of the bookies, drawn when the step is chosen."""
    return step(rng.choice(bookies))


def random_steps(run: AutorecoveryRun, rng: random.Random, steps: int) -> None:
    """``steps`` random steps of the run (module docstring): each a choice among the steps enabled now."""
    for _ in range(steps):
        choices: list[tuple[float, Callable[[], object]]] = []
        if stop := run.can_stop():
            choices.append((0.5, partial(_one_of, run.bookie_stops, rng, stop)))
        if back := run.can_come_back():
            choices.append((0.5, partial(_one_of, run.bookie_comes_back, rng, back)))
        if lose := run.can_lose_disk():
            choices.append((0.3, partial(_one_of, run.bookie_loses_disk, rng, lose)))
        if run.can_elect():
            choices.append((1.0, run.elect_auditor))
        if run.auditor_has_news():
            choices.append((2.0, run.auditor_checks))
        if run.auditor is not None:
            choices.append((0.5, run.auditor_checks_all_ledgers))
        if run.can_writer_close():
            choices.append((0.05, run.writer_closes_ledger))  # a writer may be gone: its close is not due
        crashable = run.can_crash()
        for w in range(1, run.config.workers + 1):
            for name in run.enabled_worker_steps(w):
                weight = _WORKER_STEP_WEIGHTS.get(name, 2.0)
                choices.append((weight, partial(run.worker_step, w, name)))
            if w in crashable:
                choices.append((0.2, partial(run.worker_crashes, w)))
        if not choices:
            return  # nothing can happen any more
        weights = [weight for weight, _ in choices]
        rng.choices([step for _, step in choices], weights)[0]()


def simulate_autorecovery_traces(
    config: RunConfig, root: str, *, seed: int, steps: int, traces: int, modes: tuple[str, ...] = ("full",)
) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """``traces`` random runs of at most ``steps`` steps: (trace id, lines per mode) for each; run ``i`` is
    seeded with ``(seed, i)``, so the same arguments give the same traces, byte for byte."""
    for i in range(traces):
        trace_id = f"autorecovery-{seed}-{i}"
        run = AutorecoveryRun(f"{root}/{trace_id}", config)
        try:
            recorders = {mode: AutorecoveryTraceRecorder(run, mode, trace_id) for mode in modes}
            random_steps(run, random.Random(seed * 1_000_003 + i), steps)
            yield trace_id, {mode: r.lines for mode, r in recorders.items()}
        finally:
            run.close()
