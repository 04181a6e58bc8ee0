"""The models of the managed-ledger spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# Every action: the clock ticks only where a ledger rolls over by time, which the defaults leave off.
ROLLOVER_BY_TIME = CheckedModel({"MaximumRolloverTime": 2, "MinimumRolloverTime": 1}, 3_978, "rollover by time")

MODELS = SpecModels(
    checked=(
        CheckedModel({}, 439),
        ROLLOVER_BY_TIME,
        CheckedModel(
            {"BatchSize": 2, "MaxSizePerLedger": 3, "Partitioned": True, "NumCursors": 2},
            1_385,
            "batches, rollover by size, a partitioned topic, two cursors",
        ),
        CheckedModel({"NumProducers": 2, "MaxMessages": 2}, 8_127, "two producers"),
        CheckedModel({"NumCursors": 0}, 194, "no cursor: nothing holds the ledgers back"),
    ),
    seeded_bugs=(
        SeededBug("trim_deletes_needed_ledger", "TrimKeepsUnconsumedEntries", 6),
        SeededBug("dedup_forgets_on_reopen", "DedupPersistsNoDuplicate", 8),
        SeededBug("reopen_confirms_new_ledger", "LastConfirmedIsLastEntry", 5),
    ),
    presets={"faults": ROLLOVER_BY_TIME},
)
