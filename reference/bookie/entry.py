"""BookKeeper's entry layout and digests, as the client's ``DigestManager`` builds them.

An entry, as a client sends it to a bookie and as the bookie stores it in the
journal and in the entry log (``proto/checksum/DigestManager.java``,
``computeDigestAndPackageForSendingV3``), is, big-endian::

    ledgerId  8 bytes
    entryId   8 bytes
    lac       8 bytes   the writer's LastAddConfirmed, piggybacked
    length    8 bytes   the ledger's length in bytes up to and including this entry
    digest    4 bytes (CRC32C) or 8 bytes (CRC32: the 32-bit value in a long)
    payload

The digest covers the 32 header bytes and then the payload, not itself.
CRC32C is the Castagnoli CRC (``Crc32cIntChecksum``), CRC32 the zlib one
(``java.util.zip.CRC32``). An explicit LAC (``computeDigestAndPackageForSendingLac``)
is ``ledgerId, lac, digest`` with the digest over the first 16 bytes.

The digest type is a property of the ledger, known to its clients; it is not
written in the entry. Readers that do not know it can try both
(:func:`detect_digest`): a wrong guess matches by chance once in 2**32.

Left out: the HMAC and DUMMY digest types, and the V2 wire protocol's
request header around the entry.
"""

from __future__ import annotations

import enum
import struct
import zlib

import attrs
import crc32c

__all__ = [
    "ENTRY_HEADER_LENGTH",
    "LAC_HEADER_LENGTH",
    "DigestType",
    "Entry",
    "EntryFormatError",
    "check_entry",
    "decode_entry",
    "decode_lac",
    "detect_digest",
    "encode_entry",
    "encode_lac",
    "entry_ids",
]

ENTRY_HEADER_LENGTH = 32  # DigestManager.METADATA_LENGTH: ledgerId, entryId, lac, length
LAC_HEADER_LENGTH = 16  # DigestManager.LAC_METADATA_LENGTH: ledgerId, lac

_HEADER = struct.Struct(">qqqq")
_IDS_LAC = struct.Struct(">qqq")
_IDS = struct.Struct(">qq")
_UINT = struct.Struct(">I")
_CRC32C_BODY = ENTRY_HEADER_LENGTH + 4


class DigestType(enum.Enum):
    """The digest types this package reads and writes, with the bytes each takes in an entry."""

    CRC32C = "crc32c"
    CRC32 = "crc32"

    @property
    def length(self) -> int:
        return 4 if self is DigestType.CRC32C else 8

    def digest(self, *parts: bytes | memoryview) -> bytes:
        """The digest of the concatenated ``parts``, as stored in an entry."""
        if self is DigestType.CRC32C:
            value = 0
            for part in parts:
                value = crc32c.crc32c(part, value)
            return value.to_bytes(4, "big")
        value = 0
        for part in parts:
            value = zlib.crc32(part, value)
        return value.to_bytes(8, "big")


class EntryFormatError(ValueError):
    """The bytes are not an entry (or LAC buffer) of the given digest type; the message says why."""


@attrs.frozen
class Entry:
    """A decoded entry whose digest matched."""

    ledger_id: int
    entry_id: int
    lac: int  # the writer's LastAddConfirmed when it sent this entry
    length: int  # the ledger's length in bytes up to and including this entry
    payload: bytes


def encode_entry(
    ledger_id: int, entry_id: int, lac: int, length: int, payload: bytes, digest_type: DigestType = DigestType.CRC32C
) -> bytes:
    """An entry as a BookKeeper client sends it: header, digest, payload."""
    header = _HEADER.pack(ledger_id, entry_id, lac, length)
    return header + digest_type.digest(header, payload) + payload


def entry_ids(data: bytes) -> tuple[int, int]:
    """``(ledgerId, entryId)`` from the first 16 bytes, without checking anything else."""
    if len(data) < _IDS.size:
        raise EntryFormatError(f"{len(data)} bytes cannot hold the ledger and entry ids (16 bytes)")
    ledger_id, entry_id = _IDS.unpack_from(data)
    return ledger_id, entry_id


def decode_entry(data: bytes, digest_type: DigestType) -> Entry:
    """The entry in ``data`` once its digest is checked; :class:`EntryFormatError` otherwise."""
    body = ENTRY_HEADER_LENGTH + digest_type.length
    if len(data) < body:
        raise EntryFormatError(f"{len(data)} bytes are shorter than an entry header with a {digest_type.value} digest")
    header = data[:ENTRY_HEADER_LENGTH]
    payload = bytes(data[body:])
    stored = bytes(data[ENTRY_HEADER_LENGTH:body])
    computed = digest_type.digest(header, payload)
    ledger_id, entry_id, lac, length = _HEADER.unpack(header)
    if stored != computed:
        raise EntryFormatError(
            f"{digest_type.value} digest mismatch for ledger {ledger_id} entry {entry_id}: "
            f"stored {stored.hex()}, computed {computed.hex()}"
        )
    return Entry(ledger_id, entry_id, lac, length, payload)


def check_entry(data: bytes, digest_type: DigestType) -> tuple[int, int, int]:
    """``(ledgerId, entryId, lac)`` of an entry whose digest matches: :func:`decode_entry` made fast for adds."""
    if digest_type is DigestType.CRC32C and len(data) >= _CRC32C_BODY:
        matches = (
            crc32c.crc32c(data[_CRC32C_BODY:], crc32c.crc32c(data[:ENTRY_HEADER_LENGTH]))
            == _UINT.unpack_from(data, ENTRY_HEADER_LENGTH)[0]
        )
    else:
        body = ENTRY_HEADER_LENGTH + digest_type.length
        matches = (
            len(data) >= body
            and digest_type.digest(data[:ENTRY_HEADER_LENGTH], data[body:]) == data[ENTRY_HEADER_LENGTH:body]
        )
    if not matches:
        decode_entry(data, digest_type)  # raises, saying why
    ids_lac: tuple[int, int, int] = _IDS_LAC.unpack_from(data)
    return ids_lac


def detect_digest(data: bytes) -> DigestType | None:
    """The digest type under which ``data`` is a valid entry, trying CRC32C then CRC32; ``None`` if neither."""
    for digest_type in DigestType:
        try:
            decode_entry(data, digest_type)
        except EntryFormatError:
            continue
        return digest_type
    return None


def encode_lac(ledger_id: int, lac: int, digest_type: DigestType = DigestType.CRC32C) -> bytes:
    """An explicit LAC buffer as a client sends it (``writeLac``): ledgerId, lac, digest."""
    header = _IDS.pack(ledger_id, lac)
    return header + digest_type.digest(header)


def decode_lac(data: bytes, digest_type: DigestType | None) -> tuple[int, int]:
    """``(ledgerId, lac)`` of an explicit LAC buffer, its digest checked (any known type when ``None``)."""
    if len(data) < LAC_HEADER_LENGTH:
        raise EntryFormatError(f"{len(data)} bytes cannot hold an explicit LAC (16 bytes and a digest)")
    header = bytes(data[:LAC_HEADER_LENGTH])
    ledger_id, lac = _IDS.unpack(header)
    types = [digest_type] if digest_type is not None else list(DigestType)
    for candidate in types:
        if len(data) == LAC_HEADER_LENGTH + candidate.length and data[LAC_HEADER_LENGTH:] == candidate.digest(header):
            return ledger_id, lac
    names = " or ".join(t.value for t in types)
    raise EntryFormatError(f"explicit LAC {lac} of ledger {ledger_id}: {names} digest mismatch")
