"""Breadth-first explicit-state model checking of a Python spec, the way TLC does it.

The explorer remembers every distinct state (after symmetry reduction, when
asked) with the state it was first reached from, so a violation comes with the
shortest behaviour that leads to it. By default it keeps only a 64-bit
fingerprint of each and rebuilds a counterexample by running the spec again
from Init (:mod:`.fingerprints`), and reports TLC's estimate of the
probability of a fingerprint collision; with ``keep_states`` it keeps the
whole states, to return them. It checks, as TLC does:

- invariants on every distinct state, initial states included;
- action properties on every step, also steps to states already seen;
- deadlock: a reachable state with no enabled action, unless switched off;
- the first violation ends the run, unless ``stop_at_first`` is false.

It also records which ``reachable`` predicates were witnessed.
"""

from __future__ import annotations

import gc
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs
from ledgerspec.spec.fingerprints import NO_RECORD, FingerprintStore, collision_probability, fingerprint
from ledgerspec.spec.kernel import Spec, Step

__all__ = ["Exploration", "Explorer", "TraceStep", "Violation", "resident_bytes"]

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
    collision_probability: float = 0.0  # TLC's optimistic estimate; 0 when whole states were kept
    stopped: str | None = None  # why the search stopped before the end, when a bound stopped it

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else float("inf")


ProgressCallback = Callable[[int, int, int, int], None]


