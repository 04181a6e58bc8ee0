"""A sequence diagram of a trace: one lane per process, one row per event, arrows for the messages.

This module lays the diagram out (coordinates, in SVG user units); the
report's template draws it as SVG. Lanes are the processes that log an
event or send or receive a message, in the order the spec's trace mapping
gives (``TraceMapping.processes``: the writer, recovering clients, bookies,
the network). An event is a dot on the lane of the process that logged it;
the messages its params name (``TraceMapping.messages``) are arrows between
lanes on its row. The failing event's row is marked, and the few events
after it, which were not checked, are drawn faded.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import orjson
from ledgerspec.conformance.events import Event
from ledgerspec.spec.tracing import TraceMapping

__all__ = ["Arrow", "Lane", "Row", "SequenceDiagram", "lay_out"]

LABELS_WIDTH = 300  # the column of event labels, left of the lanes
LANE_WIDTH = 130
ROW_HEIGHT = 36  # room for a label above a row's arrows and one below
HEADER_HEIGHT = 40
ARROW_SPACING = 9  # between two arrows of one row
DOT_RADIUS = 5  # an event's dot on its lane
LABEL_CHARS = 40  # longest event label drawn; the full event is in the row's tooltip


@attrs.frozen
class Lane:
    process: str
    x: float


@attrs.frozen
class Arrow:
    x1: float  # the sender's lane
    x2: float  # where the head ends, short of the receiver's lane (its dot)
    y: float
    label: str
    label_y: float  # above the arrow, or below it for the lower of two


@attrs.frozen
class Row:
    index: int  # the event's place in replay order
    y: float
    label: str  # "12 BookieReceivesAdd", cut to LABEL_CHARS
    detail: str  # the whole event, for the tooltip
    x: float  # the lane of the process that logged it
    arrows: tuple[Arrow, ...]
    kind: str  # "checked", "failing" or "unchecked" (after the failing event)


@attrs.frozen
class SequenceDiagram:
    lanes: tuple[Lane, ...]
    rows: tuple[Row, ...]
    width: float
    height: float
    row_height: float
    omitted: int  # events before the first row, not drawn


def _label(index: int, event: Event) -> str:
    text = f"{index} {event.type}"
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _detail(index: int, event: Event) -> str:
    parts = [f"event {index}, {event.process} seq {event.seq} at {event.where}", event.type]
    if event.params:
        parts.append("params " + orjson.dumps(event.params).decode())
    if event.observed:
        parts.append("observed " + orjson.dumps(event.observed).decode())
    return "\n".join(parts)


def lay_out(
    events: Sequence[Event], failing: int, mapping: TraceMapping, *, before: int = 60, after: int = 3
) -> SequenceDiagram:
    """The diagram of ``events`` (in replay order) around the failing one: up to ``before`` events before
    it and ``after`` events after it."""
    first = max(0, failing - before)
    shown = list(enumerate(events[first : failing + after + 1], first))
    messages = {i: tuple(mapping.messages(e.type, e.params)) for i, e in shown}
    processes = {e.process for _, e in shown}
    processes.update(p for sent in messages.values() for m in sent for p in (m.sender, m.receiver))
    order = sorted(processes, key=mapping.lane_order)
    lanes = tuple(Lane(p, LABELS_WIDTH + LANE_WIDTH * (k + 0.5)) for k, p in enumerate(order))
    x_of = {lane.process: lane.x for lane in lanes}
    rows = []
    for k, (i, e) in enumerate(shown):
        y = HEADER_HEIGHT + ROW_HEIGHT * (k + 0.5)
        drawn = [m for m in messages[i] if m.sender != m.receiver]
        arrows = []
        for j, m in enumerate(drawn):
            x1, x2 = x_of[m.sender], x_of[m.receiver]
            dy = ARROW_SPACING * (j - (len(drawn) - 1) / 2)
            head = x2 - DOT_RADIUS if x2 > x1 else x2 + DOT_RADIUS
            arrows.append(Arrow(x1, head, y + dy, m.label, y + dy - 3 if dy <= 0 else y + dy + 10))
        kind = "checked" if i < failing else "failing" if i == failing else "unchecked"
        rows.append(Row(i, y, _label(i, e), _detail(i, e), x_of[e.process], tuple(arrows), kind))
    width = LABELS_WIDTH + LANE_WIDTH * len(lanes)
    height = HEADER_HEIGHT + ROW_HEIGHT * len(rows) + 10
    return SequenceDiagram(lanes, tuple(rows), width, height, ROW_HEIGHT, first)
