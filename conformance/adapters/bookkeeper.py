"""What a real BookKeeper client saw, as a ledger-spec trace in client mode.

The harness (``java/LedgerspecHarness.java``) reports, for each client, the
requests it sends to bookies, the replies that reach it, and the ledger
metadata it creates and writes. :class:`LedgerTraceMapper` turns one
ledger's share of those observations into events of the ledger spec
(``spec/ledger/ledger.py``) in the vocabulary of its trace mapping
(``spec/ledger/ledger_trace.py``), observed as in the ``client`` mode: every step a
client takes and every reply that reaches it; bookie crashes, restarts and
lost messages stay hidden, for the checker to find.

How each observation maps (``client`` is 0 for the writer, ``c`` >= 1 for a
client that opens the ledger with recovery, ``r`` the number of a client that
opens it without, a plain reader, in the order they opened it):

=====================================================  =============================================
observation                                            event
=====================================================  =============================================
writer sends an add of an entry above every one sent    ``WriterAddsEntry(lac)``, the LAC the add carries,
                                                         observed ``writer_lap``
writer sends an add of an entry it sent before           none: a resend, part of ``WriterChangesEnsemble``
an add's reply OK reaches client 0 or c                  ``BookieReceivesAdd(m, replied=TRUE)``, observed
                                                         ``writer_lac`` (writer) as the handle had it after,
                                                         or as the writer's next add carried it; none for
                                                         an ack that came after its add failed (``x-late``)
an add's reply "ledger fenced" reaches the writer         ``BookieReceivesAdd(m, TRUE)``, observed
                                                         ``writer_status = FENCED``; only the first: later
                                                         ones change nothing in the spec; none for an add
                                                         that had completed (the writer ignores those)
a reply to a request sent twice, after the first         none: the spec's network holds one copy
a fencing read of the LAC (entry -1) answered            ``BookieReceivesFenceRead(m, TRUE)``; first, for
                                                         each add of the writer up to the last entry the
                                                         bookie returned that failed as it went down,
                                                         ``BookieReceivesAdd(m, FALSE)`` where it failed
a fencing read of entry e answered, found or NoSuch      ``BookieReceivesRecoveryRead(m, TRUE)``
any other error reply (bookie down, timeout)             none: the spec's crash or loss, left hidden,
                                                         is what the client's timeout stands for
writer's metadata write, ensemble changed                ``WriterChangesEnsemble(b, nb)`` for each
                                                         replaced bookie, observed ``meta_segments``
client c sends a write-back to a bookie outside its       ``RecovererChangesEnsemble(c, b, nb)``: b the
ensemble                                                 last bookie of its ensemble whose write-back
                                                         failed, nb the new one
writer's metadata write, CLOSED                          ``WriterClosesLedger``, placed where the close
                                                         failed the adds it drained, if it drained any
client c's metadata write, IN_RECOVERY                   ``RecovererStartsRecovery(c)``
client c's first fencing read, no write seen before      ``RecovererStartsRecovery(c)`` (joins a recovery)
client c's open done with neither (the ledger was        ``RecovererStartsRecovery(c)``
closed)
client c's metadata write, CLOSED                        ``RecovererClosesLedger(c)``
writer sends an explicit LAC for a LAC above every one   ``WriterSendsExplicitLac(at)``, ``at`` the LAC
sent for before                                          the flush policy read, observed
                                                         ``writer_explicit_lac``; the bookie's step is
                                                         hidden (no client awaits its reply)
client r's open without recovery, or its read of the     ``ReaderReadsLac(r, lac)`` for a LAC above every
LAC, done                                                one it learned; first ``BookieReceivesAdd`` of
                                                         the add that carried that LAC, if its ack has not
                                                         reached the writer yet (below)
client r's read of entry e answered OK, the first        ``ReaderReadsEntry(r, e, b)``
client r's long poll answered                            ``ReaderReadsLac(r, lac)`` for the bookie's LAC
                                                         if above, then ``ReaderReadsEntry(r, e, b)`` for
                                                         the entry returned, if any
=====================================================  =============================================

Every metadata event observes ``meta_status``, ``meta_last_entry`` and
``meta_version``: ZooKeeper's znode version plus one, since the spec counts
the creation as version 1 and ZooKeeper as 0, and both add one a write;
plus one for each bookie beyond the first that an ensemble change replaced
in one write (``LedgerHandle.handleBookieFailure``, release-4.17.2, replaces
together the failures that reached the handle during the change before),
since the spec replaces one a step.

Bookies are numbered as the spec numbers them: the ledger's first ensemble
is ``1 .. E`` in order, the cluster's other bookies follow in the cluster's
order. The request records leave ``lac`` out, which the trace format
allows. The harness does report the LAC an add carries (from the entry's
header): it is ``WriterAddsEntry``'s parameter, and it tells where the
writer's handle took in a reply, when the application's thread packaged an
add between the reply and the handle's report of its state. The traces are
checked with ``LacLag = 1`` when every add names its LAC: the handle takes
acks in one at a time and runs each add's callback in between
(``sendAddSuccessCallbacks``), so an add issued from a callback may carry a
LAC behind the acks the bookies sent.

A bookie's LAC moves before its ack goes out: ``BookieImpl.addEntryInternal``
(4.17.2) writes the entry to the ledger storage, which sets the ledger's LAC
and answers the long polls waiting on it, and only then to the journal,
whose fsync sends the ack. A reader's read of the LAC, a long poll most of
all, may thus report a LAC carried by an add whose ack is still to come.
The spec's bookie stores and replies in one step, so that step is placed
before the reader's: at the read, the polled bookie's add for a long poll. The
writer's LAC is then ahead of its handle's until the ack arrives, and is not
compared meanwhile; the ack, when it comes, is no step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from ledgerspec.spec.ledger.ledger import CLOSED, IN_RECOVERY, WRITER_CLOSED, WRITER_FENCED
from ledgerspec.spec.vocabulary import trace_line

__all__ = ["FENCING_FLAG", "RECOVERY_ADD_FLAG", "LedgerTraceMapper", "MappingError", "Skipped", "order_by_service"]

#: BookieProtocol.FLAG_DO_FENCING and FLAG_RECOVERY_ADD.
FENCING_FLAG, RECOVERY_ADD_FLAG = 0x1, 0x2
#: BKException.Code values the mapping tells apart.
OK, NO_SUCH_ENTRY, NO_SUCH_LEDGER, BOOKIE_UNAVAILABLE, LEDGER_FENCED, LEDGER_CLOSED = 0, -13, -7, -8, -101, -11
_ANSWERED_READ = frozenset({OK, NO_SUCH_ENTRY, NO_SUCH_LEDGER})
#: Room in ``seq`` for the events one observation gives: an ensemble change, with the acks held back during it.
_EVENTS_PER_OBSERVATION = 4096


class MappingError(Exception):
    """An observation the mapping cannot place: names the observation and what is wrong with it."""


@attrs.frozen
class Skipped:
    """An observation that maps to no event, and why."""

    observation: int
    why: str


def _process(client: int) -> str:
    return "writer" if client == 0 else f"recoverer-{client}"


@attrs.define
class _Metadata:
    state: str
    segments: tuple[tuple[int, tuple[int, ...]], ...]
    last_entry: int
    version: int


class LedgerTraceMapper:
    """One ledger's observations in, trace lines out (module docstring).

    ``cluster_bookies`` are the ids (``host:port``) of every bookie of the
    cluster, in the cluster's order. Feed the observations in the harness's
    order with :meth:`feed`; :attr:`lines` holds the events so far, and
    :attr:`skipped` the observations that map to none.
    """

    def __init__(self, trace_id: str, ledger: int, cluster_bookies: Sequence[str]) -> None:
        self.trace_id = trace_id
        self.ledger = ledger
        self.cluster_bookies = tuple(cluster_bookies)
        self.lines: list[dict[str, Any]] = []
        self.skipped: list[Skipped] = []
        self.numbers: dict[str, int] = {}
        self.quorum: tuple[int, int, int] | None = None  # E, Qw, Qa
        self._metadata: _Metadata | None = None
        self._extra_versions = 0  # the spec's versions beyond ZooKeeper's: a write that replaced k bookies is k steps
        self._lap = -1
        self._writer_fenced = False
        self._started: set[int] = set()
        self._read_flags: dict[tuple[int, str, int], int] = {}
        self._sent_at: dict[tuple[int, str, int], int] = {}  # (client, bookie, entry) -> its last request's observation
        self._highest_entry = -1
        self._pending: tuple[Mapping[str, Any], int, int] | None = None  # the writer's reply awaiting its handle
        self._placed_early: dict[str, Any] | None = None  # its step, placed before an add that showed it taken in
        self._last_lac = -1  # the writer's LAC as last observed
        self._lac_lags = False  # after an ensemble change, until the LAC moves again
        self._completed = -1  # the highest entry the writer's application was told is written
        self._failed_adds: set[int] = set()  # the entries whose adds the writer's application was told failed
        self._held: list[Mapping[str, Any]] = []  # the writer's acks held back while it changes its ensemble
        self._changed_while_held = False  # an ensemble change was written while acks were held back
        self._packaged: dict[int, int] = {}  # entry -> the LAC its add carried
        # (observation, bookie, entry): the writer's adds that failed as their bookie went down, not known stored
        self._unanswered_adds: list[tuple[Mapping[str, Any], int, int]] = []
        self._stored_early: set[tuple[int, int]] = set()  # (bookie, entry): stepped at a reader's read, ack to come
        self._add_answered: set[tuple[int, int]] = set()  # (bookie, entry): a reply to the writer's add came
        self._acks_since_change: set[tuple[int, int, int]] = set()  # (client, bookie, entry) acks emitted
        self._recovery_ensembles: dict[int, tuple[int, ...]] = {}  # a recovering client's ensemble, once it changed
        self._failed_write_backs: dict[int, list[int]] = {}  # client -> bookies that failed its write-backs
        self.unreachable: set[int] = set()  # bookies a client could not reach: each, a crash for the spec
        self.lost = 0  # other failed requests (timeouts): each, a lost request or reply for the spec
        self._events_at: dict[int, int] = {}  # observation -> events placed at it so far
        self._explicit_at = -1  # the LAC the writer's last explicit LAC was sent for
        self._drained: Mapping[str, Any] | None = None  # where the writer's close failed the adds it drained
        self._readers: dict[int, int] = {}  # client -> reader number, for the clients that opened without recovery
        self._reader_lac: dict[int, int] = {}  # reader -> the LAC it learned
        self._reader_read: dict[int, set[int]] = {}  # reader -> the entries it read

    # -- what the checker needs besides the lines -------------------------------------
    def constants(self, max_crashes: int = 0, max_loss: int = 0) -> dict[str, int]:
        """The ledger spec's constants this trace is checked with.

        The bounds on hidden faults come from the run: a crash for each of the
        ``max_crashes`` bookies killed, for each bookie a client found unreachable
        (a bookie the client cannot reach is, to it, a bookie that crashed and keeps
        its disk), and for each ensemble change (the new bookie may be one that is
        down but still registered: the spec's writer picks a bookie that is up, so
        the bookie restarts and crashes again); a loss for each request that failed
        otherwise (a timeout).
        """
        if self.quorum is None:
            raise MappingError(f"ledger {self.ledger}: no creation of its metadata was observed")
        e, qw, qa = self.quorum
        return {
            "NumBookies": len(self.cluster_bookies),
            "E": e,
            "Qw": qw,
            "Qa": qa,
            "NumRecoverers": max(self._started | {c for c in self._clients()}, default=0),
            "MaxEntries": max(self._highest_entry + 1, 1),
            "Throttle": 0,
            "LacLag": int(self._adds_name_their_lac()),
            "NumReaders": len(self._readers),
            "ExplicitLac": int(any(line["type"] == "WriterSendsExplicitLac" for line in self.lines)),
            "MaxCrashes": max_crashes + len(self.unreachable) + self._changes(),
            "MaxLoss": max(max_loss, self.lost),
        }

    def _adds_name_their_lac(self) -> bool:
        """Each add's line names the LAC it carries: only then may it lag (``LacLag``) without every
        LAC from the last add's up to the writer's becoming a candidate at each add."""
        adds = [line for line in self.lines if line["type"] == "WriterAddsEntry"]
        return bool(adds) and all("lac" in line.get("params", {}) for line in adds)

    def _changes(self) -> int:
        return sum(1 for line in self.lines if line["type"] in ("WriterChangesEnsemble", "RecovererChangesEnsemble"))

    def _clients(self) -> Iterable[int]:
        for line in self.lines:
            process = line["process"]
            if process.startswith("recoverer-"):
                yield int(process.removeprefix("recoverer-"))

    # -- feeding -----------------------------------------------------------------------
    def feed_all(self, observations: Iterable[Mapping[str, Any]]) -> None:
        """Every observation of a run, then :meth:`finish`."""
        for obs in observations:
            self.feed(obs)
        self.finish()

    def feed(self, obs: Mapping[str, Any]) -> None:
        if obs.get("ledger") != self.ledger:
            return
        kind = obs.get("ev")
        handler = {
            "send": self._send,
            "reply": self._reply,
            "metadata": self._metadata_event,
            "after": self._after,
            "opened": self._opened,
            "complete": self._complete,
            "unwatched": self._unwatched,
            "lac-read": self._lac_read,
        }.get(str(kind))
        if handler is None:
            raise MappingError(f"observation {obs.get('obs')}: unknown kind {kind!r}")
        try:
            handler(obs)
        except (KeyError, ValueError, TypeError) as exc:
            raise MappingError(
                f"observation {obs.get('obs')}: a {kind} observation with a field missing or of the wrong kind "
                f"({type(exc).__name__}: {exc})"
            ) from None

    def _skip(self, obs: Mapping[str, Any], why: str) -> None:
        self.skipped.append(Skipped(int(obs["obs"]), why))

    def _emit(
        self,
        obs: Mapping[str, Any],
        client: int,
        action: str,
        params: dict[str, Any] | None = None,
        observed: dict[str, Any] | None = None,
        *,
        at: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A trace line for ``obs``, placed in the order at observation ``at`` (default: ``obs`` itself)."""
        process = f"reader-{params['r']}" if action.startswith("Reader") and params else _process(client)
        line = trace_line(self.trace_id, process, self._seq(int((at or obs)["obs"])), action, params, observed)
        line["x-obs"] = int(obs["obs"])
        self.lines.append(line)
        return line

    def _seq(self, observation: int) -> int:
        """The harness numbers observations over all clients: a Lamport clock. One may give several events."""
        count = self._events_at.get(observation, 0)
        if count == _EVENTS_PER_OBSERVATION:
            raise MappingError(f"observation {observation}: more than {_EVENTS_PER_OBSERVATION} events placed there")
        self._events_at[observation] = count + 1
        return observation * _EVENTS_PER_OBSERVATION + count

    def _bookie(self, obs: Mapping[str, Any], bookie_id: str) -> int:
        number = self.numbers.get(bookie_id)
        if number is None:
            raise MappingError(f"observation {obs['obs']}: bookie {bookie_id} is not a bookie of the cluster")
        return number

    def _number_bookies(self, first_ensemble: Sequence[str], obs: Mapping[str, Any]) -> None:
        unknown = [b for b in first_ensemble if b not in self.cluster_bookies]
        if unknown:
            raise MappingError(f"observation {obs['obs']}: the ensemble names bookies outside the cluster: {unknown}")
        order = list(first_ensemble) + [b for b in self.cluster_bookies if b not in first_ensemble]
        self.numbers = {b: n for n, b in enumerate(order, start=1)}

    def _read_metadata(self, obs: Mapping[str, Any], written: Mapping[str, Any]) -> _Metadata:
        ensembles = sorted(((int(first), bookies) for first, bookies in written["ensembles"].items()))
        segments = tuple((first, tuple(self._bookie(obs, b) for b in bookies)) for first, bookies in ensembles)
        version = int(written.get("version", -2)) + 1 + self._extra_versions
        return _Metadata(str(written["state"]), segments, int(written["last_entry"]), version)

    @staticmethod
    def _observed_metadata(m: _Metadata) -> dict[str, Any]:
        return {
            "meta_status": m.state,
            "meta_segments": [[first, list(ensemble)] for first, ensemble in m.segments],
            "meta_last_entry": m.last_entry,
            "meta_version": m.version,
        }

    # -- the observations ----------------------------------------------------------------
    def _send(self, obs: Mapping[str, Any]) -> None:
        if obs["op"] == "write-lac":
            self._explicit_lac_sent(obs)
            return
        if obs["op"] == "long-poll":
            self._skip(obs, "a reader's long poll sent: its reply is the step")
            return
        client, entry, flags = int(obs["client"]), int(obs["entry"]), int(obs["flags"])
        self._sent_at[(client, str(obs["bookie"]), entry)] = int(obs["obs"])
        if obs["op"] == "read":
            self._read_flags[(client, str(obs["bookie"]), entry)] = flags
            if entry == -1 and flags & FENCING_FLAG and client not in self._started:
                self._started.add(client)
                self._emit(obs, client, "RecovererStartsRecovery", {"c": client})
            return
        if client != 0 or flags & RECOVERY_ADD_FLAG:
            # A write-back: sent by the recovery read that found the entry, or by the change of ensemble that
            # replaced a bookie which failed one.
            self._write_back_sent(obs, client)
            return
        if entry > self._lap:
            packaged = obs.get("lac")
            if packaged is not None and self._pending is not None and int(packaged) > self._last_lac:
                # The handle acted on the pending reply before it packaged this add (the application's
                # thread adds while the ledger's thread takes replies): the reply's step goes first, so
                # that the spec's add carries the reply's LAC. The packaged LAC may be one the handle
                # passed through while it completed several adds; the handle's report gives the last.
                self._placed_early = self._place_pending(obs, None)
            self._lap = entry
            self._highest_entry = max(self._highest_entry, entry)
            if packaged is not None:
                self._packaged[entry] = int(packaged)
            params = None if packaged is None else {"lac": int(packaged)}
            self._emit(obs, client, "WriterAddsEntry", params, {"writer_lap": entry})

    def _explicit_lac_sent(self, obs: Mapping[str, Any]) -> None:
        """The first WriteLac request of a flush is the writer's step; the others, to its write set, are part of it."""
        at = int(obs["lac"])
        if int(obs["client"]) != 0 or at <= self._explicit_at:
            self._skip(obs, "an explicit LAC of a flush already mapped")
            return
        self._flush_pending()  # the timer read the handle's LAC after the replies that moved it
        self._explicit_at = at
        self._emit(obs, 0, "WriterSendsExplicitLac", {"at": at}, {"writer_explicit_lac": at})

    def _reader(self, obs: Mapping[str, Any]) -> int | None:
        return self._readers.get(int(obs["client"]))

    def _learned(self, obs: Mapping[str, Any], r: int, lac: int, bookie: int | None = None) -> None:
        """Reader r learned ``lac`` (from ``bookie``, if known): a step when it is above every LAC it learned before."""
        if lac <= self._reader_lac[r]:
            self._skip(obs, f"reader {r} learned LAC {lac}, no higher than the {self._reader_lac[r]} it had")
            return
        self._stored_before_reply(obs, lac, bookie)
        self._reader_lac[r] = lac
        self._emit(obs, int(obs["client"]), "ReaderReadsLac", {"r": r, "lac": lac})

    def _lac_read(self, obs: Mapping[str, Any]) -> None:
        r = self._reader(obs)
        if r is None:
            self._skip(obs, f"client {obs['client']} read the LAC but did not open the ledger as a plain reader")
            return
        self._learned(obs, r, int(obs["lac"]))

    def _write_back_sent(self, obs: Mapping[str, Any], client: int) -> None:
        """A write-back to a bookie outside the recovering client's ensemble: the client replaced a bookie.

        ReadOnlyLedgerHandle.handleBookieFailure keeps the new ensemble in the handle, for its close to write,
        and sends the pending write-backs to the new bookie; the harness sees only those sends.
        """
        if self._metadata is None:
            raise MappingError(f"observation {obs['obs']}: a write-back before the ledger's creation")
        nb = self._bookie(obs, str(obs["bookie"]))
        ensemble = self._recovery_ensembles.get(client, self._metadata.segments[-1][1])
        if nb in ensemble:
            return
        failed = [b for b in self._failed_write_backs.get(client, []) if b in ensemble]
        if not failed:
            raise MappingError(
                f"observation {obs['obs']}: client {client} writes back to bookie {nb}, outside its ensemble "
                f"{list(ensemble)}, and no write-back of it failed"
            )
        b = failed[-1]
        self._recovery_ensembles[client] = tuple(nb if x == b else x for x in ensemble)
        self._emit(obs, client, "RecovererChangesEnsemble", {"c": client, "b": b, "nb": nb})

    def _request(
        self, kind: str, client: int, bookie: int, entry: int, *, recovery: bool, fence: bool
    ) -> dict[str, Any]:
        request: dict[str, Any] = {"type": kind, "client": client, "bookie": bookie, "entry": entry}
        if kind != "AddReq":
            request["lac"] = -1
        request["recovery"] = recovery
        request["fence"] = fence
        return request

    def _reply(self, obs: Mapping[str, Any]) -> None:
        before = len(self.lines)
        self._reply_event(obs)
        for line in self.lines[before:]:
            if line["x-obs"] == int(obs["obs"]) and "x-sent" not in line:
                self._note_sent(line, obs)

    def _note_sent(self, line: dict[str, Any], reply: Mapping[str, Any]) -> None:
        """``x-sent``: the observation of the request's send, from when its bookie may have served it."""
        sent = self._sent_at.get((int(reply["client"]), str(reply["bookie"]), int(reply["entry"])))
        if sent is not None:
            line["x-sent"] = sent

    def _reply_event(self, obs: Mapping[str, Any]) -> None:
        client, entry, rc = int(obs["client"]), int(obs["entry"]), int(obs["rc"])
        bookie = self._bookie(obs, str(obs["bookie"]))
        if obs["op"] == "write-lac":
            self._skip(obs, "the reply to an explicit LAC: the writer ignores it (PendingWriteLacOp only logs)")
            return
        if obs["op"] == "long-poll":
            self._long_poll_answered(obs, bookie, entry, rc)
            return
        if obs["op"] == "add":
            if client == 0:
                self._add_answered.add((bookie, entry))
            if client == 0 and (bookie, entry) in self._stored_early:
                self._stored_early.discard((bookie, entry))
                if rc != OK:
                    raise MappingError(
                        f"observation {obs['obs']}: bookie {bookie} gave a reader the LAC its add of "
                        f"entry {entry} carried, then failed that add ({obs.get('rc_name', rc)})"
                    )
                self._skip(obs, "an ack whose add's step went before a reader's read of the LAC it set")
            elif rc == OK and client == 0 and obs.get("changing"):
                self._held.append(obs)
            elif rc == OK and client == 0 and entry in self._failed_adds:
                # The handle failed the add before this ack came (a refusal as fenced fails every pending add,
                # handleUnrecoverableErrorDuringAdd): the bookie served it, but the ack completes nothing
                # (PendingAddOp.writeComplete returns for an add already completed). Its step keeps its place in
                # the bookie's order, which may come before the refusal, where the spec's writer, which takes
                # an ack in as it is served, counts it: so it observes no LAC of the handle's.
                line = self._ack(obs, client, bookie, entry)
                if line is not None:
                    line["x-late"] = True
            elif rc == OK and client == 0:
                self._release_held(obs)
                self._flush_pending()
                self._pending = (obs, bookie, entry)  # placed when the handle has acted on it (_after)
            elif rc == OK:
                self._ack(obs, client, bookie, entry)
            elif rc == LEDGER_FENCED and client == 0 and entry <= self._completed:
                # PendingAddOp.writeComplete returns early for an add that already has its Qa acks: the
                # writer notes the bookie's failure and acts on it at its next add (delayedWriteFailedBookies).
                self._skip(obs, "a fenced bookie refuses an add that already completed: the writer ignores it")
            elif rc == LEDGER_FENCED and client == 0 and not self._writer_fenced:
                self._writer_fenced = True
                m = self._request("AddReq", client, bookie, entry, recovery=False, fence=False)
                self._emit(
                    obs, client, "BookieReceivesAdd", {"m": m, "replied": True}, {"writer_status": WRITER_FENCED}
                )
            elif rc == LEDGER_FENCED:
                self._skip(obs, "a fenced bookie rejects another add: the writer is already fenced")
            else:
                self._failed(bookie, rc)
                if client == 0 and rc == BOOKIE_UNAVAILABLE:
                    self._unanswered_adds.append((obs, bookie, entry))
                if client != 0:
                    self._failed_write_backs.setdefault(client, []).append(bookie)
                self._skip(obs, f"an add failed with {obs.get('rc_name', rc)}: the client gives up on the bookie")
            return
        flags = self._read_flags.get((client, str(obs["bookie"]), entry))
        if flags is None:
            raise MappingError(f"observation {obs['obs']}: a read reply for a request that was never sent")
        if not flags & FENCING_FLAG:
            self._plain_read(obs, bookie, entry, rc)
        elif rc not in _ANSWERED_READ:
            self._failed(bookie, rc)
            self._skip(obs, f"a read failed with {obs.get('rc_name', rc)}: the client gives up on the bookie")
        elif entry == -1:
            if "returned_entry" in obs:
                self._stored_before_going_down(bookie, int(obs["returned_entry"]))
            m = self._request("FenceReq", client, bookie, -1, recovery=False, fence=True)
            self._emit(obs, client, "BookieReceivesFenceRead", {"m": m, "replied": True})
        else:
            m = self._request("ReadReq", client, bookie, entry, recovery=False, fence=True)
            self._emit(obs, client, "BookieReceivesRecoveryRead", {"m": m, "replied": True})

    def _long_poll_answered(self, obs: Mapping[str, Any], bookie: int, entry: int, rc: int) -> None:
        """A long poll's reply: the bookie's LAC, which the reader learns, then the entry it returned, if any."""
        r = self._reader(obs)
        if r is None or rc != OK or "lac" not in obs:
            self._skip(obs, "a long poll of no plain reader, failed, or without the bookie's LAC")
            return
        self._learned(obs, r, int(obs["lac"]), bookie)
        if obs.get("has_entry") and entry >= 0:
            self._plain_read(obs, bookie, entry, rc)

    def _stored_before_reply(self, obs: Mapping[str, Any], lac: int, bookie: int | None) -> None:
        """The add that gave a bookie the LAC ``lac`` a reader learned from it: its step goes first.

        ``bookie`` is the one that answered, if the observation names it (a long poll), else any. Only
        when no add acked so far carried that LAC, and no explicit LAC as high was sent: the first add
        the writer sent with such a LAC, whose reply has not come, is the one stored (module docstring).
        """
        if lac <= self._explicit_at:
            return  # the bookie may have it from the explicit LAC: its step is hidden, for the checker
        acked = (e for c, b, e in self._acks_since_change if c == 0 and bookie in (None, b))
        if any(self._packaged.get(e, -1) >= lac for e in acked):
            return
        waiting = sorted(
            (sent, address, e)
            for (c, address, e), sent in self._sent_at.items()
            if c == 0
            and self._packaged.get(e, -1) >= lac
            and bookie in (None, self.numbers.get(address))
            and (self.numbers.get(address), e) not in self._add_answered
        )
        if not waiting:
            return  # no add explains the LAC: the checker says what the reader could not have learned
        _, address, entry = waiting[0]
        b = self._bookie(obs, address)
        if self._ack({"obs": obs["obs"], "client": 0, "bookie": address, "entry": entry}, 0, b, entry) is not None:
            self._stored_early.add((b, entry))

    def _plain_read(self, obs: Mapping[str, Any], bookie: int, entry: int, rc: int) -> None:
        r = self._reader(obs)
        if r is None or entry < 0:
            self._skip(obs, "a plain read by a client that is no plain reader of the ledger, or of its LAC")
        elif rc != OK:
            self._skip(obs, f"a plain read failed with {obs.get('rc_name', rc)}: the reader asks another bookie")
        elif entry in self._reader_read[r]:
            self._skip(obs, f"reader {r} read entry {entry} before: the same data, no step")
        else:
            self._reader_read[r].add(entry)
            self._emit(obs, int(obs["client"]), "ReaderReadsEntry", {"r": r, "e": entry, "b": bookie})

    def _stored_before_going_down(self, bookie: int, last: int) -> None:
        """A fencing read's reply names the last entry ``bookie`` holds: the writer's adds up to it that failed as
        the bookie went down were stored, their replies lost with it.

        The bookie writes an entry and journals it before it replies (``BookieImpl.addEntryInternal``, 4.17.2);
        one killed in between has the entry after its restart, from the journal, and the writer saw the add fail
        (``BookieHandleNotAvailable``). The spec's step is ``BookieReceivesAdd(m, replied=FALSE)``, placed where
        the failure reached the writer, before the crash it stands for, and counted as a loss (``MaxLoss``).
        """
        stored = [(obs, entry) for obs, b, entry in self._unanswered_adds if b == bookie and entry <= last]
        self._unanswered_adds = [x for x in self._unanswered_adds if x[1] != bookie or x[2] > last]
        for obs, entry in stored:
            m = self._request("AddReq", 0, bookie, entry, recovery=False, fence=False)
            self._emit(obs, 0, "BookieReceivesAdd", {"m": m, "replied": False})
            self.lost += 1

    def _failed(self, bookie: int, rc: int) -> None:
        if rc == BOOKIE_UNAVAILABLE:
            self.unreachable.add(bookie)
        else:
            self.lost += 1

    def _after(self, obs: Mapping[str, Any]) -> None:
        """The writer's handle once it has acted on a reply: the reply's step goes here, with the LAC it left.

        The harness logs a reply as it reaches the client, before the client acts on
        it; the application's thread may send an add in between, with the LAC the
        handle had before the reply. The spec's bookie step changes the writer's
        LAC at once, so the reply is placed where the handle acted on it: at this
        observation, which the ledger's thread logs right after.
        """
        if int(obs["client"]) != 0:
            self._skip(obs, "the state of a handle other than the writer's")
            return
        lac = int(obs["lac"])
        early, self._placed_early = self._placed_early, None
        if early is not None:
            if self._observes_lac(lac):
                early["observed"] = {**early.get("observed", {}), "writer_lac": lac}
            return
        if self._pending is None:
            self._skip(obs, "the handle's state after a reply that is no step (held back, an error, a duplicate)")
            return
        self._place_pending(obs, lac)

    def _observes_lac(self, lac: int) -> bool:
        """Whether the handle's LAC after a reply is the spec's to compare; it is then the last known."""
        if self._stored_early:
            # An add's step went before a reader's read (module docstring): the handle has not had its ack yet.
            return False
        if self._lac_lags and lac <= self._last_lac:
            # After an ensemble change, adds that reached Qa during it complete only when some add's ack next
            # calls sendAddSuccessCallbacks: until the LAC moves, it lags behind the spec's, which is not seen.
            return False
        self._lac_lags, self._last_lac = False, lac
        return True

    def _place_pending(self, at: Mapping[str, Any], lac: int | None) -> dict[str, Any] | None:
        """The pending reply's step, at the observation ``at``; ``lac``, the handle's LAC after it, if known."""
        assert self._pending is not None
        (reply, bookie, entry), self._pending = self._pending, None
        observed = {"writer_lac": lac} if lac is not None and self._observes_lac(lac) else None
        return self._ack(reply, 0, bookie, entry, at=at, observed=observed)

    def _flush_pending(self) -> None:
        """A writer's reply whose handle state never came: it takes its own place."""
        pending, self._pending, self._placed_early = self._pending, None, None
        if pending is not None:
            self._ack(pending[0], 0, pending[1], pending[2])

    def _unwatched(self, obs: Mapping[str, Any]) -> None:
        self._skip(obs, f"a {obs['op']} request: the ledger spec has no step for it")

    def _complete(self, obs: Mapping[str, Any]) -> None:
        """The application's callback for an add: not a step; it tells which adds completed."""
        if int(obs["client"]) == 0 and int(obs["rc"]) == OK:
            self._completed = max(self._completed, int(obs["entry"]))
        elif int(obs["client"]) == 0:
            self._failed_adds.add(int(obs["entry"]))
            if int(obs["rc"]) == LEDGER_CLOSED and self._drained is None:
                # LedgerHandle.doAsyncCloseInternal drains the pending adds and fails them with
                # LedgerClosedException, at the LAC, before it writes the metadata: the close is the spec's step
                # here, and the acks that come after it complete nothing.
                self._flush_pending()
                self._drained = obs

    def _metadata_event(self, obs: Mapping[str, Any]) -> None:
        client = int(obs["client"])
        written = obs["written"]
        if obs["op"] == "create":
            if not obs["ok"]:
                raise MappingError(f"observation {obs['obs']}: the ledger's creation failed ({obs.get('error')})")
            first = written["ensembles"]["0"]
            self._number_bookies(first, obs)
            self.quorum = (int(written["ensemble_size"]), int(written["write_quorum"]), int(written["ack_quorum"]))
            self._metadata = self._read_metadata(obs, written)
            return
        if self._metadata is None:
            raise MappingError(f"observation {obs['obs']}: a metadata write before the ledger's creation")
        if not obs["ok"]:
            self._failed_write(obs, client, written)
            return
        before, after = self._metadata, self._read_metadata(obs, written)
        self._metadata = after
        observed = self._observed_metadata(after)
        if client == 0:
            if after.state == CLOSED:
                if self._changed_while_held:
                    # The ensemble change came to its end and no reply came after it: the handle completed the
                    # adds these acks finished as the change ended (PendingAddOp.unsetSuccessAndSendWriteRequest
                    # calls sendAddSuccessCallbacks for an add whose write set kept its bookies), before the close.
                    self._release_held(obs)
                closed = {**observed, "writer_status": WRITER_CLOSED}
                self._emit(obs, client, "WriterClosesLedger", observed=closed, at=self._drained)
                return
            replaced = _replaced(before.segments[-1][1], after.segments[-1][1])
            if len(replaced) > 1:
                self._extra_versions += len(replaced) - 1
                after.version += len(replaced) - 1
                observed = self._observed_metadata(after)
            for b, nb in replaced:
                self._emit(obs, client, "WriterChangesEnsemble", {"b": b, "nb": nb})
                self._changed_while_held = bool(self._held)
                # The change drops the replaced bookie's acks and resends pending adds: new acks count again.
                self._acks_since_change = {k for k in self._acks_since_change if k[0] != 0 or k[1] not in (b, nb)}
            self.lines[-1]["observed"] = observed
            return
        if after.state == IN_RECOVERY:
            self._started.add(client)
            self._emit(obs, client, "RecovererStartsRecovery", {"c": client}, observed)
        elif after.state == CLOSED:
            self._emit(obs, client, "RecovererClosesLedger", {"c": client}, observed)
        else:
            raise MappingError(f"observation {obs['obs']}: client {client} wrote the ledger {after.state}")

    def _release_held(self, at: Mapping[str, Any]) -> None:
        """The acks that reached the writer during its ensemble change: it acts on them once the change is done.

        From the reply that reports a bookie's failure until the new metadata is
        written and the handle has taken it in (``LedgerHandle.changingEnsemble``,
        cleared on the ledger's thread after the write), BookKeeper's writer records
        acks but completes no add (``sendAddSuccessCallbacks`` waits), and the new
        segment starts at the LAC it had when the bookie failed. The spec's writer
        completes an add on its Qa-th ack, so these acks are placed where the writer
        acts on them: after the change, before the first reply it meets with the
        flag cleared. The harness reads the flag as each reply reaches the handle.
        """
        held, self._held, self._changed_while_held = self._held, [], False
        if held:
            self._lac_lags = True
        for obs in held:
            self._ack(obs, 0, self._bookie(obs, str(obs["bookie"])), int(obs["entry"]), at=at)

    def _ack(
        self,
        obs: Mapping[str, Any],
        client: int,
        bookie: int,
        entry: int,
        at: Mapping[str, Any] | None = None,
        observed: dict[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """An add's OK reply; a second one to the same request, sent twice, is no step of the spec.

        BookKeeper's writer may send one add twice to a bookie: an add issued as an
        ensemble change is written goes to the new ensemble, and the change then sends
        every pending add to the new bookie again (``unsetSuccessAndSendWriteRequest``).
        The spec's network holds one copy of a request, so its bookie serves it once.
        """
        key = (client, bookie, entry)
        if key in self._acks_since_change:
            self._skip(obs, "a second ack to an add sent twice to one bookie: the spec's network holds one copy")
            return None
        self._acks_since_change.add(key)
        m = self._request("AddReq", client, bookie, entry, recovery=client != 0, fence=False)
        line = self._emit(obs, client, "BookieReceivesAdd", {"m": m, "replied": True}, observed, at=at)
        self._note_sent(line, obs)
        return line

    def finish(self) -> None:
        """The observations are all in: acks still held back (no ensemble change came) go last."""
        self._flush_pending()
        if self._held:
            last = max(int(self._held[-1]["obs"]), *(line["x-obs"] for line in self.lines))
            self._release_held({"obs": last})
        self.lines.sort(key=lambda line: line["seq"])
        self.lines = order_by_service(self.lines)

    def _failed_write(self, obs: Mapping[str, Any], client: int, written: Mapping[str, Any]) -> None:
        """A compare-and-set that lost: the spec's writer learns it is fenced, its recoverer rereads."""
        if client == 0:
            self._release_held(obs)
        self._skip(
            obs,
            f"client {client}'s metadata write failed ({obs.get('error')}); the step that follows "
            "the reread is what the spec sees",
        )

    def _opened(self, obs: Mapping[str, Any]) -> None:
        client = int(obs["client"])
        if client != 0 and obs.get("recovery") and client not in self._started:
            self._started.add(client)
            self._emit(obs, client, "RecovererStartsRecovery", {"c": client})
        elif client != 0 and not obs.get("recovery") and "lac" in obs:
            # LedgerOpenOp without recovery: the handle's LAC is the closed ledger's last entry, or the one read.
            # (A harness that did not report it leaves the client's reads unmapped.)
            r = self._readers.setdefault(client, len(self._readers) + 1)
            self._reader_lac.setdefault(r, -1)
            self._reader_read.setdefault(r, set())
            self._learned(obs, r, int(obs["lac"]))


def _replaced(old: Sequence[int], new: Sequence[int]) -> list[tuple[int, int]]:
    return [(b, nb) for b, nb in zip(old, new, strict=True) if b != nb]


# -- the order in which bookies served what their replies show --------------------------
def _bookie_of(line: Mapping[str, Any]) -> int | None:
    m = line.get("params", {}).get("m")
    return None if m is None else int(m["bookie"])


def _writer_ack(line: Mapping[str, Any]) -> bool:
    """The writer's normal add, acknowledged: its bookie served it before it was fenced."""
    return (
        line["type"] == "BookieReceivesAdd"
        and line["params"]["m"]["client"] == 0
        and not line["params"]["m"]["recovery"]
        and line.get("observed", {}).get("writer_status") != WRITER_FENCED
    )


def _writer_rejected(line: Mapping[str, Any]) -> bool:
    """The writer's normal add, refused as fenced: its bookie served it after it was fenced."""
    return bool(line["type"] == "BookieReceivesAdd" and line.get("observed", {}).get("writer_status") == WRITER_FENCED)


def _fencing(line: Mapping[str, Any]) -> bool:
    return line["type"] == "BookieReceivesFenceRead" or (
        line["type"] == "BookieReceivesRecoveryRead" and bool(line["params"]["m"]["fence"])
    )


def order_by_service(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines reordered so that each bookie's steps come in the order the bookie took them.

    The harness sees replies in the order they reach the clients. Replies to two
    clients may arrive in the other order than their bookie served the requests,
    but the spec's bookie step serves and replies at once. What the replies show
    of a bookie's order is kept: an add of the writer that a bookie acked was
    served before the bookie was fenced, one it refused as fenced after. Where the
    arrival order says otherwise, and the request was on its way when the other
    reply arrived (``x-sent``, the observation of its send, is earlier), the later
    client's steps are moved, with the steps of its own that follow, past the
    other: every client keeps its own order. ``seq`` is then the line's place in
    the new order. A request sent after the other reply arrived was served after
    it, so nothing is moved for it: a bookie that acks an add sent after it was
    fenced is what the oracle must see.
    """
    order = _refusals_after_earlier_acks(list(lines))
    moved, moves = True, 0
    while moved:
        moved = False
        moves += 1
        if moves > len(order) ** 2 + 1:
            raise MappingError("the replies give no order in which each bookie could have served its requests")
        for i, line in enumerate(order):
            b = _bookie_of(line)
            if _writer_ack(line):
                # A fencing reply from the same bookie arrived first, while this add was on its way: the
                # bookie served the add before the fence. (An add sent after that reply was served after it.)
                first = next(
                    (
                        j
                        for j in range(i)
                        if _fencing(order[j]) and _bookie_of(order[j]) == b and _in_flight(line, order[j])
                    ),
                    None,
                )
                if first is not None:
                    order = _move_after(order, first, i, _lines_of(order[first]["process"]))
                    moved = True
                    break
            elif _writer_rejected(line) and not any(_fencing(order[j]) and _bookie_of(order[j]) == b for j in range(i)):
                # The bookie had been fenced, but the reply that says so arrived later.
                later = next(
                    (
                        j
                        for j in range(i + 1, len(order))
                        if _fencing(order[j]) and _bookie_of(order[j]) == b and _in_flight(order[j], line)
                    ),
                    None,
                )
                if later is not None:
                    order, later = _first_of_its_fencing_replies(order, later)
                    if later > i:  # else the fencing reply went before the refusal, with its client's others
                        order = _move_refusal_after(order, i, later)
                    moved = True
                    break
    order = _refusal_where_the_handle_took_it_in(order)
    for seq, line in enumerate(order, start=1):
        line["seq"] = seq
    return order


def _refusal_where_the_handle_took_it_in(order: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The writer's refusal moved past the acks its handle still completed adds with after it came.

    A refusal as fenced makes the handle close the ledger (``handleUnrecoverableErrorDuringAdd``, 4.17.2,
    when its copy of the metadata still says OPEN), but the close is a task queued on the ledger's thread
    (``doAsyncCloseInternal``): acks that reached the handle before the close drains the pending adds still
    complete adds and move the LAC. The spec's writer stops at the refusal, so the refusal goes after the
    last ack whose reported LAC moved, before the writer's next step of its own; acks after that one, which
    completed nothing, stay after it.
    """
    for i, line in enumerate(order):
        if not _writer_rejected(line):
            continue
        before = [x for x in order[:i] if x["process"] == "writer" and "writer_lac" in x.get("observed", {})]
        lac = before[-1]["observed"]["writer_lac"] if before else -1
        last = i
        for j in range(i + 1, len(order)):
            later = order[j]
            if later["process"] != "writer":
                continue
            if _bookie_of(later) is None:
                break
            if _writer_ack(later) and later.get("observed", {}).get("writer_lac", lac) > lac:
                last = j
        if last > i:
            return [*order[:i], *order[i + 1 : last + 1], line, *order[last + 1 :]]
    return order


def _refusals_after_earlier_acks(order: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each refusal of the writer's add moved past the acks of the adds it had sent its bookie before.

    A bookie serves one client's requests in the order they were sent, but it
    acks an add only once its journal has synced and refuses one as fenced at
    once: a refusal can reach the writer before the acks of adds its bookie
    served earlier. The refusal goes just after the last of those acks. It is
    moved past replies only, never past a step the writer took after it: that
    step may have been taken because the writer was fenced.
    """
    i = 0
    while i < len(order):
        line = order[i]
        if not _writer_rejected(line):
            i += 1
            continue
        b, sent = _bookie_of(line), _sent(line)
        last = i
        for j in range(i + 1, len(order)):
            later = order[j]
            if later["process"] == line["process"] and later["type"] != "BookieReceivesAdd":
                break
            if _writer_ack(later) and _bookie_of(later) == b and _sent(later) < sent:
                last = j
        if last == i:
            i += 1
            continue
        order = order[:i] + order[i + 1 : last + 1] + [line] + order[last + 1 :]
    return order


def _first_of_its_fencing_replies(order: list[dict[str, Any]], k: int) -> tuple[list[dict[str, Any]], int]:
    """The fencing reply at ``k`` moved before the client's fencing replies that reached it just before it.

    A recovering client fences every bookie at once; the replies come from
    different bookies, in no order that any one of them took, and say nothing
    the client shows. Of those that were on their way together, the one at ``k``
    may as well come first. Returns the new order and the reply's new place.
    """
    line, first = order[k], k
    for j in range(k - 1, -1, -1):
        if order[j]["process"] != line["process"]:
            continue
        if not (_fencing(order[j]) and _in_flight(line, order[j])):
            break
        first = j
    return [*order[:first], line, *order[first:k], *order[k + 1 :]], first


def _sent(line: Mapping[str, Any]) -> int:
    return int(line.get("x-sent", line["x-obs"]))


def _in_flight(request: Mapping[str, Any], reply: Mapping[str, Any]) -> bool:
    """Was ``request`` sent before ``reply`` reached its client? Then its bookie may have served it first."""
    return _sent(request) < int(reply["x-obs"])


def _move_refusal_after(order: list[dict[str, Any]], refusal: int, anchor: int) -> list[dict[str, Any]]:
    """Move the writer's lines from its refusal at ``refusal`` up to ``anchor`` to just after ``anchor``.

    All but the acks of bookies that a fencing step up to ``anchor`` fenced while the ack was on its way:
    those bookies served the add before the fence, so their acks stay before it, and before the refusal.
    Such an ack reaches the writer after a refusal from another bookie when it waited for its journal to
    sync and the refusal did not; the handle still takes it in until its close runs
    (:func:`_refusal_where_the_handle_took_it_in`).
    """
    fencing = [line for line in order[refusal + 1 : anchor + 1] if _fencing(line)]

    def served_before_a_fence(line: Mapping[str, Any]) -> bool:
        b = _bookie_of(line)
        return _writer_ack(line) and any(_bookie_of(f) == b and _in_flight(line, f) for f in fencing)

    return _move_after(order, refusal, anchor, lambda x: x["process"] == "writer" and not served_before_a_fence(x))


def _lines_of(process: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda line: bool(line["process"] == process)


def _move_after(
    order: list[dict[str, Any]], start: int, anchor: int, moves: Callable[[Mapping[str, Any]], bool]
) -> list[dict[str, Any]]:
    """Move the lines from ``start`` up to ``anchor`` (exclusive) that ``moves`` picks to just after line ``anchor``,
    each part in its order."""
    span = order[start:anchor]
    kept, moved = [x for x in span if not moves(x)], [x for x in span if moves(x)]
    return [*order[:start], *kept, order[anchor], *moved, *order[anchor + 1 :]]
