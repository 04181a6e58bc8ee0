"""Refinement, event by event: runs of the reference managed ledger take only steps their specs allow.

:class:`CursorRefinement` checks a :class:`~.run.CursorRun` against the
cursor spec; :class:`TopicRefinement` a :class:`~.topic_run.TopicRun` against
the managed-ledger spec, the same way.

:class:`CursorRefinement` listens to the run's log. At each event it takes
the abstraction of the run (:class:`~.abstraction.CursorAbstraction`) and
checks, with :class:`~ledgerspec.reference.refinement.SpecSteps`, that the
event is the spec action it names, enabled where the run was, and that it
leads to exactly the abstract state the run is in now, with every invariant
and action property of the spec holding. The first abstract state (the run
just set up) must be the spec's initial state.

The spec is built with the run's sizes and with bounds (entries, crashes,
faults, losses) that no run reaches.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from ledgerspec.reference.managed_ledger.abstraction import CursorAbstraction
from ledgerspec.reference.managed_ledger.events import ManagedLedgerLog
from ledgerspec.reference.managed_ledger.run import UNBOUNDED, CursorRun, RunConfig
from ledgerspec.reference.managed_ledger.topic_abstraction import TopicAbstraction
from ledgerspec.reference.managed_ledger.topic_run import TopicRun
from ledgerspec.reference.refinement import RefinementError, SpecSteps
from ledgerspec.spec.cursor.cursor import CursorSpec, CursorState
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec, ManagedLedgerState
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["CursorRefinement", "RefinementError", "TopicRefinement", "spec_for", "spec_for_config"]

S = TypeVar("S")


def spec_for_config(config: RunConfig, **constants: object) -> CursorSpec:
    """The cursor spec of runs with this configuration (``constants`` override it, as ``--const`` does)."""
    return CursorSpec(**{**config.spec_constants(), **constants})


def spec_for(run: CursorRun) -> CursorSpec:
    return spec_for_config(run.config)


class _EventRefinement(Generic[S]):
    """Checks every event of a run's log against a spec, on the abstraction of the run at that event."""

    def __init__(self, spec: Spec[S], first: S, log: ManagedLedgerLog) -> None:
        self.events = 0
        self.steps: SpecSteps[S] = SpecSteps(spec, first)
        log.listeners.append(self.check)

    @property
    def state(self) -> S:
        return self.steps.state

    def abstract(self, expected: S) -> S:
        """The run's spec state now (``expected``: the state the spec reaches, for history variables)."""
        raise NotImplementedError

    def check(self, event: EngineEvent) -> None:
        self.events += 1
        where = f"event {self.events} ({event})"
        expected = self.steps.expected([event], where)
        self.steps.step([event], self.abstract(expected), where, expected)


class CursorRefinement(_EventRefinement[CursorState]):
    """Checks every event of one run against the cursor spec (module docstring)."""

    def __init__(self, run: CursorRun, spec: CursorSpec | None = None) -> None:
        self.run = run
        self.spec = spec or spec_for(run)
        self.abstraction = CursorAbstraction(run)
        super().__init__(self.spec, self.abstraction(frozenset()), run.log)

    def abstract(self, expected: CursorState) -> CursorState:
        return self.abstraction(expected.durable)


class TopicRefinement(_EventRefinement[ManagedLedgerState]):
    """Checks every event of one topic run against the managed-ledger spec."""

    def __init__(self, run: TopicRun, spec: ManagedLedgerSpec | None = None) -> None:
        self.run = run
        self.spec = spec or ManagedLedgerSpec(**run.config.spec_constants(), MaxCrashes=UNBOUNDED)
        self.abstraction = TopicAbstraction(run, self.spec)
        super().__init__(self.spec, self.abstraction(), run.log)

    def abstract(self, expected: ManagedLedgerState) -> ManagedLedgerState:
        return self.abstraction()
