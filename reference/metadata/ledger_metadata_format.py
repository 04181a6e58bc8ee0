"""Ledger metadata bytes, as Apache BookKeeper writes them into the ledger's znode.

The layout is ``LedgerMetadataSerDe``'s (bookkeeper-server, ``meta/``):

    BookieMetadataFormatVersion\\t3\\n     text header: key, tab, version digits, newline
    <varint32 length>                    length of the protobuf message (writeDelimited)
    <LedgerMetadataFormat message>       binary protobuf, DataFormats.proto

Version 3 (binary, BookKeeper 4.9 and later) is written and read; version 2
(the same message in protobuf text format, BookKeeper 4.2 to 4.8) is read;
version 1 (a line-based text format, 4.0 and 4.1) is refused with an error
that says so.

What goes into the message follows ``buildLedgerMetadataFormat``:
``quorumSize`` is the write quorum; ``lastEntryId`` and ``length`` are
always written (-1 and 0 before the close); the password is always written
(empty when there is none); ``ctime`` only when the metadata stores it;
``cToken`` always. Reading follows ``decodeFormat``: without
``ackQuorumSize`` the ack quorum is the write quorum; ``lastEntryId`` and
``length`` count only for a CLOSED ledger; the digest type counts only when
a password is present.

Two differences, both on input BookKeeper never writes: trailing bytes after
the message, and enum numbers the .proto does not define, are errors here
(BookKeeper ignores the first and reads the second as the default).

This module depends only on the metadata value and the generated protobuf
module, so it also reads metadata written by a real BookKeeper cluster.
"""

from __future__ import annotations

from google.protobuf import text_format
from google.protobuf.message import DecodeError, EncodeError
from google.protobuf.unknown_fields import UnknownFieldSet
from ledgerspec.reference.metadata.ledger_metadata import (
    INVALID_ENTRY_ID,
    DigestType,
    InvalidLedgerMetadataError,
    LedgerMetadata,
    LedgerState,
    Segment,
)
from ledgerspec.reference.metadata.protos.DataFormats_pb2 import LedgerMetadataFormat

__all__ = [
    "CURRENT_FORMAT_VERSION",
    "HEADER_KEY",
    "LedgerMetadataFormatError",
    "decode_ledger_metadata",
    "encode_ledger_metadata",
    "from_protobuf",
    "to_protobuf",
]

HEADER_KEY = b"BookieMetadataFormatVersion\t"
CURRENT_FORMAT_VERSION = 3
_MAX_VERSION_DIGITS = 10  # LedgerMetadataSerDe.MAX_VERSION_DIGITS
_STATE_FIELD, _DIGEST_TYPE_FIELD = 5, 7  # field numbers of the two enums in LedgerMetadataFormat


class LedgerMetadataFormatError(ValueError):
    """Bytes that are not readable ledger metadata; the message names where they came from and what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"ledger metadata at {where} is unreadable: {problem}")
        self.where = where
        self.problem = problem


def to_protobuf(metadata: LedgerMetadata) -> LedgerMetadataFormat:
    """The message BookKeeper's ``buildLedgerMetadataFormat`` makes for version 3."""
    if metadata.digest_type is None:
        # BookKeeper cannot write such metadata either (apiToProtoDigestType(null) fails).
        raise InvalidLedgerMetadataError(f"ledger {metadata.ledger_id}: no digest type, which version 3 requires")
    message = LedgerMetadataFormat(
        quorumSize=metadata.write_quorum_size,
        ackQuorumSize=metadata.ack_quorum_size,
        ensembleSize=metadata.ensemble_size,
        length=metadata.length,
        lastEntryId=metadata.last_entry_id,
        state=metadata.state.name,
        digestType=LedgerMetadataFormat.DigestType.Name(metadata.digest_type),
        password=metadata.password,
        cToken=metadata.creator_token,
    )
    if metadata.ctime is not None:
        message.ctime = metadata.ctime
    for key, value in metadata.custom_metadata:
        message.customMetadata.add(key=key, value=value)
    for segment in metadata.segments:
        message.segment.add(firstEntryId=segment.first_entry_id, ensembleMember=segment.ensemble)
    return message


