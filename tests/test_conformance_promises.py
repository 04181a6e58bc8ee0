"""Which promise a divergence breaks, every divergence of a trace, and what an event must report
(conformance/promises.py, the checker's going on after a divergence, TraceMapping.requires)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from explored_models import explored
from ledgerspec.conformance import Bounds, TraceChecker, check_trace, events_from_json
from ledgerspec.conformance.generate import WalkStep, random_walk, trace_events
from ledgerspec.conformance.promises import TYPE_INVARIANT, _Reading
from ledgerspec.conformance.verdict import CONFORMS, INCONCLUSIVE, VIOLATES, Verdict
from ledgerspec.spec import catalog
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.models import SeededBug
from ledgerspec.spec.tracing import ObservedChanges, TraceMapping, mapping_for
from ledgerspec.tools.model_checking.explorer.explorer import explore

MAPPED = [name for name in catalog.SPECS if catalog.find(name).models.explored]

# What the counterexample of each seeded bug, logged as its mode observes it, shows when checked against the spec
# without the bug: the promises broken (in the order of the spec's text), ("undecided", promise, variable) when the
# mode does not report what would decide it, "difference" when the mode sees the trace leave the spec but nothing it
# reports would name a promise, or "conforms" when the mode does not see the bug at all.
Expected = frozenset[str] | tuple[str, str, str] | str
SEEDED: dict[tuple[str, str], dict[str, Expected]] = {
    # The bookies see what each request asks of them, so a client's bug shows to them only where its requests
    # differ: a recovery read without the fencing flag, an add resent with another add's bytes.
    ("ledger", "recovery_read_no_fence"): {
        "full": {"NoAckedEntryLost"},
        "client": {"NoAckedEntryLost"},
        "bookies": "difference",
        "merged": {"NoAckedEntryLost"},
    },
    ("ledger", "fence_qa_total"): {
        "full": {"NoNewAcksToFencedWriter"},
        "client": ("undecided", "NoNewAcksToFencedWriter", "bookie_fenced"),
        "bookies": "conforms",
        "merged": {"NoNewAcksToFencedWriter"},
    },
    ("ledger", "lac_before_qa"): {
        "full": {"NoAckedEntryLost"},
        "client": {"NoAckedEntryLost"},
        "bookies": "conforms",
        "merged": {"NoAckedEntryLost"},
    },
    ("ledger", "missing_after_qa_no_such"): {
        "full": {"NoAckedEntryLost"},
        "client": {"NoAckedEntryLost"},
        "bookies": "conforms",
        "merged": {"NoAckedEntryLost"},
    },
    ("ledger", "recovery_change_ends_at_lac"): {
        "full": {"NoAckedEntryLost"},
        "client": {"NoAckedEntryLost"},
        "bookies": "conforms",
        "merged": {"NoAckedEntryLost"},
    },
    ("ledger", "resend_reused_buffer"): {
        "full": {"ReadersAgreeOnContent"},
        "client": "difference",
        "bookies": "difference",
        "merged": "difference",
    },
    ("ledger", "reader_reads_unconfirmed"): {
        "full": {"ReaderSeesOnlyConfirmed"},
        "client": {"ReaderSeesOnlyConfirmed"},
        "bookies": "conforms",
        "merged": {"ReaderSeesOnlyConfirmed"},
    },
    ("ledger", "explicit_lac_sends_lap"): {
        "full": {"ExplicitLacIsDurable"},
        "client": "difference",
        "bookies": {"ExplicitLacIsDurable"},
        "merged": {"ExplicitLacIsDurable"},
    },
    ("bookie", "ack_before_fsync"): {
        "full": {"AckedEntriesSurvive"},
        "client": ("undecided", "AckedEntriesSurvive", "last_marks"),
    },
    ("bookie", "mark_before_flush"): {
        "full": {"MarkNeverPassesUnflushedData", "AckedEntriesSurvive"},
        "client": "conforms",
    },
    ("bookie", "mark_before_flush-AckedEntriesSurvive"): {
        "full": {"MarkNeverPassesUnflushedData", "AckedEntriesSurvive"},
        "client": "conforms",
    },
    ("bookie", "fence_not_journaled"): {
        "full": {"FencedLedgerStaysFenced"},
        "client": ("undecided", "FencedLedgerStaysFenced", "fenced_flushed"),
    },
    ("bookie", "mark_not_advanced_in_replay"): {"full": {"MarkCoversReplayedJournal"}, "client": "conforms"},
    ("bookie", "delete_journal_at_mark"): {"full": {"JournalKeptFromMark"}, "client": "conforms"},
    ("bookie", "delete_journal_at_mark-AckedEntriesSurvive"): {
        "full": {"JournalKeptFromMark", "AckedEntriesSurvive"},
        "client": "conforms",
    },
    ("bookie", "delete_journal_at_mark-FencedLedgerStaysFenced"): {
        "full": {"JournalKeptFromMark", "FencedLedgerStaysFenced"},
        "client": "conforms",
    },
    ("bookie", "mark_moves_backwards"): {"full": {"MarkNeverMovesBackwards"}, "client": "conforms"},
    ("bookie", "mark_moves_backwards-JournalKeptFromMark"): {
        "full": {"MarkNeverMovesBackwards", "JournalKeptFromMark"},
        "client": "conforms",
    },
    # The full observer of the cursor does not see ``durable``, what completed persists covered. The consumer sees
    # the close that persisted the ack, and the restore that lost it, but not what the close persisted.
    ("cursor", "restore_ignores_no_ledger"): {
        "full": ("undecided", "OnlyUnpersistedAcksRedelivered", "durable"),
        "client": "difference",
    },
    ("cursor", "no_store_fallback"): {
        "full": ("undecided", "OnlyUnpersistedAcksRedelivered", "durable"),
        "client": "conforms",
    },
    # The consumer decides it too: the promise said over ``covered`` and ``acked``.
    ("cursor", "restore_skips_unacked"): {
        "full": {"CursorSkipsNoUnackedMessage"},
        "client": {"CursorSkipsNoUnackedMessage"},
    },
    ("cursor", "trim_deletes_needed_ledger"): {"full": {"TrimKeepsUnconsumedEntries"}, "client": "conforms"},
    # A reset's record that brings back acks from before it, or the state before the reset written after it: the
    # restored cursor covers what the reset made unacknowledged, and the consumer sees it.
    ("cursor", "reset_keeps_acks"): {
        "full": {"CursorSkipsNoUnackedMessage"},
        "client": {"CursorSkipsNoUnackedMessage"},
    },
    ("cursor", "ack_persists_over_reset"): {
        "full": {"CursorSkipsNoUnackedMessage"},
        "client": {"CursorSkipsNoUnackedMessage"},
    },
    # The managed ledger's position of the cursor is the full observer's only: the consumer sees no skip.
    ("cursor", "skip_unconsumed_ledger"): {"full": {"TrimPositionBehindCursor"}, "client": "conforms"},
    ("autorecovery", "metadata_before_copy"): {"full": {"MetadataNamesOnlyHolders"}, "metadata": "conforms"},
    ("autorecovery", "metadata_before_copy-NoEntryLostWhileReplicaRemains"): {
        "full": {"NoEntryLostWhileReplicaRemains", "MetadataNamesOnlyHolders"},
        "metadata": "conforms",
    },
    # The audit must report the mark it leaves: one that leaves none is seen leaving none.
    ("autorecovery", "auditor_marks_nothing"): {
        "full": {"LostBookiesMarked"},
        "metadata": ("undecided", "LostBookiesMarked", "lost_seen"),
    },
    # The watcher sees an open segment's ensemble change, which no worker makes: a difference; the bookies' data
    # would decide whether the new bookie lacks what it is named for.
    ("autorecovery", "copies_open_fragment"): {
        "full": {"MetadataNamesOnlyHolders"},
        "metadata": ("undecided", "MetadataNamesOnlyHolders", "data"),
    },
    # The shortest counterexamples end at the step that breaks the promise, which a client sees only where it is
    # its own: the duplicate a consumer reads; a deleted ledger, a skipped answer, a list overwritten show later.
    ("managed_ledger", "trim_deletes_needed_ledger"): {"full": {"TrimKeepsUnconsumedEntries"}, "client": "conforms"},
    ("managed_ledger", "dedup_forgets_on_reopen"): {
        "full": {"DedupPersistsNoDuplicate"},
        "client": {"DedupPersistsNoDuplicate"},
    },
    ("managed_ledger", "reopen_confirms_new_ledger"): {"full": {"LastConfirmedIsLastEntry"}, "client": "conforms"},
    ("managed_ledger", "closing_ledger_takes_adds"): {"full": {"LedgerHoldsItsLimit"}, "client": "conforms"},
    ("managed_ledger", "unknown_answered_as_duplicate"): {
        "full": {"NoAcknowledgedMessageLost"},
        "client": "conforms",
    },
    ("managed_ledger", "failed_creation_acks_queued"): {"full": {"NoAcknowledgedMessageLost"}, "client": "conforms"},
    ("managed_ledger", "blind_ledger_list_write"): {"full": {"WritesGoToLastLedger"}, "client": "conforms"},
    # the persist is hidden from the clients, and the counterexample has no crash that would show what it wrote
    ("managed_ledger", "persists_read_position"): {"full": {"DurableMarkDeleteAcknowledged"}, "client": "conforms"},
}


def _seeded(spec_name: str, bug: str) -> SeededBug:
    (found,) = [b for b in catalog.find(spec_name).models.seeded_bugs if b.name == bug]
    return found


def _counterexample(spec_name: str, seeded: SeededBug) -> tuple[Any, Any, tuple[WalkStep, ...]]:
    """The buggy spec, the correct one, and the explorer's shortest behaviour of the buggy one that breaks the
    bug's property."""
    entry = catalog.find(spec_name)
    buggy = entry.python(**seeded.constants, Bug=seeded.bug)
    (violation, *_) = explore(buggy, check_deadlock=False, invariants=seeded.checked).violations
    walk = tuple(WalkStep(s.step.action, tuple(v for _, v in s.step.params), s.state) for s in violation.trace)
    return buggy, entry.python(**seeded.constants), walk


