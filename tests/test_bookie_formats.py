"""The bookie's file formats: BookKeeper's byte layouts, strict parsing, torn tails, errors that name the offset."""

from __future__ import annotations

import struct

import pytest
from ledgerspec.reference.bookie.entry import (
    DigestType,
    EntryFormatError,
    check_entry,
    decode_entry,
    decode_lac,
    detect_digest,
    encode_entry,
    encode_lac,
)
from ledgerspec.reference.bookie.errors import CorruptFileError, UnexpectedFileError
from ledgerspec.reference.bookie.formats import (
    EXPLICIT_LAC_ENTRY_ID,
    FENCE_ENTRY_ID,
    LEDGER_KEY_ENTRY_ID,
    JournalEnd,
    LogMark,
    RecordKind,
    encode_index_slot,
    encode_mark,
    entry_log_header,
    entry_log_record,
    entry_record,
    explicit_lac_record,
    fence_record,
    index_header,
    index_slot_offset,
    journal_header,
    ledger_key_record,
    make_location,
    padding_record,
    parse_index,
    parse_mark,
    read_entry_at,
    scan_entry_log,
    scan_journal,
    split_location,
)
from ledgerspec.reference.bookie.layout import BookieLayout, parse_file_id

KEY = bytes(range(20))


def test_entry_layout_is_digest_managers() -> None:
    entry = encode_entry(7, 3, 2, 300, b"payload", DigestType.CRC32C)
    assert struct.unpack(">qqqq", entry[:32]) == (7, 3, 2, 300)
    assert len(entry) == 32 + 4 + len(b"payload") and entry.endswith(b"payload")
    crc32 = encode_entry(7, 3, 2, 300, b"payload", DigestType.CRC32)
    assert len(crc32) == 32 + 8 + len(b"payload") and crc32[32:36] == bytes(4)  # a 32-bit value in a long
    assert decode_entry(entry, DigestType.CRC32C).payload == b"payload"
    assert check_entry(crc32, DigestType.CRC32) == (7, 3, 2)


def test_digests_are_the_standard_crcs() -> None:
    # "123456789" is the check input of both CRCs: CRC32C = 0xE3069283, CRC32 = 0xCBF43926.
    assert DigestType.CRC32C.digest(b"1234", b"56789") == bytes.fromhex("e3069283")
    assert DigestType.CRC32.digest(b"123456789") == bytes.fromhex("00000000cbf43926")


def test_a_flipped_byte_fails_the_digest_and_detection() -> None:
    entry = bytearray(encode_entry(1, 0, -1, 5, b"hello"))
    assert detect_digest(bytes(entry)) is DigestType.CRC32C
    entry[-1] ^= 1
    with pytest.raises(EntryFormatError, match="crc32c digest mismatch for ledger 1 entry 0"):
        check_entry(bytes(entry), DigestType.CRC32C)
    assert detect_digest(bytes(entry)) is None
    assert detect_digest(encode_entry(1, 0, -1, 5, b"hello", DigestType.CRC32)) is DigestType.CRC32


def test_explicit_lac_buffer() -> None:
    buffer = encode_lac(9, 41)
    assert decode_lac(buffer, DigestType.CRC32C) == (9, 41) and decode_lac(buffer, None) == (9, 41)
    with pytest.raises(EntryFormatError, match="explicit LAC 41 of ledger 9: crc32 digest mismatch"):
        decode_lac(buffer, DigestType.CRC32)


def _journal(*records: bytes, version: int = 6) -> bytes:
    return journal_header(version) + b"".join(records)


def test_journal_header_and_records_round_trip() -> None:
    entry = encode_entry(5, 0, -1, 3, b"abc")
    data = _journal(
        ledger_key_record(5, KEY), entry_record(entry), fence_record(5), explicit_lac_record(5, encode_lac(5, 0))
    )
    assert data[:8] == b"BKLG\x00\x00\x00\x06" and set(data[8:512]) == {0}
    scan = scan_journal("j/1.txn", data, 1)
    assert [r.kind for r in scan.records] == [
        RecordKind.LEDGER_KEY,
        RecordKind.ENTRY,
        RecordKind.FENCE,
        RecordKind.EXPLICIT_LAC,
    ]
    key, stored, fence, lac = scan.records
    assert (key.entry_id, key.master_key) == (LEDGER_KEY_ENTRY_ID, KEY)
    assert stored.data == entry and stored.offset == 512 + len(ledger_key_record(5, KEY))
    assert fence.entry_id == FENCE_ENTRY_ID and len(fence.data) == 16
    assert (lac.entry_id, lac.lac) == (EXPLICIT_LAC_ENTRY_ID, 0)
    assert [r.spec_record() for r in scan.records] == [None, ("entry", 5, 0), ("fence", 5, -1), ("lac", 5, 0)]
    assert (scan.end, scan.end_kind) == (len(data), JournalEnd.EOF)
    assert scan.records_before(fence.offset) == 2


