"""An HTML report of a check run: one self-contained file, readable offline in any browser.

``ledgerspec check PATH... --report out.html`` writes it. It holds:

- the summary: traces, events, how many conform, violate or are
  inconclusive, and every bad input line (file:line);
- the findings: every violating trace in one line, a *bug* (the promises
  it breaks) or a *difference* (it leaves the spec, no promise shown
  broken), and whether it was expected (recorded with a seeded bug, as its
  manifest says) or is a surprise;
- for each violating trace (the first ``SHOWN_VIOLATIONS`` in full): the
  promise it breaks in words, with the reports that establish it, or that
  it only diverges; the divergences after the first; a
  sequence diagram of its events, the failing one marked; the failing event
  as logged; the candidate states at that event, each with what the last
  step changed and, for each way of taking the event, why it is rejected and
  what it would have changed; the shortest spec path to the failure;
- the inconclusive traces, with the bound they hit or the bad input that
  stopped them;
- coverage: the spec's actions and invariants, and how much the traces
  exercised each (:mod:`ledgerspec.conformance.coverage`).

The file has no scripts and fetches nothing: styles are inline and the
diagrams are SVG laid out here (:mod:`ledgerspec.conformance.sequence`). It
is rendered by a Jinja template with autoescaping, so nothing a trace holds
can inject markup.

The events of a violating trace are not kept by the check (a run holds its
verdicts only); the report reads the trace files again for those traces.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import jinja2
import orjson
from ledgerspec.conformance.checker import TraceChecker
from ledgerspec.conformance.coverage import coverage_summary
from ledgerspec.conformance.describe import Change, changes
from ledgerspec.conformance.events import Event
from ledgerspec.conformance.reader import DEFAULT_MAX_LINE_BYTES, TraceInput, read_traces
from ledgerspec.conformance.run import CheckRun
from ledgerspec.conformance.sequence import SequenceDiagram, lay_out
from ledgerspec.conformance.verdict import Candidate, Failure, Verdict
from ledgerspec.spec.codecs import CodecError, canonical_bytes
from ledgerspec.spec.tracing import TraceMapping
from ledgerspec.spec.values import format_value

__all__ = ["SHOWN_VIOLATIONS", "read_events", "render_report", "write_report"]

SHOWN_VIOLATIONS = 20  # violations shown in full; the others in a table

_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("ledgerspec.conformance", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


@attrs.frozen
class Variable:
    """A variable of a state, shown; ``changed`` when the last step changed it."""

    name: str
    value: str
    changed: bool


@attrs.frozen
class SuccessorView:
    step: str | None
    rejection: str
    changes: tuple[Change, ...] | None  # from the candidate state; None when the step is not enabled


@attrs.frozen
class CandidateView:
    number: int
    hidden_steps: tuple[str, ...]
    reached_by: str
    changes: tuple[Change, ...] | None  # what the last step changed (None for an initial state)
    versus_first: tuple[Change, ...] | None  # how it differs from the first candidate (None for the first)
    state: tuple[Variable, ...]
    successors: tuple[SuccessorView, ...]


@attrs.frozen
class ViolationView:
    verdict: Verdict
    failure: Failure
    expected: str | None  # the seeded bug its traces were recorded with: a violation expected, not a surprise
    event: str | None  # the failing event as logged (JSON), if the trace was read again
    diagram: SequenceDiagram | None
    missing: str | None  # why there is no diagram
    candidates: tuple[CandidateView, ...]


class _States:
    """JSON states of a failure, decoded with the mapping's codecs and shown variable by variable."""

    def __init__(self, mapping: TraceMapping) -> None:
        self.mapping = mapping

    def decode(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return {name: self.mapping.codecs[name].decode(value, name) for name, value in state.items()}

    def changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[Change, ...]:
        before, after = self.decode(old), self.decode(new)
        found: list[Change] = []
        for name, value in after.items():
            found += changes(self.mapping.codecs[name], before[name], value, name)
        return tuple(found)

    def variables(self, state: Mapping[str, Any], previous: Mapping[str, Any] | None) -> tuple[Variable, ...]:
        """Each variable in the trace format's notation (canonical JSON), as a trace would report it."""
        codecs = self.mapping.codecs
        return tuple(
            Variable(
                name, canonical_bytes(codecs[name], value).decode(), previous is not None and previous.get(name) != raw
            )
            for (name, value), raw in zip(self.decode(state).items(), state.values(), strict=True)
        )

    def candidate(self, number: int, c: Candidate, first: Candidate) -> CandidateView:
        return CandidateView(
            number=number,
            hidden_steps=c.hidden_steps,
            reached_by=c.reached_by,
            changes=None if c.previous is None else self.changes(c.previous, c.state),
            versus_first=None if c is first else self.changes(first.state, c.state),
            state=self.variables(c.state, c.previous),
            successors=tuple(
                SuccessorView(s.step, s.rejection, None if s.state is None else self.changes(c.state, s.state))
                for s in c.successors
            ),
        )


def read_events(
    paths: Sequence[str | Path],
    traces: Iterable[str],
    checker: TraceChecker,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> dict[str, list[Event]]:
    """The events of the named traces, read again from the files, in the order the checker replays them."""
    wanted = set(traces)
    found: dict[str, list[Event]] = {}
    if not wanted:
        return found
    for item in read_traces(paths, max_line_bytes=max_line_bytes, actions=checker.mapping.actions):
        if isinstance(item, TraceInput) and item.trace in wanted:
            found[item.trace] = checker.replay_order(item.events)
    return found


#: The seeded bug a trace file was recorded with, if its manifest names one (``CheckInputs.seeded_bug_of``).
SeededBugOf = Callable[[str], "str | None"]


def _no_seeded_bug(_file: str) -> str | None:
    return None


def _violation(
    verdict: Verdict, events: Sequence[Event] | None, checker: TraceChecker, seeded_bug_of: SeededBugOf
) -> ViolationView:
    f = verdict.failure
    assert f is not None
    missing, diagram, event = None, None, None
    if events is None:
        missing = f"the events of trace {verdict.trace} were not found in the files when the report was written"
    elif f.event_index >= len(events) or (events[f.event_index].file, events[f.event_index].line) != (f.file, f.line):
        missing = f"trace {verdict.trace} is no longer as it was checked: its files changed since"
    else:
        diagram = lay_out(events, f.event_index, checker.mapping)
        event = orjson.dumps(events[f.event_index].to_json(), option=orjson.OPT_INDENT_2).decode()
    states = _States(checker.mapping)
    try:
        candidates = tuple(states.candidate(k, c, f.candidates[0]) for k, c in enumerate(f.candidates, 1))
    except CodecError as exc:  # a failure from another version of the spec: show what it says, no diffs
        candidates = ()
        missing = (missing + "; " if missing else "") + f"its candidate states do not decode: {exc}"
    return ViolationView(verdict, f, seeded_bug_of(f.file), event, diagram, missing, candidates)


def render_report(
    run: CheckRun,
    checker: TraceChecker,
    events: Mapping[str, Sequence[Event]],
    *,
    sources: Sequence[str | Path] = (),
    title: str | None = None,
    seeded_bug_of: SeededBugOf = _no_seeded_bug,
) -> str:
    """The report as HTML text. ``events``: the events of the violating traces, in replay order (as
    :func:`read_events` gives them); ``sources``: the paths checked, named in the header; ``seeded_bug_of``:
    the seeded bug a trace file was recorded with, whose violations are expected."""
    spec = checker.spec
    shown = [_violation(v, events.get(v.trace), checker, seeded_bug_of) for v in run.violations[:SHOWN_VIOLATIONS]]
    findings = [(v, seeded_bug_of(v.failure.file) if v.failure else None) for v in run.violations]
    coverage = coverage_summary(run.coverage, spec, checker.mapping) if run.coverage is not None else None
    template = _ENVIRONMENT.get_template("report.html.j2")
    return template.render(
        title=title or f"Conformance of traces to spec {spec.name}",
        spec=spec.name,
        mode=checker.mode.name,
        constants=" ".join(f"{k}={format_value(v)}" for k, v in spec.values.items()),
        bounds=checker.bounds,
        sources=[str(s) for s in sources],
        written=datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        run=run,
        violations=shown,
        findings=findings,
        surprises=sum(1 for _, bug in findings if bug is None),
        more_violations=run.violations[SHOWN_VIOLATIONS:],
        coverage=coverage,
        most_steps=max([1, *(n for a in coverage["actions"].values() for n in a.values())]) if coverage else 1,
        guard_docs={(p, g.name): g.doc for p, guards in checker.mapping.guards.items() for g in guards},
        property_docs={p.name: p.doc for p in spec.invariants} | {p.name: p.doc for p in spec.action_properties},
        action_docs={a.name: a.doc for a in spec.actions},
    )


def write_report(
    path: str | Path,
    run: CheckRun,
    checker: TraceChecker,
    sources: Sequence[str | Path],
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    seeded_bug_of: SeededBugOf = _no_seeded_bug,
) -> None:
    """Write the report of a run over ``sources`` to ``path``, reading the violating traces again."""
    wanted = [v.trace for v in run.violations[:SHOWN_VIOLATIONS]]
    events = read_events(sources, wanted, checker, max_line_bytes=max_line_bytes)
    html = render_report(run, checker, events, sources=sources, seeded_bug_of=seeded_bug_of)
    Path(path).write_text(html, encoding="utf-8")