def test_the_table_has_every_seeded_bug_of_every_mapped_spec() -> None:
    seeded = {(name, b.name) for name in MAPPED for b in catalog.find(name).models.seeded_bugs}
    assert seeded == set(SEEDED)
    for (name, _), modes in SEEDED.items():
        assert set(modes) == set(mapping_for(name).modes)


@pytest.mark.parametrize(("spec_name", "bug"), list(SEEDED), ids=["-".join(k) for k in SEEDED])
def test_a_seeded_bug_is_named_by_the_promise_it_breaks(spec_name: str, bug: str) -> None:
    """Its counterexample, as a trace, against the spec without the bug: the verdict names the promises the reports
    establish as broken, and in a mode that cannot establish them, says which reports would."""
    seeded = _seeded(spec_name, bug)
    buggy, correct, walk = _counterexample(spec_name, seeded)
    for mode, expected in SEEDED[spec_name, bug].items():
        verdict = check_trace(events_from_json(trace_events(buggy, walk, mode, "t")), correct, mode)
        if expected == "conforms":
            assert verdict.status == CONFORMS, (mode, verdict.reason)
            continue
        assert verdict.status == VIOLATES, (mode, verdict.reason)
        broken = {b.name for b in verdict.broken_promises}
        if expected == "difference":
            assert not broken and verdict.finding == "difference", (mode, broken)
            assert not [u for f in verdict.failures for u in f.undecided], mode
            continue
        if isinstance(expected, tuple):
            _, promise, variable = expected
            assert not broken and verdict.finding == "difference", (mode, broken)
            undecided = [u for f in verdict.failures for u in f.undecided if u.startswith(promise + " ")]
            assert undecided and variable in undecided[0], (mode, [f.undecided for f in verdict.failures])
            continue
        assert broken == expected, mode
        assert verdict.finding == "bug" and verdict.reason.startswith("violates ")
        if mode == "full" and seeded.invariant not in broken:
            pytest.fail(f"{seeded.invariant}, which the bug breaks, is not named in full mode")
        for promise in verdict.broken_promises:
            assert promise.evidence, promise.name
            for evidence in promise.evidence:  # each value named was reported there, as the evidence says
                assert evidence.file == "<memory>" and evidence.line == evidence.event_index + 1


