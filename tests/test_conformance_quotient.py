"""An observation mode's quotient (``ObservationMode.quotient``) is a bisimulation on the explored models.

The checker keeps one candidate state per class of the quotient. That loses
no verdict only if the states of a class are ones the mode's observer can
never tell apart. Checked here on every reachable state of each explored
model, under every seeded bug: within a class, each state

- reports the same values of every name the mode observes,
- breaks the same invariants,
- has the same visible steps (action and arguments) to states of the same
  classes, breaking the same action properties,
- and reaches the same classes by hidden steps, leaving aside the hidden steps
  that stay in the class (they are stutters: nothing tells them).

Since every member of a class has the same steps to the same classes, a
behaviour from one is matched, class for class, by a behaviour from any other.

A mode's ``spent`` budget (``ObservationMode.spent``) is set aside before the
quotient, and the checker keeps the member that spent least. That loses no
verdict if spending less never takes a step away: of two states equal but for
the budget, the one that spent less reports the same values, breaks the same
invariants, and matches each step of the other with a step of the same label
and visibility to a state of the same class that again spent no more (a
simulation). Checked on the same models, between the budgets each class
reaches next to one another (the relation is transitive).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from explored_models import explored, explored_cases
from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import Spec, evolve
from ledgerspec.spec.tracing import ObservationMode, mapping_for


def _cases_where(declares: Callable[[ObservationMode], bool]) -> list[tuple[str, str, str, str]]:
    """(spec, mode, model, bug) of every explored model of every mode that ``declares``."""
    return [
        (spec_name, mode.name, model, bug)
        for spec_name in catalog.SPECS
        if catalog.find(spec_name).models.explored
        for mode in mapping_for(spec_name).modes.values()
        if declares(mode)
        for model, bug in explored_cases(spec_name)
    ]


CASES = _cases_where(lambda mode: mode.quotient is not None)
SPENDING_CASES = _cases_where(lambda mode: mode.spent is not None)


def _signature(spec: Spec[Any], mode: ObservationMode, state: Any, key: Callable[[Any], Any]) -> tuple[Any, ...]:
    """What an observer in ``mode`` can ever tell of a state, one step deep, with successors by class."""
    mapping = mapping_for(spec.name)
    observed = tuple(sorted((name, repr(mapping.observe(spec, state, name))) for name in mode.observes))
    broken = frozenset(inv.name for inv in spec.invariants if inv.fn(spec, state) is not None)
    visible, hidden = set(), set()
    for act in spec.actions:
        for args in [()] if act.params is None else list(act.params(spec, state)):
            t = act.fn(spec, state, *args)
            if t is None:
                continue
            properties = frozenset(p.name for p in spec.action_properties if p.fn(spec, state, t) is not None)
            if not mode.hides(act.name, args):
                visible.add((act.name, args, key(t), properties))
            elif key(t) != key(state) or properties:
                hidden.add((key(t), properties))
    return observed, broken, frozenset(visible), frozenset(hidden)


@pytest.mark.parametrize(("spec_name", "mode_name", "model", "bug"), CASES, ids=["-".join(c) for c in CASES])
def test_a_quotient_merges_only_states_no_observer_tells_apart(
    spec_name: str, mode_name: str, model: str, bug: str
) -> None:
    spec, states = explored(spec_name, model, bug)
    mode = mapping_for(spec_name).modes[mode_name]
    quotient = mode.quotient
    assert quotient is not None
    keys: dict[Any, Any] = {}

    def key(state: Any) -> Any:
        found = keys.get(state)
        if found is None:
            found = keys[state] = quotient(spec, state)
        return found

    classes: dict[Any, list[Any]] = defaultdict(list)
    for state in states:
        classes[key(state)].append(state)
    merged = 0
    for members in classes.values():
        if len(members) < 2:
            continue
        first = _signature(spec, mode, members[0], key)
        for other in members[1:]:
            assert _signature(spec, mode, other, key) == first, (members[0], other)
            merged += 1
    # The quotient is not vacuous: it merges states of the model.
    assert merged, f"{spec_name} {mode_name}: the quotient merges no two states of model {model}"


def _steps(spec: Spec[Any], mode: ObservationMode, state: Any) -> list[tuple[str | None, Any, Any, frozenset[str]]]:
    """Each step of a state as (label, successor, properties broken); the label of a hidden step is None."""
    steps = []
    for act in spec.actions:
        for args in [()] if act.params is None else list(act.params(spec, state)):
            t = act.fn(spec, state, *args)
            if t is None:
                continue
            properties = frozenset(p.name for p in spec.action_properties if p.fn(spec, state, t) is not None)
            label = None if mode.hides(act.name, args) else (act.name, args)
            steps.append((label, t, properties))
    return steps


@pytest.mark.parametrize(
    ("spec_name", "mode_name", "model", "bug"), SPENDING_CASES, ids=["-".join(c) for c in SPENDING_CASES]
)
def test_a_state_that_spent_less_takes_every_step_of_one_that_spent_more(
    spec_name: str, mode_name: str, model: str, bug: str
) -> None:
    spec, states = explored(spec_name, model, bug)
    mode = mapping_for(spec_name).modes[mode_name]
    budget = mode.spent
    assert budget is not None
    mapping = mapping_for(spec_name)

    def key(state: Any) -> Any:
        zeroed = evolve(state, **{budget: 0})
        return zeroed if mode.quotient is None else mode.quotient(spec, zeroed)

    def spent(state: Any) -> int:
        return int(getattr(state, budget))

    def seen(state: Any) -> tuple[Any, ...]:
        observed = tuple(repr(mapping.observe(spec, state, name)) for name in sorted(mode.observes))
        return observed, frozenset(inv.name for inv in spec.invariants if inv.fn(spec, state) is not None)

    levels: dict[Any, dict[int, Any]] = defaultdict(dict)
    for state in states:
        levels[key(state)].setdefault(spent(state), state)
    compared = 0
    for by_budget in levels.values():
        ordered = [by_budget[b] for b in sorted(by_budget)]
        for less, more in itertools.pairwise(ordered):
            assert seen(less) == seen(more), (less, more)
            answers = _steps(spec, mode, less)
            for label, t, properties in _steps(spec, mode, more):
                if label is None and key(t) == key(more) and not properties:
                    continue  # a hidden stutter: ``less`` matches it by staying, having spent less than ``t``
                assert any(
                    label == l2 and key(t) == key(t2) and spent(t2) <= spent(t) and properties == p2
                    for l2, t2, p2 in answers
                ), (label, less, more)
            compared += 1
    # Not vacuous: some class of the model holds states that spent different budgets.
    assert compared, f"{spec_name} {mode_name}: no two states of model {model} differ only in {budget}"
