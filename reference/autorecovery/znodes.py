"""Autorecovery's znodes: where BookKeeper keeps them, and what their data says.

Everything lives under ``<ledgers root>/underreplication`` (BookKeeper's
``ZkLedgerUnderreplicationManager`` and ``ZkLedgerAuditorManager``), beside
the bookies' registrations under ``<ledgers root>/available``:

==========================================================  =====================================
znode                                                       what it says
==========================================================  =====================================
``available/<bookie id>`` (ephemeral)                       the bookie is up (its session lives)
``underreplication/ledgers/hhhh/hhhh/hhhh/hhhh/urL%010d``   the ledger is marked under-replicated;
                                                            ``UnderreplicatedLedgerFormat``: the
                                                            bookies found lost
``underreplication/locks/urL%010d`` (ephemeral)             a replication worker holds the ledger;
                                                            ``LockDataFormat``
``underreplication/auditorelection/V_%010d`` (ephemeral     an auditor's vote: the lowest wins;
sequential)                                                 ``AuditorVoteFormat``
==========================================================  =====================================

The four ``hhhh`` are the ledger id's 16-bit groups in hex, high to low
(``getParentZnodePath``). The data is the protobuf message in text format
(``TextFormat``), as BookKeeper's ``toTextFormat`` writes it.

This module depends on the paths and the generated protobuf module only, so
it also reads the znodes of a real BookKeeper cluster.
"""

from __future__ import annotations

import re
from typing import TypeVar

from google.protobuf import text_format
from google.protobuf.message import Message
from ledgerspec.reference.metadata.ledger_paths import DEFAULT_LEDGERS_ROOT
from ledgerspec.reference.metadata.protos import DataFormats_pb2

__all__ = [
    "VOTE_PREFIX",
    "AutorecoveryZnodeError",
    "UnderreplicationPaths",
    "decode_lock",
    "decode_underreplicated",
    "decode_vote",
    "encode_lock",
    "encode_underreplicated",
    "encode_vote",
]

VOTE_PREFIX = "V_"  # ZkLedgerAuditorManager.VOTE_PREFIX
_MARK = re.compile(r"urL(\d+)")
_M = TypeVar("_M", bound=Message)


class AutorecoveryZnodeError(ValueError):
    """A znode's name or data is not what BookKeeper writes; says which znode and why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path


class UnderreplicationPaths:
    """The znode paths of one cluster, under its ledgers root."""

    def __init__(self, root: str = DEFAULT_LEDGERS_ROOT) -> None:
        self.root = root
        self.available = f"{root}/available"
        self.base = f"{root}/underreplication"
        self.marks = f"{self.base}/ledgers"
        self.locks = f"{self.base}/locks"
        self.election = f"{self.base}/auditorelection"

    def bookie(self, bookie_id: str) -> str:
        return f"{self.available}/{bookie_id}"

    def mark(self, ledger_id: int) -> str:
        """The under-replication znode of a ledger (``getUrLedgerZnode``)."""
        groups = "/".join(f"{ledger_id >> shift & 0xFFFF:04x}" for shift in (48, 32, 16, 0))
        return f"{self.marks}/{groups}/urL{ledger_id:010d}"

    def lock(self, ledger_id: int) -> str:
        """The replication lock of a ledger (``getUrLedgerLockZnode``)."""
        return f"{self.locks}/urL{ledger_id:010d}"

    def vote(self, name: str) -> str:
        return f"{self.election}/{name}"

    @staticmethod
    def ledger_of(path: str) -> int:
        """The ledger id in a mark's or a lock's name (``urL(\\d+)$``)."""
        match = _MARK.fullmatch(path.rsplit("/", 1)[-1])
        if match is None:
            raise AutorecoveryZnodeError(path, "not an under-replication znode (urL followed by the ledger id)")
        return int(match.group(1))

    @staticmethod
    def vote_number(name: str) -> int:
        """The sequence number of a vote ``V_0000000003``, by which votes are ordered (``ElectionComparator``)."""
        number = name[len(VOTE_PREFIX) :]
        if not name.startswith(VOTE_PREFIX) or not number.isdigit():
            raise AutorecoveryZnodeError(name, f"not an auditor vote ({VOTE_PREFIX} followed by its sequence number)")
        return int(number)


def encode_underreplicated(replicas: list[str], ctime: int | None = None) -> bytes:
    message = DataFormats_pb2.UnderreplicatedLedgerFormat(replica=replicas)
    if ctime is not None:
        message.ctime = ctime
    return text_format.MessageToString(message).encode()


def decode_underreplicated(path: str, data: bytes) -> list[str]:
    """The lost bookies a mark names."""
    message = _parse(path, data, DataFormats_pb2.UnderreplicatedLedgerFormat())
    return list(message.replica)


def encode_lock(bookie_id: str) -> bytes:
    return text_format.MessageToString(DataFormats_pb2.LockDataFormat(bookieId=bookie_id)).encode()


def decode_lock(path: str, data: bytes) -> str:
    """The bookie of the worker holding a lock."""
    return str(_parse(path, data, DataFormats_pb2.LockDataFormat()).bookieId)


def encode_vote(bookie_id: str) -> bytes:
    return text_format.MessageToString(DataFormats_pb2.AuditorVoteFormat(bookieId=bookie_id)).encode()


def decode_vote(path: str, data: bytes) -> str:
    """The bookie a vote is for."""
    return str(_parse(path, data, DataFormats_pb2.AuditorVoteFormat()).bookieId)


def _parse(path: str, data: bytes, message: _M) -> _M:
    try:
        return text_format.Parse(data.decode(), message)
    except (UnicodeDecodeError, text_format.ParseError) as exc:
        name = message.DESCRIPTOR.name
        raise AutorecoveryZnodeError(path, f"its data is not a {name} in text format: {exc}") from None