def test_a_correct_trace_is_never_judged() -> None:
    """Conforming traces carry no promise and no finding."""
    spec = LedgerSpec(MaxEntries=1)
    walk = (WalkStep("Init", (), next(iter(spec.init_states()))),)
    verdict = check_trace(events_from_json(trace_events(spec, walk, "full", "t")), spec)
    assert verdict.status == CONFORMS and verdict.finding is None and verdict.broken_promises == ()


# -- the evaluation and its premises --------------------------------------------------------------
@pytest.mark.parametrize("spec_name", MAPPED)
def test_a_promise_read_through_the_proxy_says_what_it_says_on_the_state(spec_name: str) -> None:
    """The proxy that records what a promise reads changes nothing of its answer, and what it records are
    variables of the state: the judgement reads what the promise reads."""
    model = next(iter(catalog.find(spec_name).models.explored))
    spec, states = explored(spec_name, model)
    variables = set(spec.variables())
    for s in states[:3000]:
        for inv in spec.invariants:
            read: set[str] = set()
            assert inv.fn(spec, _Reading(s, read)) == inv.fn(spec, s), inv.name
            assert read <= variables and (read or inv.name == TYPE_INVARIANT), (inv.name, read)


@pytest.mark.parametrize("spec_name", MAPPED)
def test_no_hidden_step_changes_what_its_mode_observes(spec_name: str) -> None:
    """The premise that lets a reported value stand until the next report: a step a mode hides never changes a
    variable or projection the mode observes, but one with a witness (``ObservationMode.witnessed``), and then it
    advances the witness too, which the next report then shows."""
    mapping = mapping_for(spec_name)
    taken = dict.fromkeys(mapping.modes, 0)
    witnessed = dict.fromkeys(mapping.modes, 0)
    for model in catalog.find(spec_name).models.explored:
        spec, states = explored(spec_name, model)
        for mode in mapping.modes.values():
            hidden = [a for a in spec.actions if a.name in mode.hidden]
            for s in states:
                for act in hidden:
                    for args in [()] if act.params is None else list(act.params(spec, s)):
                        t = act.fn(spec, s, *args)
                        if t is None or not mode.hides(act.name, args):
                            continue
                        taken[mode.name] += 1
                        for name in mode.observes:
                            before, after = mapping.observe(spec, s, name), mapping.observe(spec, t, name)
                            if after == before:
                                continue
                            witness = mode.witnessed.get(name)
                            assert witness is not None, (mode.name, act.name, args, name)
                            counted = mapping.observe(spec, s, witness), mapping.observe(spec, t, witness)
                            assert counted[1] > counted[0], (mode.name, act.name, args, name, witness)
                            witnessed[mode.name] += 1
    assert all(taken[m.name] for m in mapping.modes.values() if m.hidden), taken
    # a witness no hidden step advances would be one too many
    assert all(witnessed[m.name] for m in mapping.modes.values() if m.witnessed), witnessed


