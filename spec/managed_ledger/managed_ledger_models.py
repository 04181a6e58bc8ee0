"""The models of the managed-ledger spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# The clock ticks only where the model lets ledgers age (Ticks), connections drop, ledger creations fail and
# another broker takes the topic over only where MaxDisconnects, MaxCreateFailures and MaxTakeovers let them,
# which the defaults do not.
TIMED = {"MaximumRolloverTime": 2, "MinimumRolloverTime": 1, "Ticks": 2, "MaxDisconnects": 1, "MaxCreateFailures": 1}
# Every action, with one batch to keep it small.
FAULTS = CheckedModel(
    {**TIMED, "MaxMessages": 1, "MaxTakeovers": 1},
    8_469,
    "every action: rollover by time, a dropped connection and the dedup check's Unknown, a failed ledger creation, "
    "a takeover by another broker",
)

MODELS = SpecModels(
    checked=(
        CheckedModel({}, 1_228),
        FAULTS,
        CheckedModel(
            {**TIMED, "MaxMessages": 2},
            13_546,
            "two batches: rollover by time, a dropped connection and the dedup check's Unknown, a failed creation",
        ),
        CheckedModel(
            {"MaxTakeovers": 1},
            28_922,
            "another broker takes the topic over: the old one's rollover fails its compare-and-set, or comes first",
        ),
        CheckedModel(
            {"BatchSize": 2, "MaxSizePerLedger": 3, "Partitioned": True, "NumCursors": 2},
            12_800,
            "batches, rollover by size, a partitioned topic, two cursors",
        ),
        CheckedModel({"NumProducers": 2, "MaxMessages": 2}, 31_105, "two producers"),
        CheckedModel({"NumCursors": 0}, 200, "no cursor: nothing holds the ledgers back"),
        CheckedModel(
            {"MaxEntriesPerLedger": 0, "MaximumRolloverTime": 0}, 2_732, "limits of 0: every add fills its ledger"
        ),
        CheckedModel({"Dedup": False}, 2_354, "no dedup: a batch sent again after a crash is written twice"),
    ),
    seeded_bugs=(
        SeededBug("trim_deletes_needed_ledger", "TrimKeepsUnconsumedEntries", 6),
        SeededBug("dedup_forgets_on_reopen", "DedupPersistsNoDuplicate", 8),
        SeededBug("reopen_confirms_new_ledger", "LastConfirmedIsLastEntry", 5),
        SeededBug("closing_ledger_takes_adds", "LedgerHoldsItsLimit", 7),
        SeededBug("unknown_answered_as_duplicate", "NoAcknowledgedMessageLost", 6, {"MaxDisconnects": 1}),
        SeededBug("failed_creation_acks_queued", "NoAcknowledgedMessageLost", 10, {"MaxCreateFailures": 1}),
        # The old broker's list overwrites the new owner's, which no longer names the ledger the new owner writes.
        SeededBug("blind_ledger_list_write", "WritesGoToLastLedger", 4, {"MaxTakeovers": 1}),
        # The read position persisted: after the crash the restore would skip the entry read and not acknowledged.
        SeededBug("persists_read_position", "DurableMarkDeleteAcknowledged", 9),
    ),
    presets={"faults": FAULTS},
    # Small enough to explore whole under each seeded bug, for the trace mapping's explanations
    # (tests/test_explanations.py); the second takes a dropped connection and a failed ledger creation.
    explored={
        "default": {"NumCursors": 2},
        "faults": {"MaxMessages": 2, "MaxDisconnects": 1, "MaxCreateFailures": 1},
        "takeover": {"MaxTakeovers": 1},
    },
)
