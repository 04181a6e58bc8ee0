"""Ledger metadata bytes: BookKeeper's znode layout, field for field, and clear errors for bad bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledgerspec.reference.metadata import (
    DigestType,
    InvalidLedgerMetadataError,
    LedgerMetadata,
    LedgerMetadataFormatError,
    LedgerState,
    Segment,
    decode_ledger_metadata,
    encode_ledger_metadata,
)
from ledgerspec.reference.metadata.ledger_metadata_format import to_protobuf

HEADER = b"BookieMetadataFormatVersion\t3\n"

CLOSED_LEDGER = LedgerMetadata(
    ledger_id=2147483647,
    ensemble_size=3,
    write_quorum_size=2,
    ack_quorum_size=1,
    segments=[(0, ["b1:3181", "b2:3181", "b3:3181"]), (5, ["b1:3181", "b4:3181", "b3:3181"])],
    state=LedgerState.CLOSED,
    last_entry_id=9,
    length=300,
    digest_type=DigestType.MAC,
    password=b"secret",
    ctime=1700000000000,
    custom_metadata={"app": b"pulsar"},
    creator_token=7,
)

# The bytes, field by field from DataFormats.proto: a tag is (field number << 3) | wire type,
# wire type 0 for varints, 2 for length-delimited fields.
CLOSED_LEDGER_BODY = b"".join(
    [
        b"\x08\x02",  # 1 quorumSize (the write quorum) = 2
        b"\x10\x03",  # 2 ensembleSize = 3
        b"\x18\xac\x02",  # 3 length = 300
        b"\x20\x09",  # 4 lastEntryId = 9
        b"\x28\x03",  # 5 state = CLOSED
        b"\x32\x1d",  # 6 segment, 29 bytes:
        b"\x0a\x07b1:3181\x0a\x07b2:3181\x0a\x07b3:3181",  # 1 ensembleMember x 3
        b"\x10\x00",  # 2 firstEntryId = 0
        b"\x32\x1d",  # 6 segment, 29 bytes:
        b"\x0a\x07b1:3181\x0a\x07b4:3181\x0a\x07b3:3181",
        b"\x10\x05",  # 2 firstEntryId = 5
        b"\x38\x02",  # 7 digestType = HMAC
        b"\x42\x06secret",  # 8 password
        b"\x48\x01",  # 9 ackQuorumSize = 1
        b"\x50\x80\xd0\x95\xff\xbc\x31",  # 10 ctime = 1700000000000
        b"\x5a\x0d\x0a\x03app\x12\x06pulsar",  # 11 customMetadata {1 key, 2 value}
        b"\x60\x07",  # 12 cToken = 7
    ]
)

# The same metadata, built with LedgerMetadataBuilder and written by LedgerMetadataSerDe.serialize
# of Apache BookKeeper 4.17.1 (bookkeeper-server from Maven Central).
WRITTEN_BY_BOOKKEEPER = bytes.fromhex(
    "426f6f6b69654d65746164617461466f726d617456657273696f6e09330a6d0802100318ac0220092803321d0a0762313a33"
    "3138310a0762323a333138310a0762333a333138311000321d0a0762313a333138310a0762343a333138310a0762333a3331"
    "383110053802420673656372657448015080d095ffbc315a0d0a03617070120670756c7361726007"
)


def test_golden_bytes_of_a_closed_ledger() -> None:
    assert len(CLOSED_LEDGER_BODY) == 0x6D
    expected = HEADER + b"\x6d" + CLOSED_LEDGER_BODY  # varint32 length prefix, then the message
    assert encode_ledger_metadata(CLOSED_LEDGER) == expected
    assert expected == WRITTEN_BY_BOOKKEEPER


def test_golden_bytes_of_an_open_ledger() -> None:
    metadata = LedgerMetadata(1, 3, 2, 2, [(0, ["b1:3181", "b2:3181", "b3:3181"])], creator_token=42)
    body = b"".join(
        [
            b"\x08\x02\x10\x03",  # quorumSize 2, ensembleSize 3
            b"\x18\x00",  # length 0 until the close
            b"\x20" + b"\xff" * 9 + b"\x01",  # lastEntryId -1: a negative int64 takes ten bytes
            b"\x28\x01",  # state OPEN
            b"\x32\x1d\x0a\x07b1:3181\x0a\x07b2:3181\x0a\x07b3:3181\x10\x00",
            b"\x38\x03",  # digestType CRC32C
            b"\x42\x00",  # password, empty but present
            b"\x48\x02",  # ackQuorumSize 2; no ctime
            b"\x60\x2a",  # cToken 42
        ]
    )
    assert encode_ledger_metadata(metadata) == HEADER + bytes([len(body)]) + body


def test_bytes_written_by_bookkeeper_decode() -> None:
    assert decode_ledger_metadata(WRITTEN_BY_BOOKKEEPER, 2147483647) == CLOSED_LEDGER


def test_a_long_message_gets_a_multi_byte_length_prefix() -> None:
    ensemble = [f"bookie-{i:03d}.example.org:3181" for i in range(8)]
    metadata = LedgerMetadata(9, 8, 8, 8, [(first, ensemble) for first in range(0, 100, 10)])
    data = encode_ledger_metadata(metadata)
    size = len(data) - len(HEADER) - 2
    assert size > 127
    assert data[len(HEADER) : len(HEADER) + 2] == bytes([size & 0x7F | 0x80, size >> 7])
    assert decode_ledger_metadata(data, 9) == metadata


bookie_ids = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=12)


@st.composite
def ledger_metadata(draw: st.DrawFn) -> LedgerMetadata:
    e = draw(st.integers(1, 5))
    qw = draw(st.integers(1, e))
    firsts = sorted(draw(st.sets(st.integers(0, 2**40), min_size=1, max_size=4)))
    segments = [(first, draw(st.lists(bookie_ids, min_size=e, max_size=e))) for first in firsts]
    state = draw(st.sampled_from(LedgerState))
    closed = state is LedgerState.CLOSED
    return LedgerMetadata(
        ledger_id=draw(st.integers(0, 2**63 - 1)),
        ensemble_size=e,
        write_quorum_size=qw,
        ack_quorum_size=draw(st.integers(1, qw)),
        segments=segments,
        state=state,
        last_entry_id=draw(st.integers(-1, 2**62)) if closed else -1,
        length=draw(st.integers(0, 2**62)) if closed else 0,
        digest_type=draw(st.sampled_from(DigestType)),
        password=draw(st.binary(max_size=8)),
        ctime=draw(st.none() | st.integers(-(2**63), 2**63 - 1)),
        custom_metadata=draw(st.dictionaries(bookie_ids, st.binary(max_size=8), max_size=3)),
        creator_token=draw(st.integers(0, 2**63 - 2)),
    )


@given(ledger_metadata())
def test_encode_then_decode_gives_the_same_metadata(metadata: LedgerMetadata) -> None:
    assert decode_ledger_metadata(encode_ledger_metadata(metadata), metadata.ledger_id) == metadata


def _decode_fields(
    fields: dict[str, int | bytes], segments: list[tuple[int, list[str]]], ledger_id: int = 3
) -> LedgerMetadata:
    """Decode a message made field by field (the protobuf runtime encodes it)."""
    message = to_protobuf(LedgerMetadata(ledger_id, 2, 2, 1, [(0, ["a", "b"])]))
    message.Clear()
    for name, value in fields.items():
        setattr(message, name, value)
    for first, members in segments:
        message.segment.add(firstEntryId=first, ensembleMember=members)
    body = message.SerializePartialToString()
    return decode_ledger_metadata(HEADER + bytes([len(body)]) + body, ledger_id)


MINIMAL: dict[str, int | bytes] = {"quorumSize": 2, "ensembleSize": 2, "length": 0, "state": 1}
SEGMENTS = [(0, ["a", "b"])]


def test_decoding_follows_bookkeepers_defaults() -> None:
    # No ackQuorumSize (metadata of older clients): the ack quorum is the write quorum.
    # No password: no digest type either.
    metadata = _decode_fields(MINIMAL, SEGMENTS)
    assert (metadata.ack_quorum_size, metadata.digest_type, metadata.password) == (2, None, b"")
    # lastEntryId and length of a ledger that is not CLOSED are not read.
    assert _decode_fields({**MINIMAL, "lastEntryId": 17, "length": 99}, SEGMENTS).last_entry_id == -1
    # A password without a digest type: the enum's default, CRC32.
    assert _decode_fields({**MINIMAL, "password": b"pw"}, SEGMENTS).digest_type is DigestType.CRC32


def test_format_version_2_text_is_read() -> None:
    text = (
        "quorumSize: 2\nensembleSize: 3\nlength: 120\nlastEntryId: 4\nstate: CLOSED\n"
        'segment {\n  ensembleMember: "10.0.0.1:3181"\n  ensembleMember: "10.0.0.2:3181"\n'
        '  ensembleMember: "10.0.0.3:3181"\n  firstEntryId: 0\n}\n'
        'digestType: CRC32\npassword: ""\nackQuorumSize: 2\n'
    )
    metadata = decode_ledger_metadata(b"BookieMetadataFormatVersion\t2\n" + text.encode(), 12)
    assert metadata == LedgerMetadata(
        12,
        3,
        2,
        2,
        [Segment(0, ("10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"))],
        state=LedgerState.CLOSED,
        last_entry_id=4,
        length=120,
        digest_type=DigestType.CRC32,
    )


PATH = "/ledgers/00/0000/L0003"
GOOD = encode_ledger_metadata(LedgerMetadata(3, 2, 2, 1, [(0, ["a", "b"])]))


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "header cut short after 0 bytes"),
        (b"BookieMetadataFormat", "header cut short after 20 bytes"),
        (b"BookieMetadataFormatVersion 3\n", r"header corrupt at byte 27: b' ', expected b'\\t'"),
        (b"BookieMetadataFormatVersion\t3", "no end of the version number"),
        (b"BookieMetadataFormatVersion\t3x\n", "version number b'3x' at byte 28 is not a number"),
        (b"BookieMetadataFormatVersion\t1\n2\n3\n0\n", "format version 1 .* is not supported"),
        (b"BookieMetadataFormatVersion\t4\n", "unknown format version 4"),
        (HEADER, "length prefix at byte 30 is cut short"),
        (HEADER + b"\xff\xff\xff\xff\xff\x01", "length prefix at byte 30 is longer than 5 bytes"),
        (GOOD[:-3], r"length prefix at byte 30 says \d+ bytes, but only \d+ follow"),
        (GOOD + b"\x00\x00", r"2 bytes after the message \(which ends at byte \d+\)"),
        (HEADER + b"\x03\x0a\x05a", "the protobuf message at byte 30 does not parse"),
        (HEADER + b"\x04\x08\x02\x10\x02", "required fields missing: length, state"),
        (GOOD.replace(b"\x28\x01", b"\x28\x07"), "state is 7, not one of OPEN=1, IN_RECOVERY=2, CLOSED=3"),
        (GOOD.replace(b"\x38\x03", b"\x38\x09"), "digestType is 9, not one of CRC32=1, HMAC=2, CRC32C=3, DUMMY=4"),
        (b"BookieMetadataFormatVersion\t2\nquorumSize: two\n", "the text-format message does not parse"),
    ],
)
def test_corrupt_bytes_get_an_error_naming_the_path(data: bytes, problem: str) -> None:
    with pytest.raises(LedgerMetadataFormatError, match=f"ledger metadata at {PATH} is unreadable: {problem}"):
        decode_ledger_metadata(data, 3, where=PATH)


def test_metadata_that_breaks_bookkeepers_rules_is_refused_when_decoded() -> None:
    with pytest.raises(LedgerMetadataFormatError, match=r"segment 0 \(from entry 0\) has 1 bookies, E=2"):
        _decode_fields(MINIMAL, [(0, ["a"])])
    with pytest.raises(LedgerMetadataFormatError, match="E >= Qw >= Qa >= 1, got E=2, Qw=3"):
        _decode_fields({**MINIMAL, "quorumSize": 3}, SEGMENTS)
    with pytest.raises(LedgerMetadataFormatError, match="at least one segment"):
        _decode_fields(MINIMAL, [])
    with pytest.raises(LedgerMetadataFormatError, match="segment 1 starts at entry 0; first entry ids must be"):
        _decode_fields(MINIMAL, [(0, ["a", "b"]), (0, ["b", "c"])])


def test_metadata_without_a_digest_type_cannot_be_written() -> None:
    with pytest.raises(InvalidLedgerMetadataError, match="no digest type"):
        encode_ledger_metadata(LedgerMetadata(3, 1, 1, 1, [(0, ["a"])], digest_type=None))
