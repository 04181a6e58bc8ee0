"""Which promise a divergence breaks: the spec's promises judged on the state the implementation reported.

When no behaviour of the spec takes an event, the checker knows where the
trace leaves the spec. This module says whether the implementation broke
one of the protocol's promises there (docs/conformance.md, "Which promise a
divergence breaks"):

- *promises*: the spec's invariants and action properties, but ``TypeOK``,
  which states the model's value domains, not something the protocol
  promises its users;
- the *reports*: for each variable the mode observes, the trace's latest
  word on it, at or before the event (the value, and the event that
  reported it). A value reported stands until the trace reports another:
  the trace format asks that an observer report an observed variable
  whenever it changes (every recorder of the project does, through
  ``ObservedChanges``), and no step a mode hides changes a variable the
  mode observes, but one whose witness it advances too
  (``ObservationMode.witnessed``: the metadata's version, which each event
  that reports the metadata reports, so a hidden write fails the next
  report; the tests check it on every mapping);
- the *reported state*: a spec state the trace could have reached (a
  candidate before the event, or the state a way of taking the event
  reaches) with the reports imposed on it: its observed variables replaced
  by the values reported. The other variables keep the spec's values,
  which the implementation need not share;
- a promise is *broken* when it fails on the reported state and its
  evaluation read only reported variables. The evaluation is a program that
  read nothing else, so it fails for every value of the variables the
  trace does not report: on every state of the implementation consistent
  with the reports. That is why a correct implementation (one that keeps
  the promise, whatever steps it takes) can never be said to break it;
- a promise that fails on the reported state only through variables the
  trace does not report is *undecided*: the reports of those variables
  would decide it;
- a promise may also be said over observed names, projections included
  (``TraceMapping.observed_promises``): where the reports of the names it
  reads break it, the invariant fails on every state with those values, so
  it is broken as surely. That is how a consumer's view (what the cursor
  covers, what was acknowledged) decides a promise whose invariant reads
  the cursor's inner state.

The evaluation records the variables it reads through a proxy of the state
(:class:`_Reading`): promises read a state by its attributes, and what they
compute from them (``spec.write_set(s, e)``) reads through the proxy too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
from ledgerspec.conformance.events import Event
from ledgerspec.conformance.verdict import BrokenPromise, Evidence
from ledgerspec.spec.codecs import CodecError
from ledgerspec.spec.kernel import Spec, evolve
from ledgerspec.spec.tracing import ObservationMode, TraceMapping

__all__ = ["TYPE_INVARIANT", "Judgement", "PromiseJudge", "Report"]

#: The invariant that states the model's value domains (TLA+'s convention): not a promise of the protocol.
TYPE_INVARIANT = "TypeOK"


@attrs.frozen
class Report:
    """The trace's latest word on a variable: its value and the event (replay index) that reported it."""

    value: Any  # the spec value, decoded
    raw: Any  # as the trace wrote it (JSON)
    index: int


@attrs.frozen
class Judgement:
    """The promises a divergence shows broken, and what would decide the ones the reports leave open."""

    broken: tuple[BrokenPromise, ...]
    undecided: tuple[str, ...]


class _Reading:
    """A state that records the names of the variables read from it."""

    __slots__ = ("_read", "_state")

    def __init__(self, state: Any, read: set[str]) -> None:
        self._state = state
        self._read = read

    def __getattr__(self, name: str) -> Any:
        self._read.add(name)
        return getattr(self._state, name)


