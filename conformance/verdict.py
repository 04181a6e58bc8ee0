"""What the checker says about one trace: conforms, violates or inconclusive, and why.

A verdict is plain data: ``to_json()`` gives a nested object (and
``from_json`` takes it back), ``to_row()`` a flat mapping of strings and
integers (one row per trace, the shape a distributed run collects).
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson
from ledgerspec.conformance.events import InputError

__all__ = [
    "CONFORMS",
    "INCONCLUSIVE",
    "VIOLATES",
    "BoundHit",
    "BrokenPromise",
    "Candidate",
    "Evidence",
    "Failure",
    "Successor",
    "Verdict",
    "undecided_by_stray_line",
]

CONFORMS, VIOLATES, INCONCLUSIVE = "conforms", "violates", "inconclusive"


@attrs.frozen
class Successor:
    """One way of taking the failing event from a candidate state, and why it is rejected."""

    step: str | None  # the action instance; None when no instance matches the event's params
    rejection: str  # the guard that fails, the invariant broken, or the observed value that differs
    state: dict[str, Any] | None  # the state the step reaches (variable -> JSON value); None when not enabled

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "rejection": self.rejection, "state": self.state}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Successor:
        return cls(data["step"], data["rejection"], data["state"])


@attrs.frozen
class Candidate:
    """A spec state the trace could have reached before the failing event, and why it cannot take it."""

    hidden_steps: tuple[str, ...]  # hidden steps taken since the previous event to reach this state
    state: dict[str, Any]  # the state, variable -> JSON value
    successors: tuple[Successor, ...]  # one per way of taking the event
    reached_by: str = "Init"  # the last step of the behaviour to this state (Init: it is an initial state)
    previous: dict[str, Any] | None = None  # the state before that step

    @property
    def rejections(self) -> tuple[str, ...]:
        """Why each way of taking the event is rejected."""
        return tuple(s.rejection for s in self.successors)

    def to_json(self) -> dict[str, Any]:
        return {
            "hidden_steps": list(self.hidden_steps),
            "rejections": list(self.rejections),
            "state": self.state,
            "reached_by": self.reached_by,
            "previous": self.previous,
            "successors": [s.to_json() for s in self.successors],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Candidate:
        return cls(
            hidden_steps=tuple(data["hidden_steps"]),
            state=data["state"],
            successors=tuple(Successor.from_json(s) for s in data["successors"]),
            reached_by=data["reached_by"],
            previous=data["previous"],
        )


@attrs.frozen
class BoundHit:
    """A search bound cut the search short: more states might have matched. Of several, a verdict names the first
    ``max_candidates`` cut, else the first ``max_hidden_steps`` one (``checker._named_bound``)."""

    bound: str  # max_hidden_steps or max_candidates
    limit: int
    event_index: int  # the event before which the search was cut

    def __str__(self) -> str:
        return f"{self.bound}={self.limit} reached before event {self.event_index}"

    def to_json(self) -> dict[str, Any]:
        return {"bound": self.bound, "limit": self.limit, "event_index": self.event_index}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BoundHit:
        return cls(data["bound"], data["limit"], data["event_index"])


@attrs.frozen
class Evidence:
    """A value a broken promise was judged on, and the event that reported it."""

    variable: str
    value: Any  # the value reported, as JSON
    event_index: int  # in replay order
    event_type: str
    process: str
    file: str
    line: int

    def __str__(self) -> str:
        value = orjson.dumps(self.value).decode()
        where = f"event {self.event_index} ({self.event_type}, {self.file}:{self.line})"
        return f"{self.variable} = {value}, reported by {self.process} at {where}"

    def to_json(self) -> dict[str, Any]:
        return {
            "variable": self.variable,
            "value": self.value,
            "event_index": self.event_index,
            "event": self.event_type,
            "process": self.process,
            "file": self.file,
            "line": self.line,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        return cls(
            data["variable"],
            data["value"],
            data["event_index"],
            data["event"],
            data["process"],
            data["file"],
            data["line"],
        )


@attrs.frozen
class BrokenPromise:
    """A promise of the protocol (an invariant or action property of the spec other than TypeOK) that the
    implementation's reported state breaks: the values the trace reported decide it, whatever the values it
    did not report (docs/conformance.md, "Which promise a divergence breaks")."""

    name: str  # the invariant or action property
    words: str  # what it promises: its docstring
    message: str  # the spec's sentence naming the values that break it
    evidence: tuple[Evidence, ...]  # every reported value the judgement read, with the event that reported it

    def __str__(self) -> str:
        return f"{self.name} ({self.words.rstrip('.')}): {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "promise": self.name,
            "words": self.words,
            "message": self.message,
            "evidence": [e.to_json() for e in self.evidence],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BrokenPromise:
        evidence = tuple(Evidence.from_json(e) for e in data["evidence"])
        return cls(data["promise"], data["words"], data["message"], evidence)


@attrs.frozen
class Failure:
    """The event no behaviour of the spec can take, with every candidate state's reason."""

    event_index: int  # in replay order, from 0
    event_type: str
    process: str
    seq: int
    file: str
    line: int
    reason: str  # one line
    explanation: str  # several lines: each candidate state and why it rejects the event
    path: tuple[str, ...]  # the shortest spec behaviour (Init, steps) to a candidate state at the failing event
    candidates: tuple[Candidate, ...]
    candidates_total: int  # candidates examined; only the first few are kept in ``candidates``
    # The promises the implementation's reported state breaks at this event: empty for a divergence that shows
    # no broken promise; then ``undecided`` says which promises the unreported values would decide.
    broken: tuple[BrokenPromise, ...] = ()
    undecided: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """``violates <Promise>, ...`` when the reported state breaks a promise, else ``diverges``."""
        if self.broken:
            return "violates " + ", ".join(b.name for b in self.broken)
        return "diverges"

    @property
    def headline(self) -> str:
        """One line: which promise broke, in its words, or that the trace only diverges; then the reason."""
        if self.broken:
            return f"event {self.event_index} breaks the promise {self.broken[0]}; {self.reason}"
        return f"event {self.event_index} diverges from the spec: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "broken": [b.to_json() for b in self.broken],
            "undecided": list(self.undecided),
            "event_index": self.event_index,
            "event": self.event_type,
            "process": self.process,
            "seq": self.seq,
            "file": self.file,
            "line": self.line,
            "reason": self.reason,
            "explanation": self.explanation,
            "path": list(self.path),
            "candidates_total": self.candidates_total,
            "candidates": [c.to_json() for c in self.candidates],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failure:
        return cls(
            event_index=data["event_index"],
            event_type=data["event"],
            process=data["process"],
            seq=data["seq"],
            file=data["file"],
            line=data["line"],
            reason=data["reason"],
            explanation=data["explanation"],
            path=tuple(data["path"]),
            candidates=tuple(Candidate.from_json(c) for c in data["candidates"]),
            candidates_total=data["candidates_total"],
            broken=tuple(BrokenPromise.from_json(b) for b in data.get("broken", ())),
            undecided=tuple(data.get("undecided", ())),
        )