@pytest.mark.parametrize("position", [512, 513, 600, 1020, 1021, 1023, 1024 + 505])
def test_padding_aligns_to_512_as_write_padding_bytes(position: int) -> None:
    padding = padding_record(position)
    if position % 512 == 0:
        assert padding == b""
        return
    assert (position + len(padding)) % 512 == 0
    mask, length = struct.unpack(">ii", padding[:8])
    assert mask == -0x100 and length == len(padding) - 8 and set(padding[8:]) <= {0}
    assert len(padding) >= 8  # a gap under 8 bytes takes one more sector, as BookKeeper does


def test_padding_is_skipped_and_a_mark_may_point_after_it() -> None:
    first = entry_record(encode_entry(1, 0, -1, 1, b"x"))
    data = _journal(first)
    data += padding_record(len(data))
    second_offset = len(data)
    data += entry_record(encode_entry(1, 1, 0, 2, b"y"))
    scan = scan_journal("j/1.txn", data, 1)
    assert [r.entry_id for r in scan.records] == [0, 1]
    assert second_offset == 1024 and second_offset in scan.boundaries
    assert [r.entry_id for r in scan_journal("j/1.txn", data, 1, start=second_offset).records] == [1]


def test_every_cut_inside_the_last_record_is_a_torn_tail() -> None:
    whole = _journal(
        entry_record(encode_entry(1, 0, -1, 1, b"first")), entry_record(encode_entry(1, 1, 0, 2, b"second"))
    )
    last = scan_journal("j", whole, 1).records[-1]
    for cut in range(last.offset + 1, last.end):
        scan = scan_journal("j", whole[:cut], 1)
        assert [r.entry_id for r in scan.records] == [0], cut
        assert (scan.end, scan.end_kind) == (last.offset, JournalEnd.TORN), cut


def test_preallocated_zeros_end_the_journal_but_bytes_after_them_do_not_go_unnoticed() -> None:
    data = _journal(entry_record(encode_entry(1, 0, -1, 1, b"x")))
    scan = scan_journal("j", data + bytes(4096), 1)
    assert scan.end_kind is JournalEnd.ZERO_LENGTH and scan.end == len(data) and len(scan.records) == 1
    with pytest.raises(CorruptFileError, match="non-zero bytes after the end-of-journal marker") as caught:
        scan_journal("j/1.txn", data + bytes(100) + b"\x01", 1)
    assert caught.value.offset == len(data) + 100 and caught.value.path == "j/1.txn"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (struct.pack(">i", -7), "negative record length -7"),
        (struct.pack(">i", 8) + bytes(8), "record of 8 bytes cannot hold a ledger id and an entry id"),
        (struct.pack(">iqq", 16, 3, -0x4000), "unknown meta record \\(entry id -16384\\) for ledger 3"),
        (struct.pack(">iqqi", 24, 3, -0x1000, 99) + bytes(4), "ledger key record says 99 bytes follow"),
        (struct.pack(">iqqi", 20, 3, -0x8000, 0), "explicit LAC buffer of 0 bytes"),
        (struct.pack(">ii", -0x100, -1), "padding record with negative length -1"),
    ],
)
def test_a_corrupt_record_mid_file_names_file_and_offset(bad: bytes, message: str) -> None:
    good = entry_record(encode_entry(1, 0, -1, 1, b"x"))
    data = _journal(good, bad, good)
    with pytest.raises(CorruptFileError, match=message) as caught:
        scan_journal("/d/journal/current/1.txn", data, 1)
    assert caught.value.offset == 512 + len(good)
    assert str(caught.value).startswith(f"/d/journal/current/1.txn at offset {512 + len(good)}: ")


def test_journal_headers_are_checked() -> None:
    with pytest.raises(CorruptFileError, match="no journal magic 'BKLG'"):
        scan_journal("j", b"XXXX" + bytes(508), 1)
    with pytest.raises(CorruptFileError, match="journal format version 9, expected 2 to 6"):
        scan_journal("j", b"BKLG" + struct.pack(">i", 9) + bytes(504), 1)
    with pytest.raises(CorruptFileError, match="journal header is incomplete: 100 of 512 bytes"):
        scan_journal("j", journal_header()[:100], 1)
    with pytest.raises(CorruptFileError, match="explicit LAC record in a journal of format V5"):
        scan_journal("j", _journal(explicit_lac_record(1, encode_lac(1, 0)), version=5), 1)
    v4 = scan_journal("j", _journal(fence_record(2), version=4), 1)  # V4: 8-byte header, no padding
    assert v4.header_size == 8 and v4.records[0].kind is RecordKind.FENCE


