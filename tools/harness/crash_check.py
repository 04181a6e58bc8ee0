"""Crash-point enumeration: every workload crashed at every write, fsync, rename and deletion, then restarted.

For a workload (:mod:`ledgerspec.reference.bookie.workloads`) and a bookie
configuration (a mutant, or none), :func:`check_workload`

1. runs the workload once without a crash, checked step by step against the
   spec (:class:`~ledgerspec.reference.bookie.refinement.CheckedBookie`), and
   counts its file-system boundaries;
2. for each boundary ``k`` (and the end of the workload) takes what a crash at
   ``k`` leaves (the state just before ``k`` is performed, seen through the
   file system's ``on_boundary`` hook during one more run), and continues the
   crash in each way it may end
   (:meth:`~ledgerspec.reference.bookie.refinement.CheckedBookie.outcomes`: a
   process crash, a power loss, power losses with torn tails): the files are
   written to a fresh directory, checked as the spec's ``BookieCrashes`` of a
   state the interrupted step passes through, and the bookie is restarted
   there and checked again;
3. for the plain power loss and the process crash (not the torn tails),
   crashes the restart itself at each of its boundaries (the replay and the checkpoint after it,
   where apache/bookkeeper#2087 and the mark live), and restarts once more.

A *crash point* is one crash continued one way: ``(boundary, outcome)``, or
``(boundary, outcome, boundary of the restart, outcome)`` for a second crash.
Crash points that leave the same files, history and candidate states are
restarted once and counted each time.

The result is what separate runs crashed at ``k`` would give
(``CheckedBookie(crash_at=k)``, as tests/test_bookie_abstraction.py does), at
the cost of one run per workload and per restart.

The bookies write real files, in scratch directories under ``scratch``
(``/dev/shm`` where the machine has it, else the system's temporary
directory); their fsyncs are modelled and not passed to the disk
(``FaultyFileSystem(sync_to_disk=False)``): the model of what is durable, not
the disk, decides what a crash keeps, and a sweep restarts a bookie thousands
of times.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable

import attrs
from ledgerspec.reference.bookie import MUTANTS, BookieConfig, FsEvent, default_scratch
from ledgerspec.reference.bookie.faults import TreeSnapshot
from ledgerspec.reference.bookie.refinement import CheckedBookie, CrashOutcome, Violation
from ledgerspec.reference.bookie.workloads import WORKLOAD_CONFIG, WORKLOADS, Workload, spec_for

__all__ = ["CrashCheckResult", "WorkloadResult", "check_workload", "crash_check"]

Progress = Callable[[str, int, int], None]  # (workload, boundaries done, boundaries in all)


@attrs.frozen
class WorkloadResult:
    """One workload's sweep."""

    workload: str
    mutant: str | None
    boundaries: int  # file-system boundaries of a run without a crash
    crash_points: int  # crashes continued one way each, second crashes included
    second_crash_points: int  # of which crashes of a restart
    restarts: int  # bookies restarted and checked (identical crash points are restarted once)
    seconds: float
    violations: tuple[Violation, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "mutant": self.mutant,
            "boundaries": self.boundaries,
            "crash_points": self.crash_points,
            "second_crash_points": self.second_crash_points,
            "restarts": self.restarts,
            "seconds": round(self.seconds, 3),
            "violations": [v.to_json() for v in self.violations],
        }


@attrs.frozen
class CrashCheckResult:
    """A sweep over several workloads."""

    mutant: str | None
    workloads: tuple[WorkloadResult, ...]

    @property
    def crash_points(self) -> int:
        return sum(w.crash_points for w in self.workloads)

    @property
    def violations(self) -> tuple[Violation, ...]:
        return tuple(v for w in self.workloads for v in w.violations)

    @property
    def seconds(self) -> float:
        return sum(w.seconds for w in self.workloads)

    def to_json(self) -> dict[str, object]:
        return {
            "mutant": self.mutant,
            "crash_points": self.crash_points,
            "seconds": round(self.seconds, 3),
            "violations": [{"workload": w.workload, **v.to_json()} for w in self.workloads for v in w.violations],
            "workloads": [w.to_json() for w in self.workloads],
        }


def crash_check(
    workloads: Iterable[str] | None = None,
    mutant: str | None = None,
    *,
    second_crashes: bool = True,
    progress: Progress | None = None,
    scratch: str | None = None,
) -> CrashCheckResult:
    """Sweep the named workloads (all by default) with the given mutant (none by default).

    Raises KeyError naming an unknown workload or mutant, with the known ones.
    """
    names = list(workloads) if workloads is not None else list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise KeyError(f"unknown workload {', '.join(unknown)}; workloads: {', '.join(WORKLOADS)}")
    if mutant is not None and mutant not in MUTANTS:
        raise KeyError(f"unknown mutant {mutant}; mutants: {', '.join(MUTANTS)}")
    config = attrs.evolve(WORKLOAD_CONFIG, mutant=mutant)
    results = tuple(
        check_workload(WORKLOADS[n], config, second_crashes=second_crashes, progress=progress, scratch=scratch)
        for n in names
    )
    return CrashCheckResult(mutant, results)


