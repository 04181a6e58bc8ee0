"""The explored models of the catalogue's specs (``SpecModels.explored``), explored once per test session.

The explanation tests of every trace mapping (tests/test_explanations.py) and
each spec's own mapping tests read the same reachable states.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledgerspec.spec import catalog
from ledgerspec.spec.kernel import Spec
from ledgerspec.tools.model_checking.explorer.explorer import explore


@functools.cache
def explored(spec_name: str, model: str, bug: str = "none") -> tuple[Spec[Any], tuple[Any, ...]]:
    """The spec under the explored model ``model`` and seeded bug ``bug``, and every state it reaches."""
    models = catalog.find(spec_name).models
    spec = catalog.find(spec_name).python(**{**models.explored[model], "Bug": bug})
    result = explore(
        spec,
        check_deadlock=False,
        stop_at_first=False,
        keep_states=True,
        max_states=models.explored_max_states,
        invariants=(),  # the checks judge each state themselves: a violation's trace would only take memory
    )
    assert result.states is not None
    return spec, result.states


def explored_cases(spec_name: str) -> list[tuple[str, str]]:
    """(model, bug) of every exploration of a spec's explanation checks."""
    entry = catalog.find(spec_name)
    (bug_constant,) = [c for c in entry.python.constants if c.name == "Bug"]
    bugs = list(bug_constant.choices or ("none",)) if entry.models.explored_with_bugs else ["none"]
    return [(model, bug) for model in entry.models.explored for bug in bugs]


def guarded_broken_invariants(spec_name: str, models: Iterable[str], guards: Mapping[str, Sequence[Any]]) -> set[str]:
    """The invariants broken in some state that the explored ``models`` reach under the spec's seeded bugs; each
    state that breaks one must satisfy every guard of it (a guard is an antecedent of its invariant)."""
    (bug_constant,) = [c for c in catalog.find(spec_name).python.constants if c.name == "Bug"]
    broken: set[str] = set()
    for bug in bug_constant.choices or ("none",):
        for model in models:
            spec, states = explored(spec_name, model, bug)
            for s in states:
                for inv in spec.invariants:
                    if inv.fn(spec, s) is not None:
                        broken.add(inv.name)
                        assert all(g.fn(spec, s) for g in guards.get(inv.name, ())), (bug, model, inv.name)
    return broken


def guards_never_held(spec_name: str, model: str, guards: Mapping[str, Sequence[Any]]) -> list[tuple[str, str]]:
    """(property, guard) of each guard that no state of the explored ``model`` satisfies."""
    spec, states = explored(spec_name, model)
    return [(prop, g.name) for prop, gs in guards.items() for g in gs if not any(g.fn(spec, s) for s in states)]
