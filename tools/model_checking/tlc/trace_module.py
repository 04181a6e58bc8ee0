"""A fully observed trace as a TLA+ module, for TLC to validate: the trace module of tlaplus/Examples.

As in tlaplus Examples' ``*Trace.tla`` modules, the module extends the spec
without touching it and constrains each step to the logged event: step
``i`` is the event's action with the event's params, its observed values
hold in the next state, and the spec's invariants hold there too (the
Python checker checks them on every matched state). A counter ``matched``
says how many events are matched. TLC explores this behaviour space; the
trace conforms exactly when a state with every event matched is reachable.
The config makes TLC stop there: ``TraceNotMatched`` (``matched <
TraceLength``) is checked as an invariant, so its violation means "the
whole trace is matched". Otherwise the largest ``matched`` reached (TLC's
depth, the trace being deterministic) is where the trace fails, the same
event index the Python checker gives. The spec's action properties are
checked as TLC properties; a violation of one, or of an invariant,
reached at event ``i`` fails the trace at ``i``.

For the ``full`` mode only: events carry all their params, nothing is
hidden between them. (Hidden steps would need each hidden action's
parameter domains in TLA+, which the Python trace mapping does not state.)
Observed projections are written with the TLA+ text the mapping gives
them (``Projection.tla``). Values come from the same codecs as the checker's
and are printed by :func:`ledgerspec.spec.values.format_value`.

This module writes text only; ``ledgerspec.tools.model_checking.tlc.trace_validation`` runs TLC on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.conformance.events import Event
from ledgerspec.conformance.merge import merge_trace
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.tracing import INIT, TraceMapping, mapping_for
from ledgerspec.spec.values import format_value, normalize

__all__ = ["TraceModule", "TraceModuleError", "TraceOutcome", "trace_module"]

MATCHED = "matched"  # the trace module's variable: events matched so far
FINISHED = "TraceNotMatched"  # the invariant whose violation says "every event is matched"


class TraceModuleError(ValueError):
    """A trace that cannot be written as a TLA+ trace module."""


@attrs.frozen
class TraceOutcome:
    """What TLC says of the trace: every event matched, or the first event no behaviour takes."""

    conforms: bool
    event_index: int | None  # 0-based, in replay order; None when it conforms
    reason: str


@attrs.frozen
class TraceModule:
    """The TLA+ text of one trace, its TLC config, and how to read TLC's answer."""

    name: str  # the module's name (and its file's)
    spec_module: str  # the module it extends
    text: str
    config: str
    events: int  # events in the trace
    start: int  # events matched in the initial state: 1 when the trace opens with Init

    def write(self, directory: Path) -> tuple[Path, Path]:
        """Write the module and its config; the paths of both. TLC finds the spec's module on its library path."""
        directory.mkdir(parents=True, exist_ok=True)
        module = directory / f"{self.name}.tla"
        module.write_text(self.text)
        config = directory / f"{self.name}.cfg"
        config.write_text(self.config)
        return module, config

    def outcome(
        self, violation: str | None, states_in_violation: int, depth: int | None, distinct_states: int
    ) -> TraceOutcome:
        """The verdict from TLC's report: the name of the invariant or property it found violated (and the
        number of states of its counterexample), the depth of its search and its count of distinct states."""
        if violation == FINISHED:
            return TraceOutcome(True, None, "TLC matched every event")
        if violation is not None:
            index = self.start + states_in_violation - 2  # the step into the counterexample's last state
            return TraceOutcome(False, index, f"event {index} reaches a state that breaks {violation}")
        if distinct_states == 0:
            return TraceOutcome(False, 0, "no initial state of the spec matches the Init event")
        index = self.start + (depth or 1) - 1
        return TraceOutcome(False, index, f"no behaviour of the spec takes event {index}")


