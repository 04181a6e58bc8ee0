"""The conformance checker: is a trace of an implementation a behaviour of the spec?

``check_trace(events, spec, mode, bounds) -> Verdict`` is a pure function
of one trace's events; :class:`TraceChecker` is the same with its caches
kept from one trace to the next (a run over many traces, or one executor of
a distributed run, holds one).

How a trace is checked (docs/conformance.md):

1. Vocabulary (:mod:`ledgerspec.conformance.event_vocabulary`). Each event's type must be an action of
   the spec (or ``Init``, or ``Next`` for an unnamed step), its params the action's parameters with values
   of their types, its observed names variables or projections the mode observes.
2. Merging: :mod:`ledgerspec.conformance.merge` puts the events in replay
   order. A bad event stops the check at its place in that order.
3. Search. Steps the mode hides may be taken before each event, at most
   ``max_hidden_steps`` in a row; then the event's action is taken with the
   event's params, and a successor counts if its observed values match and
   it keeps every invariant (and action property). With nothing hidden and
   one initial state (the ``full`` mode) there is one successor at most:
   the replay is deterministic. Where steps are hidden:

   - *depth first*, the checker looks for one behaviour. Before each event
     it tries the event with no hidden step first, then after hidden steps
     that change what the event does: that enable it, or that do not
     commute with it. A hidden step that commutes with the event (taking it
     after the event reaches the same states) is left for after the event,
     so behaviours that differ only in where such a step sits are tried
     once. A (state, event) pair from which no behaviour continues is
     remembered and not tried again. A behaviour found is a behaviour of the
     spec: the trace conforms. The search is not complete (a step that
     commutes with the event may still matter in a pair with another), so
     finding none decides nothing;
   - *breadth first*, it keeps the *frontier*: every spec state consistent
     with the events so far, each with the shortest behaviour that reaches
     it, closed under hidden steps before each event. This search is
     complete within the bounds; it runs when the depth-first one finds no
     behaviour, and its verdict and explanation are the checker's.
4. Verdict. All events matched: *conforms*. An event no candidate takes:
   *violates*, with every candidate and why it rejects the event
   (:mod:`ledgerspec.conformance.explanation`: the guard
   that fails, from the mapping's explanation of the action, or the
   observed value that differs, or the invariant broken), and the shortest
   spec path to the failing point. If a bound cut the search before that
   event, or bad input stopped it, *inconclusive*, naming which.
5. Coverage (:mod:`ledgerspec.conformance.coverage`): the actions and the
   guards of invariants exercised by one matching behaviour (the shortest,
   or the one the depth-first search found);
   :meth:`TraceChecker.coverage` sums it over the traces checked.

Granularity of "which guard failed": a spec action is a function that
returns no successor when disabled; the checker evaluates it with the
event's parameters and, when it is disabled, asks the trace mapping's
explanation for that action, which names the guard. Without one, it says
whether the parameters are an instance the spec offers in that state and
that the guard is false, nothing finer.

Hot path, for the ``full`` mode: states are interned, and the successor of
(state, event type, params) is computed once and cached, with the
invariants of the new state; observed values are compared as canonical
JSON bytes against the cached encoding of the state's variables, and
decoded only when the bytes differ (a set in another order, or a real
difference). Explanations are built only for a failing event. Coverage
counts, per trace, the serial numbers of the cached transitions the replay
took, and works out what they stand for only when asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import orjson
from ledgerspec.conformance.behaviour import SERIAL, HiddenStep, Node, Transition, shortest
from ledgerspec.conformance.coverage import Coverage, Tally
from ledgerspec.conformance.event_vocabulary import DecodedParams, EventVocabulary
from ledgerspec.conformance.events import Event, InputError
from ledgerspec.conformance.explanation import FailureExplainer
from ledgerspec.conformance.merge import merge_trace
from ledgerspec.conformance.promises import PromiseJudge
from ledgerspec.conformance.verdict import (
    CONFORMS,
    INCONCLUSIVE,
    VIOLATES,
    BoundHit,
    Failure,
    Verdict,
)
from ledgerspec.spec.codecs import Codec, CodecError, canonical_bytes
from ledgerspec.spec.kernel import Action, Spec, evolve
from ledgerspec.spec.tracing import INIT, NEXT, ObservationMode, TraceMapping, mapping_for

__all__ = ["DEFAULT_HIDDEN_STEPS", "Bounds", "TraceChecker", "check_trace"]

_SORT = orjson.OPT_SORT_KEYS
_UNSEEN = object()
_NEVER = float("inf")  # a budget no state spends: a class not met yet
# A beam's candidates and the states hidden steps reach from them before an event: at most this many times its width.
_BEAM_REACH = 3
_EXAMINED_PER_EVENT = 1_000  # the depth-first search's allowance of states per event, beyond max_candidates
# Verdict.search
REPLAY, DEPTH_FIRST, BEAM, REDUCED, BREADTH_FIRST = "replay", "depth-first", "beam", "reduced", "breadth-first"
#: Hidden steps allowed in a row between two events, in a mode that does not say.
DEFAULT_HIDDEN_STEPS = 6
#: How many times max_candidates one closure of the reduced search may hold, by default (Bounds.max_reduced_closure).
REDUCED_REACH = 5


@attrs.frozen
class Bounds:
    """Search bounds for partially observed traces."""

    # Hidden steps taken in a row between two events; None: the observation mode's own (``hidden_steps``), else
    # DEFAULT_HIDDEN_STEPS.
    max_hidden_steps: int | None = None
    max_candidates: int = 10_000  # candidate states kept at once
    max_divergences: int = 10  # divergences of one trace told; after the first, the check goes on from the reports
    # States the depth-first search examines before it leaves the trace to the breadth-first one; None:
    # max_candidates and a thousand per event.
    max_examined: int | None = None
    # The beam searches tried, in order, when the depth-first one finds no behaviour: breadth first, keeping at
    # most this many candidates after each event, spread evenly over those found. A width not below
    # max_candidates is skipped: the breadth-first search itself keeps as many. (): none.
    beam_widths: tuple[int, ...] = (30, 100, 300)
    # States one closure of the reduced search (``Verdict.search == "reduced"``) may hold before an event; None:
    # REDUCED_REACH times max_candidates. That search runs only once the depth-first search and the beams found no
    # behaviour, and every state it holds is reached by one, so a larger reach costs time, never a wrong verdict:
    # before a crash or a reset every step of persistence is taken, and long client-only cursor traces need some
    # tens of thousands of states there (docs/conformance.md).
    max_reduced_closure: int | None = None

    def __attrs_post_init__(self) -> None:
        hidden = self.max_hidden_steps
        if (hidden is not None and hidden < 0) or self.max_candidates < 1 or self.max_divergences < 1:
            raise ValueError(
                f"bounds must be max_hidden_steps >= 0, max_candidates >= 1 and max_divergences >= 1, got {self}"
            )
        if self.max_examined is not None and self.max_examined < 1:
            raise ValueError(f"max_examined must be at least 1, got {self.max_examined}")
        if any(width < 1 for width in self.beam_widths):
            raise ValueError(f"every beam width must be at least 1, got {self.beam_widths}")
        if self.max_reduced_closure is not None and self.max_reduced_closure < 1:
            raise ValueError(f"max_reduced_closure must be at least 1, got {self.max_reduced_closure}")

    def for_mode(self, mode: ObservationMode) -> Bounds:
        """These bounds, with the hidden steps in a row set where they are left to the observation mode."""
        if self.max_hidden_steps is not None:
            return self
        return attrs.evolve(self, max_hidden_steps=mode.hidden_steps or DEFAULT_HIDDEN_STEPS)

    def reduced_closure(self) -> int:
        """The states one closure of the reduced search may hold."""
        if self.max_reduced_closure is not None:
            return self.max_reduced_closure
        return REDUCED_REACH * self.max_candidates

    def examined(self, events: int) -> int:
        """The states the depth-first search may examine on a trace of ``events`` events."""
        if self.max_examined is not None:
            return self.max_examined
        return self.max_candidates + _EXAMINED_PER_EVENT * events


def _named_bound(named: BoundHit | None, cut: BoundHit) -> BoundHit:
    """The bound a verdict names, of those that cut its search: the first ``max_candidates`` cut, else the first
    ``max_hidden_steps`` one. Where hidden faults may follow one another without end (a cursor's failed writes to
    a budget of dozens), ``max_hidden_steps`` is reached before nearly every event, whether or not a behaviour
    needed more steps; candidates dropped at once are the cut to raise."""
    if named is None or (named.bound != "max_candidates" and cut.bound == "max_candidates"):
        return cut
    return named


class _BadValueError(Exception):
    """An observed value that does not decode: bad input, found while checking."""


@attrs.frozen
class _Outcome:
    checked: int  # events matched
    failure_index: int | None = None
    closure: Mapping[Any, Node] | None = None  # the candidates at the failing event
    bad_value: InputError | None = None
    bound: BoundHit | None = None
    peak: int = 1
    # The behaviour matched (the shortest): ``witness`` and then the steps of ``tail``, which the
    # full-mode replay keeps as transitions rather than nodes.
    witness: Node | None = None
    tail: Sequence[Transition] = ()
    search: str = REPLAY
    narrowed: bool = False  # a beam dropped candidates the breadth-first search would have kept


class _OverBudgetError(Exception):
    """The depth-first search examined as many states as it may."""


class _Budget:
    """States the depth-first search may still examine, and the most it examined for one event."""

    __slots__ = ("left", "peak")

    def __init__(self, states: int) -> None:
        self.left = states
        self.peak = 1

    def spend(self, examined_for_event: int) -> None:
        self.left -= 1
        if examined_for_event > self.peak:
            self.peak = examined_for_event
        if self.left < 0:
            raise _OverBudgetError


class TraceChecker:
    """Checks traces of one spec, in one observation mode, within bounds; caches are kept between traces.

    ``mapping`` defaults to the spec's trace module (``ledgerspec.spec.<name>_trace``); ``cache_limit``
    bounds each cache (they are emptied when full, so memory stays bounded on any number of traces);
    ``coverage``: collect what the traces exercise (:meth:`coverage`); ``depth_first``: in a mode that
    hides steps, look for one behaviour depth first, then in beams (``Bounds.beam_widths``), before searching
    every candidate breadth first.
    """

    def __init__(
        self,
        spec: Spec[Any],
        mode: str | ObservationMode = "full",
        bounds: Bounds | None = None,
        *,
        mapping: TraceMapping | None = None,
        cache_limit: int = 100_000,
        coverage: bool = True,
        depth_first: bool = True,
    ) -> None:
        self.spec = spec
        self.depth_first = depth_first
        self.mapping = mapping or mapping_for(spec.name)
        if not isinstance(spec, self.mapping.spec_type):
            raise TypeError(f"the trace mapping is for spec {self.mapping.spec_type.name}, not {spec.name}")
        self.mode = mode if isinstance(mode, ObservationMode) else self.mapping.mode(mode)
        self.bounds = (bounds or Bounds()).for_mode(self.mode)
        self._hidden_limit = self.bounds.max_hidden_steps or 0
        self.cache_limit = cache_limit
        self._actions: dict[str, Action] = self.mapping.actions
        self._hidden_actions = tuple(a for a in spec.actions if a.name in self.mode.hidden)
        self._codecs: dict[str, Codec] = self.mapping.codecs
        self._projections = self.mapping.projections
        # Caches. States are interned (one object per distinct state), so that the lookups
        # below find their key by identity instead of comparing states field by field.
        self._intern: dict[Any, Any] = {}
        # (id of state, event type, params) -> (state, ways): keyed by id, since states are interned;
        # the entry holds its state, so the id cannot be reused while the entry exists.
        self._transitions: dict[tuple[int, str, bytes], tuple[Any, tuple[Transition, ...]]] = {}
        self._views: dict[Any, dict[str, bytes]] = {}  # state -> observable name -> canonical JSON
        self._encoded: dict[str, dict[Any, bytes]] = {}  # observable name -> value -> canonical JSON
        self._hidden: dict[Any, tuple[HiddenStep, ...]] = {}
        self._hidden_labels: dict[Any, dict[tuple[str, tuple[Any, ...]], Any]] = {}
        self._broken: dict[Any, str | None] = {}
        # state -> its class under the mode's quotient (states no event of the mode tells apart); the search keeps
        # one candidate per class. Without a quotient a state is its own class.
        # States that differ only in the budget the mode's ``spent`` names share a class too, and the search keeps
        # the one that spent least: it can take every step the others take.
        self._classes: dict[Any, Any] = {}
        self._quotient = self.mode.quotient
        self._spent_name = self.mode.spent
        self._inits: tuple[Any, ...] = ()
        self._tally = Tally(spec, self.mapping, SERIAL) if coverage else None
        self._emptied = False  # the caches were emptied during this trace
        self._vocabulary = EventVocabulary(spec, self.mapping, self.mode, cache_limit)
        self._explainer = FailureExplainer(
            spec,
            self.mapping,
            self.mode,
            transitions=self._all_transitions,
            instances=self._instances,
            matches=self._matches,
            expected=self._expected,
        )
        self._judge = PromiseJudge(spec, self.mapping, self.mode)
        # A coarser model of the spec (TraceMapping.coarser), tried first: a trace that conforms to it conforms.
        coarse = self.mapping.coarser(spec, self.mode) if self.mapping.coarser is not None else None
        self._coarser = (
            TraceChecker(
                coarse,
                self.mode,
                bounds,
                mapping=self.mapping,
                cache_limit=cache_limit,
                coverage=coverage,
                depth_first=depth_first,
            )
            if coarse is not None
            else None
        )

    def _state(self, state: Any) -> Any:
        """The interned copy of a state. All state caches are emptied together when they hold too much."""
        found = self._intern.get(state)
        if found is None:
            if len(self._intern) >= self.cache_limit:
                caches = (
                    self._intern,
                    self._transitions,
                    self._views,
                    self._hidden,
                    self._hidden_labels,
                    self._broken,
                    self._classes,
                )
                for cache in caches:
                    cache.clear()
                self._emptied = True
                self._inits = ()
            found = self._intern[state] = state
        return found

    def _class(self, state: Any) -> Any:
        """The key the search files an (interned) state under: its class under the mode's quotient, the budget
        it spent set aside."""
        if self._quotient is None and self._spent_name is None:
            return state
        found = self._classes.get(state)
        if found is None:
            kept = state if self._spent_name is None else evolve(state, **{self._spent_name: 0})
            found = self._classes[state] = kept if self._quotient is None else self._quotient(self.spec, kept)
        return found

    def _spent(self, state: Any) -> int:
        """The budget a state spent (``ObservationMode.spent``); 0 in a mode that names none."""
        return 0 if self._spent_name is None else int(getattr(state, self._spent_name))

    def _files(self, candidates: Mapping[Any, Node], key: Any, state: Any) -> bool:
        """Is ``state`` kept under ``key``: no candidate is there yet, or the one there spent more."""
        there = candidates.get(key)
        return there is None or self._spent(state) < self._spent(there.state)

    @staticmethod
    def _by_state(candidates: Mapping[Any, Node]) -> dict[Any, Node]:
        """Candidates filed by class, by their states."""
        return {node.state: node for node in candidates.values()}

    def _initial_states(self) -> tuple[Any, ...]:
        if not self._inits:
            self._inits = tuple(self._state(s) for s in self.spec.init_states())
        return self._inits

    # -- the public entry point --------------------------------------------------------
    def check(self, events: Sequence[Event], input_errors: Iterable[InputError] = ()) -> Verdict:
        """Check one trace. ``events`` in reading order; ``input_errors`` are its lines that could not be read."""
        unread = tuple(input_errors)
        if self._coarser is not None and not unread:
            quick = self._coarser.conforming(events)
            if quick is not None:
                return quick
        trace = events[0].trace if events else (unread[0].trace if unread else None) or "?"
        ordered, total, merge_errors = self._replay_order(events, trace)
        errors = list(unread) + merge_errors
        outcome = self._search(ordered)
        if self._tally is not None:
            self._count(outcome.witness, outcome.tail)
        if outcome.bad_value is not None:
            errors.append(outcome.bad_value)
        failure = None
        further: tuple[Failure, ...] = ()
        stopped = None
        if outcome.failure_index is not None:
            assert outcome.closure is not None
            failure = self._judged(ordered, outcome.failure_index, outcome.closure, frozenset())
        if failure is not None and not unread:
            assert outcome.failure_index is not None and outcome.closure is not None
            further, stopped = self._go_on(ordered, outcome.failure_index, outcome.closure, failure)
            # A bound that cut the search leaves the first divergence in doubt (a candidate dropped might have
            # taken the event), but not a promise the reports break: that holds whatever the candidates.
            if outcome.bound is None or any(f.broken for f in (failure, *further)):
                status = VIOLATES
            else:
                status, further, stopped = INCONCLUSIVE, (), None
        elif failure is not None or errors:
            status = INCONCLUSIVE
        else:
            status = CONFORMS
        return Verdict(
            trace=trace,
            status=status,
            events=total,
            checked=outcome.checked,
            failure=failure,
            bound=outcome.bound if status != CONFORMS else None,
            input_errors=tuple(errors),
            max_candidates=outcome.peak,
            search=outcome.search,
            further=further,
            stopped=stopped,
        )

    def conforming(self, events: Sequence[Event]) -> Verdict | None:
        """The verdict on one trace if it conforms; else None, with nothing counted and nothing judged (a coarser
        model's check, :meth:`check`)."""
        trace = events[0].trace if events else "?"
        ordered, total, merge_errors = self._replay_order(events, trace)
        if merge_errors:
            return None
        outcome = self._search(ordered)
        if outcome.failure_index is not None or outcome.bad_value is not None:
            return None
        if self._tally is not None:
            self._count(outcome.witness, outcome.tail)
        return Verdict(
            trace=trace,
            status=CONFORMS,
            events=total,
            checked=outcome.checked,
            max_candidates=outcome.peak,
            search=outcome.search,
        )

    # -- after a divergence: which promise broke, and the divergences after it -------------------
    def _judged(
        self, events: Sequence[Event], index: int, closure: Mapping[Any, Node], already: frozenset[str]
    ) -> Failure:
        """The failure at ``index``, with the promises the implementation's reported state breaks there
        (:mod:`ledgerspec.conformance.promises`)."""
        closure = self._by_state(closure)
        failure = self._explainer.failure(events, index, closure)
        steps = [(state, after) for state in closure for after in self._reported_steps(state, events[index])]
        judgement = self._judge.judge(events, index, steps, already)
        return attrs.evolve(failure, broken=judgement.broken, undecided=judgement.undecided)

    def _reported_steps(self, state: Any, ev: Event) -> list[Any]:
        """The states the spec's ways to take the event from a candidate reach; the candidate itself where no
        way is enabled: the implementation took a step the spec does not have, and the reports say what it
        reached."""
        if ev.type == INIT:
            return [state]
        reached = [way[2] for way in self._all_transitions(state, ev) if way[2] is not None]
        return reached or [state]

    def _go_on(
        self, events: Sequence[Event], index: int, closure: Mapping[Any, Node], first: Failure
    ) -> tuple[tuple[Failure, ...], str | None]:
        """The divergences after the first, in order, and why the check stopped before the end (None: it did not).

        After a divergence the check resynchronises on the implementation's side: the candidates are the states
        the event's ways reach (or the candidates, where none is enabled) with the values the trace reported
        imposed on them (docs/conformance.md, "Every divergence of a trace"). A state the reports put outside
        the model's value domains is dropped; the search then goes on from the next event as before, except that
        a step is not rejected for an invariant its starting state already breaks.
        """
        found: list[Failure] = []
        already = frozenset(b.name for b in first.broken)
        n, limit = len(events), self.bounds.max_divergences
        while index + 1 < n:
            rest = f"events from {index + 1} on are not judged"
            if len(found) + 1 >= limit:
                return tuple(found), f"stopped after {limit} divergences (max_divergences); {rest}"
            frontier, outside = self._resynchronised(events, index, closure)
            if not frontier:
                return tuple(found), f"the state reported at event {index} lies outside the model ({outside}); {rest}"
            try:
                outcome = self._breadth_first(events, resume=(index + 1, frontier))
            except Exception as exc:  # a spec action on a state only the reports made: say so, judge no further
                return tuple(found), (
                    f"the spec cannot go on from the state reported at event {index} ({type(exc).__name__}: {exc}); "
                    f"{rest}"
                )
            if outcome.bad_value is not None:
                return tuple(found), f"bad input {outcome.bad_value}; the events after it are not judged"
            if outcome.failure_index is None:
                if outcome.bound is not None:
                    return tuple(found), f"search bound {outcome.bound} after the divergence at event {index}"
                return tuple(found), None
            if outcome.bound is not None:
                return tuple(found), (
                    f"search bound {outcome.bound} after the divergence at event {index}; "
                    f"event {outcome.failure_index} may diverge or not"
                )
            assert outcome.closure is not None
            index, closure = outcome.failure_index, outcome.closure
            failure = self._judged(events, index, closure, already)
            found.append(failure)
            already |= {b.name for b in failure.broken}
        return tuple(found), None

    def _resynchronised(
        self, events: Sequence[Event], index: int, closure: Mapping[Any, Node]
    ) -> tuple[dict[Any, Node], str | None]:
        """The implementation's reported states after the event at ``index``, each after the candidate it
        comes from; and, when there is none, why the reports lie outside the model."""
        ev = events[index]
        reports = self._judge.reports(events, index)
        frontier: dict[Any, Node] = {}
        outside = None
        for node in closure.values():
            for after in self._reported_steps(node.state, ev):
                reported = self._judge.impose(after, reports)
                why = self._judge.in_model(reported)
                if why is not None:
                    outside = why
                    continue
                reported = self._state(reported)
                key = self._class(reported)
                if key not in frontier and len(frontier) < self.bounds.max_candidates:
                    frontier[key] = Node(node, ev.type, (), reported, reported=True)
        return frontier, outside

    def replay_order(self, events: Sequence[Event]) -> list[Event]:
        """The events of one trace (in reading order) in the order the checker replays them, up to the
        first bad one: a verdict's ``event_index`` indexes this list."""
        return self._replay_order(events, events[0].trace if events else "?")[0]

    def _replay_order(self, events: Sequence[Event], trace: str) -> tuple[list[Event], int, list[InputError]]:
        """Merged events up to the first bad one, how many the trace has, and the errors found."""
        bad: dict[int, InputError] = {}
        vocabulary_error = self._vocabulary.error
        for e in events:
            error = vocabulary_error(e)
            if error is not None:
                bad[id(e)] = error
        merged = merge_trace(events, bad)
        ordered = list(merged.events)
        errors = list(merged.errors)
        for i, e in enumerate(ordered):
            if e.type == INIT and i > 0:
                errors.append(InputError(e.file, e.line, f"Init must be the first event of trace {trace!r}", trace))
                ordered = ordered[:i]
                break
        return ordered, merged.total, errors

    # -- the search ----------------------------------------------------------------------
    def _search(self, events: Sequence[Event]) -> _Outcome:
        """Replay when nothing is hidden; else depth first, then beams of growing width, then breadth first with
        the hidden steps that commute with the next event put off past it, then breadth first if none of them finds
        a behaviour."""
        if not self._hidden_actions:
            return self._breadth_first(events)  # one candidate after each event: the replay
        if self.depth_first:
            found = self._depth_first(events)
            if found is not None:
                return found
            for width in self.bounds.beam_widths:
                if width >= self.bounds.max_candidates:
                    continue
                outcome = self._breadth_first(events, width=width)
                if outcome.failure_index is None and outcome.bad_value is None and outcome.checked == len(events):
                    return attrs.evolve(outcome, bound=None, search=BEAM)
                if not outcome.narrowed:  # it dropped no candidate: it was the breadth-first search
                    return attrs.evolve(outcome, search=BREADTH_FIRST)
            try:
                outcome = self._breadth_first(events, reduced=True)
            except _BadValueError:
                pass  # met in a closure, where the full search reports it at its event
            else:
                if outcome.failure_index is None and outcome.bad_value is None and outcome.checked == len(events):
                    return attrs.evolve(outcome, bound=None, search=REDUCED)
        return attrs.evolve(self._breadth_first(events), search=BREADTH_FIRST)

    def _first_candidates(self, events: Sequence[Event]) -> tuple[int, dict[Any, Node], dict[Any, Node]]:
        """Where the search starts: the index of the first event after ``Init``, the initial states that
        match it and keep the invariants, and every initial state (to explain an ``Init`` that matches none)."""
        inits = {self._class(s): Node(None, INIT, (), s) for s in self._initial_states()}
        if events and events[0].type == INIT:
            matching = {
                k: n
                for k, n in inits.items()
                if self._matches(n.state, events[0]) and self._broken_state(n.state) is None
            }
            return 1, matching, inits
        return 0, {k: n for k, n in inits.items() if self._broken_state(n.state) is None}, inits

    def _breadth_first(
        self,
        events: Sequence[Event],
        resume: tuple[int, dict[Any, Node]] | None = None,
        width: int | None = None,
        *,
        reduced: bool = False,
    ) -> _Outcome:
        """Every candidate state after each event: the complete search, and the one that explains failures.
        ``resume``: start at that event from those candidates, not from the initial states.

        ``width``: a *beam*, which keeps at most that many candidates after each event, spread evenly over those
        found, and ``_BEAM_REACH`` times as many states before it. Every candidate it keeps is reached by a genuine
        behaviour, so a beam that reaches the end proves the trace conforms; one that does not proves nothing
        where it dropped candidates (``_Outcome.narrowed``), since one dropped might have gone on.

        ``reduced``: a partial-order reduction, which takes no hidden step before an event that commutes with it
        (:meth:`_commutes`): the closure of the next event meets it. Before a crash, which commutes with no step of
        persistence, every hidden step is still taken; before a publish or an acknowledgement, most are put off, so
        the closures stay small. Its candidates too are reached by genuine behaviours, so reaching the end proves
        the trace conforms; not reaching it proves nothing, since a step put off may enable one that does not
        commute (the skip of a consumed ledger, then the trim it allows). Its closures may hold
        :meth:`Bounds.reduced_closure` states, its candidates after an event ``max_candidates``."""
        most = reach = self.bounds.max_candidates
        if width is not None:
            most, reach = width, min(reach, _BEAM_REACH * width)
        elif reduced:
            reach = self.bounds.reduced_closure()
        if resume is not None:
            start, frontier = resume
        else:
            try:
                start, frontier, inits = self._first_candidates(events)
            except _BadValueError as exc:
                return _Outcome(0, bad_value=self._value_error(events[0], exc))
            if start and not frontier:
                return _Outcome(0, failure_index=0, closure=inits)
        bound: BoundHit | None = None
        narrowed = False
        peak = len(frontier)
        hidden = bool(self._hidden_actions)
        i = start
        while i < len(events):
            if not hidden and len(frontier) == 1:
                (node,) = frontier.values()
                i, state, node, stop, tail = self._replay(events, i, node.state, node)
                if stop is not None:
                    return attrs.evolve(stop, bound=bound, peak=peak)
                if i == len(events):
                    return _Outcome(i, bound=bound, peak=peak, witness=node, tail=tail)
                frontier = {self._class(state): node}
            ev = events[i]
            if hidden:
                closure, cut = self._closure(frontier, i, reach, ev if reduced else None)
                narrowed |= (cut is not None and cut.bound == "max_candidates" and width is not None) or reduced
                if cut is not None:
                    bound = _named_bound(bound, cut)
                peak = max(peak, len(closure))
            else:
                closure = frontier
            new: dict[Any, Node] = {}
            key = self._class
            try:
                for node in closure.values():
                    for action, args, nxt, _, _, serial in self._ways(node.state, ev):
                        k = key(nxt)
                        if self._files(new, k, nxt):
                            new[k] = Node(node, action, args, nxt, serial)
            except _BadValueError as exc:
                witness = shortest(closure)
                bad = self._value_error(ev, exc)
                return _Outcome(i, bad_value=bad, bound=bound, peak=peak, witness=witness, narrowed=narrowed)
            if not new:
                witness = shortest(closure)
                return _Outcome(
                    i, failure_index=i, closure=closure, bound=bound, peak=peak, witness=witness, narrowed=narrowed
                )
            if len(new) > most:
                # The search keeps those with the fewest hidden steps; a beam keeps an even spread, so that the
                # candidates that took hidden steps early go on beside those that put them off.
                kept = list(new.items())
                new = dict(kept[:most] if width is None else kept[:: -(-len(kept) // most)])
                narrowed |= width is not None
                bound = _named_bound(bound, BoundHit("max_candidates", most, i + 1))
            frontier = new
            peak = max(peak, len(new))
            i += 1
        return _Outcome(len(events), bound=bound, peak=peak, witness=shortest(frontier))

    def _depth_first(self, events: Sequence[Event]) -> _Outcome | None:
        """One behaviour that matches every event, found depth first; None when this search finds none.

        From the state reached after event i-1, the ways to take event i are tried one at a time
        (:meth:`_ways_from`), each followed as far as it matches. A (state, index) pair from which no
        way leads to the end is remembered and never tried again, so no pair is expanded twice. The
        search gives up, for the breadth-first one, after examining ``Bounds.examined`` states: by
        default ``max_candidates`` and a thousand per event, a small share of the states the
        breadth-first search may hold (``max_candidates`` after each event), since a trace that
        violates the spec is searched twice over.
        """
        n = len(events)
        try:
            start, roots, _ = self._first_candidates(events)
        except _BadValueError:
            return None
        if not roots:
            return None
        if start == n:
            return _Outcome(n, peak=len(roots), witness=shortest(roots), search=DEPTH_FIRST)
        budget = _Budget(self.bounds.examined(n))
        # (class, index) -> the least budget spent by a state of the class found dead there: one that spent as much
        # or more is dead too, since the one that spent less takes every step it takes.
        dead: dict[tuple[Any, int], int] = {}
        spent = self._spent
        try:
            for root in roots.values():
                stack = [(root, self._ways_from(root, events[start], budget))]
                while stack:
                    node, ways = stack[-1]
                    i = start + len(stack) - 1
                    nxt = next(ways, None)
                    if nxt is None:
                        here, cost = (self._class(node.state), i), spent(node.state)
                        dead[here] = min(dead.get(here, cost), cost)
                        stack.pop()
                    elif i + 1 == n:
                        return _Outcome(n, peak=budget.peak, witness=nxt, search=DEPTH_FIRST)
                    elif spent(nxt.state) < dead.get((self._class(nxt.state), i + 1), _NEVER):
                        stack.append((nxt, self._ways_from(nxt, events[i + 1], budget)))
        except (_BadValueError, _OverBudgetError):
            pass  # the breadth-first search reports bad values, and decides
        return None

    def _ways_from(self, node: Node, ev: Event, budget: _Budget) -> Iterator[Node]:
        """The behaviours that extend ``node`` by the event, each ending in a distinct state: first
        those with no hidden step before the event, then those whose hidden steps change what the
        event does, fewest hidden steps first, and last every other one within ``max_hidden_steps``.

        A hidden step is tried first only where it matters before the event: it enables the event,
        it does not commute with it (:meth:`_commutes`), or it disables it (a later hidden step may
        enable it again). One that commutes can as well be taken after the event, and the search will
        consider it there, before the next event. That misses a pair whose first step commutes with
        the event and whose second does not (the skip of a consumed ledger, then the trim it allows,
        before an acknowledgement that would have trimmed more): when every way tried so far failed,
        the hidden paths through commuting steps are followed too. Where the event is disabled, every
        hidden path is tried at once, since the steps that enable it may need one another (a restart,
        then a loss).
        """
        state, key, spent = node.state, self._class, self._spent
        direct = self._ways(state, ev)
        reached: dict[Any, int] = {}  # class -> the least budget spent by a state of it yielded

        def first(way: Transition) -> bool:
            k, cost = key(way[2]), spent(way[2])
            if cost >= reached.get(k, _NEVER):
                return False
            reached[k] = cost
            return True

        for way in direct:
            if first(way):
                yield Node(node, way[0], way[1], way[2], way[5])
        prune = bool(direct)
        for after_node, way in self._hidden_paths(node, ev, budget, direct, prune=prune):
            if first(way):
                yield Node(after_node, way[0], way[1], way[2], way[5])
        if prune:
            for after_node, way in self._hidden_paths(node, ev, budget, direct, prune=False):
                if first(way):
                    yield Node(after_node, way[0], way[1], way[2], way[5])

    def _hidden_paths(
        self, node: Node, ev: Event, budget: _Budget, direct: Sequence[Transition], *, prune: bool
    ) -> Iterator[tuple[Node, Transition]]:
        """The event's ways after hidden paths from ``node``, fewest hidden steps first, each as (the path's last
        node, way); with ``prune``, no path through a hidden step that commutes with the event (:meth:`_ways_from`)."""
        state, key, spent = node.state, self._class, self._spent
        most = self.bounds.max_candidates
        visited = {key(state): spent(state)}
        layer = [(state, node, direct)]
        for _ in range(self._hidden_limit):
            deeper: list[tuple[Any, Node, Sequence[Transition]]] = []
            for before, before_node, before_ways in layer:
                for step in self._hidden_steps(before):
                    after = step[2]
                    if spent(after) >= visited.get(key(after), _NEVER):
                        continue
                    after_ways = self._ways(after, ev)
                    # One that commutes with the event is left for after it. One after which the event is
                    # disabled is followed further: a later hidden step may enable it again (the create and the
                    # switch of a cursor ledger before a close that neither allows alone).
                    if prune and after_ways and self._commutes(step, before_ways, after_ways):
                        continue
                    if len(visited) >= most:
                        return  # as the breadth-first search, never more than max_candidates at once
                    visited[key(after)] = spent(after)
                    budget.spend(len(visited))
                    after_node = Node(before_node, step[0], step[1], after, step[3], hidden=True)
                    for way in after_ways:
                        yield after_node, way
                    deeper.append((after, after_node, after_ways))
            if not deeper:
                return
            layer = deeper

    def _commutes(self, step: HiddenStep, before: Sequence[Transition], after: Sequence[Transition]) -> bool:
        """Does the hidden step commute with the event? ``before``: the event's ways from a state, at
        least one; ``after``: its ways from the state the hidden step reaches. It commutes when taking
        it after the event, from each state the event reaches, gives exactly the states that taking it
        first does."""
        if len(before) != len(after):
            return False
        label = (step[0], step[1])
        then: set[Any] = set()
        for way in before:
            t = self._hidden_by_label(way[2]).get(label)
            if t is None:
                return False
            then.add(t)
        return then == {way[2] for way in after}

    def _all_transitions(self, state: Any, ev: Event) -> tuple[Transition, ...]:
        """Every way the event's action, with the event's params, is taken from the state (cached)."""
        hit = self._transitions.get((id(state), ev.type, ev.params_key))
        return hit[1] if hit is not None and hit[0] is state else self._compute_transitions(state, ev)

    def _ways(self, state: Any, ev: Event) -> list[Transition]:
        """The ways to take the event from the state that keep every invariant and match its observed values."""
        hit = self._transitions.get((id(state), ev.type, ev.params_key))
        found = hit[1] if hit is not None and hit[0] is state else self._compute_transitions(state, ev)
        return [
            way
            for way in found
            if way[2] is not None and way[3] is None and (not ev.observed or self._matches(way[2], ev))
        ]

    def _replay(
        self, events: Sequence[Event], start: int, state: Any, node: Node
    ) -> tuple[int, Any, Node, _Outcome | None, list[Transition]]:
        """The hot path: replay while each event has one way to be taken and nothing is hidden.

        Returns where it stopped (an event with several ways, or the end), the state and behaviour
        reached, and the outcome if an event failed. Behaviour nodes are built only when needed: at the
        end of the trace the behaviour is ``node`` followed by the steps of the list returned.
        """
        transitions, dumps = self._transitions, orjson.dumps
        taken: list[Transition] = []
        outcome = None
        i, n = start, len(events)
        try:
            while i < n:
                ev = events[i]
                hit = transitions.get((id(state), ev.type, ev.params_key))
                found = hit[1] if hit is not None and hit[0] is state else self._compute_transitions(state, ev)
                if len(found) != 1:
                    break
                way = found[0]
                _, _, nxt, broken, view, _ = way
                if nxt is None or broken is not None:
                    outcome = _Outcome(i, failure_index=i)
                    break
                observed = ev.observed
                if observed:
                    assert view is not None
                    for name, value in observed.items():
                        if value is None:
                            continue
                        expected = view.get(name)
                        if expected is None:
                            expected = self._expected(nxt, name)
                        if dumps(value, option=_SORT) != expected and not self._same(nxt, name, value):
                            outcome = _Outcome(i, failure_index=i)
                            break
                    if outcome is not None:
                        break
                taken.append(way)
                state = nxt
                i += 1
        except _BadValueError as exc:
            outcome = _Outcome(i, bad_value=self._value_error(events[i], exc))
        if i == n and outcome is None:
            return i, state, node, None, taken  # conforms: no need for the nodes
        for action, args, nxt, _, _, serial in taken:
            node = Node(node, action, args, nxt, serial)
        if outcome is not None:
            closure = {self._class(state): node} if outcome.failure_index is not None else None
            outcome = attrs.evolve(outcome, closure=closure, witness=node)
        return i, state, node, outcome, []

    def _closure(
        self, frontier: dict[Any, Node], index: int, most: int, put_off: Event | None = None
    ) -> tuple[dict[Any, Node], BoundHit | None]:
        """The frontier and every state hidden steps reach from it, breadth first (shortest paths), up to ``most``
        states. ``put_off``: the event next; a hidden step that commutes with it (:meth:`_commutes`) is not taken
        before it."""
        limit = self._hidden_limit
        seen = dict(frontier)
        layer = list(frontier.values())
        key = self._class
        depth = 0
        while layer:
            depth += 1
            next_layer = []
            for node in layer:
                before = self._ways(node.state, put_off) if put_off is not None else ()
                for step in self._hidden_steps(node.state):
                    name, args, t, serial = step
                    k = key(t)
                    if not self._files(seen, k, t):
                        continue
                    if put_off is not None and before:
                        after = self._ways(t, put_off)
                        if after and self._commutes(step, before, after):
                            continue
                    if depth > limit:
                        return seen, BoundHit("max_hidden_steps", limit, index)
                    if k not in seen and len(seen) >= most:
                        return seen, BoundHit("max_candidates", most, index)
                    n = Node(node, name, args, t, serial, hidden=True)
                    seen[k] = n
                    next_layer.append(n)
            layer = next_layer
        return seen, None

    def _hidden_steps(self, state: Any) -> tuple[HiddenStep, ...]:
        """The hidden steps from a state that keep every invariant and action property."""
        found = self._hidden.get(state)
        if found is not None:
            return found
        spec, hidden = self.spec, self.mode.hidden
        steps = []
        for act in self._hidden_actions:
            hides = hidden[act.name]  # None: every instance is hidden
            for args in act.params(spec, state) if act.params is not None else ((),):
                if hides is not None and not hides(*args):
                    continue
                t = act.fn(spec, state, *args)
                if t is None:
                    continue
                t = self._state(t)  # interned first: the caches below then find it by identity
                if self._broken_step(state, t) is None:
                    serial = self._tally.serial(act.name, state, t, hidden=True) if self._tally is not None else -1
                    steps.append((act.name, args, t, serial))
        found = self._hidden[state] = tuple(steps)
        return found

    def _hidden_by_label(self, state: Any) -> dict[tuple[str, tuple[Any, ...]], Any]:
        """The hidden steps from a state, as (action, args) -> the state reached."""
        found = self._hidden_labels.get(state)
        if found is None:
            found = self._hidden_labels[state] = {(name, args): t for name, args, t, _ in self._hidden_steps(state)}
        return found

    def _compute_transitions(self, state: Any, ev: Event) -> tuple[Transition, ...]:
        """Every way the event's action, with the event's params, can be taken from the state."""
        if ev.type == NEXT:
            return self._compute_any_step(state, ev)
        act = self._actions[ev.type]
        decoded = self._vocabulary.params(ev)
        assert isinstance(decoded, DecodedParams)
        if decoded.args is not None:
            chosen = [decoded.args]
        else:
            codecs = self.mapping.param_codecs[ev.type]
            assert decoded.pattern is not None
            pattern = decoded.pattern
            chosen = [
                args
                for args in self._instances(act, state)
                if all(codecs[n].matches(v, args[i]) for i, n in enumerate(codecs) if (v := pattern.get(n)) is not None)
            ]
        result: list[Transition] = []
        for args in chosen:
            if decoded.args is not None and act.params is not None and args not in self._instances(act, state):
                result.append((act.name, args, None, None, None, -1))  # not an instance the spec offers
                continue
            result.append(self._take(state, act, args))
        found = tuple(result)
        self._transitions[(id(state), ev.type, ev.params_key)] = (state, found)
        return found

    def _compute_any_step(self, state: Any, ev: Event) -> tuple[Transition, ...]:
        """A ``Next`` event (a trace that does not name its actions): every enabled step of the spec."""
        steps: list[Transition] = []
        for act in self.spec.actions:
            for args in self._instances(act, state):
                nxt = act.fn(self.spec, state, *args)
                if nxt is not None:
                    nxt = self._state(nxt)
                    steps.append(self._transition(state, act.name, args, nxt))
        found = tuple(steps)
        self._transitions[(id(state), ev.type, ev.params_key)] = (state, found)
        return found

    def _take(self, state: Any, act: Action, args: tuple[Any, ...]) -> Transition:
        nxt = act.fn(self.spec, state, *args)
        if nxt is None:
            stutters = self.mapping.stutters.get(act.name)
            if stutters is not None and stutters(self.spec, state, *args):
                return self._transition(state, act.name, args, state)  # a step the spec leaves out: nothing changes
            return (act.name, args, None, None, None, -1)
        return self._transition(state, act.name, args, self._state(nxt))

    def _transition(self, state: Any, action: str, args: tuple[Any, ...], nxt: Any) -> Transition:
        """A step to a new (interned) state, with what it breaks and its serial number for coverage."""
        serial = self._tally.serial(action, state, nxt) if self._tally is not None else -1
        return (action, args, nxt, self._broken_step(state, nxt), self._views.setdefault(nxt, {}), serial)

    def _instances(self, act: Action, state: Any) -> list[tuple[Any, ...]]:
        return [()] if act.params is None else list(act.params(self.spec, state))

    def _broken_step(self, state: Any, nxt: Any) -> str | None:
        """What a step breaks: an action property of the step, or an invariant of the new state. From a state
        that breaks invariants (one the reports imposed, after a divergence) only the invariants it keeps count."""
        for prop in self.spec.action_properties:
            message = prop.fn(self.spec, state, nxt)
            if message is not None:
                return f"breaks the action property {prop.name}: {message}"
        broken = self._broken_state(nxt)
        if broken is None or self._broken_state(state) is None:
            return broken
        kept = [inv for inv in self.spec.invariants if inv.fn(self.spec, state) is None]
        for inv in kept:
            message = inv.fn(self.spec, nxt)
            if message is not None:
                return f"reaches a state that breaks the invariant {inv.name}: {message}"
        return None

    def _broken_state(self, state: Any) -> str | None:
        found = self._broken.get(state, _UNSEEN)
        if found is _UNSEEN:
            found = None
            for inv in self.spec.invariants:
                message = inv.fn(self.spec, state)
                if message is not None:
                    found = f"reaches a state that breaks the invariant {inv.name}: {message}"
                    break
            self._broken[state] = found
        assert found is None or isinstance(found, str)
        return found

    # -- observed values -------------------------------------------------------------------
    def _expected(self, state: Any, name: str) -> bytes:
        """The canonical JSON of a variable or projection in a state (cached)."""
        view = self._views.get(state)
        if view is None:
            view = self._views[state] = {}
        found = view.get(name)
        if found is None:
            found = view[name] = self._encode(name, self.mapping.observe(self.spec, state, name))
        return found

    def _encode(self, name: str, value: Any) -> bytes:
        """The canonical JSON of a value of a variable or projection, cached by value: states share values."""
        encoded = self._encoded.get(name)
        if encoded is None:
            encoded = self._encoded[name] = {}
        try:
            found = encoded.get(value)
        except TypeError:  # an unhashable value is encoded each time
            return canonical_bytes(self._codecs[name], value)
        if found is None:
            found = canonical_bytes(self._codecs[name], value)
            if len(encoded) >= self.cache_limit:
                encoded.clear()
            encoded[value] = found
        return found

    def _matches(self, state: Any, ev: Event) -> bool:
        """Do the event's observed values (``null``: not observed) match the state?"""
        for name, value in ev.observed.items():
            if value is None:
                continue
            if orjson.dumps(value, option=_SORT) != self._expected(state, name) and not self._same(state, name, value):
                return False
        return True

    def _same(self, state: Any, name: str, value: Any) -> bool:
        """Slow path, when the JSON text differs: decode (sets in any order) and compare values."""
        try:
            decoded = self._codecs[name].decode(value, f"observed.{name}")
        except CodecError as exc:
            raise _BadValueError(str(exc)) from None
        return bool(decoded == self.mapping.observe(self.spec, state, name))

    @staticmethod
    def _value_error(ev: Event, exc: _BadValueError) -> InputError:
        return InputError(ev.file, ev.line, str(exc), ev.trace)

    # -- coverage ----------------------------------------------------------------------------
    @property
    def collects_coverage(self) -> bool:
        return self._tally is not None

    def coverage(self) -> Coverage:
        """What the traces checked so far exercised (:mod:`ledgerspec.conformance.coverage`)."""
        if self._tally is None:
            raise ValueError("this checker does not collect coverage (coverage=False)")
        covered = self._tally.coverage()
        if self._coarser is not None:
            covered.add(self._coarser.coverage())  # the traces the coarser model decided
        return covered

    def _count(self, witness: Node | None, tail: Sequence[Transition]) -> None:
        """Add a trace's witness to the tally: ``witness``, then the steps of ``tail``."""
        assert self._tally is not None
        serials = []
        n = witness
        while n is not None and n.parent is not None:
            serials.append(n.serial)
            n = n.parent
        self._tally.add(n.state if n is not None else None, serials, tail)
        if self._emptied:  # forget the serials of the steps no longer cached, now that no trace holds them
            keep = [t[5] for _, ways in self._transitions.values() for t in ways if t[5] >= 0]
            keep += [h[3] for steps in self._hidden.values() for h in steps]
            self._tally.fold(keep)
            self._emptied = False


def check_trace(
    events: Sequence[Event],
    spec: Spec[Any],
    mode: str = "full",
    bounds: Bounds | None = None,
    *,
    mapping: TraceMapping | None = None,
    depth_first: bool = True,
) -> Verdict:
    """Check one trace's events (in reading order) against a spec: a pure function of its arguments."""
    return TraceChecker(spec, mode, bounds, mapping=mapping, depth_first=depth_first).check(events)
