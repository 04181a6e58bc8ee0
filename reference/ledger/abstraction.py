"""The abstraction function: the ledger spec's state (``LedgerState``) of a running simulation.

Read from the engine's parts, each by its own interface:

===================  ==========================================================
spec variables       read from
===================  ==========================================================
``meta_*``           the metadata store (the ledger's znode); versions are the
                     znode's plus one (the spec's ledger starts at version 1)
``bookie_*``         each bookie (``BookieNode.view``): entries and fence from
                     its memory state, LAC from ``read_piggybacked_lac``, the
                     data of each entry from its payload; a down bookie as it
                     was when it stopped
``crashed``,         the cluster: bookies down, crashes so far
``crashes``
``net``, ``lost``    the cluster's requests in flight that the spec has
                     messages for, plus those served to no effect (for the
                     spec they are still in flight); losses of spec messages
``writer_*``         the writer's core (``LedgerWriter``): status, version,
                     lastAddPushed, LAC, acks, the LAC each add was packaged
                     with (-1 for the entries not pushed)
``rec``              each recovery's core (``LedgerRecovery``), field by field;
                     a client that has not started is IDLE
``reader_*``         the simulation's reader, when it is the spec's reader 1
                     (``readers=1``): the highest LAC it learned, the entries
                     it read with their data
===================  ==========================================================

An entry's bytes are the spec's data ``payload(e)`` when they are the
payload the writer's application added as entry ``e``
(``EventLog.added``), -1 when the application never added them.

Bookies are numbered as the cluster numbers them (``bookie-3`` is 3).
"""

from __future__ import annotations

from collections.abc import Mapping

from ledgerspec.reference.ledger.events import spec_data, to_msg
from ledgerspec.reference.ledger.recovery import LedgerRecovery
from ledgerspec.reference.ledger.simulation import LedgerSimulation
from ledgerspec.reference.metadata import LedgerState as MetadataState
from ledgerspec.spec.ledger.ledger import IDLE_RECOVERER, LedgerState, Recoverer

__all__ = ["abstract_state"]


def _recoverer(recovery: LedgerRecovery, number: dict[str, int], added: Mapping[bytes, int]) -> Recoverer:
    return Recoverer(
        phase=recovery.phase.value,
        version=recovery.version + 1 if recovery.version is not None else 0,
        fence_replies=frozenset(number[b] for b in recovery.fence_replies),
        max_lac=recovery.max_lac,
        start=recovery.start,
        next=recovery.next,
        no_such=frozenset(number[b] for b in recovery.no_such),
        last=recovery.last,
        wb_acks=frozenset((e, number[b]) for e, b in recovery.wb_acks),
        segments=tuple((first, tuple(number[b] for b in ensemble)) for first, ensemble in recovery.read_segments),
        ensembles=tuple((first, tuple(number[b] for b in ensemble)) for first, ensemble in recovery.ensembles),
        data=frozenset((e, spec_data(entry.payload, added)) for e, entry in recovery.recovered.items()),
    )


def abstract_state(sim: LedgerSimulation) -> LedgerState:
    """The spec state the simulation is in (module docstring)."""
    cluster, lid = sim.cluster, sim.ledger_id
    number = {address: node.number for address, node in cluster.nodes.items()}
    current = sim.ledgers.read(lid)
    md = current.metadata
    views = [node.view(lid) for node in sorted(cluster.nodes.values(), key=lambda n: n.number)]
    writer = sim.handle.writer
    requests = [*cluster.in_flight, *cluster.unserved]
    added = cluster.events.added
    return LedgerState(
        meta_status=md.state.name,
        meta_segments=tuple((s.first_entry_id, tuple(number[b] for b in s.ensemble)) for s in md.segments),
        meta_last_entry=md.last_entry_id if md.state is MetadataState.CLOSED else -1,
        meta_version=current.version + 1,
        bookie_entries=tuple(v.entries for v in views),
        bookie_data=tuple(frozenset((e, spec_data(p, added)) for e, p in v.payloads) for v in views),
        bookie_lac=tuple(v.lac for v in views),
        bookie_fenced=tuple(v.fenced for v in views),
        crashed=frozenset(node.number for node in cluster.nodes.values() if not node.up),
        crashes=cluster.crashes,
        net=frozenset(to_msg(r, cluster.number, added) for r in requests if r.in_spec and r.ledger_id == lid),
        lost=cluster.lost,
        writer_status=writer.status.value,
        writer_version=writer.version + 1,
        writer_lap=writer.lap,
        writer_lac=writer.lac,
        writer_acks=frozenset((e, number[b]) for e, acked in writer.acks.items() for b in acked),
        writer_add_lac=tuple(
            writer.add_lacs[e] if e < len(writer.add_lacs) else -1 for e in range(sim.config.max_entries)
        ),
        rec=tuple(
            _recoverer(sim.recoveries[c].recovery, number, added) if c in sim.recoveries else IDLE_RECOVERER
            for c in range(1, sim.config.recoverers + 1)
        ),
        reader_lac=(sim.reader_lac,) if sim.config.readers else (),
        reader_read=(frozenset(sim.reader_read),) if sim.config.readers else (),
    )
