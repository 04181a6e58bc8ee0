"""TLC and the Python explorer on every spec of the catalogue: the same states, the same verdicts.

Each spec lists its models beside it (``spec/<name>/<name>_models.py``): under
each checked model both engines must reach the very same set of states
(TLC's ``-dump``, parsed, against the explorer's states turned into TLA+
values), as many as pinned; under each seeded bug both must report the same
broken property, with counterexamples of the pinned length (both search
breadth-first). Both must take the same actions, and under each preset
every action of the spec. A spec gets these tests by being in the
catalogue; what is particular to one spec (liveness, symmetry, the larger
models) is in ``tests/test_<name>_parity.py``.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from ledgerspec.spec import catalog
from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels
from ledgerspec.tools.model_checking.explorer.explorer import Explorer
from ledgerspec.tools.model_checking.model_check import (
    ActionCount,
    EngineResult,
    ModelCheck,
    compare,
    run_python,
    run_tlc,
)

CHECKED = [(name, model) for name, entry in catalog.SPECS.items() for model in entry.models.checked]
SEEDED = [(name, bug) for name, entry in catalog.SPECS.items() for bug in entry.models.seeded_bugs]


def _preset_of(spec: str, model: CheckedModel) -> str | None:
    """The name a user runs the model by, when it is a preset."""
    return next((name for name, preset in catalog.find(spec).models.presets.items() if preset == model), None)


def _model_id(spec: str, model: CheckedModel) -> str:
    preset = _preset_of(spec, model)
    return f"{spec}-{model.name}" + (f"-preset-{preset}" if preset else "")


def _checked_params() -> list[Any]:
    """The checked models, a larger one marked slow: its parity runs with --run-slow (tox -e tlc)."""
    return [
        pytest.param(spec, model, id=_model_id(spec, model), marks=[pytest.mark.slow] if model.larger else [])
        for spec, model in CHECKED
    ]


@pytest.mark.tlc
@pytest.mark.parametrize(("spec", "model"), _checked_params())
def test_same_states(spec: str, model: CheckedModel) -> None:
    """Also the same actions taken; under a preset, every action of the spec, by both engines."""
    check = ModelCheck(spec, model.constants)
    python = run_python(check, keep_states=True)
    tlc = run_tlc(check, keep_states=True)
    assert python.violations == () and tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == model.distinct_states
    if catalog.find(spec).models.same_steps:
        assert python.states_generated == tlc.states_generated
    comparison = compare(python, tlc)
    assert comparison.states_compared and comparison.actions_compared and comparison.agree, comparison.reasons
    assert python.states == tlc.states
    assert tlc.unmatched_actions == ()
    if _preset_of(spec, model) is not None:
        assert python.never_taken == tlc.never_taken == model.off


@pytest.mark.tlc
@pytest.mark.parametrize(("spec", "bug"), SEEDED, ids=[f"{spec}-{bug.name}" for spec, bug in SEEDED])
def test_seeded_bug_is_the_same_violation_in_both_engines(spec: str, bug: SeededBug) -> None:
    check = ModelCheck(spec, {**bug.constants, "Bug": bug.bug}, invariants=bug.checked)
    python = run_python(check)
    tlc = run_tlc(check)
    assert [v.invariant for v in python.violations] == [bug.invariant]
    assert [v.invariant for v in tlc.violations] == [bug.invariant]
    assert len(python.violations[0].trace) == len(tlc.violations[0].trace) == bug.length
    assert compare(python, tlc).agree


@pytest.mark.parametrize("spec", list(catalog.SPECS))
def test_every_seeded_bug_of_a_spec_is_checked(spec: str) -> None:
    """A bug added to a spec's ``Bug`` constant is either found by both engines, or, when it breaks nothing (a
    stricter rule), is a checked model of its own."""
    entry = catalog.find(spec)
    (bug_constant,) = [c for c in entry.python.constants if c.name == "Bug"]
    assert bug_constant.choices is not None
    seeded = {bug.bug for bug in entry.models.seeded_bugs}
    harmless = {model.constants["Bug"] for model in entry.models.checked if "Bug" in model.constants}
    assert seeded | harmless == set(bug_constant.choices) - {"none"}
    assert entry.models.checked and not seeded & harmless


@pytest.mark.parametrize("spec", list(catalog.SPECS))
def test_every_action_is_taken_in_some_model_both_engines_check(spec: str) -> None:
    """Parity certifies only the steps its models take: each action of the spec, fault actions included, must
    be enabled in some reachable state of some model checked in every run (smallest models first, until all
    are), a larger one left out."""
    entry = catalog.find(spec)
    wanted = {a.name for a in entry.python.actions}
    taken: set[str] = set()
    for model in sorted((m for m in entry.models.checked if not m.larger), key=lambda m: m.distinct_states):
        python = entry.python(**model.constants)
        explored = Explorer(python, keep_states=True, check_deadlock=False).run()
        assert explored.complete and explored.states is not None
        taken |= {action.name for state in explored.states for action, _, _ in python.successors(state)}
        if taken >= wanted:
            break
    assert wanted - taken == set()


@pytest.mark.parametrize("spec", list(catalog.SPECS))
def test_every_spec_has_a_faults_preset_that_takes_every_action(spec: str) -> None:
    """The explorer's side of the promise, without TLC: ``faults`` is a checked model (so its count is pinned
    above), and its search takes every action of the spec."""
    models = catalog.find(spec).models
    assert models.preset_names == ("defaults", "faults")
    assert models.presets["faults"] in models.checked
    result = run_python(ModelCheck(spec, models.preset("faults")))
    assert result.complete and result.distinct_states == models.presets["faults"].distinct_states
    assert result.actions is not None and list(result.actions) == [a.name for a in catalog.find(spec).python.actions]
    assert result.never_taken == models.presets["faults"].off


def test_a_preset_must_be_a_checked_model_and_defaults_is_every_specs() -> None:
    checked = CheckedModel({"MaxEntries": 1}, 1_898)
    with pytest.raises(ValueError, match="presets faults must be among the checked models"):
        SpecModels(checked=(), seeded_bugs=(), presets={"faults": checked})
    with pytest.raises(ValueError, match="'defaults' is every spec's defaults"):
        SpecModels(checked=(checked,), seeded_bugs=(), presets={"defaults": checked})
    models = SpecModels(checked=(checked,), seeded_bugs=(), presets={"small": checked})
    assert models.preset("defaults") == {} and models.preset("small") == {"MaxEntries": 1}
    with pytest.raises(KeyError, match="unknown preset 'big'; presets: defaults, small"):
        models.preset("big")


def _result(engine: str, steps: dict[str, int], *, unmatched: tuple[str, ...] = ()) -> EngineResult:
    actions = {name: ActionCount(count, min(count, 1)) for name, count in steps.items()}
    return EngineResult(engine, 3, 5, 2, 0.1, (), True, actions=actions, unmatched_actions=unmatched)


def test_engines_that_take_different_actions_disagree() -> None:
    python = _result("python", {"Add": 2, "Crash": 1, "Lose": 0})
    assert compare(python, _result("tlc", {"Add": 4, "Crash": 1, "Lose": 0})).agree  # as often: no matter
    comparison = compare(
        python, _result("tlc", {"Add": 2, "Crash": 0, "Lose": 1}, unmatched=("Next (m line 9, col 8)",))
    )
    assert not comparison.agree and comparison.actions_compared
    assert comparison.reasons == (
        "actions taken differ: only the python explorer took Crash; only TLC took Lose (TLC also counted "
        "actions that match no single spec action: Next (m line 9, col 8))",
    )
    uncounted = attrs.evolve(_result("tlc", {}), actions=None)
    assert compare(python, uncounted).agree and not compare(python, uncounted).actions_compared
