"""Proofs, with Z3, of what a ledger's (E, Qw, Qa) guarantees, and counterexamples where a rule is too weak.

The rules are the functions of :mod:`ledgerspec.spec.quorum`, the ones the
ledger spec runs, evaluated here on Z3 terms. For one configuration
:func:`analyse` establishes:

Safety of the recovery rules (a rule is *safe* when Z3 finds the negation unsatisfiable):

- fencing: once the rule says fencing is complete, no entry's write set holds
  ``Qa`` bookies that did not reply, so no entry can gain ``Qa`` acks from
  bookies that are not fenced;
- missing entries: an entry that ``Qa`` bookies acked (stored durably, so none
  of them ever answers NoSuchEntry) is never declared missing.

BookKeeper's rules are proved safe; for each weaker rule Z3 either proves it
safe for this configuration too or returns a counterexample: which bookies
replied, which entry, which bookies ack it or answered NoSuchEntry.
BookKeeper's fencing rule is also compared with BP-46's "ensemble coverage".

Failures tolerated, each the largest number ``t`` of failed bookies such that
*every* set of ``t`` failures keeps the guarantee: Z3 finds the smallest failure
set that breaks it (size ``t + 1``; that set is the counterexample) and proves
that none of size ``t`` does. A failed bookie has stopped for good and its
disk is gone; BookKeeper's cookies keep a bookie from coming back empty, so it
never answers again.

Bookies in counterexamples are numbered as in the ledger spec: the ensemble is
bookies ``1 .. E`` (bookie ``k`` at ensemble index ``k - 1``), the cluster's
spare bookies are ``E + 1 .. N``; entry ids start at 0. Each counterexample is
the first in order: lowest entry, then fewest bookies of each kind with the
lowest numbers. (Write sets are rotations of one another, so where a rule fails
for some entry it fails for entry 0.)

    python -m ledgerspec.tools.proofs.quorum_proofs [--max-ensemble 12]

proves every configuration 1 <= Qa <= Qw <= E <= max-ensemble and prints how
long it took.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import z3
from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.quorum import FENCING_RULES, MISSING_RULES, Logic, Quorum, Rule, acked

__all__ = [
    "GUARANTEES",
    "Z3",
    "CoverageGap",
    "FailureCounterexample",
    "FencingCounterexample",
    "Guarantee",
    "MissingCounterexample",
    "QuorumAnalysis",
    "Tolerance",
    "Verdict",
    "analyse",
    "check_bookies",
    "check_fencing_rule",
    "check_missing_rule",
    "compare_fencing_rules",
    "counting_core_holds_for_every_quorum",
    "every_quorum",
    "failures_tolerated",
    "main",
]


def _z3_at_least(xs: Iterable[Any], n: int) -> Any:
    terms = list(xs)
    if n <= 0:
        return z3.BoolVal(True)
    if n > len(terms):
        return z3.BoolVal(False)
    return z3.AtLeast(*terms, n)


def _z3_all(xs: Iterable[Any]) -> Any:
    return z3.And(list(xs))


#: The rules' logic on Z3 terms.
Z3: Logic[Any] = Logic(at_least=_z3_at_least, all=_z3_all)


def check_bookies(q: Quorum, bookies: int) -> None:
    """A cluster must hold the ensemble: BookKeeper refuses to create the ledger otherwise."""
    if bookies < q.E:
        raise ConstantError(
            f"not enough bookies for the ensemble: bookies={bookies} < E={q.E} "
            "(BookKeeper fails the create with BKNotEnoughBookiesException)"
        )


def _names(indices: Iterable[int]) -> tuple[int, ...]:
    """Ensemble (or cluster) indices as bookie numbers, 1-based as in the ledger spec."""
    return tuple(i + 1 for i in sorted(indices))


def _list(bookies: Sequence[int]) -> str:
    return ", ".join(str(b) for b in bookies)


def _bookies(bookies: Sequence[int]) -> str:
    """'bookie 1', 'bookies 1, 2', or 'no bookie'."""
    if not bookies:
        return "no bookie"
    return f"bookie{'s' if len(bookies) > 1 else ''} {_list(bookies)}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# -- counterexamples ---------------------------------------------------------------------
@attrs.frozen
class FencingCounterexample:
    """A fencing rule says complete, yet an entry's write set has Qa bookies that never replied."""

    replied: tuple[int, ...]  # bookies that answered the fencing read
    entry: int  # an entry the old writer can still complete
    write_set: tuple[int, ...]  # that entry's bookies
    acks: tuple[int, ...]  # Qa bookies of the write set that did not reply: not fenced, they ack the old writer

    def describe(self) -> str:
        return (
            f"fencing replies from {_bookies(self.replied)} count as complete, yet {_bookies(self.acks)} of "
            f"entry {self.entry}'s write set {{{_list(self.write_set)}}} {'is' if len(self.acks) == 1 else 'are'} "
            f"not fenced: the old writer still gets {_plural(len(self.acks), 'ack')} for entry {self.entry}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "replied": list(self.replied),
            "entry": self.entry,
            "write_set": list(self.write_set),
            "unfenced_acks": list(self.acks),
            "description": self.describe(),
        }


