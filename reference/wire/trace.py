"""What served bookies saw, as ledger-spec traces in the ``bookies`` observation mode: one file per run.

:class:`ServedTrace` is told, on the bookies' loop, of each request a
served bookie answered (:meth:`ServedTrace.served`), and of each crash and
restart. :meth:`ServedTrace.write` turns that into events of the ledger spec
(``spec/ledger/ledger.py``) in the vocabulary of its trace mapping
(``spec/ledger/ledger_trace.py``, mode ``bookies``), one trace per ledger,
all in one NDJSON file, in the order the bookies served the requests; and a
``manifest.json`` beside it with the spec, the mode, the constants and the
bookies' mutant, if any, so that ``ledgerspec check`` judges the file as it is.

=====================================================  ============================================
a served bookie                                        event, logged by ``bookie-<b>``
=====================================================  ============================================
answers an add (any answer but a malformed entry or    ``BookieReceivesAdd(m)``: ``m`` an ``AddReq``,
another master key)                                    from the writer (client 0) with the LAC in
                                                       the entry's header for a normal add; for a
                                                       recovery add, no client and no LAC
answers a fencing read of entry -1 (the LAC)           ``BookieReceivesFenceRead(m)``, a ``FenceReq``
answers a fencing read of entry e >= 0                 ``BookieReceivesRecoveryRead(m)``, a
                                                       ``ReadReq`` with ``fence``
answers a write of the explicit LAC                    ``BookieReceivesWriteLac(m)``, a ``LacReq``
                                                       from the writer with the LAC in the body
crashes or stops (``ServedBookies.crash``,            ``BookieCrashes(b)`` (the spec's bookie has no
``shut_down``)                                         orderly stop), in each ledger's trace where it
                                                       may matter (below)
restarts (``ServedBookies.restart``)                   ``BookieRestarts(b)``, likewise
a plain read, a read of the LAC                        none: no step of the ledger spec
refuses an add as read-only (a fault), storing nothing none: the hidden loss of its request
serves a request but drops its answer (a fault)        its step, its reply lost: the checker tries
                                                       ``replied`` either way
the proxy in front of ZooKeeper passes a write of the  logged by ``zookeeper``, the client step that
ledger's metadata (``ServedBookies(metadata_proxy=)``) wrote it (:func:`_metadata_steps`):
                                                       ``WriterChangesEnsemble(b, nb)`` for each
                                                       bookie replaced, ``WriterClosesLedger``,
                                                       ``RecovererStartsRecovery``,
                                                       ``RecovererClosesLedger``; the ledger's creation
                                                       is the spec's initial state
=====================================================  ============================================

``replied`` is left out: a bookie does not know whether its reply arrived.
Each event observes ``bookie_entries``, ``bookie_fenced`` and
``bookie_explicit_lac`` as the bookies hold the ledger after it, and
``crashed``, and, where the ledger's metadata writes were recorded whole,
the metadata as the store held it (``meta_status``, ``meta_segments``,
``meta_last_entry``, ``meta_version``: ZooKeeper's version plus one, and
plus one for each step of a write beyond its first); a
ledger whose writes were not (a version that did not pass the proxy) is
written without them, the reason in the manifest's
``metadata_not_recorded``. Each ledger is checked with ``LacLag = 1``: an
add carries the LAC its client had when it packaged the add
(``PendingAddOp.initiate``, release-4.17.2), which may be behind the acks the
bookies had already sent. A ledger whose trace holds an ensemble change
the store recorded is checked with ``RepliesInFlight = 1`` too: the new
ensemble starts after the LAC the writer had as it decided the change, and
the writer takes in no ack from then until the change is written
(``LedgerHandle.changingEnsemble``), though the bookies sent them, so its
taking of each is a step of its own, searched for; the search is larger,
and such a run may need ``--max-candidates`` above the default to be
decided. A ledger whose trace has an explicit LAC is checked with
``ExplicitLac = 1``; the bookie's answer is in the
extension field ``x-reply``, and ``time`` is the host's monotonic clock
(``time.monotonic``) when the bookie had served the request, before its
reply was sent: a client's log stamped with the same clock merges with
it (``ledgerspec merge``). A request the spec has no message for (a
malformed entry, another master key: the bookie changes nothing) is left
out, and counted in the manifest's ``unmodelled``. A ledger's trace
starts at its first step (its creation, where the metadata's writes are
recorded), with the crashes of the bookies down then; after its last
request it holds the crashes and restarts of the bookies that hold some of
it, which a restart may lose. It is checked with ``MaxCrashes`` the
crashes it holds, and ``MaxLoss`` the requests and replies the faults lost.

Bookies are numbered as the spec numbers them: the ledger's first ensemble
is ``1 .. E`` in order, read from the ledger's recorded creation, or else
from its metadata in ZooKeeper when the bookies are registered there (with
``E``, ``Qw`` and ``Qa``), the other served bookies follow in their order. A ledger whose metadata cannot be
read keeps the served bookies' numbers, and its quorums are left for
``ledgerspec check --const``.
"""

