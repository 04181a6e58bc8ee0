"""How traces of a ledger implementation map onto the ledger spec (``ledger.py``): its trace module.

The conformance checker reads traces in the vocabulary defined here; the
reference engine writes it. An event's type is a ``LedgerSpec`` action name,
its params that action's parameters (``m`` a request record, ``replied``,
``c`` a recovering client, ``b`` and ``nb`` bookies, ``e`` an entry id), its
observed values ``LedgerState`` variables or the projections below.

Four observation modes:

``full``
    A global observer (a test harness around an engine, or a simulator):
    every step is logged, by the process that takes it, and every variable
    may be reported.
``client``
    What the clients of a real cluster see, as in a BookKeeper client's log:
    their own steps, and each reply that reaches them (logged by the client
    that receives it). Hidden, so allowed between two logged events: a
    bookie serving a request whose reply is lost, the network losing a
    request, a bookie crash. Observable: the writer's and the recovering
    clients' own variables and the ledger metadata they read and write; no
    bookie storage, no messages in flight. A client may leave any value out
    (a log line without the LAC, say).
``bookies``
    What the bookies see, as served bookies record it
    (``ledgerspec serve bookies --trace``): each request a bookie served,
    logged by that bookie in the order the bookies served them, and its
    crashes and restarts. Hidden, so allowed between two logged events:
    every step of a client (the writer's adds, changes and close, a
    recovery's start, resends and close, a reader's reads) and the loss of a
    request, which no bookie sees. Observable: what each bookie holds of the
    ledger (``bookie_entries``), whether it is fenced (``bookie_fenced``),
    the explicit LAC it was sent last (``bookie_explicit_lac``), and which
    bookies are down. Not ``bookie_data``: the spec's data is a
    number, a bookie's is bytes. Not ``bookie_lac`` either: a recovery add
    of the spec carries no LAC, BookKeeper's carries the recovering client's
    (docs/real-systems.md), which the bookie then holds. A bookie cannot
    tell who sent a request nor whether its reply arrived, so a request
    record names no client but the writer (a normal add: only the writer
    sends those), and ``replied`` is left out. Where the clients' writes
    to the metadata store are recorded too (``ledgerspec serve bookies
    --metadata-proxy``), each is an event logged by ``zookeeper``, named
    by the client step that wrote it (``WriterChangesEnsemble``,
    ``WriterClosesLedger``, ``RecovererStartsRecovery``,
    ``RecovererClosesLedger``; which recovering client wrote is not seen,
    so ``c`` is left out), and every event of the trace observes the
    metadata as the store holds it then (``meta_status``,
    ``meta_segments``, ``meta_last_entry``, ``meta_version``). Those client
    steps stay hidden too, for the ones whose compare-and-set fails and
    write nothing; the observed version rules out a write that was not
    logged. This is the client mode
    turned around: the clients are searched for, the bookies are seen,
    so a bookie that breaks a promise (acks an add to a fenced ledger,
    loses a fence in a restart) shows at its own step. The price is the
    search: a writer may push every entry of the run between two requests
    a bookie serves, so the breadth-first search, which decides a
    violation, needs ``max_hidden_steps`` above the number of entries.
``merged``
    A client's log and the bookies' log in one trace (``ledgerspec
    merge``), checked with ``RepliesInFlight = 1``: the client's steps and
    each reply it takes (``ClientReceivesReply``), logged by the client,
    with the client mode's observations; each request a bookie serves, and
    its crashes and restarts, logged by the bookies, with the bookies
    mode's. Only a lost message is hidden. With replies in flight a
    bookie's step changes no client variable and a client's step no
    bookie's, so each event reports its own side only; and two bookies'
    replies reach the client in any order, whatever order they were served
    in. A reply names the request it answers (its type is left out when
    the client's log does not say which answer it was).

Processes that log: ``writer``, ``recoverer-<c>``, ``bookie-<b>`` and, for
lost requests in full mode, ``network``; in bookies mode the bookies only.

The explanations say which guard of an action fails, one sentence per
guard, in the order the action tests them. Two steps of the spec are left
out on purpose and explained as such: serving a request that changes
nothing, and losing a reply the client would ignore. A client of a real
system logs every reply it gets, so an event that names the first is taken
as a stuttering step (``STUTTERS``): the request is in flight, its bookie is
up, and serving it and replying would leave every variable as it is (a
late fencing reply, an ack of an entry the bookie already holds to a
writer that no longer listens).

The guards name the antecedents of the invariants that are implications:
most of them speak of a CLOSED ledger only, and ``NoNewAcksToFencedWriter``
of a recovery whose fencing completed. Coverage counts the states where
each holds, so a run that never closed a ledger shows that it never
exercised them. ``TypeOK`` has no antecedent.

For drawings, an event's messages come from its params: a bookie's step
receives request ``m`` from client ``m.client`` and sends its reply back
(or loses it, to the ``network`` lane); a lost request goes to the network;
a recovering client's resend goes to bookie ``b``. The writer's first send
of an add is not drawn: ``WriterAddsEntry`` has no params naming bookies.

Left out: a client's timeouts are not events (in the spec a timeout is the
guard of the step that follows it, such as ``WriterChangesEnsemble``); a
recovering client reports ``rec`` whole or the ``recoverer_phases``
projection, not a record of its own; a plain reader's requests are not
messages of the spec (its read of a LAC or of an entry is one step,
``ReaderReadsLac`` or ``ReaderReadsEntry``), nor is the reply to an
explicit LAC, which the writer ignores.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from ledgerspec.spec.ledger.ledger import (
    CLOSED,
    DONE,
    FAILED,
    FENCING,
    IDLE,
    READING,
    REPLY_TYPES,
    WRITER,
    WRITER_CLOSED,
    WRITING,
    WRITING_BACK,
    LedgerSpec,
    LedgerState,
    Msg,
    data_on,
)
from ledgerspec.spec.tracing import INIT, Explanation, Guard, Message, ObservationMode, Projection, TraceMapping

__all__ = [
    "BOOKIES",
    "BOOKIES_OBSERVE",
    "CLIENT",
    "CLIENT_OBSERVES",
    "FULL",
    "GUARDS",
    "MERGED",
    "METADATA_OBSERVE",
    "METADATA_STORE",
    "STUTTERS",
    "TRACE",
    "client_process",
    "messages",
]


# -- projections: what a log line reports instead of a whole variable ---------------------
def _recoverer_phases(spec: LedgerSpec, s: LedgerState) -> tuple[str, ...]:
    return tuple(r.phase for r in s.rec)


def _last_ensemble(spec: LedgerSpec, s: LedgerState) -> tuple[int, ...]:
    return s.meta_segments[-1][1]


PROJECTIONS = (
    Projection(
        "recoverer_phases",
        _recoverer_phases,
        tuple[str, ...],
        "phase of each recovering client 1..NumRecoverers",
        tla="[c \\in Recoverers |-> rec[c].phase]",
    ),
    Projection(
        "last_ensemble", _last_ensemble, tuple[int, ...], "the bookies of the ledger's last segment", tla="LastEnsemble"
    ),
)


# -- who logs a step ---------------------------------------------------------------------
#: The bookie steps whose parameter is the bookie itself, not a request.
_BOOKIE_UP_DOWN = frozenset({"BookieCrashes", "BookieRestarts"})


def client_process(c: int) -> str:
    return "writer" if c == WRITER else f"recoverer-{c}"


def _actor(action: str, args: tuple[Any, ...]) -> str:
    """The process whose step it is (full mode)."""
    if action == INIT or action.startswith("Writer"):
        return "writer"
    if action.startswith("Recoverer"):
        return client_process(args[0])
    if action.startswith("Reader"):
        return f"reader-{args[0]}"
    if action in _BOOKIE_UP_DOWN:
        return f"bookie-{args[0]}"
    if action.startswith("Bookie"):
        return f"bookie-{args[0].bookie}"
    if action == "ClientReceivesReply":
        return client_process(args[0].client)
    return "network"


def _observer(action: str, args: tuple[Any, ...]) -> str:
    """The client that sees the step (client mode): a reply is logged by the client it reaches."""
    if action.startswith("Bookie") and action not in _BOOKIE_UP_DOWN:
        return client_process(args[0].client)
    return _actor(action, args)


def _reply_lost(m: Msg, replied: bool) -> bool:
    return not replied


FULL = ObservationMode(
    "full",
    "every step and every variable: a global observer",
    observes=frozenset(f.name for f in attrs.fields(LedgerState)) | {p.name for p in PROJECTIONS},
    logged_by=_actor,
)

CLIENT_OBSERVES = frozenset(
    {
        "meta_status",
        "meta_segments",
        "meta_last_entry",
        "meta_version",
        "writer_status",
        "writer_version",
        "writer_lap",
        "writer_lac",
        "writer_acks",
        "writer_add_lac",
        "writer_explicit_lac",
        "rec",
        "reader_lac",
        "reader_read",
        "recoverer_phases",
        "last_ensemble",
    }
)

CLIENT = ObservationMode(
    "client",
    "what the clients see: their own steps and the replies that reach them; no bookie internals",
    observes=CLIENT_OBSERVES,
    hidden={
        "BookieReceivesAdd": _reply_lost,
        "BookieReceivesFenceRead": _reply_lost,
        "BookieReceivesRecoveryRead": _reply_lost,
        "BookieReceivesWriteLac": None,
        "BookieCrashes": None,
        "BookieRestarts": None,
        "NetworkLosesMessage": None,
    },
    logged_by=_observer,
)

BOOKIES_OBSERVE = frozenset({"bookie_entries", "bookie_fenced", "bookie_explicit_lac", "crashed"})
#: The metadata store's variables: observed in bookies mode where the store's writes are recorded too.
METADATA_OBSERVE = frozenset({"meta_status", "meta_segments", "meta_last_entry", "meta_version"})
#: The process that logs the metadata store's writes in bookies mode.
METADATA_STORE = "zookeeper"

BOOKIES = ObservationMode(
    "bookies",
    "what the bookies see: each request they serve, their crashes and restarts, and the metadata store's writes "
    "where they are recorded; the clients' steps searched for",
    observes=BOOKIES_OBSERVE | METADATA_OBSERVE,
    hidden={a.name: None for a in LedgerSpec.actions if not a.name.startswith("Bookie")},
    logged_by=_actor,
    unseen={"RecovererStartsRecovery": frozenset({"c"}), "RecovererClosesLedger": frozenset({"c"})},
    # Every write of the metadata is one more version: a trace that reports the metadata reports its version at
    # each event, so no write goes unlogged between two.
    witnessed=dict.fromkeys(METADATA_OBSERVE, "meta_version"),
)

MERGED = ObservationMode(
    "merged",
    "a client's log and the bookies' log in one trace, with RepliesInFlight = 1: the clients' steps and each reply "
    "they take, each request the bookies serve, their crashes and restarts; only lost messages searched for",
    observes=CLIENT_OBSERVES | BOOKIES_OBSERVE,
    hidden={"NetworkLosesMessage": None},
    logged_by=_actor,
)


# -- explanations: which guard fails ----------------------------------------------------
def _in_flight(s: LedgerState, m: Any, type_: str) -> str | None:
    """The request must be one of the spec's messages in flight (the \\E m \\in net of the action)."""
    if not isinstance(m, Msg) or m.type != type_:
        return f"{m!r} is not a {type_}"
    if m not in s.net:
        same = sorted((x for x in s.net if x.type == type_ and x.bookie == m.bookie), key=repr)
        others = ", ".join(map(repr, same)) if same else "none"
        return f"no request {m!r} is in flight (in flight of that type to bookie {m.bookie}: {others})"
    return None