def from_protobuf(message: LedgerMetadataFormat, ledger_id: int, *, where: str | None = None) -> LedgerMetadata:
    """The metadata BookKeeper's ``decodeFormat`` reads from a parsed message."""
    where = where or f"ledger {ledger_id}"
    unknown = UnknownFieldSet(message)
    for field in (unknown[index] for index in range(len(unknown))):
        if field.field_number in (_STATE_FIELD, _DIGEST_TYPE_FIELD):
            enum = LedgerMetadataFormat.State if field.field_number == _STATE_FIELD else LedgerMetadataFormat.DigestType
            known = ", ".join(f"{name}={number}" for name, number in enum.items())
            name = "state" if field.field_number == _STATE_FIELD else "digestType"
            raise LedgerMetadataFormatError(where, f"{name} is {field.data}, not one of {known}")
    # In every protobuf runtime, but not in its type stubs. Parsing does not check required fields.
    missing: list[str] = message.FindInitializationErrors()  # type: ignore[attr-defined]
    if missing:
        raise LedgerMetadataFormatError(where, f"required fields missing: {', '.join(missing)}")
    state = LedgerState(message.state)
    closed = state is LedgerState.CLOSED
    try:
        return LedgerMetadata(
            ledger_id=ledger_id,
            ensemble_size=message.ensembleSize,
            write_quorum_size=message.quorumSize,
            ack_quorum_size=message.ackQuorumSize if message.HasField("ackQuorumSize") else message.quorumSize,
            segments=[Segment(s.firstEntryId, s.ensembleMember) for s in message.segment],
            state=state,
            last_entry_id=message.lastEntryId if closed else INVALID_ENTRY_ID,
            length=message.length if closed else 0,
            digest_type=DigestType(message.digestType) if message.HasField("password") else None,
            password=message.password,
            ctime=message.ctime if message.HasField("ctime") else None,
            custom_metadata=[(entry.key, entry.value) for entry in message.customMetadata],
            creator_token=message.cToken,
        )
    except InvalidLedgerMetadataError as exc:
        raise LedgerMetadataFormatError(where, str(exc)) from exc


def _varint32(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_ledger_metadata(metadata: LedgerMetadata) -> bytes:
    """The znode bytes BookKeeper's ``LedgerMetadataSerDe.serialize`` writes for format version 3."""
    try:
        body = to_protobuf(metadata).SerializeToString()
    except EncodeError as exc:  # not reachable for valid metadata: every required field is set
        raise InvalidLedgerMetadataError(f"ledger {metadata.ledger_id}: {exc}") from exc
    return HEADER_KEY + str(CURRENT_FORMAT_VERSION).encode() + b"\n" + _varint32(len(body)) + body


def _read_header(data: bytes, where: str) -> tuple[int, int]:
    """The format version and the offset of what follows the header (``LedgerMetadataSerDe.readHeader``)."""
    for index, expected in enumerate(HEADER_KEY):
        if index >= len(data):
            raise LedgerMetadataFormatError(where, f"header cut short after {len(data)} bytes")
        if data[index] != expected:
            raise LedgerMetadataFormatError(
                where, f"header corrupt at byte {index}: {bytes([data[index]])!r}, expected {bytes([expected])!r}"
            )
    start = len(HEADER_KEY)
    end = data.find(b"\n", start, start + _MAX_VERSION_DIGITS + 1)
    if end < 0:
        raise LedgerMetadataFormatError(where, f"no end of the version number within {_MAX_VERSION_DIGITS} bytes")
    digits = data[start:end]
    if not digits.isdigit():
        raise LedgerMetadataFormatError(where, f"version number {digits!r} at byte {start} is not a number")
    return int(digits), end + 1


def _read_delimited(data: bytes, offset: int, where: str) -> bytes:
    """The message after a varint32 length (``LedgerMetadataSerDe.readDelimited``); all bytes must be used."""
    size, shift, position = 0, 0, offset
    while True:
        if position >= len(data):
            raise LedgerMetadataFormatError(where, f"length prefix at byte {offset} is cut short")
        byte = data[position]
        size |= (byte & 0x7F) << shift
        position += 1
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 35:
            raise LedgerMetadataFormatError(where, f"length prefix at byte {offset} is longer than 5 bytes")
    body = data[position : position + size]
    if len(body) < size:
        raise LedgerMetadataFormatError(
            where, f"length prefix at byte {offset} says {size} bytes, but only {len(body)} follow"
        )
    if position + size != len(data):
        raise LedgerMetadataFormatError(
            where, f"{len(data) - position - size} bytes after the message (which ends at byte {position + size})"
        )
    return body


def decode_ledger_metadata(data: bytes, ledger_id: int, *, where: str | None = None) -> LedgerMetadata:
    """The metadata in a ledger znode's bytes; ``where`` (a path) names the bytes in errors."""
    where = where or f"ledger {ledger_id}"
    version, offset = _read_header(data, where)
    message = LedgerMetadataFormat()
    if version == 3:
        body = _read_delimited(data, offset, where)
        try:
            message.ParseFromString(body)
        except DecodeError as exc:
            raise LedgerMetadataFormatError(
                where, f"the protobuf message at byte {offset} does not parse: {exc}"
            ) from exc
    elif version == 2:
        try:
            text_format.Parse(data[offset:].decode("utf-8"), message)
        except (text_format.ParseError, UnicodeDecodeError) as exc:
            raise LedgerMetadataFormatError(where, f"the text-format message does not parse: {exc}") from exc
    elif version == 1:
        raise LedgerMetadataFormatError(where, "format version 1 (BookKeeper 4.0 and 4.1) is not supported")
    else:
        raise LedgerMetadataFormatError(where, f"unknown format version {version}; versions 2 and 3 are readable")
    return from_protobuf(message, ledger_id, where=where)
