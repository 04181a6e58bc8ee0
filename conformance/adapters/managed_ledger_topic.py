"""What a real Pulsar managed ledger's clients saw, as a managed-ledger-spec trace in client mode.

The same observations as :mod:`~ledgerspec.conformance.adapters.managed_ledger`
(the broker harness, ``java/LedgerspecHarness.java``), mapped onto the
managed-ledger spec (``spec/managed_ledger/managed_ledger.py``) in the
vocabulary of its ``client`` mode (``spec/managed_ledger/managed_ledger_trace.py``):
one producer, the harness, whose every add is a batch of one message with
the next sequence id, deduplication off (the harness calls the managed
ledger, not a broker's topic), and one subscription.

=================================================  ==========================================
observation                                        event
=================================================  ==========================================
an entry is published (``addEntry`` completes)      ``ProducerSends(p=1)``, then
                                                    ``BookKeeperCompletesAdd``, observed
                                                    ``last_id`` and ``backlog``
the cursor's mark-delete position moves             ``ConsumerAcks(c=1)`` once per entry it
(an acknowledgement, individual or cumulative)      passes, in order, observed ``consumed``,
                                                    ``acknowledged`` and ``backlog``; an
                                                    acknowledgement that leaves it where it
                                                    was is no step here
the broker is killed, or closes the managed         ``BrokerCrashes``, without ``k``: a clean
ledger cleanly                                      close is, to this spec, a stop with
                                                    nothing in flight
another broker takes the topic over while this      ``TopicMovesToAnotherBroker``, without ``k``
one still runs
the broker that lost the topic fails an add, or     none: to the spec's producers that broker
is killed                                           is gone; the ledger its rollover creates
                                                    (and deletes, its ledger list refused) is
                                                    ``OldBrokerRollsOver``, hidden. An add it
                                                    acknowledges is mapped as any other
the managed ledger and the cursor are opened        ``ManagedLedgerOpens``, at the cursor's
again                                               open, observed ``consumed`` (where the
                                                    restored cursor resumes) and ``backlog``
rollovers, trims, the cursor's persists and         none: hidden, or not of this spec
ledgers
=================================================  ==========================================

Ledger ids: the spec numbers the topic's data ledgers 1, 2, ... in the
order the broker created them; cursor ledgers are the cursor spec's and not
counted. The ``backlog`` holds the published entries not yet consumed that a
reader can still get: none past the last entry with which a ledger's
metadata closes it (a recovery that closed a ledger before an entry its
producer was acknowledged took that entry from every reader). A reset of
the cursor (``resetCursor``) moves its read position, which this spec,
whose subscriptions are reduced to their mark-delete position, does not
model: a recording with one is checked against the cursor spec only
(:class:`TopicMappingError` says so).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledgerspec.conformance.adapters.managed_ledger import (
    CLIENT_TRAFFIC,
    CURSOR_KEY,
    MANAGED_LEDGER_KEY,
    malformed,
    owner_add_failed,
    superseded,
)
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger_trace import CLIENT
from ledgerspec.spec.positions import NO_POSITION, Position, next_position
from ledgerspec.spec.vocabulary import trace_line

__all__ = ["TopicMappingError", "TopicTraceMapper"]

# The observations of the BookKeeper client's traffic, the bookies and the metadata store, which no client of the
# topic sees.
_UNSEEN = frozenset(
    {
        *CLIENT_TRAFFIC,
        "ledger-deleted",
        "bookies-killed",
        "bookies-restarted",
        "cursor-znode-read-only",
        "cursor-znode-writable",
        # A consumer's reads and a rewind move the read position, which this spec reduces to the mark-delete
        # position; the cursor mapping takes what a restored cursor dispatches
        "delivered",
        "rewound",
    }
)

_PRODUCER, _CURSOR = 1, 1


class TopicMappingError(Exception):
    """An observation the mapping cannot place, or one the managed-ledger spec does not model: says which."""


class TopicTraceMapper:
    """One managed ledger and one subscription: observations in, trace lines out (module docstring)."""

    def __init__(
        self,
        trace_id: str,
        managed_ledger: str,
        cursor: str,
        max_entries_per_ledger: int,
        *,
        aging: bool = False,
        dedup: bool = False,
    ) -> None:
        self.trace_id = trace_id
        self.aging = aging  # maximumRolloverTimeMs set low enough for the run to reach it
        self.dedup = dedup  # brokerDeduplicationEnabled: a broker's topic (broker_topic.py); never the harness's
        self._spec = ManagedLedgerSpec(BatchSize=1)  # its message ids: one batch of one message an entry
        self.managed_ledger = managed_ledger
        self.cursor = cursor
        self.max_entries_per_ledger = max_entries_per_ledger
        self.lines: list[dict[str, Any]] = []
        self.ids: dict[int, int] = {}  # BookKeeper id of a data ledger -> the spec's number
        self.entries: dict[int, list[tuple[int, int]]] = {}  # spec ledger -> its entries (producer, sequence id)
        self.closed_at: dict[int, int] = {}  # spec ledger -> the last entry its metadata closed it with
        self.mark_delete: Position = (1, -1)
        self.acknowledged: Position = (1, -1)  # the furthest entry the subscription acknowledged
        self.broker_up = True
        self.crashes = 0
        self.takeovers = 0
        self._superseded: set[int] = set()  # the brokers that lost the topic to another (observations' ``broker``)
        self.last_id: tuple[int, int, int, int] = (-1, -1, -1, -1)
        self.sent = 0  # the producer's batches sent so far: each add the harness made
        self._opened = False
        self._emit(None, "Init")

    def constants(self) -> dict[str, Any]:
        return {
            "NumProducers": 1,
            "MaxMessages": max(self.sent, 1),
            "BatchSize": 1,
            "MaxEntriesPerLedger": self.max_entries_per_ledger,
            "NumCursors": 1,
            "MaxCrashes": self.crashes,
            "MaxTakeovers": self.takeovers,
            "Dedup": self.dedup,
            # A ledger may age past maximumRolloverTimeMs: one tick, hidden (ClockTicks), reaches the limit.
            **({"MaximumRolloverTime": 1, "Ticks": 1} if self.aging else {}),
        }

    def feed_all(self, observations: Iterable[Mapping[str, Any]]) -> None:
        for obs in observations:
            try:
                self._feed(obs)
            except (KeyError, ValueError, TypeError) as exc:
                raise TopicMappingError(malformed(obs, exc)) from None

    def _feed(self, obs: Mapping[str, Any]) -> None:
        kind = obs.get("ev")
        if obs.get("broker") in self._superseded and kind not in ("metadata", "published", *_UNSEEN):
            if kind in ("publish-failed", "broker-killed"):
                return  # the old broker's failed add and its end: no step of the spec (the module docstring)
            raise TopicMappingError(
                superseded(obs, "the spec's subscriptions are served by the broker that owns the topic")
            )
        if kind == "metadata":
            self._ledger_created(obs)
            self._ledger_closed(obs)
            return
        if kind in _UNSEEN:
            return  # the BookKeeper client's traffic, the bookies and the store: no client of the topic sees them
        if obs.get("name") not in (None, self.managed_ledger) or obs.get("cursor") not in (None, self.cursor):
            return
        if kind == "published":
            self._published(obs)
        elif kind in ("acked", "mark-deleted"):
            self._mark_delete_moves(obs, obs["mark_delete"])
        elif kind == "broker-killed" or kind == "ml-closed":
            self._broker_stops(obs)
        elif kind == "topic-moved":
            self._topic_moves(obs)
        elif kind == "publish-failed":
            raise TopicMappingError(owner_add_failed(obs))
        elif kind == "cursor-opened":
            self._cursor_opened(obs)
        elif kind == "reset":
            raise TopicMappingError(
                f"observation {obs.get('n')}: the cursor is reset; the managed-ledger spec reduces a subscription "
                "to its mark-delete position and has no read position to reset (the cursor spec checks it)"
            )
        elif kind not in ("ml-opened", "cursor-closed"):
            raise TopicMappingError(f"observation {obs.get('n')}: unknown kind {kind!r}")

    # -- what the clients see ----------------------------------------------------------------
    def _position(self, obs: Mapping[str, Any], real: Any) -> Position:
        ledger, entry = int(real[0]), int(real[1])
        if ledger not in self.ids:
            raise TopicMappingError(f"observation {obs['n']}: ledger {ledger} is no data ledger the broker created")
        return self.ids[ledger], entry

    def _written(self) -> list[Position]:
        return [(x, e) for x in sorted(self.entries) for e in range(len(self.entries[x]))]

    def _consumed(self) -> Position:
        return max((p for p in self._written() if p <= self.mark_delete), default=NO_POSITION)

    def _backlog(self) -> list[list[int]]:
        if not self.broker_up:
            return []
        after = self._consumed()
        return [
            [x, e, *self.entries[x][e]] for x, e in self._written() if after < (x, e) and e <= self.closed_at.get(x, e)
        ]

    def _emit(self, obs: Mapping[str, Any] | None, action: str, params: dict[str, Any] | None = None) -> None:
        observed = {
            "broker_up": self.broker_up,
            "sent": [self.sent],
            "last_id": list(self.last_id),
            "consumed": [list(self._consumed())],
            "acknowledged": [list(self.acknowledged)],
            "backlog": self._backlog(),
        }
        process = CLIENT.logged_by(action, tuple(params.values()) if params else ())
        line = trace_line(self.trace_id, process, len(self.lines) + 1, action, params, observed)
        if obs is not None:
            line["x-obs"] = int(obs["n"])
        self.lines.append(line)

    def _ledger_created(self, obs: Mapping[str, Any]) -> None:
        if obs.get("op") != "create" or not obs.get("ok"):
            return
        custom = obs["written"].get("custom", {})
        if custom.get(MANAGED_LEDGER_KEY) != self.managed_ledger or CURSOR_KEY in custom:
            return
        number = len(self.ids) + 1
        self.ids[int(obs["ledger"])] = number
        self.entries[number] = []

    def _ledger_closed(self, obs: Mapping[str, Any]) -> None:
        if obs.get("op") == "write" and obs.get("ok") and obs["written"].get("state") == "CLOSED":
            ledger = self.ids.get(int(obs["ledger"]))
            if ledger is not None:
                self.closed_at[ledger] = int(obs["written"]["last_entry"])

    def _published(self, obs: Mapping[str, Any]) -> None:
        ledger, entry = self._position(obs, obs["position"])
        if entry != len(self.entries[ledger]):
            raise TopicMappingError(
                f"observation {obs['n']}: entry {entry} of ledger {obs['position'][0]} published, but it held "
                f"{len(self.entries[ledger])} entries the harness saw acknowledged: an add it never saw answered "
                "reached the bookies"
            )
        seq, self.sent = self.sent, self.sent + 1
        self._emit(obs, "ProducerSends", {"p": _PRODUCER})
        self.entries[ledger].append((_PRODUCER, seq))
        self.last_id = self._spec.message_ids((ledger, entry))[-1]
        self._emit(obs, "BookKeeperCompletesAdd")

    def _mark_delete_moves(self, obs: Mapping[str, Any], real: Any) -> None:
        target = self._position(obs, real)
        while self.mark_delete < target:
            nxt = next_position(sorted(self.entries), lambda x: len(self.entries[x]), self.mark_delete)
            if nxt is None or nxt > target:
                self.mark_delete = target  # (l, -1), or past the last entry: the same place to a consumer
                return
            self.mark_delete = nxt
            self.acknowledged = max(self.acknowledged, nxt)
            self._emit(obs, "ConsumerAcks", {"c": _CURSOR})

    def _broker_stops(self, obs: Mapping[str, Any]) -> None:
        if not self.broker_up:
            return  # the clean close is followed by the broker's stop: one stop
        self.broker_up = False
        self.crashes += 1
        self._emit(obs, "BrokerCrashes")

    def _topic_moves(self, obs: Mapping[str, Any]) -> None:
        if not self.broker_up:
            raise TopicMappingError(f"observation {obs['n']}: the topic moves to another broker while none serves it")
        self._superseded.add(int(obs["from"]))
        self.broker_up = False
        self.takeovers += 1
        self._emit(obs, "TopicMovesToAnotherBroker")

    def _cursor_opened(self, obs: Mapping[str, Any]) -> None:
        if not self._opened:
            self._opened = True
            return
        self.broker_up = True
        self.mark_delete = self._position(obs, obs["mark_delete"])
        self._emit(obs, "ManagedLedgerOpens")
