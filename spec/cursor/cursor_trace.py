"""How traces of a Pulsar cursor implementation map onto the cursor spec (``cursor.py``): its trace module.

An event's type is a ``CursorSpec`` action name; its params that action's
parameters (``ConsumerAcks``: ``ledger``, ``entry``, ``index`` of the
message; ``CursorResetStarts``: ``target``, the position the cursor is to
read after; ``CursorDeletesOldLedger`` and ``CursorLedgerLost``: ``ledger``);
its observed values ``CursorState`` variables or the projections below.
Positions are ``[ledger id, entry id]``; a message is
``[ledger id, entry id, batch index]`` (batch index 0 for a message that is
not batched).

Two observation modes:

``full``
    A harness that sees the broker's memory, the znodes and the cursor
    ledgers (an abstraction function): every step is logged, by the
    ``broker`` (or ``bookkeeper`` for a lost ledger), and every variable may
    be reported but ``durable``, a history variable no implementation holds;
    ``slowest_position`` is the managed ledger's position of the cursor
    (``ManagedCursorContainer``), which trimming reads.
``client``
    What the producer, the consumer and an operator see: publishes,
    rollovers, acknowledgements, resets asked for and completed, the broker
    crashing, the managed ledger reopening, the cursor's restore and close.
    Hidden, so allowed between
    two logged events: every step of the cursor's persistence (creating,
    switching and deleting cursor ledgers, appends, the fallbacks to the
    znode, the failed znode writes), the loss of a cursor ledger, and the skip and trim of consumed
    ledgers. Observable: the broker being up, its crashes, what the
    consumer acknowledged, whether the cursor is active, and the projections
    ``covered``, the messages the cursor will not deliver again, and
    ``published``, the message ids the producer was given. None of them is
    changed by a hidden step.

    Data ledgers and cursor ledgers take their ids from one counter, so the
    id of the next data ledger tells how many cursor ledgers were created
    before it: reporting ``published`` at each publish lets a check rule out
    the wrong counts at once rather than many events later. The client's
    quotient (:func:`unread_history_dropped`) merges the states that differ
    only in what no step reads again; the checker keeps one per class. Of
    states that differ only in ``faults`` (the mode's ``spent`` budget) it
    keeps the one that failed least. A failed switch takes a ledger id, and
    so does a cursor ledger whose first record failed, so under unbounded
    ``MaxFaults`` a check must allow any number of them between two
    publishes: a harness that injects the faults checks
    under the number it injected (``simulation.spent_bounds`` of the
    reference cursor).

Processes that log: ``broker`` and ``bookkeeper`` (full mode),
``consumer`` (client mode: every event).

A trace is one cursor of one topic (no partition key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from ledgerspec.spec.cursor.cursor import (
    ACTIVE,
    NO_LEDGER,
    NONE,
    OPEN,
    SWITCHING,
    UNINITIALIZED,
    CursorSpec,
    CursorState,
    Message,
    ledger_entry,
    reset_targets,
)
from ledgerspec.spec.kernel import evolve
from ledgerspec.spec.positions import NO_POSITION, Position, next_ledger
from ledgerspec.spec.tracing import Explanation, Guard, ObservationMode, ObservedPromise, Projection, TraceMapping

__all__ = ["CLIENT", "CLIENT_OBSERVES", "FULL", "GUARDS", "TRACE", "covered", "published", "unread_history_dropped"]


# -- projections ------------------------------------------------------------------------
def covered(spec: CursorSpec, s: CursorState) -> frozenset[Message]:
    """The messages the cursor will not deliver again: up to its mark-delete, its acked entries and indexes."""
    return spec.cursor_covers(s) if s.status != UNINITIALIZED else frozenset()


def published(spec: CursorSpec, s: CursorState) -> frozenset[tuple[int, int]]:
    """The position of every entry published, trimmed or not: a producer is given each one as its message id
    (``MessageIdImpl``: ledger id, entry id), so the ids of the data ledgers are no secret to a client."""
    return frozenset((ledger, e) for ledger, count in (*s.ledgers, *s.deleted) for e in range(count))


PROJECTIONS = (
    Projection(
        "covered",
        covered,
        frozenset[Message],
        "the messages the cursor will not deliver again (none while it is not restored)",
        tla="IF status = Uninitialized THEN {} ELSE CursorCovers",
    ),
    Projection(
        "published",
        published,
        frozenset[tuple[int, int]],
        "the position of every entry published: the message ids the producer was given",
        tla="{<<x[1], e>> : x \\in AllLedgers, e \\in 0 .. x[2] - 1}",
    ),
    Projection(
        "active",
        lambda spec, s: s.status in ACTIVE,
        bool,
        "the cursor takes acknowledgements: restored and not closed",
        tla="status \\in Active",
    ),
)


# -- who logs a step ---------------------------------------------------------------------
def _broker(action: str, _args: tuple[Any, ...]) -> str:
    return "bookkeeper" if action == "CursorLedgerLost" else "broker"


def _consumer(_action: str, _args: tuple[Any, ...]) -> str:
    return "consumer"


FULL = ObservationMode(
    "full",
    "every step, by the broker (a lost cursor ledger by bookkeeper); every variable but the history durable",
    frozenset(a.name for a in attrs.fields(CursorState)) - {"durable"} | {"covered", "active"},
    logged_by=_broker,
)

CLIENT_OBSERVES = frozenset({"broker_up", "crashes", "acked", "covered", "active", "published"})

#: Steps inside the broker and BookKeeper that no client sees; none changes what CLIENT_OBSERVES names (a reset
#: persisted changes the cursor at its visible completion, or at the restore).
_INSIDE = (
    "CursorCreatesLedger",
    "CursorSwitchesLedger",
    "CursorLedgerCreationFails",
    "CursorLedgerFirstWriteFails",
    "CursorPersistsToLedger",
    "CursorLedgerWriteFails",
    "CursorLedgerSwitchFails",
    "CursorZnodeWriteFails",
    "CursorDeletesOldLedger",
    "CursorSkipsConsumedLedger",
    "TrimConsumedLedgers",
    "CursorLedgerLost",
)


def unread_history_dropped(spec: CursorSpec, s: CursorState) -> CursorState:
    """A client's quotient of the cursor's states: what no step ever reads again, dropped.

    - Of the cursor ledgers, only those the znode names, the cursor holds or switches to are ever read again
      (the restore reads the named one; the append, the switch and the loss the others): a retired ledger, or
      one a crash left behind, is never read, and its deletion is a hidden step that changes nothing else.
    - Of a cursor ledger read again, the restore and the switch read its last record, the append counts its
      records (``shouldCloseLedger``): the records before the last matter only through their number.
    - A data ledger dropped empty (the managed ledger's reopen) holds no message: no invariant, projection or
      step reads it.
    """
    read_again = {s.znode.cursors_ledger, s.cursor_ledger, s.switching_to}
    kept = tuple(
        (ledger, records[-1:] + (None,) * (len(records) - 1))
        for ledger, records in s.cursor_ledgers
        if ledger in read_again
    )
    return evolve(
        s,
        cursor_ledgers=kept,
        retired=frozenset(),
        deleted=frozenset(x for x in s.deleted if x[1]),
    )


CLIENT = ObservationMode(
    "client",
    "publishes, acknowledgements, resets, the broker's crashes and restarts, the cursor's restore and close",
    CLIENT_OBSERVES,
    hidden=dict.fromkeys(_INSIDE),
    logged_by=_consumer,
    quotient=unread_history_dropped,
    spent="faults",  # read only by the guards that bound the failed writes
)


# -- explanations: which guard of a disabled action fails -------------------------------------
def _inactive(s: CursorState) -> str | None:
    if s.status not in ACTIVE:
        return f"the cursor is {s.status}: it takes no step until it is restored"
    return None


def _explain_publish(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _inactive(s):
        return why
    published = sum(n for _, n in (*s.ledgers, *s.deleted))
    if published >= spec.MaxEntries:
        return f"{published} entries are published; MaxEntries is {spec.MaxEntries}"
    ledger, count = s.ledgers[-1]
    if count >= spec.MaxEntriesPerLedger:
        return f"ledger {ledger} holds {count} entries, it is full: it rolls over first"
    return None


def _explain_roll(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _inactive(s):
        return why
    ledger, count = s.ledgers[-1]
    if spec.RolloverByTime and count == 0:
        return f"ledger {ledger} holds no entry: neither its size nor its age rolls it over"
    if count < spec.MaxEntriesPerLedger and not spec.RolloverByTime:
        return f"ledger {ledger} holds {count} of {spec.MaxEntriesPerLedger} entries: it is not full"
    return None


def _explain_ack(spec: CursorSpec, s: CursorState, ledger: int, entry: int, index: int) -> str | None:
    if why := _inactive(s):
        return why
    if not any(x == ledger and 0 <= entry < n for x, n in s.ledgers) or not 0 <= index < spec.BatchSize:
        return f"there is no message {ledger}:{entry} (batch index {index}) in the ledger list"
    if (ledger, entry, index) in spec.cursor_covers(s):
        return f"message {ledger}:{entry} (batch index {index}) is acknowledged already"
    return None


def _nothing_to_persist(s: CursorState) -> str | None:
    if CursorSpec.to_persist(s):
        return None
    if s.reset_unapplied != NO_POSITION:
        return f"the reset to {ledger_entry(s.reset_unapplied)} is persisted: the cursor takes it before it writes"
    return "every acknowledgement is persisted already and no reset is pending: nothing to write"


def _need(s: CursorState, status: str, what: str, *, dirty: bool = True) -> str | None:
    if s.status != status:
        return f"the cursor is {s.status}, not {status}: {what}"
    return _nothing_to_persist(s) if dirty else None


def _explain_create(spec: CursorSpec, s: CursorState) -> str | None:
    if spec.rolling_over(s):
        return None
    if s.status == SWITCHING:
        return f"cursor ledger {s.switching_to} is created already: it waits to be named in the znode"
    return _need(
        s, NO_LEDGER, "it creates a cursor ledger when a mark-delete finds none to write to, or a full one rolls over"
    )


def _explain_switch(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _need(s, SWITCHING, "no new cursor ledger waits to be named in the znode", dirty=False):
        return why
    if spec.rolling_over(s):
        return "the full cursor ledger's successor is not created yet: nothing waits to be named in the znode"
    return None


def _faults(spec: CursorSpec, s: CursorState, cost: int = 1) -> str | None:
    if s.faults + cost > spec.MaxFaults:
        more = "" if cost == 1 else f" and this step fails {cost} more"
        return f"{s.faults} writes have failed{more}; MaxFaults is {spec.MaxFaults}"
    return None


def _explain_creation_fails(spec: CursorSpec, s: CursorState) -> str | None:
    return _explain_create(spec, s) or _faults(spec, s)


def _explain_first_write_fails(spec: CursorSpec, s: CursorState) -> str | None:
    return _explain_create(spec, s) or _faults(spec, s, 2)


def _explain_persist(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _need(s, OPEN, "it appends only to a cursor ledger it holds open"):
        return why
    if spec.records_of(s, s.cursor_ledger) is None:
        return f"cursor ledger {s.cursor_ledger} is gone: the append fails"
    return None


def _explain_write_fails(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _need(s, OPEN, "only an append to an open cursor ledger can fail"):
        return why
    return None if spec.records_of(s, s.cursor_ledger) is None else _faults(spec, s)


def _explain_switch_fails(spec: CursorSpec, s: CursorState) -> str | None:
    return _explain_switch(spec, s) or _faults(spec, s)


def _explain_znode_write_fails(spec: CursorSpec, s: CursorState) -> str | None:
    if s.status not in (NO_LEDGER, OPEN):
        return f"the cursor is {s.status}: the znode stands in for a cursor ledger only from {NO_LEDGER} or {OPEN}"
    return _nothing_to_persist(s) or _faults(spec, s, spec.znode_write_failure_cost(s))


def _explain_delete(spec: CursorSpec, s: CursorState, ledger: int) -> str | None:
    if not s.broker_up:
        return "the broker is down"
    if ledger not in s.retired:
        return f"cursor ledger {ledger} is not retired (retired: {sorted(s.retired)})"
    return None


def _explain_close(spec: CursorSpec, s: CursorState) -> str | None:
    if s.status not in (NO_LEDGER, OPEN):
        return f"the cursor is {s.status}: it closes from {NO_LEDGER} or {OPEN} only"
    if s.resetting != NO_POSITION:
        return f"a reset to {ledger_entry(s.resetting)} is pending: the cursor closes after it"
    return None


def _explain_reset(spec: CursorSpec, s: CursorState, target: Position) -> str | None:
    if s.status not in (NO_LEDGER, OPEN):
        return f"the cursor is {s.status}: it resets from {NO_LEDGER} or {OPEN} only"
    if s.resetting != NO_POSITION:
        return f"a reset to {ledger_entry(s.resetting)} is in progress already"
    if s.resets >= spec.MaxResets:
        return f"{s.resets} resets have happened; MaxResets is {spec.MaxResets}"
    if (target,) not in set(reset_targets(spec, s)):
        return f"{ledger_entry(target)} is neither an entry of the ledger list nor its first position"
    return None


def _explain_reset_completes(spec: CursorSpec, s: CursorState) -> str | None:
    if s.resetting == NO_POSITION:
        return "no reset is pending"
    if s.reset_unapplied == NO_POSITION:
        return f"the reset to {ledger_entry(s.resetting)} is not persisted yet: the cursor takes it once it is"
    return None


def _explain_crash(spec: CursorSpec, s: CursorState) -> str | None:
    if not s.broker_up:
        return "the broker is down already"
    if s.crashes >= spec.MaxCrashes:
        return f"{s.crashes} crashes have happened; MaxCrashes is {spec.MaxCrashes}"
    return None


def _explain_open(spec: CursorSpec, s: CursorState) -> str | None:
    return "the broker is up: the managed ledger is open" if s.broker_up else None


def _explain_recover(spec: CursorSpec, s: CursorState) -> str | None:
    if not s.broker_up:
        return "the broker is down: the managed ledger opens first"
    if s.status != UNINITIALIZED:
        return f"the cursor is {s.status}: it is restored once, after the managed ledger opens"
    return None


def _explain_skip(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _inactive(s):
        return why
    ledger, entry = s.mark_delete
    ids = spec.ids(s)
    after = next_ledger(ids, ledger)
    if ledger not in ids or after is None:
        return f"ledger {ledger} of the mark-delete {ledger}:{entry} is not followed by another in the list"
    unconsumed = entry + 1 < spec.counter(s)(ledger) and spec.Bug != "skip_unconsumed_ledger"
    if entry == -1 or unconsumed:
        return f"the mark-delete {ledger}:{entry} is not at the last entry of ledger {ledger}"
    if s.slowest_position == (after, -1):
        return f"the managed ledger holds the cursor at {after}:-1 already"
    return None


def _explain_trim(spec: CursorSpec, s: CursorState) -> str | None:
    if why := _inactive(s):
        return why
    if spec.TrimConsumedLedgers(s) is None:
        ledger, entry = s.slowest_position
        return (
            f"no ledger other than the last lies before ledger {spec.slowest_reader_ledger(s)}, the slowest "
            f"reader's (the managed ledger holds the cursor at {ledger}:{entry})"
        )
    return None


def _explain_lost(spec: CursorSpec, s: CursorState, ledger: int) -> str | None:
    if s.lost >= spec.MaxLedgerLoss:
        return f"{s.lost} cursor ledgers are lost; MaxLedgerLoss is {spec.MaxLedgerLoss}"
    if s.resets > 0:
        return "the cursor was reset: the spec loses no cursor ledger after a reset (docs/real-systems.md)"
    if ledger != s.znode.cursors_ledger or ledger == NONE:
        return f"cursor ledger {ledger} is not the one the znode names ({s.znode.cursors_ledger})"
    return None


EXPLAIN: dict[str, Explanation] = {
    "EntryPublished": _explain_publish,
    "LedgerRollsOver": _explain_roll,
    "ConsumerAcks": _explain_ack,
    "CursorResetStarts": _explain_reset,
    "CursorResetCompletes": _explain_reset_completes,
    "CursorCreatesLedger": _explain_create,
    "CursorSwitchesLedger": _explain_switch,
    "CursorLedgerCreationFails": _explain_creation_fails,
    "CursorLedgerFirstWriteFails": _explain_first_write_fails,
    "CursorPersistsToLedger": _explain_persist,
    "CursorLedgerWriteFails": _explain_write_fails,
    "CursorLedgerSwitchFails": _explain_switch_fails,
    "CursorZnodeWriteFails": _explain_znode_write_fails,
    "CursorDeletesOldLedger": _explain_delete,
    "CursorCloses": _explain_close,
    "BrokerCrashes": _explain_crash,
    "ManagedLedgerOpens": _explain_open,
    "CursorRecovers": _explain_recover,
    "CursorSkipsConsumedLedger": _explain_skip,
    "TrimConsumedLedgers": _explain_trim,
    "CursorLedgerLost": _explain_lost,
}

# -- guards: the antecedents of the invariants --------------------------------------------
GUARDS: dict[str, Sequence[Guard]] = {
    "CursorSkipsNoUnackedMessage": (
        Guard(
            "CursorCoversMessages",
            lambda spec, s: s.status != UNINITIALIZED and bool(spec.cursor_covers(s)),
            "the cursor covers messages: it will not deliver them again",
        ),
    ),
    "OnlyUnpersistedAcksRedelivered": (
        Guard(
            "AckPersisted",
            lambda spec, s: s.status != UNINITIALIZED and s.lost == 0 and bool(s.durable),
            "an acknowledgement was persisted, and no cursor ledger was lost",
        ),
    ),
    "TrimPositionBehindCursor": (
        Guard(
            "TrimPositionCoversMessages",
            lambda spec, s: s.status in ACTIVE and bool(spec.covered(s, s.slowest_position, frozenset(), frozenset())),
            "the managed ledger's position of the cursor covers messages",
        ),
    ),
    "TrimKeepsUnconsumedEntries": (
        Guard("LedgerTrimmed", lambda spec, s: any(n > 0 for _, n in s.deleted), "a ledger holding entries is gone"),
    ),
    "MarkDeleteNeverMovesBackwards": (
        Guard("CursorActive", lambda spec, s: s.status in ACTIVE, "the cursor takes acknowledgements"),
    ),
}

PROCESSES = ("consumer", "broker", "bookkeeper")


# What an event says nothing without: the acks after an ack, what a restored cursor covers, that the cursor
# closed, that the broker went down.
REQUIRES = {
    "ConsumerAcks": {"acked"},
    "CursorRecovers": {"covered"},
    "CursorResetCompletes": {"covered"},
    "CursorCloses": {"active"},
    "BrokerCrashes": {"broker_up"},
}


def _covers_unacked(spec: CursorSpec, values: Mapping[str, Any]) -> str | None:
    """CursorSkipsNoUnackedMessage over what a consumer sees: ``covered`` is ``cursor_covers`` of a restored
    cursor and empty otherwise, so a covered message outside ``acked`` breaks the invariant in any state."""
    skipped = sorted(values["covered"] - values["acked"])
    if not skipped:
        return None
    ledger, entry, index = skipped[0]
    return (
        f"message {ledger}:{entry} (batch index {index}) was never acknowledged, but the cursor covers it: "
        "it is skipped"
    )


OBSERVED_PROMISES = (ObservedPromise("CursorSkipsNoUnackedMessage", ("covered", "acked"), _covers_unacked),)

TRACE = TraceMapping(
    CursorSpec,
    (FULL, CLIENT),
    requires=REQUIRES,
    observed_promises=OBSERVED_PROMISES,
    projections=PROJECTIONS,
    explain=EXPLAIN,
    guards=GUARDS,
    processes=PROCESSES,
)