class Explorer(Generic[S]):
    """Explore every state of ``spec`` reachable from its initial states.

    ``symmetry``: key states by ``spec.symmetry(state)``; ``max_states``: stop
    (with ``complete=False``) after that many distinct states;
    ``progress(distinct, generated, depth, queue)`` is called about once a
    second; ``keep_states`` returns the distinct states for comparison with TLC;
    ``max_memory``: stop (with ``complete=False`` and ``stopped`` saying so)
    once the process holds more than that many bytes, checked once a second.
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
        max_memory: int | None = None,
    ) -> None:
        self.spec = spec
        self.max_memory = max_memory
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
        # Spec states are immutable values without cycles: the cyclic collector would only walk them, again and
        # again, as the search piles them up.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._search()
        finally:
            if collecting:
                gc.enable()

    def _search(self) -> Exploration[S]:
        spec = self.spec
        canon = spec.symmetry if self.symmetry else None
        fingerprints = not self.keep_states
        store = FingerprintStore()
        # With keep_states: state -> (predecessor, step); the predecessor of an initial state is None.
        parent: dict[S, tuple[S | None, Step]] = {}
        # The frontier: (state, BFS level, its record in the store, or the state itself when states are kept).
        queue: deque[tuple[S, int, Any]] = deque()
        violations: list[Violation[S]] = []
        reached: set[str] = set()
        pending_reach = list(spec.reachables)
        generated = 0
        depth = 0
        started = time.perf_counter()
        next_report = started + 1.0
        complete = True
        stopped: str | None = None

        def remember(key: S, handle: Any, predecessor: S | None, step: Step) -> Any:
            """Record a state first reached; its handle, or None when it was seen before."""
            if fingerprints:
                return store.add(fingerprint(key), handle)
            if key in parent:
                return None
            parent[key] = (predecessor, step)
            return key

        def trace(handle: Any) -> tuple[TraceStep[S], ...]:
            return self._rebuild(store.path(handle), canon) if fingerprints else self._trace(parent, handle)

        def check_state(state: S, handle: Any) -> bool:
            for inv in self.invariants:
                message = inv.fn(spec, state)
                if message is not None:
                    violations.append(Violation("invariant", inv.name, message, trace(handle)))
                    return True
            for r in pending_reach[:]:
                if r.fn(spec, state):
                    reached.add(r.name)
                    pending_reach.remove(r)
            return False

        def stop() -> bool:
            return bool(violations) and self.stop_at_first

        def distinct() -> int:
            return len(store) if fingerprints else len(parent)

        for state in spec.init_states():
            generated += 1
            key = canon(state) if canon else state
            handle = remember(key, NO_RECORD, None, INIT)
            if handle is None:
                continue
            queue.append((key, 1, handle))
            if check_state(key, handle) and stop():
                break

        actions_props = self.action_properties
        while queue and not stop():
            state, level, handle = queue.popleft()
            depth = max(depth, level)
            enabled = False
            for act, args, nxt in spec.successors(state):
                enabled = True
                generated += 1
                for prop in actions_props:
                    message = prop.fn(spec, state, nxt)
                    if message is not None:
                        steps = (*trace(handle), TraceStep(spec.step(act, args), nxt))
                        violations.append(Violation("property", prop.name, message, steps))
                        break
                if stop():
                    break
                key = canon(nxt) if canon else nxt
                new = remember(key, handle, state, spec.step(act, args) if not fingerprints else INIT)
                if new is None:
                    continue
                queue.append((key, level + 1, new))
                if check_state(key, new) and stop():
                    break
            if not enabled and self.check_deadlock:
                dead = "no action is enabled in this state"
                violations.append(Violation("deadlock", "Deadlock", dead, trace(handle)))
            if self.max_states is not None and distinct() >= self.max_states:
                complete = not queue
                break
            if time.perf_counter() >= next_report:
                next_report = time.perf_counter() + 1.0
                if self.progress is not None:
                    self.progress(distinct(), generated, depth, len(queue))
                if self.max_memory is not None and resident_bytes() > self.max_memory:
                    stopped = self._out_of_memory(distinct(), len(queue), depth)
                    complete = False
                    break

        if violations and self.stop_at_first:
            complete = False
        seconds = time.perf_counter() - started
        return Exploration(
            spec_name=spec.name,
            distinct_states=distinct(),
            states_generated=generated,
            depth=depth,
            seconds=seconds,
            violations=tuple(violations),
            reached=frozenset(reached),
            complete=complete,
            states=tuple(parent) if self.keep_states else None,
            collision_probability=collision_probability(distinct(), generated) if fingerprints else 0.0,
            stopped=stopped,
        )

    def _out_of_memory(self, distinct: int, queued: int, depth: int) -> str:
        bound = f"the memory bound of {(self.max_memory or 0) / 2**20:,.0f} MiB"
        if depth <= 1:
            return f"{bound} is too small to hold one level of the search ({distinct:,} states seen, {queued:,} queued)"
        return (
            f"{bound} was reached after {distinct:,} distinct states, at depth {depth} with {queued:,} states "
            "queued: the search is incomplete"
        )

    def _rebuild(self, fps: list[int], canon: Callable[[S], S] | None) -> tuple[TraceStep[S], ...]:
        """The behaviour through the states with these fingerprints, found again from Init: at each step the
        first successor, in the spec's action order, with the next fingerprint (the step the search took)."""
        spec = self.spec
        inits = [canon(s) if canon else s for s in spec.init_states()]
        state = next(k for k in inits if fingerprint(k) == fps[0])
        steps = [TraceStep(INIT, state)]
        for fp in fps[1:]:
            for act, args, nxt in spec.successors(state):
                key = canon(nxt) if canon else nxt
                if fingerprint(key) == fp:
                    steps.append(TraceStep(spec.step(act, args), key))
                    state = key
                    break
            else:
                raise RuntimeError(
                    f"spec {spec.name}: no successor of a state on the counterexample has the fingerprint the "
                    "search recorded; the spec is not deterministic (does an action read a clock or a random value?)"
                )
        return tuple(steps)

    @staticmethod
    def _trace(parent: dict[S, tuple[S | None, Step]], last: S) -> tuple[TraceStep[S], ...]:
        steps: list[TraceStep[S]] = []
        state: S | None = last
        while state is not None:
            previous, step = parent[state]
            steps.append(TraceStep(step, state))
            state = previous
        return tuple(reversed(steps))


def resident_bytes(pid: int | None = None) -> int:
    """The bytes a process (this one by default) holds in memory now: its resident set, from /proc; 0 where
    there is none."""
    try:
        with open(f"/proc/{pid or 'self'}/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def explore(spec: Spec[Any], **options: Any) -> Exploration[Any]:
    """Shorthand for ``Explorer(spec, **options).run()``."""
    return Explorer(spec, **options).run()