@pytest.mark.parametrize("spec_name", [n for n in MAPPED if mapping_for(n).observed_promises])
def test_an_observed_promise_fails_only_where_its_invariant_fails(spec_name: str) -> None:
    """On every state of the explored models, with and without the seeded bugs: where the promise said over
    observed names fails, the invariant fails; and it does fail somewhere (it is not vacuous)."""
    mapping = mapping_for(spec_name)
    entry = catalog.find(spec_name)
    failed = 0
    for said in mapping.observed_promises:
        (inv,) = [i for i in entry.python.invariants if i.name == said.invariant]
        for bug in [b.name for b in entry.models.seeded_bugs] + [None]:
            seeded = _seeded(spec_name, bug) if bug is not None else None
            if seeded is not None:
                spec, _, walk = _counterexample(spec_name, seeded)
                states: Any = [step.state for step in walk]
            else:
                spec, states = explored(spec_name, next(iter(entry.models.explored)))
            for s in states:
                message = said.fn(spec, {n: mapping.observe(spec, s, n) for n in said.reads})
                if message is not None:
                    failed += 1
                    assert inv.fn(spec, s) is not None, (said.invariant, bug, s)
    assert failed


# -- verdicts ---------------------------------------------------------------------------------------
def _fence_qa_total_client() -> Verdict:
    seeded = _seeded("ledger", "fence_qa_total")
    buggy, correct, walk = _counterexample("ledger", seeded)
    return check_trace(events_from_json(trace_events(buggy, walk, "client", "t")), correct, "client")


