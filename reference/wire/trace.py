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
crashes (``ServedBookies.crash``)                      ``BookieCrashes(b)``, in every ledger's trace
restarts (``ServedBookies.restart``)                   ``BookieRestarts(b)``, in every ledger's trace
a plain read, a read of the LAC                        none: no step of the ledger spec
=====================================================  ============================================

``replied`` is left out: a bookie does not know whether its reply arrived.
Each event observes ``bookie_entries``, ``bookie_fenced`` and
``bookie_explicit_lac`` as the bookies hold the ledger after it, and
``crashed``; a ledger whose trace has an explicit LAC is checked with
``ExplicitLac = 1``; the bookie's answer is in the
extension field ``x-reply``, and ``time`` is the host's monotonic clock
(``time.monotonic``) when the bookie had served the request, before its
reply was sent: a client's log stamped with the same clock merges with
it (``ledgerspec merge``). A request the spec has no message for (a
malformed entry, another master key: the bookie changes nothing) is left
out, and counted in the manifest's ``unmodelled``.

Bookies are numbered as the spec numbers them: the ledger's first ensemble
is ``1 .. E`` in order, read from the ledger's metadata in ZooKeeper when
the bookies are registered there (with ``E``, ``Qw`` and ``Qa``), the other
served bookies follow in their order. A ledger whose metadata cannot be
read keeps the served bookies' numbers, and its quorums are left for
``ledgerspec check --const``.
"""

from __future__ import annotations

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

    def __init__(self, path: Path, count: int, mutant: str | None = None) -> None:
        self.path = path
        self.count = count
        self.mutant = mutant
        self.steps: list[_Served] = []
        self.unmodelled: Counter[str] = Counter()  # answered requests the spec has no message for, by kind

    # -- what the bookies tell ----------------------------------------------------------------
    def served(self, number: int, bookie: Bookie, request: Request, reply: Reply) -> None:
        """Served bookie ``number`` answered ``request`` with ``reply``."""
        found = _request_record(request)
        if found is None:
            return
        if reply.code in _UNMODELLED:
            self.unmodelled[request.kind.value] += 1
            return
        action, m = found
        lid = request.ledger_id
        self.steps.append(_Served(number, action, lid, m, reply.code.value, {lid: _held(bookie, lid)}))

    def crashed(self, number: int) -> None:
        self.steps.append(_Served(number, _CRASH, None, None, None, {}))

    def restarted(self, number: int, bookie: Bookie) -> None:
        """Served bookie ``number`` started again: what it holds of each ledger after its journal's replay."""
        held = {lid: _held(bookie, lid) for lid in bookie.storage.ledgers}
        self.steps.append(_Served(number, _RESTART, None, None, None, held))

    # -- the trace ------------------------------------------------------------------------------
    def ledgers(self) -> list[int]:
        return list(dict.fromkeys(s.ledger for s in self.steps if s.ledger is not None))

    def write(self, ensembles: Callable[[int], tuple[Sequence[int], Mapping[str, int]] | None]) -> Path:
        """Write the trace file and its ``manifest.json``; returns the trace file's path.

        ``ensembles(ledger)`` gives a ledger's first ensemble as served bookie
        numbers, and its quorums (``E``, ``Qw``, ``Qa``), or None when they are
        not known.
        """
        stem = self.path.name.split(".")[0]
        lines: list[dict[str, Any]] = []
        traces = []
        for ledger in self.ledgers():
            known = ensembles(ledger)
            first, quorums = known if known is not None else ((), {})
            trace_id = f"{stem}-L{ledger}"
            ledger_lines = self._ledger_lines(trace_id, ledger, first)
            entries = [m["entry"] for line in ledger_lines if (m := line["params"].get("m")) and m["type"] == "AddReq"]
            constants = {**quorums, "MaxEntries": max(entries, default=0) + 1}
            if any(line["type"] == "BookieReceivesWriteLac" for line in ledger_lines):
                constants["ExplicitLac"] = 1
            traces.append({"trace": trace_id, "constants": constants})
            lines += ledger_lines
        lines.sort(key=lambda line: line["seq"])
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
        crashes = sum(1 for s in self.steps if s.action == _CRASH)
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

    def _ledger_lines(self, trace_id: str, ledger: int, first: Sequence[int]) -> list[dict[str, Any]]:
        """One ledger's events: its requests, and every crash and restart; ``seq`` the place in the run."""
        order = [*first, *(n for n in range(1, self.count + 1) if n not in first)]
        spec_number = {served: n for n, served in enumerate(order, start=1)}
        held = {n: _Held(frozenset(), False) for n in order}
        crashed: set[int] = set()
        lines = []
        for seq, step in enumerate(self.steps, start=1):
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
            observed = {
                "bookie_entries": [sorted(held[n].entries) for n in order],
                "bookie_fenced": [held[n].fenced for n in order],
                "bookie_explicit_lac": [held[n].explicit_lac for n in order],
                "crashed": sorted(crashed),
            }
            line = trace_line(trace_id, f"bookie-{b}", seq, step.action, params, observed)
            line["time"] = step.time
            if step.reply is not None:
                line["x-reply"] = step.reply
            lines.append(line)
        return lines
