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
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from explored_models import explored, explored_cases
from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import ObservationMode, mapping_for

QUOTIENTED = [
    (spec_name, mode.name)
    for spec_name in catalog.SPECS
    if catalog.find(spec_name).models.explored
    for mode in mapping_for(spec_name).modes.values()
    if mode.quotient is not None
]
CASES = [(s, m, model, bug) for s, m in QUOTIENTED for model, bug in explored_cases(s)]


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