def test_a_divergence_that_shows_no_broken_promise_says_what_would_decide_it() -> None:
    verdict = _fence_qa_total_client()
    assert verdict.status == VIOLATES and verdict.finding == "difference"
    assert verdict.failure is not None and verdict.failure.kind == "diverges"
    assert verdict.failure.headline.startswith(f"event {verdict.failure.event_index} diverges from the spec: ")
    assert any("bookie_fenced" in u and "would decide it" in u for u in verdict.failure.undecided)


LAC_MODEL = {"MaxEntries": 3, "MaxLoss": 1, "MaxCrashes": 1}


def _lac_before_qa_traces(mode: str) -> list[tuple[list[Any], Verdict]]:
    """Random walks of the spec whose LAC moves on the first ack, as traces, with their verdicts."""
    buggy = LedgerSpec(**LAC_MODEL, Bug="lac_before_qa")
    checker = TraceChecker(LedgerSpec(**LAC_MODEL), mode)
    rng = random.Random(3)
    out = []
    for i in range(60):
        walk = random_walk(buggy, rng, 40, weights={"WriterClosesLedger": 0.05})
        events = events_from_json(trace_events(buggy, walk, mode, f"t{i}"))
        out.append((events, checker.check(events)))
    return out


@pytest.mark.parametrize("mode", ["full", "client"])
def test_every_divergence_is_told_in_order_up_to_the_bound(mode: str) -> None:
    checked = [(events, v) for events, v in _lac_before_qa_traces(mode) if v.status == VIOLATES]
    several = [(events, v) for events, v in checked if len(v.failures) > 1]
    assert several, "no trace diverged twice"
    for _, v in checked:
        indexes = [f.event_index for f in v.failures]
        assert indexes == sorted(set(indexes)), indexes
        assert v.failure is not None and v.checked == v.failure.event_index
        told = [b.name for f in v.failures for b in f.broken]
        assert len(told) == len(set(told)), told  # a promise is told at the divergence that first shows it
    events, chosen = several[0]
    bounded = TraceChecker(LedgerSpec(**LAC_MODEL), mode, Bounds(max_divergences=1)).check(events)
    assert bounded.status == VIOLATES and bounded.further == () and bounded.failure == chosen.failure
    assert bounded.stopped is not None and bounded.stopped.startswith("stopped after 1 divergences")
    two = TraceChecker(LedgerSpec(**LAC_MODEL), mode, Bounds(max_divergences=2)).check(events)
    assert two.failures == chosen.failures[:2]


def test_a_lost_entry_is_found_after_an_earlier_difference() -> None:
    """The bug that loses an entry shows after the divergence that only moved the LAC early: going on from the
    reported state finds it, and the verdict is a bug."""
    verdicts = [v for _, v in _lac_before_qa_traces("client")]
    assert any(v.failure is not None and not v.failure.broken and any(f.broken for f in v.further) for v in verdicts), [
        [f.kind for f in v.failures] for v in verdicts if v.status == VIOLATES
    ]
    assert all(v.finding == ("bug" if v.broken_promises else "difference") for v in verdicts if v.status == VIOLATES)


def test_a_verdict_with_its_promises_and_divergences_comes_back_from_its_json() -> None:
    for verdict in [v for _, v in _lac_before_qa_traces("full")] + [_fence_qa_total_client()]:
        data = json.loads(json.dumps(verdict.to_json()))
        assert Verdict.from_json(data) == verdict
        if verdict.status == VIOLATES:
            assert data["finding"] == verdict.finding
            assert data["promises"] == sorted({b.name for b in verdict.broken_promises})
            row = verdict.to_row()
            assert row["finding"] == verdict.finding and row["divergences"] == len(verdict.failures)


