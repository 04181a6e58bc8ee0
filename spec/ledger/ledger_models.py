"""The models of the ledger spec that are checked (:mod:`ledgerspec.spec.models`)."""

from __future__ import annotations

from ledgerspec.spec.models import CheckedModel, SeededBug, SpecModels

__all__ = ["MODELS"]

# Every action, each fault among them: a crash and a restart, a lost message and the resends it calls for, an
# ensemble change to the spare bookie by the writer and by a recovery's write-back, a recovery that fails for want
# of replies and is started again, a plain reader, the writer's explicit LAC (with one entry and Qa = 1 the only
# way a reader of the open ledger learns its LAC). One copy of each entry keeps it small.
FAULTS_CONSTANTS = {
    "NumBookies": 3,
    "E": 2,
    "Qw": 1,
    "Qa": 1,
    "MaxEntries": 1,
    "MaxCrashes": 1,
    "MaxLoss": 1,
    "NumReaders": 1,
    "ExplicitLac": 1,
}
FAULTS = CheckedModel(
    FAULTS_CONSTANTS,
    15_538,
    "every action: a crash and a restart, a lost message and its resends, ensemble changes, a failed recovery, "
    "a plain reader, the explicit LAC",
    # replies are delivered by the bookie's step (RepliesInFlight = 0); the models with replies in flight take it
    off=("ClientReceivesReply",),
)
# Replies in flight (RepliesInFlight = 1), as a merged trace is checked: every step of the spec interleaves with the
# replies still on their way, so the models are small. Two bookies acking one add in either order; a crash, and the
# timeouts it calls for while a reply may still come; a lost reply. Every action, faults included, in the larger one.
IN_FLIGHT_CONSTANTS = {"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1, "RepliesInFlight": 1}
IN_FLIGHT_CRASH_CONSTANTS = {**IN_FLIGHT_CONSTANTS, "Qw": 1, "MaxCrashes": 1}
IN_FLIGHT_LOSS_CONSTANTS = {**IN_FLIGHT_CONSTANTS, "NumBookies": 1, "E": 1, "Qw": 1, "MaxLoss": 1}
# The faults preset with one bookie an ensemble and one spare: with E = 2 it is too large to check in every run.
IN_FLIGHT_FAULTS_CONSTANTS = {**FAULTS_CONSTANTS, "NumBookies": 2, "E": 1, "RepliesInFlight": 1}
# E > Qw > Qa: an add complete without one bookie's ack, and a next add whose write set leaves that bookie out.
DELAYED_FAILURE_CONSTANTS = {
    "NumBookies": 4,
    "E": 3,
    "Qw": 2,
    "Qa": 1,
    "MaxEntries": 2,
    "MaxLoss": 1,
    "NumRecoverers": 0,
}
# A plain reader reading up to the LAC while the writer writes (the second entry carries the LAC of the first).
READER_CONSTANTS = {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 2, "NumReaders": 1}
# The same reader learning the LAC from the writer's explicit LAC as well.
EXPLICIT_LAC_CONSTANTS = {**READER_CONSTANTS, "ExplicitLac": 1}

MODELS = SpecModels(
    checked=(
        CheckedModel({"MaxEntries": 1}, 1_898),
        CheckedModel({"MaxEntries": 2}, 54_558, larger=True),
        CheckedModel({"MaxEntries": 1, "MaxLoss": 1}, 11_226, "lost requests and replies"),
        CheckedModel(
            {"NumBookies": 4, "MaxEntries": 1, "MaxCrashes": 1}, 34_425, "a crash, an ensemble change", larger=True
        ),
        CheckedModel(
            {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 2, "MaxCrashes": 1},
            5_960,
            "an ensemble change resending an add packaged before the LAC moved",
        ),
        CheckedModel(
            {"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1, "NumRecoverers": 2},
            37_190,
            "two recovering clients",
        ),
        CheckedModel({"MaxEntries": 2, "Throttle": 1}, 6_367, "the writer's throttle"),
        # Under the throttle an add issued from a callback cannot be moved before the ack that let it in: its
        # lagging LAC gives states no add with the writer's own LAC reaches (193 with LacLag=0).
        CheckedModel(
            {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 3, "Throttle": 1, "LacLag": 1},
            665,
            "adds that carry a LAC behind the writer's, issued as the throttle lets them in",
        ),
        # E > Qw, where BP-46's ensemble coverage and BookKeeper's per-write-set rule differ (docs/quorum.md).
        CheckedModel({"NumBookies": 4, "E": 4, "Qw": 2, "Qa": 2, "MaxEntries": 1}, 5_110, "striping"),
        CheckedModel(
            {"NumBookies": 4, "E": 4, "Qw": 2, "Qa": 2, "MaxEntries": 1, "Bug": "fence_ensemble_coverage"},
            2_527,
            "BP-46's fencing rule: no violation with one entry",
        ),
        # A complete add whose request to its third bookie is lost: the writer replaces that bookie afterwards,
        # though no add pending has it in its write set (maybeHandleDelayedWriteBookieFailure, 4.17.2).
        CheckedModel(DELAYED_FAILURE_CONSTANTS, 1_556, "a bookie replaced for an add that already completed"),
        CheckedModel(READER_CONSTANTS, 470, "a plain reader while the writer writes"),
        CheckedModel(EXPLICIT_LAC_CONSTANTS, 4_890, "a plain reader and the writer's explicit LAC"),
        FAULTS,
        CheckedModel(IN_FLIGHT_LOSS_CONSTANTS, 509, "replies in flight: a lost reply"),
        CheckedModel(IN_FLIGHT_CRASH_CONSTANTS, 5_115, "replies in flight: a crash, timeouts, a restart"),
        CheckedModel(IN_FLIGHT_CONSTANTS, 15_556, "replies in flight: two bookies' acks in either order, recovery"),
        CheckedModel(IN_FLIGHT_FAULTS_CONSTANTS, 159_983, "replies in flight: every action", larger=True),
    ),
    seeded_bugs=(
        SeededBug("recovery_read_no_fence", "NoAckedEntryLost", 10, {"E": 3, "Qw": 3, "Qa": 2, "MaxEntries": 1}),
        SeededBug("fence_qa_total", "NoNewAcksToFencedWriter", 3, {"E": 3, "Qw": 2, "Qa": 1, "MaxEntries": 2}),
        SeededBug("lac_before_qa", "NoAckedEntryLost", 8, {"E": 3, "Qw": 2, "Qa": 2, "MaxEntries": 2}),
        SeededBug(
            "missing_after_qa_no_such",
            "NoAckedEntryLost",
            8,
            {"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1},
        ),
        SeededBug(
            "recovery_change_ends_at_lac",
            "NoAckedEntryLost",
            10,
            {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 1, "MaxLoss": 1},
        ),
        # A resend after an ensemble change with the wrong bytes, caught while the ledger is open.
        SeededBug(
            "resend_reused_buffer",
            "ReadersAgreeOnContent",
            6,
            {"NumBookies": 3, "E": 2, "Qw": 1, "Qa": 1, "MaxEntries": 2, "MaxCrashes": 1},
        ),
        SeededBug(
            "reader_reads_unconfirmed",
            "ReaderSeesOnlyConfirmed",
            4,
            {"MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0},
        ),
        # An explicit LAC sent before its entry has Qa acks, served by a bookie.
        SeededBug(
            "explicit_lac_sends_lap",
            "ExplicitLacIsDurable",
            4,
            {"MaxEntries": 1, "NumReaders": 1, "NumRecoverers": 0, "ExplicitLac": 1},
        ),
    ),
    same_steps=True,
    # Between them they enable every action and every guard of the spec.
    explored={
        "losses": {"MaxEntries": 1, "MaxLoss": 1},
        "crashes and ensemble change": {"MaxEntries": 1, "NumBookies": 4, "MaxCrashes": 1},
        "throttle": {"MaxEntries": 2, "Throttle": 1},
        "a bookie replaced after its add completed": DELAYED_FAILURE_CONSTANTS,
        "failed recoveries and recovery ensemble changes": FAULTS_CONSTANTS,
        "a plain reader": READER_CONSTANTS,
        "the explicit LAC": EXPLICIT_LAC_CONSTANTS,
        "replies in flight": IN_FLIGHT_CONSTANTS,
        "replies in flight, a crash": IN_FLIGHT_CRASH_CONSTANTS,
        "replies in flight, a lost reply": IN_FLIGHT_LOSS_CONSTANTS,
    },
    explored_with_bugs=False,
    presets={"faults": FAULTS},
)
