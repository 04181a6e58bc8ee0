"""The bookie spec on TLC and on the Python explorer, beyond the models every spec is checked on
(tests/test_parity.py): TLC's counterexamples read back into the Python spec, and the larger models."""

from __future__ import annotations

import pytest
from ledgerspec.spec import catalog
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.spec.models import SeededBug
from ledgerspec.tools.model_checking.model_check import ModelCheck, compare, run_python, run_tlc

pytestmark = pytest.mark.tlc


@pytest.mark.parametrize("bug", catalog.find("bookie").models.seeded_bugs, ids=lambda b: b.name)
def test_tlc_counterexample_ends_in_a_state_the_python_spec_rejects_for_the_same_reason(bug: SeededBug) -> None:
    (violation,) = run_tlc(ModelCheck("bookie", {"Bug": bug.bug}, invariants=bug.checked)).violations
    spec = BookieSpec(Bug=bug.bug)
    last = spec.make_state(**violation.trace[-1]["state"])
    if bug.invariant in {p.name for p in spec.action_properties}:  # broken by the last step
        before = spec.make_state(**violation.trace[-2]["state"])
        assert bug.invariant in dict(spec.property_failures(before, last))
    else:
        assert bug.invariant in dict(spec.invariant_failures(last))


def test_the_2087_bug_loses_no_acknowledged_entry_in_tlc_either() -> None:
    model = ModelCheck("bookie", {"Bug": "mark_not_advanced_in_replay"}, invariants=("AckedEntriesSurvive",))
    python = run_python(model)
    tlc = run_tlc(model)
    assert python.violations == () and tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == 19_755


@pytest.mark.slow
@pytest.mark.parametrize("constants", [{"MaxCrashes": 2}, {"MaxEntries": 2, "MaxCrashes": 0}], ids=str)
def test_larger_models_same_states(constants: dict[str, int]) -> None:
    model = ModelCheck("bookie", constants)
    python = run_python(model, keep_states=True)
    tlc = run_tlc(model, keep_states=True, workers=2)
    assert compare(python, tlc).agree