from __future__ import annotations

import bisect
import contextlib
import struct
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.reference.bookie import Bookie
from ledgerspec.reference.bookie.entry import EntryFormatError, decode_lac
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind
from ledgerspec.reference.metadata.ledger_metadata import LedgerMetadata, LedgerState
from ledgerspec.reference.metadata.ledger_metadata_format import LedgerMetadataFormatError, decode_ledger_metadata
from ledgerspec.reference.metadata.ledger_paths import DEFAULT_LEDGERS_ROOT, ledger_id_from_path
from ledgerspec.reference.wire.zookeeper_proxy import MetadataWrite
from ledgerspec.spec.ledger.ledger_trace import METADATA_STORE
from ledgerspec.spec.vocabulary import manifest_json, trace_line, write_manifest

__all__ = ["ServedTrace"]

#: An entry's header as a client sends it: ledger id, entry id, the LAC it piggybacks (``encode_entry``).
_HEADER = struct.Struct(">qqq")
_UNMODELLED = frozenset({ReplyCode.REFUSED, ReplyCode.UNAUTHORIZED})
_CRASH, _RESTART = "BookieCrashes", "BookieRestarts"


@attrs.frozen
class _Held:
    """What one bookie holds of one ledger."""

    entries: frozenset[int]
    fenced: bool
    explicit_lac: int = -1

    @property
    def anything(self) -> bool:
        return bool(self.entries) or self.fenced or self.explicit_lac >= 0


@attrs.frozen
class _Served:
    """One request a bookie answered, or a crash or restart (``m`` None), as the bookie saw it."""

    bookie: int  # the served bookie's number
    action: str
    ledger: int | None  # None for a crash or restart: every ledger
    m: Mapping[str, Any] | None
    reply: str | None
    held: Mapping[int, _Held]  # ledger -> what the bookie holds of it after the step
    time: float = attrs.field(factory=time.monotonic)  # when: served and durable, its reply not yet sent


@attrs.frozen
class _Written:
    """One write of a ledger's metadata that ZooKeeper accepted, as the proxy in front of it saw it."""

    ledger: int
    write: MetadataWrite

    @property
    def time(self) -> float:
        return self.write.time  # when its request passed the proxy


@attrs.frozen
class _MetadataLog:
    """A ledger's metadata as the store's writes left it: its creation, then each write after, in order."""

    created: LedgerMetadata
    writes: Mapping[int, LedgerMetadata]  # the write's place in the steps -> the metadata it wrote


def _observed_metadata(metadata: LedgerMetadata, version: int, spec_number: Mapping[str, int]) -> dict[str, Any]:
    """The spec's metadata variables, bookies as the spec numbers them; ``version`` the spec's (the spec counts
    the creation as version 1, ZooKeeper as 0; both add one a step, and a write of the store may be several)."""
    return {
        "meta_status": metadata.state.name,
        "meta_segments": [[s.first_entry_id, [spec_number[b] for b in s.ensemble]] for s in metadata.segments],
        "meta_last_entry": metadata.last_entry_id,
        "meta_version": version,
    }


