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

Counts add up: a run's coverage is the sum of its traces', and a
distributed run's the sum of its checkers'.

Cost: a checker collects coverage with a :class:`Tally`. The full-mode
replay already keeps the steps it took, each a cached transition that got a
serial number when it was computed; per trace the tally notes that list and
the initial state, and counts the numbers a batch of traces at a time, in
one pass in C. Which action a number stands for, and which guards hold in
the states it joins, is worked out when the counts are folded into a
:class:`Coverage`: once per distinct step, not once per event.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, count
from typing import Any

import attrs
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import TraceMapping

__all__ = ["Coverage", "Tally", "coverage_summary"]


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

    def copy(self) -> Coverage:
        return Coverage(self.traces, self.states, self.steps.copy(), self.hidden_steps.copy(), self.guards.copy())

    def since(self, earlier: Coverage) -> Coverage:
        """The counts added since ``earlier``, a copy of these counts taken before."""
        return Coverage(
            self.traces - earlier.traces,
            self.states - earlier.states,
            self.steps - earlier.steps,
            self.hidden_steps - earlier.hidden_steps,
            self.guards - earlier.guards,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Coverage:
        return cls(
            traces=data["traces"],
            states=data["states"],
            steps=Counter(data["steps"]),
            hidden_steps=Counter(data["hidden_steps"]),
            guards=Counter({(p, g): n for p, held in data["guards"].items() for g, n in held.items()}),
        )


_GuardKey = tuple[str, str]  # (invariant or action property, guard)


class _HeldGuards(dict[Any, tuple[_GuardKey, ...]]):
    """state -> the guards that hold in it, computed once per state."""

    def __init__(self, spec: Spec[Any], guards: Sequence[tuple[_GuardKey, Callable[[Any, Any], bool]]]) -> None:
        super().__init__()
        self.spec = spec
        self.guards = tuple(guards)

    def __missing__(self, state: Any) -> tuple[_GuardKey, ...]:
        held = self[state] = tuple(key for key, fn in self.guards if fn(self.spec, state))
        return held


class Tally:
    """Coverage being collected by a checker: counts cheap to add to, folded into a :class:`Coverage` on demand.

    Each step the checker may take (a cached transition, or a hidden step) gets a serial number from
    :meth:`serial` when it is first computed; per trace, :meth:`add` notes the witness's initial state and
    its steps, which are counted a batch of traces at a time. What a number stands for (action, states,
    guards) is worked out when the counts are folded, once per distinct step. ``serial_of`` gives the
    serial number of one of the checker's steps (a cached transition).
    """

    BATCH = 1024  # traces noted before their steps are counted

    def __init__(self, spec: Spec[Any], mapping: TraceMapping, serial_of: Callable[[Any], int]) -> None:
        self._serial_of = serial_of
        guards = mapping.guards
        # Guards of invariants hold in the state checked; those of action properties in the state a step leaves.
        self._state_guards = _HeldGuards(
            spec, [((inv.name, g.name), g.fn) for inv in spec.invariants for g in guards.get(inv.name, ())]
        )
        self._step_guards = _HeldGuards(
            spec, [((p.name, g.name), g.fn) for p in spec.action_properties for g in guards.get(p.name, ())]
        )
        self._numbers = count()
        self._steps: dict[int, tuple[str, bool, Any, Any]] = {}  # serial -> (action, hidden, from, to)
        self._total = Coverage()
        # Not yet folded into the total:
        self._pending: list[Any | None] = []  # initial state of each trace noted, not yet counted
        self._pending_serials: list[Sequence[int]] = []
        self._pending_steps: list[Sequence[Any]] = []
        self._serials: Counter[int] = Counter()  # serial of a step -> times a witness took it
        self._initial: Counter[Any] = Counter()  # initial state -> witnesses that start there

    def serial(self, action: str, source: Any, target: Any, *, hidden: bool = False) -> int:
        """A number for a step by ``action`` from state ``source`` to ``target``, for :meth:`add`."""
        number = next(self._numbers)
        self._steps[number] = (action, hidden, source, target)
        return number

    def add(self, initial: Any | None, serials: Sequence[int], steps: Sequence[Any]) -> None:
        """One trace's witness: its initial state (None when it has none), then the steps whose serial
        numbers are ``serials``, then ``steps``. Both are read later: they must not change."""
        pending = self._pending
        pending.append(initial)
        if serials:
            self._pending_serials.append(serials)
        if steps:
            self._pending_steps.append(steps)
        if len(pending) >= self.BATCH:
            self._count()

    def _count(self) -> None:
        """Count the steps and initial states of the traces noted."""
        pending = self._pending
        self._total.traces += len(pending)
        self._initial.update(initial for initial in pending if initial is not None)
        self._serials.update(chain.from_iterable(self._pending_serials))
        self._serials.update(map(self._serial_of, chain.from_iterable(self._pending_steps)))
        pending.clear()
        self._pending_serials.clear()
        self._pending_steps.clear()

    def fold(self, keep: Iterable[int] | None = None) -> None:
        """Add the counts to the total. ``keep``: the only serial numbers that may be counted from now on
        (the steps still in the checker's caches); the others are forgotten."""
        self._count()
        total = self._total
        states, sources = self._initial, Counter[Any]()  # the initial states, then the states steps reach
        for number, n in self._serials.items():
            action, hidden, source, target = self._steps[number]
            (total.hidden_steps if hidden else total.steps)[action] += n
            states[target] += n
            sources[source] += n
        total.states += sum(states.values())
        for held, counted in ((self._state_guards, states), (self._step_guards, sources)):
            if held.guards:
                for state, n in counted.items():
                    for key in held[state]:
                        total.guards[key] += n
            held.clear()
        self._serials.clear()
        self._initial = Counter()
        if keep is not None:
            steps = self._steps
            self._steps = {number: steps[number] for number in keep}

    def coverage(self) -> Coverage:
        """What the traces added so far exercised (a copy)."""
        self.fold()
        return self._total.copy()


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
