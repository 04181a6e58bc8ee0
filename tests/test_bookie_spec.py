"""The Python bookie spec on its own: actions, invariants, pinned state counts, seeded bugs."""

from __future__ import annotations

import doctest
import json
import re
from typing import Any

import pytest
from ledgerspec.spec import catalog
from ledgerspec.spec.bookie import bookie
from ledgerspec.spec.bookie.bookie import BUGS, NONE, NOT_FOUND, ZERO_MARK, BookieSpec, BookieState
from ledgerspec.spec.kernel import ConstantError, evolve
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.model_checking.explorer.explorer import explore


def test_docstring_examples_run() -> None:
    result = doctest.testmod(bookie)
    assert result.attempted >= 5 and result.failed == 0


def test_registered_in_the_catalog() -> None:
    entry = catalog.find("bookie")
    assert entry.python is BookieSpec and entry.tla_path.name == "bookie.tla" and entry.tla_path.exists()


def test_tla_text_declares_the_same_variables_actions_and_invariants() -> None:
    spec = BookieSpec()
    text = catalog.find("bookie").tla_path.read_text()
    declared = re.search(r"^VARIABLES\n(.*?)\n\n", text, re.S | re.M)
    assert declared is not None
    names = re.findall(r"^    (\w+),?\s", declared.group(1), re.M)
    assert tuple(names) == spec.variables()
    for act in spec.actions:  # the same parameters, by the same names: trace events use them
        params = f"({', '.join(act.param_names)})" if act.param_names else ""
        assert re.search(rf"^{re.escape(act.name + params)} ==", text, re.M), f"{act.name}{params} not in bookie.tla"
    for name in [i.name for i in spec.invariants + spec.action_properties]:
        assert re.search(rf"^{name} ==", text, re.M), f"{name} is not defined in bookie.tla"


