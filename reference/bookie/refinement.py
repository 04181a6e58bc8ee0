"""A reference bookie driven step by step and checked against the bookie spec after every step.

:class:`CheckedBookie` owns a bookie directory on a
:class:`~ledgerspec.reference.bookie.faults.FaultyFileSystem`. Each of its
methods performs one reference step (``add``, ``force_write``, ``journal_sync``,
``checkpoint``, ``start``, a crash...) and then checks, through the abstraction
function (:mod:`ledgerspec.reference.bookie.abstraction`, whose docstring says
how the two granularities meet):

- refinement: the new abstract state is reached from the previous one by the
  spec actions the step is named after, each taken or not (a stutter); a
  request the reference refuses is one the spec does not enable;
- a crash: what the files show is ``BookieCrashes(cut)``, for some cut, of a
  spec state the interrupted step passes through;
- the spec's invariants on every new state, its action properties
  (``MarkNeverMovesBackwards``) on every step;
- direct checks: the records the bookie counts as synced are durable; after a
  restart every acknowledged entry reads back with its payload, every
  acknowledged fence and explicit LAC is kept, and the directory passes
  :func:`~ledgerspec.reference.bookie.disk.check_bookie_files`.

Violations are collected, not raised, the first of each name per run: a crash
sweep reports them all. The crash-point enumeration (:mod:`ledgerspec.tools.harness.crash_check`) and
the Hypothesis tests (``model_tests/``) drive this class; nothing here chooses
what to run.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator

import attrs
from ledgerspec.reference.bookie import (
    Bookie,
    BookieConfig,
    BookieError,
    BookieFiles,
    BookieLayout,
    BookieStateError,
    FaultyFileSystem,
    LedgerFencedError,
    RequestKind,
    check_bookie_files,
    encode_entry,
    encode_lac,
    read_bookie_files,
)
from ledgerspec.reference.bookie.abstraction import (
    AbstractionError,
    BookieAbstraction,
    History,
    NoJournalError,
    canonical,
)
from ledgerspec.reference.bookie.bookie import Request
from ledgerspec.reference.bookie.faults import TreeSnapshot
from ledgerspec.reference.bookie.formats import scan_journal
from ledgerspec.reference.bookie.journal import ForceWriteRequest
from ledgerspec.reference.bookie.layout import JOURNAL_SUFFIX
from ledgerspec.spec.bookie.bookie import FLUSHERS, NOT_FOUND, SYNC_THREAD, BookieSpec, BookieState
from ledgerspec.spec.values import format_value, normalize

__all__ = [
    "MASTER_KEY",
    "ActionRef",
    "CheckedBookie",
    "CrashCandidates",
    "CrashOutcome",
    "StepObserver",
    "Violation",
    "entry_bytes",
]

MASTER_KEY = b"crash-check-masterkey"


def entry_bytes(ledger: int, entry: int) -> bytes:
    """Entry ``entry`` of ``ledger`` as its writer sends it: LAC = the entry before, CRC32C, a payload naming it."""
    payload = f"ledger {ledger} entry {entry}".encode()
    return encode_entry(ledger, entry, entry - 1, 64 * (entry + 1), payload)


@attrs.frozen
class ActionRef:
    """A spec action a reference step is made of: its name, and its arguments (``None``: any)."""

    name: str
    args: tuple[object, ...] | None = None

    def __str__(self) -> str:
        if not self.args:
            return self.name
        return f"{self.name}({', '.join(format_value(normalize(a)) for a in self.args)})"


@attrs.frozen
class Violation:
    """Something the reference bookie did that the spec does not allow."""

    kind: str  # "invariant", "property", "refinement", "crash", "check", "abstraction"
    name: str  # the invariant, property or check broken
    message: str
    step: str  # the reference step after which it was found
    crash_point: str = ""  # where the crash sweep crashed the bookie ("" without a crash)
    differences: tuple[tuple[str, str, str], ...] = ()  # (variable, the spec's value, the abstraction's)

    def explain(self) -> str:
        """One paragraph: where, what, and the variables that differ."""
        where = f"{self.crash_point}: " if self.crash_point else ""
        text = f"{where}after {self.step}: {self.name}: {self.message}"
        for variable, expected, actual in self.differences:
            text += f"\n    {variable}: spec {expected}, bookie {actual}"
        return text

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "invariant": self.name,
            "message": self.message,
            "step": self.step,
            "crash_point": self.crash_point,
            "differences": [{"variable": v, "spec": e, "bookie": a} for v, e, a in self.differences],
        }


@attrs.frozen
class CrashOutcome:
    """One way a crash may end: what is on disk after it, and of that, what is durable."""

    label: str  # "process crash", "power loss", "power loss, <file> keeps n of m unsynced bytes"
    files: TreeSnapshot  # the files after the crash
    machine: FaultyFileSystem | None = None  # a process crash: the file system that knows what is durable

    @property
    def is_torn(self) -> bool:
        return "keeps" in self.label


@attrs.frozen
class CrashCandidates:
    """The spec states a crash may have hit, and those among them from which a flush was under way."""

    states: frozenset[BookieState | None]  # None: no bookie yet (a first start before its journal exists)
    flushing: frozenset[BookieState] = frozenset()

    def __or__(self, other: CrashCandidates) -> CrashCandidates:
        return CrashCandidates(self.states | other.states, self.flushing | other.flushing)


# What each reference step is, in spec actions (see the abstraction's docstring).
def _persist(spec: BookieSpec, flusher: int) -> tuple[ActionRef, ...]:
    """A persist writes the lastMark of each ledger directory in turn: a spec step per copy."""
    return (ActionRef("CheckpointPersistsMark", (flusher,)),) * spec.NumLedgerDirs


def _checkpoint(spec: BookieSpec) -> tuple[ActionRef, ...]:
    """The sync thread's checkpoint, whole."""
    flush = (ActionRef("FlusherTakesMark", (SYNC_THREAD,)), ActionRef("LedgerStorageFlushes", (SYNC_THREAD,)))
    return (*flush, *_persist(spec, SYNC_THREAD))


