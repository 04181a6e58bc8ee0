"""Refinement, step by step, for any spec: the engine's abstract state moves only as the spec allows.

:class:`SpecSteps` holds the spec state an engine has reached. Given the
events an engine step logged (each named by the spec action it takes, with
its parameters) and the abstraction of the engine's state after the step, it
checks that

- each event is the spec action it names, enabled in the state before it;
- every action property holds on each such pair of states;
- the abstraction is the state the events lead to (a step that logs no event
  must leave the abstract state as it was: a stutter);
- every invariant of the spec holds on it.

The first abstract state must be one of the spec's initial states. A failure
raises :class:`RefinementError` naming the step, the action and what differs,
variable by variable, or the guard that fails (the spec's trace mapping
explains disabled actions). The engines' own checks
(``reference/ledger/refinement.py``, ``reference/managed_ledger/refinement.py``)
say where their abstract state comes from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import Explanation
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["RefinementError", "SpecSteps", "differences"]

S = TypeVar("S")


class RefinementError(AssertionError):
    """The engine took a step the spec does not allow, or broke an invariant."""


def differences(expected: Any, actual: Any) -> list[str]:
    """Field by field, where two spec states differ."""
    return [
        f"  {field.name}: the spec has {getattr(expected, field.name)!r}, the engine {getattr(actual, field.name)!r}"
        for field in attrs.fields(type(expected))
        if getattr(expected, field.name) != getattr(actual, field.name)
    ]


class SpecSteps(Generic[S]):
    """The spec state an engine has reached, advanced by the events of each of its steps."""

    def __init__(self, spec: Spec[S], first: S, explain: Mapping[str, Explanation] | None = None) -> None:
        self.spec = spec
        self.explain = dict(explain or {})
        inits = list(spec.init_states())
        if first not in inits:
            raise RefinementError(
                "the engine's first state is not the spec's initial state:\n" + "\n".join(differences(inits[0], first))
            )
        self._check_invariants(first, "the initial state")
        self.state = first

    def expected(self, events: Sequence[EngineEvent], where: str) -> S:
        """The state the events lead to from the current one; checks each is an enabled action."""
        expected = self.state
        for event in events:
            action = self.spec.find_action(event.action)
            nxt = action.fn(self.spec, expected, *event.args)
            if nxt is None:
                explain = self.explain.get(event.action)
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
        return expected

    def step(self, events: Sequence[EngineEvent], after: S, where: str, expected: S | None = None) -> None:
        """The engine took a step that logged ``events`` and whose abstract state is ``after`` (``expected``:
        what :meth:`expected` gave for these events, when the caller has it already)."""
        if expected is None:
            expected = self.expected(events, where)
        if after != expected:
            what = ", ".join(str(e) for e in events) if events else "no event (a step the spec leaves out)"
            diff = "\n".join(differences(expected, after))
            raise RefinementError(f"{where}: after {what}, the engine's state is not the spec's:\n{diff}")
        self._check_invariants(after, where)
        self.state = after

    def _check_invariants(self, state: S, where: str) -> None:
        for inv in self.spec.invariants:
            broken = inv.fn(self.spec, state)
            if broken is not None:
                raise RefinementError(f"{where}: invariant {inv.name} is broken: {broken}")
