"""Pulsar's managed-ledger metadata as values, and as the bytes a broker stores.

Three messages of ``MLDataFormats.proto`` (``protos/MLDataFormats.proto``,
field for field as Pulsar numbers them) hold a topic's storage state:

==========================  ==================================================
value                       where Pulsar keeps it
==========================  ==================================================
:class:`ManagedLedgerInfo`  the znode ``/managed-ledgers/<topic>``: the ledger
                            list (``LedgerInfo``: id, entries, size, when
                            closed), the terminated position, properties
:class:`ManagedCursorInfo`  each cursor's znode, a child of that one:
                            ``cursorsLedgerId`` (-1: the state is here), the
                            mark-delete position, the individually deleted
                            ranges, batch acks, properties, ``lastActive``
:class:`PositionInfo`       each record of a cursor ledger: the mark-delete
                            position, ranges, batch acks, properties
==========================  ==================================================

Positions are :class:`Position` values ``(ledger_id, entry_id)``, ordered
ledger first; in JSON they are ``"ledger:entry"`` strings. A
:class:`MessageRange` is Pulsar's open-closed range ``(lower, upper]``. A
:class:`BatchDeletionIndex` is a partly acknowledged batch: the longs of a
Java ``BitSet.toLongArray()`` in which a set bit is an index not yet
acknowledged (the consumer's ack set).

**Compression.** Pulsar's ``MetaStoreImpl`` may compress a
``ManagedLedgerInfo`` or a ``ManagedCursorInfo`` (``managedLedgerInfoCompressionType``,
``managedCursorInfoCompressionType``): the bytes are then the magic number
``0x4778`` (2 bytes, big-endian), the size of a ``ManagedLedgerInfoMetadata``
(4 bytes) and that message (the compression type and the uncompressed size),
then the compressed message. :func:`decode_managed_ledger_info` and
:func:`decode_managed_cursor_info` read both forms: uncompressed, and
compressed with ZLIB (Python's ``zlib``); a codec this module cannot undo
(LZ4, ZSTD, SNAPPY) is a :class:`ManagedLedgerFormatError` that names it.
Cursor-ledger records are never compressed.

Bytes that do not decode raise :class:`ManagedLedgerFormatError`, naming the
message, what is wrong and, where known, the byte offset.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping
from typing import Any

import attrs
from google.protobuf.message import DecodeError, EncodeError
from ledgerspec.reference.metadata.protos import MLDataFormats_pb2 as pb

__all__ = [
    "COMPRESSED_MAGIC",
    "BatchDeletionIndex",
    "LedgerInfo",
    "ManagedCursorInfo",
    "ManagedLedgerFormatError",
    "ManagedLedgerInfo",
    "MessageRange",
    "Position",
    "PositionInfo",
    "decode_managed_cursor_info",
    "decode_managed_ledger_info",
    "decode_position_info",
    "encode_managed_cursor_info",
    "encode_managed_ledger_info",
    "encode_position_info",
    "to_json",
]

COMPRESSED_MAGIC = 0x4778  # MetaStoreImpl.MAGIC_MANAGED_INFO_METADATA


def _str_map(properties: Mapping[str, str]) -> dict[str, str]:
    return dict(properties)


def _long_map(properties: Mapping[str, int]) -> dict[str, int]:
    return dict(properties)


class ManagedLedgerFormatError(ValueError):
    """Bytes that are not the managed-ledger message expected; the message says which, what and where."""


@attrs.frozen(order=True)
class Position:
    """A position in a managed ledger (``NestedPositionInfo``): ledger first, then entry."""

    ledger_id: int
    entry_id: int

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


@attrs.frozen
class MessageRange:
    """Individually deleted entries: the open-closed range ``(lower, upper]``."""

    lower: Position
    upper: Position


@attrs.frozen
class BatchDeletionIndex:
    """A partly acknowledged batch: ``delete_set`` are the longs of a BitSet whose set bits are unacked indexes."""

    position: Position
    delete_set: tuple[int, ...]


@attrs.frozen
class LedgerInfo:
    """One ledger of the list: its id, entries and bytes (0 while it is open), when it was closed (ms)."""

    ledger_id: int
    entries: int = 0
    size: int = 0
    timestamp: int = 0


@attrs.frozen
class ManagedLedgerInfo:
    ledgers: tuple[LedgerInfo, ...] = ()
    terminated_position: Position | None = None
    properties: Mapping[str, str] = attrs.field(factory=dict, converter=_str_map, hash=False)


@attrs.frozen
class ManagedCursorInfo:
    cursors_ledger_id: int  # -1: the state below is the cursor's; else read the cursor ledger's last record
    mark_delete: Position
    individual_deleted: tuple[MessageRange, ...] = ()
    properties: Mapping[str, int] = attrs.field(factory=dict, converter=_long_map, hash=False)
    last_active: int = 0
    batched_deletion: tuple[BatchDeletionIndex, ...] = ()


@attrs.frozen
class PositionInfo:
    mark_delete: Position
    individual_deleted: tuple[MessageRange, ...] = ()
    properties: Mapping[str, int] = attrs.field(factory=dict, converter=_long_map, hash=False)
    batched_deletion: tuple[BatchDeletionIndex, ...] = ()


# -- values <-> protobuf ------------------------------------------------------------------
def _set_position(target: Any, position: Position) -> None:
    target.ledgerId, target.entryId = position.ledger_id, position.entry_id


def _position(source: Any) -> Position:
    return Position(source.ledgerId, source.entryId)


def _set_ranges(target: Any, ranges: tuple[MessageRange, ...]) -> None:
    for r in ranges:
        m = target.add()
        _set_position(m.lowerEndpoint, r.lower)
        _set_position(m.upperEndpoint, r.upper)


def _set_batches(target: Any, batches: tuple[BatchDeletionIndex, ...]) -> None:
    for b in batches:
        m = target.add()
        _set_position(m.position, b.position)
        m.deleteSet.extend(b.delete_set)


def _set_long_properties(target: Any, properties: Mapping[str, int]) -> None:
    for name, value in properties.items():
        p = target.add()
        p.name, p.value = name, value


def _ranges(source: Any) -> tuple[MessageRange, ...]:
    return tuple(MessageRange(_position(r.lowerEndpoint), _position(r.upperEndpoint)) for r in source)


def _batches(source: Any) -> tuple[BatchDeletionIndex, ...]:
    return tuple(BatchDeletionIndex(_position(b.position), tuple(b.deleteSet)) for b in source)


def _serialize(message: Any, what: str) -> bytes:
    try:
        data: bytes = message.SerializeToString()
    except (EncodeError, ValueError) as e:  # a value out of int64, say
        raise ManagedLedgerFormatError(f"{what} cannot be encoded: {e}") from e
    return data


def _parse(message: Any, data: bytes, what: str, offset: int = 0) -> None:
    try:
        message.ParseFromString(data[offset:])
    except DecodeError as e:
        raise ManagedLedgerFormatError(
            f"{what}: the protobuf message at byte {offset} does not parse ({len(data) - offset} bytes): {e}"
        ) from e
    if not message.IsInitialized():  # proto2 required fields
        missing = ", ".join(message.FindInitializationErrors())
        raise ManagedLedgerFormatError(f"{what}: required fields missing: {missing}")


def encode_managed_ledger_info(info: ManagedLedgerInfo) -> bytes:
    m = pb.ManagedLedgerInfo()
    for ledger in info.ledgers:
        x = m.ledgerInfo.add()
        x.ledgerId, x.entries, x.size, x.timestamp = ledger.ledger_id, ledger.entries, ledger.size, ledger.timestamp
    if info.terminated_position is not None:
        _set_position(m.terminatedPosition, info.terminated_position)
    for key, value in info.properties.items():
        kv = m.properties.add()
        kv.key, kv.value = key, value
    return _serialize(m, "ManagedLedgerInfo")


def decode_managed_ledger_info(data: bytes) -> ManagedLedgerInfo:
    m = pb.ManagedLedgerInfo()
    _parse_maybe_compressed(m, data, "ManagedLedgerInfo", pb.ManagedLedgerInfoMetadata)
    return ManagedLedgerInfo(
        tuple(LedgerInfo(x.ledgerId, x.entries, x.size, x.timestamp) for x in m.ledgerInfo),
        _position(m.terminatedPosition) if m.HasField("terminatedPosition") else None,
        {kv.key: kv.value for kv in m.properties},
    )


def encode_managed_cursor_info(info: ManagedCursorInfo) -> bytes:
    m = pb.ManagedCursorInfo()
    m.cursorsLedgerId = info.cursors_ledger_id
    m.markDeleteLedgerId, m.markDeleteEntryId = info.mark_delete.ledger_id, info.mark_delete.entry_id
    _set_ranges(m.individualDeletedMessages, info.individual_deleted)
    _set_long_properties(m.properties, info.properties)
    if info.last_active:
        m.lastActive = info.last_active
    _set_batches(m.batchedEntryDeletionIndexInfo, info.batched_deletion)
    return _serialize(m, "ManagedCursorInfo")


def decode_managed_cursor_info(data: bytes) -> ManagedCursorInfo:
    m = pb.ManagedCursorInfo()
    _parse_maybe_compressed(m, data, "ManagedCursorInfo", pb.ManagedCursorInfoMetadata)
    if not m.HasField("markDeleteLedgerId") or not m.HasField("markDeleteEntryId"):
        raise ManagedLedgerFormatError("ManagedCursorInfo has no mark-delete position (fields 2 and 3)")
    return ManagedCursorInfo(
        m.cursorsLedgerId,
        Position(m.markDeleteLedgerId, m.markDeleteEntryId),
        _ranges(m.individualDeletedMessages),
        {p.name: p.value for p in m.properties},
        m.lastActive,
        _batches(m.batchedEntryDeletionIndexInfo),
    )


def encode_position_info(info: PositionInfo) -> bytes:
    m = pb.PositionInfo()
    _set_position(m, info.mark_delete)
    _set_ranges(m.individualDeletedMessages, info.individual_deleted)
    _set_long_properties(m.properties, info.properties)
    _set_batches(m.batchedEntryDeletionIndexInfo, info.batched_deletion)
    return _serialize(m, "PositionInfo")


def decode_position_info(data: bytes) -> PositionInfo:
    m = pb.PositionInfo()
    _parse(m, data, "PositionInfo")
    if m.individualDeletedMessageRanges:
        raise ManagedLedgerFormatError(
            "PositionInfo holds individualDeletedMessageRanges (field 6, acks as per-ledger bitsets): not supported"
        )
    return PositionInfo(
        _position(m),
        _ranges(m.individualDeletedMessages),
        {p.name: p.value for p in m.properties},
        _batches(m.batchedEntryDeletionIndexInfo),
    )


# -- the compressed form ------------------------------------------------------------------
def _parse_maybe_compressed(message: Any, data: bytes, what: str, header_type: Any) -> None:
    if len(data) < 2 or struct.unpack_from(">H", data)[0] != COMPRESSED_MAGIC:
        _parse(message, data, what)
        return
    if len(data) < 6:
        raise ManagedLedgerFormatError(f"compressed {what}: {len(data)} bytes, too few for the header (6)")
    (size,) = struct.unpack_from(">i", data, 2)
    if size < 0 or 6 + size > len(data):
        raise ManagedLedgerFormatError(
            f"compressed {what}: the header at byte 6 is {size} bytes long, but {len(data) - 6} bytes follow"
        )
    header = header_type()
    _parse(header, data[: 6 + size], f"compressed {what}'s header", 6)
    codec = pb.CompressionType.Name(header.compressionType)
    body = data[6 + size :]
    if codec == "NONE":
        raw = body
    elif codec == "ZLIB":
        try:
            raw = zlib.decompress(body)
        except zlib.error as e:
            raise ManagedLedgerFormatError(f"compressed {what}: ZLIB data at byte {6 + size} is corrupt: {e}") from e
    else:
        raise ManagedLedgerFormatError(f"compressed {what}: codec {codec} is not supported (NONE and ZLIB are)")
    if len(raw) != header.uncompressedSize:
        raise ManagedLedgerFormatError(
            f"compressed {what}: {len(raw)} bytes uncompressed, the header says {header.uncompressedSize}"
        )
    _parse(message, raw, what)


def compress(data: bytes, codec: str = "ZLIB", *, cursor: bool = False) -> bytes:
    """``data`` (a ManagedLedgerInfo, or a ManagedCursorInfo with ``cursor``) in the compressed form."""
    header_type = pb.ManagedCursorInfoMetadata if cursor else pb.ManagedLedgerInfoMetadata
    codecs = list(pb.CompressionType.keys())
    if codec not in codecs:
        raise ManagedLedgerFormatError(f"no codec {codec}; codecs: {', '.join(codecs)}")
    header = header_type(compressionType=codec, uncompressedSize=len(data))
    if codec == "NONE":
        body = data
    elif codec == "ZLIB":
        body = zlib.compress(data)
    else:
        raise ManagedLedgerFormatError(f"codec {codec} is not supported (NONE and ZLIB are)")
    meta = header.SerializeToString()
    return struct.pack(">Hi", COMPRESSED_MAGIC, len(meta)) + meta + body


# -- JSON --------------------------------------------------------------------------------
def _json_ranges(ranges: tuple[MessageRange, ...]) -> list[str]:
    return [f"({r.lower}, {r.upper}]" for r in ranges]


def _json_batches(batches: tuple[BatchDeletionIndex, ...]) -> list[dict[str, Any]]:
    return [{"position": str(b.position), "deleteSet": list(b.delete_set)} for b in batches]


def to_json(value: ManagedLedgerInfo | ManagedCursorInfo | PositionInfo) -> dict[str, Any]:
    """A readable JSON object of a decoded message; positions as ``"ledger:entry"``, field names as Pulsar's."""
    if isinstance(value, ManagedLedgerInfo):
        return {
            "type": "ManagedLedgerInfo",
            "ledgerInfo": [attrs.asdict(x) for x in value.ledgers],
            "terminatedPosition": str(value.terminated_position) if value.terminated_position else None,
            "properties": dict(value.properties),
        }
    common = {
        "markDelete": str(value.mark_delete),
        "individualDeletedMessages": _json_ranges(value.individual_deleted),
        "batchedEntryDeletionIndexInfo": _json_batches(value.batched_deletion),
        "properties": dict(value.properties),
    }
    if isinstance(value, ManagedCursorInfo):
        return {
            "type": "ManagedCursorInfo",
            "cursorsLedgerId": value.cursors_ledger_id,
            **common,
            "lastActive": value.last_active,
        }
    return {"type": "PositionInfo", **common}
