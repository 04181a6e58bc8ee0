"""A ledger's metadata, as BookKeeper's ``LedgerMetadata`` holds it: an immutable value.

The fields and their rules follow ``LedgerMetadataBuilder`` and
``LedgerMetadataImpl`` (bookkeeper-server, ``client/``): the striping
(E >= Qw >= Qa), the segments (each from its first entry id on, with an
ensemble of E bookie ids, first entry ids strictly increasing), the state
OPEN -> IN_RECOVERY -> CLOSED, and lastEntryId/length, which mean something
only once the ledger is CLOSED (-1 and 0 until then, as BookKeeper writes
them). Nothing here does I/O: ``ledger_metadata_format.py`` turns the value
into BookKeeper's bytes and back, ``ledger_store.py`` keeps it in a store.

One rule is stricter than BookKeeper's builder: Qa >= 1.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Mapping

import attrs

__all__ = [
    "INVALID_ENTRY_ID",
    "DigestType",
    "InvalidLedgerMetadataError",
    "LedgerMetadata",
    "LedgerState",
    "Segment",
]

INVALID_ENTRY_ID = -1
"""lastEntryId of a ledger that is not closed, or closed empty (``LedgerHandle.INVALID_ENTRY_ID``)."""

_MAX_LONG = 2**63 - 1


class LedgerState(enum.IntEnum):
    """The ledger's state; the values are ``LedgerMetadataFormat.State``'s."""

    OPEN = 1
    IN_RECOVERY = 2
    CLOSED = 3


class DigestType(enum.IntEnum):
    """How entries are checksummed; the values are ``LedgerMetadataFormat.DigestType``'s (MAC is HMAC there)."""

    CRC32 = 1
    MAC = 2
    CRC32C = 3
    DUMMY = 4


class InvalidLedgerMetadataError(ValueError):
    """Metadata that breaks one of BookKeeper's rules; the message names the rule and the values."""


