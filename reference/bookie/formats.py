"""The bookie's file formats, as bytes: encoders for the writer, strict parsers for every reader.

This module knows the layouts of BookKeeper's journal files, entry logs,
ledger index files and ``lastMark``; it does no I/O and knows nothing of the
bookie engine, so it reads directories written by the reference bookie and
by Apache BookKeeper alike. All integers are big-endian (Java's ByteBuffer).

Journal file (``bookie/JournalChannel.java``, ``bookie/Journal.java``)
    A header: ``"BKLG"``, int format version; from V5 zero-padded to 512
    bytes (V2-V4: 8 bytes; V1 had no header and is not read here). Then
    records, each an int length and that many bytes. A record starts with
    long ledgerId, long entryId. An entry record is the whole entry as the
    client sent it (see :mod:`.entry`); meta records use negative entry ids:

    ================  ===========  ==========================================
    ledger key        ``-0x1000``  int key length, master key (from V3)
    fence             ``-0x2000``  nothing more (from V4)
    explicit LAC      ``-0x8000``  int buffer length, LAC buffer (from V6)
    ================  ===========  ==========================================

    A padding record (from V5) is int ``-0x100``, int n, n zero bytes; the
    journal pads every flush so the file ends on a 512-byte boundary
    (``Journal.writePaddingBytes``).

    Reading stops, as ``Journal.scanJournal`` does, at a length of 0 (the
    zeros BookKeeper preallocates) or at a record cut short by the end of the
    file (a torn tail). Anything else that breaks the format is an error
    naming the offset, never skipped: a negative length other than padding,
    a record too short for its ids, an unknown meta record, a meta record
    newer than the file's version, or non-zero bytes after a zero length.
    (BookKeeper skips unknown meta records with a warning and ignores what
    follows a zero length.)

Entry log (``bookie/DefaultEntryLogger.java``)
    A 1024-byte header: ``"BKLO"``, int version (1), long ledgers-map
    offset, int ledgers count (0 and 0 until the log is finalised), zeros.
    Then entries, each an int size and the entry. An entry's location is
    ``(logId << 32) | offset``, the offset of its bytes (after the size). A
    finalised log ends with its ledgers map, stored as records of ledger
    ``-1``, entry ``-2``. A size of 0 is skipped (BookKeeper's scanner
    treats it as padding), a cut-short tail ends the scan.

Ledger index file (``bookie/FileInfo.java``)
    A 1024-byte header: ``"BKLE"``, int version (1), int key length, master
    key, int state bits (``0x1``: fenced), int explicit-LAC length, the
    explicit LAC buffer, zeros. Then one long per entry id at
    ``1024 + 8 * entryId``: the entry's location, 0 for none.

``lastMark`` (``Journal.LastLogMark``)
    Two longs: journal file id, offset in that file. Exactly 16 bytes.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterator, Mapping

import attrs
from ledgerspec.reference.bookie.errors import CorruptFileError

__all__ = [
    "ENTRY_LOG_HEADER_SIZE",
    "EXPLICIT_LAC_ENTRY_ID",
    "FENCED_BIT",
    "FENCE_ENTRY_ID",
    "INDEX_HEADER_SIZE",
    "INDEX_VERSION",
    "JOURNAL_ALIGNMENT",
    "JOURNAL_VERSION",
    "LAST_MARK_SIZE",
    "LEDGER_KEY_ENTRY_ID",
    "PADDING_MASK",
    "EntryLogRecord",
    "EntryLogScan",
    "IndexFile",
    "IndexHeader",
    "JournalEnd",
    "JournalRecord",
    "JournalScan",
    "LogMark",
    "RecordKind",
    "encode_index_slot",
    "encode_mark",
    "entry_log_header",
    "entry_log_record",
    "entry_record",
    "explicit_lac_record",
    "fence_record",
    "index_header",
    "index_slot_offset",
    "journal_header",
    "ledger_key_record",
    "make_location",
    "padding_record",
    "parse_index",
    "parse_mark",
    "read_entry_at",
    "scan_entry_log",
    "scan_journal",
    "split_location",
]

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_IDS = struct.Struct(">qq")
_MARK = struct.Struct(">qq")

# ---------------------------------------------------------------- journal

JOURNAL_MAGIC = b"BKLG"
JOURNAL_VERSION = 6  # JournalChannel.CURRENT_JOURNAL_FORMAT_VERSION
JOURNAL_ALIGNMENT = 512  # JournalChannel.SECTOR_SIZE, the default journalAlignmentSize
_V5_HEADER_SIZE = 512  # JournalChannel.HEADER_SIZE
_V2_HEADER_SIZE = 8  # JournalChannel.VERSION_HEADER_SIZE: magic and version

LEDGER_KEY_ENTRY_ID = -0x1000  # BookieImpl.METAENTRY_ID_LEDGER_KEY
FENCE_ENTRY_ID = -0x2000  # BookieImpl.METAENTRY_ID_FENCE_KEY
EXPLICIT_LAC_ENTRY_ID = -0x8000  # BookieImpl.METAENTRY_ID_LEDGER_EXPLICITLAC
PADDING_MASK = -0x100  # Journal.PADDING_MASK


class RecordKind(enum.Enum):
    """What a journal record says."""

    ENTRY = "entry"
    LEDGER_KEY = "ledger_key"
    FENCE = "fence"
    EXPLICIT_LAC = "lac"

    @property
    def label(self) -> str:
        """The kind in words, for messages."""
        return {"ledger_key": "ledger key", "lac": "explicit LAC"}.get(self.value, self.value)


_META_KINDS = {
    LEDGER_KEY_ENTRY_ID: (RecordKind.LEDGER_KEY, 3),
    FENCE_ENTRY_ID: (RecordKind.FENCE, 4),
    EXPLICIT_LAC_ENTRY_ID: (RecordKind.EXPLICIT_LAC, 6),
}  # meta entry id -> kind, first journal version that may hold it


@attrs.frozen
class JournalRecord:
    """One record of a journal file (padding records are not records)."""

    offset: int  # offset of the record's length field in the file
    end: int  # offset of the first byte after the record
    kind: RecordKind
    ledger_id: int
    entry_id: int  # the entry id, or the meta entry id of a meta record
    data: bytes  # the record after its length: the entry itself, or the meta record

    @property
    def master_key(self) -> bytes:
        """The master key of a ledger-key record."""
        return self._sized_field()

    @property
    def lac_buffer(self) -> bytes:
        """The explicit LAC buffer (ledgerId, lac, digest) of an explicit-LAC record."""
        return self._sized_field()

    @property
    def lac(self) -> int:
        """The LAC of an explicit-LAC record (its digest is not checked here)."""
        value: int = _LONG.unpack_from(self.lac_buffer, 8)[0]
        return value

    def _sized_field(self) -> bytes:
        (length,) = _INT.unpack_from(self.data, 16)
        return self.data[20 : 20 + length]

    def spec_record(self) -> tuple[str, int, int] | None:
        """The record in the bookie spec's words: ``("entry", l, e)``, ``("fence", l, -1)``, ``("lac", l, lac)``.

        Ledger-key records have no counterpart in the spec: ``None``.
        """
        if self.kind is RecordKind.ENTRY:
            return ("entry", self.ledger_id, self.entry_id)
        if self.kind is RecordKind.FENCE:
            return ("fence", self.ledger_id, -1)
        if self.kind is RecordKind.EXPLICIT_LAC:
            return ("lac", self.ledger_id, self.lac)
        return None


class JournalEnd(enum.Enum):
    """Why a journal scan stopped."""

    EOF = "eof"  # the file ends right after the last record
    ZERO_LENGTH = "zero_length"  # a length of 0: the unwritten (preallocated) part of the file
    TORN = "torn"  # the last record is cut short by the end of the file


@attrs.frozen
class JournalScan:
    """A journal file, parsed."""

    path: str
    file_id: int
    version: int
    header_size: int
    size: int  # the file's length in bytes
    start: int  # the offset the scan started at
    records: tuple[JournalRecord, ...]
    boundaries: frozenset[int]  # offsets where a record or padding starts, and ``end``: where a mark may point
    end: int  # offset where the readable records end (a torn record starts here)
    end_kind: JournalEnd

    def records_before(self, offset: int) -> int:
        """The number of records (not padding) that end at or before ``offset``."""
        return sum(1 for r in self.records if r.end <= offset)

    def spec_records(self) -> Iterator[tuple[int, tuple[str, int, int]]]:
        """``(offset, record)`` for each record the bookie spec knows (entries, fences, explicit LACs)."""
        for r in self.records:
            spec = r.spec_record()
            if spec is not None:
                yield r.offset, spec


def journal_header(version: int = JOURNAL_VERSION) -> bytes:
    """The header of a new journal file (``JournalChannel.writeHeader``)."""
    size = _V5_HEADER_SIZE if version >= 5 else _V2_HEADER_SIZE
    return (JOURNAL_MAGIC + _INT.pack(version)).ljust(size, b"\0")


def entry_record(entry: bytes) -> bytes:
    """A journal record holding an entry."""
    return _INT.pack(len(entry)) + entry


def ledger_key_record(ledger_id: int, master_key: bytes) -> bytes:
    """The record of a ledger's master key (``BookieImpl.createMasterKeyEntry``)."""
    body = _IDS.pack(ledger_id, LEDGER_KEY_ENTRY_ID) + _INT.pack(len(master_key)) + master_key
    return _INT.pack(len(body)) + body


