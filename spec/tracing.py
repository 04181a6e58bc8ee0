"""Trace mappings: how the events an implementation logs map onto a spec's actions and variables.

The Python counterpart of a TLA+ trace module (tlaplus/Examples'
``EWD998ChanTrace.tla``): it extends a spec without touching it. A spec
``X`` (``spec/X/X.py``) has its mapping beside it in ``spec/X/X_trace.py``, a module-level
``TRACE`` that :func:`mapping_for` finds by that name; the conformance
checker takes any spec that has one, with no change of its own.

A mapping says, for one spec:

- the event vocabulary. An event's type is an action's name (or ``Init``),
  its ``params`` the action's parameters by name, its ``observed`` values
  spec variables or named projections of them; values are JSON, encoded by
  codecs (:mod:`ledgerspec.spec.codecs`) derived from the type hints of the
  action's parameters and of the state's fields;
- observation modes. A mode names the action instances an observer cannot
  see (*hidden*: they may happen between two logged events), the variables
  and projections it may report, and the process that logs each step. Every
  instance the mode does not hide must be logged: that is what lets a
  checker rule behaviours out;
- projections: what an observer reports instead of a whole variable
  (a recovering client's phase rather than its whole record);
- explanations, per action: why an instance is not enabled in a state, in
  the words of the spec's guards. A spec action only returns ``None`` when
  disabled; the explanation says which guard. An explanation must agree
  with the action (tests check it on every reachable state of small models);
- stuttering steps, per action: where an implementation takes a step the
  spec leaves out because it changes nothing the spec tracks (a bookie
  serving a request whose effects it already has, when the client ignores
  the reply), ``stutters(spec, state, *args)`` says so, and the checker
  takes the event as a step that leaves the state as it is, as TLA+'s
  ``[Next]_vars`` allows. It is asked only where the action is disabled;
- guards of invariants: an invariant written as an implication ("if the
  ledger is CLOSED then ...") holds trivially in a state where its
  antecedent is false. A :class:`Guard` names such an antecedent, so that
  coverage can say how many checked states actually exercised the
  invariant. A guard must hold in every state that breaks its invariant
  (tests check it on the states of the seeded bugs);
- what an event must report, per action: the observed names without which an
  event of it says nothing (a close that does not report the last entry it
  wrote). An event that leaves out one its mode observes is refused as bad
  input, with its file and line, instead of matching whatever the spec
  wrote there; recorders report them at every such event, changed or not;
- promises said over observed names: an invariant of the spec that reads
  variables a mode does not observe may still be decided by what it does
  observe (the cursor covers a message the consumer never acknowledged: two
  observed names say it). An :class:`ObservedPromise` says it, for the
  checker to tell which promise a diverging trace broke
  (:mod:`ledgerspec.conformance.promises`);
- how a run is drawn: the processes in the order their lanes appear, and
  the :class:`Message` each event sends or receives, read from its params.
- optionally, a partition key: when one trace holds the steps of several
  units the spec treats apart (ledgers of a bookie, topics of a broker),
  ``partition(event type, params)`` names the unit of an event, and each
  unit's events are checked as a trace of their own; ``None`` means the
  event concerns every unit of its trace (``Init``, a crash), and goes to
  each. Without one (the ledger spec: one ledger per trace) a trace is one
  unit.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import orjson
from ledgerspec.spec.codecs import Codec, canonical_bytes, codec_for, hints_of
from ledgerspec.spec.kernel import Action, Spec
from ledgerspec.spec.vocabulary import EngineEvent, trace_line

__all__ = [
    "INIT",
    "NEXT",
    "Explanation",
    "Guard",
    "Message",
    "MessagesOf",
    "ObservationMode",
    "ObservedChanges",
    "ObservedPromise",
    "PartitionKey",
    "Projection",
    "Stutters",
    "TraceMapping",
    "mapping_for",
]

#: The event type of a trace's first event: the spec's initial state (TLA+ ``Init``).
INIT = "Init"
#: The event type of a step whose action the trace does not name: any step of TLA+ ``Next``
#: (a trace that lists states only, such as an ITF trace).
NEXT = "Next"

#: ``explain(spec, state, *args)``: why that action instance is not enabled, or ``None`` when it is.
Explanation = Callable[..., "str | None"]
#: ``stutters(spec, state, *args)``: is that disabled instance a step that would change nothing?
Stutters = Callable[..., bool]
#: ``partition(event type, params as JSON)``: the unit (ledger, topic) an event belongs to; ``None``: every unit.
PartitionKey = Callable[[str, Mapping[str, Any]], "str | None"]


@attrs.frozen
class Guard:
    """A named antecedent of an invariant or action property: where it is false, the property holds trivially.

    For an invariant it is a predicate of the state checked; for an action property, of the state the
    step starts from.
    """

    name: str
    fn: Callable[[Any, Any], bool]  # (spec, state) -> does the antecedent hold
    doc: str = ""


@attrs.frozen
class ObservedPromise:
    """An invariant said over observed names: where ``fn`` says the values of ``reads`` break it, the invariant
    fails on every state that has those values. That must follow from the definitions of the names read (the
    tests check it on every state of the explored models)."""

    invariant: str
    reads: tuple[str, ...]  # variables and projections
    fn: Callable[[Any, Mapping[str, Any]], str | None]  # (spec, name -> value) -> why it is broken, or None


@attrs.frozen
class Message:
    """A message an event sends or receives, from one process to another: an arrow between two lanes."""

    sender: str
    receiver: str
    label: str


#: ``messages(action, params)``: the messages of an event, read from its params as JSON (which may be
#: partial: a field left out is a value the observer did not see).
MessagesOf = Callable[[str, Mapping[str, Any]], "Sequence[Message]"]


def _no_messages(_action: str, _params: Mapping[str, Any]) -> Sequence[Message]:
    return ()


@attrs.frozen
class Projection:
    """A named function of a state that an observer may report, like a variable."""

    name: str
    fn: Callable[[Any, Any], Any]  # (spec, state) -> value
    type: Any  # type hint of the value, for its JSON codec
    doc: str
    tla: str | None = None  # the same in TLA+, over the spec's variables (for TLA+ trace modules)


def _always(_action: str, _args: tuple[Any, ...]) -> str:
    return "main"


@attrs.frozen
class ObservationMode:
    """What one kind of observer sees of a behaviour."""

    name: str
    doc: str
    observes: frozenset[str]  # variables and projections an event may report
    # action -> predicate on its arguments, true when that instance is hidden; None: every instance is hidden
    hidden: Mapping[str, Callable[..., bool] | None] = attrs.field(factory=dict)
    logged_by: Callable[[str, tuple[Any, ...]], str] = _always  # the process that logs a visible step
    # (spec, state) -> a key; states with equal keys are ones this observer can never tell apart: they report the
    # same values, keep and break the same promises, and each step of one is matched by a step of the other, with
    # the same label and visibility, to a state with an equal key (a bisimulation; the tests check it on explored
    # models). A checker keeps one candidate state per key. None: every state is its own class.
    quotient: Callable[[Any, Any], Any] | None = None
    # A state variable that counts a budget spent (failed writes, say), read by no step, projection or promise but
    # the guards that keep it within its bound, and observed by no one in this mode. Of two states that differ
    # only in it, the one that spent less can take every step the other takes, to a state that again differs
    # only in having spent less (a simulation; the tests check it on explored models). A checker files states
    # with it set aside and keeps the candidate that spent least. None: no such variable.
    spent: str | None = None
    # action -> the parameters this observer cannot see (how many adds in flight a crash left on the bookies, say):
    # events of it leave them out of their params, and a checker tries every instance that matches the rest.
    unseen: Mapping[str, frozenset[str]] = attrs.field(factory=dict)
    # How many hidden steps in a row a checker of this mode allows between two events, unless told otherwise: where
    # hidden steps can follow one another longer than the checker's default (a rollover, persists, a skip and a
    # trim between two acknowledgements), a bound below that leaves some traces undecided. None: the default.
    hidden_steps: int | None = None
    # observed name -> its witness, an observed counter that every step changing the name advances. A step this
    # mode hides may change such a name (a client's write of the metadata, which the bookies see only where the
    # store's writes are recorded): an event that reports the name reports its witness too, so the next report
    # rules the hidden step out, and a value reported still stands until the next report.
    witnessed: Mapping[str, str] = attrs.field(factory=dict)

    def hides(self, action: str, args: tuple[Any, ...]) -> bool:
        """Is this action instance invisible to the observer?"""
        if action not in self.hidden:
            return False
        predicate = self.hidden[action]
        return predicate is None or bool(predicate(*args))


class TraceMapping:
    """A spec's trace vocabulary, observation modes, projections and explanations (module docstring)."""

    def __init__(
        self,
        spec_type: type[Spec[Any]],
        modes: Iterable[ObservationMode],
        *,
        projections: Iterable[Projection] = (),
        explain: Mapping[str, Explanation] | None = None,
        stutters: Mapping[str, Stutters] | None = None,
        guards: Mapping[str, Sequence[Guard]] | None = None,
        codecs: Mapping[str, Codec] | None = None,
        processes: Sequence[str] = (),
        messages: MessagesOf = _no_messages,
        partition: PartitionKey | None = None,
        requires: Mapping[str, Iterable[str]] | None = None,
        observed_promises: Iterable[ObservedPromise] = (),
        coarser: Callable[[Any, ObservationMode], Any] | None = None,
    ) -> None:
        self.spec_type = spec_type
        # (spec, mode) -> a model of the same spec whose behaviours, as the mode observes them, are all behaviours
        # of the given one, and fewer to search (None where there is none, or where the mode sees steps only the
        # given model takes): a trace that conforms to it conforms to the given model, so a checker may try it first.
        self.coarser = coarser
        self.partition = partition
        self.modes = {m.name: m for m in modes}
        self.projections = {p.name: p for p in projections}
        self.explain = dict(explain or {})
        self.stutters = dict(stutters or {})
        # invariant or action property -> its guards
        self.guards: dict[str, tuple[Guard, ...]] = {name: tuple(g) for name, g in (guards or {}).items()}
        # Kinds of process, in the order of their lanes in a drawing: "bookie" stands for bookie-1, bookie-2, ...
        self.processes = tuple(processes)
        self.messages = messages
        overrides = dict(codecs or {})
        self.actions: dict[str, Action] = {a.name: a for a in spec_type.actions}
        if INIT in self.actions or NEXT in self.actions:
            raise ValueError(f"spec {spec_type.name} has an action named {INIT} or {NEXT}: those are event types")
        state_hints = hints_of(spec_type.state_type)
        self.variables = tuple(f.name for f in attrs.fields(spec_type.state_type))
        self.codecs: dict[str, Codec] = {}  # variables and projections
        for name in self.variables:
            self.codecs[name] = overrides.get(name) or codec_for(state_hints[name])
        for p in self.projections.values():
            if p.name in self.variables:
                raise ValueError(f"projection {p.name} has the name of a variable of spec {spec_type.name}")
            self.codecs[p.name] = overrides.get(p.name) or codec_for(p.type)
        self.param_codecs: dict[str, dict[str, Codec]] = {}
        for act in spec_type.actions:
            hints = hints_of(act.fn)
            self.param_codecs[act.name] = {
                p: overrides.get(f"{act.name}.{p}") or codec_for(hints[p]) for p in act.param_names
            }
        for mode in self.modes.values():
            unknown = sorted(mode.observes - set(self.codecs))
            if unknown:
                raise ValueError(f"mode {mode.name} observes unknown names {', '.join(unknown)}")
            unknown = sorted(set(mode.hidden) - set(self.actions))
            if unknown:
                raise ValueError(f"mode {mode.name} hides unknown actions {', '.join(unknown)}")
            unknown = sorted({*mode.witnessed, *mode.witnessed.values()} - mode.observes)
            if unknown:
                raise ValueError(f"mode {mode.name} names witnessed names it does not observe: {', '.join(unknown)}")
            for action_name, params in mode.unseen.items():
                if not params <= set(self.param_codecs.get(action_name, ())):
                    raise ValueError(f"mode {mode.name} leaves out parameters of {action_name} it does not have")
        for name in [*self.explain, *self.stutters]:
            if name not in self.actions:
                raise ValueError(f"explanation for unknown action {name}")
        # action -> the observed names an event of it must report, where its mode observes them
        self.requires: dict[str, frozenset[str]] = {a: frozenset(names) for a, names in (requires or {}).items()}
        for action_name, required in self.requires.items():
            if action_name not in self.actions:
                raise ValueError(f"required observations for unknown action {action_name}")
            unknown_names = sorted(required - set(self.codecs))
            if unknown_names:
                raise ValueError(f"{action_name} requires unknown observed names {', '.join(unknown_names)}")
        self.observed_promises = tuple(observed_promises)
        for promise in self.observed_promises:
            if promise.invariant not in {i.name for i in spec_type.invariants}:
                raise ValueError(f"observed promise {promise.invariant} is not an invariant of {spec_type.name}")
            if set(promise.reads) - set(self.codecs):
                raise ValueError(f"observed promise {promise.invariant} reads unknown names {promise.reads}")
        properties = {p.name for p in spec_type.invariants} | {p.name for p in spec_type.action_properties}
        for name, declared in self.guards.items():
            if name not in properties:
                raise ValueError(f"guards for {name}, which is not an invariant or action property of {spec_type.name}")
            names = [g.name for g in declared]
            if len(set(names)) != len(names):
                raise ValueError(f"guards of {name} have the same name twice: {', '.join(names)}")

    def mode(self, name: str) -> ObservationMode:
        try:
            return self.modes[name]
        except KeyError:
            raise KeyError(
                f"spec {self.spec_type.name} has no observation mode {name!r}; modes: {', '.join(self.modes)}"
            ) from None

    def required(self, action: str, mode: ObservationMode) -> frozenset[str]:
        """The observed names an event of ``action`` must report in ``mode``."""
        return self.requires.get(action, frozenset()) & mode.observes

    def observe(self, spec: Spec[Any], state: Any, name: str) -> Any:
        """The value of a variable or projection in a state."""
        projection = self.projections.get(name)
        if projection is not None:
            return projection.fn(spec, state)
        return getattr(state, name)

    def lane_order(self, process: str) -> tuple[int, int, str]:
        """Sort key of a process's lane: its kind's place in ``processes``, then its number (``bookie-10``
        after ``bookie-9``), then its name; kinds not listed come last."""
        kind, _, number = process.rpartition("-")
        if not kind or not number.isdigit():
            kind, number = process, ""
        place = self.processes.index(kind) if kind in self.processes else len(self.processes)
        return (place, int(number) if number else -1, process)

    def encode_params(self, action: str, args: tuple[Any, ...], mode: ObservationMode | None = None) -> dict[str, Any]:
        """An action instance's arguments as the JSON ``params`` of an event, without those ``mode`` cannot see."""
        codecs = self.param_codecs[action]
        unseen = mode.unseen.get(action, frozenset()) if mode is not None else frozenset()
        return {name: codecs[name].encode(v) for name, v in zip(codecs, args, strict=True) if name not in unseen}

    def event_line(
        self,
        trace: str,
        seq: int,
        process: str,
        event: EngineEvent,
        observed: dict[str, Any],
        mode: ObservationMode | None = None,
    ) -> dict[str, Any]:
        """The line of the trace format that logs ``event`` as this mapping's spec names it, as ``mode`` sees it,
        with the values ``observed``."""
        params = (self.encode_params(event.action, event.args, mode) or None) if event.args else None
        return trace_line(trace, process, seq, event.action, params, observed)


