"""What a TLC run says, read from its output: the verdict, the counts, the counterexamples, and TLC's errors.

TLC runs in ``-tool`` mode (:mod:`ledgerspec.tools.model_checking.tlc.runner`),
where every message is framed as ``@!@!@STARTMSG <code>:<class> @!@!@ ...
@!@!@ENDMSG <code> @!@!@`` with the message codes of ``tlc2.output.EC``, so
the verdict is read by code rather than by wording: :func:`parse_tlc_output`
turns a run's output into a :class:`TlcResult`, or raises
:class:`TlcSpecError` when TLC reported an error instead of a verdict. States
and values are read by :mod:`ledgerspec.tools.model_checking.tlc.tla_parse`.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
from ledgerspec.tools.model_checking.tlc.tla_parse import parse_dump, parse_state

__all__ = [
    "TlcActionCoverage",
    "TlcError",
    "TlcResult",
    "TlcSpecError",
    "TlcTraceStep",
    "TlcUnavailable",
    "TlcViolation",
    "error_messages",
    "parse_tlc_output",
]


# ---------------------------------------------------------------------------
# Errors


class TlcError(Exception):
    """TLC could not check the model."""


class TlcUnavailable(TlcError):  # noqa: N818
    """TLC cannot be run here: ``tla2tools.jar``, JPype or Java is missing."""


class TlcSpecError(TlcError):
    """TLC rejected the spec or config, or failed while evaluating them.

    The message holds TLC's own error text; ``tlc_output`` the same text
    alone, ``log_path`` the complete TLC output (None when it was in a temporary directory, now removed).
    """

    def __init__(self, message: str, *, spec: Path, cfg: Path, tlc_output: str, log_path: Path | None) -> None:
        super().__init__(message)
        self.spec = spec
        self.cfg = cfg
        self.tlc_output = tlc_output
        self.log_path = log_path


# ---------------------------------------------------------------------------
# Results


def _frozen_state(state: Mapping[str, Any]) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(state))


@attrs.frozen
class TlcTraceStep:
    """One state of a trace and the action that led to it.

    ``action`` is the name TLC gives the action (``"Inc"`` for
    ``<Inc line 6, col 8 to line 6, col 78 of module M>``) and
    ``"Initial predicate"`` for the first state; ``location`` the rest of
    TLC's label, if any.  ``state`` maps variables to normal-form values.
    """

    action: str
    state: Mapping[str, Any] = attrs.field(converter=_frozen_state, hash=False)
    location: str | None = None


@attrs.frozen
class TlcViolation:
    """A violation TLC found, with the behaviour that shows it.

    For ``kind == "liveness"`` the behaviour is a lasso: after the last state
    of ``trace`` it goes back to state number ``loop_to`` (1-based) by
    ``loop_action``; ``loop_action == "Stuttering"`` (with ``loop_to`` the last
    state) means that it stutters in the last state forever.
    """

    kind: str
    name: str | None
    message: str
    trace: tuple[TlcTraceStep, ...]
    loop_to: int | None = None
    loop_action: str | None = None


@attrs.frozen
class TlcActionCoverage:
    """One action as TLC's coverage report (``-coverage``) counts it.

    TLC splits Next into actions at its disjunctions and its existential quantifiers over constant sets, and
    names each after the innermost operator whose body it is part of; when the action is only a part of that
    body (a quantifier over a set that depends on the state, a disjunct written in place), TLC also gives the
    place of that part, ``span``.
    """

    name: str
    module: str
    line: int  # where the operator is defined
    span: tuple[int, int, int, int] | None  # (line, column, line, column) of the action within the body
    distinct_states: int  # states the action reached first
    states_generated: int  # steps it took

    @property
    def label(self) -> str:
        """TLC's name for the action, with the place of its part when it is one."""
        where = f" ({self.module} line {self.span[0]}, col {self.span[1]})" if self.span is not None else ""
        return self.name + where


