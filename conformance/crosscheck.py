"""A client's own log of a ledger beside what the bookies served of it: each reply the client took, a bookie sent.

A client under test can log its own view of a ledger in the ledger spec's
``client`` mode, and reference bookies served with ``--trace`` log theirs in
the ``bookies`` mode (:mod:`ledgerspec.reference.wire.trace`). Each log is
checked against the spec on its own (``ledgerspec check``), and the two,
stamped by one host's clock, merge into one trace checked with replies in
flight (:mod:`.log_merge`, ``ledgerspec merge``). This module needs no
stamps: it joins the logs on what both saw, the requests served
(:func:`cross_check`):

- a step the client logged as a bookie's answer must be one that bookie
  logged serving: the same action, bookie and message (its type, entry,
  recovery and fence flags, and the client and LAC where the bookie's record
  has them), each served request taken once, in each log's order;
- an add the client counted as acknowledged, its ``writer_acks`` gaining
  ``(entry, bookie)``, must be one the bookie answered ``ok`` (the bookies'
  ``x-reply``): a writer that takes a refusal as fenced for an
  acknowledgement appends past the fence, which a client's log alone shows
  only if it holds the fencing client's steps too.

A request the bookies served that the client did not log is no discrepancy:
its reply may have been lost, or gone to another client.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.manifest import find_inputs
from ledgerspec.conformance.reader import TraceFileError

__all__ = [
    "SERVED",
    "CrossCheck",
    "Discrepancy",
    "LogLine",
    "cross_check",
    "cross_check_paths",
    "paired_logs",
    "read_logs",
]

#: The spec's bookie steps whose reply a client takes.
SERVED = ("BookieReceivesAdd", "BookieReceivesFenceRead", "BookieReceivesRecoveryRead", "BookieReceivesWriteLac")
#: The fields of a message both logs record; ``data`` is the client's payload id, which a bookie does not log.
_FIELDS = ("type", "bookie", "entry", "recovery", "fence", "client", "lac")


@attrs.frozen
class LogLine:
    """One event of a log, as written, and where."""

    file: str
    line: int
    event: Mapping[str, Any]

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


@attrs.frozen
class Discrepancy:
    """A reply the client took that the bookies' log does not bear out."""

    client: LogLine
    bookie: LogLine | None  # the request the bookie served, if one matched
    reason: str

    def __str__(self) -> str:
        return f"{self.client.where}: {self.reason}"


@attrs.frozen
class CrossCheck:
    """One client trace beside one bookies' trace."""

    client_trace: str
    bookies_trace: str
    replies: int  # the client's steps that are a bookie's answer
    matched: int
    discrepancies: tuple[Discrepancy, ...]

    @property
    def agrees(self) -> bool:
        return not self.discrepancies


def cross_check(client: Sequence[LogLine], bookies: Sequence[LogLine]) -> CrossCheck:
    """Join a client's log of one ledger with the bookies' log of it (module docstring)."""
    waiting: dict[tuple[Any, Any, Any], list[LogLine]] = {}  # the requests served and not yet taken, in order
    for served in bookies:
        if served.event.get("type") in SERVED:
            waiting.setdefault(_key(served.event), []).append(served)
    replies = matched = 0
    found: list[Discrepancy] = []
    acks: set[tuple[int, int]] = set()
    for line in client:
        event = line.event
        before, acks = acks, _acks(event, acks)
        if event.get("type") not in SERVED or str(event.get("process", "")).startswith("bookie-"):
            continue
        replies += 1
        message = _message(event)
        candidates = waiting.get(_key(event), [])
        i = next((i for i, s in enumerate(candidates) if _same(message, _message(s.event))), None)
        if i is None:
            reason = f"{_named(event, message)}, which bookie {message.get('bookie')} never served"
            found.append(Discrepancy(line, None, reason))
            continue
        served = candidates.pop(i)
        matched += 1
        answer = served.event.get("x-reply")
        entry, bookie = message.get("entry"), message.get("bookie")
        if (entry, bookie) in acks - before and answer is not None and answer != "ok":
            found.append(Discrepancy(
                line, served, f"the writer counted bookie {bookie}'s answer {answer!r} to its add of entry "
                f"{entry} ({served.where}) as an acknowledgement"))  # fmt: skip
    client_trace = str(client[0].event.get("trace")) if client else "?"
    bookies_trace = str(bookies[0].event.get("trace")) if bookies else "?"
    return CrossCheck(client_trace, bookies_trace, replies, matched, tuple(found))


