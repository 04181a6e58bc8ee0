"""What the oracle found when it judged Apache BookKeeper 4.17.2 and Pulsar's managed ledger 4.0.7: each finding,
its source, and how to spot it.

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

The kind is the oracle's label of the violation (``Verdict.finding``: a bug
when the verdict names a broken promise); the recorder checks each listed
kind against it and calls a disagreement ``mislabelled``.

docs/real-systems.md lists them with the reasoning; the sources are files
of ``apache/bookkeeper`` at tag ``release-4.17.2``, with their line numbers
there, or of Pulsar's ``managed-ledger`` 4.0.7 jar, and the upstream report
where there is one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import attrs

__all__ = ["FINDINGS", "Finding", "Reproduction", "shown_by"]


@attrs.frozen
class Reproduction:
    """A bug's stand-alone Java program (``reproductions.py``): the Maven project of ``java/reproductions/``
    that holds it, its main class, and the arguments that show this finding."""

    project: str
    main_class: str
    arguments: tuple[str, ...] = ()

    @property
    def command(self) -> str:
        return " ".join((self.main_class, *self.arguments))


@attrs.frozen
class Finding:
    name: str
    kind: str  # "bug" or "difference"
    title: str
    explanation: str
    sources: tuple[str, ...]
    oracle_says: tuple[str, ...]  # phrases of the oracle's explanation, one of which identifies this finding
    reproduction: Reproduction | None = None  # a bug's stand-alone program
    # The part of the system whose code it is in: "bookie", "client" or "managed-ledger". A scenario run with
    # reference bookies in place of BookKeeper's cannot show a finding of the bookie.
    part: str = "client"

    def explains(self, reason: str) -> bool:
        return any(phrase in reason for phrase in self.oracle_says)


FINDINGS = {
    f.name: f
    for f in (
        Finding(
            "fence-of-empty-ledger-lost",
            "bug",
            "A bookie forgets the fence of a ledger it holds no entry of when it crashes before a checkpoint",
            "A fencing read makes the bookie create the ledger in its storage with the reader's master key and set "
            "the fence bit, in memory (BookieImpl.fenceLedger: getHandle, setMasterKey, setFenced), and journal a "
            "fence record; it journals no ledger-key record, which only a first add does (addEntryInternal). A "
            "crash before the index header reaches the disk leaves no index file. At restart the journal replay "
            "looks the fence record's master key up in the ledger storage (readJournal: readMasterKey), which throws "
            "NoLedgerException without an index file; the replay takes the ledger for deleted and skips the record "
            "('Skip replaying entries of ledger L since it was deleted', at DEBUG). The full flush after the replay "
            "then moves the lastMark past the fence record, and the ledger is unfenced for good. No checkpoint is "
            "needed: with the default storage none comes until the memtable fills or the entry log rotates, and the "
            "lastMark stayed before the fence record ((0, 0) in a fresh cluster) until the crash. The fence "
            "survives when a real checkpoint or a write-driven flush wrote the index header first: the fencing read "
            "of entry -1 loads a page of the ledger's index "
            "(getLastEntry is 0 for an empty ledger), so a checkpoint flushes the ledger and writes the header, fence "
            "bit included, before it looks for dirty pages (IndexInMemPageMgr.flushSpecificLedger). A writer that "
            "still holds the ledger open then gets its add acknowledged by Qa such bookies after a recovery closed "
            "the ledger at -1: an acknowledged entry that is not in the closed ledger.",
            (
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/BookieImpl.java "
                "(fenceLedger 1132-1136, and addEntryInternal 967-979: only a first add journals the master key; "
                "readJournal 552-561 and 603-607: the fence record's "
                "key from readMasterKey, NoLedgerException skips it; start 680-689: the flush after the replay)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/IndexPersistenceMgr.java "
                "(readMasterKey 403-413 and createFileInfoBackingFile 145-155: no index file, NoLedgerException)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/IndexInMemPageMgr.java "
                "(flushSpecificLedger 535-541: the header first, pages after)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/BookieImpl.java "
                "(constructor 460-481: flushInterval drives checkpoints only with an entry log per ledger or "
                "DbLedgerStorage)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/storage/ldb/"
                "SingleDirectoryDbLedgerStorage.java (readMasterKey 464-468, through LedgerMetadataIndex.get "
                "111-121: NoLedgerException for a ledger RocksDB does not hold; DbLedgerStorage before its first "
                "checkpoint)",
            ),
            ("observed writer_lac = 0, the spec has -1",),
            Reproduction("fence-of-empty-ledger", "FenceOfEmptyLedger", ("default",)),
            part="bookie",
        ),
        Finding(
            "fence-lost-by-db-ledger-storage",
            "bug",
            "DbLedgerStorage forgets the fence of a ledger it holds no entry of: a checkpoint passes the fence record "
            "without writing it",
            "With DbLedgerStorage a fence (and the master key) of a ledger is a change queued in the ledger metadata "
            "index (LedgerMetadataIndex.setFenced, setMasterKey: pendingLedgersUpdates), written to RocksDB by "
            "LedgerMetadataIndex.flush. A checkpoint whose write cache is empty returns before that flush "
            "(SingleDirectoryDbLedgerStorage.checkpoint), and the SyncThread, which checkpoints every flushInterval "
            "with this storage, then completes the checkpoint all the same: the lastMark passes the fence record. "
            "After a crash the replay starts past it and the ledger is unfenced; a crash before the checkpoint loses "
            "it too, as with the default storage (readMasterKey finds no ledger). Reported upstream: apache/bookkeeper "
            "PR #4843 (open), which flushes the ledger metadata index in an empty checkpoint.",
            (
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/storage/ldb/"
                "SingleDirectoryDbLedgerStorage.java (checkpoint 792-846: an empty write cache returns before "
                "ledgerIndex.flush)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/storage/ldb/LedgerMetadataIndex.java "
                "(setFenced 174-201: the change is queued; flush 302)",
                "bookkeeper-server/src/main/java/org/apache/bookkeeper/bookie/SyncThread.java "
                "(checkpoint 168-191: checkpointComplete after any ledger storage checkpoint)",
                "apache/bookkeeper PR #4843 (open): Fix DbLedgerStorage checkpoint losing ledger metadata when write "
                "cache is empty",
            ),
            ("observed writer_lac = 0, the spec has -1",),
            Reproduction("fence-of-empty-ledger", "FenceOfEmptyLedger", ("db",)),
            part="bookie",
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
        Finding(
            "reset-record-keeps-acks",
            "bug",
            "A cursor reset back persists the individual acks from before the reset, and a restart skips them",
            "internalResetCursor persists the reset's mark-delete through internalAsyncMarkDelete, and the record "
            "that persist writes (persistPositionToLedger, or persistPositionToMetaStore) takes the individually "
            "deleted messages and batch indexes as they are in memory: the ones acknowledged before the reset. "
            "The reset clears them only in its callback, after the record is written. Until the next persist "
            "writes the cursor again, a broker that restores the cursor takes the reset's mark-delete with the old "
            "individual acks: the messages after the reset's position that the consumer had acknowledged before "
            "the reset are not delivered again, though the reset was to deliver them.",
            (
                "apache/pulsar managed-ledger 4.0.7: org/apache/bookkeeper/mledger/impl/ManagedCursorImpl.java "
                "(internalResetCursor; persistPositionToLedger and buildIndividualDeletedMessageRanges)",
            ),
            ("was never acknowledged, but the cursor covers it",),
            Reproduction("reset-record-keeps-acks", "ResetRecordKeepsAcks"),
            part="managed-ledger",
        ),
    )
}


class _ShowsFindings(Protocol):
    """A scenario, as far as findings go."""

    @property
    def expects(self) -> str | None: ...

    @property
    def may_show(self) -> tuple[str, ...]: ...


def shown_by(scenarios: Iterable[_ShowsFindings]) -> list[Finding]:
    """The findings the scenarios can show, each it expects or may show, in the order of :data:`FINDINGS`: a
    violation is called known only where the scenario names its finding so."""
    named = {name for s in scenarios for name in (*([s.expects] if s.expects is not None else []), *s.may_show)}
    return [f for f in FINDINGS.values() if f.name in named]
