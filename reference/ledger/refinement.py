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

import attrs
from ledgerspec.reference.ledger.abstraction import abstract_state
from ledgerspec.reference.ledger.events import EngineEvent
from ledgerspec.reference.ledger.simulation import LedgerSimulation, Step
from ledgerspec.spec.ledger import LedgerSpec, LedgerState
from ledgerspec.spec.ledger_trace import TRACE

__all__ = ["RefinementCheck", "RefinementError"]


class RefinementError(AssertionError):
    """The engine took a step the spec does not allow, or broke an invariant."""


def _differences(expected: LedgerState, actual: LedgerState) -> list[str]:
    return [
        f"  {field.name}: the spec has {getattr(expected, field.name)!r}, the engine {getattr(actual, field.name)!r}"
        for field in attrs.fields(LedgerState)
        if getattr(expected, field.name) != getattr(actual, field.name)
    ]


class RefinementCheck:
    """Checks every step of one simulation against the ledger spec (module docstring)."""

    def __init__(self, sim: LedgerSimulation, spec: LedgerSpec | None = None) -> None:
        self.sim = sim
        self.spec = spec or LedgerSpec(**sim.config.spec_constants())
        self.steps = 0
        state = abstract_state(sim)
        inits = list(self.spec.init_states())
        if state not in inits:
            raise RefinementError(
                "the engine's first state is not the spec's initial state:\n" + "\n".join(_differences(inits[0], state))
            )
        self._check_invariants(state, "the initial state")
        self.state = state

    def attach(self) -> RefinementCheck:
        """Check every step the simulation takes from now on."""
        self.sim.observers.append(self.check)
        return self

    def check(self, step: Step, events: Sequence[EngineEvent]) -> None:
        """The step just taken, with the events it logged."""
        self.steps += 1
        after = abstract_state(self.sim)
        expected = self.state
        where = f"step {self.steps} ({step})"
        for event in events:
            action = self.spec.find_action(event.action)
            nxt = action.fn(self.spec, expected, *event.args)
            if nxt is None:
                explain = TRACE.explain.get(event.action)
                why = explain(self.spec, expected, *event.args) if explain is not None else None
                raise RefinementError(
                    f"{where}: the engine logged {event}, which the spec does not allow here: "
                    f"{why or 'the action is disabled'}"
                )
            for prop in self.spec.action_properties:
                broken = prop.fn(self.spec, expected, nxt)
                if broken is not None:
                    raise RefinementError(f"{where}: {event} breaks {prop.name}: {broken}")
            expected = nxt
        if after != expected:
            what = ", ".join(str(e) for e in events) if events else "no event (a step the spec leaves out)"
            raise RefinementError(
                f"{where}: after {what}, the engine's state is not the spec's:\n"
                + "\n".join(_differences(expected, after))
            )
        self._check_invariants(after, where)
        self.state = after

    def _check_invariants(self, state: LedgerState, where: str) -> None:
        for inv in self.spec.invariants:
            broken = inv.fn(self.spec, state)
            if broken is not None:
                raise RefinementError(f"{where}: invariant {inv.name} is broken: {broken}")