@attrs.frozen
class MissingCounterexample:
    """Recovery declares missing an entry that Qa bookies acked."""

    entry: int
    write_set: tuple[int, ...]
    acked: tuple[int, ...]  # bookies that stored and acked the entry
    no_such: tuple[int, ...]  # bookies of the write set that answered NoSuchEntry

    def describe(self) -> str:
        return (
            f"entry {self.entry} (write set {{{_list(self.write_set)}}}) was acked by {_bookies(self.acked)}; "
            f"NoSuchEntry from {_bookies(self.no_such)} declares it missing: an acked entry is lost"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "entry": self.entry,
            "write_set": list(self.write_set),
            "acked": list(self.acked),
            "no_such_entry": list(self.no_such),
            "description": self.describe(),
        }


@attrs.frozen
class CoverageGap:
    """Fencing replies that one rule counts as complete and another does not."""

    replied: tuple[int, ...]
    complete_under: str
    incomplete_under: str
    description: str

    def describe(self) -> str:
        return self.description

    def to_json(self) -> dict[str, Any]:
        return {
            "replied": list(self.replied),
            "complete_under": self.complete_under,
            "incomplete_under": self.incomplete_under,
            "description": self.description,
        }


@attrs.frozen
class FailureCounterexample:
    """The smallest set of failed bookies that breaks a guarantee."""

    failed: tuple[int, ...]
    entry: int | None  # the entry concerned, where there is one
    description: str

    def describe(self) -> str:
        return self.description

    def to_json(self) -> dict[str, Any]:
        return {"failed": list(self.failed), "entry": self.entry, "description": self.description}


Counterexample = FencingCounterexample | MissingCounterexample


@attrs.frozen
class Verdict:
    """Whether a fencing or missing-entry rule is safe for one configuration."""

    kind: str  # fencing or missing
    rule: Rule
    safe: bool  # Z3 proved it: the negation is unsatisfiable
    counterexample: Counterexample | None

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule.name,
            "description": self.rule.doc,
            "source": self.rule.source,
            "safe": self.safe,
            "counterexample": None if self.counterexample is None else self.counterexample.to_json(),
        }


@attrs.frozen
class Tolerance:
    """How many failed bookies a guarantee survives, whichever bookies they are."""

    name: str
    title: str
    definition: str  # what the guarantee is, and so what "tolerated" means for it
    tolerated: int  # every set of this many failed bookies keeps the guarantee
    proved: bool  # Z3: no failure set of size ``tolerated`` breaks it, and ``breaks_with`` does
    breaks_with: FailureCounterexample | None  # a smallest breaking set; None when no failure set breaks it

    def to_json(self) -> dict[str, Any]:
        return {
            "definition": self.definition,
            "tolerated": self.tolerated,
            "proved": self.proved,
            "breaks_with": None if self.breaks_with is None else self.breaks_with.to_json(),
        }