def _bookie_ids(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class Segment:
    """The ensemble that stores entries from ``first_entry_id`` until the next segment's first entry."""

    first_entry_id: int
    ensemble: tuple[str, ...] = attrs.field(converter=_bookie_ids)  # bookie ids ("host:port", or a chosen name)


def _segments(value: Iterable[Segment | tuple[int, Iterable[str]]]) -> tuple[Segment, ...]:
    return tuple(s if isinstance(s, Segment) else Segment(s[0], s[1]) for s in value)


def _custom_metadata(value: Mapping[str, bytes] | Iterable[tuple[str, bytes]]) -> tuple[tuple[str, bytes], ...]:
    # A map in BookKeeper: one value per key, the last one given.
    pairs = value.items() if isinstance(value, Mapping) else value
    return tuple(dict(pairs).items())


@attrs.frozen
class LedgerMetadata:
    """Everything BookKeeper stores about one ledger."""

    ledger_id: int
    ensemble_size: int  # E: bookies in each ensemble
    write_quorum_size: int  # Qw: bookies each entry is written to (``quorumSize`` in the protobuf)
    ack_quorum_size: int  # Qa: acks that complete an add
    segments: tuple[Segment, ...] = attrs.field(converter=_segments)
    state: LedgerState = LedgerState.OPEN
    last_entry_id: int = INVALID_ENTRY_ID  # last entry of a CLOSED ledger; -1 otherwise
    length: int = 0  # bytes in a CLOSED ledger; 0 otherwise
    digest_type: DigestType | None = DigestType.CRC32C  # None: no password stored (ledgers of BookKeeper < 4.2)
    password: bytes = b""
    ctime: int | None = None  # creation time (ms) if stored in the metadata (``storeSystemtimeAsLedgerCreationTime``)
    custom_metadata: tuple[tuple[str, bytes], ...] = attrs.field(default=(), converter=_custom_metadata)
    creator_token: int = 0  # ``cToken``: random, set by the creator to recognize its own create after a retry

    def __attrs_post_init__(self) -> None:
        problem = self._problem()
        if problem is not None:
            raise InvalidLedgerMetadataError(f"ledger {self.ledger_id}: {problem}")

    def _problem(self) -> str | None:
        e, qw, qa = self.ensemble_size, self.write_quorum_size, self.ack_quorum_size
        if not 0 <= self.ledger_id <= _MAX_LONG:
            return f"ledger id {self.ledger_id} is outside 0..2^63-1"
        if not e >= qw >= qa >= 1:
            return f"quorums must satisfy E >= Qw >= Qa >= 1, got E={e}, Qw={qw}, Qa={qa}"
        if not self.segments:
            return "there must be at least one segment"
        previous = -1
        for index, segment in enumerate(self.segments):
            if segment.first_entry_id <= previous:
                return (
                    f"segment {index} starts at entry {segment.first_entry_id}; first entry ids must be >= 0 "
                    "and strictly increasing"
                )
            if len(segment.ensemble) != e:
                size = len(segment.ensemble)
                return f"segment {index} (from entry {segment.first_entry_id}) has {size} bookies, E={e}"
            if not all(segment.ensemble):
                return f"segment {index} (from entry {segment.first_entry_id}) has an empty bookie id"
            previous = segment.first_entry_id
        if self.state is not LedgerState.CLOSED and (self.last_entry_id, self.length) != (INVALID_ENTRY_ID, 0):
            return (
                f"a {self.state.name} ledger has no last entry or length yet, "
                f"got lastEntryId={self.last_entry_id}, length={self.length}"
            )
        if self.state is LedgerState.CLOSED and (self.last_entry_id < INVALID_ENTRY_ID or self.length < 0):
            return f"a CLOSED ledger needs lastEntryId >= -1 and length >= 0, got {self.last_entry_id}, {self.length}"
        if self.digest_type is None and self.password:
            return "a password without a digest type"
        return None

    @property
    def closed(self) -> bool:
        return self.state is LedgerState.CLOSED

    @property
    def last_ensemble(self) -> tuple[str, ...]:
        """The ensemble new entries go to."""
        return self.segments[-1].ensemble

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        """The ensemble of the segment holding ``entry_id``: the last one starting at or before it."""
        starts = [segment.first_entry_id for segment in self.segments]
        index = bisect.bisect_right(starts, entry_id) - 1
        if index < 0:
            raise ValueError(f"ledger {self.ledger_id}: entry {entry_id} is before the first segment ({starts[0]})")
        return self.segments[index].ensemble

    # Updates. Each returns new metadata with a blank creator token, as
    # BookKeeper's LedgerMetadataBuilder.from() does: only the create carries one.

    def _updated(self, **changes: object) -> LedgerMetadata:
        if self.closed:
            raise InvalidLedgerMetadataError(f"ledger {self.ledger_id} is CLOSED; a closed ledger never changes")
        return attrs.evolve(self, creator_token=0, **changes)  # type: ignore[arg-type]

    def in_recovery(self) -> LedgerMetadata:
        """The metadata a recovering client writes first (OPEN -> IN_RECOVERY)."""
        return self._updated(state=LedgerState.IN_RECOVERY)

    def closed_at(self, last_entry_id: int, length: int) -> LedgerMetadata:
        """The metadata of the ledger closed with ``last_entry_id`` as its last entry."""
        return self._updated(state=LedgerState.CLOSED, last_entry_id=last_entry_id, length=length)

    def with_replica_replaced(self, first_entry_id: int, old: str, new: str) -> LedgerMetadata:
        """Re-replication's update (``updateEnsembleInfo``): in the segment from ``first_entry_id``, bookie ``new``
        takes the place of ``old``. Also on a CLOSED ledger: it moves where entries are kept, not what they are."""
        index = next((i for i, s in enumerate(self.segments) if s.first_entry_id == first_entry_id), None)
        if index is None:
            raise InvalidLedgerMetadataError(f"ledger {self.ledger_id} has no segment from entry {first_entry_id}")
        ensemble = self.segments[index].ensemble
        if old not in ensemble or new in ensemble:
            raise InvalidLedgerMetadataError(
                f"ledger {self.ledger_id}: cannot replace {old} by {new} in the ensemble {list(ensemble)} "
                f"of the segment from entry {first_entry_id}"
            )
        replaced = Segment(first_entry_id, tuple(new if b == old else b for b in ensemble))
        segments = (*self.segments[:index], replaced, *self.segments[index + 1 :])
        return attrs.evolve(self, creator_token=0, segments=segments)

    def with_ensemble_from(self, first_entry_id: int, ensemble: Iterable[str]) -> LedgerMetadata:
        """An ensemble change: a new segment from ``first_entry_id``, replacing the last if it starts there too."""
        kept = self.segments[:-1] if self.segments[-1].first_entry_id == first_entry_id else self.segments
        return self._updated(segments=(*kept, Segment(first_entry_id, ensemble)))
