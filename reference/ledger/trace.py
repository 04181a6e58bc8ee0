"""Simulated runs of the engine as traces in the oracle's format (docs/trace-format.md, version 1).

:class:`TraceRecorder` watches a :class:`~.simulation.LedgerSimulation` and
turns each event the engine logs into one line: ``type`` the spec action,
``params`` its parameters, ``observed`` the spec variables (and
projections) the observer can see that changed since its previous line,
read through the abstraction function; values are encoded by the spec's
codecs (``spec/codecs.py``, through the trace mapping ``spec/ledger/ledger_trace.py``).

Observation modes, as the trace mapping defines them:

``full``
    every event, logged by the process that took the step (``writer``,
    ``recoverer-<c>``, ``bookie-<b>``, ``network``), every variable;
``client``
    only what clients see: their own steps and the replies that reach them,
    each logged by the client; a bookie's step whose reply was lost, a
    crash, a restart and a lost request are left out; only the variables
    the mode observes.

``seq`` counts the trace's events (a Lamport clock over all processes), so
merging by ``seq`` gives back the order of the run.

:class:`ClientTraceRecorder` records the ``client`` mode of clients whose
bookies are not the in-process cluster's (real bookies over TCP,
:mod:`ledgerspec.reference.wire.network`): it reads only what the clients see
(:mod:`.client_view`), and stamps each line with ``time``, when the client
took the step on the host's monotonic clock, so that its log merges with
the log of bookies served on the same host
(:mod:`ledgerspec.conformance.log_merge`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from ledgerspec.reference.ledger.abstraction import abstract_state
from ledgerspec.reference.ledger.client_view import ClientView
from ledgerspec.reference.ledger.events import EventLog
from ledgerspec.reference.ledger.simulation import LedgerSimulation, SimulationConfig, Step
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.spec.tracing import ObservedChanges
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["ClientTraceRecorder", "TraceRecorder", "simulate_traces"]


class TraceRecorder:
    """Records a simulation's events as trace lines in one observation mode (module docstring)."""

    def __init__(self, sim: LedgerSimulation, mode: str, trace_id: str) -> None:
        self.sim = sim
        self.mode = TRACE.mode(mode)
        self.trace_id = trace_id
        self.spec = LedgerSpec(**sim.config.spec_constants())
        self.lines: list[dict[str, Any]] = []
        self._observed = ObservedChanges(TRACE, self.spec, self.mode.observes)
        for event in sim.events:  # the ledger's creation, logged before the recorder existed
            self._record(event)
        sim.observers.append(self.on_step)

    def on_step(self, step: Step, events: list[EngineEvent]) -> None:
        for event in events:
            self._record(event)

    def _record(self, event: EngineEvent) -> None:
        full = self.mode.name == "full"
        process = event.process if full else event.observer
        if process is None:
            return  # no client sees this step
        changed = self._observed.since_last(abstract_state(self.sim), event.action)
        self.lines.append(TRACE.event_line(self.trace_id, len(self.lines) + 1, process, event, changed))


class ClientTraceRecorder:
    """Records the events of ``events`` that a client sees as ``client``-mode trace lines; ``view`` gives the
    clients' view (:func:`~.client_view.client_view`), of which each line reports what changed.

    A client logs a step as it takes it, before the step is over (the close
    is logged before the metadata is written), so the events wait until
    :meth:`step_done`, which whoever drives the clients calls at the end of
    each step: the lines then report the view after the step, as
    :class:`TraceRecorder` does for the in-process cluster.
    """

    def __init__(self, events: EventLog, view: Callable[[], ClientView], spec: LedgerSpec, trace_id: str) -> None:
        self.view = view
        self.trace_id = trace_id
        self.lines: list[dict[str, Any]] = []
        self._observed = ObservedChanges(TRACE, spec, TRACE.mode("client").observes)
        self._waiting: list[EngineEvent] = []
        events.listeners.append(self._waiting.append)

    def step_done(self) -> None:
        """A step is over: record the events it logged that a client sees."""
        waiting = list(self._waiting)
        self._waiting.clear()  # in place: the event log's listener appends to this list
        for event in waiting:
            if event.observer is None:
                continue  # no client sees this step
            changed = self._observed.since_last(self.view(), event.action)
            line = TRACE.event_line(self.trace_id, len(self.lines) + 1, event.observer, event, changed)
            if event.time is not None:
                line["time"] = event.time
            self.lines.append(line)


def simulate_traces(
    config: SimulationConfig, *, seed: int, steps: int, traces: int, mode: str, root: str | None = None
) -> Iterator[tuple[str, list[dict[str, Any]], LedgerSimulation]]:
    """``traces`` random runs of ``steps`` steps each: (trace id, lines, the finished simulation) for each.

    Run ``i`` is seeded with ``(seed, i)``: the same arguments give the same traces, byte for byte.
    """
    for i in range(traces):
        trace_id = f"ledger-{seed}-{i}"
        sim = LedgerSimulation(config, None if root is None else f"{root}/{trace_id}", seed=seed * 1_000_003 + i)
        try:
            recorder = TraceRecorder(sim, mode, trace_id)
            sim.run(steps)
            yield trace_id, recorder.lines, sim
        finally:
            sim.close()
