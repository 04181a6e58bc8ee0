"""Runs of the reference bookie as traces of the bookie spec (``spec/bookie/bookie_trace.py``), in both
observation modes.

A :class:`BookieTraceRecorder` watches a
:class:`~ledgerspec.reference.bookie.refinement.CheckedBookie`: after each reference
step it has the abstract states before and after (the abstraction function of
:mod:`ledgerspec.reference.bookie.abstraction`) and the spec actions the step is
made of, each taken or not (a checkpoint is the sync thread's
``FlusherTakesMark``, ``LedgerStorageFlushes``, a ``CheckpointPersistsMark``
per ledger directory and a deletion per journal file it lets go).
:func:`spec_steps` reads from the two states which of them the bookie took,
and with which arguments, as an instrumented bookie would log them: a
request that changed the bookie is logged; a force write is logged with the
position it synced up to; a crash with where it cut the unsynced journal; a
persist with a step per lastMark copy it wrote, or one step when it wrote
none. It does not ask the spec: a mutant that persists its mark before the
flush is logged as persisting it, and the oracle finds that the spec does not
allow it.

Each event is one line of the trace format; the last event of a step reports
the variables (``full``) or the client's observations (``client``) that changed
since the line before. In full mode ``synced`` is reported as the projection
``unsynced_from``: the reference cannot tell which of the spec's two spellings
of a file's end it stands for. Crashes are those between steps (a power loss,
which keeps what was fsynced, or a process crash, which keeps what was
written): a crash inside a flush leaves a ledger storage between two spec
states, which the crash checks (``ledgerspec crash-check bookie``) handle and a
trace cannot show.

:func:`bookie_traces` records the crash-check workloads
(:mod:`ledgerspec.reference.bookie.workloads`): each as written, then, for those
that do not crash on their own, once per step boundary with a power loss
there and once with a process crash, each followed by the restart (replay
and checkpoint), where the run ends, as in the crash sweep.
"""

from __future__ import annotations

import contextlib
import functools
import random
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from ledgerspec.reference.bookie import BookieConfig
from ledgerspec.reference.bookie.refinement import ActionRef, CheckedBookie, Violation
from ledgerspec.reference.bookie.workloads import (
    WORKLOAD_CONFIG,
    WORKLOADS,
    Workload,
    random_spec,
    random_steps,
    spec_for,
)
from ledgerspec.spec.bookie.bookie import NONE, WRITE_CACHE, BookieSpec, BookieState, Position
from ledgerspec.spec.bookie.bookie_trace import TRACE
from ledgerspec.spec.tracing import INIT, ObservedChanges
from ledgerspec.spec.vocabulary import trace_line

__all__ = [
    "CRASHES",
    "BookieRun",
    "BookieTraceRecorder",
    "RecordedRun",
    "bookie_runs",
    "bookie_traces",
    "random_bookie_traces",
    "record_run",
    "spec_steps",
]

#: How a recorded run may crash between two steps.
CRASHES = ("power-loss", "process-crash")
_REQUESTS = frozenset({"BookieAddsEntry", "BookieFencesLedger", "BookieSetsExplicitLac"})
_FLUSHER_STEPS = ("FlusherTakesMark", "LedgerStorageFlushes", "CheckpointPersistsMark")
#: What a client does not know of the steps it sees: the journal position a force write synced to, the cut.
_UNSEEN_PARAMS = {"JournalForceWrites": "upto", "BookieCrashes": "cut"}

Step = tuple[str, tuple[Any, ...]]


def _storage_changed(b: BookieState, a: BookieState) -> bool:
    return (a.flushed, a.fenced_flushed, a.lac_flushed) != (b.flushed, b.fenced_flushed, b.lac_flushed)


def _synced_upto(spec: BookieSpec, b: BookieState, a: BookieState) -> Position | None:
    """Just after the last record the step synced (unsynced before it, synced after it), or None."""
    newly = [pos for pos, _ in spec.records(a) if b.synced <= pos < a.synced]
    return None if not newly else (newly[-1][0], newly[-1][1] + 1)


def _crash_cut(spec: BookieSpec, b: BookieState, a: BookieState) -> Position:
    """Where the crash cut the unsynced journal: the first unsynced record that is gone, or the end."""
    kept = dict(a.journal)
    for (f, i), _ in spec.records(b):
        if (f, i) >= b.synced and i >= len(kept.get(f, ())):
            return (f, i)
    return spec.end_of_journal(b)


def _flusher(ref: ActionRef) -> int:
    """The flusher a reference step's flusher action names."""
    assert ref.args is not None and isinstance(ref.args[0], int)
    return ref.args[0]


