"""Breadth-first search level by level, on one or more workers, with the counts and verdicts of TLC's search.

The search keeps what TLC keeps: the fingerprints of the states seen, in
memory (:class:`~.fingerprints.FingerprintStore`), the record of where each
state was first reached, on disk, and the current level's states, in memory
and past a bound on disk (:class:`~.frontier.Frontier`). Each worker holds
part of the level, and the level is taken in rounds. In a round:

1. every worker expands about a second's worth of its states, in record order: it
   computes their successors, checks the action properties on each step and
   notes deadlocks, and sends back, per successor whose fingerprint it has
   not met yet in this level, only ``(parent record, successor index,
   fingerprint)``; the successor states stay with it;
2. the search takes those of the parents below every busy worker's last in
   the order a one-process search meets them (by parent record, then
   successor index), keeps the first of each fingerprint not seen before, in
   a single batch lookup, and numbers them in that order;
3. with its next request, each worker learns which of its successors were
   new; it adds them to the next level and checks the invariants on them.
   A worker that finished its round before the others expands ahead, up to
   a round's worth, while it waits, and reports those states first.

So the records and the predecessors are those of a search that takes one
state at a time, and a violation is the first one that search would meet: the
first violating record (or step), rebuilt from Init
(:func:`~.exploration.rebuild`). Rounds are sized to last about a second, so
progress, the memory bound and ``max_states`` are looked at that often.

A worker is a :class:`LevelWorker`, reached through a :class:`WorkerLink`:
in this process (:class:`InProcess`) or in one of its own
(:mod:`.parallel`).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import time
from typing import TYPE_CHECKING, Any, Protocol

from ledgerspec.tools.model_checking.explorer.exploration import (
    Exploration,
    TraceStep,
    Violation,
    action_counts,
    rebuild,
)
from ledgerspec.tools.model_checking.explorer.fingerprints import (
    NO_RECORD,
    NOT_NEW,
    FingerprintStore,
    collision_probability,
    fingerprint,
)
from ledgerspec.tools.model_checking.explorer.frontier import Frontier, resident_bytes
from ledgerspec.tools.model_checking.explorer.packing import StatePacker

if TYPE_CHECKING:
    from ledgerspec.tools.model_checking.explorer.explorer import Explorer

__all__ = ["InProcess", "LevelSearch", "LevelWorker", "WorkerLink", "available_memory", "spill_threshold"]

Candidate = tuple[int, int, int]  # (parent record, successor index, fingerprint)
# (candidates, property violations, deadlocks, states generated, last record expanded (-1: none), whether the
# worker's level is all expanded, seconds it took)
Expansion = tuple[list[Candidate], list[tuple[int, int, str, str]], list[int], int, int, bool, float]
Checked = tuple[list[tuple[int, str, str]], list[str]]  # invariant violations (record, name, message), reachables

_FIRST_ROUND = 64  # states a worker expands in its first round of a level; then sized to take _ROUND_SECONDS
_MAX_ROUND = 1 << 16
_ROUND_SECONDS = 1.0  # long enough that a round's exchange costs little, short enough for progress


class _Level:
    """The search's view of the level being expanded: per worker, the candidates and violations it sent that
    are not decided yet, the last record it expanded, whether it expanded all of its part, and how many states
    its next round takes."""

    def __init__(self, workers: int, round_size: list[int] | None = None) -> None:
        self.candidates: list[list[tuple[Candidate, int, int]]] = [[] for _ in range(workers)]
        self.properties: list[list[tuple[int, int, str, str]]] = [[] for _ in range(workers)]
        self.deadlocks: list[list[int]] = [[] for _ in range(workers)]
        self.received = [0] * workers  # candidates received from each worker this level
        self.decided = [0] * workers  # of them, decided
        self.last = [-1] * workers
        self.exhausted = [False] * workers
        self.round_size = list(round_size or [_FIRST_ROUND] * workers)  # carried from level to level

    def receive(self, w: int, reply: Expansion) -> None:
        candidates, properties, deadlocks, _generated, last, exhausted, seconds = reply
        start = self.received[w]
        self.candidates[w] += [(c, w, start + i) for i, c in enumerate(candidates)]
        self.received[w] += len(candidates)
        self.properties[w] += properties
        self.deadlocks[w] += deadlocks
        if last >= 0:
            self.last[w] = last
        self.exhausted[w] = exhausted
        pace = _ROUND_SECONDS / seconds if seconds > 0 else 2.0
        self.round_size[w] = min(max(int(self.round_size[w] * min(pace, 4.0)), _FIRST_ROUND), _MAX_ROUND)

    def decide(
        self, bound: int | None
    ) -> tuple[list[tuple[Candidate, int, int]], list[tuple[int, int, str, str]], list[int]]:
        """Take out the candidates, property violations and deadlocks of parents below ``bound`` (None: all),
        in the order a one-process search meets them: by parent record, then successor index."""

        def below(record: int) -> bool:
            return bound is None or record < bound

        taken: list[tuple[Candidate, int, int]] = []
        properties: list[tuple[int, int, str, str]] = []
        deadlocks: list[int] = []
        for w, pending in enumerate(self.candidates):
            cut = len(pending) if bound is None else bisect.bisect_left(pending, bound, key=lambda c: c[0][0])
            taken += pending[:cut]
            del pending[:cut]
            self.decided[w] += cut
            properties += [p for p in self.properties[w] if below(p[0])]
            self.properties[w] = [p for p in self.properties[w] if not below(p[0])]
            deadlocks += [d for d in self.deadlocks[w] if below(d)]
            self.deadlocks[w] = [d for d in self.deadlocks[w] if not below(d)]
        if len(self.candidates) > 1:
            taken.sort(key=lambda c: (c[0][0], c[0][1]))
        return taken, properties, deadlocks

    def done(self) -> bool:
        return all(self.exhausted) and not any(self.candidates)


class LevelWorker:
    """One worker's part of the search: its states of the current level, and of the next as they are found."""

    def __init__(self, explorer: Explorer[Any], spill_above: int | None, directory: str | None = None) -> None:
        self.explorer = explorer
        self.spec = explorer.spec
        self.view = self.spec.symmetry if explorer.symmetry else None  # what is fingerprinted: TLC's VIEW
        packer = StatePacker(self.spec.state_type)
        self.level = Frontier(packer, spill_above, directory)
        self.next = Frontier(packer, spill_above, directory)
        self._unexpanded: Any = None  # the level's states not expanded yet
        self._expanded = 0  # how many of the level's states were expanded
        self._met: set[int] = set()  # fingerprints met this level: a later one is no new state, whoever decides
        self._kept: list[Any] = []  # the successors not decided yet that may be new, from position _decided on
        self._kept_by: list[str] = []  # the action that reached each of them
        # per action: the steps it took, and the states it reached first, in this worker
        self._transitions: dict[str, int] = dict.fromkeys((a.name for a in self.spec.actions), 0)
        self._first_reached: dict[str, int] = dict.fromkeys(self._transitions, 0)
        self._decided = 0  # candidates of this level the search has decided
        self._pending = list(self.spec.reachables)
        self._ahead: list[Expansion] = []  # expanded while waiting for the search, not reported yet
        self._ahead_states = 0  # how many states those cover
        self._ahead_limit = 0  # expand ahead at most this many states: the last round's size; 0 once the level ends

    def seed(self, items: list[tuple[Any, int]]) -> Checked:
        """Start with these initial states, in record order."""
        self.level.extend(items)
        self._restart()
        return self._check(items)

    def expand(self, count: int) -> Expansion:
        """Expand this level's next ``count`` states, in record order; the successors that may be new stay
        here until :meth:`accept` says which are. States expanded ahead (:meth:`expand_ahead`) come first, and
        are all reported, also when there are more of them than ``count``."""
        parts, self._ahead = self._ahead, []
        left = count - self._ahead_states
        self._ahead_states = 0
        if left > 0 and not (parts and parts[-1][5]):
            parts.append(self._expand(left))
        self._ahead_limit = count
        if len(parts) == 1:
            return parts[0]
        last = max(part[4] for part in parts)
        return (
            [c for part in parts for c in part[0]],
            [v for part in parts for v in part[1]],
            [d for part in parts for d in part[2]],
            sum(part[3] for part in parts),
            last,
            parts[-1][5],
            sum(part[6] for part in parts),
        )

    def can_expand_ahead(self) -> bool:
        """Whether, while the search decides, this worker may expand more of its level (never before the
        level's first request: states may still move to another worker until then)."""
        return self._ahead_states < self._ahead_limit and self._expanded < len(self.level)

    def expand_ahead(self, count: int) -> None:
        """Expand the next ``count`` states now, and report them with the next :meth:`expand`: a worker that
        finished its round expands instead of waiting for the other workers."""
        self._ahead.append(self._expand(count))
        self._ahead_states += count

    def _expand(self, count: int) -> Expansion:
        started = time.perf_counter()
        spec, view, explorer = self.spec, self.view, self.explorer
        properties = explorer.action_properties
        candidates: list[Candidate] = []
        violations: list[tuple[int, int, str, str]] = []  # (parent record, successor index, name, message)
        deadlocks: list[int] = []
        kept, kept_by, met, transitions = self._kept, self._kept_by, self._met, self._transitions
        generated, last = 0, -1
        for state, record in itertools.islice(self._unexpanded, count):
            last = record
            index = -1
            for index, (act, _args, nxt) in enumerate(spec.successors(state)):
                transitions[act.name] += 1
                for prop in properties:
                    message = prop.fn(spec, state, nxt)
                    if message is not None:
                        violations.append((record, index, prop.name, message))
                        break
                fp = fingerprint(view(nxt) if view else nxt)
                if fp in met:
                    continue
                met.add(fp)
                kept.append(nxt)
                kept_by.append(act.name)
                candidates.append((record, index, fp))
            generated += index + 1
            if index < 0:
                deadlocks.append(record)
        self._expanded += count if last >= 0 else 0
        exhausted = self._expanded >= len(self.level) or last < 0
        return candidates, violations, deadlocks, generated, last, exhausted, time.perf_counter() - started

    def accept(self, news: list[tuple[int, int]], decided: int) -> Checked:
        """The search's answer for the candidates up to position ``decided`` (counted from the level's first):
        (candidate position, new record) of those that are new states. The others are dropped."""
        kept, kept_by, base = self._kept, self._kept_by, self._decided
        items = [(kept[position - base], record) for position, record in news]
        for position, _record in news:
            self._first_reached[kept_by[position - base]] += 1
        del kept[: decided - base]
        del kept_by[: decided - base]
        self._decided = decided
        self.next.extend(items)
        return self._check(items)

    def next_level(self) -> int:
        """Make the states found the level to expand; how many there are."""
        self.level.close()
        self.level, self.next = self.next, self.level
        self._restart()
        self._met = set()
        return len(self.level)

    def _restart(self) -> None:
        """Expand the level from its first state (after it changed, before any of it was expanded)."""
        self._unexpanded = iter(self.level)
        self._expanded = 0
        self._kept, self._kept_by, self._decided = [], [], 0
        self._ahead, self._ahead_states, self._ahead_limit = [], 0, 0

    def give(self, count: int) -> list[tuple[bytes, int]]:
        """Hand ``count`` states of the level (not expanded yet), spread over it, to another worker: packed,
        which travels in half the bytes of a pickled state and is read back several times faster."""
        pack = self.level.packer.pack
        given = [(pack(state), record) for state, record in self.level.take_evenly(count)]
        self._restart()
        return given

    def take(self, packed: list[tuple[bytes, int]]) -> None:
        unpack = self.level.packer.unpack
        self.level.merge([(unpack(data), record) for data, record in packed])
        self._restart()

    def spilled(self) -> int:
        return self.level.spilled + self.next.spilled

    def action_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Per action: the steps this worker took with it, and the states it reached first."""
        return self._transitions, self._first_reached

    def close(self) -> None:
        self.level.close()
        self.next.close()

    def _check(self, items: list[tuple[Any, int]]) -> Checked:
        """The invariant violations of new states, and the reachables they witnessed among those still pending
        in this worker (each is looked for until found once, as one process does)."""
        spec, pending = self.spec, self._pending
        broken = []
        reached = []
        for state, record in items:
            for inv in self.explorer.invariants:
                message = inv.fn(spec, state)
                if message is not None:
                    broken.append((record, inv.name, message))
                    break
            for r in pending[:]:
                if r.fn(spec, state):
                    reached.append(r.name)
                    pending.remove(r)
        return broken, reached


class WorkerLink(Protocol):
    """How the search talks to a worker: a request (a :class:`LevelWorker` method and its argument), then,
    after all workers were asked, the answer; so workers in processes of their own work at the same time."""

    pid: int | None  # the worker's process, when it has one of its own

    def ask(self, method: str, *arguments: Any) -> None: ...

    def answer(self) -> Any: ...

    def move(self, count: int, to: Any) -> None:
        """Have the worker give ``count`` states to the worker behind ``to``."""


class InProcess:
    """A worker in this process."""

    pid: int | None = None

    def __init__(self, worker: LevelWorker) -> None:
        self.worker = worker
        self._answers: collections.deque[Any] = collections.deque()

    def ask(self, method: str, *arguments: Any) -> None:
        self._answers.append(getattr(self.worker, method)(*arguments))

    def answer(self) -> Any:
        return self._answers.popleft()

    def move(self, count: int, to: Any) -> None:
        to.worker.take(self.worker.give(count))


def spill_threshold(max_memory: int | None, processes: int) -> int | None:
    """The resident bytes past which a process's frontier goes to disk: half its share of the memory bound, or
    of the memory the system can still give when there is no bound."""
    bound = max_memory if max_memory is not None else available_memory()
    return None if bound is None else bound // (2 * processes)


def available_memory() -> int | None:
    """The bytes the system can still give, from /proc/meminfo; None where it does not say."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return None