def _served(spec: LedgerSpec, s: LedgerState, m: Msg, replied: Any) -> str | None:
    """The guards shared by the three bookie steps, after the request is found in flight."""
    if replied not in (True, False):
        return f"replied must be TRUE or FALSE, got {replied!r}"
    if replied is False and spec.RepliesInFlight:
        return "with RepliesInFlight=1 a bookie's step sends its reply, and the network loses it in a step of its own"
    if not replied and s.lost >= spec.MaxLoss:
        return f"its reply cannot be lost: {s.lost} of MaxLoss={spec.MaxLoss} losses have happened"
    if m.bookie in s.crashed:
        return f"bookie {m.bookie} has crashed"
    return None


def _stutter(replied: bool) -> str:
    if replied:
        return "serving it changes nothing the spec tracks (the spec leaves such a step out)"
    return "losing its reply changes nothing for the client (the spec spends no loss on it)"


def _serving_changes_nothing(type_: str) -> Callable[..., bool]:
    """Asked where the bookie step is disabled: is that only because serving the request changes nothing?"""

    def stutters(spec: LedgerSpec, s: LedgerState, m: Any, replied: Any) -> bool:
        return replied is True and _in_flight(s, m, type_) is None and _served(spec, s, m, replied) is None

    return stutters


def _bookie_step(type_: str, action: str) -> Callable[..., str | None]:
    def explain(spec: LedgerSpec, s: LedgerState, m: Any, replied: Any) -> str | None:
        why = _in_flight(s, m, type_) or _served(spec, s, m, replied)
        if why is not None:
            return why
        if getattr(spec, action)(s, m, replied) is None:
            return _stutter(replied)
        return None

    return explain


