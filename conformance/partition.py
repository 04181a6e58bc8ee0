"""Split a trace into the units its spec checks apart: the mapping's partition key (spec/tracing.py).

A trace of a system that keeps several independent units (the ledgers of
one bookie, the topics of one broker) is checked as one trace per unit when
the spec's trace mapping names the unit of each event. Events whose key is
``None`` concern every unit (``Init``, a crash) and go into each. A unit's
trace id is ``<trace>/<unit>``. Lines that could not be read belong to no
known unit, so each unit of their trace gets them (and is inconclusive):
any unit may have lost an event there.

The in-process run and the Spark run both split here, after a trace's
events are together, so both give the same verdicts. Without a partition
key (the ledger spec: one ledger per trace) a trace is one unit.
"""

from __future__ import annotations

import attrs
from ledgerspec.conformance.events import Event
from ledgerspec.conformance.reader import TraceInput
from ledgerspec.spec.tracing import PartitionKey

__all__ = ["split_trace"]


def _in_unit(e: Event, trace: str) -> Event:
    return Event(trace, e.process, e.seq, e.type, e.params, e.observed, e.time, e.clock, e.file, e.line, e.params_key)


def split_trace(item: TraceInput, partition: PartitionKey | None) -> list[TraceInput]:
    """The units of one trace (its events in reading order), each as a trace of its own."""
    if partition is None:
        return [item]
    keys = [partition(e.type, e.params) for e in item.events]
    units = list(dict.fromkeys(k for k in keys if k is not None))
    if not units:
        return [item]
    split = []
    for unit in units:
        trace = f"{item.trace}/{unit}"
        events = tuple(_in_unit(e, trace) for e, k in zip(item.events, keys, strict=True) if k is None or k == unit)
        errors = tuple(attrs.evolve(error, trace=trace) for error in item.errors)
        split.append(TraceInput(trace, events, errors))
    return split
