"""The engine's log, in the ledger spec's words: one event per step, named by the spec action it takes.

Each part of the engine reports its own steps as it takes them: the writer
handle (``WriterAddsEntry``, ``WriterChangesEnsemble``, ``WriterClosesLedger``,
``WriterSendsExplicitLac``),
a recovery (``RecovererStartsRecovery``, ``RecovererClosesLedger``,
``RecovererResends*``), a bookie of the in-process cluster serving a request
(``BookieReceivesAdd``, ``BookieReceivesFenceRead``,
``BookieReceivesRecoveryRead``, with ``replied``; ``BookieReceivesWriteLac``,
whose reply no client awaits), crashing or restarting
(``BookieCrashes``, ``BookieRestarts``), and the network losing a request
(``NetworkLosesMessage``). The ledger's creation is ``Init``.

The engine speaks of bookies by their ids and of requests as
:class:`~.protocol.Request` values; :class:`EventLog` turns them into the
spec's values (bookie numbers, :class:`~ledgerspec.spec.ledger.ledger.Msg`
records) with the cluster's numbering, and of an entry's bytes by the spec's
data (``payload(e)`` for the bytes the writer's application added as entry
``e``, -1 for bytes it never added), so that the translation lives here
only; an event is the trace vocabulary's
:class:`~ledgerspec.spec.vocabulary.EngineEvent`. Steps the spec leaves out are not events: a
timeout that changes nothing, and serving a request to no effect
(the spec never serves a request whose serving changes nothing, and never
spends a loss on a reply nobody awaits).

Who logs an event: ``process`` is the process that took the step (the
``full`` observation mode of ``spec/ledger/ledger_trace.py``), ``observer`` the
client that saw it, or ``None`` when no client sees it (a bookie's step
whose reply was lost, a crash, a restart, a lost request): the ``client``
mode.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ledgerspec.reference.bookie.entry import DigestType, EntryFormatError, decode_entry
from ledgerspec.reference.ledger.protocol import SPEC_KINDS, Request, RequestKind
from ledgerspec.spec.ledger.ledger import WRITER, Msg, payload
from ledgerspec.spec.vocabulary import EngineEvent

__all__ = ["EventLog", "client_process", "entry_payload", "spec_data", "to_msg"]


def client_process(client: int) -> str:
    return "writer" if client == WRITER else f"recoverer-{client}"


def entry_payload(data: bytes) -> bytes | None:
    """The payload of an entry as a client sends it and a bookie stores it; None if no digest matches."""
    for digest_type in DigestType:
        try:
            return decode_entry(data, digest_type).payload
        except EntryFormatError:
            continue
    return None


def spec_data(entry_bytes: bytes | None, added: Mapping[bytes, int]) -> int:
    """The spec's data of a payload: that of the entry the writer's application added it as; -1 if none."""
    return payload(added[entry_bytes]) if entry_bytes is not None and entry_bytes in added else -1


def to_msg(request: Request, number: Callable[[str], int], added: Mapping[bytes, int]) -> Msg:
    """The spec's record of a request the spec has a message for; ``added`` maps each payload the writer's
    application added to its entry id."""
    data = spec_data(entry_payload(request.data), added) if request.kind is RequestKind.ADD else -1
    return Msg(
        SPEC_KINDS[request.kind],
        request.client,
        number(request.bookie),
        request.entry_id,
        request.lac,
        request.recovery,
        request.fence,
        data,
    )


class EventLog:
    """Collects the engine's events, translating engine values to spec values."""

    def __init__(self, number: Callable[[str], int]) -> None:
        self.number = number  # bookie id -> the spec's bookie number
        self.added: dict[bytes, int] = {}  # payload -> the entry the writer's application added it as
        self.events: list[EngineEvent] = []
        self.listeners: list[Callable[[EngineEvent], None]] = []

    def _emit(
        self, action: str, args: tuple[Any, ...], process: str, observer: str | None, at: float | None = None
    ) -> None:
        """Log a step; ``at`` when it was taken (``time.monotonic()``), now if not given: before a client's step
        sends its requests, or as a client takes a reply, before it acts on it."""
        event = EngineEvent(action, args, process, observer, time.monotonic() if at is None else at)
        self.events.append(event)
        for listener in self.listeners:
            listener(event)

    def init(self) -> None:
        self._emit("Init", (), "writer", "writer")

    def writer_added(self, entry_id: int, payload: bytes, lac: int) -> None:
        """WriterAddsEntry(lac), with the bytes added: their data is ``payload(entry_id)`` from now on."""
        self.added.setdefault(bytes(payload), entry_id)
        self._emit("WriterAddsEntry", (lac,), "writer", "writer")

    def writer_sent_explicit_lac(self, at: int) -> None:
        """WriterSendsExplicitLac(at): the explicit LAC, sent for the writer's LAC ``at``."""
        self._emit("WriterSendsExplicitLac", (at,), "writer", "writer")

    def writer(self, action: str, *bookies: str, at: float | None = None) -> None:
        """WriterClosesLedger (no parameters), WriterChangesEnsemble(b, nb); ``at`` when it was taken."""
        self._emit(action, tuple(self.number(b) for b in bookies), "writer", "writer", at)

    def recoverer(
        self,
        action: str,
        client: int,
        *,
        entry: int | None = None,
        bookie: str | None = None,
        replacement: str | None = None,
        at: float | None = None,
    ) -> None:
        """RecovererStartsRecovery(c), RecovererClosesLedger(c), RecovererGivesUp(c), RecovererResends*(c, [e,] b),
        RecovererChangesEnsemble(c, b, nb); ``at`` when it was taken."""
        args: tuple[int, ...] = (client,)
        if entry is not None:
            args += (entry,)
        if bookie is not None:
            args += (self.number(bookie),)
        if replacement is not None:
            args += (self.number(replacement),)
        process = client_process(client)
        self._emit(action, args, process, process, at)

    def reader(self, action: str, reader: int, *args: int | str) -> None:
        """ReaderReadsLac(r, lac), ReaderReadsEntry(r, e, b): a plain reader's steps (a bookie id is numbered)."""
        values = tuple(self.number(a) if isinstance(a, str) else a for a in args)
        process = f"reader-{reader}"
        self._emit(action, (reader, *values), process, process)

    def bookie_served(self, action: str, request: Request, replied: bool, at: float | None = None) -> None:
        """BookieReceivesAdd/FenceRead/RecoveryRead(m, replied): the reply reaches its client (``at``: when it took
        it), or is lost."""
        m = to_msg(request, self.number, self.added)
        observer = client_process(request.client) if replied else None
        self._emit(action, (m, replied), f"bookie-{m.bookie}", observer, at)

    def bookie_took_lac(self, request: Request) -> None:
        """BookieReceivesWriteLac(m): the bookie keeps the explicit LAC; no client awaits the reply."""
        m = to_msg(request, self.number, self.added)
        self._emit("BookieReceivesWriteLac", (m,), f"bookie-{m.bookie}", None)

    def bookie(self, action: str, bookie: str) -> None:
        """BookieCrashes(b), BookieRestarts(b)."""
        b = self.number(bookie)
        self._emit(action, (b,), f"bookie-{b}", None)

    def lost(self, request: Request) -> None:
        """NetworkLosesMessage(m)."""
        self._emit("NetworkLosesMessage", (to_msg(request, self.number, self.added),), "network", None)
