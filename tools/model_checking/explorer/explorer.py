"""Breadth-first explicit-state model checking of a Python spec, the way TLC does it.

The explorer remembers every distinct state (after symmetry reduction, when
asked) with the state it was first reached from, so a violation comes with the
shortest behaviour that leads to it. By default it keeps what TLC keeps: a
64-bit fingerprint of each state in memory, where each was first reached
from on disk, and the current level's states in memory and, past a bound, on
disk; it goes level by level (:mod:`.levels`), on worker processes when asked
(:mod:`.parallel`), rebuilds a counterexample by running the spec again from
Init, and reports TLC's estimate of the probability of a fingerprint
collision. With ``keep_states`` it keeps the whole states, one at a time, to
return them. It checks, as TLC does:

- invariants on every distinct state, initial states included;
- action properties on every step, also steps to states already seen;
- deadlock: a reachable state with no enabled action, unless switched off;
- the first violation ends the run, unless ``stop_at_first`` is false.

It also records which ``reachable`` predicates were witnessed, and how often each action was taken: the
steps it took and the states it reached first, as TLC's coverage counts them, so that a run in which some
action never fires shows as such.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from ledgerspec.spec.kernel import Spec, Step
from ledgerspec.tools.model_checking.explorer.exploration import (
    INIT,
    ActionCount,
    Exploration,
    ProgressCallback,
    TraceStep,
    Violation,
    action_counts,
)
from ledgerspec.tools.model_checking.explorer.frontier import resident_bytes
from ledgerspec.tools.model_checking.explorer.levels import InProcess, LevelSearch, LevelWorker, spill_threshold

__all__ = ["ActionCount", "Exploration", "Explorer", "TraceStep", "Violation", "explore", "resident_bytes"]

S = TypeVar("S")


class Explorer(Generic[S]):
    """Explore every state of ``spec`` reachable from its initial states.

    ``symmetry``: key states by ``spec.symmetry(state)``; ``max_states``: stop
    (with ``complete=False``) after that many distinct states;
    ``progress(distinct, generated, depth, queue)`` is called about once a
    second; ``keep_states`` keeps and returns the whole distinct states, for
    comparison with TLC; ``max_memory``: stop (with ``complete=False`` and
    ``stopped`` saying so) once the search holds more than that many bytes,
    checked once a second; ``directory``: where the records and the spilled
    frontier go (the system's temporary directory by default);
    ``spill_above``: the resident bytes past which a process's frontier goes
    to disk (by default half its share of ``max_memory``, or of the memory
    the system can still give).
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
        directory: str | None = None,
        spill_above: int | None = None,
    ) -> None:
        self.spec = spec
        self.max_memory = max_memory
        self.check_deadlock = check_deadlock
        self.symmetry = symmetry
        self.stop_at_first = stop_at_first
        self.max_states = max_states
        self.keep_states = keep_states
        self.progress = progress
        self.directory = directory
        self.spill_above = spill_above
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
            return self._search_states() if self.keep_states else self._search()
        finally:
            if collecting:
                gc.enable()

    def _search(self) -> Exploration[S]:
        """Level by level, keeping fingerprints (:mod:`.levels`), on one worker in this process."""
        worker = LevelWorker(self, self.spill_threshold(1), self.directory)
        result: Exploration[S] = LevelSearch(self, [InProcess(worker)], self.directory).run()
        return result

    def _search_states(self) -> Exploration[S]:
        """One state at a time, keeping each whole state with its predecessor and the step between them."""
        spec = self.spec
        view = spec.symmetry if self.symmetry else None  # what tells states apart: TLC's VIEW
        # the view of each state found -> (the view of its predecessor, None for an initial state; the step; the
        # state, the first found with that view)
        parent: dict[Any, tuple[Any, Step, S]] = {}
        queue: deque[tuple[S, Any, int]] = deque()  # (state, its view, its BFS level)
        violations: list[Violation[S]] = []
        reached: set[str] = set()
        pending_reach = list(spec.reachables)
        transitions: dict[str, int] = dict.fromkeys((a.name for a in spec.actions), 0)
        first_reached = dict(transitions)
        generated = 0
        depth = 0
        started = time.perf_counter()
        next_report = started + 1.0
        complete = True
        stopped: str | None = None

        def remember(key: Any, predecessor: Any, step: Step, state: S) -> bool:
            if key in parent:
                return False
            parent[key] = (predecessor, step, state)
            return True

        def check_state(state: S, key: Any) -> bool:
            for inv in self.invariants:
                message = inv.fn(spec, state)
                if message is not None:
                    violations.append(Violation("invariant", inv.name, message, self._trace(parent, key)))
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
            key = view(state) if view else state
            if not remember(key, None, INIT, state):
                continue
            queue.append((state, key, 1))
            if check_state(state, key) and stop():
                break

        actions_props = self.action_properties
        while queue and not stop():
            state, at, level = queue.popleft()
            depth = max(depth, level)
            enabled = False
            for act, args, nxt in spec.successors(state):
                enabled = True
                generated += 1
                transitions[act.name] += 1
                for prop in actions_props:
                    message = prop.fn(spec, state, nxt)
                    if message is not None:
                        steps = (*self._trace(parent, at), TraceStep(spec.step(act, args), nxt))
                        violations.append(Violation("property", prop.name, message, steps))
                        break
                if stop():
                    break
                key = view(nxt) if view else nxt
                if not remember(key, at, spec.step(act, args), nxt):
                    continue
                first_reached[act.name] += 1
                queue.append((nxt, key, level + 1))
                if check_state(nxt, key) and stop():
                    break
            if not enabled and self.check_deadlock:
                dead = "no action is enabled in this state"
                violations.append(Violation("deadlock", "Deadlock", dead, self._trace(parent, at)))
            if self.max_states is not None and len(parent) >= self.max_states:
                complete = not queue
                break
            if time.perf_counter() >= next_report:
                next_report = time.perf_counter() + 1.0
                if self.progress is not None:
                    self.progress(len(parent), generated, depth, len(queue))
                if self.max_memory is not None and resident_bytes() > self.max_memory:
                    stopped = self.out_of_memory(len(parent), len(queue), depth)
                    complete = False
                    break

        if violations and self.stop_at_first:
            complete = False
        return Exploration(
            spec_name=spec.name,
            distinct_states=len(parent),
            states_generated=generated,
            depth=depth,
            seconds=time.perf_counter() - started,
            violations=tuple(violations),
            reached=frozenset(reached),
            complete=complete,
            states=tuple(state for _, _, state in parent.values()),
            stopped=stopped,
            actions=action_counts(transitions, first_reached),
        )

    def spill_threshold(self, processes: int) -> int | None:
        """The resident bytes past which the frontier of each of ``processes`` goes to disk."""
        return self.spill_above if self.spill_above is not None else spill_threshold(self.max_memory, processes)

    def out_of_memory(self, distinct: int, queued: int, depth: int) -> str:
        """Why the search stopped at the memory bound."""
        bound = f"the memory bound of {(self.max_memory or 0) / 2**20:,.0f} MiB"
        if depth <= 1:
            return f"{bound} is too small to hold one level of the search ({distinct:,} states seen, {queued:,} queued)"
        return (
            f"{bound} was reached after {distinct:,} distinct states, at depth {depth} with {queued:,} states "
            "queued: the search is incomplete"
        )

    @staticmethod
    def _trace(parent: dict[Any, tuple[Any, Step, S]], last: Any) -> tuple[TraceStep[S], ...]:
        steps: list[TraceStep[S]] = []
        key = last
        while key is not None:
            key, step, state = parent[key]
            steps.append(TraceStep(step, state))
        return tuple(reversed(steps))


def explore(spec: Spec[Any], **options: Any) -> Exploration[Any]:
    """Shorthand for ``Explorer(spec, **options).run()``."""
    return Explorer(spec, **options).run()