def trace_module(
    events: Sequence[Event],
    spec: Spec[Any],
    *,
    mapping: TraceMapping | None = None,
    name: str = "Trace",
    spec_module: str | None = None,
) -> TraceModule:
    """The TLA+ trace module of one fully observed trace (events in reading order) of ``spec``."""
    mapping = mapping or mapping_for(spec.name)
    merged = merge_trace(events)
    if merged.errors:
        raise TraceModuleError(f"the trace cannot be merged: {merged.errors[0]}")
    ordered = list(merged.events)
    if not ordered:
        raise TraceModuleError("the trace has no events")
    trace_id = ordered[0].trace
    start = 1 if ordered[0].type == INIT else 0
    spec_module = spec_module or spec.name
    variables = ", ".join(mapping.variables)
    lines = [
        f"{'-' * 28} MODULE {name} {'-' * 28}",
        f"\\* Trace {_comment(trace_id)} of spec {spec.name}, {len(ordered)} events, as a behaviour of the spec:",
        "\\* step i is event i's action with its params, and its observed values and the",
        "\\* spec's invariants hold after it. Written by ledgerspec.tools.model_checking.tlc.trace_module.",
        f"EXTENDS {spec_module}, TLC",
        "",
        f"VARIABLE {MATCHED}  \\* events matched so far; the next one is event {MATCHED} (from 0)",
        "",
        f"TraceLength == {len(ordered)}",
        f"TraceVars == <<{variables}, {MATCHED}>>",
        "StateOK == " + (" /\\ ".join(inv.name for inv in spec.invariants) or "TRUE"),
        "",
    ]
    first = _observed(ordered[0], mapping, spec, primed=False) if start else []
    lines.append(f"TraceInit == Init /\\ {MATCHED} = {start}" + "".join(f" /\\ {c}" for c in first))
    for i, e in enumerate(ordered[start:], start):
        if e.type == INIT:
            raise TraceModuleError(f"{e.where}: Init must be the first event")
        step = [_call(e, mapping), *_observed(e, mapping, spec, primed=True), "StateOK'"]
        lines.append(f"Event{i} == " + " /\\ ".join(step) + f"  \\* {_comment(e.where)}")
    lines.append("")
    arms = [f"({MATCHED} = {i} /\\ Event{i})" for i in range(start, len(ordered))]
    lines.append(f"TraceNext == /\\ {MATCHED}' = {MATCHED} + 1")
    lines.append("             /\\ \\/ " + ("\n                \\/ ".join(arms) if arms else "FALSE"))
    lines += [
        "",
        "\\* Checked as an invariant: TLC reports it violated when every event is matched.",
        f"{FINISHED} == {MATCHED} < TraceLength",
        "=" * 77,
        "",
    ]
    config = ["CONSTANTS"]
    config += [f"    {k} = {format_value(v)}" for k, v in spec.values.items()]
    config += ["INIT TraceInit", "NEXT TraceNext", "INVARIANTS", *(f"    {i.name}" for i in spec.invariants)]
    config.append(f"    {FINISHED}")
    if spec.action_properties:
        config += ["PROPERTIES", *(f"    {p.name}" for p in spec.action_properties)]
    return TraceModule(name, spec_module, "\n".join(lines), "\n".join(config) + "\n", len(ordered), start)


def _comment(text: str) -> str:
    return " ".join(text.split())


def _call(e: Event, mapping: TraceMapping) -> str:
    action = mapping.actions.get(e.type)
    if action is None:
        raise TraceModuleError(f"{e.where}: {e.type!r} is not an action of spec {mapping.spec_type.name}")
    codecs = mapping.param_codecs[e.type]
    missing = [n for n in codecs if e.params.get(n) is None]
    if missing or set(e.params) - set(codecs):
        raise TraceModuleError(f"{e.where}: a trace module needs every parameter of {e.type} and no other")
    args = [format_value(normalize(c.decode(e.params[n], f"params.{n}"))) for n, c in codecs.items()]
    return e.type + (f"({', '.join(args)})" if args else "")


def _observed(e: Event, mapping: TraceMapping, spec: Spec[Any], *, primed: bool) -> list[str]:
    prime = "'" if primed else ""
    conditions = []
    for name, value in e.observed.items():
        if value is None:
            continue
        text = format_value(normalize(mapping.codecs[name].decode(value, f"observed.{name}")))
        if name in mapping.variables:
            conditions.append(f"{name}{prime} = {text}")
            continue
        tla = mapping.projections[name].tla
        if tla is None:
            raise TraceModuleError(f"{e.where}: projection {name} has no TLA+ text in the trace mapping")
        conditions.append(f"({tla}){prime} = {text}")
    return conditions