def _explain_take_reply(spec: LedgerSpec, s: LedgerState, p: Any) -> str | None:
    if not isinstance(p, Msg) or p.type not in REPLY_TYPES:
        return f"{p!r} is not a bookie's reply ({', '.join(REPLY_TYPES)})"
    if not spec.RepliesInFlight:
        return "with RepliesInFlight=0 a bookie's step delivers its reply: no reply is ever in flight"
    if p not in s.net:
        same = sorted((x for x in s.net if x.type in REPLY_TYPES and x.client == p.client), key=repr)
        others = ", ".join(map(repr, same)) if same else "none"
        return f"no reply {p!r} is in flight (in flight to client {p.client}: {others})"
    return None


def _writer_status(s: LedgerState) -> str | None:
    if s.writer_status != WRITING:
        return f"the writer's handle is {s.writer_status}, not WRITING"
    return None


def _explain_add(spec: LedgerSpec, s: LedgerState, lac: int | None = None) -> str | None:
    if (why := _writer_status(s)) is not None:
        return why
    if s.writer_lap + 1 >= spec.MaxEntries:
        return (
            f"the writer has pushed every entry the model allows "
            f"(writer_lap={s.writer_lap}, MaxEntries={spec.MaxEntries})"
        )
    if spec.Throttle > 0 and s.writer_lap - s.writer_lac >= spec.Throttle:
        return (
            f"{s.writer_lap - s.writer_lac} adds are pending (writer_lap={s.writer_lap}, writer_lac={s.writer_lac}) "
            f"and the throttle allows {spec.Throttle}"
        )
    if lac is not None and lac not in (allowed := spec.packaged_lacs(s)):
        lowest = "" if spec.LacLag else " (LacLag=0: an add carries the writer's LAC; LacLag=1 lets it lag)"
        return (
            f"the add carries LAC {lac}, but the writer's next add carries one in "
            f"{allowed.start} .. {allowed.stop - 1}{lowest}"
        )
    return None


