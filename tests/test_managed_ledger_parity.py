"""The managed-ledger spec on TLC and on the Python explorer: the same states, the same verdicts."""

from __future__ import annotations

import pytest
from ledgerspec.tools.model_checking.model_check import ModelCheck, compare, run_python, run_tlc

pytestmark = pytest.mark.tlc

# Distinct states, pinned: a change to either text shows here first.
MODELS = [
    ({}, 435),
    ({"MaximumRolloverTime": 2, "MinimumRolloverTime": 1}, 3918),
    ({"BatchSize": 2, "MaxSizePerLedger": 3, "Partitioned": True, "NumCursors": 2}, 1381),
    ({"NumProducers": 2, "MaxMessages": 2}, 8071),
    ({"NumCursors": 0}, 190),
]


@pytest.mark.parametrize(
    ("constants", "states"),
    MODELS,
    ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) if isinstance(c, dict) else str(c),
)
def test_same_states(constants: dict[str, int | bool], states: int) -> None:
    model = ModelCheck("managed_ledger", constants)
    python = run_python(model, keep_states=True)
    tlc = run_tlc(model, keep_states=True)
    assert python.violations == () and tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == states
    comparison = compare(python, tlc)
    assert comparison.states_compared and comparison.agree, comparison.reasons
    assert python.states == tlc.states


SEEDED_BUGS = [
    ("trim_deletes_needed_ledger", "TrimKeepsUnconsumedEntries", 6),
    ("dedup_forgets_on_reopen", "DedupPersistsNoDuplicate", 8),
]


@pytest.mark.parametrize(("bug", "invariant", "length"), SEEDED_BUGS, ids=[b for b, _, _ in SEEDED_BUGS])
def test_seeded_bug_is_the_same_violation_in_both_engines(bug: str, invariant: str, length: int) -> None:
    model = ModelCheck("managed_ledger", {"Bug": bug})
    python = run_python(model)
    tlc = run_tlc(model)
    assert [v.invariant for v in python.violations] == [invariant]
    assert [v.invariant for v in tlc.violations] == [invariant]
    assert len(python.violations[0].trace) == len(tlc.violations[0].trace) == length
    assert compare(python, tlc).agree
