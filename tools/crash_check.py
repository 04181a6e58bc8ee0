"""Crash-point enumeration: every workload crashed at every write, fsync, rename and deletion, then restarted.

For a workload (:mod:`ledgerspec.tools.bookie_workloads`) and a bookie
configuration (a mutant, or none), :func:`check_workload`

1. runs the workload once without a crash, checked step by step against the
   spec (:class:`~ledgerspec.tools.bookie_refinement.CheckedBookie`), and
   counts its file-system boundaries;
2. for each boundary ``k`` (and the end of the workload) runs it again with a
   crash at ``k``, and continues the crash in each way it may end
   (:meth:`~ledgerspec.tools.bookie_refinement.CheckedBookie.outcomes`: a
   process crash, a power loss, power losses with torn tails): the files are
   written to a fresh directory, checked as the spec's ``BookieCrashes`` of a
   state the interrupted step passes through, and the bookie is restarted
   there and checked again;
3. for the plain power loss and the process crash, crashes the restart
   itself at each of its boundaries (the replay and the checkpoint after it,
   where apache/bookkeeper#2087 and the mark live), and restarts once more.

A *crash point* is one crash continued one way: ``(boundary, outcome)``, or
``(boundary, outcome, boundary of the restart, outcome)`` for a second crash.
Crash points that leave the same files, history and candidate states are
restarted once and counted each time.

The bookies write real files, in scratch directories under ``scratch``
(``/dev/shm`` where the machine has it, else the system's temporary
directory); their fsyncs are modelled and not passed to the disk
(``FaultyFileSystem(sync_to_disk=False)``): the model of what is durable, not
the disk, decides what a crash keeps, and a sweep restarts a bookie thousands
of times.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable

import attrs
from ledgerspec.reference.bookie import MUTANTS, BookieConfig, SimulatedCrash
from ledgerspec.reference.bookie.faults import TreeSnapshot
from ledgerspec.tools.bookie_refinement import CheckedBookie, CrashCandidates, Violation
from ledgerspec.tools.bookie_workloads import WORKLOAD_CONFIG, WORKLOADS, Workload, spec_for

__all__ = ["CrashCheckResult", "WorkloadResult", "check_workload", "crash_check", "default_scratch"]

#: Second crashes continue these outcomes of the first (torn tails are swept once, on the first crash).
SECOND_CRASH_OUTCOMES = ("process crash", "power loss")

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
        boundaries = sweep.run()
        for k in range(boundaries + 1):
            sweep.crash_at(k)
            if progress is not None:
                progress(workload.name, k + 1, boundaries + 1)
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
    """The state of one workload's sweep: directories, counts, violations, and the crash points already seen."""

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
        self._seen: dict[tuple[object, ...], int] = {}  # crash point key -> crash points it stands for
        self._dirs = 0

    def run(self) -> int:
        """The workload without a crash; returns its boundaries."""
        bookie = CheckedBookie(self._dir(), self.spec, self.config)
        self.workload.run(bookie)
        self._collect(bookie)
        self._remove(bookie.root)
        return bookie.fs.boundaries

    def crash_at(self, k: int) -> None:
        bookie = CheckedBookie(self._dir(), self.spec, self.config, crash_at=k)
        try:
            self.workload.run(bookie)
            where = "crash at the end"
        except SimulatedCrash:
            where = f"crash at {_event(bookie)} in {bookie.step_under_way}"
        candidates = bookie.crash_candidates()
        for outcome, snapshot in _distinct(bookie.outcomes()):
            self.crash_points += 1
            bookie.crash_point = f"{where}, {outcome}"
            after = self._restart(bookie, snapshot, outcome, candidates)
            if after is not None and self.second_crashes and outcome in SECOND_CRASH_OUTCOMES:
                self._second_crashes(bookie, snapshot, outcome, candidates, after)
        self._remove(bookie.root)

    def _restart(
        self, bookie: CheckedBookie, snapshot: TreeSnapshot, outcome: str, candidates: CrashCandidates
    ) -> int | None:
        """Continue the crash one way and restart; the restart's boundaries, or None if this was seen before."""
        key = (_digest(snapshot), bookie.history, frozenset(bookie.lacs_acked.items()), candidates)
        if key in self._seen:
            return None
        after = bookie.fork(self._dir(), snapshot, outcome, candidates)
        after.start()
        self.restarts += 1
        self._collect(after)
        self._seen[key] = after.fs.boundaries
        self._remove(after.root)
        return after.fs.boundaries

    def _second_crashes(
        self, bookie: CheckedBookie, snapshot: TreeSnapshot, outcome: str, candidates: CrashCandidates, boundaries: int
    ) -> None:
        for j in range(boundaries):
            first = bookie.fork(self._dir(), snapshot, outcome, candidates)
            first.fs.crash_at = first.crash_at = j
            with contextlib.suppress(SimulatedCrash):
                first.start()
            restart_candidates = first.crash_candidates()
            where = f"restart crashed at {_event(first)} in {first.step_under_way}"
            for second_outcome, second_snapshot in _distinct(first.outcomes()):
                if second_outcome not in SECOND_CRASH_OUTCOMES:
                    continue
                self.crash_points += 1
                self.second_crash_points += 1
                first.crash_point = f"{bookie.crash_point}; {where}, {second_outcome}"
                self._restart(first, second_snapshot, second_outcome, restart_candidates)
            self._remove(first.root)

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
    def _remove(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)


def default_scratch() -> str | None:
    """``/dev/shm`` when it is a writable directory (memory-backed on Linux), else None: the system default."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _event(bookie: CheckedBookie) -> str:
    event = bookie.fs.crash_event
    if event is None:
        return "the end"
    return str(event).replace(bookie.root + os.sep, "")


def _digest(snapshot: TreeSnapshot) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for path in sorted(snapshot.files):
        h.update(os.path.relpath(path, snapshot.root).encode() + b"\0")
        h.update(len(snapshot.files[path]).to_bytes(8, "big") + snapshot.files[path])
    for directory in sorted(snapshot.directories):
        h.update(b"d" + os.path.relpath(directory, snapshot.root).encode() + b"\0")
    return h.digest()


def _distinct(outcomes: Iterable[tuple[str, TreeSnapshot]]) -> list[tuple[str, TreeSnapshot]]:
    """The outcomes that leave different files (the first name of each)."""
    seen: set[bytes] = set()
    found = []
    for name, snapshot in outcomes:
        digest = _digest(snapshot)
        if digest not in seen:
            seen.add(digest)
            found.append((name, snapshot))
    return found