def _awaited(spec: LedgerSpec, s: LedgerState, type_: str, c: int, b: int, e: int) -> bool:
    """The request or its reply is still in flight, so the reply can still come: the client has not timed out."""
    return not spec.timed_out(s, type_, c, b, e)


def _replacement(spec: LedgerSpec, ensemble: Any, b: Any, nb: Any, whose: str) -> str | None:
    """Why bookie ``nb`` cannot replace ``b`` in ``whose`` last ensemble, or None."""
    if b not in ensemble:
        return f"bookie {b!r} is not in {whose} last ensemble {list(ensemble)}"
    if nb not in spec.bookies:
        return f"there is no bookie {nb!r} (bookies 1..{spec.NumBookies})"
    if nb in ensemble:
        return f"bookie {nb} is already in {whose} last ensemble {list(ensemble)}"
    return None


def _explain_change_ensemble(spec: LedgerSpec, s: LedgerState, b: Any, nb: Any) -> str | None:
    if (why := _replacement(spec, spec.writer_segments(s)[-1][1], b, nb, "the")) is not None:
        return why
    if (why := _writer_status(s)) is not None:
        return why
    if nb in s.crashed:
        return f"the replacement bookie {nb} has crashed"
    if s.writer_lap == s.writer_lac:
        return "no add is pending: the writer replaces a bookie as it sends an add, or for a pending one"
    if not spec.writer_gave_up_on(s, b):
        return (
            f"no add sent to bookie {b} has timed out: for each of entries 0..{s.writer_lap}, "
            f"bookie {b} is not in its write set, has acked it, or still has the request or its reply in flight"
        )
    return None


