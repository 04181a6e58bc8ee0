"""Breadth-first explicit-state model checking of a Python spec, the way TLC does it.

The explorer keeps every distinct state (after symmetry reduction, when asked)
with the step that first reached it, so a violation comes with the shortest
behaviour that leads to it. It checks, as TLC does:

- invariants on every distinct state, initial states included;
- action properties on every step, also steps to states already seen;
- deadlock: a reachable state with no enabled action, unless switched off;
- the first violation ends the run, unless ``stop_at_first`` is false.

It also records which ``reachable`` predicates were witnessed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs
from ledgerspec.spec.kernel import Spec, Step

__all__ = ["Exploration", "Explorer", "TraceStep", "Violation"]

S = TypeVar("S")

INIT = Step("Init")


@attrs.frozen
class TraceStep(Generic[S]):
    """A state of a behaviour, with the step that led to it (``Init`` for the first)."""

    step: Step
    state: S


@attrs.frozen
class Violation(Generic[S]):
    """A broken property: ``kind`` is ``invariant``, ``property`` or ``deadlock``."""

    kind: str
    name: str
    message: str
    trace: tuple[TraceStep[S], ...]


@attrs.frozen
class Exploration(Generic[S]):
    """What a run found, and how much work it took."""

    spec_name: str
    distinct_states: int
    states_generated: int
    depth: int
    seconds: float
    violations: tuple[Violation[S], ...]
    reached: frozenset[str]
    complete: bool
    states: tuple[S, ...] | None = None

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else float("inf")


ProgressCallback = Callable[[int, int, int, int], None]


class Explorer(Generic[S]):
    """Explore every state of ``spec`` reachable from its initial states.

    ``symmetry``: key states by ``spec.symmetry(state)``; ``max_states``: stop
    (with ``complete=False``) after that many distinct states;
    ``progress(distinct, generated, depth, queue)`` is called about once a
    second; ``keep_states`` returns the distinct states for comparison with TLC.
    """

    def __init__(
        self,
        spec: Spec[S],
        *,
        check_deadlock: bool = True,
        symmetry: bool = False,
        stop_at_first: bool = True,
        max_states: int | None = None,
        keep_states: bool = False,
        progress: ProgressCallback | None = None,
        invariants: Iterable[str] | None = None,
    ) -> None:
        self.spec = spec
        self.check_deadlock = check_deadlock
        self.symmetry = symmetry
        self.stop_at_first = stop_at_first
        self.max_states = max_states
        self.keep_states = keep_states
        self.progress = progress
        wanted = None if invariants is None else set(invariants)
        known = {inv.name for inv in spec.invariants} | {p.name for p in spec.action_properties}
        if wanted is not None and wanted - known:
            raise KeyError(f"spec {spec.name} has no invariant {', '.join(sorted(wanted - known))}")
        self.invariants = [i for i in spec.invariants if wanted is None or i.name in wanted]
        self.action_properties = [p for p in spec.action_properties if wanted is None or p.name in wanted]

    def run(self) -> Exploration[S]:
        spec = self.spec
        canon = spec.symmetry if self.symmetry else None
        # state -> (predecessor, step); the predecessor of an initial state is None.
        parent: dict[S, tuple[S | None, Step]] = {}
        queue: deque[tuple[S, int]] = deque()
        violations: list[Violation[S]] = []
        reached: set[str] = set()
        pending_reach = list(spec.reachables)
        generated = 0
        depth = 0
        started = time.perf_counter()
        next_report = started + 1.0
        complete = True

        def check_state(state: S) -> bool:
            for inv in self.invariants:
                message = inv.fn(spec, state)
                if message is not None:
                    violations.append(Violation("invariant", inv.name, message, self._trace(parent, state)))
                    return True
            for r in pending_reach[:]:
                if r.fn(spec, state):
                    reached.add(r.name)
                    pending_reach.remove(r)
            return False

        def stop() -> bool:
            return bool(violations) and self.stop_at_first

        for state in spec.init_states():
            generated += 1
            key = canon(state) if canon else state
            if key in parent:
                continue
            parent[key] = (None, INIT)
            queue.append((key, 1))
            if check_state(key) and stop():
                break

        actions_props = self.action_properties
        while queue and not stop():
            state, level = queue.popleft()
            depth = max(depth, level)
            enabled = False
            for act, args, nxt in spec.successors(state):
                enabled = True
                generated += 1
                for prop in actions_props:
                    message = prop.fn(spec, state, nxt)
                    if message is not None:
                        trace = (*self._trace(parent, state), TraceStep(spec.step(act, args), nxt))
                        violations.append(Violation("property", prop.name, message, trace))
                        break
                if stop():
                    break
                key = canon(nxt) if canon else nxt
                if key in parent:
                    continue
                parent[key] = (state, spec.step(act, args))
                queue.append((key, level + 1))
                if check_state(key) and stop():
                    break
            if not enabled and self.check_deadlock:
                violations.append(
                    Violation("deadlock", "Deadlock", "no action is enabled in this state", self._trace(parent, state))
                )
            if self.max_states is not None and len(parent) >= self.max_states:
                complete = not queue
                break
            if self.progress is not None and time.perf_counter() >= next_report:
                next_report = time.perf_counter() + 1.0
                self.progress(len(parent), generated, depth, len(queue))

        if violations and self.stop_at_first:
            complete = False
        seconds = time.perf_counter() - started
        return Exploration(
            spec_name=spec.name,
            distinct_states=len(parent),
            states_generated=generated,
            depth=depth,
            seconds=seconds,
            violations=tuple(violations),
            reached=frozenset(reached),
            complete=complete,
            states=tuple(parent) if self.keep_states else None,
        )

    @staticmethod
    def _trace(parent: dict[S, tuple[S | None, Step]], last: S) -> tuple[TraceStep[S], ...]:
        steps: list[TraceStep[S]] = []
        state: S | None = last
        while state is not None:
            previous, step = parent[state]
            steps.append(TraceStep(step, state))
            state = previous
        return tuple(reversed(steps))


def explore(spec: Spec[Any], **options: Any) -> Exploration[Any]:
    """Shorthand for ``Explorer(spec, **options).run()``."""
    return Explorer(spec, **options).run()
