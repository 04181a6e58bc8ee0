"""How traces of a Pulsar topic implementation map onto the managed-ledger spec (``managed_ledger.py``).

An event's type is a ``ManagedLedgerSpec`` action name; its params that
action's parameters: ``p`` a producer (1 ..), ``c`` a durable cursor
(subscription, 1 ..), ``k`` how many of the adds in flight reached the
bookies before the broker crashed. Its observed values are
``ManagedLedgerState`` variables. Ledgers are numbered 1, 2, ... in the
order the topic created them (an implementation renames BookKeeper's ids).

One observation mode:

``full``
    A harness that sees the producers, the broker's memory, the metadata
    store and the bookies (an abstraction function): every step is logged,
    by the producer that sends, sends again or loses its connection
    (``producer-<p>``), the consumer that acknowledges (``consumer-<c>``),
    ``bookkeeper`` for a completed add, the broker that lost the topic to
    another and still runs (``old-broker``), or the ``broker``; every variable is
    reported at every event, so that a step that should have changed one and
    did not is seen as well as one that changed it wrongly.

``client``
    What the topic's clients see: a producer's sends, resends and dropped
    connections (``producer-<p>``) and each acknowledgement it receives
    (``BookKeeperCompletesAdd``, logged by the ``producer``: the step does not
    name whose batch it completes), a consumer's acknowledgements
    (``consumer-<c>``), and the broker going away and the topic being served
    again (``BrokerCrashes``, ``TopicMovesToAnotherBroker``,
    ``ManagedLedgerOpens``, by the ``clients``), without how many adds in
    flight reached the bookies (``k``: every value is tried). The broker's
    receipt of a batch, rollovers, failed ledger creations, the clock, the old
    broker's rollover, the persist of a cursor's mark-delete, the skip and the
    trim of consumed ledgers are hidden. It observes how many batches each
    producer sent, the last message id a producer was given, the last message
    each subscription consumed (where a consumer resumes after a restore: an
    acknowledgement not persisted before a crash comes again), the furthest
    entry each subscription acknowledged (``acknowledged``, its consumer's own
    record), and ``backlog``: every message the slowest subscription has yet
    to consume, at its position. None of them
    changes in a hidden step (the premise of the trace format), so a
    producer's ``acked`` and ``reconnecting``, which the broker's answers to a
    duplicate or an ``Unknown`` send change in ``BrokerReceives``, are not
    observed: what was acknowledged shows in the message ids and the backlog.

A trace is one partition of one topic (no partition key).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from ledgerspec.spec.managed_ledger.managed_ledger import NO_LEDGER, ManagedLedgerSpec, ManagedLedgerState
from ledgerspec.spec.positions import NO_POSITION, Position, next_position
from ledgerspec.spec.tracing import Explanation, Guard, ObservationMode, ObservedPromise, Projection, TraceMapping

__all__ = ["CLIENT", "FULL", "GUARDS", "TRACE", "backlog", "consumed"]


# -- who logs a step ---------------------------------------------------------------------
_PRODUCERS = ("ProducerSends", "ProducerResends", "ConnectionDrops")


def _producer_or_consumer(action: str, args: tuple[Any, ...]) -> str | None:
    """The producer or consumer whose own step this is, or None."""
    if action in _PRODUCERS:
        return f"producer-{args[0]}"
    if action == "ConsumerAcks":
        return f"consumer-{args[0]}"
    return None


def _process(action: str, args: tuple[Any, ...]) -> str:
    others = {"BookKeeperCompletesAdd": "bookkeeper", "OldBrokerRollsOver": "old-broker"}
    return _producer_or_consumer(action, args) or others.get(action, "broker")


FULL = ObservationMode(
    "full",
    "every step, by the producer, the consumer, BookKeeper or the broker that takes it; every variable",
    frozenset(a.name for a in attrs.fields(ManagedLedgerState)),
    logged_by=_process,
)


# -- projections ------------------------------------------------------------------------
#: A message as a reader gets it: its position (ledger, entry) and its content (producer, sequence id).
ReadableMessage = tuple[int, int, int, int]


def consumed(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> tuple[Position, ...]:
    """Cursor c -> the position of the last message it consumed: the last entry at or before its mark-delete
    position, or ``(-1, -1)`` before the first. A consumer resumes after it. A mark-delete ``(l, -1)`` names the
    same place as the last entry before ``l``, and the broker moves it over an empty ledger it drops (the reopen,
    the old broker's rollover), which no consumer sees."""
    written = [(ledger, e) for ledger, es in enumerate(s.entries, 1) for e in range(len(es))]
    return tuple(max((pos for pos in written if pos <= md), default=NO_POSITION) for md in s.mark_delete)


def backlog(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> frozenset[ReadableMessage]:
    """The slowest subscription's backlog: every message after the last one it consumed, up to
    ``lastConfirmedEntry``, each at its position, as a consumer reads them (none while the broker is down).
    Trimming takes none of them, so no hidden step changes it; an acknowledgement, a completed add and the reopen
    do."""
    if not s.broker_up:
        return frozenset()
    slowest = min(consumed(spec, s))
    return frozenset(
        (ledger, e, p, seq)
        for ledger in s.ledgers
        for e, (p, seq) in enumerate(s.entries[ledger - 1])
        if slowest < (ledger, e) <= s.last_confirmed
    )


PROJECTIONS = (
    Projection(
        "consumed",
        consumed,
        tuple[Position, ...],
        "cursor c -> the position of the last message it consumed, (-1, -1) before the first",
    ),
    Projection(
        "backlog",
        backlog,
        frozenset[ReadableMessage],
        "the slowest subscription's backlog as a consumer reads it: (ledger, entry, producer, sequence id)",
    ),
)


# -- client: what the producers and consumers see ------------------------------------------
#: Steps inside the broker, BookKeeper and the metadata store that no client takes part in.
_INSIDE = (
    "BrokerReceives",
    "LedgerRollsOver",
    "LedgerCreationFails",
    "ClockTicks",
    "OldBrokerRollsOver",
    "CursorPersists",
    "CursorsSkipConsumedLedgers",
    "TrimConsumedLedgers",
)


def _client(action: str, args: tuple[Any, ...]) -> str:
    default = "producer" if action == "BookKeeperCompletesAdd" else "clients"  # whose batch: the step does not say
    return _producer_or_consumer(action, args) or default


CLIENT = ObservationMode(
    "client",
    "sends, acknowledgements received and given, the broker's crashes and takeovers and the topic's reopening",
    frozenset({"broker_up", "sent", "last_id", "consumed", "acknowledged", "backlog"}),
    hidden=dict.fromkeys(_INSIDE),
    logged_by=_client,
    unseen={"BrokerCrashes": frozenset({"k"}), "TopicMovesToAnotherBroker": frozenset({"k"})},
    # Between two client events the broker may receive batches, roll over, persist each cursor, skip, trim and
    # tick: six in a row leave some traces with a crash undecided.
    hidden_steps=10,
)


def _read_twice(spec: ManagedLedgerSpec, values: Any) -> str | None:
    """Dedup on, one (producer, sequence id) in the backlog at two positions: it is written twice."""
    if not spec.Dedup:
        return None
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    for ledger, e, p, seq in sorted(values["backlog"]):
        if (p, seq) in seen:
            first = seen[(p, seq)]
            return f"producer {p}'s batch {seq} is read at {first[0]}:{first[1]} and again at {ledger}:{e}"
        seen[(p, seq)] = (ledger, e)
    return None


def _last_acked_missing(spec: ManagedLedgerSpec, values: Any) -> str | None:
    """The last message a producer was acknowledged, after what some subscription acknowledged, is not in the
    slowest one's backlog while the broker serves the topic: its ledger left the list before every cursor consumed
    it. (A message after where a subscription resumes, but acknowledged by it before a crash, may be gone.)"""
    ledger, entry, _, _ = values["last_id"]
    if not values["broker_up"] or ledger < 0 or (ledger, entry) <= min(map(tuple, values["acknowledged"])):
        return None
    if any((x, e) == (ledger, entry) for x, e, _, _ in values["backlog"]):
        return None
    return (
        f"message {ledger}:{entry} was acknowledged to its producer and no subscription consumed it, but it is not "
        "in the backlog: it is lost"
    )


OBSERVED_PROMISES = (
    ObservedPromise("DedupPersistsNoDuplicate", ("backlog",), _read_twice),
    ObservedPromise(
        "NoAcknowledgedMessageLost", ("broker_up", "last_id", "acknowledged", "backlog"), _last_acked_missing
    ),
)


# -- explanations: which guard of a disabled action fails -------------------------------------
def _down(s: ManagedLedgerState) -> str | None:
    return None if s.broker_up else "the broker is down"


def _producer(spec: ManagedLedgerSpec, s: ManagedLedgerState, p: int) -> str | None:
    if p not in spec.producers:
        return f"there is no producer {p} (producers 1 .. {spec.NumProducers})"
    return _down(s)


def _awaiting(spec: ManagedLedgerSpec, s: ManagedLedgerState, p: int) -> str:
    if s.reconnecting[p - 1]:
        return f"producer {p}'s connection closed: it sends every batch not acknowledged again first"
    return (
        f"producer {p}'s batches {s.acked[p - 1] + 1} .. {s.sent[p - 1] - 1} were lost in a crash: it sends them "
        "again first"
    )


def _explain_sends(spec: ManagedLedgerSpec, s: ManagedLedgerState, p: int) -> str | None:
    if why := _producer(spec, s, p):
        return why
    if s.sent[p - 1] >= spec.MaxMessages:
        return f"producer {p} has sent its {spec.MaxMessages} batches (MaxMessages)"
    if spec.awaits_resend(s, p):
        return _awaiting(spec, s, p)
    return None


def _explain_resends(spec: ManagedLedgerSpec, s: ManagedLedgerState, p: int) -> str | None:
    if why := _producer(spec, s, p):
        return why
    if not spec.awaits_resend(s, p):
        return f"producer {p}'s connection is open and no batch of it was lost: it has nothing to send again"
    return None


def _explain_drops(spec: ManagedLedgerSpec, s: ManagedLedgerState, p: int) -> str | None:
    if why := _producer(spec, s, p):
        return why
    if s.disconnects >= spec.MaxDisconnects:
        return f"{s.disconnects} connections have dropped; MaxDisconnects is {spec.MaxDisconnects}"
    if s.reconnecting[p - 1]:
        return f"producer {p}'s connection is closed already"
    if s.acked[p - 1] + 1 >= s.sent[p - 1]:
        return f"every batch producer {p} sent is acknowledged"
    return None


def _explain_receives(spec: ManagedLedgerSpec, s: ManagedLedgerState, p: int) -> str | None:
    if why := _producer(spec, s, p):
        return why
    if not s.net[p - 1]:
        return f"no batch of producer {p} is in flight to the broker"
    return None


def _explain_completes(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    if why := _down(s):
        return why
    if not s.pending:
        return "no add is in flight to BookKeeper"
    return None


def _nothing_to_roll(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    """Why no ledger is to be closed or created, or None when one is."""
    if spec.to_close(s) or spec.creating(s):
        return None
    if s.current == NO_LEDGER:
        return "no ledger is open, and no add waits for one to be created"
    if s.pending:
        return f"{len(s.pending)} adds are in flight to ledger {s.current}: it closes once they complete"
    count = len(s.entries[s.current - 1])
    if count == 0:
        return f"ledger {s.current} holds no entry: it is not rolled over"
    return f"ledger {s.current} is not full ({count} entries, {s.age} ticks old) and its last add was not sent"


def _explain_rolls(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    return _down(s) or _nothing_to_roll(spec, s)


def _explain_creation_fails(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    if why := _down(s):
        return why
    if s.create_failures >= spec.MaxCreateFailures:
        return f"{s.create_failures} ledger creations have failed; MaxCreateFailures is {spec.MaxCreateFailures}"
    return _nothing_to_roll(spec, s)


def _explain_ticks(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    if why := _down(s):
        return why
    if s.current == NO_LEDGER:
        return "no ledger is open to grow older"
    if s.age >= spec.max_age:
        return f"ledger {s.current} is {s.age} ticks old: the model lets no ledger grow older (Ticks={spec.Ticks})"
    return None


def _explain_crashes(spec: ManagedLedgerSpec, s: ManagedLedgerState, k: int) -> str | None:
    if not s.broker_up:
        return "the broker is down already"
    if s.crashes >= spec.MaxCrashes:
        return f"{s.crashes} crashes have happened; MaxCrashes is {spec.MaxCrashes}"
    return None


def _explain_takeover(spec: ManagedLedgerSpec, s: ManagedLedgerState, k: int) -> str | None:
    if not s.broker_up:
        return "no broker serves the topic, so none can lose it"
    if s.takeovers >= spec.MaxTakeovers:
        return f"{s.takeovers} takeovers have happened; MaxTakeovers is {spec.MaxTakeovers}"
    if s.old_broker:
        return "a broker that lost the topic still runs, and the spec keeps one at a time"
    return None


def _explain_old_rollover(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    return None if s.old_broker else "no broker that lost the topic still runs"


def _explain_opens(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    return "the broker is up: the managed ledger is open" if s.broker_up else None


def _explain_acks(spec: ManagedLedgerSpec, s: ManagedLedgerState, c: int) -> str | None:
    if c not in spec.cursors:
        return f"there is no cursor {c} (cursors 1 .. {spec.NumCursors})"
    if why := _down(s):
        return why
    if next_position(s.ledgers, lambda x: len(s.entries[x - 1]), s.mark_delete[c - 1]) is None:
        ledger, entry = s.mark_delete[c - 1]
        return f"cursor {c} has consumed every entry of the ledger list (mark-delete {ledger}:{entry})"
    return None


def _explain_persists(spec: ManagedLedgerSpec, s: ManagedLedgerState, c: int) -> str | None:
    if c not in spec.cursors:
        return f"there is no cursor {c} (cursors 1 .. {spec.NumCursors})"
    if why := _down(s):
        return why
    if s.persistent_mark_delete[c - 1] == s.mark_delete[c - 1]:
        ledger, entry = s.mark_delete[c - 1]
        return f"cursor {c}'s mark-delete {ledger}:{entry} is persisted already: no acknowledgement waits"
    return None


def _explain_skips(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    if why := _down(s):
        return why
    if spec.CursorsSkipConsumedLedgers(s) is None:
        return (
            "no cursor's mark-delete is at the last entry of a ledger followed by another in the list, with the "
            "managed ledger holding it elsewhere"
        )
    return None


def _explain_trims(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> str | None:
    if why := _down(s):
        return why
    if spec.TrimConsumedLedgers(s) is None:
        held = ", ".join(f"{ledger}:{entry}" for ledger, entry in s.slowest_position) or "none"
        return (
            f"no ledger of the list other than the last lies before the slowest reader's ledger (the "
            f"managed ledger holds the cursors at {held})"
        )
    return None


EXPLAIN: dict[str, Explanation] = {
    "ProducerSends": _explain_sends,
    "ProducerResends": _explain_resends,
    "ConnectionDrops": _explain_drops,
    "BrokerReceives": _explain_receives,
    "BookKeeperCompletesAdd": _explain_completes,
    "LedgerRollsOver": _explain_rolls,
    "LedgerCreationFails": _explain_creation_fails,
    "ClockTicks": _explain_ticks,
    "BrokerCrashes": _explain_crashes,
    "TopicMovesToAnotherBroker": _explain_takeover,
    "OldBrokerRollsOver": _explain_old_rollover,
    "ManagedLedgerOpens": _explain_opens,
    "ConsumerAcks": _explain_acks,
    "CursorPersists": _explain_persists,
    "CursorsSkipConsumedLedgers": _explain_skips,
    "TrimConsumedLedgers": _explain_trims,
}


# -- guards: the antecedents of the invariants --------------------------------------------
def _trimmed_entries(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> bool:
    return any(s.entries[x - 1] for x in s.deleted)


def _written(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> bool:
    return any(s.entries)


def _durable_past_an_entry(spec: ManagedLedgerSpec, s: ManagedLedgerState) -> bool:
    return any((x, 0) <= md for x, es in enumerate(s.entries, 1) if es for md in s.persistent_mark_delete)


_CURSOR_PERSISTED = Guard("CursorPersisted", _durable_past_an_entry, "a cursor's durable mark-delete is past an entry")

GUARDS: dict[str, Sequence[Guard]] = {
    "NoAcknowledgedMessageLost": (
        Guard("BatchAcknowledged", lambda spec, s: any(a >= 0 for a in s.acked), "a producer got an acknowledgement"),
    ),
    "TrimKeepsUnconsumedEntries": (Guard("LedgerTrimmed", _trimmed_entries, "a ledger holding entries is deleted"),),
    "LastConfirmedIsLastEntry": (Guard("BrokerUp", lambda spec, s: s.broker_up, "the broker is up"),),
    "DedupPersistsNoDuplicate": (
        Guard("DedupOnAndWritten", lambda spec, s: spec.Dedup and _written(spec, s), "dedup is on, an entry written"),
    ),
    "TrimPositionBehindCursor": (
        Guard(
            "CursorHeldAhead",
            lambda spec, s: any(held > md for md, held in zip(s.mark_delete, s.slowest_position, strict=True)),
            "the managed ledger holds a cursor past its mark-delete",
        ),
    ),
    "MarkDeleteNeverMovesBackwards": (_CURSOR_PERSISTED,),
    "DurableMarkDeleteAcknowledged": (_CURSOR_PERSISTED,),
}

PROCESSES = ("producer", "clients", "broker", "old-broker", "bookkeeper", "consumer")

# What an event says nothing without: the entry a completed add wrote and the id its producer got, where the
# consumer's mark-delete went, what a crash left on the bookies, the ledger list after a rollover, a reopen or a
# trim.
REQUIRES = {
    "BookKeeperCompletesAdd": {"entries", "acked", "last_id", "last_confirmed", "consumed", "backlog"},
    "ConsumerAcks": {"mark_delete", "acknowledged", "consumed"},
    "CursorPersists": {"persistent_mark_delete", "slowest_position"},
    "BrokerCrashes": {"broker_up", "entries"},
    "TopicMovesToAnotherBroker": {"broker_up", "entries", "old_broker"},
    "OldBrokerRollsOver": {"ledgers", "deleted", "old_broker"},
    "LedgerRollsOver": {"ledgers", "current"},
    "ManagedLedgerOpens": {
        "ledgers",
        "persistent_mark_delete",
        "mark_delete",
        "highest_persisted",
        "last_confirmed",
        "consumed",
        "backlog",
    },
    "TrimConsumedLedgers": {"ledgers", "deleted"},
}

TRACE = TraceMapping(
    ManagedLedgerSpec,
    (FULL, CLIENT),
    requires=REQUIRES,
    observed_promises=OBSERVED_PROMISES,
    projections=PROJECTIONS,
    explain=EXPLAIN,
    guards=GUARDS,
    processes=PROCESSES,
)
