"""Coverage: which actions of the spec, and which guards of its invariants, the checked traces exercised.

A trace that conforms says nothing about the parts of the spec it never
reached: a run that never closed a ledger never tested the invariants
about closed ledgers. Coverage counts, over the traces checked:

- ``steps``: per action, the steps that matched an event; ``hidden_steps``:
  per action, the steps the checker put between two events because the
  observation mode hides them;
- ``states``: the states those steps went through, initial states
  included. Every invariant is checked on every one of them, and every
  action property on every step;
- ``guards``: per invariant (or action property) and guard, the states (or
  the steps, by the state they start from) where the guard held. A guard is
  an antecedent of the property that the spec's trace mapping names
  (:class:`ledgerspec.spec.tracing.Guard`): where it is false, the property
  holds trivially, so the count says how often the property was really
  exercised. A property with no guard declared is exercised on every state.

What is counted is one behaviour of the spec per trace, the *witness*: the
shortest behaviour the checker found that matches the trace (in the full
mode it is the only one), up to the failing event when the trace does not
conform. Other candidate behaviours of a partial trace are not counted: they
are what the trace might have done, not what it did.

Counts add up: a run's coverage is the sum of its traces'.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import TraceMapping

__all__ = ["Coverage", "coverage_summary"]


@attrs.define
class Coverage:
    """Counts of actions taken and guards held on the witness behaviours of some traces (module docstring)."""

    traces: int = 0
    states: int = 0  # states of the witnesses, initial states included
    steps: Counter[str] = attrs.Factory(Counter)  # action -> steps matched to events
    hidden_steps: Counter[str] = attrs.Factory(Counter)  # action -> hidden steps between events
    guards: Counter[tuple[str, str]] = attrs.Factory(Counter)  # (property, guard) -> states where it held

    def add(self, other: Coverage) -> None:
        """Add another's counts to these."""
        self.traces += other.traces
        self.states += other.states
        self.steps.update(other.steps)
        self.hidden_steps.update(other.hidden_steps)
        self.guards.update(other.guards)

    def to_json(self) -> dict[str, Any]:
        """The counts as collected (what was never exercised is absent): the form that adds up across runs."""
        guards: dict[str, dict[str, int]] = {}
        for (prop, guard), n in sorted(self.guards.items()):
            guards.setdefault(prop, {})[guard] = n
        return {
            "traces": self.traces,
            "states": self.states,
            "steps": dict(sorted(self.steps.items())),
            "hidden_steps": dict(sorted(self.hidden_steps.items())),
            "guards": guards,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Coverage:
        return cls(
            traces=data["traces"],
            states=data["states"],
            steps=Counter(data["steps"]),
            hidden_steps=Counter(data["hidden_steps"]),
            guards=Counter({(p, g): n for p, held in data["guards"].items() for g, n in held.items()}),
        )


def coverage_summary(coverage: Coverage, spec: Spec[Any], mapping: TraceMapping) -> dict[str, Any]:
    """Every action and every invariant and action property of the spec, with its counts, zeros included.

    ``checked`` is how many states (for an invariant) or steps (for an action property) it was checked on;
    ``guards`` how many of those its guards held on.
    """
    steps = sum(coverage.steps.values())
    hidden = sum(coverage.hidden_steps.values())
    actions = {
        a.name: {"steps": coverage.steps.get(a.name, 0), "hidden_steps": coverage.hidden_steps.get(a.name, 0)}
        for a in spec.actions
    }
    properties: dict[str, dict[str, Any]] = {}
    for kind, props, checked in (
        ("invariant", spec.invariants, coverage.states),
        ("action property", spec.action_properties, steps + hidden),
    ):
        for p in props:
            properties[p.name] = {
                "kind": kind,
                "checked": checked,
                "guards": {g.name: coverage.guards.get((p.name, g.name), 0) for g in mapping.guards.get(p.name, ())},
            }
    return {
        "traces": coverage.traces,
        "states": coverage.states,
        "steps": steps,
        "hidden_steps": hidden,
        "actions": actions,
        "properties": properties,
    }