def _key(event: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """The action and the bookie a step is filed under; the other fields of its message are compared."""
    return event.get("type"), _message(event).get("bookie"), _message(event).get("type")


def _message(event: Mapping[str, Any]) -> Mapping[str, Any]:
    params = event.get("params") or {}
    message = params.get("m") if isinstance(params, Mapping) else None
    return message if isinstance(message, Mapping) else {}


def _same(message: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
    """The same message: every field both records have is equal."""
    return all(message[f] == other[f] for f in _FIELDS if f in message and f in other)


def _acks(event: Mapping[str, Any], before: set[tuple[int, int]]) -> set[tuple[int, int]]:
    """The writer's acknowledgements as the event reports them; a value not reported stands."""
    observed = event.get("observed") or {}
    reported = observed.get("writer_acks") if isinstance(observed, Mapping) else None
    if not isinstance(reported, list):
        return before
    return {(int(a[0]), int(a[1])) for a in reported if isinstance(a, list) and len(a) == 2}


def _named(event: Mapping[str, Any], message: Mapping[str, Any]) -> str:
    what = ", ".join(f"{f} {message[f]}" for f in ("entry", "recovery", "fence") if f in message)
    return f"{event.get('process')} took bookie {message.get('bookie')}'s answer to {message.get('type')} ({what})"


def read_logs(paths: Iterable[str | Path]) -> dict[str, dict[str, list[LogLine]]]:
    """The traces at ``paths`` by observation mode (from their manifests; ``?`` without one), then by trace id.
    A line that is not a JSON object with a ``trace`` id is a :class:`TraceFileError` naming its file and line."""
    inputs = find_inputs(paths)
    logs: dict[str, dict[str, list[LogLine]]] = {}
    for file in inputs.files:
        manifest = inputs.manifest_of(file)
        mode = manifest.mode if manifest is not None else "?"
        try:
            stream = open(file, "rb")  # noqa: SIM115 (closed below, after its lines are read)
        except OSError as exc:
            raise TraceFileError(f"{file}: cannot be read ({exc})") from None
        with stream:
            for number, raw in enumerate(stream, 1):
                if not raw.strip():
                    continue
                try:
                    event = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise TraceFileError(f"{file}:{number}: not JSON ({exc})") from None
                if not isinstance(event, dict) or not isinstance(event.get("trace"), str):
                    raise TraceFileError(f'{file}:{number}: not an event: a JSON object with a "trace" id')
                logs.setdefault(mode, {}).setdefault(event["trace"], []).append(LogLine(file, number, event))
    return logs


def cross_check_paths(client: str | Path, bookies: str | Path) -> list[CrossCheck]:
    """Each client trace at ``client`` beside the bookies' trace of its ledger at ``bookies``
    (:func:`paired_logs`)."""
    return [cross_check(c, b) for c, b in paired_logs(client, bookies)]


def paired_logs(client: str | Path, bookies: str | Path) -> list[tuple[list[LogLine], list[LogLine]]]:
    """Each client trace at ``client`` with the bookies' trace of its ledger at ``bookies``: paired by trace id,
    or the one of each when each side holds one. :class:`TraceFileError` when a trace finds no partner."""
    clients = _one_mode(read_logs([client]), "client", client)
    served = _one_mode(read_logs([bookies]), "bookies", bookies)
    if len(clients) == 1 and len(served) == 1:
        pairs = [(next(iter(clients)), next(iter(served)))]
    else:
        alone = sorted(set(clients) - set(served))
        if alone:
            raise TraceFileError(
                f"{client}: no bookies' trace in {bookies} for {', '.join(alone)}: with several traces on a side, "
                f"each client trace needs the bookies' trace of the same id (there: {', '.join(sorted(served))})"
            )
        pairs = [(t, t) for t in sorted(clients)]
    return [(clients[c], served[b]) for c, b in pairs]


def _one_mode(logs: Mapping[str, dict[str, list[LogLine]]], mode: str, path: str | Path) -> dict[str, list[LogLine]]:
    others = sorted(m for m in logs if m not in (mode, "?"))
    if others:
        raise TraceFileError(f"{path}: traces in mode {', '.join(others)}, where the {mode} mode's are expected")
    found = {**logs.get("?", {}), **logs.get(mode, {})}
    if not found:
        raise TraceFileError(f"{path}: no trace")
    return found
