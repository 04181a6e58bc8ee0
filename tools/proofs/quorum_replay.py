"""Replay a Z3 counterexample of :mod:`ledgerspec.tools.proofs.quorum_proofs` on the ledger spec.

A counterexample names bookies: which replied to the fencing read, which acked
an entry, which answered NoSuchEntry. Here it becomes a path of ledger-spec
actions (``spec/ledger/ledger.py``), run step by step through the spec's own actions:
each step must be enabled, and every invariant is checked on every state. The
same path is run twice: with the seeded bug that puts the weaker rule in place
(the path goes through and an invariant breaks), and with BookKeeper's rule
(the path is blocked at the step the real rule refuses).

Bookie ``k`` of a counterexample is bookie ``k`` of the ledger spec, whose
ensemble is ``<<1, ..., E>>``; entries are numbered from 0 in both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from ledgerspec.spec.kernel import Step
from ledgerspec.spec.ledger.ledger import DONE, READING, WRITER, WRITING_BACK, LedgerSpec, LedgerState, Msg
from ledgerspec.spec.quorum import Quorum
from ledgerspec.tools.model_checking.explorer.explorer import TraceStep
from ledgerspec.tools.proofs.quorum_proofs import CoverageGap, FencingCounterexample, MissingCounterexample

__all__ = [
    "Replay",
    "recovery_can_leave_fencing",
    "replay_coverage_gap",
    "replay_fencing",
    "replay_missing",
    "run_path",
]

RECOVERER = 1  # the ledger spec's first recovering client


@attrs.frozen
class Replay:
    """A path of spec actions run on one model: how far it went and what it broke."""

    constants: dict[str, Any]
    trace: tuple[TraceStep[LedgerState], ...]  # Init, then every step that was enabled
    blocked_at: Step | None  # the first step that was not enabled; None when the whole path ran
    violated: tuple[tuple[str, str], ...]  # (invariant, message) first broken along the path, in order

    @property
    def last(self) -> LedgerState:
        return self.trace[-1].state

    def first_violation(self) -> str | None:
        return self.violated[0][0] if self.violated else None


# A step of a path: the action's name and its arguments (as LedgerSpec.successors gives them).
PathStep = tuple[str, tuple[Any, ...]]


def run_path(spec: LedgerSpec, path: Iterable[PathStep], constants: dict[str, Any]) -> Replay:
    """Run ``path`` from the spec's initial state; stop at the first step the spec cannot take.

    A step can be taken when its arguments are among the action's parameters in
    that state (a message must be in flight) and its guard holds.
    """
    state = next(iter(spec.init_states()))
    trace = [TraceStep(Step("Init"), state)]
    violated: dict[str, str] = {}
    blocked = None
    for name, args in path:
        act = spec.find_action(name)
        offered = act.params is None or args in set(act.params(spec, state))
        nxt = act.fn(spec, state, *args) if offered else None
        if nxt is None:
            blocked = spec.step(act, args)
            break
        state = nxt
        trace.append(TraceStep(spec.step(act, args), state))
        for inv in spec.invariants:
            message = inv.fn(spec, state)
            if message is not None and inv.name not in violated:
                violated[inv.name] = message
    return Replay(dict(constants), tuple(trace), blocked, tuple(violated.items()))


def _model(q: Quorum, bug: str, **extra: int) -> dict[str, Any]:
    return {"NumBookies": q.E, "E": q.E, "Qw": q.Qw, "Qa": q.Qa, "MaxEntries": 1, "Bug": bug, **extra}


def _fence(b: int) -> PathStep:
    return ("BookieReceivesFenceRead", (Msg("FenceReq", RECOVERER, b, fence=True), True))


def _writer_add(b: int, entry: int) -> PathStep:
    return ("BookieReceivesAdd", (Msg("AddReq", WRITER, b, entry, -1), True))


def _read(b: int, entry: int) -> PathStep:
    return ("BookieReceivesRecoveryRead", (Msg("ReadReq", RECOVERER, b, entry, fence=True), True))


def replay_fencing(q: Quorum, cex: FencingCounterexample, bug: str) -> Replay:
    """The writer pushes the entry; recovery is fenced by ``cex.replied`` only; the unfenced bookies ack.

    With a weaker fencing rule the recoverer counts fencing complete and moves
    on to its reads, and then the old writer completes the entry with acks from
    bookies that were never fenced.
    """
    if cex.entry != 0:
        raise ValueError(f"the replay pushes one entry; the counterexample is about entry {cex.entry}")
    constants = _model(q, bug)
    path: list[PathStep] = [("WriterAddsEntry", (-1,)), ("RecovererStartsRecovery", (RECOVERER,))]
    path += [_fence(b) for b in cex.replied]
    path += [_writer_add(b, cex.entry) for b in cex.acks]
    return run_path(LedgerSpec(**constants), path, constants)


def replay_missing(q: Quorum, cex: MissingCounterexample, bug: str) -> Replay:
    """The entry is acked by ``cex.acked``; after fencing every bookie, ``cex.no_such`` answer the reads.

    With a weaker missing-entry rule those NoSuchEntry replies end the
    recovery before the acked entry, and the ledger is closed without it.
    """
    if cex.entry != 0:
        raise ValueError(f"the replay pushes one entry; the counterexample is about entry {cex.entry}")
    constants = _model(q, bug)
    path: list[PathStep] = [("WriterAddsEntry", (-1,))]
    path += [_writer_add(b, cex.entry) for b in cex.acked]
    path += [("RecovererStartsRecovery", (RECOVERER,))]
    path += [_fence(b) for b in range(1, q.E + 1)]
    path += [_read(b, cex.entry) for b in cex.no_such]
    path += [("RecovererClosesLedger", (RECOVERER,))]
    return run_path(LedgerSpec(**constants), path, constants)


def replay_coverage_gap(q: Quorum, gap: CoverageGap, bug: str = "none") -> Replay:
    """The bookies outside ``gap.replied`` crash; recovery fences the others, reads and closes the ledger.

    BookKeeper's rule (``bug="none"``) completes fencing with ``gap.replied``
    and closes the (empty) ledger; with BP-46's rule
    (``"fence_ensemble_coverage"``) the path stops at the first recovery read,
    since fencing never completes.
    """
    silent = [b for b in range(1, q.E + 1) if b not in gap.replied]
    constants = _model(q, bug, MaxCrashes=len(silent))
    path: list[PathStep] = [("BookieCrashes", (b,)) for b in silent]
    path += [("RecovererStartsRecovery", (RECOVERER,))]
    path += [_fence(b) for b in gap.replied]
    # Entry 0 was never written: its live bookies answer NoSuchEntry until enough have.
    first = q.write_set(0)
    path += [_read(i + 1, 0) for i in first if i + 1 in gap.replied][: q.coverage]
    path += [("RecovererClosesLedger", (RECOVERER,))]
    return run_path(LedgerSpec(**constants), path, constants)


def recovery_can_leave_fencing(spec: LedgerSpec, state: LedgerState, limit: int = 100_000) -> bool:
    """From ``state``, does some behaviour take a recovering client past FENCING, its fencing complete? (A small
    search.) A client that gives up while fencing does not count: it never got past it.

    Failed bookies stay down: the figures of this module count bookies that
    stop for good, so the search takes no ``BookieRestarts`` step.
    """
    return _reachable(spec, state, lambda s: any(r.phase in (READING, WRITING_BACK, DONE) for r in s.rec), limit)


def _reachable(spec: LedgerSpec, start: LedgerState, goal: Callable[[LedgerState], bool], limit: int) -> bool:
    seen = {start}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if goal(state):
            return True
        for act, _, nxt in spec.successors(state):
            if act.name != "BookieRestarts" and nxt not in seen:
                if len(seen) >= limit:
                    raise RuntimeError(f"more than {limit} states reachable; use a smaller model")
                seen.add(nxt)
                queue.append(nxt)
    return False