@attrs.frozen
class TlcResult:
    """What one TLC run reported.

    ``distinct_states`` and ``states_generated`` are TLC's final counts (0 when
    TLC stopped before counting), ``depth`` the depth of the state graph when
    TLC reports it, ``seconds`` the wall time of the run.  ``log_path`` holds
    TLC's complete output; by default it lies in a temporary directory that is
    removed when the interpreter exits.
    """

    distinct_states: int
    states_generated: int
    depth: int | None
    seconds: float
    violations: tuple[TlcViolation, ...]
    log_path: Path
    dump_path: Path | None
    warnings: tuple[str, ...] = ()
    #: TLC's optimistic estimate of the probability of a fingerprint collision, when it printed one
    collision_probability: float | None = None
    #: the actions of TLC's last coverage report, in its order; empty when TLC ran without coverage
    coverage: tuple[TlcActionCoverage, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    def states(self) -> list[dict[str, Any]]:
        """The distinct states TLC found, parsed from its ``-dump`` file."""
        if self.dump_path is None:
            raise ValueError("TLC did not dump its states; run it with run_tlc(..., dump_states=True)")
        return parse_dump(self.dump_path)


# ---------------------------------------------------------------------------
# Reading TLC's output

# Message codes of tlc2.output.EC (TLC 2.15).
_GENERAL = 1000
_ASSUMPTION_FALSE = 2104
_INVARIANT_VIOLATED_INITIAL = 2107
_PROPERTY_VIOLATED_INITIAL = 2108
_INVARIANT_VIOLATED = 2110
_ACTION_PROPERTY_VIOLATED = 2112
_DEADLOCK = 2114
_TEMPORAL_VIOLATED = 2116
_BEHAVIOR_UP_TO_HERE = 2121
_BACK_TO_STATE = 2122
_NESTED_EXPRESSION = 2103
_ASSERT_FAILED = 2132
_STATS = 2199
_STATS_DFID = 2204
_PROGRESS = 2200
_SEARCH_DEPTH = 2194
_STATE = 2217
_STUTTERING = 2218
_SANY_START = 2220
_SANY_END = 2219
_COUNTER_EXAMPLE = 2264
_COVERAGE_START = 2201
_COVERAGE_NEXT = 2772
_PARSING_FAILED = (3002, 2171)

# Message classes of tlc2.output.MP.
_ERROR, _TLCBUG, _WARNING = 1, 2, 3

_MARK_RE = re.compile(r"@!@!@(?:STARTMSG (-?\d+):(\d+)|ENDMSG (-?\d+)) @!@!@\r?\n?")
_LOCATION = r"line \d+, col \d+ to line \d+, col \d+ of module \S+"
_LOCATION_RE = re.compile(_LOCATION)
_ACTION_RE = re.compile(rf"<(?P<name>.*?)(?: (?P<loc>{_LOCATION}))?>")
_STATE_HEAD_RE = re.compile(r"(\d+): ([^\n]*)\n?")
_BACK_TO_RE = re.compile(r"(\d+): Back to state: ([^\n]*)")
_STATS_RE = re.compile(r"([\d,]+) states generated.*?([\d,]+) distinct states found")
_DEPTH_RE = re.compile(r"search is (\d+)")
# In the final report: "calculated (optimistic):  val = 1.1E-13".
_COLLISION_RE = re.compile(r"calculated \(optimistic\):\s+val = ([0-9.]+(?:E-?[0-9]+)?)")
_VIOLATION_NAME_RE = {
    _INVARIANT_VIOLATED_INITIAL: re.compile(r"Invariant (.+?) is violated by the initial state:\n?"),
    _PROPERTY_VIOLATED_INITIAL: re.compile(r"Property (.+?) is violated by the initial state:\n?"),
    _INVARIANT_VIOLATED: re.compile(r"Invariant (.+?) is violated\."),
    _ACTION_PROPERTY_VIOLATED: re.compile(r"Action property (.+?) is violated\."),
}
# "<ProducerSends line 141, col 1 to line 141, col 16 of module managed_ledger>: 10:113", and for a part of an
# operator's body "<Next line 285, col 1 to line 285, col 4 of module managed_ledger (290 8 290 52)>: 47:63".
_COVERAGE_NEXT_RE = re.compile(
    r"<(?P<name>\S+) line (?P<line>\d+), col \d+ to line \d+, col \d+ of module (?P<module>\S+)"
    r"(?: \((?P<span>\d+ \d+ \d+ \d+)\))?>: (?P<distinct>[\d,]+):(?P<generated>[\d,]+)"
)
_SANY_PROGRESS_RE = re.compile(r"^(?:Parsing file .*|Semantic processing of module .*)\n?", re.MULTILINE)


@attrs.frozen
class _Message:
    code: int
    cls: int
    text: str  # with the text of nested messages where TLC printed them
    nested: tuple[_Message, ...]


def _split_messages(output: str) -> list[_Message | str]:
    """TLC's ``-tool`` output as messages and the unframed text between them (SANY's report, ``Print``)."""
    items: list[_Message | str] = []
    # Open messages: code, class, text parts, nested messages.
    stack: list[tuple[int, int, list[str], list[_Message]]] = []

    def close_innermost() -> None:
        code, cls, parts, nested = stack.pop()
        message = _Message(code, cls, "".join(parts), tuple(nested))
        if stack:
            stack[-1][2].append(message.text)
            stack[-1][3].append(message)
        else:
            items.append(message)

    pos = 0
    for m in _MARK_RE.finditer(output):
        chunk = output[pos : m.start()]
        pos = m.end()
        if stack:
            stack[-1][2].append(chunk)
        elif chunk.strip():
            items.append(chunk)
        if m.group(1) is not None:
            stack.append((int(m.group(1)), int(m.group(2)), [], []))
        elif stack:
            close_innermost()
    tail = output[pos:]
    if stack:  # output cut short, e.g. by a crash: close what is open
        stack[-1][2].append(tail)
        while stack:
            close_innermost()
    elif tail.strip():
        items.append(tail)
    return items


def error_messages(output: str) -> list[str]:
    """The texts of the messages TLC's output reports as errors (message class ERROR)."""
    return [m.text.strip() for m in _split_messages(output) if isinstance(m, _Message) and m.cls == _ERROR]


def _action(label: str) -> tuple[str, str | None]:
    m = _ACTION_RE.fullmatch(label.strip())
    if m is None:
        return label.strip(), None
    return m.group("name"), m.group("loc")


def _count(text: str) -> int:
    return int(text.replace(",", ""))


class _Builder:
    """A violation whose trace is still being read; with kind "spec-error", an error report."""

    def __init__(self, kind: str, name: str | None, message: str) -> None:
        self.kind = kind
        self.name = name
        self.message = message.strip()
        self.steps: list[TlcTraceStep] = []
        self.loop_to: int | None = None
        self.loop_action: str | None = None
        self.extra: list[str] = []  # further text: positions of nested expressions, trace text of errors

    def add_state(self, text: str, difftrace: bool) -> None:
        head = _STATE_HEAD_RE.match(text)
        if head is None:
            action, location, body = "Initial predicate", None, text
        else:
            action, location = _action(head.group(2))
            body = text[head.end() :]
        state = parse_state(body)
        if difftrace and self.steps:
            state = {**self.steps[-1].state, **state}
        self.steps.append(TlcTraceStep(action, state, location))

    def violation(self) -> TlcViolation:
        message = "\n".join([self.message, *(e.strip() for e in self.extra)]).strip()
        return TlcViolation(self.kind, self.name, message, tuple(self.steps), self.loop_to, self.loop_action)


def parse_tlc_output(
    output: str,
    *,
    spec: Path,
    cfg: Path,
    log_path: Path,
    dump_path: Path | None = None,
    seconds: float = 0.0,
    invariant_names: frozenset[str] | None = None,
    difftrace: bool = False,
) -> TlcResult:
    """Read the output of a ``tlc2.TLC -tool`` run (TLC 2.15) into a :class:`TlcResult`.

    ``invariant_names`` are the config's ``INVARIANT`` entries; TLC reports a
    ``PROPERTY []P`` as "Invariant P is violated", and with the names at hand
    that is reported as a ``"property"`` violation.  Raises
    :class:`TlcSpecError` when TLC reported an error rather than a verdict.
    """
    items = _split_messages(output)
    violations: list[TlcViolation] = []
    errors: list[_Builder] = []
    warnings: list[str] = []
    sany_text: list[str] = []
    current: _Builder | None = None  # the report that trace messages belong to
    in_sany = False
    distinct = generated = 0
    depth: int | None = None
    have_stats = False
    coverage: list[TlcActionCoverage] = []

    def finish() -> None:
        nonlocal current
        if current is not None and current.kind != "spec-error":
            violations.append(current.violation())
        current = None

    for item in items:
        if isinstance(item, str):
            if in_sany:
                sany_text.append(item)
            continue
        code, text = item.code, item.text
        if code == _SANY_START:
            in_sany = True
        elif code == _SANY_END:
            in_sany = False
        elif code in (_STATE, _STUTTERING, _BACK_TO_STATE, _BEHAVIOR_UP_TO_HERE, _COUNTER_EXAMPLE):
            if current is None:
                continue
            if current.kind == "spec-error":
                current.extra.append(text)
            elif code == _STATE:
                current.add_state(text, difftrace)
            elif code == _STUTTERING:
                current.loop_to, current.loop_action = len(current.steps), "Stuttering"
            elif code == _BACK_TO_STATE:
                back = _BACK_TO_RE.match(text.strip())
                if back is not None:
                    current.loop_to = int(back.group(1))
                    current.loop_action = _action(back.group(2))[0]
        elif code == _NESTED_EXPRESSION and current is not None:
            current.extra.append(text)
        elif code in _VIOLATION_NAME_RE or code in (_DEADLOCK, _TEMPORAL_VIOLATED, _ASSUMPTION_FALSE):
            finish()
            current = _violation_start(item, invariant_names, difftrace)
        elif code == _GENERAL and any(n.code == _ASSERT_FAILED for n in item.nested):
            finish()
            assertion = next(n for n in item.nested if n.code == _ASSERT_FAILED)
            current = _Builder("error", None, assertion.text)
        elif code == _PROGRESS:
            # Printed by a timer thread, possibly in the middle of a trace.
            m = _STATS_RE.search(text)
            if m is not None and not have_stats:
                generated, distinct = _count(m.group(1)), _count(m.group(2))
        elif code in (_STATS, _STATS_DFID):
            finish()
            m = _STATS_RE.search(text)
            if m is not None:
                generated, distinct = _count(m.group(1)), _count(m.group(2))
                have_stats = True
        elif code == _COVERAGE_START:  # TLC reports coverage now and then, and as it ends: keep the last
            finish()
            coverage = []
        elif code == _COVERAGE_NEXT:
            counted = _COVERAGE_NEXT_RE.fullmatch(text.strip())
            if counted is not None:
                coverage.append(_action_coverage(counted))
        elif code == _SEARCH_DEPTH:
            m = _DEPTH_RE.search(text)
            if m is not None:
                depth = int(m.group(1))
        elif item.cls in (_ERROR, _TLCBUG):
            finish()
            # A general error wraps the message that tells what went wrong.
            own = "\n".join(n.text.strip() for n in item.nested) if code == _GENERAL and item.nested else text
            if code in _PARSING_FAILED:
                own = _sany_report(sany_text) + "\n" + own.strip()
            current = _Builder("spec-error", None, own)
            errors.append(current)
        elif item.cls == _WARNING:
            warnings.append(text.strip())
        else:
            finish()
    finish()

    if errors:
        report = "\n\n".join(e.violation().message for e in errors)
        raise TlcSpecError(
            f"TLC reported an error in {spec.name} (config {cfg.name}):\n{report}\n"
            f"(spec: {spec}; config: {cfg}; TLC output: {log_path})",
            spec=spec,
            cfg=cfg,
            tlc_output=report,
            log_path=log_path,
        )
    return TlcResult(
        distinct_states=distinct,
        states_generated=generated,
        depth=depth,
        seconds=seconds,
        violations=tuple(violations),
        log_path=log_path,
        dump_path=dump_path,
        warnings=tuple(warnings),
        collision_probability=float(collision.group(1)) if (collision := _COLLISION_RE.search(output)) else None,
        coverage=tuple(coverage),
    )


def _action_coverage(counted: re.Match[str]) -> TlcActionCoverage:
    span = None
    if counted["span"]:
        first_line, first_col, last_line, last_col = (int(n) for n in counted["span"].split())
        span = (first_line, first_col, last_line, last_col)
    return TlcActionCoverage(
        counted["name"],
        counted["module"],
        int(counted["line"]),
        span,
        _count(counted["distinct"]),
        _count(counted["generated"]),
    )


def _violation_start(item: _Message, invariant_names: frozenset[str] | None, difftrace: bool) -> _Builder:
    code, text = item.code, item.text
    if code == _DEADLOCK:
        return _Builder("deadlock", None, text)
    if code == _TEMPORAL_VIOLATED:
        return _Builder("liveness", None, text)
    if code == _ASSUMPTION_FALSE:
        return _Builder("error", None, text)
    m = _VIOLATION_NAME_RE[code].match(text)
    name = m.group(1) if m is not None else None
    kind = "invariant" if code in (_INVARIANT_VIOLATED, _INVARIANT_VIOLATED_INITIAL) else "property"
    if name is not None and _LOCATION_RE.fullmatch(name):
        # TLC names a conjunct of a PROPERTY by its position, not by a name.
        kind, name = "property", None
    elif kind == "invariant" and invariant_names is not None and name not in invariant_names:
        kind = "property"
    if code in (_INVARIANT_VIOLATED_INITIAL, _PROPERTY_VIOLATED_INITIAL) and m is not None:
        builder = _Builder(kind, name, text[: m.end()].rstrip(":\n"))
        builder.add_state(text[m.end() :], difftrace)
        return builder
    return _Builder(kind, name, text)


def _sany_report(chunks: list[str]) -> str:
    """SANY's report without its progress lines."""
    return _SANY_PROGRESS_RE.sub("", "".join(chunks)).strip()
