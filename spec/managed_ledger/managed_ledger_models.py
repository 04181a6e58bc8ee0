"""The models of the managed-ledger spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

MODELS = SpecModels(
    checked=(
        CheckedModel({}, 435),
        CheckedModel({"MaximumRolloverTime": 2, "MinimumRolloverTime": 1}, 3_918, "rollover by time"),
        CheckedModel(
            {"BatchSize": 2, "MaxSizePerLedger": 3, "Partitioned": True, "NumCursors": 2},
            1_381,
            "batches, rollover by size, a partitioned topic, two cursors",
        ),
        CheckedModel({"NumProducers": 2, "MaxMessages": 2}, 8_071, "two producers"),
        CheckedModel({"NumCursors": 0}, 190, "no cursor: nothing holds the ledgers back"),
    ),
    seeded_bugs=(
        SeededBug("trim_deletes_needed_ledger", "TrimKeepsUnconsumedEntries", 6),
        SeededBug("dedup_forgets_on_reopen", "DedupPersistsNoDuplicate", 8),
    ),
)
