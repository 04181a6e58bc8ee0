"""Reading a ledger, without I/O: ``readLastAddConfirmed`` and reads of entries up to it.

A reader opened without recovery may read entries up to the LAC it learns,
or up to ``lastEntryId`` once the ledger is CLOSED: every such entry has
reached ``Qa`` bookies, and recovery keeps it.

- :class:`LacRead`: the LAC from every bookie of the last segment (the
  highest LAC each knows, piggybacked or explicit); complete once the
  replies cover every write set (``Qw - Qa + 1`` each, as a fencing read) or
  every bookie answered; the result is the highest LAC replied.
- :class:`EntryRead`: each entry from the bookies of its write set in turn
  (a bookie without it, or with a bad digest, passes the read to the next
  one); the payload is returned once the digest and the ids match.
"""

from __future__ import annotations

from ledgerspec.reference.bookie.entry import DigestType, EntryFormatError, decode_entry
from ledgerspec.reference.ledger.errors import ReadFailedError
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.ledger.schedule import RoundRobinSchedule
from ledgerspec.reference.metadata import LedgerMetadata

__all__ = ["EntryRead", "LacRead"]


def _schedule(md: LedgerMetadata) -> RoundRobinSchedule:
    return RoundRobinSchedule(md.ensemble_size, md.write_quorum_size, md.ack_quorum_size)


class LacRead:
    """``readLastAddConfirmed`` on one ledger."""

    def __init__(self, client: int, op: int, metadata: LedgerMetadata) -> None:
        self.client = client
        self.op = op
        self.metadata = metadata
        self.replies: dict[str, int] = {}  # bookie -> LAC it answered (-1: it has nothing of the ledger)

    def requests(self) -> list[Request]:
        return [self._request(b) for b in self.metadata.last_ensemble]

    def _request(self, bookie: str) -> Request:
        return Request(RequestKind.READ_LAC, self.client, self.op, bookie, self.metadata.ledger_id)

    @property
    def done(self) -> bool:
        ensemble = self.metadata.last_ensemble
        return len(self.replies) == len(ensemble) or _schedule(self.metadata).covers(ensemble, self.replies)

    @property
    def lac(self) -> int:
        return max(self.replies.values(), default=-1)

    def on_reply(self, reply: Reply) -> None:
        if reply.code is ReplyCode.OK:
            self.replies[reply.request.bookie] = reply.lac
        elif reply.code in (ReplyCode.NO_SUCH_LEDGER, ReplyCode.NO_SUCH_ENTRY):
            self.replies[reply.request.bookie] = -1

    def awaited(self) -> list[Request]:
        if self.done:
            return []
        return [self._request(b) for b in self.metadata.last_ensemble if b not in self.replies]


class EntryRead:
    """A read of entries ``first .. last`` (all of them at most the LAC the reader knows)."""

    def __init__(
        self, client: int, op: int, metadata: LedgerMetadata, digest_type: DigestType, first: int, last: int
    ) -> None:
        self.client = client
        self.op = op
        self.metadata = metadata
        self.digest_type = digest_type
        self.first, self.last = first, last
        self.payloads: dict[int, bytes] = {}  # entry -> payload, digest checked
        self.failures: dict[int, list[str]] = {}  # entry -> why each bookie tried could not give it
        self._tried: dict[int, int] = {}  # entry -> bookies of its write set tried so far

    def write_set(self, entry_id: int) -> tuple[str, ...]:
        md = self.metadata
        return _schedule(md).write_set(md.ensemble_for(entry_id), entry_id)

    def requests(self) -> list[Request]:
        found = []
        for e in range(self.first, self.last + 1):
            self._tried[e] = 1
            found.append(self._request(e, self.write_set(e)[0]))
        return found

    def _request(self, entry_id: int, bookie: str) -> Request:
        return Request(RequestKind.READ_ENTRY, self.client, self.op, bookie, self.metadata.ledger_id, entry_id)

    @property
    def done(self) -> bool:
        return all(e in self.payloads or e in self._given_up for e in range(self.first, self.last + 1))

    @property
    def _given_up(self) -> set[int]:
        return {e for e, tried in self._tried.items() if tried > len(self.write_set(e))}

    def on_reply(self, reply: Reply) -> list[Request]:
        """Take a reply; the read of the same entry from the next bookie, if this one could not give it."""
        e = reply.request.entry_id
        if e in self.payloads or e in self._given_up:
            return []
        problem = self._problem(reply)
        if problem is None:
            self.payloads[e] = decode_entry(reply.data, self.digest_type).payload
            return []
        self.failures.setdefault(e, []).append(f"{reply.request.bookie}: {problem}")
        return self._next_bookie(e)

    def _problem(self, reply: Reply) -> str | None:
        if reply.code is not ReplyCode.OK:
            return str(reply.code.value)
        try:
            entry = decode_entry(reply.data, self.digest_type)
        except EntryFormatError as exc:
            return str(exc)
        asked = (self.metadata.ledger_id, reply.request.entry_id)
        if (entry.ledger_id, entry.entry_id) != asked:
            return f"returned ledger {entry.ledger_id} entry {entry.entry_id} for ledger {asked[0]} entry {asked[1]}"
        return None

    def _next_bookie(self, entry_id: int) -> list[Request]:
        tried = self._tried[entry_id] = self._tried[entry_id] + 1
        write_set = self.write_set(entry_id)
        return [self._request(entry_id, write_set[tried - 1])] if tried <= len(write_set) else []

    def on_timeout(self, request: Request) -> list[Request]:
        """No reply can come from this bookie: try the next one."""
        e = request.entry_id
        if e in self.payloads or e in self._given_up:
            return []
        self.failures.setdefault(e, []).append(f"{request.bookie}: no reply")
        return self._next_bookie(e)

    def awaited(self) -> list[Request]:
        return [
            self._request(e, self.write_set(e)[self._tried[e] - 1])
            for e in range(self.first, self.last + 1)
            if e not in self.payloads and e not in self._given_up
        ]

    def result(self) -> list[bytes]:
        """The payloads in entry order; :class:`ReadFailedError` naming each entry no bookie could give."""
        missing = [e for e in range(self.first, self.last + 1) if e not in self.payloads]
        if missing:
            details = "; ".join(f"entry {e}: {', '.join(self.failures.get(e, ['no reply']))}" for e in missing)
            raise ReadFailedError(f"ledger {self.metadata.ledger_id}: could not read {details}")
        return [self.payloads[e] for e in range(self.first, self.last + 1)]
