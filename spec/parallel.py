"""Breadth-first search on several worker processes, with the same counts, verdicts and counterexamples as one.

The search goes level by level. Each worker process (forked, so it has the
spec already) holds a part of the frontier: the states of the current level
it found, each with its record in the store. For a level:

1. every worker expands its states, in record order: it computes their
   successors, checks the action properties on each step and notes
   deadlocks, and sends back, per successor whose fingerprint it has not met
   yet in this level, only ``(parent record, successor index, fingerprint)``,
   which pickle in a few bytes; the successor states stay with it;
2. the main process takes all of them in the order a single search would
   meet them (by parent record, then by successor index), keeps the first
   of each fingerprint not seen before, and numbers them in that order: the
   records a single worker would give them;
3. each worker keeps its successors that were new as its part of the next
   level, and checks the invariants on them.

So the fingerprint store, the records and the predecessors are exactly those
of the one-process search, and a violation is the first one that search
would meet: with the first violating record (or step) of the shallowest
level, rebuilt from Init by :class:`~.explorer.Explorer`. States move between
processes only once, at the start (the initial states).

The speed-up comes from the successors and the invariants, which are most of
the work; the main process only looks fingerprints up.
"""

from __future__ import annotations

import gc
import multiprocessing
import time
from multiprocessing.connection import Connection
from typing import Any

from ledgerspec.spec.explorer import (
    Exploration,
    Explorer,
    TraceStep,
    Violation,
    resident_bytes,
)
from ledgerspec.spec.fingerprints import NO_RECORD, FingerprintStore, collision_probability, fingerprint

__all__ = ["ParallelExplorer"]

# A successor as a worker reports it: (parent record, successor index, fingerprint).
Candidate = tuple[int, int, int]


def _worker(explorer: Explorer[Any], conn: Connection) -> None:
    """One worker: expand its part of the frontier on request, keep what the main process says is new."""
    # Spec states are immutable values without cycles: the cyclic collector would only walk them, again and
    # again, as each level's successors pile up.
    gc.disable()
    spec = explorer.spec
    canon = spec.symmetry if explorer.symmetry else None
    frontier: list[tuple[Any, int]] = []  # (state, record)
    pending = list(spec.reachables)
    while True:
        command, payload = conn.recv()
        if command == "seed":
            frontier = payload
            conn.send(_check_invariants(explorer, frontier, pending))
        elif command == "expand":
            kept: list[Any] = []
            candidates: list[Candidate] = []
            properties: list[tuple[int, int, str, str]] = []  # (parent record, successor index, name, message)
            deadlocks: list[int] = []
            met: set[int] = set()  # fingerprints met this level: a later one is no new state, whoever decides
            generated = 0
            for state, record in frontier:  # in record order: the order the main process takes them in
                enabled = False
                for index, (_act, _args, nxt) in enumerate(spec.successors(state)):
                    enabled = True
                    generated += 1
                    for prop in explorer.action_properties:
                        message = prop.fn(spec, state, nxt)
                        if message is not None:
                            properties.append((record, index, prop.name, message))
                            break
                    key = canon(nxt) if canon else nxt
                    fp = fingerprint(key)
                    if fp in met:
                        continue
                    met.add(fp)
                    kept.append(key)
                    candidates.append((record, index, fp))
                if not enabled:
                    deadlocks.append(record)
            conn.send((candidates, properties, deadlocks, generated))
            news: dict[int, int] = conn.recv()  # candidate position -> its new record
            frontier = [(kept[position], record) for position, record in sorted(news.items())]
            conn.send(_check_invariants(explorer, frontier, pending))
        elif command == "give":  # hand the last ``payload`` states of the frontier to another worker
            frontier, given = frontier[: len(frontier) - payload], frontier[len(frontier) - payload :]
            conn.send(given)
        elif command == "take":
            frontier = sorted(frontier + payload, key=lambda item: item[1])
        else:  # stop
            conn.close()
            return