@attrs.frozen
class Verdict:
    """The checker's answer for one trace."""

    trace: str
    status: str  # conforms, violates or inconclusive
    events: int  # events of the trace, as read
    checked: int  # events matched by a behaviour of the spec
    failure: Failure | None = None  # violates; or inconclusive when a bound was hit before the failing event
    # A search bound hit before the failing event: inconclusive; or, when the reports break a promise all the
    # same, violates, with the first divergence in doubt
    bound: BoundHit | None = None
    input_errors: tuple[InputError, ...] = ()  # inconclusive because the check stopped at bad input
    max_candidates: int = 1  # most candidate states the search held, or examined, for one event
    search: str = "replay"  # the search that decided: replay, depth-first, beam, reduced or breadth-first (checker.py)
    # The divergences after ``failure``, found by going on from the implementation's reported state, in order;
    # ``stopped``: why the check did not go on to the trace's end after the last of them (None when it did).
    further: tuple[Failure, ...] = ()
    stopped: str | None = None

    @property
    def failures(self) -> tuple[Failure, ...]:
        """Every divergence found, in order."""
        return () if self.failure is None else (self.failure, *self.further)

    @property
    def broken_promises(self) -> tuple[BrokenPromise, ...]:
        """The promises the trace shows broken, in the order of their divergences."""
        if self.status != VIOLATES:
            return ()
        return tuple(b for f in self.failures for b in f.broken)

    @property
    def promise_names(self) -> tuple[str, ...]:
        """The names of the promises the trace shows broken, each once, in the order they show."""
        return tuple(dict.fromkeys(b.name for b in self.broken_promises))

    @property
    def finding(self) -> str | None:
        """What a violation is: ``bug`` when the reported states break a promise, ``difference`` when the trace
        only leaves the spec; None when the trace does not violate."""
        if self.status != VIOLATES:
            return None
        return "bug" if self.broken_promises else "difference"

    @property
    def reason(self) -> str:
        """One line saying why the trace does not conform ("" when it does)."""
        if self.status == CONFORMS:
            return ""
        if self.status == VIOLATES:
            assert self.failure is not None
            shown = next((f for f in self.failures if f.broken), None)
            if shown is None:
                return self.failure.reason
            promise = shown.broken[0]
            if self.bound is not None:
                return (
                    f"violates {promise.name} at event {shown.event_index}: {promise.message}; where the trace "
                    f"first leaves the spec is not known: search bound {self.bound}"
                )
            if shown is self.failure:
                return f"violates {promise.name}: {promise.message}; {self.failure.reason}"
            return (
                f"violates {promise.name} at event {shown.event_index}: {promise.message}; it first diverges at "
                f"event {self.failure.event_index}: {self.failure.reason}"
            )
        parts = []
        if self.bound is not None:
            parts.append(f"search bound {self.bound}")
        if self.input_errors:
            first = self.input_errors[0]
            more = f" (and {len(self.input_errors) - 1} more)" if len(self.input_errors) > 1 else ""
            parts.append(f"check stopped at bad input {first}{more}")
        if self.failure is not None:
            parts.append(f"then event {self.failure.event_index} matched no candidate: {self.failure.reason}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "trace": self.trace,
            "status": self.status,
            "events": self.events,
            "checked": self.checked,
            "max_candidates": self.max_candidates,
            "search": self.search,
        }
        if self.status != CONFORMS:
            data["reason"] = self.reason
        if self.failure is not None:
            data["failure"] = self.failure.to_json()
        if self.status == VIOLATES:
            data["finding"] = self.finding
            data["promises"] = sorted({b.name for b in self.broken_promises})
        if self.further:
            data["further"] = [f.to_json() for f in self.further]
        if self.stopped is not None:
            data["stopped"] = self.stopped
        if self.bound is not None:
            data["bound"] = self.bound.to_json()
        if self.input_errors:
            data["input_errors"] = [e.to_json() for e in self.input_errors]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        """The verdict ``to_json()`` gave (a verdict sent from a Spark executor, say)."""
        failure, bound = data.get("failure"), data.get("bound")
        return cls(
            trace=data["trace"],
            status=data["status"],
            events=data["events"],
            checked=data["checked"],
            failure=Failure.from_json(failure) if failure is not None else None,
            bound=BoundHit.from_json(bound) if bound is not None else None,
            input_errors=tuple(InputError.from_json(e) for e in data.get("input_errors", ())),
            max_candidates=data["max_candidates"],
            search=data.get("search", "replay"),
            further=tuple(Failure.from_json(f) for f in data.get("further", ())),
            stopped=data.get("stopped"),
        )

    def to_row(self) -> dict[str, str | int | None]:
        """A flat row: scalars only, lists joined by newlines."""
        f = self.failure
        return {
            "trace": self.trace,
            "status": self.status,
            "events": self.events,
            "checked": self.checked,
            "reason": self.reason or None,
            "finding": self.finding,
            "promises": ", ".join(sorted({b.name for b in self.broken_promises})) or None,
            "divergences": len(self.failures) if f else None,
            "event_index": f.event_index if f else None,
            "event": f.event_type if f else None,
            "file": f.file if f else None,
            "line": f.line if f else None,
            "explanation": f.explanation if f else None,
            "path": "\n".join(f.path) if f else None,
            "bound": str(self.bound) if self.bound else None,
            "input_errors": "\n".join(map(str, self.input_errors)) or None,
            "max_candidates": self.max_candidates,
        }


def undecided_by_stray_line(verdict: Verdict, first_stray: InputError | None) -> Verdict:
    """A violation made undecided by a bad line no trace claims (``first_stray``, the first such line of the file
    of the failing event): a line that is valid JSON but no object, say, names no trace, and may be one of this
    trace's events; when it comes before the failing event in that file, the event may have failed only because
    the trace lost it. The trace is then inconclusive, as a trace with a bad line of its own is. In-process and on
    Spark alike (docs/trace-format.md, "Bad lines")."""
    failure = verdict.failure
    if verdict.status != VIOLATES or failure is None or first_stray is None:
        return verdict
    if first_stray.file != failure.file or first_stray.line >= failure.line:
        return verdict
    return attrs.evolve(verdict, status=INCONCLUSIVE, input_errors=(first_stray, *verdict.input_errors))
