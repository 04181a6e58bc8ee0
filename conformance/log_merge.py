"""A client's own log of a ledger and the served bookies' log of it, merged into one trace of the ledger spec.

A client under test logs its view of a ledger in the ledger spec's
``client`` mode, and reference bookies served with ``--trace`` log what
they served in its ``bookies`` mode (:mod:`ledgerspec.reference.wire.trace`).
When both stamp their events with the host's monotonic clock (``time``,
``time.monotonic()``: ``CLOCK_MONOTONIC`` on Linux, one clock for every
process of the host), the two merge into one trace, ordered by the stamps:

- a client stamps a step of its own before it sends the requests the step
  calls for, and a reply as it takes it, before it acts on it;
- a bookie stamps a request once it served it (made durable what it
  changed), before it sends its reply.

So each request's send comes before its serving and its serving before its
reply is taken: the order extends the run's happened-before. The merged
trace is checked in the ledger spec's ``merged`` mode with
``RepliesInFlight = 1`` (``spec/ledger/ledger_trace.py``), where a bookie's
step sends its reply and the client takes it in a step of its own
(``ClientReceivesReply``): with the spec's default, a bookie's step that
serves and delivers at once, no order of steps would agree with both logs
whenever two bookies' replies crossed on their way. Each event keeps the
observations of its own log: a bookie's step changes no variable a client
observes, a client's step none a bookie observes. Only a lost message is
searched for; every other step is logged by one side or the other.

What the merge changes (:func:`merge_logs`):

- a reply the client logged taking, the client mode's ``BookieReceivesAdd``,
  ``BookieReceivesFenceRead`` or ``BookieReceivesRecoveryRead`` with
  ``replied``, becomes ``ClientReceivesReply(p)``, ``p`` the reply to the
  request it names: its client, bookie, entry and flags, and its type where
  the request has one answer (``FenceResp``); which answer an add or a
  recovery read got, and what it carried, the checker finds;
- the metadata store's writes, where the bookies' log has them
  (``zookeeper``'s events, and the metadata each bookie's event
  observes), are left out: the client logs its own writes, with its own
  stamps, which the store's need not match;
- ``seq`` counts the merged trace's events; type, process, params, observed,
  time and extension fields are kept as logged.

A line without ``time``, and a log whose stamps go back, are input errors
that name the file and line (:class:`LogMergeError`): such logs were not
stamped by one clock as above, and no order can be trusted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.crosscheck import SERVED, LogLine, paired_logs
from ledgerspec.conformance.manifest import find_inputs
from ledgerspec.conformance.reader import TraceFileError
from ledgerspec.spec.ledger.ledger_trace import METADATA_OBSERVE, METADATA_STORE
from ledgerspec.spec.vocabulary import manifest_json, write_manifest

__all__ = ["MERGED_FILE", "LogMergeError", "MergedTrace", "merge_logs", "merge_paths"]

#: The merged traces' file in the output directory, beside its ``manifest.json``.
MERGED_FILE = "merged.ndjson"
#: The only answer a request has, where it has one (an add is acked or refused; a recovery read finds the entry
#: or not).
_ONE_ANSWER = {"BookieReceivesFenceRead": "FenceResp"}
#: The fields of a request its reply carries too.
_REPLY_FIELDS = ("client", "bookie", "entry", "recovery", "fence")


class LogMergeError(TraceFileError):
    """Logs that cannot be merged by their stamps: what and where."""


@attrs.frozen
class MergedTrace:
    """One client trace and the bookies' trace of its ledger, merged."""

    trace: str  # the client's trace id, which the merged trace keeps
    bookies_trace: str
    lines: tuple[dict[str, Any], ...]
    constants: Mapping[str, Any]
    replies: int  # the client's replies taken, now ClientReceivesReply events


