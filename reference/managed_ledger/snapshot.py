"""A cursor's acknowledgement state as a value, and as Pulsar's PositionInfo and ManagedCursorInfo fields.

A :class:`CursorSnapshot` is what a persist writes and a restore reads: the
mark-delete position, the individually acknowledged entries after it, and,
for each partly acknowledged batch, the batch indexes not acknowledged yet;
and the cursor's properties (named longs: the deduplication cursor keeps
each producer's highest sequence id there).
Pulsar writes it in these shapes (``ManagedCursorImpl.buildIndividualDeletedMessageRanges``,
``buildBatchEntryDeletionIndexInfoList``):

- the individually acknowledged entries as ``MessageRange`` values, open
  below and closed above: acknowledging entry ``l:e`` adds ``(l:e-1, l:e]``,
  and ranges of consecutive entries of one ledger merge, so ``l:3, l:4, l:5``
  are written as ``(l:2, l:5]``;
- a partly acknowledged batch as ``BatchedEntryDeletionIndexInfo``: its
  position and the bits of ``BitSet.toLongArray()`` in which a set bit is an
  index *not yet* acknowledged (the consumer's ack set).

Reading ranges back needs the entry counts of the ledgers a range spans when
it crosses a ledger boundary (Pulsar never writes one, but its range set
accepts them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

import attrs
from ledgerspec.reference.metadata.managed_ledger_format import (
    BatchDeletionIndex,
    MessageRange,
)
from ledgerspec.reference.metadata.managed_ledger_format import Position as WirePosition
from ledgerspec.spec.positions import Position

__all__ = ["CursorSnapshot", "bits_of", "entries_of_ranges", "longs_of", "ranges_of_entries"]


def _batch_map(batches: Mapping[Position, frozenset[int]]) -> dict[Position, frozenset[int]]:
    return dict(batches)


def _property_map(properties: Mapping[str, int]) -> dict[str, int]:
    return dict(properties)


@attrs.frozen
class CursorSnapshot:
    """A cursor's acknowledgements: everything up to ``mark_delete``, the entries ``acked`` after it, and the
    indexes of each partly acknowledged batch that are still unacknowledged."""

    mark_delete: Position
    acked: frozenset[Position] = frozenset()
    unacked_batch: Mapping[Position, frozenset[int]] = attrs.field(factory=dict, converter=_batch_map)
    properties: Mapping[str, int] = attrs.field(factory=dict, converter=_property_map)  # LongProperty

    def __hash__(self) -> int:
        return hash(
            (self.mark_delete, self.acked, frozenset(self.unacked_batch.items()), frozenset(self.properties.items()))
        )

    def wire_ranges(self) -> tuple[MessageRange, ...]:
        return tuple(
            MessageRange(WirePosition(*lower), WirePosition(*upper)) for lower, upper in ranges_of_entries(self.acked)
        )

    def wire_batches(self) -> tuple[BatchDeletionIndex, ...]:
        return tuple(
            BatchDeletionIndex(WirePosition(*position), longs_of(unacked))
            for position, unacked in sorted(self.unacked_batch.items())
        )

    @classmethod
    def from_wire(
        cls,
        mark_delete: WirePosition,
        ranges: Sequence[MessageRange],
        batches: Sequence[BatchDeletionIndex],
        ledgers: Sequence[int],
        count: Callable[[int], int],
        properties: Mapping[str, int] | None = None,
    ) -> CursorSnapshot:
        bounds = [((r.lower.ledger_id, r.lower.entry_id), (r.upper.ledger_id, r.upper.entry_id)) for r in ranges]
        return cls(
            (mark_delete.ledger_id, mark_delete.entry_id),
            frozenset(entries_of_ranges(bounds, ledgers, count)),
            {(b.position.ledger_id, b.position.entry_id): frozenset(bits_of(b.delete_set)) for b in batches},
            properties or {},
        )


def ranges_of_entries(entries: Iterable[Position]) -> list[tuple[Position, Position]]:
    """Open-closed ranges ``(lower, upper]`` covering ``entries``, consecutive entries of a ledger merged."""
    ranges: list[tuple[Position, Position]] = []
    for ledger, entry in sorted(entries):
        if ranges and ranges[-1][1] == (ledger, entry - 1):
            ranges[-1] = (ranges[-1][0], (ledger, entry))
        else:
            ranges.append(((ledger, entry - 1), (ledger, entry)))
    return ranges


def entries_of_ranges(
    ranges: Iterable[tuple[Position, Position]], ledgers: Sequence[int], count: Callable[[int], int]
) -> Iterator[Position]:
    """The entries of open-closed ranges; a range across ledgers covers the entries of the ledgers between."""
    for (lower_ledger, lower_entry), (upper_ledger, upper_entry) in ranges:
        if lower_ledger == upper_ledger:
            yield from ((lower_ledger, e) for e in range(lower_entry + 1, upper_entry + 1))
            continue
        yield from ((lower_ledger, e) for e in range(lower_entry + 1, count(lower_ledger)))
        for ledger in ledgers:
            if lower_ledger < ledger < upper_ledger:
                yield from ((ledger, e) for e in range(count(ledger)))
        yield from ((upper_ledger, e) for e in range(upper_entry + 1))


def longs_of(bits: Iterable[int]) -> tuple[int, ...]:
    """``BitSet.toLongArray()`` of the set bits: 64 bits a long, signed, trailing zero longs dropped."""
    words: list[int] = []
    for bit in bits:
        while len(words) <= bit // 64:
            words.append(0)
        words[bit // 64] |= 1 << (bit % 64)
    return tuple(w - (1 << 64) if w >= 1 << 63 else w for w in words)


def bits_of(longs: Iterable[int]) -> Iterator[int]:
    """The set bits of ``BitSet.valueOf(longs)``."""
    for i, word in enumerate(longs):
        word &= (1 << 64) - 1
        yield from (i * 64 + b for b in range(64) if word >> b & 1)
