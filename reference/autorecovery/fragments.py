"""A ledger's fragments, and which of them are lost (``LedgerChecker``).

A fragment is what one bookie of a segment's ensemble stores of that
segment: with round-robin striping, entry ``e`` goes to ensemble indices
``(e + k) % E`` for ``k < Qw``; a short segment may store nothing on a bookie.
A fragment is lost when its bookie is not available (even an empty one:
``verifyLedgerFragment`` reports an unavailable bookie before it looks at
what it stores), or when that bookie lacks the fragment's first or last
entry (it reads those two; BRIEF section 5).

A closed ledger's fragments end where their segment ends. An open ledger is
checked through a handle opened without recovery, which knows the LAC the
bookies reported: its last segment's fragments end there (or at the
segment's first entry, when the LAC is below it), and a fragment is closed,
no writer changing it any more, only when it is not the last segment's and
the LAC reaches the last segment's first entry less one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import attrs
from ledgerspec.reference.ledger.schedule import RoundRobinSchedule
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata

__all__ = ["Fragment", "fragments", "last_segment_open_and_missing", "lost_fragments", "write_set"]


def _schedule(metadata: LedgerMetadata) -> RoundRobinSchedule:
    return RoundRobinSchedule(metadata.ensemble_size, metadata.write_quorum_size, metadata.ack_quorum_size)


def write_set(metadata: LedgerMetadata, entry_id: int) -> tuple[str, ...]:
    """The bookies the metadata names for entry ``entry_id``: its segment's ensemble, striped."""
    return _schedule(metadata).write_set(metadata.ensemble_for(entry_id), entry_id)


@attrs.frozen
class Fragment:
    """The entries of the segment from ``first_entry_id`` that its ensemble stores on ``bookie``, up to the
    fragment's last entry; ``closed``: no writer can add to it (``LedgerFragment.isClosed``)."""

    ledger_id: int
    first_entry_id: int  # the segment's first entry: names the segment in the metadata
    bookie: str
    entries: tuple[int, ...]
    closed: bool = True


def fragments(metadata: LedgerMetadata, lac: int | None = None) -> list[Fragment]:
    """Every fragment of the ledger, empty ones included, segment by segment, in ensemble order; an open ledger's
    as a handle that read the LAC ``lac`` sees them (module docstring)."""
    if not metadata.closed and lac is None:
        raise ValueError(f"ledger {metadata.ledger_id} is not closed: its fragments are not fixed yet")
    found: list[Fragment] = []
    schedule = _schedule(metadata)
    segments = metadata.segments
    last_first = segments[-1].first_entry_id
    for i, segment in enumerate(segments):
        if i + 1 < len(segments):
            end = segments[i + 1].first_entry_id - 1
        elif metadata.closed:
            end = metadata.last_entry_id
        else:
            # LedgerChecker.checkLedger (release-4.17.2): the last fragment ends at the handle's LAC, or at the
            # segment's first entry when the LAC is below it (the checker then reads that entry to learn whether
            # it was written; every segment here starts with an entry that was).
            assert lac is not None
            end = max(lac, segment.first_entry_id)
        # LedgerFragment's constructor (release-4.17.2): isLedgerClosed when the ledger is closed, or the segment
        # is not the last and the LAC reaches the last segment's first entry less one. It tells the last segment
        # by its ensemble, and so would a segment whose ensemble a worker made equal to the last one's; this
        # tells it by its place.
        closed = metadata.closed or (i + 1 < len(segments) and lac is not None and lac >= last_first - 1)
        for index, bookie in enumerate(segment.ensemble):
            entries = tuple(e for e in range(segment.first_entry_id, end + 1) if index in schedule.write_set_indices(e))
            found.append(Fragment(metadata.ledger_id, segment.first_entry_id, bookie, entries, closed))
    return found


def lost_fragments(
    metadata: LedgerMetadata,
    available: Collection[str],
    has_entry: Callable[[str, int, int], bool],
    lac: int | None = None,
) -> list[Fragment]:
    """The fragments on bookies not available, or whose bookie lacks their first or last entry."""
    return [
        f
        for f in fragments(metadata, lac)
        if f.bookie not in available
        or (f.entries and not has_entry(f.bookie, f.ledger_id, f.entries[0]))
        or (f.entries and not has_entry(f.bookie, f.ledger_id, f.entries[-1]))
    ]


def last_segment_open_and_missing(metadata: LedgerMetadata, lac: int, available: Collection[str]) -> bool:
    """The ledger is open and a bookie of its last ensemble is not available; of the last two ensembles, when the
    LAC is below the last segment's first entry less one (the one before may then be written to still)."""
    # ReplicationWorker.isLastSegmentOpenAndMissingBookies (release-4.17.2).
    if metadata.closed:
        return False
    segments = metadata.segments
    named = set(segments[-1].ensemble)
    if len(segments) > 1 and lac < segments[-1].first_entry_id - 1:
        named |= set(segments[-2].ensemble)
    return not named <= set(available)
