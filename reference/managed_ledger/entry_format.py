"""The bytes of a topic's entry, as a Pulsar broker adds them to its managed ledger.

A producer's batch reaches the broker as ``MessageMetadata`` and a payload;
the broker stores them unchanged as one entry (``Commands.serializeMetadataAndPayload``):

==================  =========  ==============================================
field               bytes      what
==================  =========  ==============================================
magic               2          ``0x0e01``: a CRC32C checksum follows
checksum            4          CRC32C of everything after it
metadata size       4          big-endian
metadata            that size  ``MessageMetadata`` (``protos/PulsarApi.proto``)
payload             the rest   the batch's messages
==================  =========  ==============================================

The metadata carries what deduplication needs: the producer's name and the
batch's sequence id (``MessageDeduplication`` rebuilds its state from them),
and the number of messages in the batch. An entry read back that a broker
with broker-entry metadata wrote starts with magic ``0x0e02`` and that
metadata's size; it is skipped.

Bytes that are not an entry raise :class:`EntryFormatError`, naming what is
wrong and at which byte.
"""

from __future__ import annotations

import struct
from typing import Any

import attrs
import crc32c
from google.protobuf.message import DecodeError
from ledgerspec.reference.metadata.protos import PulsarApi_pb2 as pb

__all__ = ["CHECKSUM_MAGIC", "EntryFormatError", "Message", "decode_message", "encode_message"]

CHECKSUM_MAGIC = 0x0E01  # Commands.magicCrc32c
BROKER_ENTRY_METADATA_MAGIC = 0x0E02  # Commands.magicBrokerEntryMetadata


class EntryFormatError(ValueError):
    """Bytes that are not a Pulsar entry: the message says what is wrong, and at which byte."""


@attrs.frozen
class Message:
    """An entry's metadata and payload."""

    producer: str
    sequence_id: int
    publish_time: int
    payload: bytes
    num_messages: int = 1


def encode_message(message: Message) -> bytes:
    metadata = pb.MessageMetadata(
        producer_name=message.producer, sequence_id=message.sequence_id, publish_time=message.publish_time
    )
    if message.num_messages != 1:
        metadata.num_messages_in_batch = message.num_messages
    meta = metadata.SerializeToString()
    body = struct.pack(">I", len(meta)) + meta + message.payload
    return struct.pack(">HI", CHECKSUM_MAGIC, crc32c.crc32c(body)) + body


def decode_message(data: bytes) -> Message:
    offset = 0
    if len(data) >= 6 and struct.unpack_from(">H", data)[0] == BROKER_ENTRY_METADATA_MAGIC:
        (size,) = struct.unpack_from(">I", data, 2)
        offset = 6 + size
    if len(data) >= offset + 2 and struct.unpack_from(">H", data, offset)[0] == CHECKSUM_MAGIC:
        if len(data) < offset + 6:
            raise EntryFormatError(f"the checksum at byte {offset + 2} is cut short ({len(data)} bytes)")
        (stored,) = struct.unpack_from(">I", data, offset + 2)
        actual = crc32c.crc32c(data[offset + 6 :])
        if stored != actual:
            raise EntryFormatError(
                f"CRC32C mismatch at byte {offset + 2}: stored {stored:#010x}, computed {actual:#010x}"
            )
        offset += 6
    if len(data) < offset + 4:
        raise EntryFormatError(f"no metadata size at byte {offset} ({len(data)} bytes)")
    (size,) = struct.unpack_from(">I", data, offset)
    start = offset + 4
    if start + size > len(data):
        raise EntryFormatError(f"the metadata at byte {start} is {size} bytes long, but {len(data) - start} follow")
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(data[start : start + size])
    except DecodeError as e:
        raise EntryFormatError(f"the MessageMetadata at byte {start} does not parse: {e}") from e
    if not metadata.IsInitialized():
        untyped: Any = metadata  # FindInitializationErrors is missing from the type stubs
        missing = ", ".join(untyped.FindInitializationErrors())
        raise EntryFormatError(f"the MessageMetadata at byte {start} lacks required fields: {missing}")
    return Message(
        metadata.producer_name,
        metadata.sequence_id,
        metadata.publish_time,
        data[start + size :],
        metadata.num_messages_in_batch,
    )