_FORCE_WRITE = (ActionRef("JournalForceWrites"), ActionRef("JournalRollsOver", ()))
_CRASH = (ActionRef("BookieCrashes"),)

#: ``observer(actions, before, after)``: a step (or crash) of a checked bookie, in spec terms (see ``observers``).
StepObserver = Callable[[tuple["ActionRef", ...], BookieState | None, BookieState], None]


@attrs.frozen
class _Step:
    """The step under way: what a crash inside it may have left."""

    label: str
    before: BookieState | None  # None: no bookie yet (the first start)
    actions: tuple[ActionRef, ...]


class CheckedBookie:
    """A reference bookie on a faulty file system, checked against ``spec`` after every step.

    ``crash_at`` makes the file system crash at that boundary (counted from
    this object's creation, across restarts); the step then raises
    :class:`~ledgerspec.reference.bookie.SimulatedCrash`, and :meth:`outcomes`
    lists what the crash may have left, each to be continued by :meth:`fork`.
    ``sync_to_disk`` passes fsyncs on to the disk (see
    :class:`~ledgerspec.reference.bookie.FaultyFileSystem`).
    """

    def __init__(
        self,
        root: str,
        spec: BookieSpec,
        config: BookieConfig,
        *,
        crash_at: int | None = None,
        sync_to_disk: bool = False,
        fs: FaultyFileSystem | None = None,
        check_refinement: bool = True,
    ) -> None:
        """``fs``: a faulty file system already on ``root`` (a crash continued there); else a new one.
        Without ``check_refinement`` only the invariants, the action properties and the direct checks are
        reported (to show what they catch on their own)."""
        self.root = os.path.abspath(root)
        self.spec = spec
        self.config = config
        self.crash_at = crash_at
        os.makedirs(self.root, exist_ok=True)
        self.fs = fs or FaultyFileSystem(self.root, crash_at=crash_at, sync_to_disk=sync_to_disk)
        self.layout = BookieLayout.in_data_dir(self.root, spec.NumLedgerDirs)  # a lastMark copy in each
        self.abstraction = BookieAbstraction(spec)
        self.bookie: Bookie | None = None
        self.history = History()
        self.state: BookieState | None = None  # the abstract state after the last step; None: no bookie yet
        self.lacs_acked: dict[int, int] = {}  # ledger -> highest explicit LAC answered
        self.violations: list[Violation] = []
        self.steps = 0  # steps taken, crashes included
        self.crash_point = ""  # where a sweep crashed this run, for the reports
        self.check_refinement = check_refinement  # report steps and crashes that are no spec steps
        self._step: _Step | None = None  # the step under way (left set when a crash interrupts it)
        self._batch: list[ForceWriteRequest[Request]] = []  # taken by the force-write thread, not yet synced
        self._batch_fsynced = False  # the batch in flight is fsynced, not yet acknowledged
        self._last_crash = CrashCandidates(frozenset())  # what the last crash was matched against
        self._seen: set[tuple[str, str]] = set()  # (kind, name) reported in this run
        self._lost = False  # the abstraction failed: later states cannot be compared with the spec
        #: called after every step and crash whose abstract state is known: (the spec actions the step is made
        #: of, the abstract state before it or None for the first start, the abstract state after it)
        self.observers: list[StepObserver] = []

    @property
    def up(self) -> bool:
        return self.bookie is not None and self.bookie.up

    @property
    def batch_in_flight(self) -> bool:
        """The force-write thread has taken a batch and not yet acknowledged it."""
        return bool(self._batch)

    @property
    def batch_fsynced(self) -> bool:
        """The batch in flight is fsynced: the force-write thread acknowledges it next."""
        return bool(self._batch) and self._batch_fsynced

    @property
    def step_under_way(self) -> str | None:
        """The step a crash interrupted (None between steps)."""
        return self._step.label if self._step is not None else None

    def close(self) -> None:
        """Close the files, running or crashed: this run is over."""
        self.fs.close()
        self.bookie = None

    # ------------------------------------------------------------ requests

    def add(self, ledger: int, entry: int) -> bool:
        """BookieAddsEntry: add entry ``entry`` of ``ledger``; False when the bookie refuses it (fenced)."""
        action = ActionRef("BookieAddsEntry", (ledger, entry))
        return self._request(action, lambda b: b.add_entry(entry_bytes(ledger, entry), MASTER_KEY))

    def fence(self, ledger: int) -> bool:
        """BookieFencesLedger."""
        return self._request(ActionRef("BookieFencesLedger", (ledger,)), lambda b: b.fence_ledger(ledger, MASTER_KEY))

    def set_lac(self, ledger: int, lac: int) -> bool:
        """BookieSetsExplicitLac."""
        action = ActionRef("BookieSetsExplicitLac", (ledger, lac))
        return self._request(action, lambda b: b.set_explicit_lac(encode_lac(ledger, lac), MASTER_KEY))

    def _request(self, action: ActionRef, call: Callable[[Bookie], object]) -> bool:
        bookie = self._running()
        with self._checked(str(action), (action,)):
            try:
                call(bookie)
            except LedgerFencedError:
                self._check_refused(action)
                return False
        return True

    def read(self, ledger: int, entry: int) -> str:
        """Read an entry: the path that serves it must be the spec's ``read_path`` (memtable, entry log or
        none), and an entry that is found reads back with its payload. Not a step: nothing changes."""
        bookie = self._running()
        path = bookie.read_path(ledger, entry) or NOT_FOUND
        state = self.state
        if state is not None and not self._lost and path != self.spec.read_path(state, ledger, entry):
            expected = self.spec.read_path(state, ledger, entry)
            message = f"a read of ({ledger}, {entry}) is served by {path}, the spec says {expected}"
            self._report("check", "ReadPath", message, f"read({ledger}, {entry})")
        if path != NOT_FOUND:
            try:
                data = bookie.read_entry(ledger, entry)
            except BookieError as exc:
                self._report("check", "ReadBack", f"a read of ({ledger}, {entry}) fails: {exc}", "read")
            else:
                if data != entry_bytes(ledger, entry):
                    self._report("check", "ReadBack", f"a read of ({ledger}, {entry}) returns other bytes", "read")
        return path

    # ------------------------------------------------------------ the journal

    def journal_flush(self) -> None:
        """The journal thread writes its buffer to the OS: a stutter."""
        bookie = self._running()
        with self._checked("journal_flush", ()):
            bookie.journal_flush()

    def take_batch(self) -> None:
        """The force-write thread takes the flushed batches; it has one batch in flight at a time."""
        bookie = self._running()
        if self._batch:
            raise RuntimeError("a batch is in flight: journal_synced() it first")
        with self._checked("take_batch", ()):
            self._batch, self._batch_fsynced = bookie.take_batch(), False

    def journal_sync(self) -> None:
        """The force-write thread fsyncs the batch it took: a stutter, nothing is acknowledged yet."""
        self._running()
        with self._checked("journal_sync", ()):
            Bookie.journal_sync(self._batch)
        self._batch_fsynced = True

    def journal_synced(self) -> None:
        """After the fsync: mark and synced at the end of the batch, its requests answered (JournalForceWrites)."""
        bookie = self._running()
        if self._batch and not self._batch_fsynced:
            raise RuntimeError("the batch in flight is not fsynced: journal_sync() it first")
        batch, self._batch = self._batch, []
        with self._checked("journal_synced", (ActionRef("JournalForceWrites"),)):
            bookie.journal_synced(batch)

    def force_write(self) -> None:
        """Flush, take, fsync, acknowledge in one step, then roll over if the file is full."""
        bookie = self._running()
        if self._batch:
            raise RuntimeError("a batch is in flight: journal_synced() it first")
        with self._checked("force_write", _FORCE_WRITE):
            bookie.force_write()

    def roll_journal(self) -> None:
        """JournalRollsOver (the buffer is written to the old file first)."""
        bookie = self._running()
        with self._checked("roll_journal", (ActionRef("JournalRollsOver", ()),)):
            bookie.roll_journal()

    # ------------------------------------------------------------ the checkpoint

    def start_checkpoint(self, flusher: int = SYNC_THREAD) -> bool:
        """FlusherTakesMark; False when the bookie refuses (the flusher is under way, or has nothing to do)."""
        return self._flusher_step("start_checkpoint", ActionRef("FlusherTakesMark", (flusher,)), flusher)

    def flush_ledger_storage(self, flusher: int = SYNC_THREAD) -> bool:
        """LedgerStorageFlushes; False when the bookie refuses (no mark taken, or flushed already)."""
        return self._flusher_step("flush_ledger_storage", ActionRef("LedgerStorageFlushes", (flusher,)), flusher)

    def persist_mark(self, flusher: int = SYNC_THREAD) -> bool:
        """CheckpointPersistsMark, once a ledger directory; False when the bookie refuses (not flushed yet)."""
        return self._flusher_step("persist_mark", ActionRef("CheckpointPersistsMark", (flusher,)), flusher)

    def _flusher_step(self, method: str, action: ActionRef, flusher: int) -> bool:
        bookie = self._running()
        actions = _persist(self.spec, flusher) if method == "persist_mark" else (action,)
        label = method if flusher == SYNC_THREAD else f"{method}({FLUSHERS[flusher]})"
        with self._checked(label, actions):
            try:
                getattr(bookie, method)(flusher)
            except BookieStateError:
                self._check_refused(action)
                return False
        return True

    def checkpoint(self) -> None:
        """A whole checkpoint, then the deletion of the journal files it allows (oldest first)."""
        bookie = self._running()
        assert self.state is not None
        deletions = (ActionRef("JournalFileDeleted"),) * (len(self.state.journal) - 1)
        with self._checked("checkpoint", (*_checkpoint(self.spec), *deletions)):
            bookie.checkpoint()

    def delete_journal(self, file_id: int) -> None:
        bookie = self._running()
        with self._checked(f"delete_journal({file_id})", (ActionRef("JournalFileDeleted", (file_id,)),)):
            bookie.delete_journal(file_id)

    def deletable_journals(self) -> list[int]:
        return self._running().deletable_journals()

    # ------------------------------------------------------------ crash and restart

    def start(self) -> None:
        """Start a bookie on the directory: the spec's Init the first time, then BookieReplaysJournal and a
        checkpoint; then check that what was acknowledged is there."""
        if self.up:
            raise RuntimeError("the bookie is up: crash it first")
        actions = () if self.state is None else (ActionRef("BookieReplaysJournal", ()), *_checkpoint(self.spec))
        bookie = self.bookie = Bookie(self.layout, self.fs, self.config)
        self._step = _Step("start", self.state, actions)
        try:
            bookie.start()
        except BookieError as exc:
            self._step, self.bookie = None, None
            self._report("check", "BookieRestarts", f"the bookie does not start: {exc}", "start")
            return
        self._step = None
        self._finish_step("start", actions)
        self._check_restarted(bookie)

    def power_loss(self, torn: dict[str, int] | None = None) -> None:
        """The machine loses power between steps; ``torn`` keeps that many of a file's unsynced bytes."""
        label = "power loss" + (f" ({self._describe_torn(torn)})" if torn else "")
        self._crash_between_steps(label, lambda: self.fs.power_loss(torn))

    def process_crash(self) -> None:
        """The process dies between steps; the OS keeps what was written."""
        self._crash_between_steps("process crash", self.fs.restart_process)

    def _crash_between_steps(self, label: str, crash: Callable[[], None]) -> None:
        if not self.up:
            raise RuntimeError("the bookie is not up: a crash needs a running bookie")
        candidates = self.crash_candidates()
        crash()
        self.fs.crash_at = self.crash_at  # the file system disarms itself on a crash
        self._after_crash(label, candidates)

    def crash_candidates(self) -> CrashCandidates:
        """The spec states the step under way passes through: a crash inside it is a crash of one of them.

        An interrupted restart adds the states the crash before it was matched
        against: to the spec the bookie never came up. ``None`` is "no bookie
        yet": a first start interrupted before its journal file exists.
        """
        step = self._step
        if step is None:
            return CrashCandidates(frozenset([self.state]))
        if step.before is None:
            path = self._path(self.spec.initial_state(), step.actions)
            return CrashCandidates(frozenset([None])) | path
        path = self._path(step.before, step.actions)
        return path | self._last_crash if not step.before.up else path

    def outcomes(self) -> Iterator[CrashOutcome]:
        """What the crash that stopped this run may leave on disk: a process crash (the OS keeps every write,
        durable or not), a power loss, and power losses that keep part of what was not fsynced.

        Torn journal tails end at and inside records, and are a prefix of the journal's unsynced bytes in
        file order (:meth:`torn_journal`); other files keep half or all of their unsynced bytes.
        """
        written, durable = self.fs.written_view(), self.fs.durable_view()
        yield CrashOutcome("process crash", written, self.fs)
        yield CrashOutcome("power loss", durable)
        unsynced = self.fs.unsynced_files()
        earlier: dict[str, int] = {}  # journal files before this one keep all their unsynced bytes
        for path in self.unsynced_journals():
            name = os.path.relpath(path, self.root)
            for keep in _torn_prefixes(path, len(durable.files[path]), written.files[path], unsynced[path]):
                label = f"power loss, {name} keeps {keep} of {unsynced[path]} unsynced bytes"
                yield CrashOutcome(label, self.fs.durable_view({**earlier, path: keep}))
            earlier[path] = unsynced[path]
        for path, size in sorted(unsynced.items()):
            if not path.endswith(JOURNAL_SUFFIX):
                name = os.path.relpath(path, self.root)
                for keep in _torn_prefixes(path, len(durable.files[path]), written.files[path], size):
                    label = f"power loss, {name} keeps {keep} of {size} unsynced bytes"
                    yield CrashOutcome(label, self.fs.durable_view({path: keep}))

    def unsynced_journals(self) -> list[str]:
        """The journal files with unsynced bytes, oldest first.

        A power loss keeps a prefix of their unsynced bytes taken in this order, as the spec's crash keeps a
        prefix of the unsynced records: a later journal file written back before an earlier one is left out
        of the spec (see ``spec/bookie/bookie.py``), and of the crashes tried here.
        """
        paths = [p for p in self.fs.unsynced_files() if p.endswith(JOURNAL_SUFFIX)]
        return sorted(paths, key=lambda p: int(os.path.basename(p)[: -len(JOURNAL_SUFFIX)], 16))

    def fork(
        self, root: str, outcome: CrashOutcome, candidates: CrashCandidates, crash_point: str = ""
    ) -> CheckedBookie:
        """A checked bookie on the new directory ``root`` holding what the crash left (``outcome``), with this
        run's history; the crash is checked at once against ``candidates``. ``crash_point`` says where the
        crash was, for the reports (this run's, by default)."""
        if outcome.machine is not None:
            fs = outcome.machine.copy_to(root)
        else:
            outcome.files.write_to(root)
            fs = FaultyFileSystem(root, sync_to_disk=self.fs.sync_to_disk)
        other = CheckedBookie(root, self.spec, self.config, fs=fs, check_refinement=self.check_refinement)
        other.abstraction = self.abstraction.copy()
        other.history = self._history_now(self.history)
        other.lacs_acked = dict(self.lacs_acked)
        other.observers = list(self.observers)
        other.state = self.state
        other.steps = self.steps
        other.crash_point = crash_point or self.crash_point
        other._last_crash = self._last_crash
        other._lost = self._lost
        other._after_crash(outcome.label, candidates)
        return other

    def _after_crash(self, label: str, candidates: CrashCandidates) -> None:
        """Check what the files show after a crash against the crashes of the candidate states."""
        self.history = self._history_now(self.history)
        self.bookie, self._batch, self._step = None, [], None
        self.steps += 1
        before = self.state
        try:
            down = self.abstraction.crashed(read_bookie_files(self.layout, self.fs), self.history)
        except AbstractionError as exc:
            if None in candidates.states and isinstance(exc, NoJournalError):  # a first start that never got to Init
                self.state, self._last_crash = None, CrashCandidates(frozenset([None]))
                self.history = History()
            else:
                self._report("abstraction", "Abstraction", str(exc), label)
                self._lost = True
            return
        if self._lost:
            return
        sources = self._crashes_of(candidates, down)  # each crash, and the state it crashed
        expected = list(sources)
        match = next((e for e in expected if canonical(self.spec, attrs.evolve(down, crashes=e.crashes)) == e), None)
        if match is None:
            closest = _closest(expected, attrs.evolve(down, crashes=-1))
            self._report(
                "crash",
                "BookieCrashes",
                f"what the files show after the {label} is no BookieCrashes(cut) of a state the interrupted step "
                "passes through",
                "the crash",
                () if closest is None else _differences(closest, attrs.evolve(down, crashes=closest.crashes)),
            )
        else:
            down = attrs.evolve(down, crashes=match.crashes)
            self.history = attrs.evolve(self.history, crashes=match.crashes)
            before = sources[match]  # the spec's step is the crash of that state (a restart never up is none)
        self._check_state(label, before, down)
        if self.state is not None:
            for observer in self.observers:
                observer(_CRASH, self.state, down)
        self.state, self._last_crash = down, candidates

    def _crashes_of(self, candidates: CrashCandidates, down: BookieState) -> dict[BookieState, BookieState]:
        """Every ``BookieCrashes(cut)`` of the candidates, and of the states a crash inside a flush leaves,
        each (canonical) with the state it crashed."""
        starts = [s for s in candidates.states if s is not None and s.up]
        for s in candidates.flushing:  # inside the flush: the ledger storage between before and after
            flushes = (self.spec.LedgerStorageFlushes(s, f) for f in FLUSHERS)
            flushed = next((x for x in flushes if x is not None), None)  # each flusher's flush writes the same
            if flushed is not None and _between(s, down, flushed):
                starts.append(
                    attrs.evolve(
                        s, flushed=down.flushed, fenced_flushed=down.fenced_flushed, lac_flushed=down.lac_flushed
                    )
                )
        crash = self.spec.find_action("BookieCrashes")
        assert crash.params is not None
        results: dict[BookieState, BookieState] = {}
        for s in starts:
            for args in crash.params(self.spec, s):
                nxt = crash.fn(self.spec, s, *args)
                if nxt is not None:
                    results.setdefault(canonical(self.spec, nxt), s)
        return results

    # ------------------------------------------------------------ checking

    def _running(self) -> Bookie:
        if self.bookie is None or not self.bookie.up:
            raise RuntimeError("the bookie is not up: start() it")
        return self.bookie

    @contextlib.contextmanager
    def _checked(self, label: str, actions: tuple[ActionRef, ...]) -> Iterator[None]:
        """Run one reference step; a crash inside it leaves it as the step under way."""
        self._step = _Step(label, self.state, actions)
        yield
        self._step = None
        self._finish_step(label, actions)

    def _finish_step(self, label: str, actions: tuple[ActionRef, ...]) -> None:
        before = self.state
        self.history = self._history_now(self.history)
        self.steps += 1
        bookie = self.bookie
        assert bookie is not None
        durable = read_bookie_files(self.layout, self.fs.durable_view())
        try:
            after = self.abstraction.running(
                bookie.memory_state(), read_bookie_files(self.layout, self.fs.written_view()), durable, self.history
            )
        except AbstractionError as exc:
            self._report("abstraction", "Abstraction", str(exc), label)
            self._lost = True
            return
        if self._lost:
            return
        reached = [self.spec.initial_state()] if before is None else self._path(before, actions).last
        expected = {canonical(self.spec, e) for e in reached}
        if canonical(self.spec, after) not in expected:
            closest = _closest(expected, canonical(self.spec, after))
            assert closest is not None
            names = ", ".join(str(a) for a in actions)
            if before is None:
                what = "is not the spec's initial state"
            elif names:
                what = f"is not reached by {names}, or a stutter"
            else:
                what = "is not the state before the step, which the spec sees as a stutter"
            differences = _differences(closest, canonical(self.spec, after))
            self._report("refinement", "Refinement", f"the abstract state {what}", label, differences)
        self._check_state(label, before, after)
        self._check_synced_is_durable(label, after, durable)
        self.state = after
        for observer in self.observers:
            observer(actions, before, after)

    def _check_state(self, label: str, before: BookieState | None, after: BookieState) -> None:
        for name, message in self.spec.invariant_failures(after):
            self._report("invariant", name, message, label)
        if before is not None:
            for name, message in self.spec.property_failures(before, after):
                self._report("property", name, message, label)

    def _check_refused(self, action: ActionRef) -> None:
        state = self.state
        assert state is not None and action.args is not None
        if getattr(self.spec, action.name)(state, *action.args) is not None:
            message = f"the bookie refused {action}, which the spec enables"
            self._report("refinement", "Refinement", message, str(action))

    def _check_synced_is_durable(self, label: str, state: BookieState, durable: BookieFiles) -> None:
        """Every record the bookie counts as synced is in the durable journal."""
        on_disk = {scan.file_id: sum(1 for _ in scan.spec_records()) for scan in durable.journals}
        for f, recs in state.journal:
            needed = sum(1 for i in range(len(recs)) if (f, i) < state.synced)
            if on_disk.get(f, 0) < needed:
                self._report(
                    "check",
                    "SyncedIsDurable",
                    f"journal file {f}: the bookie counts {needed} record(s) as synced, "
                    f"{on_disk.get(f, 0)} are durable",
                    label,
                )

    def _check_restarted(self, bookie: Bookie) -> None:
        """After a restart: what was acknowledged is there, and the files agree with each other."""
        for ledger, entry in sorted(self.history.acked):
            try:
                data = bookie.read_entry(ledger, entry)
            except BookieError as exc:
                self._report("check", "AckedEntryReadsBack", f"entry ({ledger}, {entry}) was acknowledged: {exc}")
                continue
            if data != entry_bytes(ledger, entry):
                self._report("check", "AckedEntryReadsBack", f"entry ({ledger}, {entry}) reads back other bytes")
        for ledger in sorted(self.history.fence_acked):
            if not bookie.is_fenced(ledger):
                self._report("check", "FenceKept", f"the fence of ledger {ledger} was acknowledged and is gone")
        for ledger, lac in sorted(self.lacs_acked.items()):
            try:
                kept = bookie.read_explicit_lac(ledger)
            except BookieError:
                kept = None
            if kept is None or kept < lac:
                message = f"ledger {ledger}: explicit LAC {lac} was acknowledged, the bookie now has {kept}"
                self._report("check", "ExplicitLacKept", message)
        for problem in check_bookie_files(read_bookie_files(self.layout, self.fs.written_view())):
            if problem.severity == "error":
                offset = f" at offset {problem.offset}" if problem.offset is not None else ""
                where = os.path.relpath(problem.path, self.root)
                self._report("check", "FilesValid", f"{where}{offset}: {problem.message}")

    def history_now(self) -> History:
        """The history, with the replies the bookie has delivered so far (in the middle of a step too)."""
        return self._history_now(self.history)

    def _history_now(self, history: History) -> History:
        """The history with the replies the running bookie has delivered."""
        bookie = self.bookie
        if bookie is None:
            return history
        acked, fences = set(history.acked), set(history.fence_acked)
        for reply in bookie.replies:
            if reply.kind is RequestKind.ADD and not reply.recovery:
                acked.add((reply.ledger_id, reply.entry_id))
            elif reply.kind is RequestKind.FENCE:
                fences.add(reply.ledger_id)
            elif reply.kind is RequestKind.LAC:
                self.lacs_acked[reply.ledger_id] = max(self.lacs_acked.get(reply.ledger_id, -1), reply.lac)
        return attrs.evolve(history, acked=frozenset(acked), fence_acked=frozenset(fences))

    def _path(self, start: BookieState, actions: tuple[ActionRef, ...]) -> _Path:
        """The states after each prefix of ``actions``, each action taken or not."""
        frontier = {start}
        seen = set(frontier)
        flushing: set[BookieState] = set()
        for ref in actions:
            act = self.spec.find_action(ref.name)
            reached = set(frontier)
            for s in frontier:
                if ref.args is not None:
                    instances = [ref.args]
                else:
                    assert act.params is not None
                    instances = list(act.params(self.spec, s))
                for args in instances:
                    nxt = act.fn(self.spec, s, *args)
                    if nxt is not None:
                        reached.add(nxt)
                        if ref.name == "LedgerStorageFlushes":
                            flushing.add(s)
            frontier = reached
            seen |= reached
        return _Path(frozenset(seen), frozenset(flushing), frozenset(frontier))

    def _report(
        self,
        kind: str,
        name: str,
        message: str,
        step: str = "start",
        differences: tuple[tuple[str, str, str], ...] = (),
    ) -> None:
        if (kind, name) in self._seen or (kind in ("refinement", "crash") and not self.check_refinement):
            return
        self._seen.add((kind, name))
        self.violations.append(Violation(kind, name, message, step, self.crash_point, differences))

    def _describe_torn(self, torn: dict[str, int]) -> str:
        return ", ".join(f"{os.path.relpath(p, self.root)} keeps {n} unsynced bytes" for p, n in sorted(torn.items()))


