"""The models of the autorecovery spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# A disk lost (its bookie back empty, found by the check of all ledgers), and a second stop that
# leaves a worker unable to finish its fragment, so that it gives up (the defaults stop one bookie once and lose
# no disk).
SECOND_STOP = CheckedModel(
    {"MaxStops": 2, "MaxDiskLosses": 1},
    46_946,
    "a bookie stops again, or loses its disk and comes back empty",
    larger=True,
)

# Every action, the open ledger's too: the writer's close, and a worker that defers the ledger for the grace
# period, then recovers it. One entry is enough for every action to be taken; the same faults over two entries are
# a larger model.
_OPEN_LEDGER_FAULTS = {"OpenLedger": 1, "MaxStops": 2, "MaxDiskLosses": 1}
OPEN_LEDGER_FAULTS = CheckedModel(
    {**_OPEN_LEDGER_FAULTS, "NumEntries": 1},
    36_384,
    "an open ledger of one entry: its writer closes it, or a worker recovers it after the grace period; stops and "
    "a disk lost",
)

MODELS = SpecModels(
    checked=(
        CheckedModel({}, 518, "one bookie stops: marked, re-replicated, unmarked; or it comes back"),
        SECOND_STOP,
        CheckedModel(
            {"Segments": 2, "NumBookies": 5, "NumWorkers": 2}, 7_734, "two fragments, two workers and their lock"
        ),
        CheckedModel({"OpenLedger": 1}, 1_013, "an open ledger: the worker waits for its close, or recovers it"),
        # breaks no invariant: its states are those the writer's close reaches; TLC's liveness check finds it
        # (tests/test_autorecovery_parity.py)
        CheckedModel(
            {"OpenLedger": 1, "Bug": "grace_ends_without_recovery"},
            764,
            "the grace period ends with no recovery: a ledger whose writer is gone stays open and unrepaired",
        ),
        OPEN_LEDGER_FAULTS,
        CheckedModel(_OPEN_LEDGER_FAULTS, 105_873, "the same over two entries", larger=True),
    ),
    seeded_bugs=(
        SeededBug("metadata_before_copy", "MetadataNamesOnlyHolders", 6),
        # the harm it does to readers: the metadata leaves the one bookie still holding an entry
        SeededBug(
            "metadata_before_copy",
            "NoEntryLostWhileReplicaRemains",
            8,
            {"MaxStops": 2, "MaxDiskLosses": 1},
            checked=("NoEntryLostWhileReplicaRemains",),
        ),
        SeededBug("auditor_marks_nothing", "LostBookiesMarked", 4),
        # the copy stops at the LAC the worker read: the open segment names a bookie without the last entry
        SeededBug("copies_open_fragment", "MetadataNamesOnlyHolders", 7, {"OpenLedger": 1}),
    ),
    same_steps=True,
    # The explanation checks: every action is enabled in one of these (worker crashes in the two workers' model).
    explored={
        "stops": {"MaxStops": 2, "MaxDiskLosses": 1, "MaxWorkerCrashes": 0},
        "two-workers": {"Segments": 2, "NumBookies": 5, "NumWorkers": 2},
        "open-ledger": {"OpenLedger": 1},
        # two stops: the open ledger's LAC read uncovered, a recovery with no spare bookie
        "open-ledger-two-stops": {"OpenLedger": 1, "MaxStops": 2, "MaxWorkerCrashes": 0},
    },
    presets={"faults": OPEN_LEDGER_FAULTS},
    # Under metadata_before_copy each fragment a worker starts again writes the metadata again: past 400,000
    # states, the checks take the first states of the search.
    explored_max_states=40_000,
)
