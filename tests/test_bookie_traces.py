"""The bookie spec under the oracle: its trace mapping (spec/bookie/bookie_trace.py) and traces of the reference bookie
(reference/bookie/trace.py), checked in both observation modes."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
from explored_models import explored
from ledgerspec.conformance import TraceChecker, events_from_json
from ledgerspec.reference.bookie.refinement import ActionRef
from ledgerspec.reference.bookie.trace import (
    BookieRun,
    RecordedRun,
    bookie_runs,
    random_bookie_traces,
    record_run,
    spec_steps,
)
from ledgerspec.reference.bookie.workloads import WORKLOAD_CONFIG, WORKLOAD_SPEC, random_spec
from ledgerspec.spec.bookie.bookie import BUGS, SYNC_THREAD, WRITE_CACHE, ZERO_MARK, BookieSpec, BookieState
from ledgerspec.spec.bookie.bookie_trace import (
    CLIENT,
    CLIENT_OBSERVES,
    FULL,
    GUARDS,
    TRACE,
    messages,
    persisted_mark,
    readable,
    unsynced_from,
)
from ledgerspec.spec.tracing import Message, mapping_for
from ledgerspec.tools.cli.main import main


# -- the mapping --------------------------------------------------------------------------
def test_mapping_is_found_by_spec_name_and_speaks_the_specs_vocabulary() -> None:
    assert mapping_for("bookie") is TRACE
    assert list(TRACE.actions) == [a.name for a in BookieSpec.actions]
    assert {a.name for a in attrs.fields(BookieState)} | {
        "unsynced_from",
        "readable",
        "persisted_mark",
    } == FULL.observes
    assert TRACE.param_codecs["JournalForceWrites"]["upto"].encode((2, 1)) == [2, 1]


def test_explanations_name_an_unknown_ledger_or_entry() -> None:
    spec, states = explored("bookie", "default", "none")
    assert TRACE.explain["BookieAddsEntry"](spec, states[0], 3, 0) == "there is no ledger 3 in the model (ledgers 1..1)"
    assert "there is no entry 5" in str(TRACE.explain["BookieSetsExplicitLac"](spec, states[0], 1, 5))


def test_every_guard_holds_in_each_state_that_breaks_its_property() -> None:
    broken: set[str] = set()
    for bug in BUGS:
        spec, states = explored("bookie", "default", bug)
        for s in states:
            for inv in spec.invariants:
                if inv.fn(spec, s) is not None:
                    broken.add(inv.name)
                    assert all(g.fn(spec, s) for g in GUARDS.get(inv.name, ())), (bug, inv.name)
    assert broken >= {"MarkNeverPassesUnflushedData", "JournalKeptFromMark", "AckedEntriesSurvive"}


def test_every_guard_holds_somewhere() -> None:
    spec, states = explored("bookie", "default", "none")
    for prop, guards in GUARDS.items():
        for g in guards:
            assert any(g.fn(spec, s) for s in states), (prop, g.name)


def test_hidden_steps_change_nothing_a_client_observes() -> None:
    """Client events report their observations once per reference step, on its last visible event: sound only
    because no hidden step changes what a client observes."""
    spec, states = explored("bookie", "default", "none")
    hidden = [a for a in spec.actions if a.name in CLIENT.hidden]
    assert {a.name for a in hidden} == set(CLIENT.hidden)
    for s in states:
        for act in hidden:
            for args in [()] if act.params is None else list(act.params(spec, s)):
                t = act.fn(spec, s, *args)
                if t is not None:
                    for name in CLIENT_OBSERVES:
                        assert TRACE.observe(spec, t, name) == TRACE.observe(spec, s, name), (act.name, name)


def test_projections() -> None:
    spec = BookieSpec()
    s = spec.BookieAddsEntry(spec.initial_state(), 1, 0)
    assert s is not None and unsynced_from(spec, s) == (1, 0) and readable(spec, s) == {(1, 0)}
    t = spec.JournalForceWrites(s, (1, 1))
    assert t is not None and unsynced_from(spec, t) == (1, 1) and persisted_mark(spec, t) == (0, 0)
    down = spec.BookieCrashes(t, (1, 1))
    assert down is not None and readable(spec, down) == frozenset()


def test_lanes_and_messages() -> None:
    assert sorted(["machine", "sync-thread", "client", "journal", "bookie"], key=TRACE.lane_order) == [
        "client",
        "bookie",
        "journal",
        "sync-thread",
        "machine",
    ]
    assert messages("BookieAddsEntry", {"ledger": 1, "entry": 2}) == (Message("client", "bookie", "add (1, 2)"),)
    assert messages("JournalForceWrites", {}) == (Message("journal", "client", "replies"),)
    assert messages("FlusherTakesMark", {"flusher": 2}) == ()
    assert TRACE.lane_order("write-cache") < TRACE.lane_order("machine")


# -- reading the reference bookie's steps ---------------------------------------------------
def test_spec_steps_read_a_checkpoint_and_the_deletions_it_allows() -> None:
    spec = BookieSpec(RecordsPerJournal=1, MaxEntries=2)
    s = spec.BookieAddsEntry(spec.initial_state(), 1, 0)
    s = spec.JournalRollsOver(spec.JournalForceWrites(s, (1, 1)))
    s = spec.BookieAddsEntry(s, 1, 1)
    s = before = spec.JournalForceWrites(s, (2, 1))  # the mark is in file 2: file 1 may go after the checkpoint
    for action in ("FlusherTakesMark", "LedgerStorageFlushes", "CheckpointPersistsMark"):
        s = getattr(spec, action)(s, SYNC_THREAD)
    after = spec.JournalFileDeleted(s, 1)
    refs = (
        ActionRef("FlusherTakesMark", (SYNC_THREAD,)),
        ActionRef("LedgerStorageFlushes", (SYNC_THREAD,)),
        ActionRef("CheckpointPersistsMark", (SYNC_THREAD,)),
        ActionRef("JournalFileDeleted"),
    )
    assert spec_steps(spec, refs, before, after) == [
        ("FlusherTakesMark", (SYNC_THREAD,)),
        ("LedgerStorageFlushes", (SYNC_THREAD,)),
        ("CheckpointPersistsMark", (SYNC_THREAD,)),
        ("JournalFileDeleted", (1,)),
    ]
    # a checkpoint that cannot move the mark does not run
    assert spec_steps(spec, refs[:3], after, after) == []


def test_spec_steps_read_a_persist_of_each_lastmark_copy_or_one_that_writes_none() -> None:
    spec = BookieSpec(NumLedgerDirs=2)
    s = spec.JournalForceWrites(spec.BookieAddsEntry(spec.initial_state(), 1, 0), (1, 1))
    s = spec.LedgerStorageFlushes(spec.FlusherTakesMark(s, SYNC_THREAD), SYNC_THREAD)
    after = spec.CheckpointPersistsMark(spec.CheckpointPersistsMark(s, SYNC_THREAD), SYNC_THREAD)
    persist = (ActionRef("CheckpointPersistsMark", (SYNC_THREAD,)),) * 2
    assert after.last_marks == ((1, 1), (1, 1))
    assert spec_steps(spec, persist, s, after) == [("CheckpointPersistsMark", (SYNC_THREAD,))] * 2
    # the write cache's flush persists no mark with two ledger directories: one step
    w = spec.FlusherTakesMark(spec.BookieAddsEntry(spec.initial_state(), 1, 0), WRITE_CACHE)
    w = spec.LedgerStorageFlushes(w, WRITE_CACHE)
    done = spec.CheckpointPersistsMark(w, WRITE_CACHE)
    assert done.last_marks == (ZERO_MARK, ZERO_MARK) == (w.flusher_mark[1],) * 2
    persist = (ActionRef("CheckpointPersistsMark", (WRITE_CACHE,)),) * 2
    assert spec_steps(spec, persist, w, done) == [("CheckpointPersistsMark", (WRITE_CACHE,))]


def test_spec_steps_read_a_force_write_and_a_crash() -> None:
    spec = BookieSpec(MaxEntries=3, RecordsPerJournal=3)
    s = spec.initial_state()
    for e in range(3):
        s = spec.BookieAddsEntry(s, 1, e)
    synced = spec.JournalForceWrites(s, (1, 1))
    assert spec_steps(spec, (ActionRef("JournalForceWrites"), ActionRef("JournalRollsOver", ())), s, synced) == [
        ("JournalForceWrites", ((1, 1),))
    ]
    down = spec.BookieCrashes(synced, (1, 2))  # keeps one of the two unsynced records
    assert spec_steps(spec, (ActionRef("BookieCrashes"),), synced, down) == [("BookieCrashes", ((1, 2),))]


# -- traces of the reference bookie ---------------------------------------------------------
@functools.cache
def _runs() -> list[Any]:
    return [record_run(run) for run in bookie_runs()]


def test_the_runs_cover_every_workload_and_crash() -> None:
    runs = bookie_runs()
    assert {r.workload for r in runs} == {
        "basic",
        "fencing",
        "rollover-and-deletion",
        "force-write-parts",
        "interleaved-flushers",
        "restart",
    }
    assert {r.crash for r in runs if r.crash_after is not None} == {"power-loss", "process-crash"}
    assert not [r for r in runs if r.workload == "restart" and r.crash_after is not None]  # it crashes on its own
    assert len({r.trace_id for r in runs}) == len(runs)


@pytest.mark.parametrize("mode", ["full", "client"])
def test_the_correct_bookie_conforms_in_both_modes(mode: str) -> None:
    checker = TraceChecker(WORKLOAD_SPEC, mode)
    events = 0
    actions: set[str] = set()
    for run in _runs():
        assert run.violations == ()  # the crash checks agree: the run refines the spec
        verdict = checker.check(events_from_json(run.lines[mode]))
        assert verdict.status == "conforms", (run.trace_id, verdict.reason)
        events += verdict.events
        actions |= {line["type"] for line in run.lines[mode]}
    hidden = set(CLIENT.hidden) if mode == "client" else set()
    assert actions == ({"Init", *TRACE.actions} - hidden)  # every action the mode sees is exercised
    assert events > 1000


@functools.cache
def _random_runs(seed: int) -> tuple[RecordedRun, ...]:
    return tuple(random_bookie_traces(WORKLOAD_CONFIG, seed=seed, steps=40, traces=30))


def test_random_runs_take_every_action_crash_and_conform_in_both_modes() -> None:
    spec = random_spec(WORKLOAD_CONFIG, 40)
    checkers = {mode: TraceChecker(spec, mode) for mode in ("full", "client")}
    actions: set[str] = set()
    for run in _random_runs(1):
        assert run.violations == ()  # the run refines the spec, step by step
        for mode, checker in checkers.items():
            verdict = checker.check(events_from_json(run.lines[mode]))
            assert verdict.status == "conforms", (run.trace_id, mode, verdict.reason)
        actions |= {line["type"] for line in run.lines["full"]}
    assert actions == {"Init", *TRACE.actions}


def test_random_runs_are_the_same_for_the_same_seed_and_differ_between_runs() -> None:
    again = tuple(random_bookie_traces(WORKLOAD_CONFIG, seed=1, steps=40, traces=2))
    assert [r.lines for r in again] == [r.lines for r in _random_runs(1)[:2]]
    assert again[0].lines["full"] != again[1].lines["full"] and again[0].trace_id == "bookie-random-1-0"


def test_client_lines_carry_what_a_client_knows() -> None:
    lines = [line for run in _runs() for line in run.lines["client"]]
    assert {line["process"] for line in lines} == {"client"}
    assert all("upto" not in line.get("params", {}) and "cut" not in line.get("params", {}) for line in lines)
    assert {n for line in lines for n in line.get("observed", {})} <= CLIENT_OBSERVES


def test_full_lines_report_synced_in_one_spelling() -> None:
    lines = [line for run in _runs() for line in run.lines["full"]]
    observed = {n for line in lines for n in line.get("observed", {})}
    assert "synced" not in observed and "unsynced_from" in observed


@pytest.mark.parametrize(
    ("mutant", "event", "words"),
    [
        ("mark_before_flush", "CheckpointPersistsMark", "flusher has not flushed the ledger storage yet"),
        ("mark_moves_backwards", "CheckpointPersistsMark", "'Recovery log 1 is missing'"),
        ("delete_journal_at_mark", "JournalFileDeleted", "is not wholly before the persisted mark"),
        ("ack_before_fsync", "BookieAddsEntry", "acked has"),
    ],
)
def test_a_mutant_is_caught_at_its_own_step(mutant: str, event: str, words: str) -> None:
    config = attrs.evolve(WORKLOAD_CONFIG, mutant=mutant)
    checker = TraceChecker(WORKLOAD_SPEC, "full")
    for run in bookie_runs():
        verdict = checker.check(events_from_json(record_run(run, config=config, modes=("full",)).lines["full"]))
        if verdict.status == "violates":
            assert verdict.failure is not None
            assert (verdict.failure.event_type, words in verdict.reason) == (event, True), verdict.reason
            return
    pytest.fail(f"no trace of {mutant} violates the spec")


def test_bookie_traces_are_checked_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = record_run(BookieRun("basic", 8, "power-loss"), modes=("full",))
    path = tmp_path / "basic.ndjson"
    path.write_text("".join(json.dumps(line) + "\n" for line in run.lines["full"]))
    consts = [f"--const={k}={v}" for k, v in WORKLOAD_SPEC.values.items() if k != "Bug"]
    assert main(["check", str(path), "--spec", "bookie", *consts, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["traces"], summary["conforms"], summary["events"]) == (1, 1, len(run.lines["full"]))
    # the same trace against a spec whose journal files hold fewer records: the first full file is refused
    assert main(["check", str(path), "--spec", "bookie", *consts, "--const=RecordsPerJournal=2", "--json"]) == 1
    (violation,) = json.loads(capsys.readouterr().out)["violations"]
    assert "is full (2 records)" in violation["reason"]


@pytest.mark.tlc
@pytest.mark.parametrize(
    ("run", "mutant", "failing_event"),
    [
        (BookieRun("basic", 8, "power-loss"), None, None),
        (BookieRun("force-write-parts"), "mark_before_flush", 8),
        (BookieRun("basic", 1, "power-loss"), "mark_not_advanced_in_replay", 2),
    ],
    ids=["conforms", "mark_before_flush", "mark_not_advanced_in_replay"],
)
def test_tlc_gives_the_same_verdict_on_a_bookie_trace(
    tmp_path: Path, run: BookieRun, mutant: str | None, failing_event: int | None
) -> None:
    """The trace as a TLA+ module over bookie.tla (the projections in TLA+ too), validated by TLC."""
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc

    config = attrs.evolve(WORKLOAD_CONFIG, mutant=mutant)
    events = events_from_json(record_run(run, config=config, modes=("full",)).lines["full"])
    verdict = TraceChecker(WORKLOAD_SPEC, "full").check(events)
    checked = validate_with_tlc(events, WORKLOAD_SPEC, directory=tmp_path)
    assert checked.outcome.conforms == (verdict.status == "conforms") == (failing_event is None)
    assert checked.outcome.event_index == failing_event
    assert verdict.failure is None or verdict.failure.event_index == failing_event


def test_interleaved_flushers_are_judged_by_the_invariants() -> None:
    """The write cache's flush takes its mark, the sync thread's whole checkpoint runs, then the write cache
    flushes and persists: the correct bookie's trace conforms; release-4.17.2's persist breaks promises."""
    run = record_run(BookieRun("interleaved-flushers"), modes=("full",))
    steps = [(line["process"], line["type"]) for line in run.lines["full"]]
    take, persist = (
        steps.index(("write-cache", "FlusherTakesMark")),
        steps.index(("write-cache", "CheckpointPersistsMark")),
    )
    assert ("sync-thread", "CheckpointPersistsMark") in steps[take:persist]
    assert TraceChecker(WORKLOAD_SPEC, "full").check(events_from_json(run.lines["full"])).status == "conforms"
    config = attrs.evolve(WORKLOAD_CONFIG, mutant="mark_moves_backwards")
    mutated = record_run(BookieRun("interleaved-flushers"), config=config, modes=("full",))
    verdict = TraceChecker(WORKLOAD_SPEC, "full").check(events_from_json(mutated.lines["full"]))
    assert verdict.status == "violates" and verdict.failure is not None
    assert verdict.failure.event_type == "CheckpointPersistsMark"
    assert set(verdict.promise_names) == {"JournalKeptFromMark", "MarkNeverMovesBackwards"}
