"""What the Pulsar Java client saw of a real broker's topic, as a managed-ledger-spec trace in client mode.

The observations of :mod:`~ledgerspec.conformance.adapters.broker_scenarios`
(the client's sends, answers and reads; the driver's kills and starts of the
broker) mapped onto the managed-ledger spec (``spec/managed_ledger``) in the
vocabulary of its ``client`` mode, with ``Dedup`` as the broker ran: one
producer (sequence ids 0, 1, ...; no batching: a batch of one message an
entry) and one subscription that acknowledges nothing.

=================================================  ==========================================
observation                                        event
=================================================  ==========================================
``sent``: the client takes a message to send       ``ProducerSends(p=1)``, observed ``sent``
``receipt`` with a message id                      ``BookKeeperCompletesAdd``, observed
                                                   ``last_id`` and ``backlog``
``receipt`` with -1:-1, the broker's answer to a   none: ``BrokerReceives`` answers it, which
duplicate (``PersistentTopic.publishMessage``)     the client mode hides
``broker-killed``                                  ``BrokerCrashes``, without ``k``
``broker-started``, the first                      none: the spec's initial state
``broker-started`` after a kill                    ``ManagedLedgerOpens``, observed ``backlog``;
                                                   then ``ProducerResends(p=1)`` if a message
                                                   sent was not answered: the client sends it
                                                   again as it reconnects
                                                   (``ProducerImpl.resendMessages``)
``read``: a message the final reader got           none: what each ledger holds
=================================================  ==========================================

Ledgers: the spec numbers the topic's ledgers 1, 2, ... in the order the
broker created them: the first at the topic's creation, one more at each
reopen (no scenario fills a ledger). A client learns a ledger's BookKeeper
id from the message ids it is given, and what a ledger holds from the final
reads: the reopen's ``backlog`` holds every message the reader found in the
ledger the crash left, those written whose answers were lost included. A
message id in a ledger the mapping cannot place is an error
(:class:`BrokerMappingError`), as is an answer that disagrees with what the
reader found there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ledgerspec.conformance.adapters.managed_ledger import malformed
from ledgerspec.conformance.adapters.managed_ledger_topic import TopicTraceMapper

__all__ = ["BrokerMappingError", "BrokerTopicTraceMapper"]

_PRODUCER = 1
_DUPLICATE = (-1, -1)  # the message id of the broker's answer to a duplicate


class BrokerMappingError(Exception):
    """An observation the mapping cannot place: says which, and why."""


class BrokerTopicTraceMapper(TopicTraceMapper):
    """One topic, one producer, one subscription, on a real broker: observations in, trace lines out."""

    def __init__(self, trace_id: str, subscription: str, max_entries_per_ledger: int, *, dedup: bool) -> None:
        super().__init__(trace_id, trace_id, subscription, max_entries_per_ledger, dedup=dedup)
        self.entries[1] = []  # the ledger the topic's creation made (the spec's initial state)
        self.current = 1
        self.answered = -1  # the highest sequence id answered
        self._read_back: dict[int, list[tuple[int, str, int]]] = {}  # BookKeeper ledger -> (entry, producer, seq) read

    def feed_all(self, observations: Iterable[Mapping[str, Any]]) -> None:
        log = list(observations)
        try:
            for obs in log:
                if obs.get("ev") == "read":
                    ledger, entry = (int(x) for x in obs["id"])
                    self._read_back.setdefault(ledger, []).append((entry, str(obs["producer"]), int(obs["seq"])))
            for obs in log:
                self._feed_broker(obs)
        except (KeyError, ValueError, TypeError) as exc:
            raise BrokerMappingError(malformed(obs, exc)) from None

    def _feed_broker(self, obs: Mapping[str, Any]) -> None:
        kind = obs.get("ev")
        if kind == "sent":
            self._sent(obs)
        elif kind == "receipt":
            self._receipt(obs)
        elif kind == "broker-killed":
            self._broker_stops(obs)
        elif kind == "broker-started":
            if int(obs["broker"]) > 1:
                self._reopened(obs)
        elif kind == "send-failed":
            raise BrokerMappingError(
                f"observation {obs['n']}: the send of {obs['seq']} failed ({obs['error']}); the spec's producer "
                "sends until it is answered"
            )
        elif kind != "read":
            raise BrokerMappingError(f"observation {obs.get('n')}: unknown kind {kind!r}")

    def _sent(self, obs: Mapping[str, Any]) -> None:
        if int(obs["seq"]) != self.sent:
            raise BrokerMappingError(
                f"observation {obs['n']}: sequence id {obs['seq']} sent where the spec's producer sends {self.sent} "
                "(its ids are 0, 1, ... in order)"
            )
        self.sent += 1
        self._emit(obs, "ProducerSends", {"p": _PRODUCER})

    def _receipt(self, obs: Mapping[str, Any]) -> None:
        seq = int(obs["seq"])
        real = (int(obs["id"][0]), int(obs["id"][1]))
        self.answered = max(self.answered, seq)
        if real == _DUPLICATE:
            if not self.dedup:
                raise BrokerMappingError(
                    f"observation {obs['n']}: {seq} answered as a duplicate (-1:-1) by a broker with dedup off"
                )
            return  # BrokerReceives's answer to a duplicate: hidden
        ledger = self._place(obs, real[0])
        entry = real[1]
        if entry != len(self.entries[ledger]):
            raise BrokerMappingError(
                f"observation {obs['n']}: {seq} answered at {real[0]}:{entry}, but the producer had been answered "
                f"{len(self.entries[ledger])} entries of that ledger"
            )
        found = [(p, s) for e, p, s in self._read_back.get(real[0], []) if e == entry]
        if found and found[0][1] != seq:
            raise BrokerMappingError(
                f"observation {obs['n']}: {seq} answered at {real[0]}:{entry}, where the reader found {found[0][1]}"
            )
        self.entries[ledger].append((_PRODUCER, seq))
        self.last_id = self._spec.message_ids((ledger, entry))[-1]
        self._emit(obs, "BookKeeperCompletesAdd")

    def _place(self, obs: Mapping[str, Any], real_ledger: int) -> int:
        """The spec's number of a BookKeeper ledger: one known, or the current ledger's, learned now."""
        if real_ledger in self.ids:
            return self.ids[real_ledger]
        if self.current in self.ids.values():
            raise BrokerMappingError(
                f"observation {obs['n']}: ledger {real_ledger} is neither the current ledger nor one before it (a "
                "rollover, which no scenario makes)"
            )
        self.ids[real_ledger] = self.current
        return self.current

    def _reopened(self, obs: Mapping[str, Any]) -> None:
        """The next broker opens the topic: the ledger the crash left holds what the reader found in it."""
        real = next((r for r, spec in self.ids.items() if spec == self.current), None)
        if real is None and self._unplaced():
            raise BrokerMappingError(
                f"observation {obs['n']}: the crash left a ledger no answer named, and the reader found messages in "
                f"ledgers {self._unplaced()}: which of them it was cannot be told"
            )
        if real is not None:
            answered = self.entries[self.current]
            read = [(_PRODUCER, seq) for _, _, seq in sorted(self._read_back.get(real, []))]
            if read[: len(answered)] != answered:
                lost = sorted({seq for _, seq in answered} - {seq for _, seq in read})
                raise BrokerMappingError(
                    f"observation {obs['n']}: the reader found {[seq for _, seq in read]} in ledger {real}, where the "
                    f"producer was answered {[seq for _, seq in answered]}"
                    + (f": acknowledged messages {lost} lost" if lost else "")
                )
            self.entries[self.current] = read
        self.current = max(self.entries) + 1
        self.entries[self.current] = []
        self.broker_up = True
        self._emit(obs, "ManagedLedgerOpens")
        if self.answered + 1 < self.sent:
            self._emit(obs, "ProducerResends", {"p": _PRODUCER})

    def _unplaced(self) -> list[int]:
        return sorted(set(self._read_back) - set(self.ids))
