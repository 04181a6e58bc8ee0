"""Why a trace fails: what each candidate state does with the event that no behaviour of the spec takes.

The last step of a check (:mod:`ledgerspec.conformance.checker`), taken only
when a trace fails. For each candidate state (every spec state consistent
with the events before the failing one, reached by its shortest behaviour)
it gives, one sentence per way of taking the event, why that way is
rejected: the guard that fails (from the trace mapping's explanation of the
action), the observed value that differs, or the property the step breaks;
candidates that reject it for the same reasons are told once, with how many
they are. The failure also keeps the shortest spec path to the failing
point and the first candidates with their states.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson
from ledgerspec.conformance.behaviour import Node, Transition
from ledgerspec.conformance.describe import describe_difference
from ledgerspec.conformance.events import Event
from ledgerspec.conformance.verdict import Candidate, Failure, Successor
from ledgerspec.spec.codecs import CodecError
from ledgerspec.spec.kernel import Action, Spec
from ledgerspec.spec.tracing import INIT, NEXT, ObservationMode, TraceMapping

__all__ = ["EXAMINED_CANDIDATES", "SHOWN_CANDIDATES", "FailureExplainer"]

_SORT = orjson.OPT_SORT_KEYS
SHOWN_CANDIDATES = 12  # candidates kept, with their states, in a failure
EXAMINED_CANDIDATES = 500  # candidates whose rejections a failure explains


class FailureExplainer:
    """Explains a failing event of traces of one spec, in one mode, from the checker's view of the spec's steps.

    ``transitions(state, event)``: every way the event's action, with its params, is taken from the state
    (disabled ones included); ``instances(action, state)``: the action's instances there; ``matches(state,
    event)``: do the event's observed values match the state; ``expected(state, name)``: the canonical JSON of
    an observed name in the state.
    """

    def __init__(
        self,
        spec: Spec[Any],
        mapping: TraceMapping,
        mode: ObservationMode,
        *,
        transitions: Callable[[Any, Event], Sequence[Transition]],
        instances: Callable[[Action, Any], list[tuple[Any, ...]]],
        matches: Callable[[Any, Event], bool],
        expected: Callable[[Any, str], bytes],
    ) -> None:
        self.spec = spec
        self.mapping = mapping
        self.mode = mode
        self._transitions = transitions
        self._instances = instances
        self._matches = matches
        self._expected = expected

    def failure(self, events: Sequence[Event], index: int, closure: Mapping[Any, Node]) -> Failure:
        """Why each candidate state rejects the failing event; candidates that reject it for the same
        reasons are told once, with how many they are."""
        ev = events[index]
        ranked = sorted(closure.items(), key=lambda item: item[1].depth)  # shortest behaviour first
        examined = ranked[:EXAMINED_CANDIDATES]
        candidates = []
        groups: dict[tuple[str, ...], list[tuple[str, ...]]] = {}  # rejections -> hidden steps of each candidate
        for k, (state, node) in enumerate(examined):
            ways = self._rejections(state, ev)
            rejections = tuple(reason for _, reason, _ in ways)
            hidden = self._hidden_tail(node)
            groups.setdefault(rejections, []).append(hidden)
            if k < SHOWN_CANDIDATES:
                successors = tuple(
                    Successor(step, why, None if nxt is None else self._state_json(nxt)) for step, why, nxt in ways
                )
                parent = node.parent
                candidates.append(
                    Candidate(
                        hidden,
                        self._state_json(state),
                        successors,
                        reached_by=self._reached_by(node),
                        previous=None if parent is None else self._state_json(parent.state),
                    )
                )
        path = self._path(ranked[0][1]) if ranked else ()
        where = f"event {index} ({self._event_text(ev)}, logged by {ev.process} as seq {ev.seq} at {ev.where})"
        first = next(iter(groups))
        if len(groups) == 1 and len(first) == 1:
            reason = first[0]
            if len(ranked) > 1:
                reason = f"every one of the {len(ranked)} candidate states rejects it: {reason}"
        else:
            reason = f"none of the {len(ranked)} candidate states takes {ev.type}; the first: {'; '.join(first)}"
        lines = [f"{where} matches no behaviour of spec {self.spec.name} ({self.mode.name} mode):"]
        for rejections, hiddens in groups.items():
            if len(ranked) == 1:
                head = "  the state reached:"
            else:
                example = min(hiddens, key=len)
                via = (
                    f" (e.g. one after hidden steps {', '.join(example)} since the previous event)"
                    if example
                    else " (e.g. one with no hidden step since the previous event)"
                )
                head = f"  {len(hiddens)} of {len(ranked)} candidate states{via}:"
            lines.append(head)
            lines += [f"    - {r}" for r in rejections]
        if len(ranked) > len(examined):
            lines.append(f"  ... and {len(ranked) - len(examined)} more candidate states, not examined")
        return Failure(
            event_index=index,
            event_type=ev.type,
            process=ev.process,
            seq=ev.seq,
            file=ev.file,
            line=ev.line,
            reason=reason,
            explanation="\n".join(lines),
            path=path,
            candidates=tuple(candidates),
            candidates_total=len(ranked),
        )

    def _reached_by(self, node: Node) -> str:
        if node.reported:
            return f"(as reported, where the spec diverges) {node.action}"
        return ("(hidden) " if node.hidden else "") + self._step(node.action, node.args)

    def _hidden_tail(self, node: Node) -> tuple[str, ...]:
        """The hidden steps that reached a candidate since the previous event."""
        steps = []
        n: Node | None = node
        while n is not None and n.hidden:
            steps.append(self._step(n.action, n.args))
            n = n.parent
        return tuple(reversed(steps))

    def _path(self, node: Node) -> tuple[str, ...]:
        """The behaviour that reached a candidate, from Init; hidden steps marked."""
        steps = []
        n: Node | None = node
        while n is not None:
            steps.append(self._reached_by(n))
            n = n.parent
        return tuple(reversed(steps))

    def _rejections(self, state: Any, ev: Event) -> list[tuple[str | None, str, Any]]:
        """Why the state cannot take the event, one sentence per way of taking it: (the step, or None when
        no instance matches the params; why it is rejected; the state it reaches, or None)."""
        if ev.type == INIT:
            return [(INIT, self._mismatch_text(state, ev, "the initial state"), None)]
        found = self._transitions(state, ev)
        if not found and ev.type == NEXT:
            return [(None, "no step of the spec is enabled in this state", None)]
        if not found:
            act = self.mapping.actions[ev.type]
            offered = [self._step(act.name, args) for args in self._instances(act, state)]
            given = orjson.dumps(ev.params).decode()
            why = f"no instance of {ev.type} matches the params {given}; the spec offers " + (
                ", ".join(offered[:6]) + (" ..." if len(offered) > 6 else "") if offered else "none in this state"
            )
            return [(None, why, None)]
        # A step whose state the event observes, but that breaks a property, is the likely culprit: first.
        culprits: list[tuple[str | None, str, Any]] = []
        out: list[tuple[str | None, str, Any]] = []
        for action, args, nxt, broken, _, _ in found:
            step = self._step(action, args)
            if nxt is None:
                out.append((step, f"{step} is not enabled: {self._why_disabled(state, action, args)}", None))
            elif broken is not None and self._matches(nxt, ev):
                culprits.append((step, f"{step} {broken}", nxt))
            else:
                out.append((step, self._mismatch_text(nxt, ev, f"after {step}"), nxt))
        return culprits + out

    def _why_disabled(self, state: Any, action: str, args: tuple[Any, ...]) -> str:
        explain = self.mapping.explain.get(action)
        if explain is not None:
            why = explain(self.spec, state, *args)
            if why is not None:
                return str(why)
        act = self.mapping.actions[action]
        if act.params is not None and args not in self._instances(act, state):
            offered = [self._step(action, a) for a in self._instances(act, state)]
            return "these parameters are not an instance the spec offers in this state (it offers " + (
                ", ".join(offered[:6]) + (" ..." if len(offered) > 6 else "") + ")" if offered else "none)"
            )
        return "its guard is false in this state (the trace mapping gives no finer explanation)"

    def _mismatch_text(self, state: Any, ev: Event, when: str) -> str:
        differences = []
        for name, value in ev.observed.items():
            if value is None:
                continue
            if orjson.dumps(value, option=_SORT) == self._expected(state, name):
                continue
            expected = self.mapping.observe(self.spec, state, name)
            codec = self.mapping.codecs[name]
            try:
                decoded = codec.decode(value, f"observed.{name}")
            except CodecError as exc:
                differences.append(str(exc))
                continue
            if decoded != expected:
                differences.append(describe_difference(name, codec, decoded, expected))
        if not differences:
            return f"{when}: the observed values match, but the state is already a candidate"
        return f"{when}: " + "; ".join(differences)

    def _step(self, action: str, args: tuple[Any, ...]) -> str:
        if action == INIT:
            return INIT
        return str(self.spec.step(self.mapping.actions[action], args))

    def _event_text(self, ev: Event) -> str:
        if not ev.params:
            return ev.type
        return f"{ev.type} {orjson.dumps(ev.params).decode()}"

    def _state_json(self, state: Any) -> dict[str, Any]:
        return {name: self.mapping.codecs[name].encode(getattr(state, name)) for name in self.mapping.variables}
