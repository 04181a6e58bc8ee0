"""The autorecovery spec beyond the models every spec is checked on (tests/test_parity.py): TLC checks the
liveness the Python explorer cannot, that under fairness every entry is again on Qw available bookies. Where it
holds with a disk lost or with an open ledger, TLC searches the whole graph under fairness for minutes: those two
run with --run-slow (tox -e tlc); the open ledger's seeded bugs, which TLC refutes early, run every time."""

from __future__ import annotations

import pytest
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.tools.model_checking.model_check import ModelCheck, run_tlc

pytestmark = pytest.mark.tlc


@pytest.mark.parametrize(
    ("constants", "holds"),
    [
        ({"NumBookies": 4, "MaxStops": 1}, True),  # a spare bookie for the one that stopped
        ({"NumBookies": 3, "MaxStops": 1}, False),  # no spare: a stopped bookie that stays away is never replaced
        ({"NumBookies": 4, "MaxStops": 1, "Bug": "metadata_before_copy"}, False),  # a crash leaves an empty replica
        # a bookie that comes back empty under its id: only the periodic check of all ledgers finds it
        pytest.param({"NumBookies": 4, "MaxStops": 1, "MaxDiskLosses": 1}, True, marks=pytest.mark.slow),
        # the bookie check marks nothing: the periodic check finds the lost fragment in its place
        ({"NumBookies": 4, "MaxStops": 1, "Bug": "auditor_marks_nothing"}, True),
        # an open ledger whose writer may be gone: after the grace period a worker recovers it, then repairs it
        pytest.param({"NumBookies": 4, "MaxStops": 1, "OpenLedger": 1}, True, marks=pytest.mark.slow),
        # the grace period ends with the lock released and no recovery: the open ledger is never repaired
        ({"NumBookies": 4, "MaxStops": 1, "OpenLedger": 1, "Bug": "grace_ends_without_recovery"}, False),
        # a copy of an open fragment up to the LAC names a bookie without the last entry; no check reads past the
        # LAC, so nothing waits for a close and the entry stays on one replica
        ({"NumBookies": 4, "MaxStops": 1, "OpenLedger": 1, "Bug": "copies_open_fragment"}, False),
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
