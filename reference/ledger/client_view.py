"""What the ledger spec's clients see of a run: the variables of its ``client`` observation mode, read from the
engine's clients and the metadata store, with no bookie in sight.

The abstraction function (:mod:`.abstraction`) adds the bookies and the
network to this for a run of the in-process cluster; a client whose bookies
are elsewhere (real ones over TCP, :mod:`ledgerspec.reference.wire.network`)
has this view only, which is what its ``client``-mode trace reports.

===================  ==========================================================
spec variables       read from
===================  ==========================================================
``meta_*``           the metadata store (the ledger's znode); versions are the
                     znode's plus one (the spec's ledger starts at version 1)
``writer_*``         the writer's core (``LedgerWriter``): status, version,
                     lastAddPushed, LAC, acks, the LAC each add was packaged
                     with (-1 for the entries not pushed), the LAC its last
                     explicit LAC was sent for
``rec``              each recovery's core (``LedgerRecovery``), field by field;
                     a client that has not started is IDLE
``reader_*``         the spec's reader 1, when there is one: the highest LAC it
                     learned, the entries it read with their data
===================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs
from ledgerspec.reference.ledger.events import spec_data
from ledgerspec.reference.ledger.recovery import LedgerRecovery
from ledgerspec.reference.ledger.writer import LedgerWriter
from ledgerspec.reference.metadata import LedgerState as MetadataState
from ledgerspec.reference.metadata.ledger_store import LedgerMetadataStore
from ledgerspec.spec.ledger.ledger import IDLE_RECOVERER, Recoverer

__all__ = ["ClientView", "client_view"]


@attrs.frozen
class ClientView:
    """The ledger spec's variables its ``client`` observation mode observes, by their names in ``LedgerState``."""

    meta_status: str
    meta_segments: tuple[tuple[int, tuple[int, ...]], ...]
    meta_last_entry: int
    meta_version: int
    writer_status: str
    writer_version: int
    writer_lap: int
    writer_lac: int
    writer_acks: frozenset[tuple[int, int]]
    writer_add_lac: tuple[int, ...]
    rec: tuple[Recoverer, ...]
    reader_lac: tuple[int, ...] = ()
    reader_read: tuple[frozenset[tuple[int, int]], ...] = ()
    writer_explicit_lac: int = -1


def _recoverer(recovery: LedgerRecovery, number: Callable[[str], int], added: Mapping[bytes, int]) -> Recoverer:
    return Recoverer(
        phase=recovery.phase.value,
        version=recovery.version + 1 if recovery.version is not None else 0,
        fence_replies=frozenset(number(b) for b in recovery.fence_replies),
        max_lac=recovery.max_lac,
        start=recovery.start,
        next=recovery.next,
        no_such=frozenset(number(b) for b in recovery.no_such),
        last=recovery.last,
        wb_acks=frozenset((e, number(b)) for e, b in recovery.wb_acks),
        segments=tuple((first, tuple(number(b) for b in ensemble)) for first, ensemble in recovery.read_segments),
        ensembles=tuple((first, tuple(number(b) for b in ensemble)) for first, ensemble in recovery.ensembles),
        data=frozenset((e, spec_data(entry.payload, added)) for e, entry in recovery.recovered.items()),
    )


def client_view(
    ledgers: LedgerMetadataStore,
    ledger_id: int,
    writer: LedgerWriter,
    recoveries: Mapping[int, LedgerRecovery],
    *,
    number: Callable[[str], int],
    added: Mapping[bytes, int],
    max_entries: int,
    recoverers: int,
    reader: tuple[int, frozenset[tuple[int, int]]] | None = None,
) -> ClientView:
    """The clients' view of ledger ``ledger_id`` (module docstring): recovering clients ``1 .. recoverers``
    (``recoveries`` by client, those started), entries ``0 .. max_entries-1``, and the reader's (LAC, reads)."""
    current = ledgers.read(ledger_id)
    md = current.metadata
    return ClientView(
        meta_status=md.state.name,
        meta_segments=tuple((s.first_entry_id, tuple(number(b) for b in s.ensemble)) for s in md.segments),
        meta_last_entry=md.last_entry_id if md.state is MetadataState.CLOSED else -1,
        meta_version=current.version + 1,
        writer_status=writer.status.value,
        writer_version=writer.version + 1,
        writer_lap=writer.lap,
        writer_lac=writer.lac,
        writer_acks=frozenset((e, number(b)) for e, acked in writer.acks.items() for b in acked),
        writer_add_lac=tuple(writer.add_lacs[e] if e < len(writer.add_lacs) else -1 for e in range(max_entries)),
        rec=tuple(
            _recoverer(recoveries[c], number, added) if c in recoveries else IDLE_RECOVERER
            for c in range(1, recoverers + 1)
        ),
        reader_lac=(reader[0],) if reader is not None else (),
        reader_read=(reader[1],) if reader is not None else (),
        writer_explicit_lac=writer.explicit_lac_at,
    )