def _persisted_copy(spec: BookieSpec, flusher: int, copy: int, b: BookieState, a: BookieState) -> bool:
    """A persist of ``flusher`` that ended its work took its ``copy``-th step: one step when it wrote nothing
    (its mark older than the persisted one, or the write cache's with several ledger directories), one a
    lastMark copy when it wrote them all."""
    mark = b.flusher_mark[flusher - 1]
    if mark == NONE or a.flusher_mark[flusher - 1] != NONE:
        return False
    writes = flusher != WRITE_CACHE or spec.NumLedgerDirs == 1
    wrote = writes and a.last_marks == (mark,) * spec.NumLedgerDirs
    return copy == 1 or wrote


def spec_steps(spec: BookieSpec, actions: Sequence[ActionRef], b: BookieState, a: BookieState) -> list[Step]:
    """The spec actions, with their arguments, that a reference step made of ``actions`` took from ``b`` to ``a``."""
    names = [ref.name for ref in actions]
    whole_checkpoint = all(n in names for n in _FLUSHER_STEPS)
    mark_moved = spec.persisted_mark(a) != spec.persisted_mark(b)
    persists = 0  # the CheckpointPersistsMark steps of this reference step seen so far
    steps: list[Step] = []
    for ref in actions:
        name = ref.name
        if name in _REQUESTS:
            assert ref.args is not None
            if a != b:  # a refused request changes nothing
                steps.append((name, ref.args))
        elif name == "JournalForceWrites":
            upto = _synced_upto(spec, b, a)
            if upto is not None:
                steps.append((name, (upto,)))
        elif name == "JournalRollsOver":
            if a.journal[-1][0] > b.journal[-1][0]:
                steps.append((name, ()))
        elif name == "BookieReplaysJournal":
            if a.up and not b.up:
                steps.append((name, ()))
        elif name == "BookieCrashes":
            steps.append((name, (_crash_cut(spec, b, a),)))
        elif name in _FLUSHER_STEPS and whole_checkpoint:  # a whole checkpoint runs only to move the mark
            assert ref.args is not None
            if mark_moved:
                steps.append((name, ref.args))
        elif name == "FlusherTakesMark":
            flusher = _flusher(ref)
            if b.flusher_mark[flusher - 1] == NONE != a.flusher_mark[flusher - 1]:
                steps.append((name, (flusher,)))
        elif name == "LedgerStorageFlushes":
            flusher = _flusher(ref)
            if flusher in a.flusher_flushed - b.flusher_flushed:
                steps.append((name, (flusher,)))
        elif name == "CheckpointPersistsMark":
            flusher = _flusher(ref)
            persists += 1
            if _persisted_copy(spec, flusher, persists, b, a):
                steps.append((name, (flusher,)))
        elif name == "JournalFileDeleted":
            if ref.args is not None:
                if ref.args[0] not in dict(a.journal) and ref.args[0] in dict(b.journal):
                    steps.append((name, ref.args))
            elif name not in [n for n, _ in steps]:  # every file the step deleted, oldest first, once
                remaining = dict(a.journal)
                steps.extend((name, (f,)) for f, _ in b.journal if f not in remaining)
        else:
            raise ValueError(f"a reference step made of {name}, which the recorder does not know")
    return steps


class BookieTraceRecorder:
    """Records a checked bookie's steps as trace lines in one observation mode (module docstring)."""

    def __init__(self, bookie: CheckedBookie, mode: str, trace_id: str) -> None:
        self.spec = bookie.spec
        self.mode = TRACE.mode(mode)
        self.trace_id = trace_id
        # full: every variable but synced, whose spelling the reference cannot give (module docstring)
        names = self.mode.observes - {"synced"} if mode == "full" else self.mode.observes
        self.lines: list[dict[str, Any]] = []
        self._observed = ObservedChanges(TRACE, self.spec, names)
        bookie.observers.append(self.on_step)

    def on_step(self, actions: tuple[ActionRef, ...], before: BookieState | None, after: BookieState) -> None:
        steps: list[Step] = [(INIT, ())] if before is None else spec_steps(self.spec, actions, before, after)
        visible = [(name, args) for name, args in steps if name == INIT or not self.mode.hides(name, args)]
        for k, (name, args) in enumerate(visible):
            self._record(name, args, after if k == len(visible) - 1 else None)

    def _record(self, name: str, args: tuple[Any, ...], state: BookieState | None) -> None:
        params = TRACE.encode_params(name, args) if args else {}
        if self.mode.name != "full":
            params.pop(_UNSEEN_PARAMS.get(name, ""), None)
        observed = self._observed.since_last(state, name) if state is not None else None
        process = self.mode.logged_by(name, args)
        self.lines.append(trace_line(self.trace_id, process, len(self.lines) + 1, name, params, observed))


@attrs.frozen
class RecordedRun:
    """One run of a workload: its trace in each mode, and what the crash checks found in it."""

    trace_id: str
    lines: dict[str, list[dict[str, Any]]]
    violations: tuple[Violation, ...]


class _RunEnds(Exception):  # noqa: N818 (not an error: the end of a run)
    """The run ends here: the workload's script does not know what the crash left."""