def fence_record(ledger_id: int) -> bytes:
    """The record of a fence (``LedgerDescriptor.createLedgerFenceEntry``)."""
    body = _IDS.pack(ledger_id, FENCE_ENTRY_ID)
    return _INT.pack(len(body)) + body


def explicit_lac_record(ledger_id: int, lac_buffer: bytes) -> bytes:
    """The record of an explicit LAC (``BookieImpl.createExplicitLACEntry``)."""
    body = _IDS.pack(ledger_id, EXPLICIT_LAC_ENTRY_ID) + _INT.pack(len(lac_buffer)) + lac_buffer
    return _INT.pack(len(body)) + body


def padding_record(position: int, alignment: int = JOURNAL_ALIGNMENT) -> bytes:
    """The padding that makes a flush ending at ``position`` end on an ``alignment`` boundary.

    As ``Journal.writePaddingBytes``: nothing when already aligned; otherwise
    int -0x100, int n, n zeros, where the 8-byte prefix is counted in the
    padding, and a gap under 8 bytes is widened by one more alignment unit.
    """
    misalignment = position % alignment
    if misalignment == 0:
        return b""
    padding = alignment - misalignment
    padding = alignment - (8 - padding) if padding < 8 else padding - 8
    return _INT.pack(PADDING_MASK) + _INT.pack(padding) + bytes(padding)


