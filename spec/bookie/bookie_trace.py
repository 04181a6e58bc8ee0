"""How traces of a bookie implementation map onto the bookie spec (``bookie.py``): its trace module.

An event's type is a ``BookieSpec`` action name, its params that action's
parameters (``ledger``, ``entry``, ``new_lac``; ``upto`` the journal position
a force write syncs to; ``f`` a journal file id; ``cut`` where a crash cuts
the unsynced journal), its observed values ``BookieState`` variables or the
projection below. Positions are ``[journal file id, record index]`` as in
the spec: a bookie that logs byte offsets maps each to the number of spec
records (entries, fences, explicit LACs) before it in its file.

Two observation modes:

``full``
    A harness that sees the bookie's memory and files (an abstraction
    function): every step is logged, by the thread that takes it, and every
    variable may be reported.
``client``
    What the clients of one bookie see: their requests (an add, a fence, an
    explicit LAC), the force writes that answer them (without the position:
    the replies say which requests were answered), the bookie going down
    (without the cut) and coming back after its replay. Hidden, so allowed
    between two logged events: journal rollover, the flushers' steps
    (take a mark, flush, persist it), in any interleaving, and the deletion
    of journal files. Observable: what the clients
    were told (``acked``, ``fence_acked``), whether the bookie is up, how
    often it crashed, and which entries a read finds (the projection
    ``readable``); none of them is changed by a hidden step.

Processes that log (full mode): ``bookie`` (requests, the replay),
``journal`` (the force-write thread: force writes, rollover),
``sync-thread`` (its checkpoint's mark, flush and persist, journal
deletion), ``write-cache`` (the write cache's flush: its mark, flush and
persist) and ``machine`` (crashes); in client mode every event is logged by
``client``. The two flushers' steps interleave as they like; the spec, not
the trace mapping, judges the marks they persist.

``persisted_mark`` is a projection: the largest ``lastMark`` copy, where a
start replays from (the copies are ``last_marks``).

``synced`` has two spellings in the spec for one fact: the end of file ``f``
is ``[f, n]`` or, once ``f + 1`` exists, ``[f + 1, 0]``; both leave the same
records unsynced. An observer that cannot tell which the spec would write
reports the projection ``unsynced_from`` (the first unsynced record, or the
end of the journal) instead.

A trace is one bookie: its ledgers share the journal, the mark and the
checkpoint, so they are not checked apart (no partition key).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from ledgerspec.spec.bookie.bookie import (
    FENCE,
    FLUSHERS,
    NONE,
    WRITE_CACHE,
    ZERO_MARK,
    BookieSpec,
    BookieState,
    Position,
)
from ledgerspec.spec.tracing import INIT, Explanation, Guard, Message, ObservationMode, Projection, TraceMapping

__all__ = [
    "CLIENT",
    "CLIENT_OBSERVES",
    "FULL",
    "GUARDS",
    "TRACE",
    "messages",
    "persisted_mark",
    "readable",
    "unsynced_from",
]


# -- projections ------------------------------------------------------------------------
def unsynced_from(spec: BookieSpec, s: BookieState) -> Position:
    """The position of the first journal record not yet synced, or the end of the journal."""
    return next((pos for pos, _ in spec.records(s) if pos >= s.synced), spec.end_of_journal(s))


def readable(spec: BookieSpec, s: BookieState) -> frozenset[tuple[int, int]]:
    """The entries a read finds now: in the memtable or the entry log, while the bookie is up."""
    return frozenset(x for x in s.memtable | s.flushed if s.up)


def persisted_mark(spec: BookieSpec, s: BookieState) -> Position:
    """The mark a start reads: the largest lastMark copy."""
    return spec.persisted_mark(s)


PROJECTIONS = (
    Projection(
        "persisted_mark",
        persisted_mark,
        Position,
        "the mark a start replays from: the largest lastMark copy",
        tla="PersistedMark",
    ),
    Projection(
        "readable",
        readable,
        frozenset[tuple[int, int]],
        "the entries a read finds: in the memtable or the entry log, while the bookie is up",
        tla='{x \\in Ledgers \\X Entries : ReadPath(x[1], x[2]) # "none"}',
    ),
    Projection(
        "unsynced_from",
        unsynced_from,
        Position,
        "the first journal record not yet synced, or the end of the journal: synced in one spelling",
        tla="IF Unsynced = {} THEN EndOfJournal "
        "ELSE CHOOSE p \\in {r[1] : r \\in Unsynced} : \\A r \\in Unsynced : ~Before(r[1], p)",
    ),
)


# -- who logs a step ---------------------------------------------------------------------
_THREAD = {
    "BookieAddsEntry": "bookie",
    "BookieFencesLedger": "bookie",
    "BookieSetsExplicitLac": "bookie",
    "BookieReplaysJournal": "bookie",
    "JournalForceWrites": "journal",
    "JournalRollsOver": "journal",
    "JournalFileDeleted": "sync-thread",
    "BookieCrashes": "machine",
}


_FLUSHER_STEPS = ("FlusherTakesMark", "LedgerStorageFlushes", "CheckpointPersistsMark")
_FLUSHER_THREAD = {1: "sync-thread", WRITE_CACHE: "write-cache"}


def _thread(action: str, args: tuple[Any, ...]) -> str:
    if action == INIT:
        return "bookie"
    if action in _FLUSHER_STEPS:
        return _FLUSHER_THREAD[args[0]]
    return _THREAD[action]


def _client(_action: str, _args: tuple[Any, ...]) -> str:
    return "client"


FULL = ObservationMode(
    "full",
    "every step, by the thread that takes it; every variable",
    frozenset(a.name for a in attrs.fields(BookieState)) | {"unsynced_from", "readable", "persisted_mark"},
    logged_by=_thread,
)

CLIENT_OBSERVES = frozenset({"acked", "fence_acked", "up", "crashes", "readable"})
#: Steps inside the bookie that no client sees; none of them changes what CLIENT_OBSERVES names.
_INSIDE = (
    "JournalRollsOver",
    "FlusherTakesMark",
    "LedgerStorageFlushes",
    "CheckpointPersistsMark",
    "JournalFileDeleted",
)

CLIENT = ObservationMode(
    "client",
    "the clients' requests, the force writes that answer them, the bookie going down and coming back",
    CLIENT_OBSERVES,
    hidden=dict.fromkeys(_INSIDE),
    logged_by=_client,
)


# -- explanations: which guard of a disabled action fails -------------------------------------
def _down(s: BookieState) -> str | None:
    if not s.up:
        return "the bookie is down: it serves nothing until its replay is done"
    return None


def _no_entry(spec: BookieSpec, ledger: int, entry: int | None = None) -> str | None:
    if ledger not in spec.ledgers:
        return f"there is no ledger {ledger} in the model (ledgers 1..{spec.NumLedgers})"
    if entry is not None and entry not in spec.entries:
        return f"there is no entry {entry} in the model (entries 0..{spec.MaxEntries - 1})"
    return None


def _full(spec: BookieSpec, s: BookieState) -> str | None:
    if spec.current_file_full(s):
        f, _ = s.journal[-1]
        return f"journal file {f} is full ({spec.RecordsPerJournal} records): the journal rolls over first"
    return None


def _explain_add(spec: BookieSpec, s: BookieState, ledger: int, entry: int) -> str | None:
    why = _no_entry(spec, ledger, entry) or _down(s)
    if why:
        return why
    if ledger in s.fenced:
        return f"ledger {ledger} is fenced: the bookie rejects its adds"
    if why := _full(spec, s):
        return why
    if (ledger, entry) in s.memtable or (ledger, entry) in s.flushed:
        return f"entry ({ledger}, {entry}) is stored already"
    return None


def _explain_fence(spec: BookieSpec, s: BookieState, ledger: int) -> str | None:
    why = _no_entry(spec, ledger) or _down(s)
    if why:
        return why
    if ledger in s.fenced:
        if ledger in s.fence_acked:
            return f"the fence of ledger {ledger} is acknowledged already"
        if (FENCE, ledger, -1) in spec.unsynced(s):
            return f"the fence record of ledger {ledger} waits for its fsync: this request waits with it"
        return None
    if spec.Bug == "fence_not_journaled":
        return None
    return _full(spec, s)


def _explain_lac(spec: BookieSpec, s: BookieState, ledger: int, new_lac: int) -> str | None:
    why = _no_entry(spec, ledger, new_lac) or _down(s)
    if why:
        return why
    if new_lac <= s.lac[ledger - 1]:
        return f"the explicit LAC of ledger {ledger} is {s.lac[ledger - 1]} already: {new_lac} is not newer"
    return _full(spec, s)


def _explain_force_write(spec: BookieSpec, s: BookieState, upto: Position) -> str | None:
    if why := _down(s):
        return why
    if not any(s.synced <= pos < upto for pos, _ in spec.records(s)):
        return f"no unsynced record lies before {list(upto)}: the journal is synced up to {list(s.synced)}"
    return None


def _explain_roll(spec: BookieSpec, s: BookieState) -> str | None:
    if why := _down(s):
        return why
    f, recs = s.journal[-1]
    if not spec.current_file_full(s):
        return f"journal file {f} holds {len(recs)} of {spec.RecordsPerJournal} records: it is not full"
    return None


def _no_flusher(flusher: int) -> str | None:
    if flusher not in FLUSHERS:
        return f"there is no flusher {flusher}: 1 is the sync thread, 2 the write cache's flush"
    return None


def _explain_takes_mark(spec: BookieSpec, s: BookieState, flusher: int) -> str | None:
    if why := _no_flusher(flusher) or _down(s):
        return why
    name = FLUSHERS[flusher]
    if s.flusher_mark[flusher - 1] != NONE:
        return f"the {name} flusher is under way (its mark {list(s.flusher_mark[flusher - 1])})"
    if flusher == WRITE_CACHE and not s.memtable:
        return "the write cache is empty: nothing fills it to trigger a flush"
    persisted = spec.persisted_mark(s)
    if flusher != WRITE_CACHE and not persisted < s.mark:
        return (
            f"the mark {list(s.mark)} is not past the persisted mark {list(persisted)}: a checkpoint would not move it"
        )
    return None


def _explain_flush(spec: BookieSpec, s: BookieState, flusher: int) -> str | None:
    if why := _no_flusher(flusher) or _down(s):
        return why
    name = FLUSHERS[flusher]
    if s.flusher_mark[flusher - 1] == NONE:
        return f"the {name} flusher has taken no mark: it is idle"
    if flusher in s.flusher_flushed:
        return f"the {name} flusher has flushed the ledger storage already for its mark"
    return None


def _explain_persist(spec: BookieSpec, s: BookieState, flusher: int) -> str | None:
    if why := _no_flusher(flusher) or _down(s):
        return why
    name = FLUSHERS[flusher]
    if s.flusher_mark[flusher - 1] == NONE:
        return f"the {name} flusher has taken no mark: it is idle"
    if flusher not in s.flusher_flushed and spec.Bug != "mark_before_flush":
        return f"the {name} flusher has not flushed the ledger storage yet"
    return None


def _explain_delete(spec: BookieSpec, s: BookieState, f: int) -> str | None:
    if why := _down(s):
        return why
    oldest, newest = s.journal[0][0], s.journal[-1][0]
    if f != oldest:
        return f"journal file {f} is not the oldest ({oldest}): files are deleted oldest first"
    if f == newest:
        return f"journal file {f} is the current one"
    persisted = spec.persisted_mark(s)
    if not (f <= persisted[0] if spec.Bug == "delete_journal_at_mark" else f < persisted[0]):
        return f"journal file {f} is not wholly before the persisted mark {list(persisted)}"
    return None


def _explain_crash(spec: BookieSpec, s: BookieState, cut: Position) -> str | None:
    if not s.up:
        return "the bookie is down already"
    if s.crashes >= spec.MaxCrashes:
        return f"{s.crashes} crashes have happened; MaxCrashes is {spec.MaxCrashes}"
    return None


def _explain_replay(spec: BookieSpec, s: BookieState) -> str | None:
    if s.up:
        return "the bookie is up: only a crashed bookie replays its journal"
    return None


EXPLAIN: dict[str, Explanation] = {
    "BookieAddsEntry": _explain_add,
    "BookieFencesLedger": _explain_fence,
    "BookieSetsExplicitLac": _explain_lac,
    "JournalForceWrites": _explain_force_write,
    "JournalRollsOver": _explain_roll,
    "FlusherTakesMark": _explain_takes_mark,
    "LedgerStorageFlushes": _explain_flush,
    "CheckpointPersistsMark": _explain_persist,
    "JournalFileDeleted": _explain_delete,
    "BookieCrashes": _explain_crash,
    "BookieReplaysJournal": _explain_replay,
}


# -- guards: the antecedents of the invariants --------------------------------------------
GUARDS: dict[str, Sequence[Guard]] = {
    "MarkNeverPassesUnflushedData": (
        Guard(
            "MarkPastRecords",
            lambda spec, s: any(pos < spec.persisted_mark(s) for pos, _ in spec.records(s)),
            "the persisted mark is past journal records, which no replay reads again",
        ),
    ),
    "JournalKeptFromMark": (
        Guard("JournalFileDeleted", lambda spec, s: s.journal[0][0] > 1, "a journal file was deleted"),
    ),
    "MarkCoversReplayedJournal": (
        Guard(
            "UpAndIdle", lambda spec, s: s.up and not spec.unsynced(s), "the bookie is up, no record awaits an fsync"
        ),
    ),
    "AckedEntriesSurvive": (Guard("EntryAcked", lambda spec, s: bool(s.acked), "an entry was acknowledged"),),
    "FencedLedgerStaysFenced": (Guard("FenceAcked", lambda spec, s: bool(s.fence_acked), "a fence was acknowledged"),),
    "MarkNeverMovesBackwards": (
        Guard("MarkPersisted", lambda spec, s: spec.persisted_mark(s) != ZERO_MARK, "a flusher persisted a mark"),
    ),
}


# -- drawings: lanes and messages ---------------------------------------------------------
PROCESSES = ("client", "bookie", "journal", "sync-thread", "write-cache", "machine")


def messages(action: str, params: Mapping[str, Any]) -> Sequence[Message]:
    """A request goes from the client to the bookie; a force write answers the requests it syncs."""
    ledger = params.get("ledger")
    if action == "BookieAddsEntry":
        return (Message("client", "bookie", f"add ({ledger}, {params.get('entry')})"),)
    if action == "BookieFencesLedger":
        return (Message("client", "bookie", f"fence {ledger}"),)
    if action == "BookieSetsExplicitLac":
        return (Message("client", "bookie", f"setExplicitLac {ledger} = {params.get('new_lac')}"),)
    if action == "JournalForceWrites":
        upto = params.get("upto")
        return (Message("journal", "client", "replies" if upto is None else f"replies up to {upto}"),)
    return ()


# No event is required to report anything: a bookie's step (a request and the force write that acknowledges it, a
# restart's replay and checkpoint) is several spec steps, observed once, after the last of them.
TRACE = TraceMapping(
    BookieSpec,
    (FULL, CLIENT),
    projections=PROJECTIONS,
    explain=EXPLAIN,
    guards=GUARDS,
    processes=PROCESSES,
    messages=messages,
)