def test_entry_log_header_records_and_locations() -> None:
    entries = [encode_entry(2, e, e - 1, e, b"payload") for e in range(3)]
    data = entry_log_header() + b"".join(entry_log_record(e) for e in entries)
    assert data[:8] == b"BKLO\x00\x00\x00\x01" and len(entry_log_header()) == 1024
    scan = scan_entry_log("l/5.log", data, 5)
    assert [(r.ledger_id, r.entry_id) for r in scan.records] == [(2, 0), (2, 1), (2, 2)]
    first = scan.records[0]
    assert first.offset == 1028 and first.location == make_location(5, 1028) == (5 << 32) | 1028
    assert split_location(first.location) == (5, 1028)
    assert read_entry_at("l/5.log", lambda o, n: data[o : o + n], len(data), first.offset, (2, 0)) == entries[0]
    with pytest.raises(CorruptFileError, match="expected ledger 2 entry 1, found ledger 2 entry 0"):
        read_entry_at("l/5.log", lambda o, n: data[o : o + n], len(data), first.offset, (2, 1))
    with pytest.raises(CorruptFileError, match="runs past the end of the file"):
        read_entry_at("l/5.log", lambda o, n: data[o : o + n], len(data) - 1, scan.records[-1].offset)
    torn = scan_entry_log("l/5.log", data[:-3], 5)
    assert torn.torn and len(torn.records) == 2 and torn.end == scan.records[-1].offset - 4


def test_entry_log_skips_zero_padding_and_reads_a_ledgers_map() -> None:
    entry = encode_entry(3, 0, -1, 1, b"z")
    ledgers_map = struct.pack(">qqi", -1, -2, 1) + struct.pack(">qq", 3, len(entry))
    data = entry_log_header() + bytes(16) + entry_log_record(entry) + entry_log_record(ledgers_map)
    scan = scan_entry_log("l", data, 0)
    assert [(r.ledger_id, r.offset) for r in scan.records] == [(3, 1024 + 16 + 4)]
    assert scan.ledgers_map == ((3, len(entry)),)
    with pytest.raises(CorruptFileError, match="negative entry size -5") as caught:
        scan_entry_log("l/0.log", entry_log_header() + struct.pack(">i", -5) + bytes(20), 0)
    assert caught.value.offset == 1024


def test_index_file_is_file_infos_layout() -> None:
    lac = encode_lac(4, 1)
    header = index_header(KEY, True, lac)
    assert header[:12] == b"BKLE" + struct.pack(">ii", 1, 20) and len(header) == 1024
    data = bytearray(header + bytes(8 * 3))
    data[index_slot_offset(2) : index_slot_offset(2) + 8] = encode_index_slot(make_location(1, 2000))
    index = parse_index("x/4.idx", bytes(data) + b"\x01\x02", 4)
    assert index.header.fenced and index.header.master_key == KEY and index.header.explicit_lac == lac
    assert index.locations == {2: make_location(1, 2000)} and index.torn_slot
    with pytest.raises(CorruptFileError, match="no ledger index signature 'BKLE'"):
        parse_index("x/4.idx", b"BKLX" + bytes(1020), 4)
    with pytest.raises(CorruptFileError, match="index header is incomplete: 40 of 1024 bytes"):
        parse_index("x/4.idx", header[:40], 4)


def test_last_mark_is_sixteen_big_endian_bytes() -> None:
    assert encode_mark(LogMark(0x1A, 4096)) == struct.pack(">qq", 0x1A, 4096)
    assert parse_mark("m", encode_mark(LogMark(3, 512))) == LogMark(3, 512)
    assert LogMark(2, 10**6) < LogMark(3, 0) < LogMark(3, 1)  # lexicographic, as LogMark.compare
    with pytest.raises(CorruptFileError, match="lastMark file of 15 bytes, expected 16") as caught:
        parse_mark("/b/ledgers/current/lastMark", bytes(15))
    assert caught.value.offset is None and caught.value.path == "/b/ledgers/current/lastMark"


def test_layout_names_files_as_bookkeeper() -> None:
    layout = BookieLayout.in_data_dir("/b", ledger_dirs=2)
    assert layout.journal_path(0x1F) == "/b/journal/current/1f.txn"
    assert layout.entry_log_path(3) == "/b/ledgers-1/current/3.log"
    assert layout.index_path(0x1234) == "/b/ledgers/current/12/34/1234.idx"
    assert layout.last_mark_paths() == ("/b/ledgers/current/lastMark", "/b/ledgers-1/current/lastMark")
    assert parse_file_id("/d", "ff.txn", ".txn") == 255
    with pytest.raises(UnexpectedFileError, match=r"/d/zz\.txn: \.txn file whose name is not a hex id"):
        parse_file_id("/d", "zz.txn", ".txn")


def test_an_empty_entry_log_is_one_created_ahead_of_need_and_a_cut_header_is_corrupt() -> None:
    """BookKeeper creates the next entry log before it needs it; its header waits in the write buffer."""
    empty = scan_entry_log("l/1.log", b"", 1)
    assert (empty.records, empty.size, empty.end, empty.torn) == ((), 0, 0, False)
    with pytest.raises(CorruptFileError, match="entry log header is incomplete: 100 of 1024 bytes"):
        scan_entry_log("l/1.log", entry_log_header()[:100], 1)
