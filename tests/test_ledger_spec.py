"""The Python ledger spec on its own: striping, constants, pinned state counts, seeded bugs."""

from __future__ import annotations

import pytest
from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.ledger.ledger import BUGS, CLOSED, OPEN, WRITER, LedgerSpec, LedgerState, Msg, payload
from ledgerspec.spec.ledger.ledger_trace import EXPLAIN
from ledgerspec.tools.model_checking.explorer.explorer import explore


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
    ({"MaxEntries": 1}, 1898),
    ({"MaxEntries": 2}, 54558),
    ({"MaxEntries": 1, "E": 3, "Qw": 3, "Qa": 2}, 70209),
    ({"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1, "NumRecoverers": 2}, 37190),
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
    assert result.distinct_states == 34425


def _run(spec: LedgerSpec, s: LedgerState | None, *steps: tuple[object, ...]) -> LedgerState:
    """The state after the named actions from ``s`` (the initial state if None), each keeping every invariant."""
    s = next(iter(spec.init_states())) if s is None else s
    for action, *args in steps:
        t = getattr(spec, str(action))(s, *args)
        assert t is not None, f"{action}{tuple(args)} is not enabled"
        assert spec.invariant_failures(t) == [], action
        s = t
    return s


def add(bookie: int, entry: int, lac: int = -1) -> Msg:
    return Msg("AddReq", WRITER, bookie, entry, lac)


def test_a_resend_after_an_ensemble_change_carries_the_lac_its_add_was_packaged_with() -> None:
    # E=2, Qw=1: entry 0 goes to bookie 1, entry 1 to bookie 2. Entry 1 is packaged before entry 0 completes.
    spec = LedgerSpec(NumBookies=3, E=2, Qw=1, Qa=1, MaxEntries=2, MaxCrashes=1)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    assert (s.writer_lac, s.writer_add_lac) == (0, (-1, -1))
    t = _run(spec, s, ("BookieCrashes", 2), ("WriterChangesEnsemble", 2, 3))
    assert t.net - s.net == {add(3, 1, lac=-1)}  # PendingAddOp's toSend, not the writer's LAC of now (0)


def test_an_add_carries_a_lac_behind_the_writers_only_with_lac_lag_and_never_behind_the_last_adds() -> None:
    # E=2, Qw=1: entry 0 on bookie 1, entry 1 on bookie 2. The throttle lets entry 1 in once entry 0 completed.
    constants = {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 3, "Throttle": 1}
    steps = (("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    for lag, allowed in ((0, [0]), (1, [-1, 0])):
        spec = LedgerSpec(LacLag=lag, **constants)
        s = _run(spec, None, *steps)
        assert list(spec.packaged_lacs(s)) == allowed and spec.WriterAddsEntry(s, 1) is None
    t = _run(spec, s, ("WriterAddsEntry", 0), ("BookieReceivesAdd", add(2, 1, lac=0), True))
    assert t.writer_add_lac == (-1, 0, -1) and list(spec.packaged_lacs(t)) == [0, 1]  # not -1: entry 1 carried 0


def test_a_bookie_whose_add_completed_without_it_is_replaced_though_no_pending_add_goes_to_it() -> None:
    # E=3 Qw=2 Qa=1: entry 0 goes to bookies 1 and 2 and completes on bookie 2's ack; entry 1 goes to 2 and 3.
    # BookKeeper keeps the failure that reaches entry 0's add after it completed and replaces bookie 1 at the
    # next add (PendingAddOp.initiate, maybeHandleDelayedWriteBookieFailure, 4.17.2).
    spec = LedgerSpec(NumBookies=4, E=3, Qw=2, Qa=1, MaxEntries=2, MaxLoss=1, NumRecoverers=0)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(2, 0), True), ("WriterAddsEntry", 0))
    assert (s.writer_lac, spec.writer_write_set(s, 1)) == (0, (2, 3))
    assert spec.WriterChangesEnsemble(s, 1, 4) is None  # entry 0's request to bookie 1 is still on its way
    t = _run(spec, s, ("NetworkLosesMessage", add(1, 0)), ("WriterChangesEnsemble", 1, 4))
    assert t.meta_segments == ((0, (1, 2, 3)), (1, (4, 2, 3))) and t.net == s.net - {add(1, 0)}  # nothing resent
    assert spec.WriterChangesEnsemble(_run(spec, s, ("NetworkLosesMessage", add(2, 1, lac=0))), 1, 4) is None


def test_a_recovery_replaces_a_bookie_whose_write_back_completed_without_it_as_it_sends_the_next() -> None:
    # E=2 Qw=2 Qa=1, both entries on bookies 1 and 2 with LAC -1: the recovery writes both back. Entry 0's
    # write-back completes on bookie 1's ack; its request to bookie 2 is lost. Write-backs are recovery adds of
    # the same PendingAddOp: the failure is kept, and the next write-back's initiate replaces bookie 2
    # (notifyWriteFailed, maybeHandleDelayedWriteBookieFailure; ReadOnlyLedgerHandle, 4.17.2).
    spec = LedgerSpec(NumBookies=3, E=2, Qw=2, Qa=1, MaxEntries=2, MaxLoss=1, NumRecoverers=1)
    stored = [("BookieReceivesAdd", add(b, e), True) for e in (0, 1) for b in (1, 2)]
    s = _run(spec, None, ("WriterAddsEntry", -1), ("WriterAddsEntry", -1), *stored, ("RecovererStartsRecovery", 1))
    fenced = _run(spec, s, *(("BookieReceivesFenceRead", Msg("FenceReq", 1, b, fence=True), True) for b in (1, 2)))
    s = _run(spec, fenced, ("BookieReceivesRecoveryRead", Msg("ReadReq", 1, 1, 0, fence=True), True))

    def write_back(b: int, e: int) -> Msg:
        return Msg("AddReq", 1, b, e, -1, recovery=True, data=payload(e))

    s = _run(spec, s, ("BookieReceivesAdd", write_back(1, 0), True), ("NetworkLosesMessage", write_back(2, 0)))
    assert spec.recovery_lac(s, s.rec[0]) == 0 and spec.recoverer_gave_up_on(s, 1, 2)
    assert spec.RecovererChangesEnsemble(s, 1, 2, 3) is None  # no write-back pending: nothing sends
    assert EXPLAIN["RecovererChangesEnsemble"](spec, s, 1, 2, 3).startswith("no write-back is pending")
    assert "no write-back sent to bookie 1 has timed out" in EXPLAIN["RecovererChangesEnsemble"](
        spec, _run(spec, s, ("BookieReceivesRecoveryRead", Msg("ReadReq", 1, 1, 1, fence=True), True)), 1, 1, 3
    )
    s = _run(spec, s, ("BookieReceivesRecoveryRead", Msg("ReadReq", 1, 1, 1, fence=True), True))
    assert write_back(2, 1) in s.net  # entry 1's write-back to bookie 2 is on its way: it has not timed out
    t = _run(spec, s, ("RecovererChangesEnsemble", 1, 2, 3))
    assert t.rec[0].ensembles == ((1, (1, 3)),) and t.net - s.net == {write_back(3, 1)}


def test_a_resend_keeps_the_data_its_add_was_packaged_with_and_the_seeded_bug_does_not() -> None:
    # Entry 0 goes to bookie 1, entry 1 to bookie 2; bookie 1 crashes before it stores entry 0.
    steps = (("WriterAddsEntry", -1), ("WriterAddsEntry", -1), ("BookieCrashes", 1), ("WriterChangesEnsemble", 1, 3))
    constants = {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 2, "MaxCrashes": 1}
    spec = LedgerSpec(**constants)
    s = _run(spec, None, *steps)
    resent = Msg("AddReq", WRITER, 3, 0, -1, data=payload(0))
    assert resent in s.net and payload(0) != 0  # data is not the entry id
    t = _run(spec, s, ("BookieReceivesAdd", resent, True))
    assert t.bookie_data[2] == {(0, payload(0))} and t.writer_lac == 0
    # The seeded bug resends the newest add's bytes: bookie 3 then holds entry 0 <= LAC with entry 1's data.
    buggy = LedgerSpec(Bug="resend_reused_buffer", **constants)
    s = _run(buggy, None, *steps)
    wrong = Msg("AddReq", WRITER, 3, 0, -1, data=payload(1))
    assert wrong in s.net and repr(wrong) == "AddReq(c0 b3 e0 lac=-1 data=101)"
    t = buggy.BookieReceivesAdd(s, wrong, True)
    assert t is not None and t.meta_status == OPEN and t.writer_lac == 0
    assert [name for name, _ in buggy.invariant_failures(t)] == ["ReadersAgreeOnContent"]


def test_a_plain_reader_reads_up_to_the_lac_while_the_writer_writes() -> None:
    # E=2, Qw=1: entry 0 on bookie 1, entry 1 on bookie 2, which carries LAC 0.
    spec = LedgerSpec(NumBookies=3, E=2, Qw=1, Qa=1, MaxEntries=2, NumReaders=1)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    assert spec.ReaderReadsLac(s, 1, 0) is None  # the writer's LAC is 0, but no bookie serves it yet
    assert spec.ReaderReadsEntry(s, 1, 0, 1) is None  # entry 0 is past the reader's LAC (-1)
    s = _run(spec, s, ("WriterAddsEntry", 0), ("BookieReceivesAdd", add(2, 1, lac=0), True), ("ReaderReadsLac", 1, 0))
    t = _run(spec, s, ("ReaderReadsEntry", 1, 0, 1))
    assert (t.meta_status, t.reader_lac, t.reader_read) == (OPEN, (0,), ({(0, payload(0))},))
    assert spec.ReaderReadsEntry(t, 1, 1, 2) is None  # entry 1 is stored, but past the LAC the reader learned


def test_a_reader_that_reads_past_its_lac_sees_an_entry_not_yet_acknowledged() -> None:
    # E=3, Qw=2, Qa=2: entry 0 stored on bookie 1 alone is not acknowledged; the seeded bug reads it all the same.
    constants = {"MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0}
    s = _run(LedgerSpec(**constants), None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    assert s.writer_lac == -1 and LedgerSpec(**constants).ReaderReadsEntry(s, 1, 0, 1) is None
    buggy = LedgerSpec(Bug="reader_reads_unconfirmed", **constants)
    t = buggy.ReaderReadsEntry(s, 1, 0, 1)
    assert t is not None and t.reader_read == ({(0, payload(0))},)
    assert [name for name, _ in buggy.invariant_failures(t)] == ["ReaderSeesOnlyConfirmed"]


def lac_req(bookie: int, lac: int) -> Msg:
    return Msg("LacReq", WRITER, bookie, lac=lac)


def test_an_explicit_lac_lets_a_reader_learn_the_lac_no_add_piggybacked() -> None:
    # E=2, Qw=1, Qa=1, one entry: its add carries LAC -1, so only the explicit LAC tells a reader entry 0 is there.
    constants = {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0}
    spec = LedgerSpec(ExplicitLac=1, **constants)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    assert s.writer_lac == 0 and spec.ReaderReadsLac(s, 1, 0) is None
    assert LedgerSpec(**constants).WriterSendsExplicitLac(s, 0) is None  # ExplicitLac=0: explicitLacInterval 0
    sent = _run(spec, s, ("WriterSendsExplicitLac", 0))
    assert sent.net == {lac_req(1, 0)} and sent.writer_explicit_lac == 0  # the write set of entry 0
    assert spec.WriterSendsExplicitLac(sent, 0) is None  # nothing new to send
    t = _run(
        spec, sent, ("BookieReceivesWriteLac", lac_req(1, 0)), ("ReaderReadsLac", 1, 0), ("ReaderReadsEntry", 1, 0, 1)
    )
    assert (t.bookie_explicit_lac, t.reader_lac, t.reader_read) == ((0, -1, -1), (0,), ({(0, payload(0))},))
    # the explicit LAC is journaled: a crash and a restart keep it
    crashing = LedgerSpec(ExplicitLac=1, MaxCrashes=1, **constants)
    assert _run(crashing, t, ("BookieCrashes", 1), ("BookieRestarts", 1)).bookie_explicit_lac == (0, -1, -1)


def test_an_older_explicit_lac_arriving_later_replaces_the_newer_one() -> None:
    # E=2, Qw=2, Qa=1: each entry goes to bookies 1 and 2. FileInfo.setExplicitLac keeps the last, not the highest.
    spec = LedgerSpec(NumBookies=2, E=2, Qw=2, Qa=1, MaxEntries=2, NumRecoverers=0, ExplicitLac=1)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True), ("WriterSendsExplicitLac", 0))
    s = _run(
        spec, s, ("WriterAddsEntry", 0), ("BookieReceivesAdd", add(2, 1, lac=0), True), ("WriterSendsExplicitLac", 1)
    )
    assert s.net >= {lac_req(1, 0), lac_req(1, 1)}
    t = _run(spec, s, ("BookieReceivesWriteLac", lac_req(1, 1)), ("BookieReceivesWriteLac", lac_req(1, 0)))
    assert t.bookie_explicit_lac[0] == 0


def test_the_timer_sends_the_lac_of_when_it_packages_to_the_write_set_of_when_it_fired() -> None:
    # E=3, Qw=2, Qa=1: entry 0 -> bookies 1, 2; entry 1 -> bookies 2, 3. The timer fires at LAC 0 and packages LAC 1.
    spec = LedgerSpec(MaxEntries=2, Qa=1, NumRecoverers=0, ExplicitLac=1)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    s = _run(spec, s, ("BookieReceivesAdd", add(2, 1), True))
    assert s.writer_lac == 1
    t = _run(spec, s, ("WriterSendsExplicitLac", 0))
    assert t.net - s.net == {lac_req(1, 1), lac_req(2, 1)} and t.writer_explicit_lac == 0
    assert _run(spec, t, ("WriterSendsExplicitLac", 1)).writer_explicit_lac == 1


def test_a_closed_writer_sends_no_explicit_lac_and_a_fenced_bookie_takes_one() -> None:
    spec = LedgerSpec(NumBookies=3, E=2, Qw=1, Qa=1, MaxEntries=1, ExplicitLac=1)
    s = _run(spec, None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    assert spec.WriterSendsExplicitLac(_run(spec, s, ("WriterClosesLedger",)), 0) is None
    s = _run(spec, s, ("WriterSendsExplicitLac", 0), ("RecovererStartsRecovery", 1))
    s = _run(spec, s, ("BookieReceivesFenceRead", Msg("FenceReq", 1, 1, fence=True), True))
    assert s.bookie_fenced[0]
    assert _run(spec, s, ("BookieReceivesWriteLac", lac_req(1, 0))).bookie_explicit_lac[0] == 0


def test_an_explicit_lac_of_lastaddpushed_breaks_durability() -> None:
    constants = {"MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0, "ExplicitLac": 1}
    s = _run(LedgerSpec(**constants), None, ("WriterAddsEntry", -1))
    assert LedgerSpec(**constants).WriterSendsExplicitLac(s, 0) is None  # LAC -1: nothing to send
    buggy = LedgerSpec(Bug="explicit_lac_sends_lap", **constants)
    t = buggy.BookieReceivesWriteLac(buggy.WriterSendsExplicitLac(s, 0), lac_req(1, 0))
    assert t is not None and [name for name, _ in buggy.invariant_failures(t)] == ["ExplicitLacIsDurable"]
    assert buggy.ReaderReadsLac(t, 1, 0) is not None  # a reader would learn LAC 0 of an entry no bookie stored


def test_the_writer_closes_at_its_lac_with_adds_pending_and_late_acks_move_nothing() -> None:
    spec = LedgerSpec(MaxEntries=2)  # E=3, Qw=2, Qa=2: entry 0 -> bookies 1, 2; entry 1 -> bookies 2, 3
    s = _run(
        spec,
        None,
        ("WriterAddsEntry", -1),
        ("WriterAddsEntry", -1),
        ("BookieReceivesAdd", add(1, 0), True),
        ("BookieReceivesAdd", add(2, 0), True),
        ("BookieReceivesAdd", add(2, 1), True),
        ("WriterClosesLedger",),
    )
    assert (s.meta_status, s.meta_last_entry, s.writer_status) == (CLOSED, 0, "CLOSED")
    assert (s.writer_lac, s.writer_lap, s.writer_acks) == (0, 0, frozenset())  # lastAddPushed = lastAddConfirmed
    late = _run(spec, s, ("BookieReceivesAdd", add(3, 1), True))
    assert 1 in late.bookie_entries[2] and late.writer_lac == 0 and late.meta_last_entry == 0


def test_message_loss_keeps_every_invariant() -> None:
    result = explore(LedgerSpec(MaxEntries=1, MaxLoss=1), check_deadlock=False)
    assert result.violations == ()
    assert result.distinct_states == 11226


def test_symmetry_of_recovering_clients_reduces_states() -> None:
    spec = LedgerSpec(NumBookies=2, E=2, Qw=2, Qa=1, MaxEntries=1, NumRecoverers=2)
    reduced = explore(spec, check_deadlock=False, symmetry=True)
    assert reduced.violations == ()
    assert reduced.distinct_states == 18909  # orbits, of 37190 states without symmetry; TLC's VIEW gives the same
    # the states kept are states of the spec, not representatives: each the first found in its orbit
    kept = explore(spec, check_deadlock=False, symmetry=True, keep_states=True).states
    assert kept is not None and len(kept) == 18909 and len({spec.symmetry(s) for s in kept}) == 18909


# Each seeded bug, at the smallest model that shows it, and the invariant it breaks.
SEEDED = {
    "recovery_read_no_fence": ({"E": 3, "Qw": 3, "Qa": 2, "MaxEntries": 1}, "NoAckedEntryLost"),
    "fence_qa_total": ({"E": 3, "Qw": 2, "Qa": 1, "MaxEntries": 2}, "NoNewAcksToFencedWriter"),
    "lac_before_qa": ({"E": 3, "Qw": 2, "Qa": 2, "MaxEntries": 2}, "NoAckedEntryLost"),
    "missing_after_qa_no_such": ({"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1}, "NoAckedEntryLost"),
    "recovery_change_ends_at_lac": (
        {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 1, "MaxLoss": 1},
        "NoAckedEntryLost",
    ),
    "resend_reused_buffer": (
        {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 2, "MaxCrashes": 1},
        "ReadersAgreeOnContent",
    ),
    "reader_reads_unconfirmed": ({"MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0}, "ReaderSeesOnlyConfirmed"),
    "explicit_lac_sends_lap": (
        {"MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0, "ExplicitLac": 1},
        "ExplicitLacIsDurable",
    ),
}
# A different rule that is not unsafe: BP-46's ensemble coverage for fencing (docs/quorum.md).
STRICTER = {"fence_ensemble_coverage"}


def test_every_seeded_bug_has_a_model() -> None:
    assert set(SEEDED) | STRICTER == set(BUGS) - {"none"}


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


def test_missing_after_qa_no_such_entry_closes_the_ledger_before_an_acked_entry() -> None:
    constants, _ = SEEDED["missing_after_qa_no_such"]
    (violation,) = explore(LedgerSpec(Bug="missing_after_qa_no_such", **constants), check_deadlock=False).violations
    last = violation.trace[-1].state
    # Bookie 1 acked entry 0 (Qa=1); bookie 2 said NoSuchEntry: one reply, Qa of them, and the entry is gone.
    assert (0, 1) in last.writer_acks and last.rec[0].no_such == {2}
    assert last.meta_last_entry == -1 and last.writer_lac == 0


# E=4, Qw=2, Qa=2: bookies 1 and 3 meet every write set, but are fewer than E - Qa + 1 = 3.
GAP_MODEL = {"NumBookies": 4, "E": 4, "Qw": 2, "Qa": 2, "MaxEntries": 1}


def test_ensemble_coverage_is_safe_and_waits_for_more_fencing_replies() -> None:
    def fenced_by_1_and_3(s: LedgerState) -> bool:
        return any(r.phase not in ("IDLE", "FENCING") and r.fence_replies == {1, 3} for r in s.rec)

    bookkeeper = explore(LedgerSpec(**GAP_MODEL), check_deadlock=False, keep_states=True)
    bp46 = explore(LedgerSpec(Bug="fence_ensemble_coverage", **GAP_MODEL), check_deadlock=False, keep_states=True)
    assert bookkeeper.violations == () and bp46.violations == ()
    assert (bookkeeper.distinct_states, bp46.distinct_states) == (5110, 2527)
    assert bp46.reached == bookkeeper.reached == {r.name for r in LedgerSpec.reachables}
    # BookKeeper's rule moves on with replies from bookies 1 and 3 alone; BP-46's never does.
    assert bookkeeper.states is not None and bp46.states is not None
    assert any(fenced_by_1_and_3(s) for s in bookkeeper.states)
    assert not any(fenced_by_1_and_3(s) for s in bp46.states)


def test_with_replies_in_flight_two_bookies_acks_reach_the_writer_in_the_other_order_than_they_served() -> None:
    # E=Qw=2, Qa=2: bookie 1 serves entry 0 before bookie 2, and the writer takes bookie 2's ack first. With
    # RepliesInFlight = 0 the bookie's step is the writer's ack too, so the writer counts bookie 1's ack first:
    # that run's client and bookie logs have no one order of steps.
    spec = LedgerSpec(NumBookies=2, E=2, Qw=2, Qa=2, MaxEntries=1, NumRecoverers=0, MaxLoss=1, RepliesInFlight=1)
    served = _run(spec, None, ("WriterAddsEntry", -1), *(("BookieReceivesAdd", add(b, 0), True) for b in (1, 2)))
    assert served.bookie_entries == (frozenset({0}), frozenset({0})) and served.writer_acks == frozenset()
    ack_1, ack_2 = (Msg("AddAck", WRITER, b, 0, data=-1) for b in (1, 2))
    assert {ack_1, ack_2} <= served.net and repr(ack_2) == "AddAck(c0 b2 e0)"
    s = _run(spec, served, ("ClientReceivesReply", ack_2))
    assert s.writer_acks == {(0, 2)} and s.writer_lac == -1
    s = _run(spec, s, ("ClientReceivesReply", ack_1))
    assert s.writer_lac == 0 and not any(m.type == "AddAck" for m in s.net)
    # A reply in flight is awaited: the writer does not give up on bookie 1 while its ack may still come.
    assert not spec.timed_out(served, "AddReq", WRITER, 1, 0)
    (serve,) = (a for a in LedgerSpec.actions if a.name == "BookieReceivesAdd")
    pending = _run(spec, None, ("WriterAddsEntry", -1))
    assert serve.params is not None and {replied for _, replied in serve.params(spec, pending)} == {True}
    assert "the network loses it in a step of its own" in EXPLAIN["BookieReceivesAdd"](spec, pending, add(1, 0), False)
    assert EXPLAIN["ClientReceivesReply"](spec, s, ack_1).startswith("no reply AddAck(c0 b1 e0) is in flight")
    atomic = LedgerSpec(NumBookies=2, E=2, Qw=2, Qa=2, MaxEntries=1, NumRecoverers=0, MaxLoss=1)
    assert serve.params is not None and {replied for _, replied in serve.params(atomic, pending)} == {True, False}
    first = _run(atomic, None, ("WriterAddsEntry", -1), ("BookieReceivesAdd", add(1, 0), True))
    assert first.writer_acks == {(0, 1)} and "RepliesInFlight=0" in EXPLAIN["ClientReceivesReply"](atomic, first, ack_2)
