"""The Python ledger spec on its own: striping, constants, pinned state counts, seeded bugs."""

from __future__ import annotations

import pytest
from ledgerspec.spec.explorer import explore
from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.ledger import BUGS, LedgerSpec


def test_striping_follows_the_seed_example() -> None:
    # The seed numbers entries and bookies from 1: entry 1 -> bookies 1,2,3; entry 2 -> 2,3,4;
    # entry 3 -> 3,4,1. BookKeeper (and this spec) number entries from 0, bookies from 1.
    spec = LedgerSpec(NumBookies=4, E=4, Qw=3, Qa=2)
    s = next(iter(spec.init_states()))
    assert [spec.write_set(s, e) for e in range(5)] == [(1, 2, 3), (2, 3, 4), (3, 4, 1), (4, 1, 2), (1, 2, 3)]


def test_write_sets_are_the_e_windows_of_qw_indices() -> None:
    spec = LedgerSpec(NumBookies=5, E=5, Qw=3, Qa=2)
    assert spec.windows == ((0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1))


@pytest.mark.parametrize(
    ("constants", "message"),
    [
        ({"E": 0, "Qw": 0, "Qa": 0}, "ensemble size E must be at least 1, got E=0"),
        ({"Qa": 3, "Qw": 2}, "ack quorum larger than the write quorum: Qa=3 > Qw=2"),
        ({"Qw": 4, "E": 3}, "write quorum larger than the ensemble: Qw=4 > E=3"),
        ({"E": 4, "Qw": 3, "NumBookies": 3}, "not enough bookies for the ensemble: NumBookies=3 < E=4"),
        ({"Qa": 0}, "ack quorum Qa must be at least 1"),
        ({"MaxLoss": -1}, "MaxLoss must not be negative"),
        ({"Bug": "typo"}, "constant Bug must be one of none, recovery_read_no_fence"),
    ],
)
def test_impossible_models_are_refused(constants: dict[str, object], message: str) -> None:
    with pytest.raises(ConstantError, match=message):
        LedgerSpec(**constants)


# Pinned: a change to any of these is a change to the spec's meaning, to be made on purpose.
PINNED = [
    ({"MaxEntries": 1}, 1313),
    ({"MaxEntries": 2}, 40476),
    ({"MaxEntries": 1, "E": 3, "Qw": 3, "Qa": 2}, 61377),
    ({"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1, "NumRecoverers": 2}, 33015),
]


@pytest.mark.parametrize(("constants", "distinct"), PINNED)
def test_correct_protocol_keeps_every_invariant(constants: dict[str, int], distinct: int) -> None:
    spec = LedgerSpec(**constants)
    result = explore(spec, check_deadlock=False)
    assert result.violations == ()
    assert result.distinct_states == distinct
    # Each "always" has its "sometimes": the runs the invariants speak of do happen.
    assert result.reached == {r.name for r in spec.reachables}


def test_ensemble_change_and_crashes_keep_every_invariant() -> None:
    result = explore(LedgerSpec(NumBookies=4, MaxEntries=1, MaxCrashes=1), check_deadlock=False)
    assert result.violations == ()
    assert result.distinct_states == 16978  # 9501 before bookies could restart


def test_message_loss_keeps_every_invariant() -> None:
    result = explore(LedgerSpec(MaxEntries=1, MaxLoss=1), check_deadlock=False)
    assert result.violations == ()
    assert result.distinct_states == 7903


def test_symmetry_of_recovering_clients_reduces_states() -> None:
    spec = LedgerSpec(NumBookies=2, E=2, Qw=2, Qa=1, MaxEntries=1, NumRecoverers=2)
    reduced = explore(spec, check_deadlock=False, symmetry=True)
    assert reduced.violations == ()
    assert reduced.distinct_states == 17207  # of 33015 without symmetry


# Each seeded bug, at the smallest model that shows it, and the invariant it breaks.
SEEDED = {
    "recovery_read_no_fence": ({"E": 3, "Qw": 3, "Qa": 2, "MaxEntries": 1}, "NoAckedEntryLost"),
    "fence_qa_total": ({"E": 3, "Qw": 2, "Qa": 1, "MaxEntries": 2}, "NoNewAcksToFencedWriter"),
    "lac_before_qa": ({"E": 3, "Qw": 2, "Qa": 2, "MaxEntries": 2}, "NoAckedEntryLost"),
}


def test_every_seeded_bug_has_a_model() -> None:
    assert set(SEEDED) == set(BUGS) - {"none"}


@pytest.mark.parametrize("bug", sorted(SEEDED))
def test_seeded_bug_is_caught(bug: str) -> None:
    constants, invariant = SEEDED[bug]
    result = explore(LedgerSpec(Bug=bug, **constants), check_deadlock=False)
    (violation,) = result.violations
    assert violation.name == invariant
    # Without the bug the same model is safe.
    assert explore(LedgerSpec(**constants), check_deadlock=False).violations == ()


def test_recovery_read_without_fencing_loses_an_acked_entry_as_in_bookkeeper_2614() -> None:
    constants, _ = SEEDED["recovery_read_no_fence"]
    (violation,) = explore(LedgerSpec(Bug="recovery_read_no_fence", **constants), check_deadlock=False).violations
    steps = [step.step.action for step in violation.trace]
    # The writer's add reaches a bookie only after that bookie answered a recovery
    # read without being fenced: the add is accepted and completes after the close.
    assert steps[-1] in ("RecovererClosesLedger", "BookieReceivesAdd")
    assert steps.count("BookieReceivesRecoveryRead") == 2
    last = violation.trace[-1].state
    assert last.meta_status == "CLOSED" and last.meta_last_entry == -1 and last.writer_lac == 0
