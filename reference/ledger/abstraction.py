"""The abstraction function: the ledger spec's state (``LedgerState``) of a running simulation.

Read from the engine's parts, each by its own interface:

===================  ==========================================================
spec variables       read from
===================  ==========================================================
``meta_*``,          what the clients see (:mod:`.client_view`): the ledger's
``writer_*``,        znode, the writer's and each recovery's core, the
``rec``,             simulation's reader
``reader_*``
``bookie_*``         each bookie (``BookieNode.view``): entries, fence and
                     explicit LAC from its memory state, LAC from
                     ``read_piggybacked_lac``, the
                     data of each entry from its payload; a down bookie as it
                     was when it stopped
``crashed``,         the cluster: bookies down, crashes so far
``crashes``
``net``, ``lost``    the cluster's requests in flight that the spec has
                     messages for, plus those served to no effect (for the
                     spec they are still in flight); losses of spec messages
===================  ==========================================================

An entry's bytes are the spec's data ``payload(e)`` when they are the
payload the writer's application added as entry ``e``
(``EventLog.added``), -1 when the application never added them.

Bookies are numbered as the cluster numbers them (``bookie-3`` is 3).
"""

from __future__ import annotations

import attrs
from ledgerspec.reference.ledger.client_view import client_view
from ledgerspec.reference.ledger.events import spec_data, to_msg
from ledgerspec.reference.ledger.simulation import LedgerSimulation
from ledgerspec.spec.ledger.ledger import LedgerState

__all__ = ["abstract_state"]


def abstract_state(sim: LedgerSimulation) -> LedgerState:
    """The spec state the simulation is in (module docstring)."""
    cluster, lid = sim.cluster, sim.ledger_id
    views = [node.view(lid) for node in sorted(cluster.nodes.values(), key=lambda n: n.number)]
    requests = [*cluster.in_flight, *cluster.unserved]
    added = cluster.events.added
    clients = client_view(
        sim.ledgers,
        lid,
        sim.handle.writer,
        {c: open_.recovery for c, open_ in sim.recoveries.items()},
        number=cluster.number,
        added=added,
        max_entries=sim.config.max_entries,
        recoverers=sim.config.recoverers,
        reader=(sim.reader_lac, frozenset(sim.reader_read)) if sim.config.readers else None,
    )
    return LedgerState(
        **attrs.asdict(clients, recurse=False),
        bookie_entries=tuple(v.entries for v in views),
        bookie_data=tuple(frozenset((e, spec_data(p, added)) for e, p in v.payloads) for v in views),
        bookie_lac=tuple(v.lac for v in views),
        bookie_fenced=tuple(v.fenced for v in views),
        bookie_explicit_lac=tuple(v.explicit_lac for v in views),
        crashed=frozenset(node.number for node in cluster.nodes.values() if not node.up),
        crashes=cluster.crashes,
        net=frozenset(to_msg(r, cluster.number, added) for r in requests if r.in_spec and r.ledger_id == lid),
        lost=cluster.lost,
    )