def _check_invariants(
    explorer: Explorer[Any], frontier: list[tuple[Any, int]], pending: list[Any]
) -> tuple[list[Any], list[str]]:
    """The invariant violations of the frontier, as (record, name, message), and the reachables it witnessed
    among those still ``pending`` in this worker (each is looked for until found once, as one process does)."""
    spec = explorer.spec
    broken = []
    reached = []
    for state, record in frontier:
        for inv in explorer.invariants:
            message = inv.fn(spec, state)
            if message is not None:
                broken.append((record, inv.name, message))
                break
        for r in pending[:]:
            if r.fn(spec, state):
                reached.append(r.name)
                pending.remove(r)
    return broken, reached


class ParallelExplorer(Explorer[Any]):
    """:class:`~.explorer.Explorer`'s search on ``workers`` processes (see the module docstring)."""

    def __init__(self, spec: Any, *, workers: int, **options: Any) -> None:
        if options.get("keep_states"):
            raise ValueError("whole states are kept by the one-process search only: leave workers at 1")
        if workers < 2:
            raise ValueError(f"a parallel search takes at least 2 workers, got {workers}")
        super().__init__(spec, **options)
        self.workers = workers
        self._pids: list[int] = []

    def run(self) -> Exploration[Any]:
        context = multiprocessing.get_context("fork")
        pipes = [context.Pipe() for _ in range(self.workers)]
        processes = [context.Process(target=_worker, args=(self, child), daemon=True) for _parent, child in pipes]
        for process in processes:
            process.start()
        conns = [parent for parent, _child in pipes]
        self._pids = [p.pid for p in processes if p.pid is not None]
        try:
            return self._search(conns)
        finally:
            for conn in conns:
                conn.send(("stop", None))
            for process in processes:
                process.join(timeout=5)

    def _search(self, conns: list[Connection]) -> Exploration[Any]:
        spec = self.spec
        canon = spec.symmetry if self.symmetry else None
        store = FingerprintStore()
        started = time.perf_counter()
        generated, depth, complete, stopped = 0, 0, True, None
        violations: list[Violation[Any]] = []
        reached: set[str] = set()
        seeds: list[list[tuple[Any, int]]] = [[] for _ in conns]
        for state in spec.init_states():
            generated += 1
            key = canon(state) if canon else state
            record = store.add(fingerprint(key), NO_RECORD)
            if record is not None:
                seeds[record % len(conns)].append((key, record))
        for conn, seed in zip(conns, seeds, strict=True):
            conn.send(("seed", seed))
        # Events of a level, keyed by where the one-process search meets them: (parent, successor, kind).
        events: list[tuple[tuple[int, int, int], Violation[Any]]] = []
        for broken, names in (conn.recv() for conn in conns):
            reached.update(names)
            events += [
                ((record, -1, 1), self._invariant(store, record, name, message)) for record, name, message in broken
            ]
        frontier_size = len(store)
        depth = 1 if frontier_size else 0
        violations += self._in_order(events)
        self._balance(conns, [len(seed) for seed in seeds])

        while frontier_size and not (violations and self.stop_at_first):
            for conn in conns:
                conn.send(("expand", None))
            replies = [conn.recv() for conn in conns]
            generated += sum(count for _, _, _, count in replies)
            ordered = sorted(
                (candidate, w, position)
                for w, (candidates, _, _, _) in enumerate(replies)
                for position, candidate in enumerate(candidates)
            )
            news: list[dict[int, int]] = [{} for _ in conns]
            found_at: dict[int, tuple[int, int]] = {}  # new record -> (parent record, successor index)
            for (parent, index, fp), w, position in ordered:
                record = store.add(fp, parent)
                if record is not None:
                    news[w][position] = record
                    found_at[record] = (parent, index)
            for conn, new in zip(conns, news, strict=True):
                conn.send(new)
            events = []
            for _, properties, deadlocks, _ in replies:
                events += [((r, i, 0), self._property(store, r, i, name, msg)) for r, i, name, msg in properties]
                if self.check_deadlock:
                    events += [((r, 2**62, 2), self._deadlock(store, r)) for r in deadlocks]
            for broken, names in (conn.recv() for conn in conns):
                reached.update(names)
                events += [
                    ((*found_at[record], 1), self._invariant(store, record, name, message))
                    for record, name, message in broken
                ]
            frontier_size = sum(len(n) for n in news)
            self._balance(conns, [len(n) for n in news])
            violations += self._in_order(events)
            if violations and self.stop_at_first:
                break
            if frontier_size:
                depth += 1
            if self.progress is not None:
                self.progress(len(store), generated, depth, frontier_size)
            held = resident_bytes() + sum(resident_bytes(pid) for pid in self._pids)  # the workers' states too
            if self.max_memory is not None and held > self.max_memory:
                stopped, complete = self._out_of_memory(len(store), frontier_size, depth), False
                break
            if self.max_states is not None and len(store) >= self.max_states:
                complete = frontier_size == 0
                break
        if violations and self.stop_at_first:
            complete = False
        return Exploration(
            spec_name=spec.name,
            distinct_states=len(store),
            states_generated=generated,
            depth=depth,
            seconds=time.perf_counter() - started,
            violations=tuple(violations),
            reached=frozenset(reached),
            complete=complete,
            collision_probability=collision_probability(len(store), generated),
            stopped=stopped,
        )

    @staticmethod
    def _balance(conns: list[Connection], sizes: list[int]) -> None:
        """Move states from the workers that hold the most to those that hold the fewest, when they differ by
        more than half a share: a worker keeps the states it found, so one initial state would otherwise keep
        all the work in one process. Moving a state costs more than expanding it, so only the excess moves."""
        share = sum(sizes) / len(sizes)
        while True:
            most = max(range(len(sizes)), key=lambda w: sizes[w])
            fewest = min(range(len(sizes)), key=lambda w: sizes[w])
            excess = (sizes[most] - sizes[fewest]) // 2
            if excess <= max(4, share / 4):
                return
            conns[most].send(("give", excess))
            conns[fewest].send(("take", conns[most].recv()))
            sizes[most] -= excess
            sizes[fewest] += excess

    def _in_order(self, events: list[tuple[tuple[int, int, int], Violation[Any]]]) -> list[Violation[Any]]:
        """The level's violations in the order the one-process search meets them; the first only, if it stops."""
        ordered = [violation for _, violation in sorted(events, key=lambda e: e[0])]
        return ordered[:1] if self.stop_at_first else ordered

    def _behaviour(self, store: FingerprintStore, record: int) -> tuple[TraceStep[Any], ...]:
        return self._rebuild(store.path(record), self.spec.symmetry if self.symmetry else None)

    def _invariant(self, store: FingerprintStore, record: int, name: str, message: str) -> Violation[Any]:
        return Violation("invariant", name, message, self._behaviour(store, record))

    def _deadlock(self, store: FingerprintStore, record: int) -> Violation[Any]:
        return Violation("deadlock", "Deadlock", "no action is enabled in this state", self._behaviour(store, record))

    def _property(self, store: FingerprintStore, record: int, index: int, name: str, message: str) -> Violation[Any]:
        behaviour = self._behaviour(store, record)
        act, args, nxt = list(self.spec.successors(behaviour[-1].state))[index]
        return Violation("property", name, message, (*behaviour, TraceStep(self.spec.step(act, args), nxt)))


def explore_in_parallel(spec: Any, workers: int, **options: Any) -> Exploration[Any]:
    """Shorthand for ``ParallelExplorer(spec, workers=workers, **options).run()``."""
    return ParallelExplorer(spec, workers=workers, **options).run()