@attrs.frozen
class _Path(CrashCandidates):
    """The states a step passes through (``states``), and where it may end (``last``)."""

    last: frozenset[BookieState] = frozenset()


def _between(before: BookieState, down: BookieState, after: BookieState) -> bool:
    """``down``'s ledger storage lies between ``before``'s and ``after``'s (a flush cut short)."""
    return (
        before.flushed <= down.flushed <= after.flushed
        and before.fenced_flushed <= down.fenced_flushed <= after.fenced_flushed
        and all(d in (b, a) for b, d, a in zip(before.lac_flushed, down.lac_flushed, after.lac_flushed, strict=True))
    )


def _closest(candidates: Iterable[BookieState], actual: BookieState) -> BookieState | None:
    """The candidate that differs from ``actual`` in the fewest variables (ties broken by the values, so that
    reports do not depend on the order of a set)."""
    return min(candidates, key=lambda c: (len(_differences(c, actual)), repr(c)), default=None)


def _differences(expected: BookieState, actual: BookieState) -> tuple[tuple[str, str, str], ...]:
    """The variables in which two states differ: (name, expected value, actual value)."""
    found = []
    for field in attrs.fields(type(expected)):
        a, b = getattr(expected, field.name), getattr(actual, field.name)
        if a != b:
            found.append((field.name, format_value(normalize(a)), format_value(normalize(b))))
    return tuple(found)


def _torn_prefixes(path: str, durable_size: int, written: bytes, unsynced: int) -> list[int]:
    """How many unsynced bytes of ``path`` a torn power loss keeps: for a journal, the end of each unsynced
    record and the middle of the first and the last; for other files, half and all."""
    if not path.endswith(JOURNAL_SUFFIX):
        return sorted({max(1, unsynced // 2), unsynced})
    file_id = int(os.path.basename(path)[: -len(JOURNAL_SUFFIX)], 16)
    records = [r for r in scan_journal(path, written, file_id).records if r.end > durable_size]
    keeps = {r.end - durable_size for r in records}
    for r in records[:1] + records[-1:]:
        keeps.add((max(r.offset, durable_size) + r.end) // 2 - durable_size)
    keeps.add(unsynced)
    return sorted(k for k in keeps if 0 < k <= unsynced)