def _metadata_steps(
    before: LedgerMetadata, after: LedgerMetadata, spec_number: Mapping[str, int]
) -> list[tuple[str, dict[str, Any]]]:
    """The spec's steps for one write of the metadata, as ``(action, params)``: which client took it is read from
    what it changed, as BookKeeper's clients write (``LedgerHandle``, ``LedgerRecoveryOp``, release-4.17.2).

    - IN_RECOVERY: a recovering client's open (``LedgerOpenOp``, doRecovery), ``RecovererStartsRecovery``;
    - CLOSED from IN_RECOVERY: its close (``ReadOnlyLedgerHandle`` after ``LedgerRecoveryOp``),
      ``RecovererClosesLedger``; which recovering client is not on the wire: the checker tries each;
    - CLOSED from OPEN: the writer's ``LedgerHandle.close``, ``WriterClosesLedger``;
    - OPEN: the writer's ensemble change (``LedgerHandle.ensembleChangeLoop``), ``WriterChangesEnsemble(b, nb)``
      for each bookie ``b`` of the last ensemble replaced by ``nb``. BookKeeper replaces in one write every bookie
      whose failure reached the handle while it changed the ensemble before (``handleBookieFailure`` keeps them
      in ``delayedWriteFailedBookies``); the spec replaces one a step, so such a write is as many steps, each
      one more version (:meth:`ServedTrace._ledger_lines` counts them). A write that replaced none (an OPEN
      ledger written again with the same ensembles) is named ``WriterChangesEnsemble`` with no bookie: no step
      of the spec writes that, and the checker says so.
    """
    if after.state is LedgerState.IN_RECOVERY:
        return [("RecovererStartsRecovery", {})]
    if after.state is LedgerState.CLOSED:
        return [("RecovererClosesLedger" if before.state is LedgerState.IN_RECOVERY else "WriterClosesLedger", {})]
    old, new = before.segments[-1].ensemble, after.segments[-1].ensemble
    replaced = [(spec_number[b], spec_number[nb]) for b, nb in zip(old, new, strict=False) if b != nb]
    return [("WriterChangesEnsemble", {"b": b, "nb": nb}) for b, nb in replaced] or [("WriterChangesEnsemble", {})]


def _held(bookie: Bookie, ledger: int) -> _Held:
    info = bookie.storage.ledgers.get(ledger)
    if info is None:
        return _Held(frozenset(), False)
    memtable = (e for (lid, e) in bookie.storage.memtable if lid == ledger)
    lac = decode_lac(info.explicit_lac, None)[1] if info.explicit_lac is not None else -1
    return _Held(frozenset(info.flushed).union(memtable), info.fenced, lac)


def _request_record(request: Request) -> tuple[str, dict[str, Any]] | None:
    """The spec's action and request record for a request the bookie answered; None where the spec has none."""
    if request.kind is RequestKind.ADD:
        m: dict[str, Any] = {"type": "AddReq", "entry": request.entry_id, "recovery": request.recovery, "fence": False}
        if not request.recovery and len(request.data) >= _HEADER.size:
            m["client"] = 0  # only the writer sends normal adds
            m["lac"] = _HEADER.unpack_from(request.data)[2]
        return "BookieReceivesAdd", m
    if request.kind is RequestKind.WRITE_LAC:
        m = {"type": "LacReq", "client": 0}
        with contextlib.suppress(EntryFormatError):  # a malformed one is refused (EBADREQ): counted as unmodelled
            m["lac"] = decode_lac(request.data, None)[1]
        return "BookieReceivesWriteLac", m
    if request.kind in (RequestKind.FENCE, RequestKind.RECOVERY_READ) and request.fence:
        if request.kind is RequestKind.FENCE or request.entry_id < 0:
            return "BookieReceivesFenceRead", {"type": "FenceReq", "fence": True}
        return "BookieReceivesRecoveryRead", {"type": "ReadReq", "entry": request.entry_id, "fence": True}
    return None