@attrs.frozen
class QuorumAnalysis:
    """Everything :func:`analyse` established about one configuration."""

    quorum: Quorum
    bookies: int  # N: the cluster's bookies, the ensemble's E and N - E spares
    fencing: tuple[Verdict, ...]  # one per fencing rule, BookKeeper's first
    missing: tuple[Verdict, ...]  # one per missing-entry rule, BookKeeper's first
    ensemble_coverage_implies_write_set_coverage: bool  # proved by Z3
    write_set_coverage_only: CoverageGap | None  # replies BookKeeper accepts and BP-46 does not
    tolerances: tuple[Tolerance, ...]
    seconds: float

    @property
    def replicas_per_entry(self) -> int:
        return self.quorum.Qw

    @property
    def fencing_replies_per_write_set(self) -> int:
        return self.quorum.coverage

    @property
    def missing_after_no_such_entry(self) -> int:
        return self.quorum.coverage

    @property
    def fencing_threshold_proved(self) -> bool:
        """Qw - Qa + 1 replies in each write set are safe, and one fewer is not: the figure is the one needed."""
        return self.verdict("fencing", "write_set_coverage").safe and not self.verdict("fencing", "one_short").safe

    @property
    def missing_threshold_proved(self) -> bool:
        """Qw - Qa + 1 NoSuchEntry replies are safe, and one fewer is not."""
        return self.verdict("missing", "write_set_coverage").safe and not self.verdict("missing", "one_short").safe

    @property
    def proved(self) -> bool:
        """Both thresholds and every tolerance figure proved."""
        return (
            self.fencing_threshold_proved and self.missing_threshold_proved and all(t.proved for t in self.tolerances)
        )

    def tolerance(self, name: str) -> Tolerance:
        for t in self.tolerances:
            if t.name == name:
                return t
        raise KeyError(name)

    def verdict(self, kind: str, rule: str) -> Verdict:
        for v in self.fencing if kind == "fencing" else self.missing:
            if v.rule.name == rule:
                return v
        raise KeyError(f"{kind} rule {rule}")

    def to_json(self) -> dict[str, Any]:
        q = self.quorum
        return {
            "valid": True,
            "ensemble": q.E,
            "write_quorum": q.Qw,
            "ack_quorum": q.Qa,
            "bookies": self.bookies,
            "replicas_per_entry": self.replicas_per_entry,
            "acked_entry_copies_at_least": q.Qa,
            "fencing_replies_per_write_set": self.fencing_replies_per_write_set,
            "missing_after_no_such_entry": self.missing_after_no_such_entry,
            "ensemble_coverage_replies": q.ensemble_coverage,
            "failures_tolerated": {t.name: t.to_json() for t in self.tolerances},
            "fencing_rules": [v.to_json() for v in self.fencing],
            "missing_rules": [v.to_json() for v in self.missing],
            "ensemble_coverage_implies_write_set_coverage": self.ensemble_coverage_implies_write_set_coverage,
            "write_set_coverage_only": (
                None if self.write_set_coverage_only is None else self.write_set_coverage_only.to_json()
            ),
            "proved": self.proved,
            "seconds": round(self.seconds, 3),
        }


# -- Z3 plumbing ---------------------------------------------------------------------------
def _bools(prefix: str, n: int) -> list[Any]:
    return [z3.Bool(f"{prefix}{i}") for i in range(n)]


def _true(model: Any, xs: Sequence[Any]) -> list[int]:
    return [i for i, x in enumerate(xs) if z3.is_true(model.eval(x, model_completion=True))]


# One step of choosing the first counterexample in order: fewest of a group of
# booleans, then the lowest indices; or the lowest value of an integer.
Preference = tuple[str, Any]


def _first_model(solver: Any, order: Sequence[Preference]) -> Any:
    """Among the models of a satisfiable ``solver``, the first in ``order``; fixes it in the solver."""
    for kind, what in order:
        if kind == "fewest":
            for k in range(len(what) + 1):
                if _sat_with(solver, z3.AtMost(*what, k)):
                    solver.add(z3.AtMost(*what, k))
                    break
            for x in what:  # lowest indices first
                solver.add(x if _sat_with(solver, x) else z3.Not(x))
        else:
            var, values = what
            for value in values:
                if _sat_with(solver, var == value):
                    solver.add(var == value)
                    break
    if solver.check() != z3.sat:  # every step above kept the solver satisfiable
        raise AssertionError("lost the counterexample while choosing the first one")
    return solver.model()


def _sat_with(solver: Any, constraint: Any) -> bool:
    solver.push()
    solver.add(constraint)
    result = bool(solver.check() == z3.sat)
    solver.pop()
    return result


