"""Refinement, step by step: the engine's abstract state moves only as the spec allows.

After every step of a :class:`~.simulation.LedgerSimulation`,
:class:`RefinementCheck` takes the abstraction of the engine's state
(:func:`~.abstraction.abstract_state`) and checks that

- it is what the spec's action named by the step's event gives from the
  previous abstract state, with the event's parameters (a step that logs
  no event must leave the abstract state as it was: a stutter);
- every invariant of the spec holds on it, and every action property on the
  pair.

The first abstract state must be the spec's initial state. A failure raises
:class:`RefinementError` naming the step, the action and what differs,
variable by variable, or the guard that fails (the spec's trace mapping
explains disabled actions).
"""

from __future__ import annotations

from collections.abc import Sequence

from ledgerspec.reference.ledger.abstraction import abstract_state
from ledgerspec.reference.ledger.simulation import LedgerSimulation, Step
from ledgerspec.reference.refinement import RefinementError, SpecSteps
from ledgerspec.spec.ledger.ledger import LedgerSpec, LedgerState
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["RefinementCheck", "RefinementError"]


class RefinementCheck:
    """Checks every step of one simulation against the ledger spec (module docstring)."""

    def __init__(self, sim: LedgerSimulation, spec: LedgerSpec | None = None) -> None:
        self.sim = sim
        self.spec = spec or LedgerSpec(**sim.config.spec_constants())
        self.steps = 0
        self.spec_steps: SpecSteps[LedgerState] = SpecSteps(self.spec, abstract_state(sim), TRACE.explain)

    @property
    def state(self) -> LedgerState:
        return self.spec_steps.state

    def attach(self) -> RefinementCheck:
        """Check every step the simulation takes from now on."""
        self.sim.observers.append(self.check)
        return self

    def check(self, step: Step, events: Sequence[EngineEvent]) -> None:
        """The step just taken, with the events it logged."""
        self.steps += 1
        self.spec_steps.step(events, abstract_state(self.sim), f"step {self.steps} ({step})")