class ServedTrace:
    """The requests served bookies answered, and their crashes and restarts, kept until :meth:`write`.

    ``path`` is the trace file to write; ``count`` the number of served
    bookies; ``mutant`` the bookies' seeded bug, if any, which the manifest
    names (their violations are expected). Called on the bookies' loop
    only, one request at a time.
    """

    def __init__(
        self, path: Path, count: int, mutant: str | None = None, ledgers_root: str = DEFAULT_LEDGERS_ROOT
    ) -> None:
        self.path = path
        self.count = count
        self.mutant = mutant
        self.ledgers_root = ledgers_root
        self.steps: list[_Served | _Written] = []
        self.unmodelled: Counter[str] = Counter()  # answered requests the spec has no message for, by kind
        self.losses: Counter[int] = Counter()  # ledger -> its requests or replies the spec counts as lost
        self.metadata_recorded = False  # the clients' metadata writes pass a proxy that tells of them
        self.metadata_not_recorded: dict[str, str] = {}  # trace -> why its metadata writes are left out (at write)

    # -- what the bookies tell ----------------------------------------------------------------
    def served(self, number: int, bookie: Bookie, request: Request, reply: Reply) -> object | None:
        """Served bookie ``number`` answered ``request`` with ``reply``; the step it makes of it, if any (for
        :meth:`reply_dropped`)."""
        found = _request_record(request)
        if found is None:
            return None
        if reply.code in _UNMODELLED:
            self.unmodelled[request.kind.value] += 1
            return None
        action, m = found
        lid = request.ledger_id
        step = _Served(number, action, lid, m, reply.code.value, {lid: _held(bookie, lid)})
        self.steps.append(step)
        return step

    def reply_dropped(self, step: object) -> None:
        """The answer to the request of ``step`` was not sent (a fault): in the spec, its reply lost."""
        if isinstance(step, _Served) and step.ledger is not None:
            self.losses[step.ledger] += 1

    def refused(self, ledger: int) -> None:
        """A bookie refused an add of ``ledger`` as read-only, storing nothing: in the spec, its request lost."""
        self.losses[ledger] += 1

    def crashed(self, number: int) -> None:
        self.steps.append(_Served(number, _CRASH, None, None, None, {}))

    def metadata_written(self, write: MetadataWrite) -> None:
        """ZooKeeper accepted a write that passed the proxy (:mod:`.zookeeper_proxy`); kept if a ledger's metadata."""
        try:
            ledger = ledger_id_from_path(write.path, self.ledgers_root)
        except ValueError:
            return  # a bookie's registration, the ledger id generator's znodes: not a ledger's metadata
        # In its place among the steps by when its request passed: the client decided the write then, from what
        # it knew then (the LAC a new ensemble starts after, say); what the bookies served while ZooKeeper took
        # it comes after it, as in the spec, whose step decides and writes at once.
        self.steps.insert(
            bisect.bisect_right(self.steps, write.time, key=lambda step: step.time), _Written(ledger, write)
        )

    def restarted(self, number: int, bookie: Bookie) -> None:
        """Served bookie ``number`` started again: what it holds of each ledger after its journal's replay."""
        held = {lid: _held(bookie, lid) for lid in bookie.storage.ledgers}
        self.steps.append(_Served(number, _RESTART, None, None, None, held))

    # -- the trace ------------------------------------------------------------------------------
    def ledgers(self) -> list[int]:
        """The ledgers served, and those whose metadata was written through the proxy, in the order first seen."""
        return list(dict.fromkeys(s.ledger for s in self.steps if s.ledger is not None))

    def write(
        self,
        stored: Callable[[int], tuple[LedgerMetadata, int] | None] = lambda ledger: None,
        bookie_numbers: Mapping[str, int] | None = None,
        unrecorded: Sequence[str] = (),
    ) -> Path:
        """Write the trace file and its ``manifest.json``; returns the trace file's path.

        ``stored(ledger)`` gives a ledger's metadata as the store holds it now,
        and its ZooKeeper version, or None when it is not there: the first
        ensemble and the quorums come from it where the writes were not
        recorded, and a version above the last recorded one is a write that
        did not pass the proxy. ``bookie_numbers`` maps each served bookie's
        id to its number; ``unrecorded`` says why a write that passed the
        proxy may be missing (none of the ledgers' metadata writes is then
        used).
        """
        numbers = bookie_numbers or {}
        stem = self.path.name.split(".")[0]
        lines: list[dict[str, Any]] = []
        traces = []
        for ledger in self.ledgers():
            trace_id = f"{stem}-L{ledger}"
            now = stored(ledger)
            log = self._metadata_log(ledger, numbers, unrecorded, now)
            created = log.created if isinstance(log, _MetadataLog) else now[0] if now is not None else None
            first: Sequence[int] = ()
            quorums: dict[str, int] = {}
            if created is not None:
                first = [numbers[b] for b in created.segments[0].ensemble if b in numbers]
                quorums = {"E": created.ensemble_size, "Qw": created.write_quorum_size, "Qa": created.ack_quorum_size}
            ledger_lines = self._ledger_lines(trace_id, ledger, first, log, numbers)
            if all(line["type"] in (_CRASH, _RESTART) for line in ledger_lines):
                continue  # only written through the proxy, and its writes left out: nothing of its own to judge
            entries = [
                m["entry"] for line in ledger_lines if (m := line.get("params", {}).get("m")) and m["type"] == "AddReq"
            ]
            crashes = sum(1 for line in ledger_lines if line["type"] == _CRASH)
            # An add carries the LAC of the moment its client packaged it, which may be behind the acks the
            # bookies had sent (the client takes them in one at a time): the writer's LAC may lag (LacLag).
            constants = {
                **quorums,
                "MaxEntries": max(entries, default=0) + 1,
                "LacLag": 1,
                "MaxCrashes": crashes,
                "MaxLoss": self.losses[ledger],
            }
            if any(line["type"] == "BookieReceivesWriteLac" for line in ledger_lines):
                constants["ExplicitLac"] = 1
            starts = sum(1 for line in ledger_lines if line["type"] == "RecovererStartsRecovery")
            if starts > 1:
                constants["NumRecoverers"] = starts
            trace: dict[str, Any] = {"trace": trace_id, "constants": constants}
            if isinstance(log, _MetadataLog):
                trace["metadata_writes"] = len(log.writes)
            elif log is not None:
                trace["metadata_not_recorded"] = self.metadata_not_recorded[trace_id] = log
            if any(line["type"] == "WriterChangesEnsemble" for line in ledger_lines):
                # A new ensemble starts after the LAC the writer had as it decided the change; it takes in no ack
                # from then until the change is written (LedgerHandle.changingEnsemble), though the bookies sent
                # them: its taking of each is a step of its own.
                constants["RepliesInFlight"] = 1
            traces.append(trace)
            lines += ledger_lines
        lines.sort(key=lambda line: line["seq"])  # stable: the steps of one write keep their order
        for seq, line in enumerate(lines, start=1):
            line["seq"] = seq
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        crashes = sum(1 for s in self.steps if isinstance(s, _Served) and s.action == _CRASH)
        constants = {"NumBookies": self.count, "MaxCrashes": crashes}
        manifest = manifest_json(
            spec="ledger",
            mode="bookies",
            constants=constants,
            files=[self.path.name],
            traces=traces,
            unmodelled=dict(self.unmodelled),
            mutant=self.mutant,
        )
        write_manifest(self.path.parent, manifest)
        return self.path

    def _metadata_log(
        self,
        ledger: int,
        bookie_numbers: Mapping[str, int],
        unrecorded: Sequence[str],
        now: tuple[LedgerMetadata, int] | None,
    ) -> _MetadataLog | str | None:
        """The ledger's metadata as the recorded writes left it; else why they cannot stand for the store's log
        (a write missed, or data that is not a ledger's metadata), or None when no proxy recorded writes."""
        if not self.metadata_recorded:
            return None
        if unrecorded:
            return f"the proxy could not read {len(unrecorded)} writes (the first: {unrecorded[0]})"
        writes = [
            (place, step.write)
            for place, step in enumerate(self.steps)
            if isinstance(step, _Written) and step.ledger == ledger and step.write.data is not None
        ]
        versions = [w.version for _, w in writes]
        if versions != list(range(len(versions))) or not versions:
            return f"ZooKeeper versions {versions} were written through the proxy: the others did not pass it"
        if now is not None and now[1] > versions[-1]:
            return f"ZooKeeper holds version {now[1]}, the proxy passed versions up to {versions[-1]}"
        decoded: dict[int, LedgerMetadata] = {}
        for place, write in writes:
            assert write.data is not None
            try:
                decoded[place] = decode_ledger_metadata(write.data, ledger, where=f"{write.path} v{write.version}")
            except LedgerMetadataFormatError as exc:
                return f"version {write.version} is not BookKeeper's ledger metadata: {exc}"
        named = {b for m in decoded.values() for segment in m.segments for b in segment.ensemble}
        strangers = sorted(named - set(bookie_numbers))
        if strangers:
            return f"its ensembles name bookies not served here: {', '.join(strangers)}"
        created, *later = decoded.values()
        return _MetadataLog(created, dict(zip(list(decoded)[1:], later, strict=True)))

    def _ledger_lines(
        self,
        trace_id: str,
        ledger: int,
        first: Sequence[int],
        log: _MetadataLog | str | None,
        bookie_numbers: Mapping[str, int],
    ) -> list[dict[str, Any]]:
        """One ledger's events: its requests, every crash and restart, and its metadata's writes when recorded
        whole (each event then observes the metadata too); ``seq`` the place in the run, renumbered at
        :meth:`write` (a write of the store may be several steps)."""
        order = [*first, *(n for n in range(1, self.count + 1) if n not in first)]
        spec_number = {served: n for n, served in enumerate(order, start=1)}
        by_id = {bookie_id: spec_number[served] for bookie_id, served in bookie_numbers.items()}
        metadata = log.created if isinstance(log, _MetadataLog) else None
        version = 1  # the spec's: ZooKeeper's plus one, plus one for each step of a write beyond its first
        held = {n: _Held(frozenset(), False) for n in order}
        crashed: set[int] = set()
        lines = []
        start, final, down = self._lifetime(ledger)
        for seq, step in enumerate(self.steps, start=1):
            if seq - 1 < start and not (isinstance(step, _Served) and seq - 1 in down):
                continue  # before the ledger: only the crashes of the bookies still down when it starts matter
            if seq - 1 > final and isinstance(step, _Served) and not held[step.bookie].anything:
                continue  # after it, a crash and restart matter where the bookie holds some of it, to lose
            if isinstance(step, _Written):
                if not isinstance(log, _MetadataLog) or seq - 1 not in log.writes:
                    continue
                before, metadata = metadata, log.writes[seq - 1]
                assert before is not None
                steps = _metadata_steps(before, metadata, by_id)
                version += len(steps)
                for i, (action, written) in enumerate(steps, start=1):
                    # the steps before the last leave the metadata between two versions the store never held
                    whole = i == len(steps)
                    observed = self._observed(held, order, crashed, metadata if whole else None, version, by_id)
                    line = trace_line(trace_id, METADATA_STORE, seq, action, written, observed)
                    line["time"] = step.write.time
                    lines.append(line)
                continue
            if step.ledger not in (None, ledger):
                continue
            b = spec_number[step.bookie]
            if step.action == _CRASH:
                crashed.add(b)
                params: dict[str, Any] = {"b": b}
            elif step.action == _RESTART:
                crashed.discard(b)
                params = {"b": b}
            else:
                assert step.m is not None
                params = {"m": {**step.m, "bookie": b}}
            if ledger in step.held or step.action == _RESTART:
                held[step.bookie] = step.held.get(ledger, _Held(frozenset(), False))
            observed = self._observed(held, order, crashed, metadata, version, by_id)
            line = trace_line(trace_id, f"bookie-{b}", seq, step.action, params, observed)
            line["time"] = step.time
            if step.reply is not None:
                line["x-reply"] = step.reply
            lines.append(line)
        return lines

    def _lifetime(self, ledger: int) -> tuple[int, int, set[int]]:
        """The places of the ledger's first and last steps in the run, and those of the crashes before its first
        step of the bookies that had not restarted by then."""
        own = [place for place, step in enumerate(self.steps) if step.ledger == ledger]  # a crash's is None
        if not own:
            return len(self.steps), len(self.steps), set()
        down: dict[int, int] = {}  # served bookie -> the place of its crash
        for place, step in enumerate(self.steps[: own[0]]):
            if isinstance(step, _Served) and step.action == _CRASH:
                down[step.bookie] = place
            elif isinstance(step, _Served) and step.action == _RESTART:
                down.pop(step.bookie, None)
        return own[0], own[-1], set(down.values())

    @staticmethod
    def _observed(
        held: Mapping[int, _Held],
        order: Sequence[int],
        crashed: set[int],
        metadata: LedgerMetadata | None,
        version: int,
        by_id: Mapping[str, int],
    ) -> dict[str, Any]:
        """What an event observes: the bookies' side, and the metadata as the store holds it, when recorded."""
        observed: dict[str, Any] = {
            "bookie_entries": [sorted(held[n].entries) for n in order],
            "bookie_fenced": [held[n].fenced for n in order],
            "bookie_explicit_lac": [held[n].explicit_lac for n in order],
            "crashed": sorted(crashed),
        }
        if metadata is not None:
            observed.update(_observed_metadata(metadata, version, by_id))
        return observed