@attrs.frozen
class _Entry:
    """A symbolic entry id in 0 .. E-1 (entry w uses window w; higher ids repeat the windows)."""

    var: Any
    is_: tuple[Any, ...]  # is_[w]: the entry is w

    @classmethod
    def of(cls, q: Quorum, solver: Any) -> _Entry:
        var = z3.Int("entry")
        solver.add(var >= 0, var < q.E)
        return cls(var, tuple(var == w for w in range(q.E)))

    def some(self, q: Quorum, body: Callable[[tuple[int, ...]], Any]) -> Any:
        """This entry's write set satisfies ``body``."""
        return z3.Or([z3.And(self.is_[w], body(window)) for w, window in enumerate(q.windows)])

    def member(self, q: Quorum, i: int) -> Any:
        """Ensemble index i is in this entry's write set."""
        return z3.Or([self.is_[w] for w, window in enumerate(q.windows) if i in window])

    def value(self, model: Any) -> int:
        return int(model.eval(self.var).as_long())


# -- the recovery rules ----------------------------------------------------------------
def check_fencing_rule(q: Quorum, rule: Rule) -> Verdict:
    """Once ``rule`` says fencing is complete, can an entry still gain Qa acks from bookies that did not reply?"""
    s = z3.Solver()
    replied, acks, entry = _bools("replied", q.E), _bools("ack", q.E), _Entry.of(q, s)
    s.add(rule.holds(q, replied, Z3))
    for i in range(q.E):
        # A bookie that replied to the fencing read is fenced and rejects the old writer's adds.
        s.add(z3.Implies(acks[i], z3.And(z3.Not(replied[i]), entry.member(q, i))))
    s.add(entry.some(q, lambda window: acked(q, [acks[i] for i in window], Z3)))
    if s.check() == z3.unsat:
        return Verdict("fencing", rule, True, None)
    m = _first_model(s, [("lowest", (entry.var, range(q.E))), ("fewest", replied), ("fewest", acks)])
    e = entry.value(m)
    cex = FencingCounterexample(
        replied=_names(_true(m, replied)),
        entry=e,
        write_set=_names(q.write_set(e)),
        acks=_names(_true(m, acks)),
    )
    return Verdict("fencing", rule, False, cex)


def check_missing_rule(q: Quorum, rule: Rule) -> Verdict:
    """Can ``rule`` declare missing an entry that Qa bookies of its write set acked?"""
    s = z3.Solver()
    stored, no_such, entry = _bools("stored", q.E), _bools("no_such", q.E), _Entry.of(q, s)
    for i in range(q.E):
        member = entry.member(q, i)
        s.add(z3.Implies(stored[i], member), z3.Implies(no_such[i], member))
        # A bookie acks only what it stored durably (journal before ack), so it never answers NoSuchEntry for it.
        s.add(z3.Implies(stored[i], z3.Not(no_such[i])))
    s.add(
        entry.some(
            q,
            lambda window: z3.And(
                acked(q, [stored[i] for i in window], Z3), rule.holds(q, [no_such[i] for i in window], Z3)
            ),
        )
    )
    if s.check() == z3.unsat:
        return Verdict("missing", rule, True, None)
    m = _first_model(s, [("lowest", (entry.var, range(q.E))), ("fewest", stored), ("fewest", no_such)])
    e = entry.value(m)
    cex = MissingCounterexample(
        entry=e,
        write_set=_names(q.write_set(e)),
        acked=_names(_true(m, stored)),
        no_such=_names(_true(m, no_such)),
    )
    return Verdict("missing", rule, False, cex)


def compare_fencing_rules(q: Quorum, complete: Rule, incomplete: Rule) -> tuple[int, ...] | None:
    """The first reply set that ``complete`` counts as complete and ``incomplete`` does not; None if none."""
    replied = _bools("replied", q.E)
    s = z3.Solver()
    s.add(complete.holds(q, replied, Z3), z3.Not(incomplete.holds(q, replied, Z3)))
    if s.check() == z3.unsat:
        return None
    m = _first_model(s, [("fewest", replied)])
    return _names(_true(m, replied))


# -- failures tolerated ------------------------------------------------------------------
@attrs.frozen
class _Failures:
    """A symbolic set of failed bookies of a cluster: the ensemble's indices 0 .. E-1, then the spares."""

    q: Quorum
    failed: list[Any]  # failed[j]: cluster bookie j has failed
    entry: _Entry  # the entry a guarantee fails for, where it speaks of one
    solver: Any

    def live(self, indices: Iterable[int]) -> list[Any]:
        return [z3.Not(self.failed[i]) for i in indices]

    def some_write_set_below(self, n: int) -> Any:
        """The entry's write set keeps fewer than ``n`` live bookies."""
        return self.entry.some(self.q, lambda window: z3.Not(Z3.at_least(self.live(window), n)))

    def more_failed_than_spares(self) -> Any:
        """More failed bookies in the ensemble than live spares to replace them with."""
        failed_members = z3.Sum([z3.If(self.failed[i], 1, 0) for i in range(self.q.E)])
        spares = self.failed[self.q.E :]
        live_spares = z3.Sum([z3.If(x, 0, 1) for x in spares]) if spares else z3.IntVal(0)
        return failed_members > live_spares


