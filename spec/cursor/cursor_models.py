"""The models of the cursor spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# Every action: beside the defaults' crash, two failed writes (a first record and its fallback), a rollover
# of the data ledger and a cursor ledger lost (the defaults lose none).
EVERY_ACTION = CheckedModel(
    {"MaxEntries": 1, "MaxEntriesPerLedger": 1, "MaxFaults": 2, "MaxLedgerLoss": 1},
    9_147,
    "a failed BookKeeper write and its znode fallback too, a lost cursor ledger",
)

MODELS = SpecModels(
    checked=(
        CheckedModel({"MaxEntries": 2}, 15_507),
        CheckedModel({"MaxEntries": 2, "MaxLedgerLoss": 1}, 30_888, "a lost cursor ledger"),
        CheckedModel({"MaxEntries": 1, "BatchSize": 2}, 3_275, "batch acks"),
        CheckedModel(
            {"MaxEntries": 1, "BatchSize": 2, "ZnodeFallback": "always"},
            2_911,
            "the znode fallback after every failed creation (apache/pulsar#20935)",
        ),
        CheckedModel(
            {"MaxEntries": 1, "MetadataMaxEntriesPerLedger": 1, "MaxLedgerLoss": 1}, 938, "cursor-ledger rollover"
        ),
        EVERY_ACTION,
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
    presets={"faults": EVERY_ACTION},
)
