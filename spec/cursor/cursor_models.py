"""The models of the cursor spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# Every action: beside the defaults' crash and failed writes, a cursor ledger lost (the defaults lose none).
LOST_LEDGER = CheckedModel({"MaxEntries": 2, "MaxLedgerLoss": 1}, 28_067, "a lost cursor ledger")

MODELS = SpecModels(
    checked=(
        CheckedModel({"MaxEntries": 2}, 13_884),
        LOST_LEDGER,
        CheckedModel({"MaxEntries": 1, "BatchSize": 2}, 2_911, "batch acks"),
        CheckedModel(
            {"MaxEntries": 1, "MetadataMaxEntriesPerLedger": 1, "MaxLedgerLoss": 1}, 938, "cursor-ledger rollover"
        ),
        CheckedModel({"MaxEntries": 1, "MaxFaults": 2}, 896, "a failed BookKeeper write and its znode fallback too"),
    ),
    # Each breaks the invariant that names it, with the same shortest counterexample in both engines.
    seeded_bugs=(
        SeededBug("restore_ignores_no_ledger", "OnlyUnpersistedAcksRedelivered", 8),
        SeededBug("no_store_fallback", "OnlyUnpersistedAcksRedelivered", 7),
        SeededBug("restore_skips_unacked", "CursorSkipsNoUnackedMessage", 8),
        SeededBug("trim_deletes_needed_ledger", "TrimKeepsUnconsumedEntries", 5),
    ),
    explored={
        "loss": {"MaxEntries": 2, "MaxLedgerLoss": 1},
        "batches": {"MaxEntries": 1, "BatchSize": 2},
        "faults": {"MaxEntries": 1, "MaxFaults": 2},
    },
    presets={"faults": LOST_LEDGER},
)