def _acked_entry_lost(f: _Failures) -> Any:
    """Qa bookies of an entry's write set acked it, and all of them failed."""
    q, acks = f.q, _bools("ack", f.q.E)
    for i in range(q.E):
        f.solver.add(z3.Implies(acks[i], z3.And(f.failed[i], f.entry.member(q, i))))
    return f.entry.some(q, lambda window: acked(q, [acks[i] for i in window], Z3))


def _writes_stall(f: _Failures) -> Any:
    """An entry's write set cannot gather Qa acks from its live bookies."""
    return f.entry.some(f.q, lambda window: z3.Not(acked(f.q, f.live(window), Z3)))


def _writes_stall_with_ensemble_change(f: _Failures) -> Any:
    """A write set stalls, and the failed bookies of the ensemble cannot all be replaced."""
    return z3.And(_writes_stall(f), f.more_failed_than_spares())


def _writes_stall_with_eager_ensemble_change(f: _Failures) -> Any:
    """A bookie of the ensemble failed (so a write to it fails), and the failed ones cannot all be replaced."""
    return z3.And(z3.Or([f.failed[i] for i in range(f.q.E)]), f.more_failed_than_spares())


def _fencing_stalls(f: _Failures) -> Any:
    """The live bookies of the ensemble, all replying, do not complete fencing under BookKeeper's rule."""
    q = f.q
    incomplete = z3.Not(FENCING_RULES["write_set_coverage"].holds(q, f.live(range(q.E)), Z3))
    # The entry names a write set that keeps too few bookies to reply: the reason it is incomplete.
    return z3.And(incomplete, f.some_write_set_below(q.coverage))


@attrs.frozen
class Guarantee:
    """A guarantee that bookie failures may break, and the Z3 condition "these failures break it"."""

    name: str
    title: str
    definition: str
    breaks: Callable[[_Failures], Any]
    uses_entry: bool  # the breaking condition names an entry


GUARANTEES = (
    Guarantee(
        "acked_entries_survive",
        "acknowledged entries survive",
        "every acknowledged entry keeps a copy on a live bookie. An entry is acknowledged once Qa bookies of its "
        "write set stored it, so it is lost when all of them fail",
        _acked_entry_lost,
        True,
    ),
    Guarantee(
        "writes_continue_without_ensemble_change",
        "writes continue, no ensemble change",
        "the writer keeps completing adds on the same ensemble: every write set keeps Qa live bookies "
        "(BookKeeper with ensemble change disabled, or delayed until an add cannot reach Qa)",
        _writes_stall,
        True,
    ),
    Guarantee(
        "writes_continue_with_ensemble_change",
        "writes continue, ensemble change when needed",
        "every write set keeps Qa live bookies, or else the writer replaces every failed bookie of the ensemble "
        "by a live bookie outside it (delayEnsembleChange=true); a replacement needs a spare bookie",
        _writes_stall_with_ensemble_change,
        True,
    ),
    Guarantee(
        "writes_continue_with_eager_ensemble_change",
        "writes continue, eager ensemble change (default)",
        "BookKeeper's default: the first failed write makes the writer replace the failed bookies; when the "
        "cluster has too few live bookies outside the ensemble to replace them, the ledger is closed",
        _writes_stall_with_eager_ensemble_change,
        False,
    ),
    Guarantee(
        "fencing_completes",
        "recovery can complete fencing",
        "a recovering client can complete fencing: every write set keeps Qw - Qa + 1 live bookies to answer",
        _fencing_stalls,
        True,
    ),
)


