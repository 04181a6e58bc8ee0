"""Seeded random runs of a topic and its cursor on a crashing broker, recorded as traces for the oracle.

:func:`random_steps` drives a :class:`~.run.CursorRun` by a seeded
``random.Random``: publishes, acknowledgements of random messages, flushes,
trims, now and then a reset, a close, a crash (also armed at a persistence step), a
failed BookKeeper call, a failed write of the cursor's znode (or both) or a
lost cursor ledger, and a restart after every
crash. The same seed gives the same run on every machine.

:class:`CursorTraceRecorder` turns each event the run logs into one line of
the trace format (docs/trace-format.md): ``type`` the cursor spec's action,
``params`` its parameters, ``observed`` the values the observation mode may
report (``spec/cursor/cursor_trace.py``) that changed since the previous line, read
through the abstraction function. In ``client`` mode the steps the mode
hides are left out and every line is the consumer's.

Each run also tells the cursor spec's bounds on what a check cannot see, at
what the run spent (:func:`spent_bounds`): the failed writes the harness
caused and the cursor ledgers it lost. A client sees neither, and a check
under the unbounded defaults must allow any number of them between two
events, each failed switch and each failed first record of a cursor ledger
taking a ledger id; a harness that injects the faults knows how many it
injected.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import attrs
from ledgerspec.reference.managed_ledger.abstraction import CursorAbstraction
from ledgerspec.reference.managed_ledger.cursor import CursorStatus
from ledgerspec.reference.managed_ledger.managed_ledger import faults_injected
from ledgerspec.reference.managed_ledger.refinement import spec_for
from ledgerspec.reference.managed_ledger.run import CursorRun, RunConfig
from ledgerspec.spec.cursor.cursor_trace import TRACE
from ledgerspec.spec.tracing import INIT, ObservedChanges
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = [
    "CRASH_POINTS",
    "CursorTraceRecorder",
    "SimulatedRun",
    "random_steps",
    "simulate_cursor_traces",
    "spent_bounds",
]

#: Where a crash can be armed: each persistence step of the cursor, and the rollover of the topic's ledger.
CRASH_POINTS = (
    "cursor-ledger-create",
    "cursor-ledger-switch",
    "cursor-ledger-delete",
    "cursor-ledger-append",
    "cursor-znode-close",
    "ledger-rollover",
)


class CursorTraceRecorder:
    """Records a run's events as trace lines in one observation mode (module docstring)."""

    def __init__(self, run: CursorRun, mode: str, trace_id: str) -> None:
        self.run = run
        self.mode = TRACE.mode(mode)
        self.trace_id = trace_id
        self.spec = spec_for(run)
        self.abstraction = CursorAbstraction(run)
        self.lines: list[dict[str, Any]] = []
        self._observed = ObservedChanges(TRACE, self.spec, self.mode.observes)
        self._record(INIT, (), self.mode.logged_by(INIT, ()))
        run.log.listeners.append(self.on_event)

    def on_event(self, event: EngineEvent) -> None:
        if self.mode.hides(event.action, event.args):
            return
        self._record(event.action, event.args, self.mode.logged_by(event.action, event.args))

    def _record(self, action: str, args: tuple[Any, ...], process: str) -> None:
        changed = self._observed.since_last(self.abstraction(frozenset()), action)  # durable: observed by no mode
        event = EngineEvent(action, args, process, process)
        self.lines.append(TRACE.event_line(self.trace_id, len(self.lines) + 1, process, event, changed))


def random_steps(run: CursorRun, rng: random.Random, steps: int, *, max_entries: int = 8) -> None:
    """``steps`` random steps of the run (module docstring); a crashed broker restarts at its next step."""
    published: list[tuple[int, int]] = []
    for _ in range(steps):
        cursor = run.cursor
        if not run.up:
            run.restart()
            continue
        if cursor is None or cursor.status not in (CursorStatus.NO_LEDGER, CursorStatus.OPEN):
            run.crash()  # a closed cursor: the broker stops, and comes back at the next step
            continue
        if run.config.rollover_by_time and rng.random() < 0.08:  # drawn only where ledgers age: other runs keep theirs
            run.age_ledger()
            continue
        choice = rng.random()
        ml = run.ml
        assert ml is not None
        live = [(p, i) for p in published if ml.holds(p) for i in range(run.config.batch_size)]
        if choice < 0.3 and len(published) < max_entries:
            position = run.publish()
            if position is not None:
                published.append(position)
        elif choice < 0.6 and live:
            run.ack(*rng.choice(live))
        elif choice < 0.78:
            run.flush()
        elif choice < 0.85:
            run.trim()
        elif choice < 0.865:
            if cursor.resetting is None:  # a close waits for the reset
                run.close_cursor()
        elif choice < 0.885:
            if cursor.resetting is None:
                run.reset(rng.choice([ml.first_position(), *(p for p in published if ml.holds(p))]))
        elif choice < 0.9:
            run.crash()
        elif choice < 0.95:
            run.crash_at = rng.choice(CRASH_POINTS)
        elif choice < 0.98:
            if run.faults.first_appends:  # a failed first record waits for the znode write it fails with
                continue
            kind = rng.random()
            if kind < 0.4:  # a BookKeeper call
                run.fail_next("appends" if cursor.status == CursorStatus.OPEN and rng.random() < 0.5 else "creates")
            elif kind < 0.75:  # the next BookKeeper call of the cursor, and the znode write standing in for it
                if cursor.status == CursorStatus.NO_LEDGER and not run.faults_pending and kind >= 0.65:
                    run.fail_next("first_appends")  # the new cursor ledger's first record (its id is spent)
                else:
                    run.fail_next("appends" if cursor.status == CursorStatus.OPEN else "creates")
                    run.fail_next("znode_writes")
            else:  # a znode write: a switch to a new cursor ledger, or a fallback
                run.fail_next("znode_writes")
        else:
            run.lose_cursor_ledger()


def spent_bounds(run: CursorRun) -> dict[str, int]:
    """The cursor spec's bounds on the faults no client sees, at what the run spent: its failed writes (to
    BookKeeper and to the znode) and its lost cursor ledgers."""
    return {"MaxFaults": run.failed_writes, "MaxLedgerLoss": run.losses}


@attrs.frozen
class SimulatedRun:
    """One random run: its trace id, its lines in each mode, and the bounds it spent (:func:`spent_bounds`)."""

    trace_id: str
    lines: dict[str, list[dict[str, Any]]]
    bounds: dict[str, int]


def simulate_cursor_traces(
    config: RunConfig, root: str, *, seed: int, steps: int, traces: int, modes: tuple[str, ...] = ("full",)
) -> Iterator[SimulatedRun]:
    """``traces`` random runs of ``steps`` steps; run ``i`` is seeded with ``(seed, i)``, so the same arguments
    give the same traces, byte for byte."""
    for i in range(traces):
        trace_id = f"cursor-{seed}-{i}"
        run = CursorRun(f"{root}/{trace_id}", config)
        try:
            recorders = {mode: CursorTraceRecorder(run, mode, trace_id) for mode in modes}
            with faults_injected():
                random_steps(run, random.Random(seed * 1_000_003 + i), steps)
            yield SimulatedRun(trace_id, {mode: r.lines for mode, r in recorders.items()}, spent_bounds(run))
        finally:
            run.close()