class ObservedChanges:
    """What a recorder reports on each line: the named variables and projections whose value changed since
    its previous report (compared as canonical JSON, so equal values are equal whatever their order)."""

    def __init__(self, mapping: TraceMapping, spec: Spec[Any], names: Iterable[str]) -> None:
        self.mapping, self.spec, self.names = mapping, spec, sorted(names)
        self._previous: dict[str, bytes] = {}

    def since_last(self, state: Any, action: str | None = None) -> dict[str, Any]:
        """The values in ``state`` that differ from the last report, as JSON, and those an event of ``action``
        must report (``TraceMapping.requires``) whether or not they changed; ``state`` is reported now."""
        values = self._values(state)
        required = self.mapping.requires.get(action, frozenset()) if action is not None else frozenset()
        changed = {n: orjson.loads(v) for n, v in values.items() if v != self._previous.get(n) or n in required}
        self._previous = values
        return changed

    def every(self, state: Any) -> dict[str, Any]:
        """Every named value in ``state``, as JSON: for an observer that reads them all at each step, so that a
        step that should have changed one and did not is seen too."""
        self._previous = self._values(state)
        return {n: orjson.loads(v) for n, v in self._previous.items()}

    def _values(self, state: Any) -> dict[str, bytes]:
        codecs, observe = self.mapping.codecs, self.mapping.observe
        return {n: canonical_bytes(codecs[n], observe(self.spec, state, n)) for n in self.names}


def mapping_for(spec_name: str) -> TraceMapping:
    """The trace mapping of a spec: ``TRACE`` in the module ``ledgerspec.spec.<spec_name>.<spec_name>_trace``."""
    module_name = f"ledgerspec.spec.{spec_name}.{spec_name}_trace"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise  # a module the mapping imports is missing, not the mapping
        raise KeyError(f"spec {spec_name} has no trace mapping (no module {module_name})") from None
    mapping = getattr(module, "TRACE", None)
    if not isinstance(mapping, TraceMapping):
        raise KeyError(f"module {module_name} defines no TRACE mapping")
    return mapping