def _tolerance(q: Quorum, bookies: int, g: Guarantee) -> Tolerance:
    """The largest t such that no t failed bookies break ``g``, with a smallest set that does.

    Z3 looks for a breaking set of at most k failed bookies for k = 0, 1, ...; the
    first k it finds one for gives t = k - 1, and the unsatisfiable query for
    k - 1 is the proof that no t failures break the guarantee.
    """
    s = z3.Solver()
    f = _Failures(q, _bools("failed", bookies), _Entry.of(q, s), s)
    s.add(g.breaks(f))
    smallest = next((k for k in range(bookies + 1) if _sat_with(s, z3.AtMost(*f.failed, k))), None)
    if smallest is None:
        # Unsatisfiable even with every bookie failed: nothing breaks it.
        return Tolerance(g.name, g.title, g.definition, bookies, True, None)
    order: list[Preference] = [("fewest", f.failed)]
    if g.uses_entry:
        order.append(("lowest", (f.entry.var, range(q.E))))
    m = _first_model(s, order)
    failed = _true(m, f.failed)
    entry = f.entry.value(m) if g.uses_entry else None
    cex = FailureCounterexample(_names(failed), entry, _describe_failure(q, bookies, g.name, failed, entry))
    # With no failure every guarantee holds, so smallest > 0 and the query for smallest - 1 was unsatisfiable.
    return Tolerance(g.name, g.title, g.definition, smallest - 1, smallest > 0, cex)


def failures_tolerated(q: Quorum, bookies: int) -> tuple[Tolerance, ...]:
    """Every tolerance figure of ``q`` in a cluster of ``bookies`` bookies, each proved."""
    check_bookies(q, bookies)
    return tuple(_tolerance(q, bookies, g) for g in GUARANTEES)


def _describe_failure(q: Quorum, bookies: int, name: str, failed: list[int], entry: int | None) -> str:
    lost = f"{_bookies(_names(failed))} {'fails' if len(failed) == 1 else 'fail'}"
    window = q.write_set(entry or 0)
    live = sum(1 for i in window if i not in failed)
    write_set = f"entry {entry}'s write set {{{_list(_names(window))}}} keeps {_plural(live, 'live bookie')}"
    members = sum(1 for i in failed if i < q.E)
    spares = bookies - q.E - (len(failed) - members)
    cannot_replace = (
        f"there {'is' if members == 1 else 'are'} {_plural(members, 'failed ensemble bookie')} but "
        f"{'no live spare' if spares == 0 else 'only ' + _plural(spares, 'live spare')} to replace "
        f"{'it' if members == 1 else 'them'} (cluster of {bookies} bookies)"
    )
    if name == "acked_entries_survive":
        return f"{lost}: entry {entry} reached {_bookies(_names(failed))} only, which acked it; no copy is left"
    if name == "writes_continue_without_ensemble_change":
        return f"{lost}: {write_set}, fewer than Qa = {q.Qa}"
    if name == "writes_continue_with_ensemble_change":
        return f"{lost}: {write_set}, fewer than Qa = {q.Qa}, and {cannot_replace}"
    if name == "writes_continue_with_eager_ensemble_change":
        return f"{lost}: a write to the ensemble fails, and {cannot_replace}: the writer closes the ledger"
    return f"{lost}: {write_set}, fewer than the Qw - Qa + 1 = {q.coverage} that must answer the fencing read"


# -- one configuration ---------------------------------------------------------------------
def analyse(q: Quorum, bookies: int | None = None) -> QuorumAnalysis:
    """Prove or refute every rule and figure for ``q`` in a cluster of ``bookies`` (default E) bookies."""
    n = q.E if bookies is None else bookies
    check_bookies(q, n)
    started = time.perf_counter()
    fencing = tuple(check_fencing_rule(q, rule) for rule in FENCING_RULES.values())
    missing = tuple(check_missing_rule(q, rule) for rule in MISSING_RULES.values())
    write_sets, ec = FENCING_RULES["write_set_coverage"], FENCING_RULES["ensemble_coverage"]
    ec_only = compare_fencing_rules(q, ec, write_sets)
    gap_replies = compare_fencing_rules(q, write_sets, ec)
    gap = None
    if gap_replies is not None:
        gap = CoverageGap(
            replied=gap_replies,
            complete_under=write_sets.name,
            incomplete_under=ec.name,
            description=(
                f"replies from {_bookies(gap_replies)}: every write set has Qw - Qa + 1 = {q.coverage} "
                f"of them, so BookKeeper's fencing is complete; BP-46's ensemble coverage wants "
                f"E - Qa + 1 = {q.ensemble_coverage} replies and keeps waiting"
            ),
        )
    tolerances = failures_tolerated(q, n)
    return QuorumAnalysis(
        quorum=q,
        bookies=n,
        fencing=fencing,
        missing=missing,
        ensemble_coverage_implies_write_set_coverage=ec_only is None,
        write_set_coverage_only=gap,
        tolerances=tolerances,
        seconds=time.perf_counter() - started,
    )


