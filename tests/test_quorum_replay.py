"""Each Z3 counterexample, replayed on the Python ledger spec, breaks the invariant it says it breaks.

A replay is a path of ledger-spec actions built from the counterexample's
bookies (tools/proofs/quorum_replay.py). With the seeded bug that puts the weaker rule
in place, the path runs and an invariant fails; with BookKeeper's rule, the
same path leaves recovery waiting and breaks nothing. The explorer, searching
the small models with the bug on, finds violations with the same bookies.
"""

from __future__ import annotations

import pytest
from ledgerspec.spec.ledger.ledger import DONE, FENCING, READING, LedgerSpec
from ledgerspec.spec.quorum import Quorum
from ledgerspec.tools.model_checking.explorer.explorer import explore
from ledgerspec.tools.proofs.quorum_proofs import analyse, every_quorum
from ledgerspec.tools.proofs.quorum_replay import (
    recovery_can_leave_fencing,
    replay_coverage_gap,
    replay_fencing,
    replay_missing,
)

SMALL = every_quorum(4)
ANALYSES = {q: analyse(q) for q in [*SMALL, Quorum(5, 3, 2), Quorum(6, 3, 2)]}

FENCING_CASES = [q for q in SMALL if not ANALYSES[q].verdict("fencing", "qa_total").safe]
MISSING_CASES = [q for q in SMALL if not ANALYSES[q].verdict("missing", "qa_no_such").safe]
GAP_CASES = [q for q, a in ANALYSES.items() if a.write_set_coverage_only is not None]


def test_there_are_cases_to_replay() -> None:
    # Qa NoSuchEntry replies are too few to be safe exactly when Qw >= 2 Qa.
    assert [(q.E, q.Qw, q.Qa) for q in MISSING_CASES] == [
        (2, 2, 1),
        (3, 2, 1),
        (3, 3, 1),
        (4, 2, 1),
        (4, 3, 1),
        (4, 4, 1),
        (4, 4, 2),
    ]
    assert Quorum(4, 3, 2) in FENCING_CASES and Quorum(3, 3, 2) not in FENCING_CASES
    assert [str(q) for q in GAP_CASES] == ["E=4 Qw=2 Qa=2", "E=6 Qw=3 Qa=2"]


@pytest.mark.parametrize("q", FENCING_CASES, ids=str)
def test_fencing_after_qa_replies_lets_the_old_writer_complete_an_entry(q: Quorum) -> None:
    cex = ANALYSES[q].verdict("fencing", "qa_total").counterexample
    assert cex is not None
    buggy = replay_fencing(q, cex, "fence_qa_total")
    assert buggy.blocked_at is None
    assert buggy.first_violation() == "NoNewAcksToFencedWriter"
    # Fencing completed on exactly the counterexample's replies, and only then did the unfenced bookies ack.
    states = [step.state for step in buggy.trace]
    fenced_at = next(i for i, s in enumerate(states) if s.rec[0].phase == READING)
    completed_at = next(i for i, s in enumerate(states) if s.writer_lac == cex.entry)
    assert states[fenced_at].rec[0].fence_replies == set(cex.replied)
    assert fenced_at < completed_at == len(states) - 1
    assert {b for (e, b) in buggy.last.writer_acks if e == cex.entry} == set(cex.acks)
    # BookKeeper's rule: the same replies do not complete fencing, so those acks break nothing.
    real = replay_fencing(q, cex, "none")
    assert real.blocked_at is None and real.violated == ()
    assert real.last.rec[0].phase == FENCING


@pytest.mark.parametrize("q", MISSING_CASES, ids=str)
def test_missing_after_qa_no_such_entry_loses_an_acked_entry(q: Quorum) -> None:
    cex = ANALYSES[q].verdict("missing", "qa_no_such").counterexample
    assert cex is not None
    buggy = replay_missing(q, cex, "missing_after_qa_no_such")
    assert buggy.blocked_at is None
    assert buggy.first_violation() == "NoAckedEntryLost"
    assert buggy.last.meta_status == "CLOSED" and buggy.last.meta_last_entry == cex.entry - 1
    assert buggy.last.writer_lac == cex.entry and buggy.last.rec[0].no_such == set(cex.no_such)
    # BookKeeper's rule: Qa NoSuchEntry replies are too few, recovery keeps reading and cannot close.
    real = replay_missing(q, cex, "none")
    assert real.violated == ()
    assert real.blocked_at is not None and real.blocked_at.action == "RecovererClosesLedger"
    assert real.last.rec[0].phase == READING


@pytest.mark.parametrize("q", GAP_CASES, ids=str)
def test_bookkeeper_fences_where_bp46_waits_forever(q: Quorum) -> None:
    gap = ANALYSES[q].write_set_coverage_only
    assert gap is not None
    # The bookies outside the reply set crash. BookKeeper's rule completes fencing and closes the ledger.
    real = replay_coverage_gap(q, gap, "none")
    assert real.blocked_at is None and real.violated == ()
    assert real.last.meta_status == "CLOSED" and real.last.rec[0].phase == DONE
    assert real.last.rec[0].fence_replies == set(gap.replied)
    # BP-46's rule: the same replies leave fencing incomplete, and nothing can ever complete it.
    bp46 = replay_coverage_gap(q, gap, "fence_ensemble_coverage")
    assert bp46.blocked_at is not None and bp46.blocked_at.action == "BookieReceivesRecoveryRead"
    assert bp46.violated == () and bp46.last.rec[0].phase == FENCING
    assert not recovery_can_leave_fencing(LedgerSpec(**bp46.constants), bp46.last)


# The explorer, with the bug on, finds violations with the very bookies of the Z3 counterexample.
def test_explorer_finds_the_z3_fencing_counterexample() -> None:
    q = Quorum(3, 2, 1)
    cex = ANALYSES[q].verdict("fencing", "qa_total").counterexample
    assert cex is not None and cex.replied == (1,) and cex.acks == (2,)
    spec = LedgerSpec(E=3, Qw=2, Qa=1, MaxEntries=1, Bug="fence_qa_total")
    (violation,) = explore(spec, check_deadlock=False).violations
    assert violation.name == "NoNewAcksToFencedWriter"
    assert violation.trace[-1].state.rec[0].fence_replies == set(cex.replied)
    assert "bookies [2] of write set [1, 2] are not fenced" in violation.message


def test_explorer_finds_the_z3_missing_entry_counterexample() -> None:
    q = Quorum(2, 2, 1)
    cex = ANALYSES[q].verdict("missing", "qa_no_such").counterexample
    assert cex is not None and cex.acked == (1,) and cex.no_such == (2,)
    spec = LedgerSpec(NumBookies=2, E=2, Qw=2, Qa=1, MaxEntries=1, Bug="missing_after_qa_no_such")
    (violation,) = explore(spec, check_deadlock=False).violations
    last = violation.trace[-1].state
    assert violation.name == "NoAckedEntryLost"
    assert {b for (e, b) in last.writer_acks if e == 0} == set(cex.acked)
    assert last.rec[0].no_such == set(cex.no_such)