def scan_journal(path: str, data: bytes, file_id: int, start: int | None = None) -> JournalScan:
    """Parse a journal file from its header, or from ``start`` (a mark's offset) onwards.

    Raises :class:`CorruptFileError` naming ``path`` and the offset when the
    bytes break the format; a torn tail is not an error (see the module doc).
    """
    size = len(data)
    version, header_size = _journal_header(path, data)
    pos = header_size if start is None or start <= 0 else start
    if pos < header_size:
        raise CorruptFileError(path, pos, f"scan start {pos} is inside the {header_size}-byte journal header")
    if pos > size:
        raise CorruptFileError(path, pos, f"scan start {pos} is past the end of the file ({size} bytes)")
    records: list[JournalRecord] = []
    boundaries = {pos}
    view = memoryview(data)
    while True:
        boundaries.add(pos)
        if pos + 4 > size:
            end_kind = JournalEnd.EOF if pos == size else JournalEnd.TORN
            break
        (length,) = _INT.unpack_from(data, pos)
        if length == 0:
            tail = bytes(view[pos:]).strip(b"\0")
            if tail:
                where = data.index(tail[:1], pos)
                raise CorruptFileError(path, where, f"non-zero bytes after the end-of-journal marker at offset {pos}")
            end_kind = JournalEnd.ZERO_LENGTH
            break
        if length < 0:
            if length != PADDING_MASK or version < 5:
                raise CorruptFileError(path, pos, f"negative record length {length}")
            if pos + 8 > size:
                end_kind = JournalEnd.TORN
                break
            (padding,) = _INT.unpack_from(data, pos + 4)
            if padding < 0:
                raise CorruptFileError(path, pos, f"padding record with negative length {padding}")
            if pos + 8 + padding > size:
                end_kind = JournalEnd.TORN
                break
            pos += 8 + padding
            continue
        if pos + 4 + length > size:
            end_kind = JournalEnd.TORN
            break
        records.append(_journal_record(path, version, pos, bytes(view[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    return JournalScan(
        path=path,
        file_id=file_id,
        version=version,
        header_size=header_size,
        size=size,
        start=start or header_size,
        records=tuple(records),
        boundaries=frozenset(boundaries),
        end=pos,
        end_kind=end_kind,
    )


def _journal_header(path: str, data: bytes) -> tuple[int, int]:
    if len(data) < _V2_HEADER_SIZE:
        raise CorruptFileError(path, 0, f"journal header is incomplete: the file has {len(data)} bytes")
    if data[:4] != JOURNAL_MAGIC:
        raise CorruptFileError(path, 0, f"no journal magic 'BKLG' (found {data[:4]!r}): not a journal of format V2+")
    (version,) = _INT.unpack_from(data, 4)
    if not 2 <= version <= JOURNAL_VERSION:
        raise CorruptFileError(path, 4, f"journal format version {version}, expected 2 to {JOURNAL_VERSION}")
    header_size = _V5_HEADER_SIZE if version >= 5 else _V2_HEADER_SIZE
    if len(data) < header_size:
        raise CorruptFileError(path, 0, f"journal header is incomplete: {len(data)} of {header_size} bytes")
    return version, header_size


def _journal_record(path: str, version: int, offset: int, body: bytes) -> JournalRecord:
    end = offset + 4 + len(body)
    if len(body) < 16:
        raise CorruptFileError(path, offset, f"record of {len(body)} bytes cannot hold a ledger id and an entry id")
    ledger_id, entry_id = _IDS.unpack_from(body)
    if entry_id >= 0:
        return JournalRecord(offset, end, RecordKind.ENTRY, ledger_id, entry_id, body)
    if entry_id not in _META_KINDS:
        raise CorruptFileError(path, offset, f"unknown meta record (entry id {entry_id}) for ledger {ledger_id}")
    kind, since = _META_KINDS[entry_id]
    if version < since:
        raise CorruptFileError(path, offset, f"{kind.label} record in a journal of format V{version} (needs V{since})")
    if kind is not RecordKind.FENCE:
        if len(body) < 20:
            raise CorruptFileError(path, offset, f"{kind.label} record of {len(body)} bytes has no length field")
        (length,) = _INT.unpack_from(body, 16)
        if length < 0 or 20 + length > len(body):
            raise CorruptFileError(
                path, offset, f"{kind.label} record says {length} bytes follow, the record has {len(body) - 20}"
            )
        if kind is RecordKind.EXPLICIT_LAC and length < 16:
            raise CorruptFileError(path, offset, f"explicit LAC buffer of {length} bytes (needs at least 16)")
    return JournalRecord(offset, end, kind, ledger_id, entry_id, body)


# ---------------------------------------------------------------- entry log

ENTRY_LOG_MAGIC = b"BKLO"
ENTRY_LOG_VERSION = 1  # DefaultEntryLogger.HEADER_CURRENT_VERSION
ENTRY_LOG_HEADER_SIZE = 1024  # DefaultEntryLogger.LOGFILE_HEADER_SIZE
_INVALID_LEDGER_ID = -1  # DefaultEntryLogger.INVALID_LID: the ledgers map's records
_LEDGERS_MAP_ENTRY_ID = -2


@attrs.frozen
class EntryLogRecord:
    """One entry in an entry log."""

    location: int  # (logId << 32) | offset: what the index stores
    offset: int  # offset of the entry's bytes; its size is the int before them
    ledger_id: int
    entry_id: int
    size: int
    entry: bytes = attrs.field(repr=False)  # the entry's bytes


@attrs.frozen
class EntryLogScan:
    """An entry log, parsed."""

    path: str
    log_id: int
    version: int
    ledgers_map_offset: int  # 0 until the log is finalised
    ledgers_count: int
    size: int  # the file's length in bytes
    records: tuple[EntryLogRecord, ...]
    ledgers_map: tuple[tuple[int, int], ...]  # (ledger id, bytes) pairs of a finalised log
    end: int  # where the readable entries end
    torn: bool  # the last entry is cut short by the end of the file


def make_location(log_id: int, offset: int) -> int:
    """An entry's location as the index stores it."""
    return (log_id << 32) | offset


def split_location(location: int) -> tuple[int, int]:
    """``(logId, offset)`` of a location (``DefaultEntryLogger.logIdForOffset``, ``posForOffset``)."""
    return location >> 32, location & 0xFFFFFFFF


def _check_header(path: str, data: bytes, what: str, size: int, mark: str, magic: bytes, max_version: int) -> int:
    """Check a fixed-size header that opens with ``magic`` and an int version; return the version."""
    if len(data) < size:
        raise CorruptFileError(path, 0, f"{what} header is incomplete: {len(data)} of {size} bytes")
    if data[:4] != magic:
        raise CorruptFileError(path, 0, f"no {mark} {magic.decode()!r} (found {data[:4]!r})")
    (version,) = _INT.unpack_from(data, 4)
    if not 0 <= version <= max_version:
        raise CorruptFileError(path, 4, f"{what} header version {version}, expected 0 or {max_version}")
    return int(version)


def entry_log_header(ledgers_map_offset: int = 0, ledgers_count: int = 0) -> bytes:
    """The 1024-byte header of an entry log (``EntryLoggerAllocator``)."""
    head = ENTRY_LOG_MAGIC + _INT.pack(ENTRY_LOG_VERSION) + _LONG.pack(ledgers_map_offset) + _INT.pack(ledgers_count)
    return head.ljust(ENTRY_LOG_HEADER_SIZE, b"\0")


def entry_log_record(entry: bytes) -> bytes:
    """An entry as the entry log stores it: int size, then the entry."""
    return _INT.pack(len(entry)) + entry


def scan_entry_log(path: str, data: bytes, log_id: int) -> EntryLogScan:
    """Parse an entry log (``DefaultEntryLogger.scanEntryLog``); :class:`CorruptFileError` names the offset.

    An empty file is a log the bookie created ahead of need and never wrote to:
    ``EntryLoggerAllocator.allocateNewLog`` puts the header into the log's write
    buffer, which reaches the disk with the log's first flush. It holds no entry.
    """
    size = len(data)
    if size == 0:
        return EntryLogScan(path, log_id, ENTRY_LOG_VERSION, 0, 0, 0, (), (), 0, False)
    version = _check_header(
        path, data, "entry log", ENTRY_LOG_HEADER_SIZE, "entry log magic", ENTRY_LOG_MAGIC, ENTRY_LOG_VERSION
    )
    (map_offset,) = _LONG.unpack_from(data, 8)
    (ledgers_count,) = _INT.unpack_from(data, 16)
    records: list[EntryLogRecord] = []
    ledgers_map: list[tuple[int, int]] = []
    pos, torn = ENTRY_LOG_HEADER_SIZE, False
    while pos < size:
        if pos + 12 > size:
            torn = True
            break
        (length,) = _INT.unpack_from(data, pos)
        if length == 0:  # padding: resume where a non-zero int starts, as the scanner's one-byte steps do
            nonzero = size - len(data[pos:].lstrip(b"\0"))
            pos = max(pos + 1, nonzero - 3)
            continue
        if length < 0:
            raise CorruptFileError(path, pos, f"negative entry size {length}")
        if length < 16:
            raise CorruptFileError(path, pos, f"entry of {length} bytes cannot hold a ledger id and an entry id")
        if pos + 4 + length > size:
            torn = True
            break
        ledger_id, entry_id = _IDS.unpack_from(data, pos + 4)
        if ledger_id == _INVALID_LEDGER_ID:
            ledgers_map.extend(_ledgers_map_part(path, pos, data[pos + 4 : pos + 4 + length]))
        elif ledger_id < 0 or entry_id < 0:
            raise CorruptFileError(path, pos, f"entry with ledger id {ledger_id} and entry id {entry_id}")
        else:
            entry = bytes(data[pos + 4 : pos + 4 + length])
            records.append(EntryLogRecord(make_location(log_id, pos + 4), pos + 4, ledger_id, entry_id, length, entry))
        pos += 4 + length
    return EntryLogScan(
        path=path,
        log_id=log_id,
        version=version,
        ledgers_map_offset=map_offset,
        ledgers_count=ledgers_count,
        size=size,
        records=tuple(records),
        ledgers_map=tuple(ledgers_map),
        end=pos,
        torn=torn,
    )


def _ledgers_map_part(path: str, offset: int, body: bytes) -> list[tuple[int, int]]:
    _, entry_id = _IDS.unpack_from(body)
    if entry_id != _LEDGERS_MAP_ENTRY_ID or len(body) < 20:
        raise CorruptFileError(path, offset, f"record of ledger -1 that is not a ledgers map (entry id {entry_id})")
    (count,) = _INT.unpack_from(body, 16)
    if count < 0 or 20 + 16 * count != len(body):
        raise CorruptFileError(path, offset, f"ledgers map of {len(body)} bytes cannot hold {count} ledgers")
    return [_IDS.unpack_from(body, 20 + 16 * i) for i in range(count)]


def read_entry_at(
    path: str, read: Callable[[int, int], bytes], file_size: int, offset: int, expected: tuple[int, int] | None = None
) -> bytes:
    """The entry whose bytes start at ``offset`` in an entry log, read through ``read(offset, size)``.

    Checks, as ``DefaultEntryLogger.validateEntry`` does, that the size before
    it is sane, that the entry lies within the file and, given ``expected``
    ``(ledgerId, entryId)``, that it is that entry.
    """
    if offset < ENTRY_LOG_HEADER_SIZE + 4 or offset > file_size:
        raise CorruptFileError(path, offset, f"location offset {offset} is outside the entries ({file_size} bytes)")
    (length,) = _INT.unpack(read(offset - 4, 4))
    if length < 16:
        raise CorruptFileError(path, offset - 4, f"entry size {length} cannot hold a ledger id and an entry id")
    if offset + length > file_size:
        raise CorruptFileError(path, offset, f"entry of {length} bytes runs past the end of the file ({file_size})")
    entry = read(offset, length)
    if expected is not None:
        found = _IDS.unpack_from(entry)
        if found != expected:
            raise CorruptFileError(
                path,
                offset,
                f"expected ledger {expected[0]} entry {expected[1]}, found ledger {found[0]} entry {found[1]}",
            )
    return entry


# ---------------------------------------------------------------- ledger index

INDEX_SIGNATURE = b"BKLE"  # FileInfo.SIGNATURE
INDEX_VERSION = 1  # FileInfo.CURRENT_HEADER_VERSION: with the explicit LAC
INDEX_HEADER_SIZE = 1024  # FileInfo.START_OF_DATA
FENCED_BIT = 0x1  # FileInfo.STATE_FENCED_BIT


@attrs.frozen
class IndexHeader:
    """The header of a ledger index file."""

    version: int
    master_key: bytes
    state_bits: int
    explicit_lac: bytes | None  # the explicit LAC buffer, None if never set

    @property
    def fenced(self) -> bool:
        return bool(self.state_bits & FENCED_BIT)


@attrs.frozen
class IndexFile:
    """A ledger index file, parsed."""

    path: str
    ledger_id: int
    header: IndexHeader
    locations: Mapping[int, int]  # entry id -> location, for the slots that are not 0
    size: int  # the file's length in bytes
    torn_slot: bool  # the file ends inside a slot (a torn write); that slot is ignored


def index_header(master_key: bytes, fenced: bool, explicit_lac: bytes | None) -> bytes:
    """The 1024-byte header of a ledger index file (``FileInfo.writeHeader``)."""
    lac = explicit_lac or b""
    head = (
        INDEX_SIGNATURE
        + _INT.pack(INDEX_VERSION)
        + _INT.pack(len(master_key))
        + master_key
        + _INT.pack(FENCED_BIT if fenced else 0)
        + _INT.pack(len(lac))
        + lac
    )
    if len(head) > INDEX_HEADER_SIZE:
        raise ValueError(f"index header of {len(head)} bytes does not fit in {INDEX_HEADER_SIZE}")
    return head.ljust(INDEX_HEADER_SIZE, b"\0")


def index_slot_offset(entry_id: int) -> int:
    """Where an entry's location is stored in its ledger's index file."""
    return INDEX_HEADER_SIZE + 8 * entry_id


def encode_index_slot(location: int) -> bytes:
    return _LONG.pack(location)


def parse_index(path: str, data: bytes, ledger_id: int) -> IndexFile:
    """Parse a ledger index file (``FileInfo.readHeader`` and its pages)."""
    size = len(data)
    version = _check_header(
        path, data, "index", INDEX_HEADER_SIZE, "ledger index signature", INDEX_SIGNATURE, INDEX_VERSION
    )
    (key_length,) = _INT.unpack_from(data, 8)
    if not 0 <= key_length <= INDEX_HEADER_SIZE - 20:
        raise CorruptFileError(path, 8, f"master key length {key_length} does not fit in the header")
    master_key = bytes(data[12 : 12 + key_length])
    pos = 12 + key_length
    (state_bits,) = _INT.unpack_from(data, pos)
    explicit_lac = None
    if version >= 1:
        (lac_length,) = _INT.unpack_from(data, pos + 4)
        if lac_length != 0 and not 16 <= lac_length <= INDEX_HEADER_SIZE - pos - 8:
            raise CorruptFileError(path, pos + 4, f"explicit LAC length {lac_length} is invalid")
        explicit_lac = bytes(data[pos + 8 : pos + 8 + lac_length]) if lac_length else None
    header = IndexHeader(version, master_key, state_bits, explicit_lac)
    slots = (size - INDEX_HEADER_SIZE) // 8
    values = struct.unpack_from(f">{slots}q", data, INDEX_HEADER_SIZE)
    locations = {entry_id: location for entry_id, location in enumerate(values) if location != 0}
    return IndexFile(path, ledger_id, header, locations, size, (size - INDEX_HEADER_SIZE) % 8 != 0)


# ---------------------------------------------------------------- lastMark

LAST_MARK_SIZE = 16


@attrs.frozen(order=True)
class LogMark:
    """A journal position: file id, then byte offset, compared in that order (``LogMark.compare``).

    ``LogMark(0, 0)`` is the mark of a bookie that never persisted one.
    """

    file_id: int
    offset: int

    def __str__(self) -> str:
        return f"({self.file_id:#x}, {self.offset})"


def encode_mark(mark: LogMark) -> bytes:
    return _MARK.pack(mark.file_id, mark.offset)


def parse_mark(path: str, data: bytes) -> LogMark:
    """The mark in a ``lastMark`` file; :class:`CorruptFileError` unless the file has exactly 16 bytes."""
    if len(data) != LAST_MARK_SIZE:
        raise CorruptFileError(path, None, f"lastMark file of {len(data)} bytes, expected {LAST_MARK_SIZE}")
    file_id, offset = _MARK.unpack(data)
    if file_id < 0 or offset < 0:
        raise CorruptFileError(path, None, f"lastMark holds a negative position ({file_id}, {offset})")
    return LogMark(file_id, offset)
