"""Requests from ledger clients to bookies, and the replies, as values.

Six kinds of request, as BookKeeper's client sends them (``PerChannelBookieClient``):

==================  ======================================  =============================
kind                BookKeeper                              spec message (``ledger.py``)
==================  ======================================  =============================
``ADD``             addEntry (``FLAG_RECOVERY_ADD`` for a   ``AddReq``
                    recovery add)
``FENCE``           readEntry(-1, ``FLAG_DO_FENCING``):     ``FenceReq``
                    the fencing read of the LAC
``RECOVERY_READ``   readEntry(e, ``FLAG_DO_FENCING``)       ``ReadReq``
``WRITE_LAC``       writeLac: the explicit LAC              ``LacReq``
``READ_LAC``        readLac / readEntry(-1) of a reader     none: plain reads are not steps
``READ_ENTRY``      readEntry(e) of a reader                none
==================  ======================================  =============================

A request names the client and the operation in that client that sent it
(``client``, ``op``), so that the reply finds its way back; a reply is the
request with an answer. Bookies are named by their ids as the ledger
metadata stores them.
"""

from __future__ import annotations

import enum

import attrs

__all__ = ["SPEC_KINDS", "Reply", "ReplyCode", "Request", "RequestKind", "SpecKey"]


class RequestKind(enum.Enum):
    ADD = "add"
    FENCE = "fence"
    RECOVERY_READ = "recovery-read"
    WRITE_LAC = "write-lac"
    READ_LAC = "read-lac"
    READ_ENTRY = "read-entry"


# The kinds the ledger spec has messages for, with the spec's names.
SPEC_KINDS = {
    RequestKind.ADD: "AddReq",
    RequestKind.FENCE: "FenceReq",
    RequestKind.RECOVERY_READ: "ReadReq",
    RequestKind.WRITE_LAC: "LacReq",
}

# (kind, client, bookie, entry): requests the spec cannot tell apart when it asks
# whether a client still waits for a reply (its ``timed_out``).
SpecKey = tuple[RequestKind, int, str, int]


@attrs.frozen(cache_hash=True)
class Request:
    """One request to one bookie."""

    kind: RequestKind
    client: int  # the client that sent it (the spec's client id: 0 the writer, 1.. recovering clients)
    op: int  # the operation inside that client that waits for the reply
    bookie: str  # the bookie it goes to (a bookie id of the ledger metadata)
    ledger_id: int
    entry_id: int = -1  # ADD, RECOVERY_READ, READ_ENTRY: the entry
    lac: int = -1  # ADD: the LAC piggybacked on the entry; WRITE_LAC: the explicit LAC
    recovery: bool = False  # ADD: a recovery add, accepted by a fenced bookie
    fence: bool = False  # FENCE, RECOVERY_READ: fence the ledger before answering
    data: bytes = attrs.field(default=b"", eq=False, repr=False)  # ADD: the entry; WRITE_LAC: the LAC buffer
    master_key: bytes = attrs.field(default=b"", eq=False, repr=False)  # ADD, FENCE, WRITE_LAC: the ledger's key

    @property
    def spec_key(self) -> SpecKey:
        return (self.kind, self.client, self.bookie, self.entry_id)

    @property
    def in_spec(self) -> bool:
        """Does the ledger spec have a message for this request?"""
        return self.kind in SPEC_KINDS

    def __repr__(self) -> str:
        parts = [self.kind.value, f"c{self.client}", self.bookie]
        if self.kind in (RequestKind.ADD, RequestKind.RECOVERY_READ, RequestKind.READ_ENTRY):
            parts.append(f"e{self.entry_id}")
        if self.kind in (RequestKind.ADD, RequestKind.WRITE_LAC):
            parts.append(f"lac={self.lac}")
        parts += [flag for flag in ("recovery", "fence") if getattr(self, flag)]
        return f"<{' '.join(parts)}>"


class ReplyCode(enum.Enum):
    OK = "ok"  # added / fenced / found / LAC read
    FENCED = "fenced"  # EFENCED: a normal add to a fenced ledger
    NO_SUCH_ENTRY = "no-such-entry"  # ENOENTRY
    NO_SUCH_LEDGER = "no-such-ledger"  # ENOLEDGER
    REFUSED = "refused"  # a malformed entry, a digest mismatch (EBADREQ)
    UNAUTHORIZED = "unauthorized"  # another master key than the ledger's (EUA)


@attrs.frozen
class Reply:
    """The bookie's answer to ``request``."""

    request: Request
    code: ReplyCode
    lac: int = -1  # FENCE, READ_LAC: the LAC the bookie knows
    data: bytes = attrs.field(default=b"", repr=False)  # RECOVERY_READ, READ_ENTRY: the entry as stored

    @property
    def ok(self) -> bool:
        return self.code is ReplyCode.OK
