"""Seeded random runs of a topic, its producers and subscriptions on a crashing broker, recorded as traces.

:func:`random_steps` drives a :class:`~.topic_run.TopicRun` by a seeded
``random.Random``: at each step one of the steps the run can take now, as
the producers, the broker, BookKeeper, the clock and the consumers take
them: sends, sends again after a crash or a dropped connection, the
broker's receipt of a batch, completed adds (now and then with a crash
armed before the add is written or after), rollovers, failed ledger
creations, ticks, crashes and restarts, acknowledgements and their
persists, the skip and the trim of consumed ledgers. The run's bounds (``TopicRunConfig``, and
``max_crashes``) are the spec's; the driver keeps within them. The same seed
gives the same run on every machine.

:class:`TopicTraceRecorder` turns each event the run logs into one line of
the trace format (docs/trace-format.md): ``type`` the managed-ledger spec's
action, ``params`` its parameters, ``observed`` every variable, read through
the abstraction function (:class:`~.topic_abstraction.TopicAbstraction`) at
each event (``spec/managed_ledger/managed_ledger_trace.py``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import attrs
from ledgerspec.reference.managed_ledger.managed_ledger import MUTANTS as ML_MUTANTS
from ledgerspec.reference.managed_ledger.managed_ledger import faults_injected
from ledgerspec.reference.managed_ledger.topic import MUTANTS as TOPIC_OWN_MUTANTS
from ledgerspec.reference.managed_ledger.topic_abstraction import TopicAbstraction
from ledgerspec.reference.managed_ledger.topic_run import TopicRun, TopicRunConfig
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec, ManagedLedgerState
from ledgerspec.spec.managed_ledger.managed_ledger_trace import TRACE
from ledgerspec.spec.tracing import INIT, ObservedChanges
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = [
    "MUTANTS",
    "StateAfterEvent",
    "TopicTraceRecorder",
    "random_steps",
    "simulate_topic_traces",
    "spec_for",
    "with_mutant",
]

#: The seeded bugs a topic run takes: the managed ledger's that touch its trimming, what its cursors persist, its
#: lastConfirmedEntry after a reopen or its ledger list after a takeover, and the topic's own.
MUTANTS = {
    "trim_deletes_needed_ledger": ML_MUTANTS["trim_deletes_needed_ledger"],
    "skip_unconsumed_ledger": ML_MUTANTS["skip_unconsumed_ledger"],
    "persists_read_position": ML_MUTANTS["persists_read_position"],
    "reopen_confirms_new_ledger": ML_MUTANTS["reopen_confirms_new_ledger"],
    "blind_ledger_list_write": ML_MUTANTS["blind_ledger_list_write"],
    **TOPIC_OWN_MUTANTS,
}


def with_mutant(config: TopicRunConfig, mutant: str | None) -> TopicRunConfig:
    """``config`` with the seeded bug ``mutant`` (of :data:`MUTANTS`), or none."""
    if mutant is None:
        return config
    if mutant not in MUTANTS:
        raise ValueError(f"unknown topic mutant {mutant!r}; mutants: {', '.join(MUTANTS)}")
    if mutant in TOPIC_OWN_MUTANTS:
        return attrs.evolve(config, topic_mutant=mutant)
    return attrs.evolve(config, mutant=mutant)


def spec_for(config: TopicRunConfig, max_crashes: int) -> ManagedLedgerSpec:
    """The managed-ledger spec of runs of ``config`` that crash at most ``max_crashes`` times."""
    return ManagedLedgerSpec(**config.spec_constants(), MaxCrashes=max_crashes)


class StateAfterEvent:
    """The spec state of a run after each of its events, read through the abstraction once however many
    recorders ask (each mode's recorder asks after the same event)."""

    def __init__(self, abstraction: TopicAbstraction) -> None:
        self.abstraction = abstraction
        self._event: EngineEvent | None = None
        self._state: ManagedLedgerState | None = None

    def __call__(self, event: EngineEvent) -> ManagedLedgerState:
        if event is not self._event or self._state is None:
            self._event, self._state = event, self.abstraction()
        return self._state


class TopicTraceRecorder:
    """Records a run's events as trace lines in one observation mode (module docstring)."""

    def __init__(
        self,
        run: TopicRun,
        spec: ManagedLedgerSpec,
        mode: str,
        trace_id: str,
        states: StateAfterEvent | None = None,
    ) -> None:
        self.run = run
        self.mode = TRACE.mode(mode)
        self.trace_id = trace_id
        self.states = states or StateAfterEvent(TopicAbstraction(run, spec))
        self.lines: list[dict[str, Any]] = []
        self._observed = ObservedChanges(TRACE, spec, self.mode.observes)
        self.on_event(EngineEvent(INIT, (), self.mode.logged_by(INIT, ()), None))
        run.log.listeners.append(self.on_event)

    def on_event(self, event: EngineEvent) -> None:
        if self.mode.hides(event.action, event.args):
            return
        process = self.mode.logged_by(event.action, event.args)
        observed = self._observed.every(self.states(event))
        self.lines.append(TRACE.event_line(self.trace_id, len(self.lines) + 1, process, event, observed, self.mode))


def _complete_add(run: TopicRun, crash_at: str | None) -> None:
    run.crash_at = crash_at
    run.complete_add()


def random_steps(run: TopicRun, rng: random.Random, steps: int, *, max_age: int, max_crashes: int) -> None:
    """``steps`` random steps of the run (module docstring), each a choice among the steps the run can take now;
    ledgers age at most ``max_age`` ticks, and the broker crashes at most ``max_crashes`` times."""
    config = run.config
    for _ in range(steps):
        if not run.up:
            if run.old_broker is not None and rng.random() < 0.3:
                run.old_broker_rolls_over()  # before the new owner opens the managed ledger: its write succeeds
            else:
                run.restart()
            continue
        topic, ml = run.topic, run.ml
        assert topic is not None and ml is not None
        can_crash = run.crashes < max_crashes
        choices: list[tuple[float, Callable[[], object]]] = []
        for p, producer in enumerate(run.producers, 1):
            if run.awaits_resend(p):
                choices.append((1.0, partial(run.resend, p)))
            elif producer.sent < config.messages:
                choices.append((1.0, partial(run.send, p)))
            if producer.net:
                choices.append((2.0, partial(run.receive, p)))
            unanswered = producer.acked + 1 < producer.sent
            if run.disconnects < config.disconnects and not producer.reconnecting and unanswered:
                choices.append((0.1, partial(run.drop_connection, p)))
        if topic.waiting:
            choices.append((2.0, partial(_complete_add, run, None)))
            if can_crash:
                choices.append((0.1, partial(_complete_add, run, rng.choice(("add-write", "add-ack")))))
        if topic.can_roll_over():
            choices.append((1.0, run.roll_over))
            if run.create_failures < config.creation_failures:
                choices.append((0.2, run.fail_creation))
        if ml.current is not None and run.now - ml.created_ms < max_age:
            choices.append((0.3, run.tick))
        if can_crash:
            choices.append((0.05, run.crash))
        if run.takeovers < config.takeovers and run.old_broker is None:
            choices.append((0.05, run.take_over))
        if run.old_broker is not None:
            choices.append((0.3, run.old_broker_rolls_over))
        for c in range(1, config.cursors + 1):
            choices.append((1.0, partial(run.consume, c)))
            if run.subscription(c).dirty:
                choices.append((1.0, partial(run.persist, c)))
        choices.append((0.3, run.skip_consumed))
        choices.append((0.3, run.trim))
        rng.choices([step for _, step in choices], [weight for weight, _ in choices])[0]()


def simulate_topic_traces(
    config: TopicRunConfig,
    root: str,
    *,
    seed: int,
    steps: int,
    traces: int,
    max_crashes: int = 2,
    modes: tuple[str, ...] = ("full",),
) -> Iterator[tuple[str, dict[str, list[dict[str, Any]]]]]:
    """``traces`` random runs of ``steps`` steps: (trace id, lines per mode) for each; run ``i`` is seeded with
    ``(seed, i)``, so the same arguments give the same traces, byte for byte. Check them under
    :func:`spec_for` of the same ``config`` and ``max_crashes``."""
    spec = spec_for(config, max_crashes)
    for i in range(traces):
        trace_id = f"topic-{seed}-{i}"
        run = TopicRun(f"{root}/{trace_id}", config)
        try:
            states = StateAfterEvent(TopicAbstraction(run, spec))
            recorders = {mode: TopicTraceRecorder(run, spec, mode, trace_id, states) for mode in modes}
            with faults_injected():
                rng = random.Random(seed * 1_000_003 + i)
                random_steps(run, rng, steps, max_age=spec.max_age, max_crashes=max_crashes)
            yield trace_id, {mode: r.lines for mode, r in recorders.items()}
        finally:
            run.close()
