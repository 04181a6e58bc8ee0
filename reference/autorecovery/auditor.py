"""The auditor's checks: of the bookies (``AuditorBookieCheckTask.auditBookies``) and of all ledgers
(``AuditorCheckAllLedgersTask.checkAllLedgers``).

The bookies named in some ledger's metadata (the bookie-to-ledgers index of
``BookieLedgerIndexer``) that are not registered as available are lost; each
ledger with a fragment on a lost bookie is marked under-replicated, the mark
naming that bookie. Only the elected auditor runs the check.

The check of all ledgers runs ``LedgerChecker`` on each ledger (the lost
fragments of :func:`~.fragments.lost_fragments`, read from the bookies) and
marks each ledger with the bookies of its lost fragments: it alone finds a
bookie that is available and lacks what the metadata names it for. An open
ledger is checked as a handle opened without recovery sees it, up to the LAC
its bookies report; one whose bookies do not answer enough to be opened is
left for the next check.
``mutant="marks_nothing"`` is the auditor that finds the lost bookies and
marks no ledger: the mutant the oracle must catch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from ledgerspec.reference.autorecovery.bookies import BookieAccess, read_last_add_confirmed, serves_entry
from ledgerspec.reference.autorecovery.election import available_bookies, current_auditor
from ledgerspec.reference.autorecovery.fragments import lost_fragments
from ledgerspec.reference.autorecovery.underreplication import UnderreplicationManager
from ledgerspec.reference.autorecovery.znodes import UnderreplicationPaths
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore, NoSuchLedgerError
from ledgerspec.reference.metadata.store import MetadataStore

__all__ = ["AUDITOR_MUTANTS", "Auditor"]

AUDITOR_MUTANTS = {"marks_nothing": "the bookie check finds the lost bookies and marks no ledger under-replicated"}


class Auditor:
    """The auditor of the bookie ``bookie_id``, on its own metadata session."""

    def __init__(
        self,
        store: MetadataStore,
        bookie_id: str,
        *,
        paths: UnderreplicationPaths | None = None,
        mutant: str | None = None,
    ) -> None:
        if mutant is not None and mutant not in AUDITOR_MUTANTS:
            raise ValueError(f"unknown auditor mutant {mutant!r}; known: {', '.join(AUDITOR_MUTANTS)}")
        self.store = store
        self.bookie_id = bookie_id
        self.paths = paths or UnderreplicationPaths()
        self.ledgers = LedgerMetadataStore(store, root=self.paths.root)
        self.marks = UnderreplicationManager(store, self.paths, owner=bookie_id)
        self.mutant = mutant

    def is_elected(self) -> bool:
        return current_auditor(self.store, self.paths) == self.bookie_id

    def _ledgers(self) -> Iterator[LedgerMetadata]:
        """The metadata of every ledger, less those deleted since they were listed."""
        for ledger_id in self.ledgers.ledger_ids():
            with contextlib.suppress(NoSuchLedgerError):
                yield self.ledgers.read(ledger_id).metadata

    def bookie_to_ledgers(self) -> dict[str, set[int]]:
        """Every bookie some ledger's metadata names, with those ledgers (``getBookieToLedgerIndex``)."""
        index: dict[str, set[int]] = {}
        for metadata in self._ledgers():
            for segment in metadata.segments:
                for bookie in segment.ensemble:
                    index.setdefault(bookie, set()).add(metadata.ledger_id)
        return index

    def _require_elected(self) -> None:
        if not self.is_elected():
            raise RuntimeError(f"bookie {self.bookie_id} is not the elected auditor")

    def check_bookies(self) -> dict[str, set[int]]:
        """Run the bookie check; the lost bookies, each with the ledgers it left under-replicated."""
        self._require_elected()
        index = self.bookie_to_ledgers()
        lost = {b: ledgers for b, ledgers in index.items() if b not in available_bookies(self.store, self.paths)}
        if self.mutant != "marks_nothing":
            for bookie, ledgers in sorted(lost.items()):
                for ledger_id in sorted(ledgers):
                    self.marks.mark(ledger_id, [bookie])
        return lost

    def check_all_ledgers(self, bookies: BookieAccess) -> dict[int, set[str]]:
        """Run the check of all ledgers, reading through ``bookies``; each ledger with lost fragments, with the
        bookies it was marked for."""
        self._require_elected()
        available = available_bookies(self.store, self.paths)
        found: dict[int, set[str]] = {}
        for metadata in self._ledgers():
            # AuditorCheckAllLedgersTask.checkAllLedgers (release-4.17.2) opens each ledger with
            # openLedgerNoRecovery and runs LedgerChecker.checkLedger on the handle; a failed open skips it.
            lac = metadata.last_entry_id if metadata.closed else read_last_add_confirmed(metadata, bookies)
            if lac is None:
                continue
            lost = {f.bookie for f in lost_fragments(metadata, available, serves_entry(bookies), lac)}
            if lost:
                self.marks.mark(metadata.ledger_id, sorted(lost))
                found[metadata.ledger_id] = lost
        return found
