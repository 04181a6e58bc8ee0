"""Reference bookies on the wire: BookKeeper's v3 and v2 protocols over TCP, and the bookies' registration in ZooKeeper.

- :mod:`.codec`: frames and v3 messages, bytes in and messages out;
- :mod:`.v2`: the v2 binary protocol, which a connection speaks from its
  first frame that is not v3 on;
- :mod:`.service`: a reference bookie's answer to each v3 request, served by
  the same code as the in-process cluster (:mod:`ledgerspec.reference.ledger.serving`);
- :mod:`.registration`: the znodes a BookKeeper client finds bookies by;
- :mod:`.server`: bookies on TCP ports, served from one asyncio loop;
- :mod:`.trace`: what they served, as traces of the ledger spec;
- :mod:`.zookeeper_proxy`: ZooKeeper for their clients, each metadata write it passes recorded;
- :mod:`.network`: the other side, the reference ledger client's requests to any v3 bookie.
"""

from ledgerspec.reference.wire.codec import MAX_FRAME_BYTES, FrameError, decode_request, decode_response, frame
from ledgerspec.reference.wire.registration import BookieRegistration, RegistrationError
from ledgerspec.reference.wire.server import ServedBookie, ServedBookies
from ledgerspec.reference.wire.service import AUTH_DISABLED_PLUGIN, WireService

__all__ = [
    "AUTH_DISABLED_PLUGIN",
    "MAX_FRAME_BYTES",
    "BookieRegistration",
    "FrameError",
    "RegistrationError",
    "ServedBookie",
    "ServedBookies",
    "WireService",
    "decode_request",
    "decode_response",
    "frame",
]
