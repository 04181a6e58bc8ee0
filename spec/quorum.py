"""The quorum rules of a BookKeeper ledger: write sets, the ack quorum, fencing and the missing-entry rule.

This module is the one place these rules are written. The ledger spec
(``ledger.py``) evaluates them on Python booleans at every step; the proofs
(``ledgerspec.tools.proofs.quorum_proofs``) evaluate the very same functions on Z3
terms. A rule is therefore written against a :class:`Logic`, which supplies
"at least n of these hold" and "all of these hold", and never branches on the
values it is given.

What is modelled (BRIEF sections 1 and 2):

- the write set of entry ``e``: ensemble indices ``(e + i) mod E``, ``i < Qw``
  (``RoundRobinDistributionSchedule``). There are ``E`` distinct write sets,
  the windows of ``Qw`` consecutive indices, and entry ``e`` uses window
  ``e mod E``;
- an add completes on ``Qa`` acks from its write set (``PendingAddOp``);
- fencing is complete once every write set has ``Qw - Qa + 1`` replies to the
  fencing read of the LAC (``RRQuorumCoverageSet.checkCovered``, used by
  ``ReadLastConfirmedOp``);
- recovery declares an entry missing once ``Qw - Qa + 1`` bookies of its write
  set answer NoSuchEntry or NoSuchLedger
  (``ReadOpBase.requiredBookiesMissingEntryForRecovery``);
- rules that are weaker or different, kept so that the proofs can show what
  goes wrong with them: fencing after ``Qa`` replies in total; fencing after
  ``E - Qa + 1`` replies in total (BP-46's "ensemble coverage"); a missing
  entry after ``Qa`` NoSuchEntry replies; and each real threshold lowered by
  one.

What is left out: which bookie sits at an index (the rules speak of ensemble
indices, 0-based as in BookKeeper), timing, and replies other than success
and NoSuchEntry (they count as no reply, as in ``RRQuorumCoverageSet``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

import attrs
from ledgerspec.spec.kernel import ConstantError

__all__ = [
    "FENCING_RULES",
    "MISSING_RULES",
    "PYTHON",
    "Logic",
    "Quorum",
    "Rule",
    "acked",
    "check_quorum",
]

B = TypeVar("B")


def check_quorum(E: int, Qw: int, Qa: int) -> None:
    """Raise :class:`ConstantError` naming the rule an impossible (E, Qw, Qa) breaks: 1 <= Qa <= Qw <= E."""
    if E < 1:
        raise ConstantError(f"ensemble size E must be at least 1, got E={E}")
    if Qa < 1:
        raise ConstantError(f"ack quorum Qa must be at least 1, got Qa={Qa}")
    if Qw > E:
        raise ConstantError(f"write quorum larger than the ensemble: Qw={Qw} > E={E}")
    if Qa > Qw:
        raise ConstantError(f"ack quorum larger than the write quorum: Qa={Qa} > Qw={Qw}")


@attrs.frozen
class Quorum:
    """A ledger's replication settings: ensemble size E, write quorum Qw, ack quorum Qa."""

    E: int
    Qw: int
    Qa: int
    #: The E write sets as ensemble indices: window i is i, i+1, .., i+Qw-1 mod E.
    windows: tuple[tuple[int, ...], ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        check_quorum(self.E, self.Qw, self.Qa)
        windows = tuple(tuple((i + k) % self.E for k in range(self.Qw)) for i in range(self.E))
        object.__setattr__(self, "windows", windows)

    def write_set(self, entry: int) -> tuple[int, ...]:
        """Ensemble indices entry ``entry`` goes to: ``(entry + i) mod E``, ``i < Qw``."""
        return self.windows[entry % self.E]

    @property
    def coverage(self) -> int:
        """Qw - Qa + 1: a set of that many bookies of a write set meets every ack quorum in it."""
        return self.Qw - self.Qa + 1

    @property
    def ensemble_coverage(self) -> int:
        """E - Qa + 1: BP-46's "ensemble coverage", the same idea over the whole ensemble."""
        return self.E - self.Qa + 1

    def __str__(self) -> str:
        return f"E={self.E} Qw={self.Qw} Qa={self.Qa}"


@attrs.frozen
class Logic(Generic[B]):
    """What a rule may do with the truth values it is given.

    ``at_least(xs, n)``: at least ``n`` of ``xs`` hold; ``all(xs)``: every one
    holds. :data:`PYTHON` is the logic of ``bool``; the proofs supply Z3's.
    """

    at_least: Callable[[Iterable[B], int], B]
    all: Callable[[Iterable[B]], B]


def _py_at_least(xs: Iterable[bool], n: int) -> bool:
    return sum(1 for x in xs if x) >= n


PYTHON: Logic[bool] = Logic(at_least=_py_at_least, all=all)


# -- the rules --------------------------------------------------------------------------
# A fencing rule is given, for each ensemble index, whether that bookie replied to the
# fencing read; a missing rule, for each member of the entry's write set (in write-set
# order), whether it answered NoSuchEntry. Each answers whether the client may go on.


def acked(q: Quorum, acks: Sequence[B], logic: Logic[B]) -> B:
    """An add completes once Qa bookies of its write set acked it (``acks``: one per write-set member)."""
    return logic.at_least(acks, q.Qa)


def fencing_covers_every_write_set(q: Quorum, replied: Sequence[B], logic: Logic[B]) -> B:
    """BookKeeper: every write set has at least Qw - Qa + 1 replies (RRQuorumCoverageSet)."""
    return logic.all(logic.at_least((replied[i] for i in window), q.coverage) for window in q.windows)


def fencing_after_qa_replies(q: Quorum, replied: Sequence[B], logic: Logic[B]) -> B:
    """Weaker: Qa replies from anywhere in the ensemble."""
    return logic.at_least(replied, q.Qa)


def fencing_after_ensemble_coverage(q: Quorum, replied: Sequence[B], logic: Logic[B]) -> B:
    """BP-46: E - Qa + 1 replies from anywhere in the ensemble ("ensemble coverage")."""
    return logic.at_least(replied, q.ensemble_coverage)


def fencing_one_short_in_every_write_set(q: Quorum, replied: Sequence[B], logic: Logic[B]) -> B:
    """Weaker: Qw - Qa replies in every write set, one fewer than BookKeeper's rule."""
    return logic.all(logic.at_least((replied[i] for i in window), q.coverage - 1) for window in q.windows)


def missing_after_coverage(q: Quorum, no_such: Sequence[B], logic: Logic[B]) -> B:
    """BookKeeper: Qw - Qa + 1 NoSuchEntry replies from the entry's write set."""
    return logic.at_least(no_such, q.coverage)


def missing_after_qa_no_such(q: Quorum, no_such: Sequence[B], logic: Logic[B]) -> B:
    """Weaker: Qa NoSuchEntry replies."""
    return logic.at_least(no_such, q.Qa)


def missing_one_short(q: Quorum, no_such: Sequence[B], logic: Logic[B]) -> B:
    """Weaker: Qw - Qa NoSuchEntry replies, one fewer than BookKeeper's rule."""
    return logic.at_least(no_such, q.coverage - 1)


@attrs.frozen
class Rule:
    """A fencing or missing-entry rule, with where it comes from."""

    name: str
    fn: Callable[[Quorum, Sequence[Any], Logic[Any]], Any]
    source: str

    @property
    def doc(self) -> str:
        return " ".join((self.fn.__doc__ or "").split())

    def holds(self, q: Quorum, answers: Sequence[B], logic: Logic[B]) -> B:
        result: B = self.fn(q, answers, logic)
        return result


#: How a recovering client decides that fencing is complete. The first is BookKeeper's.
FENCING_RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule("write_set_coverage", fencing_covers_every_write_set, "RRQuorumCoverageSet, ReadLastConfirmedOp"),
        Rule("qa_total", fencing_after_qa_replies, "seeded bug fence_qa_total"),
        Rule("ensemble_coverage", fencing_after_ensemble_coverage, "BP-46 (Running without the journal)"),
        Rule("one_short", fencing_one_short_in_every_write_set, "BookKeeper's threshold lowered by one"),
    )
}

#: How a recovering client decides that an entry is missing. The first is BookKeeper's.
MISSING_RULES: dict[str, Rule] = {
    rule.name: rule
    for rule in (
        Rule("write_set_coverage", missing_after_coverage, "ReadOpBase.requiredBookiesMissingEntryForRecovery"),
        Rule("qa_no_such", missing_after_qa_no_such, "seeded bug missing_after_qa_no_such"),
        Rule("one_short", missing_one_short, "BookKeeper's threshold lowered by one"),
    )
}