def check_workload(
    workload: Workload,
    config: BookieConfig,
    *,
    second_crashes: bool = True,
    progress: Progress | None = None,
    scratch: str | None = None,
) -> WorkloadResult:
    """Crash ``workload`` at every boundary and continue each crash every way it may end; see the module doc."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="crash-check-", dir=scratch or default_scratch()) as directory:
        sweep = _Sweep(workload, config, directory, second_crashes)
        boundaries = sweep.count()
        sweep.run(None if progress is None else lambda done: progress(workload.name, done, boundaries + 1))
    return WorkloadResult(
        workload=workload.name,
        mutant=config.mutant,
        boundaries=boundaries,
        crash_points=sweep.crash_points,
        second_crash_points=sweep.second_crash_points,
        restarts=sweep.restarts,
        seconds=time.perf_counter() - started,
        violations=tuple(sweep.violations),
    )


class _Sweep:
    """One workload's sweep: directories, counts, violations, and the crash points already restarted.

    A crash at boundary ``k`` leaves the state the bookie has just before it
    performs ``k``: the file system's ``on_boundary`` hook shows it to the
    sweep at every boundary of one run, which continues it every way (in other
    directories) without disturbing the run.
    """

    def __init__(self, workload: Workload, config: BookieConfig, scratch: str, second_crashes: bool) -> None:
        self.workload = workload
        self.config = config
        self.spec = spec_for(config)
        self.scratch = scratch
        self.second_crashes = second_crashes
        self.crash_points = 0
        self.second_crash_points = 0
        self.restarts = 0
        self.violations: list[Violation] = []
        self._reported: set[tuple[str, str, str]] = set()  # (kind, name, step): the first crash point of each
        self._seen: set[tuple[object, ...]] = set()  # what crash points left, once restarted
        self._dirs = 0

    def count(self) -> int:
        """The workload without a crash; returns its boundaries."""
        bookie = CheckedBookie(self._dir(), self.spec, self.config)
        self.workload.run(bookie)
        self._dispose(bookie)
        return bookie.fs.boundaries

    def run(self, progress: Callable[[int], None] | None = None) -> None:
        """The workload once, crashed (on the side) at every boundary and at its end."""
        bookie = CheckedBookie(self._dir(), self.spec, self.config)
        done = 0

        def crash_here(event: FsEvent | None) -> None:
            nonlocal done
            self._collect(bookie)  # what the run found so far comes first
            where = f"crash at {_event(bookie, event)}"
            for outcome in _distinct(bookie.outcomes()):
                self.crash_points += 1
                self._restart(bookie, outcome, f"{where}, {outcome.label}", second=not outcome.is_torn)
            done += 1
            if progress is not None:
                progress(done)

        bookie.fs.on_boundary = crash_here
        self.workload.run(bookie)
        bookie.fs.on_boundary = None
        self._collect(bookie)
        crash_here(None)
        self._dispose(bookie)

    def _restart(self, bookie: CheckedBookie, outcome: CrashOutcome, crash_point: str, *, second: bool) -> None:
        """Continue a crash of ``bookie`` one way, and restart (crashing the restart at each boundary if
        ``second``); crash points that leave what another one left are not restarted again."""
        candidates = bookie.crash_candidates()
        key = (_digest(outcome), bookie.history_now(), frozenset(bookie.lacs_acked.items()), candidates, second)
        if key in self._seen:
            return
        self._seen.add(key)
        after = bookie.fork(self._dir(), outcome, candidates, crash_point)
        if second and self.second_crashes:

            def crash_restart(event: FsEvent) -> None:
                where = f"{crash_point}; restart crashed at {_event(after, event)}"
                for again in _distinct(after.outcomes()):
                    if not again.is_torn:
                        self.crash_points += 1
                        self.second_crash_points += 1
                        self._restart(after, again, f"{where}, {again.label}", second=False)

            after.fs.on_boundary = crash_restart
        after.start()
        after.fs.on_boundary = None
        self.restarts += 1
        self._collect(after)
        self._dispose(after)

    def _collect(self, bookie: CheckedBookie) -> None:
        for v in bookie.violations:
            key = (v.kind, v.name, v.step)
            if key not in self._reported:
                self._reported.add(key)
                self.violations.append(v)

    def _dir(self) -> str:
        self._dirs += 1
        return os.path.join(self.scratch, str(self._dirs))

    @staticmethod
    def _dispose(bookie: CheckedBookie) -> None:
        bookie.close()
        shutil.rmtree(bookie.root, ignore_errors=True)


def _event(bookie: CheckedBookie, event: FsEvent | None) -> str:
    """``#12 fsync journal/current/1.txn in force_write``, or ``the end``."""
    if event is None:
        return "the end"
    return str(event).replace(bookie.root + os.sep, "") + f" in {bookie.step_under_way}"


def _digest(outcome: CrashOutcome) -> bytes:
    """What a crash left, as a digest: the files, and after a process crash what of them is durable."""
    h = hashlib.blake2b(digest_size=16)
    snapshots = [outcome.files]
    if outcome.machine is not None:
        snapshots.append(outcome.machine.durable_view())
        synced = {p: outcome.machine.synced_content(p) or b"" for p in outcome.files.files}
        snapshots.append(TreeSnapshot(outcome.files.root, synced, set()))
    for snapshot in snapshots:
        h.update(b"|")
        for path in sorted(snapshot.files):
            h.update(snapshot.relative(path).encode() + b"\0")
            h.update(len(snapshot.files[path]).to_bytes(8, "big") + snapshot.files[path])
        for directory in sorted(snapshot.directories):
            h.update(b"d" + snapshot.relative(directory).encode() + b"\0")
    return h.digest()


def _distinct(outcomes: Iterable[CrashOutcome]) -> list[CrashOutcome]:
    """The outcomes that leave different files (the first of each)."""
    seen: set[bytes] = set()
    found = []
    for outcome in outcomes:
        digest = _digest(outcome)
        if digest not in seen:
            seen.add(digest)
            found.append(outcome)
    return found