class LevelSearch:
    """The search of ``explorer``'s spec on the workers behind ``links`` (see the module docstring)."""

    def __init__(self, explorer: Explorer[Any], links: list[WorkerLink], directory: str | None = None) -> None:
        self.explorer = explorer
        self.links = links
        self.directory = directory

    def _all(self, method: str, per_worker: list[tuple[Any, ...]] | None = None) -> list[Any]:
        """Ask every worker at once (with its own arguments from ``per_worker``), then take the answers."""
        for w, link in enumerate(self.links):
            link.ask(method, *(() if per_worker is None else per_worker[w]))
        return [link.answer() for link in self.links]

    def held(self) -> int:
        """The bytes this process and the workers' own processes hold in memory."""
        return resident_bytes() + sum(resident_bytes(link.pid) for link in self.links if link.pid is not None)

    def run(self) -> Exploration[Any]:
        with FingerprintStore(self.directory) as store:
            return self._run(store)

    def _run(self, store: FingerprintStore) -> Exploration[Any]:
        explorer, links = self.explorer, self.links
        spec = explorer.spec
        view = spec.symmetry if explorer.symmetry else None
        stop_at_first, max_states = explorer.stop_at_first, explorer.max_states
        started = time.perf_counter()
        next_report = started + 1.0
        generated, depth, complete, stopped = 0, 0, True, None
        violations: list[Violation[Any]] = []
        reached: set[str] = set()

        def behaviour(record: int) -> tuple[TraceStep[Any], ...]:
            return rebuild(spec, store.path(record), view)

        initial = list(spec.init_states())
        generated += len(initial)
        fps = [fingerprint(view(s) if view else s) for s in initial]
        records = store.admit(fps, [NO_RECORD] * len(initial), max_states)
        seeds: list[list[tuple[Any, int]]] = [[] for _ in links]
        for state, record in zip(initial, records, strict=True):
            if record != NOT_NEW:
                seeds[record % len(links)].append((state, record))
        initial_events = []
        for broken, names in self._all("seed", [(seed,) for seed in seeds]):
            reached.update(names)
            initial_events += [((r, -1, 1), Violation("invariant", n, m, behaviour(r))) for r, n, m in broken]
        violations += self._in_order(initial_events)
        level = _Level(len(links))
        level_start, level_end = 0, len(store)
        depth = 1 if level_end else 0
        self._balance([len(seed) for seed in seeds])
        workers = range(len(links))
        # The answer to a round goes out with the next round's request, so a worker never waits for it: the
        # new states of a round are added, and their invariants checked, while the search decides the next.
        answer: list[tuple[list[tuple[int, int]], int]] | None = None  # per worker: (news, decided)
        events: list[tuple[tuple[int, int, int], Violation[Any]]] = []  # of the round being answered
        found_at: dict[int, tuple[int, int]] = {}  # its new records -> (parent record, successor index)

        def answered(results: list[Checked]) -> None:
            """Take the workers' checks of the new states; the round's violations, in order."""
            nonlocal events, found_at
            for broken, names in results:
                reached.update(names)
                events += [((*found_at[r], 1), Violation("invariant", n, m, behaviour(r))) for r, n, m in broken]
            violations.extend(self._in_order(events))
            events, found_at = [], {}

        while level_start < level_end and not (violations and stop_at_first):
            # A round: each worker whose part of the level is not all expanded expands about _ROUND_SECONDS of
            # it. What a worker sent stays undecided while another may still send something from an earlier
            # parent: the search decides, in order, the candidates of the parents below every busy worker's last.
            busy = [w for w in workers if not level.exhausted[w]]
            for w in workers:
                if answer is not None:
                    links[w].ask("accept", *answer[w])
                if w in busy:
                    links[w].ask("expand", level.round_size[w])
            results = [links[w].answer() for w in workers] if answer is not None else []
            for w in busy:
                reply: Expansion = links[w].answer()
                generated += reply[3]
                level.receive(w, reply)
            answered(results)
            if violations and stop_at_first:
                break
            bound = min((level.last[w] + 1 for w in workers if not level.exhausted[w]), default=None)
            ordered, properties, deadlocks = level.decide(bound)
            room = None if max_states is None else max(max_states - len(store), 0)
            records = store.admit([c[2] for c, _, _ in ordered], [c[0] for c, _, _ in ordered], room)
            news: list[list[tuple[int, int]]] = [[] for _ in links]
            for ((parent, index, _fp), w, position), record in zip(ordered, records, strict=True):
                if record != NOT_NEW:
                    news[w].append((position, record))
                    found_at[record] = (parent, index)
            for r, i, name, message in properties:
                behaviour_to = behaviour(r)
                act, args, nxt = list(spec.successors(behaviour_to[-1].state))[i]
                steps = (*behaviour_to, TraceStep(spec.step(act, args), nxt))
                events.append(((r, i, 0), Violation("property", name, message, steps)))
            if explorer.check_deadlock:
                dead = "no action is enabled in this state"
                events += [((r, 2**62, 2), Violation("deadlock", "Deadlock", dead, behaviour(r))) for r in deadlocks]
            answer = [(sorted(news[w]), level.decided[w]) for w in workers]
            full = max_states is not None and len(store) >= max_states
            if level.done() or full:  # answer now: the next level starts from the states found
                answered(self._all("accept", answer))
                answer = None
                if (violations and stop_at_first) or full:
                    complete = complete and not full
                    break
                sizes = self._all("next_level")
                level_start, level_end = level_end, len(store)
                level = _Level(len(links), level.round_size)
                if level_end > level_start:
                    depth += 1
                    self._balance(sizes)
            if time.perf_counter() >= next_report:
                next_report = time.perf_counter() + 1.0
                if explorer.progress is not None:
                    explorer.progress(len(store), generated, depth, level_end - level_start)
                if explorer.max_memory is not None and self.held() > explorer.max_memory:
                    stopped = explorer.out_of_memory(len(store), level_end - level_start, depth)
                    complete = False
                    break
        if violations and stop_at_first:
            complete = False
        transitions: collections.Counter[str] = collections.Counter()
        first_reached: collections.Counter[str] = collections.Counter()
        for worker_transitions, worker_first_reached in self._all("action_counts"):
            transitions.update(worker_transitions)
            first_reached.update(worker_first_reached)
        self._all("close")
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
            actions=action_counts({a.name: transitions[a.name] for a in spec.actions}, first_reached),
        )

    def _in_order(self, events: list[tuple[tuple[int, int, int], Violation[Any]]]) -> list[Violation[Any]]:
        """The violations in the order a one-process search meets them; the first only, if it stops there."""
        ordered = [violation for _, violation in sorted(events, key=lambda e: e[0])]
        return ordered[:1] if self.explorer.stop_at_first else ordered

    def _balance(self, sizes: list[int]) -> None:
        """Move states from the workers that hold the most to those that hold the fewest, when they differ by
        more than a quarter of a share: a worker keeps the states it found, so one initial state would otherwise
        keep all the work in one process. Moving a state costs more than expanding it, so only the excess
        moves, taken evenly over the level so that each chunk of records is shared too. States keep their
        records, so the order of the search does not change."""
        links = self.links
        if len(links) < 2:
            return
        share = sum(sizes) / len(sizes)
        while True:
            most = max(range(len(sizes)), key=lambda w: sizes[w])
            fewest = min(range(len(sizes)), key=lambda w: sizes[w])
            excess = (sizes[most] - sizes[fewest]) // 2
            if excess <= max(16, share / 20):
                return
            links[most].move(excess, links[fewest])
            sizes[most] -= excess
            sizes[fewest] += excess