def test_command_line_checks_the_bookie(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["model-check", "bookie", "--engine", "python", "--json", "--const", "Bug=mark_before_flush"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["constants"]["RecordsPerJournal"] == 2
    (violation,) = data["python"]["violations"]
    assert violation["invariant"] == "MarkNeverPassesUnflushedData"
    assert violation["trace"][-1]["state"]["last_marks"] == [[1, 1]]
    assert violation["trace"][-1]["state"]["flushed"] == []


@pytest.mark.parametrize(
    ("constants", "message"),
    [
        ({"NumLedgers": 0}, "NumLedgers must be at least 1, got 0"),
        ({"MaxEntries": 0}, "MaxEntries must be at least 1, got 0"),
        ({"RecordsPerJournal": 0}, "RecordsPerJournal must be at least 1, got 0"),
        ({"MaxCrashes": -1}, "MaxCrashes must not be negative, got -1"),
        ({"Bug": "typo"}, "constant Bug must be one of none, ack_before_fsync"),
    ],
)
def test_impossible_models_are_refused(constants: dict[str, Any], message: str) -> None:
    with pytest.raises(ConstantError, match=message):
        BookieSpec(**constants)


# -- actions ------------------------------------------------------------------------------
def run(spec: BookieSpec, s: BookieState, *steps: tuple[Any, ...]) -> BookieState:
    """Take the steps (action name, arguments...) in order; each must be enabled.

    ``("JournalForceWrites",)`` without its argument syncs everything written.
    """
    for name, *args in steps:
        if name == "JournalForceWrites" and not args:
            args = [max((f, i + 1) for (f, i), _ in spec.records(s))]
        nxt = getattr(spec, name)(s, *args)
        assert nxt is not None, f"{name}{tuple(args)} is disabled in {s}"
        s = nxt
    return s


SPEC = BookieSpec(NumLedgers=2, MaxEntries=2, RecordsPerJournal=2, MaxCrashes=2)


def test_an_add_is_acknowledged_only_by_the_force_write() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieAddsEntry", 2, 1))
    assert s.acked == frozenset() and s.memtable == {(1, 0), (2, 1)}
    assert SPEC.unsynced(s) == [("entry", 1, 0), ("entry", 2, 1)]
    s = run(SPEC, s, ("JournalForceWrites", (1, 2)))
    assert s.acked == {(1, 0), (2, 1)} and s.synced == s.mark == (1, 2) and SPEC.unsynced(s) == []
    assert [act.name for act, _, _ in SPEC.successors(s)].count("JournalForceWrites") == 0  # nothing left to sync


def test_a_force_write_may_cover_a_prefix_of_what_was_written() -> None:
    # The journal thread wrote (1, 1) after the force-write thread began syncing (1, 0).
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieAddsEntry", 1, 1))
    ends = [args for act, args, _ in SPEC.successors(s) if act.name == "JournalForceWrites"]
    assert ends == [((1, 1),), ((1, 2),)]
    s = run(SPEC, s, ("JournalForceWrites", (1, 1)))
    assert s.acked == {(1, 0)} and s.synced == s.mark == (1, 1) and SPEC.unsynced(s) == [("entry", 1, 1)]
    assert SPEC.JournalForceWrites(s, (1, 1)) is None  # nothing before (1, 1) is left to sync


def test_a_full_journal_file_rolls_over_before_the_next_record() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieFencesLedger", 2))
    assert SPEC.BookieAddsEntry(s, 1, 1) is None and SPEC.BookieSetsExplicitLac(s, 1, 0) is None
    s = run(SPEC, s, ("JournalRollsOver",), ("BookieSetsExplicitLac", 1, 1))
    assert s.journal == ((1, (("entry", 1, 0), ("fence", 2, -1))), (2, (("lac", 1, 1),)))


def test_the_force_write_after_a_rollover_marks_the_end_of_the_last_record() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieAddsEntry", 1, 1), ("JournalRollsOver",))
    s = run(SPEC, s, ("JournalForceWrites", (1, 2)))
    # The new file is empty: the mark is the end of file 1, as the real force write of file 1 sets it.
    assert s.mark == (1, 2) and s.synced == (1, 2)


def test_a_fence_reply_waits_for_the_fsync_and_fenced_ledgers_refuse_adds() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieFencesLedger", 1))
    assert s.fenced == {1} and s.fence_acked == frozenset()
    assert SPEC.BookieAddsEntry(s, 1, 0) is None
    assert SPEC.BookieFencesLedger(s, 1) is None  # a second request waits for the same record: no step
    s = run(SPEC, s, ("JournalForceWrites", (1, 1)))
    assert s.fence_acked == {1} and SPEC.BookieFencesLedger(s, 1) is None  # answered at once, nothing changes


def test_a_fence_kept_by_a_crash_is_answered_at_once_after_the_restart() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieFencesLedger", 1), ("BookieCrashes", (1, 1)), ("BookieReplaysJournal",))
    assert s.fenced == {1} and s.fence_acked == frozenset()  # the unsynced record reached the disk
    s = run(SPEC, s, ("BookieFencesLedger", 1))
    assert s.fence_acked == {1} and s.journal == ((1, (("fence", 1, -1),)), (2, ()))


def test_the_explicit_lac_only_moves_forward() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieSetsExplicitLac", 1, 1))
    assert s.lac == (1, -1) and SPEC.BookieSetsExplicitLac(s, 1, 0) is None


def test_a_crash_may_cut_the_unsynced_tail_at_any_record() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",))
    s = run(SPEC, s, ("BookieAddsEntry", 1, 1), ("JournalRollsOver",), ("BookieFencesLedger", 2))
    crashes = [(args[0], nxt) for act, args, nxt in SPEC.successors(s) if act.name == "BookieCrashes"]
    # A cut at each unsynced record, then at the end (nothing lost).
    assert [cut for cut, _ in crashes] == [(1, 1), (2, 0), (2, 1)]
    survivors = {cut: down.journal for cut, down in crashes}
    assert survivors == {
        (1, 1): ((1, (("entry", 1, 0),)), (2, ())),  # the torn tail: both unsynced records lost
        (2, 0): ((1, (("entry", 1, 0), ("entry", 1, 1))), (2, ())),
        (2, 1): ((1, (("entry", 1, 0), ("entry", 1, 1))), (2, (("fence", 2, -1),))),
    }
    down = SPEC.BookieCrashes(s, (1, 1))
    assert down is not None
    assert (down.up, down.mark, down.memtable, down.fenced) == (False, NONE, frozenset(), frozenset())
    assert down.synced == (2, 0)  # what reached the disk stays there
    assert SPEC.BookieAddsEntry(down, 1, 1) is None and SPEC.JournalForceWrites(down, (2, 0)) is None


def test_the_replay_starts_at_the_persisted_mark() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieSetsExplicitLac", 1, 0))
    s = run(SPEC, s, ("JournalForceWrites",), ("FlusherTakesMark", 1), ("LedgerStorageFlushes", 1))
    s = run(SPEC, s, ("CheckpointPersistsMark", 1), ("JournalRollsOver",))
    s = run(SPEC, s, ("BookieAddsEntry", 1, 1), ("BookieFencesLedger", 2), ("JournalRollsOver",))
    s = run(SPEC, s, ("BookieSetsExplicitLac", 1, 1))
    assert SPEC.persisted_mark(s) == (1, 2) and s.lac_flushed == (0, -1)
    s = run(SPEC, s, ("JournalForceWrites",), ("BookieCrashes", (3, 1)), ("BookieReplaysJournal",))
    # Only the records of files 2 and 3 are replayed; (1, 0) comes from the entry log.
    assert s.memtable == {(1, 1)} and s.flushed == {(1, 0)}
    assert s.fenced == {2} and s.lac == (1, -1)
    assert s.mark == (3, 1) and s.journal[-1] == (4, ()) and s.up
    assert (SPEC.read_path(s, 1, 0), SPEC.read_path(s, 1, 1)) == ("entry_log", "memtable")
    assert SPEC.invariant_failures(s) == []


def test_the_checkpoint_persists_its_mark_only_after_its_flush() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",), ("FlusherTakesMark", 1))
    assert s.flusher_mark == ((1, 1), NONE) and SPEC.CheckpointPersistsMark(s, 1) is None
    s = run(SPEC, s, ("BookieAddsEntry", 1, 1), ("JournalForceWrites",))
    assert s.flusher_mark[0] == (1, 1)  # taken when the checkpoint started
    s = run(SPEC, s, ("LedgerStorageFlushes", 1), ("CheckpointPersistsMark", 1))
    assert s.last_marks == ((1, 1),) and s.flusher_mark == (NONE, NONE) and s.flushed == {(1, 0), (1, 1)}
    assert SPEC.CheckpointPersistsMark(s, 1) is None and SPEC.LedgerStorageFlushes(s, 1) is None


def test_two_flushers_interleave_and_an_older_mark_is_not_persisted() -> None:
    """The write cache's flush takes its mark before the sync thread's, and persists it after (#4105)."""
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",), ("FlusherTakesMark", 2))
    s = run(SPEC, s, ("BookieAddsEntry", 1, 1), ("JournalForceWrites",), ("FlusherTakesMark", 1))
    assert s.flusher_mark == ((1, 2), (1, 1))
    s = run(SPEC, s, ("LedgerStorageFlushes", 1), ("CheckpointPersistsMark", 1), ("LedgerStorageFlushes", 2))
    assert s.last_marks == ((1, 2),) and s.flusher_flushed == {2}
    done = run(SPEC, s, ("CheckpointPersistsMark", 2))
    assert done.last_marks == ((1, 2),) and done.flusher_mark == (NONE, NONE)  # skipped, as 4.18.0 does
    buggy = BookieSpec(NumLedgers=2, MaxEntries=2, MaxCrashes=2, Bug="mark_moves_backwards")
    back = run(buggy, s, ("CheckpointPersistsMark", 2))
    assert back.last_marks == ((1, 1),)  # as release-4.17.2 does
    assert buggy.property_failures(s, back) == [
        ("MarkNeverMovesBackwards", "the persisted mark moved back from (1, 2) to (1, 1)")
    ]


def test_the_mark_goes_to_each_ledger_directory_in_turn_and_a_start_reads_the_largest() -> None:
    spec = BookieSpec(NumLedgerDirs=2)
    s = run(spec, spec.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",), ("FlusherTakesMark", 1))
    s = run(spec, s, ("LedgerStorageFlushes", 1), ("CheckpointPersistsMark", 1))
    assert s.last_marks == ((1, 1), ZERO_MARK) and s.flusher_copies == (1, 0)
    down = run(spec, s, ("BookieCrashes", (1, 1)))  # between the two copies
    assert spec.persisted_mark(down) == (1, 1)
    up = run(spec, down, ("BookieReplaysJournal",))
    assert up.memtable == frozenset() and up.flushed == {(1, 0)}  # nothing replayed: the largest copy wins
    whole = run(spec, s, ("CheckpointPersistsMark", 1))
    assert whole.last_marks == ((1, 1), (1, 1)) and whole.flusher_mark == (NONE, NONE)
    # With several ledger directories, the write cache's flush persists no mark.
    t = run(spec, spec.initial_state(), ("BookieAddsEntry", 1, 0), ("FlusherTakesMark", 2), ("JournalForceWrites",))
    t = run(spec, t, ("LedgerStorageFlushes", 2), ("CheckpointPersistsMark", 2))
    assert t.last_marks == (ZERO_MARK, ZERO_MARK) and t.flusher_mark == (NONE, NONE)


def test_only_the_oldest_journal_file_wholly_before_the_mark_is_deleted() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieAddsEntry", 1, 1), ("JournalForceWrites",))
    s = run(SPEC, s, ("JournalRollsOver",), ("BookieAddsEntry", 2, 0), ("BookieAddsEntry", 2, 1))
    s = run(SPEC, s, ("JournalForceWrites",), ("JournalRollsOver",), ("FlusherTakesMark", 1))
    s = run(SPEC, s, ("LedgerStorageFlushes", 1), ("CheckpointPersistsMark", 1))
    assert SPEC.persisted_mark(s) == (2, 2) and [f for f, _ in s.journal] == [1, 2, 3]
    assert SPEC.JournalFileDeleted(s, 2) is None  # the mark's own file
    assert SPEC.JournalFileDeleted(s, 3) is None
    s = run(SPEC, s, ("JournalFileDeleted", 1))
    assert [f for f, _ in s.journal] == [2, 3] and SPEC.JournalFileDeleted(s, 2) is None
    buggy = BookieSpec(NumLedgers=2, MaxEntries=2, RecordsPerJournal=2, Bug="delete_journal_at_mark")
    gone = run(buggy, s, ("JournalFileDeleted", 2))
    # Every record of file 2 is flushed, so nothing is lost yet; but the replay cannot start.
    assert [name for name, _ in buggy.invariant_failures(gone)] == ["JournalKeptFromMark"]


def test_reads_take_the_tailing_or_the_catch_up_path() -> None:
    s = run(SPEC, SPEC.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",))
    assert SPEC.read_path(s, 1, 0) == "memtable" and SPEC.read_path(s, 1, 1) == NOT_FOUND
    s = run(SPEC, s, ("FlusherTakesMark", 2), ("LedgerStorageFlushes", 2))
    assert SPEC.read_path(s, 1, 0) == "entry_log"
    assert SPEC.read_path(run(SPEC, s, ("BookieCrashes", (1, 1))), 1, 0) == NOT_FOUND  # down: nothing serves


# -- invariants on states built from outside (as a crash checker builds them) -----------------
def test_make_state_converts_plain_values() -> None:
    s = SPEC.make_state(
        journal=[(1, [["entry", 1, 0], ("fence", 2, -1)])],
        synced=[1, 2],
        acked={(1, 0)},
        fence_acked=[2],
        up=False,
        mark=NONE,
        crashes=1,
    )
    assert s.journal == ((1, (("entry", 1, 0), ("fence", 2, -1))),) and s.synced == (1, 2)
    assert s.acked == frozenset({(1, 0)}) and s.fence_acked == frozenset({2})
    assert SPEC.invariant_failures(s) == []


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"jornal": []}, "BookieState has no field jornal"),
        ({"journal": [(1, [("write", 1, 0)])]}, "BookieState field journal: .*record kind 'write'"),
        ({"synced": (1, "2")}, "BookieState field synced: .*'2' is not an integer"),
        ({"up": 1}, "BookieState field up: .*1 is not a boolean"),
        ({"journal": []}, "BookieState field journal: .*a bookie always has a journal file"),
        ({"last_marks": [(1, 2, 3)]}, "BookieState field last_marks: cannot read \\[\\(1, 2, 3\\)\\]"),
    ],
)
def test_make_state_names_what_is_malformed(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SPEC.make_state(**fields)


def test_a_well_formed_state_outside_the_model_fails_type_ok() -> None:
    gap = SPEC.make_state(journal=[(1, []), (3, [])])
    assert SPEC.invariant_failures(gap) == [
        ("TypeOK", "journal file ids [1, 3] are not consecutive"),
        (
            "JournalKeptFromMark",
            "journal files [2] are gone, but a replay from the persisted mark (0, 0) reads every file from 1 on",
        ),
    ]
    stranger = SPEC.make_state(acked={(3, 0)}, flushed={(3, 0)})
    assert SPEC.invariant_failures(stranger) == [("TypeOK", "flushed holds [(3, 0)], not entries of ledgers 1..2")]


def test_invariant_failures_name_each_broken_rule() -> None:
    # On disk after a crash: the lastMark file is past an entry the entry log lacks, and
    # a fence was acknowledged that neither the index nor the journal holds.
    s = SPEC.make_state(
        journal=[(1, [("entry", 1, 0)])],
        synced=(1, 1),
        last_marks=[(1, 1)],
        acked={(1, 0)},
        fence_acked={2},
        up=False,
        mark=NONE,
        crashes=1,
    )
    failures = dict(SPEC.invariant_failures(s))
    assert list(failures) == ["MarkNeverPassesUnflushedData", "AckedEntriesSurvive", "FencedLedgerStaysFenced"]
    assert failures["MarkNeverPassesUnflushedData"] == (
        "the persisted mark (1, 1) is past the record ('entry', 1, 0) at (1, 0), "
        "but entry (1, 0) is not in the entry log"
    )
    assert "entry (1, 0) was acknowledged" in failures["AckedEntriesSurvive"]
    assert "the fence of ledger 2 was acknowledged" in failures["FencedLedgerStaysFenced"]


def test_mark_never_moves_backwards_is_a_property_of_steps() -> None:
    s = SPEC.make_state(last_marks=[(2, 1)])
    assert SPEC.property_failures(s, evolve(s, last_marks=((3, 0),))) == []
    assert SPEC.property_failures(s, evolve(s, last_marks=((1, 5),))) == [
        ("MarkNeverMovesBackwards", "the persisted mark moved back from (2, 1) to (1, 5)")
    ]


# -- the whole model ----------------------------------------------------------------------
# Pinned: a change to any of these is a change to the spec's meaning, to be made on purpose.
PINNED = [
    ({}, 36620),  # the defaults: one ledger, one entry, two records per file, one crash, one ledger directory
    ({"MaxCrashes": 0}, 2389),
    ({"RecordsPerJournal": 1, "MaxCrashes": 0}, 4477),
    ({"RecordsPerJournal": 3}, 38363),
    ({"NumLedgerDirs": 2}, 50518),
    ({"MaxCrashes": 2}, 216311),
]


@pytest.mark.parametrize(("constants", "distinct"), PINNED, ids=lambda c: str(c))
def test_correct_bookie_keeps_every_invariant(constants: dict[str, int], distinct: int) -> None:
    spec = BookieSpec(**constants)
    result = explore(spec, check_deadlock=False)
    assert result.violations == ()
    assert result.distinct_states == distinct
    # Each "always" has its "sometimes": with a crash, every run the invariants speak of happens.
    if spec.MaxCrashes > 0:
        assert result.reached == {r.name for r in spec.reachables}


def test_without_crashes_only_the_crash_witnesses_are_missing() -> None:
    spec = BookieSpec(MaxCrashes=0)
    missing = {r.name for r in spec.reachables} - explore(spec, check_deadlock=False).reached
    assert missing == {
        "AckedEntryReadAfterCrash",
        "CheckpointAfterRestartCoversReplay",
        "ExplicitLacKeptAfterCrash",
        "FenceKeptAfterCrash",
        "UnackedRecordSurvivesCrash",
    }


# Each seeded bug in the default model: the invariant it breaks, and the shortest behaviour that shows it.
SEEDED = {
    "ack_before_fsync": ("AckedEntriesSurvive", ["BookieAddsEntry(ledger=1, entry=0)"]),
    "mark_before_flush": (
        "MarkNeverPassesUnflushedData",
        [
            "BookieAddsEntry(ledger=1, entry=0)",
            "JournalForceWrites(upto=<<1, 1>>)",
            "FlusherTakesMark(flusher=1)",
            "CheckpointPersistsMark(flusher=1)",
        ],
    ),
    "fence_not_journaled": ("FencedLedgerStaysFenced", ["BookieFencesLedger(ledger=1)"]),
    "mark_not_advanced_in_replay": (
        "MarkCoversReplayedJournal",
        ["BookieAddsEntry(ledger=1, entry=0)", "BookieCrashes(cut=<<1, 1>>)", "BookieReplaysJournal"],
    ),
    "delete_journal_at_mark": (
        "JournalKeptFromMark",
        [
            "BookieCrashes(cut=<<1, 0>>)",
            "BookieReplaysJournal",
            "FlusherTakesMark(flusher=1)",
            "LedgerStorageFlushes(flusher=1)",
            "CheckpointPersistsMark(flusher=1)",
            "JournalFileDeleted(f=1)",
        ],
    ),
    # The write cache's flush took the mark (0, 0) before the sync thread's (1, 1), and persists it after.
    "mark_moves_backwards": (
        "MarkNeverMovesBackwards",
        [
            "BookieAddsEntry(ledger=1, entry=0)",
            "FlusherTakesMark(flusher=2)",
            "JournalForceWrites(upto=<<1, 1>>)",
            "FlusherTakesMark(flusher=1)",
            "LedgerStorageFlushes(flusher=1)",
            "LedgerStorageFlushes(flusher=2)",
            "CheckpointPersistsMark(flusher=1)",
            "CheckpointPersistsMark(flusher=2)",
        ],
    ),
}


def test_every_seeded_bug_is_pinned() -> None:
    assert set(SEEDED) == set(BUGS) - {"none"}


@pytest.mark.parametrize("bug", sorted(SEEDED))
def test_seeded_bug_is_caught(bug: str) -> None:
    invariant, steps = SEEDED[bug]
    result = explore(BookieSpec(Bug=bug), check_deadlock=False)
    (violation,) = result.violations
    assert violation.name == invariant
    assert [str(t.step) for t in violation.trace] == ["Init", *steps]


# The promises to clients catch the bugs that break them even without the mechanism's rules.
CONSEQUENCES = [
    ("mark_before_flush", "AckedEntriesSurvive", 5),
    ("mark_before_flush", "FencedLedgerStaysFenced", 5),
    ("delete_journal_at_mark", "AckedEntriesSurvive", 10),
    ("delete_journal_at_mark", "FencedLedgerStaysFenced", 10),
    ("mark_moves_backwards", "JournalKeptFromMark", 12),  # the journal a start needs is gone: it refuses to start
]


@pytest.mark.parametrize(("bug", "invariant", "length"), CONSEQUENCES)
def test_promises_to_clients_catch_the_bugs_on_their_own(bug: str, invariant: str, length: int) -> None:
    (violation,) = explore(BookieSpec(Bug=bug), check_deadlock=False, invariants=[invariant]).violations
    assert violation.name == invariant and len(violation.trace) == length


def test_deleting_the_marks_own_journal_file_loses_an_acknowledged_entry() -> None:
    (violation,) = explore(
        BookieSpec(Bug="delete_journal_at_mark"), check_deadlock=False, invariants=["AckedEntriesSurvive"]
    ).violations
    before, after = violation.trace[-2].state, violation.trace[-1].state
    assert str(violation.trace[-1].step) == "JournalFileDeleted(f=1)"
    assert BookieSpec.persisted_mark(after)[0] == 1 and (1, 0) in after.acked and (1, 0) not in after.flushed
    assert any(rec == ("entry", 1, 0) for _, rec in BookieSpec.records(before))
    assert not any(rec == ("entry", 1, 0) for _, rec in BookieSpec.records(after))


def test_acking_before_the_fsync_loses_the_entry_in_a_crash() -> None:
    spec = BookieSpec(Bug="ack_before_fsync")
    s = run(spec, spec.initial_state(), ("BookieAddsEntry", 1, 0), ("BookieCrashes", (1, 0)), ("BookieReplaysJournal",))
    assert (1, 0) in s.acked and spec.read_path(s, 1, 0) == NOT_FOUND


def test_an_unjournaled_fence_is_forgotten_in_a_crash() -> None:
    spec = BookieSpec(Bug="fence_not_journaled")
    s = run(spec, spec.initial_state(), ("BookieFencesLedger", 1), ("BookieCrashes", (1, 0)), ("BookieReplaysJournal",))
    assert s.fence_acked == {1} and s.fenced == frozenset()
    assert spec.BookieAddsEntry(s, 1, 0) is not None  # the old writer can append again


def test_without_the_2087_fix_the_restarted_bookie_keeps_a_stale_mark() -> None:
    spec = BookieSpec(Bug="mark_not_advanced_in_replay", MaxCrashes=1)
    s = run(spec, spec.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",))
    s = run(spec, s, ("BookieCrashes", (1, 1)), ("BookieReplaysJournal",))
    assert s.mark == ZERO_MARK == spec.persisted_mark(s)
    assert spec.FlusherTakesMark(s, 1) is None  # nothing newer to persist: the replay is repeated at every restart
    fixed = BookieSpec()
    t = run(fixed, fixed.initial_state(), ("BookieAddsEntry", 1, 0), ("JournalForceWrites",))
    t = run(fixed, t, ("BookieCrashes", (1, 1)), ("BookieReplaysJournal",), ("FlusherTakesMark", 1))
    assert t.flusher_mark[0] == (1, 1)


def test_the_2087_bug_loses_no_acknowledged_entry() -> None:
    # As in the issue: the stale mark makes restarts replay the same journal again, it loses nothing.
    result = explore(
        BookieSpec(Bug="mark_not_advanced_in_replay"),
        check_deadlock=False,
        invariants=["AckedEntriesSurvive", "FencedLedgerStaysFenced", "MarkNeverPassesUnflushedData"],
    )
    assert result.violations == () and result.distinct_states == 19755
