"""TLC and the Python explorer on the autorecovery spec: the same states, the same verdicts, the same liveness.

As tests/test_bookie_parity.py does for the bookie spec: without a violation
both engines reach the very same set of states and generate the same steps;
with a seeded bug both report the same invariant, with counterexamples of the
same length. TLC also checks the liveness the Python explorer cannot: under
fairness every entry is again on Qw available bookies.
"""

from __future__ import annotations

import pytest
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.tools.model_checking.model_check import ModelCheck, compare, run_python, run_tlc

pytestmark = pytest.mark.tlc

SMALL_MODELS = [
    ({}, 404),  # one bookie stops: marked, re-replicated, unmarked; or it comes back
    ({"MaxStops": 2, "MaxDiskLosses": 1}, 20_522),  # a bookie stops again, or loses its disk
    ({"Segments": 2, "NumBookies": 5, "NumWorkers": 2}, 5_614),  # two fragments, two workers and their lock
]


@pytest.mark.parametrize(("constants", "distinct"), SMALL_MODELS, ids=lambda c: str(c))
def test_same_states(constants: dict[str, int], distinct: int) -> None:
    model = ModelCheck("autorecovery", constants)
    python = run_python(model, keep_states=True)
    tlc = run_tlc(model, keep_states=True)
    assert python.violations == () and tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == distinct
    assert python.states_generated == tlc.states_generated
    comparison = compare(python, tlc)
    assert comparison.states_compared and comparison.agree, comparison.reasons


# (bug, constants, invariants checked (None: all), the invariant reported, counterexample length with Init)
SEEDED_BUGS = [
    ("metadata_before_copy", {}, None, "MetadataNamesOnlyHolders", 6),
    # the harm it does to readers: the metadata leaves the one bookie still holding an entry
    (
        "metadata_before_copy",
        {"MaxStops": 2, "MaxDiskLosses": 1},
        ("NoEntryLostWhileReplicaRemains",),
        "NoEntryLostWhileReplicaRemains",
        8,
    ),
    ("auditor_marks_nothing", {}, None, "LostBookiesMarked", 4),
]


@pytest.mark.parametrize(
    ("bug", "constants", "invariants", "invariant", "length"),
    SEEDED_BUGS,
    ids=[f"{b}-{i[0] if i else 'all'}" for b, _, i, _, _ in SEEDED_BUGS],
)
def test_seeded_bug_is_the_same_violation_in_both_engines(
    bug: str, constants: dict[str, int], invariants: tuple[str, ...] | None, invariant: str, length: int
) -> None:
    model = ModelCheck("autorecovery", {**constants, "Bug": bug}, invariants=invariants)
    python = run_python(model)
    tlc = run_tlc(model)
    assert [v.invariant for v in python.violations] == [invariant]
    assert [v.invariant for v in tlc.violations] == [invariant]
    assert len(python.violations[0].trace) == len(tlc.violations[0].trace) == length
    assert compare(python, tlc).agree


@pytest.mark.parametrize(
    ("constants", "holds"),
    [
        ({"NumBookies": 4, "MaxStops": 1}, True),  # a spare bookie for the one that stopped
        ({"NumBookies": 3, "MaxStops": 1}, False),  # no spare: a stopped bookie that stays away is never replaced
        ({"NumBookies": 4, "MaxStops": 1, "Bug": "metadata_before_copy"}, False),  # a crash leaves an empty replica
        ({"NumBookies": 4, "MaxStops": 1, "Bug": "auditor_marks_nothing"}, False),
    ],
    ids=str,
)
def test_replicas_are_restored_under_fairness(constants: dict[str, object], holds: bool) -> None:
    result = run_tlc(ModelCheck("autorecovery", constants, liveness=True, invariants=()))
    assert [v.invariant for v in result.violations] == ([] if holds else ["ReplicasRestored"])


def test_the_doctest_story_is_a_behaviour_of_the_spec() -> None:
    spec = AutorecoverySpec()
    s = spec.BookieStops(spec.initial_state(), 1)
    s = spec.AuditorChecksBookies(spec.AuditorIsElected(s, 2))
    s = spec.WorkerTakesLock(s, 1)
    s = spec.WorkerStartsFragment(s, 1, 1, 1, 4)
    for e in sorted(spec.fragment_entries(s, 1, 1)):
        s = spec.WorkerCopiesEntry(s, 1, e)
    s = spec.WorkerReleasesLock(spec.WorkerUpdatesEnsemble(s, 1), 1)
    assert s.meta_segments == ((0, (4, 2, 3)),) and not s.mark and s.lock == 0
    assert all(len(spec.live_replicas(s, e)) == spec.Qw for e in spec.entries)
    assert spec.invariant_failures(s) == []
