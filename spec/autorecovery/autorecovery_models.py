"""The models of the autorecovery spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# Every action: a disk lost (its bookie back empty, found by the check of all ledgers), and a second stop that
# leaves a worker unable to finish its fragment, so that it gives up (the defaults stop one bookie once and lose
# no disk).
SECOND_STOP = CheckedModel(
    {"MaxStops": 2, "MaxDiskLosses": 1}, 46_946, "a bookie stops again, or loses its disk and comes back empty"
)

MODELS = SpecModels(
    checked=(
        CheckedModel({}, 518, "one bookie stops: marked, re-replicated, unmarked; or it comes back"),
        SECOND_STOP,
        CheckedModel(
            {"Segments": 2, "NumBookies": 5, "NumWorkers": 2}, 7_734, "two fragments, two workers and their lock"
        ),
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
    ),
    same_steps=True,
    # The explanation checks: every action is enabled in one of these (worker crashes in the two workers' model).
    explored={
        "stops": {"MaxStops": 2, "MaxDiskLosses": 1, "MaxWorkerCrashes": 0},
        "two-workers": {"Segments": 2, "NumBookies": 5, "NumWorkers": 2},
    },
    presets={"faults": SECOND_STOP},
    # Under metadata_before_copy each fragment a worker starts again writes the metadata again: past 400,000
    # states, the checks take the first states of the search.
    explored_max_states=40_000,
)
