"""BookKeeper's v3 wire format: length-prefixed frames holding protobuf ``Request`` and ``Response`` messages.

What this module knows: bytes in, messages out, and back; no sockets, no bookie.

A frame is a 4-byte big-endian length, then that many bytes
(``BookieNettyServer``'s pipeline, BookKeeper 4.17.2:
``LengthFieldBasedFrameDecoder(maxFrameSize, 0, 4, 0, 4)`` in, and
``BookieProtoEncoding.serializeProtobuf`` out). A bookie takes a frame
longer than ``nettyMaxFrameSizeBytes`` (5 MiB by default) for a broken
stream and closes the connection.

The frame's bytes are a v3 ``Request``, or a request of the v2 binary
protocol (:mod:`.v2`): ``BookieProtoEncoding.RequestDecoder`` tries v3
first, and on a frame that does not parse as v3 falls back to v2, which
the connection then speaks from then on.
"""

from __future__ import annotations

import struct

from google.protobuf.message import DecodeError, Message
from ledgerspec.reference.wire.protos import BookkeeperProtocol_pb2 as pb

__all__ = [
    "LENGTH",
    "MAX_FRAME_BYTES",
    "FrameError",
    "decode_request",
    "decode_response",
    "frame",
    "frame_length",
    "parse",
]

#: The length prefix of a frame: a big-endian signed int, as Netty's ``ByteBuf.readInt``.
LENGTH = struct.Struct(">i")
#: ``nettyMaxFrameSizeBytes``' default (``AbstractConfiguration.DEFAULT_NETTY_MAX_FRAME_SIZE``).
MAX_FRAME_BYTES = 5 * 1024 * 1024


class FrameError(ValueError):
    """A frame the bookie cannot take: the connection it came on is closed."""


def frame(message: pb.Request | pb.Response) -> bytes:
    """``message`` serialized, behind its length."""
    payload = message.SerializeToString()
    return LENGTH.pack(len(payload)) + payload


def frame_length(prefix: bytes, max_bytes: int = MAX_FRAME_BYTES) -> int:
    """The length a frame's 4-byte prefix announces; :class:`FrameError` if no bookie would read that many bytes."""
    length: int = LENGTH.unpack(prefix)[0]
    if length < 0:
        raise FrameError(f"frame length {length} is negative (prefix {prefix.hex()})")
    if length > max_bytes:
        raise FrameError(f"frame length {length} is over the limit of {max_bytes} bytes (nettyMaxFrameSizeBytes)")
    return length


def decode_request(payload: bytes) -> pb.Request:
    """The v3 request in a frame's bytes; :class:`FrameError` naming what is wrong when they hold none."""
    request = pb.Request()
    parse(request, payload, "v3 request")
    return request


def decode_response(payload: bytes) -> pb.Response:
    """The v3 response in a frame's bytes (what a client reads); :class:`FrameError` when they hold none."""
    response = pb.Response()
    parse(response, payload, "v3 response")
    return response


def parse(message: Message, payload: bytes, what: str) -> None:
    """Parse as Java's ``parseFrom`` does: a required field missing (an unknown enum value leaves its field unset,
    as proto2 keeps it among the unknown fields) makes the bytes no v3 message."""
    try:
        message.ParseFromString(payload)
    except DecodeError as exc:
        problem = str(exc)
    else:
        if message.IsInitialized():
            return
        missing = message.FindInitializationErrors()  # type: ignore[attr-defined]  # not in protobuf's stubs
        problem = f"required {', '.join(missing)} missing or of an unknown value"
    raise FrameError(f"{len(payload)} bytes are not a {what}: {problem}")
