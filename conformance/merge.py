"""Put the events of one trace, logged by several processes, into the one order the checker replays.

Rules (docs/trace-format.md, "Merging"):

- within a process, ``seq`` strictly increases in the order the lines are
  read; a line that breaks this is bad input;
- when the events carry vector clocks (all of them, or none), the order is
  by the sum of the clock's counters, then process, then ``seq``. If ``a``
  happened before ``b`` then ``clock(a) <= clock(b)`` entry by entry and
  they differ, so the sum grows: this is a linear extension of
  happened-before. Concurrent events are put in one order; they must
  commute in the spec (they do when each process's steps touch only its
  own variables and the messages);
- without vector clocks, the order is by ``seq``, then process: with one
  process that is the log's order; with several, ``seq`` must be a Lamport
  clock (larger than that of every event the process had heard of), whose
  order also extends happened-before. ``time`` is informational only: clocks
  of different hosts drift.

A bad event is not checked, and nothing after its place in the order is
checked either: the check stops there, inconclusive.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from ledgerspec.conformance.events import Event, InputError

__all__ = ["MergedTrace", "merge_trace"]


@attrs.frozen
class MergedTrace:
    """Events in replay order, up to (not including) the place of the first bad one."""

    events: tuple[Event, ...]
    total: int  # events of the trace, bad ones included
    errors: tuple[InputError, ...]
    stopped_at: Event | None  # the first bad event in replay order, if any


def _order_key_clock(e: Event) -> tuple[int, str, int]:
    assert e.clock is not None
    return (sum(e.clock.values()), e.process, e.seq)


def _order_key_seq(e: Event) -> tuple[int, str]:
    return (e.seq, e.process)


def merge_trace(events: Sequence[Event], bad: dict[int, InputError] | None = None) -> MergedTrace:
    """Order the events of one trace (given in reading order); ``bad`` maps ``id(event)`` to its error."""
    bad = dict(bad or {})
    errors: list[InputError] = []
    if not events:
        return MergedTrace((), 0, tuple(bad.values()), None)
    last: dict[str, Event] = {}
    with_clock = [e for e in events if e.clock is not None]
    if with_clock and len(with_clock) != len(events):
        without = next(e for e in events if e.clock is None)
        message = (
            f"trace {events[0].trace!r} mixes events with vector clocks ({with_clock[0].where}) and without "
            f"({without.where}): it cannot be merged"
        )
        error = InputError(without.file, without.line, message, without.trace)
        return MergedTrace((), len(events), (*bad.values(), error), events[0])
    in_order = True  # already in replay order: no sort needed (the usual case)
    previous_key: tuple[int, str] | None = None
    for e in events:
        if bad and id(e) in bad:
            in_order = False
            continue
        previous = last.get(e.process)
        if previous is not None and e.seq <= previous.seq:
            bad[id(e)] = InputError(
                e.file,
                e.line,
                f"out-of-order sequence number: seq {e.seq} of process {e.process!r} in trace {e.trace!r} "
                f"comes after seq {previous.seq} ({previous.where})",
                e.trace,
            )
            in_order = False
            continue
        if e.clock is not None:
            if previous is not None:
                assert previous.clock is not None
                if e.clock.get(e.process, 0) <= previous.clock.get(e.process, 0):
                    bad[id(e)] = InputError(
                        e.file,
                        e.line,
                        f"vector clock of process {e.process!r} does not advance: "
                        f"{e.process}={e.clock.get(e.process, 0)} after {previous.clock.get(e.process, 0)} "
                        f"({previous.where})",
                        e.trace,
                    )
                    in_order = False
                    continue
            key = (sum(e.clock.values()), e.process)
        else:
            key = (e.seq, e.process)
        if previous_key is not None and key < previous_key:
            in_order = False
        previous_key = key
        last[e.process] = e
    if in_order:
        ordered = list(events)
    elif with_clock:
        ordered = sorted(events, key=_order_key_clock)
    else:
        ordered = sorted(events, key=_order_key_seq)
    stopped_at = None
    for i, e in enumerate(ordered):
        if id(e) in bad:
            stopped_at = e
            ordered = ordered[:i]
            break
    errors.extend(bad[id(e)] for e in events if id(e) in bad)
    return MergedTrace(tuple(ordered), len(events), tuple(errors), stopped_at)
