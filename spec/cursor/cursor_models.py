"""The models of the cursor spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# Every action: beside the defaults' crash, a cursor ledger lost (the defaults lose none), two failed writes (a new
# cursor ledger's first record and its fallback to the znode) and a reset; one entry per ledger, so that one entry
# rolls the ledger over. TLC's side in the longer runs: the models below take every action between them.
EVERY_ACTION = CheckedModel(
    {"MaxEntries": 1, "MaxEntriesPerLedger": 1, "MaxFaults": 2, "MaxLedgerLoss": 1, "MaxResets": 1},
    281_074,
    "a lost cursor ledger, a failed BookKeeper write and its znode fallback too, a reset",
    larger=True,
)

MODELS = SpecModels(
    checked=(
        CheckedModel({"MaxEntries": 2}, 22_282),
        CheckedModel(
            {"MaxEntries": 2, "MaxFaults": 1, "MaxLedgerLoss": 1}, 60_188, "a failed write, a lost ledger", larger=True
        ),
        EVERY_ACTION,
        CheckedModel(
            {"MaxEntries": 1, "MaxEntriesPerLedger": 1, "MaxFaults": 2, "MaxLedgerLoss": 1},
            10_468,
            "a lost cursor ledger, a new ledger's first record and its znode fallback failing",
        ),
        CheckedModel({"MaxEntries": 1, "MaxResets": 1}, 12_319, "a reset, its persist failing or taking effect"),
        CheckedModel({"MaxEntries": 1, "BatchSize": 2}, 5_387, "batch acks"),
        CheckedModel(
            {"MaxEntries": 2, "MaxEntriesPerLedger": 3, "RolloverByTime": True, "MaxFaults": 0},
            18_831,
            "rollover by age only (ledgers of three, two entries): after one entry or two",
        ),
        CheckedModel(
            {"MaxEntries": 1, "BatchSize": 2, "ZnodeFallback": "always"},
            4_705,
            "the znode fallback after every failed creation (apache/pulsar#20935)",
        ),
        CheckedModel(
            {"MaxEntries": 1, "BatchSize": 2, "MetadataMaxEntriesPerLedger": 1, "MaxFaults": 0, "MaxLedgerLoss": 1},
            13_917,
            "cursor-ledger rollover",
        ),
    ),
    # Each breaks the invariant that names it, with the same shortest counterexample in both engines.
    seeded_bugs=(
        SeededBug("restore_ignores_no_ledger", "OnlyUnpersistedAcksRedelivered", 8),
        SeededBug("no_store_fallback", "OnlyUnpersistedAcksRedelivered", 7),
        SeededBug("restore_skips_unacked", "CursorSkipsNoUnackedMessage", 8),
        SeededBug("trim_deletes_needed_ledger", "TrimKeepsUnconsumedEntries", 5),
        SeededBug("skip_unconsumed_ledger", "TrimPositionBehindCursor", 6),
        SeededBug("reset_keeps_acks", "CursorSkipsNoUnackedMessage", 11, {"MaxEntries": 2, "MaxResets": 1}),
        SeededBug("ack_persists_over_reset", "CursorSkipsNoUnackedMessage", 10, {"MaxEntries": 2, "MaxResets": 1}),
    ),
    explored={
        "loss": {"MaxEntries": 2, "MaxLedgerLoss": 1},
        "batches": {"MaxEntries": 1, "BatchSize": 2},
        "faults": {"MaxEntries": 1, "MaxFaults": 2},
        "resets": {"MaxEntries": 1, "MaxResets": 1},
    },
    presets={"faults": EVERY_ACTION},
)