def _explain_close(spec: LedgerSpec, s: LedgerState) -> str | None:
    return _writer_status(s)


def _explain_explicit_lac(spec: LedgerSpec, s: LedgerState, at: Any) -> str | None:
    if spec.ExplicitLac != 1:
        return "the writer sends no explicit LAC (ExplicitLac=0: explicitLacInterval is 0)"
    if s.writer_status == WRITER_CLOSED:
        return "the writer closed the ledger, which stops its explicit-LAC timer"
    bound = spec.explicit_lac_bound(s)
    if not isinstance(at, int) or not s.writer_explicit_lac < at <= bound:
        return (
            f"the timer sends for a LAC past the one it last sent for ({s.writer_explicit_lac}) and at most the "
            f"writer's ({bound}), not {at!r}"
        )
    return None


def _explain_write_lac(spec: LedgerSpec, s: LedgerState, m: Any) -> str | None:
    if (why := _in_flight(s, m, "LacReq")) is not None:
        return why
    if m.bookie in s.crashed:
        return f"bookie {m.bookie} has crashed"
    return None


def _explain_crash(spec: LedgerSpec, s: LedgerState, b: Any) -> str | None:
    if b not in spec.bookies:
        return f"there is no bookie {b!r} (bookies 1..{spec.NumBookies})"
    if b in s.crashed:
        return f"bookie {b} has crashed already"
    if s.crashes >= spec.MaxCrashes:
        return f"{s.crashes} of MaxCrashes={spec.MaxCrashes} crashes have happened"
    return None


def _explain_restart(spec: LedgerSpec, s: LedgerState, b: Any) -> str | None:
    if b not in spec.bookies:
        return f"there is no bookie {b!r} (bookies 1..{spec.NumBookies})"
    if b not in s.crashed:
        return f"bookie {b} is up: only a crashed bookie restarts"
    return None


def _explain_loss(spec: LedgerSpec, s: LedgerState, m: Any) -> str | None:
    if not isinstance(m, Msg) or m not in s.net:
        return f"no request {m!r} is in flight"
    if s.lost >= spec.MaxLoss:
        return f"{s.lost} of MaxLoss={spec.MaxLoss} losses have happened"
    return None


def _recoverer(spec: LedgerSpec, c: Any) -> str | None:
    if c not in spec.recoverers:
        return f"there is no recovering client {c!r} (clients 1..{spec.NumRecoverers})"
    return None


def _phase(s: LedgerState, c: int, *phases: str) -> str | None:
    phase = s.rec[c - 1].phase
    if phase not in phases:
        return f"recovering client {c} is {phase}, not {' or '.join(phases)}"
    return None


def _explain_start(spec: LedgerSpec, s: LedgerState, c: Any) -> str | None:
    return _recoverer(spec, c) or _phase(s, c, IDLE, FAILED)


def _explain_recoverer_close(spec: LedgerSpec, s: LedgerState, c: Any) -> str | None:
    if (why := _recoverer(spec, c) or _phase(s, c, WRITING_BACK)) is not None:
        return why
    r = s.rec[c - 1]
    short = [
        e
        for e in range(r.start + 1, r.last + 1)
        if spec.acks_of(r.wb_acks, e, spec.recovery_write_set(s, r, e)) < spec.Qa
    ]
    if short:
        return f"entries {short} are not yet written back to Qa={spec.Qa} bookies"
    return None


def _explain_recovery_change(spec: LedgerSpec, s: LedgerState, c: Any, b: Any, nb: Any) -> str | None:
    if (why := _recoverer(spec, c) or _phase(s, c, READING, WRITING_BACK)) is not None:
        return why
    r = s.rec[c - 1]
    if (why := _replacement(spec, spec.recovery_segments(s, r)[-1][1], b, nb, f"recovering client {c}'s")) is not None:
        return why
    if nb in s.crashed:
        return f"the replacement bookie {nb} has crashed"
    if spec.recovery_lac(s, r) == r.last:
        return (
            "no write-back is pending: the recovering client replaces a bookie as it sends a write-back, "
            "or for a pending one"
        )
    if not spec.recoverer_gave_up_on(s, c, b):
        return (
            f"no write-back sent to bookie {b} has timed out: for each of entries {r.start + 1}..{r.last}, "
            f"bookie {b} is not in its write set, has acked it, or still has the request or its reply in flight"
        )
    return None


