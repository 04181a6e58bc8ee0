"""Every trace mapping's explanations agree with its spec's actions, in every state of the spec's explored models.

A spec action only returns ``None`` when disabled; its mapping's explanation
says which guard fails. The two must agree: an explanation names a failing
guard exactly when the action instance is disabled, in every reachable state
of each explored model (``SpecModels.explored``), also under every seeded
bug. A spec with a trace mapping gets this test by being in the catalogue;
each spec's own tests check the wording and the instances the spec never
generates.
"""

from __future__ import annotations

import pytest
from explored_models import explored, explored_cases
from ledgerspec.spec import catalog
from ledgerspec.spec.tracing import mapping_for

MAPPED = [name for name in catalog.SPECS if catalog.find(name).models.explored]
CASES = [(spec, model, bug) for spec in MAPPED for model, bug in explored_cases(spec)]


@pytest.mark.parametrize(("spec_name", "model", "bug"), CASES, ids=["-".join(case) for case in CASES])
def test_explanations_agree_with_the_actions(spec_name: str, model: str, bug: str) -> None:
    spec, states = explored(spec_name, model, bug)
    mapping = mapping_for(spec_name)
    disabled = 0
    for s in states:
        for act in spec.actions:
            explain = mapping.explain[act.name]
            for args in [()] if act.params is None else list(act.params(spec, s)):
                why = explain(spec, s, *args)
                assert (why is None) == (act.fn(spec, s, *args) is not None), (act.name, args, why, s)
                disabled += why is not None
    assert disabled  # every model disables something


@pytest.mark.parametrize("spec_name", list(catalog.SPECS))
def test_a_spec_with_a_trace_mapping_has_models_to_explain_and_explains_every_action(spec_name: str) -> None:
    try:
        mapping = mapping_for(spec_name)
    except KeyError:
        assert not catalog.find(spec_name).models.explored
        return
    assert spec_name in MAPPED
    assert set(mapping.explain) == {a.name for a in catalog.find(spec_name).python.actions}
