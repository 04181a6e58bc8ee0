"""A closed ledger's fragments, and which of them are lost (``LedgerChecker``).

A fragment is what one bookie of a segment's ensemble stores of that
segment: with round-robin striping, entry ``e`` goes to ensemble indices
``(e + k) % E`` for ``k < Qw``; a short segment may store nothing on a bookie.
A fragment is lost when its bookie is not available (even an empty one:
``verifyLedgerFragment`` reports an unavailable bookie before it looks at
what it stores), or when that bookie lacks the fragment's first or last
entry (it reads those two; BRIEF section 5).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
from ledgerspec.reference.ledger.schedule import RoundRobinSchedule
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata

__all__ = ["Fragment", "fragments", "lost_fragments", "write_set"]


def _schedule(metadata: LedgerMetadata) -> RoundRobinSchedule:
    return RoundRobinSchedule(metadata.ensemble_size, metadata.write_quorum_size, metadata.ack_quorum_size)


def write_set(metadata: LedgerMetadata, entry_id: int) -> tuple[str, ...]:
    """The bookies the metadata names for entry ``entry_id``: its segment's ensemble, striped."""
    return _schedule(metadata).write_set(metadata.ensemble_for(entry_id), entry_id)


@attrs.frozen
class Fragment:
    """The entries of the segment from ``first_entry_id`` that its ensemble stores on ``bookie``."""

    ledger_id: int
    first_entry_id: int  # the segment's first entry: names the segment in the metadata
    bookie: str
    entries: tuple[int, ...]


def fragments(metadata: LedgerMetadata) -> list[Fragment]:
    """Every fragment of a closed ledger, empty ones included, segment by segment, in ensemble order."""
    if not metadata.closed:
        raise ValueError(f"ledger {metadata.ledger_id} is not closed: its fragments are not fixed yet")
    found: list[Fragment] = []
    schedule = _schedule(metadata)
    for i, segment in enumerate(metadata.segments):
        end = metadata.segments[i + 1].first_entry_id - 1 if i + 1 < len(metadata.segments) else metadata.last_entry_id
        for index, bookie in enumerate(segment.ensemble):
            entries = tuple(e for e in range(segment.first_entry_id, end + 1) if index in schedule.write_set_indices(e))
            found.append(Fragment(metadata.ledger_id, segment.first_entry_id, bookie, entries))
    return found


def lost_fragments(
    metadata: LedgerMetadata, available: set[str], has_entry: Callable[[str, int, int], bool]
) -> list[Fragment]:
    """The fragments on bookies not available, or whose bookie lacks their first or last entry."""
    return [
        f
        for f in fragments(metadata)
        if f.bookie not in available
        or (f.entries and not has_entry(f.bookie, f.ledger_id, f.entries[0]))
        or (f.entries and not has_entry(f.bookie, f.ledger_id, f.entries[-1]))
    ]