def _explain_gives_up(spec: LedgerSpec, s: LedgerState, c: Any) -> str | None:
    if (why := _recoverer(spec, c) or _phase(s, c, FENCING, READING)) is not None:
        return why
    r = s.rec[c - 1]
    if r.phase == FENCING:
        waiting = [b for b in r.segments[-1][1] if b not in r.fence_replies and _awaited(spec, s, "FenceReq", c, b, -1)]
        what = "the fencing read"
    else:
        waiting = [
            b
            for b in spec.write_set_in(r.segments, r.next)
            if b not in r.no_such and _awaited(spec, s, "ReadReq", c, b, r.next)
        ]
        what = f"the read of entry {r.next}"
    if waiting:
        return f"{what} is still in flight to bookies {waiting}: their replies can still come"
    return None


def _explain_resend_fence(spec: LedgerSpec, s: LedgerState, c: Any, b: Any) -> str | None:
    if (why := _recoverer(spec, c)) is not None:
        return why
    if b not in spec.bookies:
        return f"there is no bookie {b!r} (bookies 1..{spec.NumBookies})"
    if (why := _phase(s, c, FENCING)) is not None:
        return why
    if b in s.rec[c - 1].fence_replies:
        return f"bookie {b} has answered the fencing read"
    if b in s.crashed:
        return f"bookie {b} has crashed"
    ensemble = s.rec[c - 1].segments[-1][1]
    if b not in ensemble:
        return f"bookie {b} is not in the last ensemble {list(ensemble)} recovering client {c} read"
    if _awaited(spec, s, "FenceReq", c, b, -1):
        return f"the fencing read to bookie {b} is still in flight: its reply can still come"
    return None


def _explain_resend_read(spec: LedgerSpec, s: LedgerState, c: Any, b: Any) -> str | None:
    if (why := _recoverer(spec, c)) is not None:
        return why
    if b not in spec.bookies:
        return f"there is no bookie {b!r} (bookies 1..{spec.NumBookies})"
    if (why := _phase(s, c, READING)) is not None:
        return why
    r = s.rec[c - 1]
    if b in s.crashed:
        return f"bookie {b} has crashed"
    if b in r.no_such:
        return f"bookie {b} has answered NoSuchEntry for entry {r.next}"
    write_set = spec.write_set_in(r.segments, r.next)
    if b not in write_set:
        return f"bookie {b} is not in the write set {list(write_set)} of entry {r.next}"
    if _awaited(spec, s, "ReadReq", c, b, r.next):
        return f"the read of entry {r.next} from bookie {b} is still in flight: its reply can still come"
    return None


def _explain_resend_write_back(spec: LedgerSpec, s: LedgerState, c: Any, e: Any, b: Any) -> str | None:
    if (why := _recoverer(spec, c) or _phase(s, c, READING, WRITING_BACK)) is not None:
        return why
    r = s.rec[c - 1]
    if not isinstance(e, int) or not r.start < e <= r.last:
        return f"entry {e!r} is not among the recovered entries {r.start + 1}..{r.last}"
    if b not in spec.recovery_write_set(s, r, e):
        return f"bookie {b!r} is not in the write set {list(spec.recovery_write_set(s, r, e))} of entry {e}"
    if b in s.crashed:
        return f"bookie {b} has crashed"
    if (e, b) in r.wb_acks:
        return f"bookie {b} has acked the write-back of entry {e}"
    if _awaited(spec, s, "AddReq", c, b, e):
        return f"the write-back of entry {e} to bookie {b} is still in flight: its ack can still come"
    return None


def _no_reader(spec: LedgerSpec, r: Any) -> str | None:
    if r not in spec.readers:
        return f"there is no reader {r!r} (readers 1..{spec.NumReaders})"
    return None


def _explain_reader_lac(spec: LedgerSpec, s: LedgerState, r: Any, lac: Any) -> str | None:
    if (why := _no_reader(spec, r)) is not None:
        return why
    if lac <= s.reader_lac[r - 1]:
        return f"reader {r} has learned LAC {s.reader_lac[r - 1]} already"
    served = max(spec.max_bookie_lac(s), s.meta_last_entry)
    if lac > served:
        return f"no bookie serves LAC {lac} and the ledger is not closed past it: the highest is {served}"
    return None


