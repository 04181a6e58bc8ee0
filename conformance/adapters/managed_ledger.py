"""What a real Pulsar managed ledger's consumer saw, as a cursor-spec trace in client mode.

A broker harness (``java/LedgerspecHarness.java``, the ``ml-*`` and
``cursor-*`` commands) runs Pulsar's own ``ManagedLedgerFactoryImpl`` on a
watched BookKeeper client. :class:`CursorTraceMapper` turns what it reports
about one managed ledger and one durable cursor into events of the cursor
spec (``spec/cursor/cursor.py``) in the vocabulary of its trace mapping
(``spec/cursor/cursor_trace.py``), observed as in the ``client`` mode: publishes,
rollovers, acknowledgements, the broker's crash and the managed ledger's
reopening, the cursor's restore and close, all logged by the ``consumer``;
every step of the cursor's persistence stays hidden.

=================================================  ==========================================
observation                                        event
=================================================  ==========================================
the broker's client creates a data ledger of the    none for the first (the spec's initial
managed ledger                                      ledger), part of ``ManagedLedgerOpens``
                                                    when the managed ledger is opening again,
                                                    ``LedgerRollsOver`` otherwise, after the
                                                    publishes of older ledgers' entries that
                                                    follow it (the filling entry's callback may)
the broker's client creates a cursor ledger         none: ``CursorCreatesLedger`` is hidden
an entry is published                               ``EntryPublished``, observed ``published``:
                                                    every position published so far, renamed
the consumer acknowledges one message               ``ConsumerAcks(ledger, entry, 0)``, observed
                                                    ``acked`` and ``covered``
the consumer acknowledges up to a position          ``ConsumerAcks`` of each message up to it not
(``markDelete``)                                    yet acknowledged, in order
the cursor is reset to read from a position         ``CursorResetStarts(target)``, the position
(``resetCursor``, which returns once persisted)     before it, then ``CursorResetCompletes``,
                                                    observed ``acked`` and ``covered``
the cursor is closed                                ``CursorCloses``, observed ``active``
the broker closes a cursor ledger short of records  none: each is a failed append
it sent                                             (``CursorLedgerWriteFails``, hidden), counted in
                                                    ``MaxFaults``
the broker deletes the newest cursor ledger it      none: the znode write naming it failed
created, which holds its first record               (``CursorLedgerSwitchFails``, hidden), counted
                                                    in ``MaxFaults``
bookies killed, or restarted                        none: the calls they fail are the faults above
the broker is killed                                ``BrokerCrashes``, observed ``broker_up``
another broker takes the topic over while this      ``BrokerCrashes``: the spec has one broker,
one still runs                                      and the old one's cursor is never used
                                                    again; what the old broker does after it
                                                    (an add that fails, a rolled-over ledger
                                                    it deletes, its kill) is none, but an add
                                                    it has acknowledged is ``EntryPublished``
the managed ledger is opened again                  ``ManagedLedgerOpens``
the cursor is opened again                          ``CursorRecovers``, observed ``covered``
the restored cursor's reads, right after its open   none; they give that ``CursorRecovers``'s
(``readEntries`` until none is left)                ``covered``: every message published and
                                                    not dispatched
other reads, a rewind (``rewind``)                  none: the read position is no state of the
                                                    spec (an open or a rewind sets it after
                                                    the mark-delete)
=================================================  ==========================================

Ledger ids: the spec hands out ids from one counter, data and cursor
ledgers alike, starting at 0; BookKeeper's ids are the cluster's. The
mapping renames the managed ledger's ledgers in the order its broker
created them, which the harness sees (the ledgers' custom metadata names
the managed ledger, and the cursor for a cursor ledger). ``covered`` is the
set of published messages the cursor will not deliver again: those at or
before its mark-delete position, or individually deleted
(``ManagedCursor.isMessageDeleted``), as the harness reads them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledgerspec.spec.vocabulary import trace_line

__all__ = [
    "CLIENT_TRAFFIC",
    "CURSOR_KEY",
    "MANAGED_LEDGER_KEY",
    "CursorMappingError",
    "CursorTraceMapper",
    "malformed",
    "owner_add_failed",
    "superseded",
]

#: The custom metadata keys with which the broker names a ledger's managed ledger, and a cursor ledger's cursor.
MANAGED_LEDGER_KEY, CURSOR_KEY = "pulsar/managed-ledger", "pulsar/cursor"


def malformed(obs: Mapping[str, Any], exc: Exception) -> str:
    """What is wrong with an observation whose field is missing or of the wrong kind, and which one it is."""
    return (
        f"observation {obs.get('n')}: a {obs.get('ev')} observation with a field missing or of the wrong kind "
        f"({type(exc).__name__}: {exc})"
    )


#: The BookKeeper client's own traffic: what the mappings need of it is the ledgers created.
CLIENT_TRAFFIC = ("send", "reply", "after", "complete", "opened", "unwatched")


def superseded(obs: Mapping[str, Any], why: str) -> str:
    """What is wrong with an observation of a broker that lost the topic, which a mapping has no step for."""
    return (
        f"observation {obs.get('n')}: broker {obs.get('broker')}, which lost the topic to another, reported "
        f"{obs.get('ev')!r}: {why}"
    )


def owner_add_failed(obs: Mapping[str, Any]) -> str:
    """What is wrong with a failed add of the broker that owns the topic, which the mappings do not place."""
    return (
        f"observation {obs.get('n')}: the broker that owns the topic failed an add ({obs.get('error')}); the "
        "mapping places only the failed adds of a broker that lost the topic"
    )


class CursorMappingError(Exception):
    """An observation the mapping cannot place: names the observation and what is wrong with it."""


class CursorTraceMapper:
    """One managed ledger and one cursor: observations in, trace lines out (module docstring)."""

    def __init__(self, trace_id: str, managed_ledger: str, cursor: str) -> None:
        self.trace_id = trace_id
        self.managed_ledger = managed_ledger
        self.cursor = cursor
        self.lines: list[dict[str, Any]] = []
        self.ids: dict[int, int] = {}  # BookKeeper ledger id -> the spec's
        self.published: list[tuple[int, int]] = []  # spec positions, in publish order
        self.acked: set[tuple[int, int, int]] = set()
        self.crashes = 0
        self.resets = 0
        self._opened = False  # the managed ledger has been opened once: later opens are reopenings
        self._cursor_opened = False
        self._reopening = False
        # A data ledger's creation, as LedgerRollsOver: it waits for the publishes of entries of older ledgers
        # (the entry that filled a ledger may be acknowledged to the producer after its successor was created)
        self._rollover: tuple[Mapping[str, Any], int] | None = None
        self._cursor_ledgers: set[int] = set()  # the BookKeeper ids of the cursor's ledgers
        self._appends_sent: dict[int, set[int]] = {}  # cursor ledger -> entries this broker sent to its bookies
        self.failed_appends = 0  # records of a cursor ledger that its broker closed it without: each one fault
        self.failed_switches = 0  # cursor ledgers deleted as soon as written: each one fault
        self._newest_ledger = -1  # the BookKeeper id of the ledger of the managed ledger created last
        self._closed_short: set[int] = set()  # cursor ledgers closed short of records sent
        self._superseded: set[int] = set()  # the brokers that lost the topic to another (observations' ``broker``)
        self._restored: dict[str, Any] | None = None  # the CursorRecovers line, while it is the last one

    def constants(
        self, max_entries_per_ledger: int, metadata_max_entries_per_ledger: int, *, rollover_by_time: bool = False
    ) -> dict[str, int | bool]:
        """The cursor spec's constants for the run: its sizes, and ``RolloverByTime`` where the managed ledger's
        ``maximumRolloverTimeMs`` was set low enough for a scenario to reach it."""
        return {
            "MaxEntries": max(len(self.published), 1),
            "MaxEntriesPerLedger": max_entries_per_ledger,
            "RolloverByTime": rollover_by_time,
            "BatchSize": 1,
            "MetadataMaxEntriesPerLedger": metadata_max_entries_per_ledger,
            "MaxCrashes": self.crashes,
            "MaxFaults": self.failed_appends + self.failed_switches,
            "MaxLedgerLoss": 0,
            "MaxResets": self.resets,
        }

    def feed_all(self, observations: Iterable[Mapping[str, Any]]) -> None:
        for obs in observations:
            self.feed(obs)
        self._roll_over()

    def _roll_over(self) -> None:
        """Emit the pending LedgerRollsOver, if any."""
        if self._rollover is not None:
            obs, self._rollover = self._rollover[0], None
            self._emit(obs, "LedgerRollsOver")

    def feed(self, obs: Mapping[str, Any]) -> None:
        try:
            self._feed(obs)
        except (KeyError, ValueError, TypeError) as exc:
            raise CursorMappingError(malformed(obs, exc)) from None

    def _feed(self, obs: Mapping[str, Any]) -> None:
        kind = obs.get("ev")
        if obs.get("broker") in self._superseded and kind != "published":
            self._old_broker(obs)
            return
        if kind == "topic-moved":
            self._superseded.add(int(obs["from"]))
            self._roll_over()
            self._broker_killed(obs)
            return
        if kind == "metadata":
            self._ledger_created(obs)
            self._ledger_closed(obs)
            return
        if kind == "send" and obs.get("op") == "add" and int(obs["ledger"]) in self._cursor_ledgers:
            self._appends_sent.setdefault(int(obs["ledger"]), set()).add(int(obs["entry"]))
            return
        if kind in CLIENT_TRAFFIC:
            return  # the BookKeeper client's own traffic: what the mapping needs of it is the ledgers created
        if kind == "ledger-deleted":
            self._ledger_deleted(obs)
            return
        if kind in ("bookies-killed", "bookies-restarted", "cursor-znode-read-only", "cursor-znode-writable"):
            return  # bookies or the store refuse, then serve again: no step of the spec; what they failed is a fault
        if obs.get("name") not in (None, self.managed_ledger) or obs.get("cursor") not in (None, self.cursor):
            return
        handler = {
            "ml-opened": self._ml_opened,
            "published": self._published,
            "acked": self._acked,
            "mark-deleted": self._mark_deleted,
            "reset": self._reset,
            "cursor-opened": self._cursor_opened_event,
            "cursor-closed": self._cursor_closed,
            "ml-closed": lambda _: None,  # part of a clean stop; the broker's stop follows
            "broker-killed": self._broker_killed,
            "publish-failed": self._owner_add_failed,
            "delivered": self._delivered,
            "rewound": self._rewound,
        }.get(str(kind))
        if handler is None:
            raise CursorMappingError(f"observation {obs.get('n')}: unknown kind {kind!r}")
        if kind != "published":
            self._roll_over()
        handler(obs)

    def _emit(
        self,
        obs: Mapping[str, Any],
        action: str,
        params: dict[str, Any] | None = None,
        observed: dict[str, Any] | None = None,
    ) -> None:
        line = trace_line(self.trace_id, "consumer", len(self.lines) + 1, action, params, observed)
        line["x-obs"] = int(obs["n"])
        self.lines.append(line)
        self._restored = line if action == "CursorRecovers" else None

    def _position(self, obs: Mapping[str, Any], real: Any) -> tuple[int, int]:
        ledger, entry = int(real[0]), int(real[1])
        if ledger not in self.ids:
            raise CursorMappingError(f"observation {obs['n']}: ledger {ledger} was never created by the broker")
        return self.ids[ledger], entry

    # -- the observations ----------------------------------------------------------------
    def _ledger_created(self, obs: Mapping[str, Any]) -> None:
        if obs.get("op") != "create" or not obs.get("ok"):
            return
        custom = obs["written"].get("custom", {})
        if custom.get(MANAGED_LEDGER_KEY) != self.managed_ledger:
            return
        spec_id = len(self.ids)
        self.ids[int(obs["ledger"])] = spec_id
        self._newest_ledger = int(obs["ledger"])
        if CURSOR_KEY in custom:
            self._cursor_ledgers.add(int(obs["ledger"]))
        if CURSOR_KEY in custom or spec_id == 0 or self._reopening:
            return  # a cursor ledger (hidden), the initial ledger, or the reopening's new ledger
        self._roll_over()
        self._rollover = (obs, spec_id)

    def _ledger_closed(self, obs: Mapping[str, Any]) -> None:
        """A cursor ledger closed by the broker that wrote it, short of records it sent: each is an append that
        failed, one of the spec's faults (``CursorLedgerWriteFails``, hidden). The broker's BookKeeper client closes
        a ledger whose add failed for good (``LedgerHandle.handleUnrecoverableErrorDuringAdd``, 4.17.2), and the
        cursor sends its state to the znode (``persistPositionToLedger``'s failure, Pulsar 4.0.7). A ledger another
        broker recovers is not counted: the crash explains what its writer left unwritten."""
        ledger = int(obs["ledger"])
        if obs.get("op") != "write" or not obs.get("ok") or ledger not in self._appends_sent:
            return
        if obs["written"].get("state") == "CLOSED":
            last = int(obs["written"]["last_entry"])
            short = len({e for e in self._appends_sent.pop(ledger) if e > last})
            self.failed_appends += short
            if short:
                self._closed_short.add(ledger)

    def _ledger_deleted(self, obs: Mapping[str, Any]) -> None:
        """A cursor ledger deleted while it is the newest ledger of the managed ledger, and not closed short of
        its records: the metadata-store write that was to name it failed, and the broker deleted it
        (``switchToNewLedger``'s failure, Pulsar 4.0.7), one of the spec's faults (``CursorLedgerSwitchFails``,
        hidden). A ledger retired by a switch or a restore is older than the one that replaced it; one whose
        first record failed (``createNewMetadataLedger`` deletes it too) was counted as a failed append."""
        ledger = int(obs["ledger"])
        if obs["ok"] and ledger in self._cursor_ledgers and ledger == self._newest_ledger:
            self.failed_switches += ledger not in self._closed_short

    def _old_broker(self, obs: Mapping[str, Any]) -> None:
        """What a broker that lost the topic does: its BookKeeper client's traffic, the ledger its rollover creates
        and deletes when the ledger list is refused (no id of the spec's), a failed add, its kill. Its cursor and
        its consumer are gone to the spec; an acknowledged add is mapped as any other (``_feed``)."""
        kind = obs.get("ev")
        if kind in ("metadata", "ledger-deleted", "publish-failed", "broker-killed", *CLIENT_TRAFFIC):
            return
        raise CursorMappingError(
            superseded(obs, "the cursor spec has one broker, and the old one's cursor is not used again")
        )

    def _owner_add_failed(self, obs: Mapping[str, Any]) -> None:
        raise CursorMappingError(owner_add_failed(obs))

    def _ml_opened(self, obs: Mapping[str, Any]) -> None:
        if self._opened:
            self._emit(obs, "ManagedLedgerOpens", observed={"broker_up": True})
        self._opened, self._reopening = True, False

    def _published(self, obs: Mapping[str, Any]) -> None:
        position = self._position(obs, obs["position"])
        if self._rollover is not None and position[0] >= self._rollover[1]:
            self._roll_over()
        self.published.append(position)
        # the message ids the producer was given: they tell how many cursor ledgers took an id before each ledger
        self._emit(obs, "EntryPublished", observed={"published": sorted(list(p) for p in self.published)})

    def _covered(self, obs: Mapping[str, Any]) -> list[list[int]]:
        return sorted([*self._position(obs, p), 0] for p in obs["covered"])

    def _ack(self, obs: Mapping[str, Any], position: tuple[int, int], observe: bool) -> None:
        self.acked.add((*position, 0))
        observed: dict[str, Any] = {"acked": sorted(list(m) for m in self.acked)}
        if observe:
            observed["covered"] = self._covered(obs)
        self._emit(obs, "ConsumerAcks", {"ledger": position[0], "entry": position[1], "index": 0}, observed)

    def _acked(self, obs: Mapping[str, Any]) -> None:
        self._ack(obs, self._position(obs, obs["position"]), observe=True)

    def _mark_deleted(self, obs: Mapping[str, Any]) -> None:
        """A cumulative ack: the individual acks of every message up to it that was not acknowledged yet."""
        upto = self._position(obs, obs["position"])
        new = [p for p in self.published if p <= upto and (*p, 0) not in self.acked]
        for i, p in enumerate(new):
            self._ack(obs, p, observe=i == len(new) - 1)

    def _reset(self, obs: Mapping[str, Any]) -> None:
        """The target is the position before the read position (getPreviousPosition): the message published
        before it, or the first position when it is the first message of the managed ledger."""
        read = self._position(obs, obs["position"])
        if read not in self.published:
            raise CursorMappingError(f"observation {obs['n']}: the cursor was reset to {read}, not a published entry")
        index = self.published.index(read)
        target = self.published[index - 1] if index > 0 else (self.published[0][0], -1)
        self.resets += 1
        self._emit(obs, "CursorResetStarts", {"target": list(target)})
        self.acked = {(*p, 0) for p in self.published[:index]}
        observed = {"acked": sorted(list(m) for m in self.acked), "covered": self._covered(obs)}
        self._emit(obs, "CursorResetCompletes", observed=observed)

    def _cursor_opened_event(self, obs: Mapping[str, Any]) -> None:
        if self._cursor_opened:
            self._emit(obs, "CursorRecovers", observed={"covered": self._covered(obs), "active": True})
        self._cursor_opened = True

    def _rewound(self, obs: Mapping[str, Any]) -> None:
        """No step: the read position is no state of the spec (an open or a rewind sets it after the mark-delete)."""

    def _delivered(self, obs: Mapping[str, Any]) -> None:
        """What the restored cursor dispatched, read to the end right after its open: the messages it will not
        deliver again are the others, whatever ``isMessageDeleted`` says (``covered`` of that ``CursorRecovers``).
        Reads at any other time tell nothing the spec has."""
        if self._restored is None:
            return
        delivered = {self._position(obs, p) for p in obs["positions"]}
        covered = sorted([*p, 0] for p in self.published if p not in delivered)
        self._restored["observed"]["covered"] = covered
        self._restored["x-delivered"] = int(obs["n"])
        self._restored = None

    def _cursor_closed(self, obs: Mapping[str, Any]) -> None:
        self._emit(obs, "CursorCloses", observed={"active": False})

    def _broker_killed(self, obs: Mapping[str, Any]) -> None:
        self.crashes += 1
        self._appends_sent.clear()  # what the killed broker sent: a recovery by the next one closes its ledger
        self._reopening = True
        self._emit(obs, "BrokerCrashes", observed={"broker_up": False})