class PromiseJudge:
    """Judges the promises of one spec on the states a trace reports, in one observation mode."""

    def __init__(self, spec: Spec[Any], mapping: TraceMapping, mode: ObservationMode) -> None:
        self.spec = spec
        self.mapping = mapping
        # variables, then projections: every name a report may carry (projections are reported, not imposed)
        self.reportable = tuple(v for v in mapping.variables if v in mode.observes) + tuple(
            p for p in mapping.projections if p in mode.observes
        )
        self.variables = frozenset(mapping.variables)
        self.invariants = tuple(i for i in spec.invariants if i.name != TYPE_INVARIANT)
        self.properties = tuple(spec.action_properties)
        self._type_ok = next((i.fn for i in spec.invariants if i.name == TYPE_INVARIANT), None)

    def reports(self, events: Sequence[Event], upto: int) -> dict[str, Report]:
        """The latest report of each observed name in ``events[0 .. upto]`` (none when ``upto`` < 0), read from
        the last event back. A latest value that does not decode leaves its name unreported: the check names it
        as bad input where it reads it, and an earlier value may no longer hold."""
        found: dict[str, Report] = {}
        seen: set[str] = set()
        for index in range(min(upto, len(events) - 1), -1, -1):
            observed = events[index].observed
            for name in self.reportable:
                raw = observed.get(name)
                if raw is None or name in seen:
                    continue
                seen.add(name)
                try:
                    found[name] = Report(self.mapping.codecs[name].decode(raw, f"observed.{name}"), raw, index)
                except CodecError:
                    continue
            if len(seen) == len(self.reportable):
                break
        return found

    def impose(self, state: Any, reports: Mapping[str, Report]) -> Any:
        """The state with the reported values in place of the spec's."""
        imposed = {name: r.value for name, r in reports.items() if name in self.variables}
        return evolve(state, **imposed) if imposed else state

    def in_model(self, state: Any) -> str | None:
        """Why a reported state lies outside the model's value domains (TypeOK), or None when it does not."""
        if self._type_ok is None:
            return None
        try:
            return self._type_ok(self.spec, state)
        except Exception as exc:  # a reported value of an unexpected shape: the state is outside the model
            return f"{type(exc).__name__}: {exc}"

    def judge(
        self,
        events: Sequence[Event],
        index: int,
        steps: Iterable[tuple[Any, Any]],
        already: frozenset[str] = frozenset(),
    ) -> Judgement:
        """Which promises the event at ``index`` shows broken. ``steps``: (state before, state after) pairs of the
        spec, for every way the trace may have reached the event and taken it (the state after is the state
        before where the spec cannot take it); the reports are imposed on both. ``already``: promises a previous
        divergence of the trace showed broken, not told again."""
        now, before = self.reports(events, index), self.reports(events, index - 1)
        broken: dict[str, BrokenPromise] = {}
        undecided: dict[str, set[str]] = {}
        for pre, post in steps:
            reported_pre, reported_post = self.impose(pre, before), self.impose(post, now)
            for inv in self.invariants:
                if inv.name in broken or inv.name in already:
                    continue
                read: set[str] = set()
                message = _evaluate(inv.fn, self.spec, _Reading(reported_post, read))
                if message is None:
                    continue
                unreported = read - now.keys()
                if unreported:
                    undecided.setdefault(inv.name, set()).update(unreported)
                else:
                    broken[inv.name] = BrokenPromise(inv.name, inv.doc, message, self._evidence(events, now, read))
            for prop in self.properties:
                if prop.name in broken or prop.name in already:
                    continue
                read_pre: set[str] = set()
                read_post: set[str] = set()
                message = _evaluate(
                    prop.fn, self.spec, _Reading(reported_pre, read_pre), _Reading(reported_post, read_post)
                )
                if message is None:
                    continue
                unreported = (read_pre - before.keys()) | (read_post - now.keys())
                if unreported:
                    undecided.setdefault(prop.name, set()).update(unreported)
                else:
                    evidence = self._evidence(events, before, read_pre) + self._evidence(events, now, read_post)
                    broken[prop.name] = BrokenPromise(prop.name, prop.doc, message, _unique(evidence))
        for said in self.mapping.observed_promises:
            name = said.invariant
            if name in broken or name in already or not all(n in now for n in said.reads):
                continue
            message = _evaluate(said.fn, self.spec, {n: now[n].value for n in said.reads})
            if message is not None:
                words = next(i.doc for i in self.invariants if i.name == name)
                broken[name] = BrokenPromise(name, words, message, self._evidence(events, now, set(said.reads)))
        order = [i.name for i in self.invariants] + [p.name for p in self.properties]
        return Judgement(
            broken=tuple(broken[name] for name in order if name in broken),
            undecided=tuple(
                f"{name} fails on the spec's values of {', '.join(sorted(undecided[name]))}, which the trace does not "
                "report: their reports would decide it"
                for name in order
                if name in undecided and name not in broken
            ),
        )

    def _evidence(self, events: Sequence[Event], reports: Mapping[str, Report], read: set[str]) -> tuple[Evidence, ...]:
        out = []
        for name in self.reportable:  # in the order of the state's fields
            if name in read:
                r = reports[name]
                ev = events[r.index]
                out.append(Evidence(name, r.raw, r.index, ev.type, ev.process, ev.file, ev.line))
        return tuple(out)


def _evaluate(promise: Callable[..., str | None], spec: Spec[Any], *states: Any) -> str | None:
    """A promise's message on reported states; None when it holds, or when it cannot be evaluated there (a
    reported value of a shape the spec never holds: ``in_model`` tells the user)."""
    try:
        return promise(spec, *states)
    except Exception:  # no promise is judged on a state it cannot read
        return None


def _unique(evidence: tuple[Evidence, ...]) -> tuple[Evidence, ...]:
    """The evidence in order, each once; a value reported as JSON may be a list, so it is compared printed."""
    seen: dict[str, Evidence] = {}
    for item in evidence:
        seen.setdefault(str(item), item)
    return tuple(seen.values())