def _explain_reader_entry(spec: LedgerSpec, s: LedgerState, r: Any, e: Any, b: Any) -> str | None:
    if (why := _no_reader(spec, r)) is not None:
        return why
    if spec.Bug != "reader_reads_unconfirmed" and e > s.reader_lac[r - 1]:
        return f"entry {e} is past reader {r}'s LAC {s.reader_lac[r - 1]}"
    if b not in spec.bookies:
        return f"there is no bookie {b!r} (bookies 1..{spec.NumBookies})"
    if b in s.crashed:
        return f"bookie {b} has crashed"
    data = data_on(s, b, e)
    if data is None:
        return f"bookie {b} does not hold entry {e}"
    if (e, data) in s.reader_read[r - 1]:
        return f"reader {r} has read entry {e} as bookie {b} holds it (data {data}) already"
    return None


EXPLAIN: dict[str, Explanation] = {
    "WriterAddsEntry": _explain_add,
    "WriterChangesEnsemble": _explain_change_ensemble,
    "WriterClosesLedger": _explain_close,
    "WriterSendsExplicitLac": _explain_explicit_lac,
    "BookieReceivesAdd": _bookie_step("AddReq", "BookieReceivesAdd"),
    "BookieReceivesFenceRead": _bookie_step("FenceReq", "BookieReceivesFenceRead"),
    "BookieReceivesRecoveryRead": _bookie_step("ReadReq", "BookieReceivesRecoveryRead"),
    "BookieReceivesWriteLac": _explain_write_lac,
    "ClientReceivesReply": _explain_take_reply,
    "BookieCrashes": _explain_crash,
    "BookieRestarts": _explain_restart,
    "NetworkLosesMessage": _explain_loss,
    "RecovererStartsRecovery": _explain_start,
    "RecovererClosesLedger": _explain_recoverer_close,
    "RecovererChangesEnsemble": _explain_recovery_change,
    "RecovererGivesUp": _explain_gives_up,
    "RecovererResendsFenceRead": _explain_resend_fence,
    "RecovererResendsRead": _explain_resend_read,
    "RecovererResendsWriteBack": _explain_resend_write_back,
    "ReaderReadsLac": _explain_reader_lac,
    "ReaderReadsEntry": _explain_reader_entry,
}


# -- guards: the antecedents of the invariants that are implications ------------------------
def _closed(spec: LedgerSpec, s: LedgerState) -> bool:
    return s.meta_status == CLOSED


def _closed_after_acks(spec: LedgerSpec, s: LedgerState) -> bool:
    return s.meta_status == CLOSED and s.writer_lac >= 0


def _closed_while_a_bookie_serves_a_lac(spec: LedgerSpec, s: LedgerState) -> bool:
    return s.meta_status == CLOSED and spec.max_bookie_lac(s) >= 0


def _explicit_lac_served(spec: LedgerSpec, s: LedgerState) -> bool:
    return any(lac >= 0 for lac in s.bookie_explicit_lac)


def _closed_with_entries(spec: LedgerSpec, s: LedgerState) -> bool:
    return s.meta_status == CLOSED and s.meta_last_entry >= 0


def _fencing_completed(spec: LedgerSpec, s: LedgerState) -> bool:
    return any(r.phase in (READING, WRITING_BACK, DONE, FAILED) and bool(r.fence_replies) for r in s.rec)


CLOSED_GUARD = Guard("ledger closed", _closed, "meta_status = CLOSED")
GUARDS: dict[str, tuple[Guard, ...]] = {
    "NoAckedEntryLost": (
        CLOSED_GUARD,
        Guard("closed after an ack", _closed_after_acks, "CLOSED, and the writer acknowledged an entry"),
    ),
    "ReadersAgreeUpToLac": (
        CLOSED_GUARD,
        Guard(
            "closed while a bookie serves a LAC",
            _closed_while_a_bookie_serves_a_lac,
            "some bookie_lac or bookie_explicit_lac >= 0",
        ),
    ),
    "ExplicitLacIsDurable": (
        Guard("a bookie serves an explicit LAC", _explicit_lac_served, "some bookie_explicit_lac >= 0"),
    ),
    "ClosedLedgerIsReadable": (Guard("closed with entries", _closed_with_entries, "CLOSED with meta_last_entry >= 0"),),
    "NoNewAcksToFencedWriter": (
        Guard("fencing completed", _fencing_completed, "a recovering client has its fencing replies and moved on"),
    ),
    "ClosedLedgerNeverChanges": (Guard("step from a closed ledger", _closed, "CLOSED before the step"),),
}


