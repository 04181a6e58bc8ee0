"""The models of the bookie spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# The defaults take every action already: a crash, the replay after it, a rollover and a deletion, both flushers.
CRASH = CheckedModel({}, 36_620, "crash with torn tails, replay, rollover, deletion, interleaved flushers")
# Two lastMark copies: a crash between the writes of a persist leaves them apart, and the start takes the larger.
LEDGER_DIRS = CheckedModel({"NumLedgerDirs": 2}, 50_518, "two lastMark copies, a crash between their writes")

MODELS = SpecModels(
    checked=(
        CheckedModel({"MaxCrashes": 0}, 2_389, "rollover and journal deletion, no crash"),
        CheckedModel({"RecordsPerJournal": 1, "MaxCrashes": 0}, 4_477, "a rollover after every record"),
        CRASH,
        LEDGER_DIRS,
    ),
    seeded_bugs=(
        SeededBug("ack_before_fsync", "AckedEntriesSurvive", 2),
        SeededBug("mark_before_flush", "MarkNeverPassesUnflushedData", 5),
        SeededBug("mark_before_flush", "AckedEntriesSurvive", 5, checked=("AckedEntriesSurvive",)),
        SeededBug("fence_not_journaled", "FencedLedgerStaysFenced", 2),
        SeededBug("mark_not_advanced_in_replay", "MarkCoversReplayedJournal", 4),
        SeededBug("delete_journal_at_mark", "JournalKeptFromMark", 7),
        SeededBug("delete_journal_at_mark", "AckedEntriesSurvive", 10, checked=("AckedEntriesSurvive",)),
        SeededBug("delete_journal_at_mark", "FencedLedgerStaysFenced", 10, checked=("FencedLedgerStaysFenced",)),
        SeededBug("mark_moves_backwards", "MarkNeverMovesBackwards", 9),
        SeededBug("mark_moves_backwards", "JournalKeptFromMark", 12, checked=("JournalKeptFromMark",)),
    ),
    same_steps=True,
    explored={"default": {}, "two ledgers, one record per file": {"NumLedgers": 2, "RecordsPerJournal": 1}},
    explored_max_states=15_000,
    presets={"faults": LEDGER_DIRS},
)
