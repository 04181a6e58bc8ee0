"""Check trace files in this process, one trace at a time: the driver under ``ledgerspec check``.

A trace whose spec checks its units apart (a partition key in the spec's
trace mapping) is split into one trace per unit (:mod:`ledgerspec.conformance.partition`).
Memory holds the trace being checked (see :mod:`ledgerspec.conformance.reader`),
the checker's bounded caches, and the verdicts that are not *conforms*.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attrs
from ledgerspec.conformance.checker import TraceChecker
from ledgerspec.conformance.coverage import Coverage
from ledgerspec.conformance.events import InputError
from ledgerspec.conformance.partition import split_trace
from ledgerspec.conformance.reader import (
    DEFAULT_MAX_BAD_LINES,
    DEFAULT_MAX_LINE_BYTES,
    ReadStats,
    TraceInput,
    read_traces,
)
from ledgerspec.conformance.verdict import CONFORMS, VIOLATES, Verdict, undecided_by_stray_line

__all__ = ["CheckRun", "check_files", "collector_paused"]


#: Traces a run names with their largest candidate set.
LARGEST_KEPT = 10


@attrs.define
class CheckRun:
    """What a run over trace files found."""

    traces: int = 0
    events: int = 0
    conforms: int = 0
    violations: list[Verdict] = attrs.Factory(list)
    inconclusive: list[Verdict] = attrs.Factory(list)
    input_errors: list[InputError] = attrs.Factory(list)  # every bad line, charged to a trace or not
    coverage: Coverage | None = None  # what the traces exercised, if the checker collects it
    peak_buffered_events: int = 0  # most events held in memory at once: the largest trace, unless interleaved
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0  # CPU time of this process
    # The traces whose searches held, or examined, the most candidate states for one event (Verdict.max_candidates),
    # largest first, at most LARGEST_KEPT: how near a partially observed check came to the bound on candidates
    largest_candidates: list[tuple[str, int]] = attrs.Factory(list)
    # (file, line, message, trace) of the input errors noted: one bad line charged to a trace and then again to
    # the same trace (the reader's give-up line) is noted once; each trace (or unit) it is charged to keeps it
    _noted: set[tuple[str, int, str, str | None]] = attrs.field(factory=set, init=False, repr=False, eq=False)
    # file -> its first bad line that no trace claims, in reading order
    _first_stray: dict[str, InputError] = attrs.field(factory=dict, init=False, repr=False, eq=False)

    def note_candidates(self, trace: str, peak: int) -> None:
        """Keep the trace among the largest candidate sets if it is one (ties: by trace name)."""
        largest = self.largest_candidates
        if len(largest) < LARGEST_KEPT or (-peak, trace) < (-largest[-1][1], largest[-1][0]):
            largest.append((trace, peak))
            largest.sort(key=lambda item: (-item[1], item[0]))
            del largest[LARGEST_KEPT:]

    def add(self, item: Verdict | InputError) -> Verdict | InputError:
        """Count a verdict, or a bad line no trace claims; a violation after such a line of its file is counted
        as inconclusive (:func:`~ledgerspec.conformance.verdict.undecided_by_stray_line`). What was counted."""
        if isinstance(item, InputError):
            self._note(item)
            if item.trace is None:
                self._first_stray.setdefault(item.file, item)
            return item
        if item.failure is not None:
            item = undecided_by_stray_line(item, self._first_stray.get(item.failure.file))
        self.traces += 1
        self.events += item.events
        self.note_candidates(item.trace, item.max_candidates)
        for error in item.input_errors:
            self._note(error)
        if item.status == CONFORMS:
            self.conforms += 1
        elif item.status == VIOLATES:
            self.violations.append(item)
        else:
            self.inconclusive.append(item)
        return item

    def _note(self, error: InputError) -> None:
        key = (error.file, error.line, error.message, error.trace)
        if key not in self._noted and (*key[:3], None) not in self._noted:  # already noted as a stray line
            self._noted.add(key)
            self.input_errors.append(error)

    @property
    def events_per_cpu_second(self) -> float:
        return self.events / self.cpu_seconds if self.cpu_seconds > 0 else float("inf")


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector: the reader and checker make no reference cycles, and the
    collector's repeated scans of the checker's caches would cost more than the check itself. At the
    end, what is alive (the caches, mostly) is moved out of the collector's sight (``gc.freeze``): a
    process that checks again later, a Spark worker between tasks, does not scan it again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def check_files(
    paths: Sequence[str | Path],
    checker: TraceChecker,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    each: Callable[[Verdict | InputError], None] | None = None,
    max_bad_lines: int | None = DEFAULT_MAX_BAD_LINES,
    pick: Callable[[TraceInput], TraceChecker] | None = None,
) -> CheckRun:
    """Check every trace in the files; ``each`` sees every verdict and stray input error as it comes;
    ``max_bad_lines``: a file is given up after that many bad lines (None: never). ``pick`` chooses the checker
    of a trace (one of the same spec and mode as ``checker``: traces recorded under other constants); by
    default ``checker`` checks them all. The coverage is that of every checker used."""
    run = CheckRun()
    started, cpu_started = time.perf_counter(), time.process_time()
    stats = ReadStats()
    used: dict[int, tuple[TraceChecker, Coverage | None]] = {}  # each checker, and its coverage before the run

    def checker_of(item: TraceInput | None) -> TraceChecker:
        chosen = checker if pick is None or item is None else pick(item)
        if id(chosen) not in used:
            used[id(chosen)] = (chosen, chosen.coverage() if chosen.collects_coverage else None)
        return chosen

    checker_of(None)
    with collector_paused():
        partition = checker.mapping.partition
        traces = read_traces(
            paths,
            max_line_bytes=max_line_bytes,
            stats=stats,
            actions=checker.mapping.actions,
            max_bad_lines=max_bad_lines,
        )
        for item in traces:
            results: list[Verdict | InputError]
            if isinstance(item, InputError):
                results = [item]
            else:
                chosen = checker_of(item)
                results = [chosen.check(unit.events, unit.errors) for unit in split_trace(item, partition)]
            for result in results:
                counted = run.add(result)
                if each is not None:
                    each(counted)
    if checker.collects_coverage:
        run.coverage = Coverage()
        for chosen, covered in used.values():
            if covered is not None:
                run.coverage.add(chosen.coverage().since(covered))
    run.peak_buffered_events = stats.peak_buffered
    run.seconds = time.perf_counter() - started
    run.cpu_seconds = time.process_time() - cpu_started
    return run
