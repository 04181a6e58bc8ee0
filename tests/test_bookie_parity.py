"""TLC and the Python explorer on the bookie spec: the same states, the same verdicts.

As tests/test_parity.py does for the ledger spec: without a violation both
engines must reach the very same set of states; with a seeded bug both must
report the same invariant, with counterexamples of the same length.
"""

from __future__ import annotations

import pytest
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.tools.model_checking.model_check import ModelCheck, compare, run_python, run_tlc

pytestmark = pytest.mark.tlc

SMALL_MODELS = [
    ({"MaxCrashes": 0}, 592),  # rollover and journal deletion, no crash
    ({"RecordsPerJournal": 1, "MaxCrashes": 0}, 931),  # a rollover after every record
    ({}, 11229),  # the defaults: crash with torn tails, replay, rollover, deletion
]


@pytest.mark.parametrize(("constants", "distinct"), SMALL_MODELS, ids=lambda c: str(c))
def test_same_states(constants: dict[str, int], distinct: int) -> None:
    model = ModelCheck("bookie", constants)
    python = run_python(model, keep_states=True)
    tlc = run_tlc(model, keep_states=True)
    assert python.violations == () and tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == distinct
    # The TLA+ guards are written so that TLC generates each successor once, as the explorer does.
    assert python.states_generated == tlc.states_generated
    comparison = compare(python, tlc)
    assert comparison.states_compared and comparison.agree, comparison.reasons
    assert python.states == tlc.states


# (bug, invariants checked (None: all), the invariant reported, counterexample length with Init)
SEEDED_BUGS = [
    ("ack_before_fsync", None, "AckedEntriesSurvive", 2),
    ("mark_before_flush", None, "MarkNeverPassesUnflushedData", 5),
    ("mark_before_flush", ("AckedEntriesSurvive",), "AckedEntriesSurvive", 5),
    ("fence_not_journaled", None, "FencedLedgerStaysFenced", 2),
    ("mark_not_advanced_in_replay", None, "MarkCoversReplayedJournal", 4),
    ("delete_journal_at_mark", None, "JournalKeptFromMark", 7),
    ("delete_journal_at_mark", ("AckedEntriesSurvive",), "AckedEntriesSurvive", 10),
    ("delete_journal_at_mark", ("FencedLedgerStaysFenced",), "FencedLedgerStaysFenced", 10),
]


@pytest.mark.parametrize(
    ("bug", "invariants", "invariant", "length"),
    SEEDED_BUGS,
    ids=[f"{b}-{i[0] if i else 'all'}" for b, i, _, _ in SEEDED_BUGS],
)
def test_seeded_bug_is_the_same_violation_in_both_engines(
    bug: str, invariants: tuple[str, ...] | None, invariant: str, length: int
) -> None:
    model = ModelCheck("bookie", {"Bug": bug}, invariants=invariants)
    python = run_python(model)
    tlc = run_tlc(model)
    assert [v.invariant for v in python.violations] == [invariant]
    assert [v.invariant for v in tlc.violations] == [invariant]
    assert len(python.violations[0].trace) == len(tlc.violations[0].trace) == length
    # TLC's counterexample ends in a state the explorer's spec also rejects, for the same reason.
    spec = BookieSpec(Bug=bug)
    last = spec.make_state(**tlc.violations[0].trace[-1]["state"])
    assert invariant in dict(spec.invariant_failures(last))
    assert compare(python, tlc).agree


def test_the_2087_bug_loses_no_acknowledged_entry_in_tlc_either() -> None:
    model = ModelCheck("bookie", {"Bug": "mark_not_advanced_in_replay"}, invariants=("AckedEntriesSurvive",))
    python = run_python(model)
    tlc = run_tlc(model)
    assert python.violations == () and tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == 5769


@pytest.mark.slow
@pytest.mark.parametrize("constants", [{"MaxCrashes": 2}, {"MaxEntries": 2, "MaxCrashes": 0}], ids=str)
def test_larger_models_same_states(constants: dict[str, int]) -> None:
    model = ModelCheck("bookie", constants)
    python = run_python(model, keep_states=True)
    tlc = run_tlc(model, keep_states=True, workers=2)
    assert compare(python, tlc).agree