def merge_logs(client: Sequence[LogLine], bookies: Sequence[LogLine], trace: str) -> list[dict[str, Any]]:
    """The events of both logs as one trace ``trace``, in the order of their stamps (module docstring)."""
    bookies = [line for line in bookies if line.event.get("process") != METADATA_STORE]
    stamped = [
        (_stamp(line, previous), side, i, line)
        for side, log in enumerate((client, bookies))
        for i, (line, previous) in enumerate(zip(log, (None, *log[:-1]), strict=True))
    ]
    stamped.sort(key=lambda item: item[:3])  # on equal stamps (none on a nanosecond clock), the client's first
    merged = []
    for seq, (_, side, _, line) in enumerate(stamped, start=1):
        event = dict(line.event)
        if side == 0 and event.get("type") in SERVED:
            event["params"] = {"p": _taken_reply(event, line)}
            event["type"] = "ClientReceivesReply"
        elif side == 1 and isinstance(observed := event.get("observed"), dict):
            event["observed"] = {k: v for k, v in observed.items() if k not in METADATA_OBSERVE}
        merged.append({**event, "trace": trace, "seq": seq})
    return merged


def _stamp(line: LogLine, previous: LogLine | None) -> float:
    time = _time_of(line)
    if time is None:
        raise LogMergeError(
            f"{line.where}: no time stamp: merging needs each event of both logs stamped with the host's monotonic "
            "clock (time.monotonic)"
        )
    before = _time_of(previous) if previous is not None else None
    if previous is not None and before is not None and time < before:
        raise LogMergeError(
            f"{line.where}: its time {time} is before that of the line above it ({previous.where}: {before}): the "
            "log's stamps are not from one monotonic clock"
        )
    return time


def _time_of(line: LogLine) -> float | None:
    time = line.event.get("time")
    return float(time) if isinstance(time, (int, float)) and not isinstance(time, bool) else None


def _taken_reply(event: Mapping[str, Any], line: LogLine) -> dict[str, Any]:
    """The reply a client's step took, as far as its request tells it."""
    params = event.get("params")
    if not isinstance(params, Mapping):
        params = {}
    m = params.get("m")
    if not isinstance(m, Mapping) or params.get("replied") is not True:
        raise LogMergeError(
            f"{line.where}: a client's {event.get('type')} must name the request m whose reply it took, with "
            f"replied true; got params {orjson.dumps(params).decode()}"
        )
    reply = {f: m[f] for f in _REPLY_FIELDS if f in m}
    answer = _ONE_ANSWER.get(str(event.get("type")))
    if answer is not None:
        reply["type"] = answer
    return reply


def merge_paths(client: str | Path, bookies: str | Path, out: Path) -> list[MergedTrace]:
    """Merge each client trace at ``client`` with the bookies' trace of its ledger at ``bookies`` (paired as
    ``cross-check`` pairs them); write them to ``out/merged.ndjson`` with a ``manifest.json`` (mode ``merged``).
    :class:`TraceFileError` (:class:`LogMergeError` among them) for input that cannot be read, paired or merged."""
    client_inputs, bookies_inputs = find_inputs([client]), find_inputs([bookies])
    merged = []
    for client_log, bookies_log in paired_logs(client, bookies):
        client_trace, bookies_trace = _trace_of(client_log), _trace_of(bookies_log)
        constants = {
            **(client_inputs.constants_of(client_trace, client_log[0].file) or {}),
            "RepliesInFlight": 1,
        }
        served = bookies_inputs.constants_of(bookies_trace, bookies_log[0].file) or {}
        for name in ("MaxCrashes", "ExplicitLac", "MaxEntries", "NumBookies"):  # what the bookies saw counts too
            if name in served:
                constants[name] = max(int(served[name]), int(constants.get(name, 0)))
        lines = merge_logs(client_log, bookies_log, client_trace)
        replies = sum(1 for line in lines if line["type"] == "ClientReceivesReply")
        merged.append(MergedTrace(client_trace, bookies_trace, tuple(lines), constants, replies))
    out.mkdir(parents=True, exist_ok=True)
    (out / MERGED_FILE).write_bytes(b"".join(orjson.dumps(line) + b"\n" for m in merged for line in m.lines))
    manifest = manifest_json(
        spec="ledger",
        mode="merged",
        constants={},
        files=[MERGED_FILE],
        traces=[{"trace": m.trace, "constants": dict(m.constants)} for m in merged],
        merged_from={"client": str(client), "bookies": str(bookies)},
    )
    write_manifest(out, manifest)
    return merged


def _trace_of(log: Sequence[LogLine]) -> str:
    return str(log[0].event.get("trace"))