class _CrashAfter(CheckedBookie):
    """A checked bookie that crashes between two steps, after its ``at``-th step, starts again and stops the
    workload (its script counts on journal files the restart has changed, as the crash sweep does)."""

    def __init__(self, *args: Any, at: int, crash: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.at, self.crash, self.crashed = at, crash, False

    def _finish_step(self, label: str, actions: tuple[ActionRef, ...]) -> None:
        super()._finish_step(label, actions)
        if not self.crashed and self.steps >= self.at and self.up and not self.batch_in_flight:
            self.crashed = True
            self.power_loss() if self.crash == "power-loss" else self.process_crash()
            self.start()
            raise _RunEnds


@attrs.frozen
class BookieRun:
    """One run to record: a workload, and the crash put into it (none: the workload as written)."""

    workload: str
    crash_after: int | None = None  # the step after which the crash comes
    crash: str = "power-loss"  # one of CRASHES

    @property
    def trace_id(self) -> str:
        if self.crash_after is None:
            return f"bookie-{self.workload}"
        return f"bookie-{self.workload}-{self.crash}-after-{self.crash_after}"


def record_run(
    run: BookieRun, *, config: BookieConfig = WORKLOAD_CONFIG, modes: Sequence[str] = ("full", "client")
) -> RecordedRun:
    """Run the workload on a reference bookie in a fresh directory and record it in each mode."""
    spec = spec_for(config)
    workload = WORKLOADS[run.workload]
    with tempfile.TemporaryDirectory(prefix="ledgerspec-bookie-trace-") as root:
        bookie = (
            CheckedBookie(root, spec, config)
            if run.crash_after is None
            else _CrashAfter(root, spec, config, at=run.crash_after, crash=run.crash)
        )
        try:
            recorders = {mode: BookieTraceRecorder(bookie, mode, run.trace_id) for mode in modes}
            with contextlib.suppress(_RunEnds):
                workload.run(bookie)
        finally:
            bookie.close()
    return RecordedRun(run.trace_id, {m: r.lines for m, r in recorders.items()}, tuple(bookie.violations))


@functools.cache
def _crash_points(workload: Workload, config: BookieConfig) -> range:
    """After which steps a crash is put into the workload: each but the last, unless it crashes on its own
    (its script then assumes what its own crashes leave, so none is added)."""
    with tempfile.TemporaryDirectory(prefix="ledgerspec-bookie-trace-") as root:
        bookie = CheckedBookie(root, spec_for(config), config)
        try:
            workload.run(bookie)
        finally:
            bookie.close()
    crashes_on_its_own = bookie.state is not None and bookie.state.crashes > 0
    return range(0) if crashes_on_its_own else range(1, bookie.steps)


def bookie_runs(workloads: Sequence[str] = tuple(WORKLOADS), *, crashes: Sequence[str] = CRASHES) -> list[BookieRun]:
    """Each workload as written, then with each kind of crash after each of its steps (module docstring).
    The crash points are those of the correct bookie."""
    runs = []
    for name in workloads:
        runs.append(BookieRun(name))
        runs += [
            BookieRun(name, at, crash) for at in _crash_points(WORKLOADS[name], WORKLOAD_CONFIG) for crash in crashes
        ]
    return runs


def bookie_traces(
    workloads: Sequence[str] = tuple(WORKLOADS),
    *,
    config: BookieConfig = WORKLOAD_CONFIG,
    modes: Sequence[str] = ("full", "client"),
) -> Iterator[RecordedRun]:
    """Every run of :func:`bookie_runs`, recorded."""
    for run in bookie_runs(workloads):
        yield record_run(run, config=config, modes=modes)


def random_bookie_traces(
    config: BookieConfig, *, seed: int, steps: int, traces: int, modes: Sequence[str] = ("full", "client")
) -> Iterator[RecordedRun]:
    """``traces`` seeded random runs of one bookie (:func:`~ledgerspec.reference.bookie.workloads.random_steps`),
    recorded in each mode; run ``i`` is seeded with ``(seed, i)``, so the same arguments give the same traces.
    Check them against :func:`~ledgerspec.reference.bookie.workloads.random_spec` of the same steps."""
    spec = random_spec(config, steps)
    for i in range(traces):
        trace_id = f"bookie-random-{seed}-{i}"
        with tempfile.TemporaryDirectory(prefix="ledgerspec-bookie-trace-") as root:
            bookie = CheckedBookie(root, spec, config)
            try:
                recorders = {mode: BookieTraceRecorder(bookie, mode, trace_id) for mode in modes}
                bookie.start()
                random_steps(bookie, random.Random(seed * 1_000_003 + i), steps)
            finally:
                bookie.close()
        yield RecordedRun(trace_id, {m: r.lines for m, r in recorders.items()}, tuple(bookie.violations))