# -- drawings: lanes and messages ---------------------------------------------------------
PROCESSES = ("writer", "recoverer", "reader", "bookie", "network")
_REPLY = {"AddReq": "ack", "FenceReq": "fenced, LAC", "ReadReq": "entry or NoSuchEntry", "LacReq": "ack"}


def _request_label(m: Mapping[str, Any]) -> str:
    entry = m.get("entry")
    label = str(m.get("type", "request"))
    if isinstance(entry, int) and entry >= 0:
        label += f" e{entry}"
    if m.get("recovery") is True and m.get("type") == "AddReq":
        label += " (write-back)"
    return label


def messages(action: str, params: Mapping[str, Any]) -> Sequence[Message]:
    """The requests and replies an event names in its params (some fields may be left out)."""
    m, c, b = params.get("m"), params.get("c"), params.get("b")
    p = params.get("p")
    if action == "ClientReceivesReply":
        if not isinstance(p, dict) or not isinstance(p.get("client"), int) or not isinstance(p.get("bookie"), int):
            return ()
        return (Message(f"bookie-{p['bookie']}", client_process(p["client"]), _request_label(p)),)
    if (action.startswith("Bookie") and action not in _BOOKIE_UP_DOWN) or action == "NetworkLosesMessage":
        if not isinstance(m, dict) or not isinstance(m.get("client"), int) or not isinstance(m.get("bookie"), int):
            return ()
        client, bookie = client_process(m["client"]), f"bookie-{m['bookie']}"
        label = _request_label(m)
        if action == "NetworkLosesMessage":
            return (Message(client, "network", f"{label} lost"),)
        sent = [Message(client, bookie, label)]
        replied = params.get("replied")
        reply = _REPLY.get(str(m.get("type")), "reply")
        if replied is True:
            sent.append(Message(bookie, client, reply))
        elif replied is False:
            sent.append(Message(bookie, "network", f"{reply} lost"))
        return tuple(sent)
    if action.startswith("RecovererResends") and isinstance(c, int) and isinstance(b, int):
        if action == "RecovererResendsWriteBack":
            e = params.get("e")
            label = f"AddReq e{e} (write-back)" if isinstance(e, int) else "AddReq (write-back)"
        else:
            label = "FenceReq" if action == "RecovererResendsFenceRead" else "ReadReq"
        return (Message(client_process(c), f"bookie-{b}", f"{label}, resent"),)
    return ()


STUTTERS = {
    "BookieReceivesAdd": _serving_changes_nothing("AddReq"),
    "BookieReceivesFenceRead": _serving_changes_nothing("FenceReq"),
    "BookieReceivesRecoveryRead": _serving_changes_nothing("ReadReq"),
}

# What an event says nothing without: where a close closed the ledger.
REQUIRES = {
    "WriterClosesLedger": {"meta_status", "meta_last_entry"},
    "RecovererClosesLedger": {"meta_status", "meta_last_entry"},
}


def _replies_taken_at_once(spec: LedgerSpec, mode: ObservationMode) -> LedgerSpec | None:
    """With ``RepliesInFlight = 1``, the same model with 0: each of its bookie steps is a bookie's step of the
    given model followed at once by the client's ``ClientReceivesReply`` (or the reply's loss), so its behaviours
    are among the given model's, with none of the orders in which clients take replies late to search. Only where
    the mode hides ``ClientReceivesReply``: an event of it, as a merged trace has, no step of the coarser takes."""
    if not spec.RepliesInFlight or not mode.hides("ClientReceivesReply", ()):
        return None
    return LedgerSpec(**{**spec.values, "RepliesInFlight": 0})


TRACE = TraceMapping(
    LedgerSpec,
    (FULL, CLIENT, BOOKIES, MERGED),
    coarser=_replies_taken_at_once,
    requires=REQUIRES,
    projections=PROJECTIONS,
    explain=EXPLAIN,
    stutters=STUTTERS,
    guards=GUARDS,
    processes=PROCESSES,
    messages=messages,
)