# -- what an event must report ------------------------------------------------------------------------
def test_an_event_without_what_it_must_report_is_refused_with_its_place() -> None:
    from ledgerspec.spec.cursor.cursor import CursorSpec

    lines = [
        {"v": 1, "trace": "c", "process": "consumer", "seq": 1, "type": "EntryPublished"},
        {"v": 1, "trace": "c", "process": "consumer", "seq": 2, "type": "ConsumerAcks", "params": {"ledger": 0}},
    ]
    verdict = check_trace(events_from_json(lines, "acks.ndjson"), CursorSpec(), "client")
    assert verdict.status == INCONCLUSIVE
    (error,) = verdict.input_errors
    assert (error.file, error.line) == ("acks.ndjson", 2)
    assert "a ConsumerAcks event must report acked in mode 'client'" in error.message
    reported = {**lines[1], "observed": {"acked": [[0, 0, 0]]}}
    assert check_trace(events_from_json([lines[0], reported]), CursorSpec(), "client").input_errors == ()


def test_a_recorder_reports_what_an_event_must_report_even_unchanged() -> None:
    mapping = mapping_for("ledger")
    spec = LedgerSpec(MaxEntries=1)
    state = next(iter(spec.init_states()))
    observer = ObservedChanges(mapping, spec, ["meta_last_entry", "meta_status", "writer_lac"])
    assert set(observer.since_last(state)) == {"meta_last_entry", "meta_status", "writer_lac"}
    assert observer.since_last(state) == {}
    assert observer.since_last(state, "WriterClosesLedger") == {"meta_last_entry": -1, "meta_status": "OPEN"}


def test_a_mapping_refuses_requirements_it_cannot_hold() -> None:
    spec_type = catalog.find("ledger").python
    with pytest.raises(ValueError, match="unknown action NoSuchStep"):
        TraceMapping(spec_type, (), requires={"NoSuchStep": {"meta_status"}})
    with pytest.raises(ValueError, match="unknown observed names colour"):
        TraceMapping(spec_type, (), requires={"WriterClosesLedger": {"colour"}})


@pytest.mark.parametrize("bounds", [Bounds(max_hidden_steps=0), Bounds(max_candidates=1)], ids=["hidden", "candidates"])
def test_a_promise_the_reports_break_is_told_though_a_bound_cut_the_search(bounds: Bounds) -> None:
    """A bound that cuts the search leaves the first divergence in doubt, but not a promise broken on the reports
    alone: the consumer sees the restored cursor skip a message it never acknowledged, whatever the candidates."""
    buggy, correct, walk = _counterexample("cursor", _seeded("cursor", "restore_skips_unacked"))
    events = events_from_json(trace_events(buggy, walk, "client", "t"))
    verdict = check_trace(events, correct, "client", bounds)
    assert verdict.status == VIOLATES and verdict.finding == "bug", verdict.reason
    assert verdict.promise_names == ("CursorSkipsNoUnackedMessage",)
    assert verdict.bound is not None and verdict.bound.event_index < len(events)
    assert "where the trace first leaves the spec is not known: search bound" in verdict.reason
    # Under the same bound, a trace that breaks no promise stays undecided.
    fine = events_from_json(trace_events(correct, _correct_walk(correct, walk), "client", "t"))
    assert check_trace(fine, correct, "client", bounds).status in (INCONCLUSIVE, CONFORMS)


def _correct_walk(spec: Any, walk: tuple[WalkStep, ...]) -> tuple[WalkStep, ...]:
    """The buggy walk's actions replayed on the correct spec, as far as it takes them."""
    state = next(iter(spec.init_states()))
    steps = [WalkStep(walk[0].action, walk[0].args, state)]
    actions = {a.name: a for a in spec.actions}
    for step in walk[1:]:
        nxt = actions[step.action].fn(spec, state, *step.args)
        if nxt is None:
            break
        state = nxt
        steps.append(WalkStep(step.action, step.args, state))
    return tuple(steps)