def counting_core_holds_for_every_quorum() -> bool:
    """The counting step of both proofs, for unbounded integers 1 <= Qa <= Qw (so for every E).

    Every rule speaks of one write set at a time, and every entry's write set is
    one of the E windows of Qw bookies, so both safety proofs come down to
    counting in one write set: ``r`` bookies replied (or said NoSuchEntry), the
    other ``Qw - r`` may ack. Z3 shows that ``r >= Qw - Qa + 1`` leaves fewer
    than Qa unfenced bookies, and that ``Qa`` acking bookies and ``Qw - Qa + 1``
    NoSuchEntry answers cannot fit in ``Qw`` bookies.
    """
    qw, qa, r, ackers = z3.Ints("Qw Qa replied ackers")
    fencing = z3.Solver()
    fencing.add(qa >= 1, qa <= qw, r >= 0, r <= qw, r >= qw - qa + 1, ackers <= qw - r, ackers >= qa)
    missing = z3.Solver()
    missing.add(qa >= 1, qa <= qw, r >= 0, ackers >= qa, r >= qw - qa + 1, ackers + r <= qw)
    return bool(fencing.check() == z3.unsat and missing.check() == z3.unsat)


# -- every configuration -------------------------------------------------------------------
def every_quorum(max_ensemble: int) -> list[Quorum]:
    return [Quorum(e, w, a) for e in range(1, max_ensemble + 1) for w in range(1, e + 1) for a in range(1, w + 1)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ledgerspec.tools.proofs.quorum_proofs", description=__doc__)
    parser.add_argument("--max-ensemble", type=int, default=12, help="prove every E up to this (default 12)")
    parser.add_argument("--spares", type=int, default=0, help="cluster bookies beyond the ensemble (default 0)")
    args = parser.parse_args(argv)
    if args.max_ensemble < 1 or args.spares < 0:
        parser.error("--max-ensemble must be at least 1 and --spares not negative")
    configs = every_quorum(args.max_ensemble)

    # BookKeeper's two rules alone, then everything analyse() does.
    started = time.perf_counter()
    rules_safe = all(
        check_fencing_rule(q, FENCING_RULES["write_set_coverage"]).safe
        and check_missing_rule(q, MISSING_RULES["write_set_coverage"]).safe
        for q in configs
    )
    rules_seconds = time.perf_counter() - started
    started = time.perf_counter()
    analyses = [analyse(q, q.E + args.spares) for q in configs]
    core = counting_core_holds_for_every_quorum()
    seconds = time.perf_counter() - started

    failed = [a.quorum for a in analyses if not a.proved]
    unsafe = sum(not v.safe for a in analyses for v in (*a.fencing, *a.missing))
    print(f"{len(configs)} configurations 1 <= Qa <= Qw <= E <= {args.max_ensemble}, {args.spares} spare bookies")
    print(
        f"  BookKeeper's fencing and missing-entry rules: {'proved safe' if rules_safe else 'NOT proved'} "
        f"in {rules_seconds:.1f} s ({1000 * rules_seconds / len(configs):.0f} ms a configuration)"
    )
    print(
        f"  full analysis (thresholds, weaker rules, tolerated failures): {len(configs) - len(failed)} proved, "
        f"{unsafe} counterexamples to weaker rules, counting step for every E "
        f"{'proved' if core else 'NOT proved'}, in {seconds:.1f} s ({1000 * seconds / len(configs):.0f} ms a "
        "configuration)"
    )
    implied = sum(a.ensemble_coverage_implies_write_set_coverage for a in analyses)
    differ = sum(a.write_set_coverage_only is not None for a in analyses)
    print(
        f"  BP-46's ensemble coverage implies BookKeeper's fencing rule in {implied} of {len(configs)}; "
        f"BookKeeper's accepts replies BP-46's does not in {differ}"
    )
    for q in failed:
        print(f"not proved: {q}")
    return 0 if rules_safe and core and not failed and implied == len(configs) else 1


if __name__ == "__main__":
    sys.exit(main())
