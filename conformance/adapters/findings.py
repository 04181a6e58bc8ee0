"""What the oracle found when it judged Apache BookKeeper 4.17.2: each finding, its source, and how to spot it.

A scenario that shows one names it (``Scenario.expects``); the recorder then
calls a violation whose explanation carries the finding's phrase *known*,
and any other violation a new one. Two kinds:

``bug``
    the real system breaks a promise of the protocol: the oracle reports a
    violation of the spec, and the scenario sees the broken promise through
    the client API as well;
``difference``
    the real system takes a step the spec has no action for, and stays safe:
    the oracle reports the first event it cannot match.

docs/real-systems.md lists them with the reasoning; the sources are files
of ``apache/bookkeeper`` at tag ``release-4.17.2``.
"""

from __future__ import annotations

import attrs

__all__ = ["FINDINGS", "Finding"]


@attrs.frozen
class Finding:
    name: str
    kind: str  # "bug" or "difference"
    title: str
    explanation: str
    sources: tuple[str, ...]
    oracle_says: tuple[str, ...]  # phrases of the oracle's explanation, one of which identifies this finding

    def explains(self, reason: str) -> bool:
        return any(phrase in reason for phrase in self.oracle_says)


FINDINGS = {
    f.name: f
    for f in (
        Finding(
            "fence-of-empty-ledger-lost",
            "bug",
            "A bookie forgets that it fenced a ledger it holds no entry of, once its lastMark passes the fence",
            "A fencing read makes the bookie journal a fence record and set the fence bit in the ledger's index "
            "header, in memory. The index header reaches the disk only when the ledger's index pages are flushed, "
            "and a checkpoint flushes only ledgers that have pages, that is entries, on this bookie; an index "
            "closed at shutdown without force is not written either. So for a ledger without entries on the "
            "bookie the fence lives in the journal alone, and once a checkpoint moves the lastMark past it (an "
            "orderly restart does) the restarted bookie replays nothing and takes the ledger as unfenced. A writer "
            "that still holds the ledger open then gets its add acknowledged by Qa such bookies after a recovery "
            "closed the ledger at -1: an acknowledged entry that is not in the closed ledger.",
            (
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/IndexInMemPageMgr.java "
                "(flushOneOrMoreLedgers: only ledgers with index pages)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/FileInfo.java "
                "(setFenced sets needFlushHeader; close(force) warns that the fence bit may be lost)",
            ),
            ("observed writer_lac = 0, the spec has -1",),
        ),
        Finding(
            "recovery-changes-ensemble",
            "difference",
            "A recovering client replaces a bookie that fails a write-back, and writes the new ensemble with the close",
            "Recovery writes back the entries it read through a read-only handle. When a write-back to a bookie "
            "fails, the handle replaces the bookie in its own copy of the metadata (newEnsemblesFromRecovery) and "
            "sends the write-back to the new bookie; the close then writes the changed ensembles and CLOSED in one "
            "compare-and-set. The spec's recovering client has no ensemble change: it sends the write-back to the "
            "same bookie again until it answers (RecovererResendsWriteBack). Safe: every written-back entry still "
            "reaches Qa bookies of its write set in the ensembles the close writes.",
            (
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/client/ReadOnlyLedgerHandle.java "
                "(handleBookieFailure, newEnsemblesFromRecovery, the close after recovery)",
            ),
            (
                # the write-back to the new bookie, or, when no write-back was logged, the close's ensembles
                'no instance of BookieReceivesAdd matches the params {"m":{"type":"AddReq","client":1',
                "after RecovererClosesLedger(c=1): observed meta_segments",
            ),
        ),
        Finding(
            "fenced-writer-closes-ledger",
            "difference",
            "A writer told it is fenced closes the ledger itself, over a recovery under way",
            "When a bookie refuses one of its adds as fenced, the writer's handle closes the ledger "
            "(handleUnrecoverableErrorDuringAdd): it checks only its own copy of the metadata, which still says "
            "OPEN. Its close rereads the metadata after the compare-and-set fails, and writes CLOSED at the "
            "writer's LAC over IN_RECOVERY: the update loop's condition tests only whether the ledger is closed "
            "already. The recovering client's own close then finds the ledger closed: at the same entry it "
            "succeeds, at another it fails. The spec's writer gives up when its compare-and-set finds the ledger "
            "no longer OPEN. Safe for the protocol's promises: the ledger closes at the writer's LAC, so it holds "
            "every entry acknowledged to the writer, and bookies never hold a LAC beyond it. It shows when the "
            "writer's adds race the recovery, so a scenario may or may not meet it.",
            (
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/client/LedgerHandle.java "
                "(handleUnrecoverableErrorDuringAdd; doAsyncCloseInternal's MetadataUpdateLoop)",
            ),
            (
                "WriterClosesLedger is not enabled: the writer's handle is FENCED",
                "after WriterClosesLedger: observed",
            ),
        ),
    )
}
