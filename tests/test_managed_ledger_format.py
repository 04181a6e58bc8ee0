"""Pulsar's managed-ledger metadata bytes: field numbers checked against bytes built by hand, round trips, bad input."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledgerspec.reference.managed_ledger.snapshot import bits_of, entries_of_ranges, longs_of, ranges_of_entries
from ledgerspec.reference.metadata.managed_ledger_format import (
    BatchDeletionIndex,
    LedgerInfo,
    ManagedCursorInfo,
    ManagedLedgerFormatError,
    ManagedLedgerInfo,
    MessageRange,
    Position,
    PositionInfo,
    compress,
    decode_managed_cursor_info,
    decode_managed_ledger_info,
    decode_position_info,
    encode_managed_cursor_info,
    encode_managed_ledger_info,
    encode_position_info,
    to_json,
)
from ledgerspec.reference.metadata.managed_ledger_paths import cursor_path, managed_ledger_path, split_path


# -- protobuf's wire format, by hand: a wrong field number or type in the .proto fails these tests ----------
def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64: negative numbers take ten bytes
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def int_field(number: int, value: int) -> bytes:
    return varint(number << 3 | 0) + varint(value)


def message_field(number: int, body: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(body)) + body


def position(ledger: int, entry: int) -> bytes:
    return int_field(1, ledger) + int_field(2, entry)


CURSOR_INFO = ManagedCursorInfo(
    57,
    Position(56, 9),
    (MessageRange(Position(56, 11), Position(56, 13)),),
    {"p": 3},
    1700,
    (BatchDeletionIndex(Position(56, 15), (0b101,)),),
)
CURSOR_INFO_BYTES = (
    int_field(1, 57)  # cursorsLedgerId
    + int_field(2, 56)  # markDeleteLedgerId
    + int_field(3, 9)  # markDeleteEntryId
    + message_field(4, message_field(1, position(56, 11)) + message_field(2, position(56, 13)))
    + message_field(5, message_field(1, b"p") + int_field(2, 3))  # LongProperty
    + int_field(6, 1700)  # lastActive
    + message_field(7, message_field(1, position(56, 15)) + int_field(2, 0b101))  # deleteSet, not packed
)


def test_cursor_info_bytes_match_pulsars_field_numbers() -> None:
    assert encode_managed_cursor_info(CURSOR_INFO) == CURSOR_INFO_BYTES
    assert decode_managed_cursor_info(CURSOR_INFO_BYTES) == CURSOR_INFO


def test_a_closed_cursor_says_minus_one_in_ten_bytes() -> None:
    info = ManagedCursorInfo(-1, Position(603, -1))
    data = encode_managed_cursor_info(info)
    assert data == int_field(1, -1) + int_field(2, 603) + int_field(3, -1)
    assert data[1:11] == b"\xff" * 9 + b"\x01"
    assert decode_managed_cursor_info(data) == info


def test_position_info_bytes_match_pulsars_field_numbers() -> None:
    info = PositionInfo(Position(56, 9), batched_deletion=(BatchDeletionIndex(Position(56, 12), (6,)),))
    expected = position(56, 9) + message_field(5, message_field(1, position(56, 12)) + int_field(2, 6))
    assert encode_position_info(info) == expected
    assert decode_position_info(expected) == info


def test_ledger_info_bytes_match_pulsars_field_numbers() -> None:
    info = ManagedLedgerInfo((LedgerInfo(56, 10, 90, 1700), LedgerInfo(603)), Position(56, 9), {"k": "v"})
    expected = (
        message_field(1, int_field(1, 56) + int_field(2, 10) + int_field(3, 90) + int_field(4, 1700))
        + message_field(1, int_field(1, 603) + int_field(2, 0) + int_field(3, 0) + int_field(4, 0))
        + message_field(2, position(56, 9))
        + message_field(3, message_field(1, b"k") + message_field(2, b"v"))
    )
    assert encode_managed_ledger_info(info) == expected
    assert decode_managed_ledger_info(expected) == info


# -- round trips --------------------------------------------------------------------------------------
ids = st.integers(-1, 2**63 - 1)
positions = st.builds(Position, ids, ids)
ranges = st.builds(MessageRange, positions, positions)
batches = st.builds(BatchDeletionIndex, positions, st.tuples(st.integers(-(2**63), 2**63 - 1)))
long_properties = st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=2)


@given(ids, positions, st.tuples(ranges), long_properties, st.integers(0, 2**62), st.tuples(batches))
def test_cursor_info_round_trips(
    ledger: int,
    md: Position,
    rs: tuple[MessageRange, ...],
    props: dict[str, int],
    active: int,
    bs: tuple[BatchDeletionIndex, ...],
) -> None:
    info = ManagedCursorInfo(ledger, md, rs, props, active, bs)
    assert decode_managed_cursor_info(encode_managed_cursor_info(info)) == info


@given(st.lists(st.builds(LedgerInfo, st.integers(0, 2**63 - 1), st.integers(0, 2**40)), max_size=4))
def test_ledger_info_round_trips(ledgers: list[LedgerInfo]) -> None:
    info = ManagedLedgerInfo(tuple(ledgers))
    assert decode_managed_ledger_info(encode_managed_ledger_info(info)) == info


@given(st.sets(st.tuples(st.integers(0, 3), st.integers(0, 20))))
def test_acked_entries_round_trip_through_pulsars_ranges(entries: set[tuple[int, int]]) -> None:
    ranges = ranges_of_entries(entries)
    assert set(entries_of_ranges(ranges, [0, 1, 2, 3], lambda _: 21)) == entries
    assert all(lower[0] == upper[0] and lower[1] < upper[1] for lower, upper in ranges)


def test_consecutive_acks_merge_into_one_open_closed_range() -> None:
    assert ranges_of_entries({(5, 3), (5, 4), (5, 5), (6, 0)}) == [((5, 2), (5, 5)), ((6, -1), (6, 0))]


@given(st.sets(st.integers(0, 200)))
def test_bitsets_round_trip_as_javas_long_arrays(bits: set[int]) -> None:
    longs = longs_of(bits)
    assert set(bits_of(longs)) == bits
    assert all(-(2**63) <= w < 2**63 for w in longs)


def test_bit_63_is_a_negative_long() -> None:
    assert longs_of({63}) == (-(2**63),)


# -- the compressed form --------------------------------------------------------------------------
def test_a_zlib_compressed_ledger_list_decodes() -> None:
    info = ManagedLedgerInfo((LedgerInfo(56, 10, 90, 1700),))
    raw = encode_managed_ledger_info(info)
    data = compress(raw, "ZLIB")
    header = int_field(1, 2) + int_field(2, len(raw))  # compressionType ZLIB, uncompressedSize
    assert data == struct.pack(">Hi", 0x4778, len(header)) + header + zlib.compress(raw)
    assert decode_managed_ledger_info(data) == info


def test_a_compressed_cursor_info_decodes() -> None:
    assert decode_managed_cursor_info(compress(CURSOR_INFO_BYTES, "ZLIB", cursor=True)) == CURSOR_INFO


def test_an_unsupported_codec_is_named() -> None:
    header = int_field(1, 3) + int_field(2, 10)  # ZSTD
    data = struct.pack(">Hi", 0x4778, len(header)) + header + b"\x28\xb5\x2f\xfd"
    with pytest.raises(ManagedLedgerFormatError, match="codec ZSTD is not supported"):
        decode_managed_ledger_info(data)


# -- bad input ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x08", "ManagedCursorInfo: the protobuf message at byte 0 does not parse"),
        (int_field(2, 5), "ManagedCursorInfo: required fields missing: cursorsLedgerId"),
        (int_field(1, 5), "ManagedCursorInfo has no mark-delete position"),
        (struct.pack(">Hi", 0x4778, 50) + b"\x08", "the header at byte 6 is 50 bytes long, but 1 bytes follow"),
    ],
)
def test_bad_cursor_info_says_what_is_wrong(data: bytes, problem: str) -> None:
    with pytest.raises(ManagedLedgerFormatError, match=problem.replace("(", r"\(")):
        decode_managed_cursor_info(data)


def test_a_range_without_its_upper_end_is_named() -> None:
    data = int_field(1, 5) + int_field(2, 1) + int_field(3, 1) + message_field(4, message_field(1, position(1, 2)))
    with pytest.raises(ManagedLedgerFormatError, match=r"individualDeletedMessages\[0\]\.upperEndpoint"):
        decode_managed_cursor_info(data)


def test_per_ledger_bitset_acks_are_refused_not_dropped() -> None:
    data = position(1, 2) + message_field(6, int_field(1, 1) + int_field(2, 7))
    with pytest.raises(ManagedLedgerFormatError, match="individualDeletedMessageRanges"):
        decode_position_info(data)


def test_json_is_readable() -> None:
    assert to_json(CURSOR_INFO) == {
        "type": "ManagedCursorInfo",
        "cursorsLedgerId": 57,
        "markDelete": "56:9",
        "individualDeletedMessages": ["(56:11, 56:13]"],
        "batchedEntryDeletionIndexInfo": [{"position": "56:15", "deleteSet": [5]}],
        "properties": {"p": 3},
        "lastActive": 1700,
    }


# -- paths ----------------------------------------------------------------------------------------
def test_paths_are_pulsars() -> None:
    name = "tenant_c/ns1/persistent/topic_cursor"
    assert managed_ledger_path(name) == "/managed-ledgers/tenant_c/ns1/persistent/topic_cursor"
    assert cursor_path(name, "consumer_002") == "/managed-ledgers/tenant_c/ns1/persistent/topic_cursor/consumer_002"
    assert split_path(cursor_path(name, "consumer_002")) == (name, "consumer_002")
    assert split_path(managed_ledger_path(name)) == (name, None)


@pytest.mark.parametrize("name", ["topic", "t/ns/non-persistent/x", "t/ns/persistent/", "a/b/c/d/e/f"])
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(ValueError, match="is not <tenant>/<namespace>/persistent/<topic>"):
        managed_ledger_path(name)
