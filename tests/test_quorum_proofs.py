"""The Z3 quorum proofs against a brute-force enumeration of bookie sets, for every E <= 7.

The oracle here is written afresh from the definitions in docs/quorum.md: it
does not call the rules of spec/quorum.py, so a mistake in a rule or in its Z3
encoding shows up as a disagreement. It enumerates sets in the order the
counterexamples are chosen in (lowest entry; then fewest bookies, lowest
numbers first), so the very counterexample Z3 returns is checked, not just
its existence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations

import pytest
from ledgerspec.spec.kernel import ConstantError
from ledgerspec.spec.quorum import FENCING_RULES, MISSING_RULES, PYTHON, Quorum
from ledgerspec.tools.proofs.quorum_proofs import (
    Tolerance,
    analyse,
    compare_fencing_rules,
    counting_core_holds_for_every_quorum,
    every_quorum,
    failures_tolerated,
    main,
)

CONFIGS = [(q.E, q.Qw, q.Qa) for q in every_quorum(7)]

Bookies = tuple[int, ...]  # 0-based indices, sorted


def windows(E: int, Qw: int) -> list[set[int]]:
    """Entry e's write set is {(e + i) mod E : i < Qw}; entry e and e + E share one."""
    return [{(e + i) % E for i in range(Qw)} for e in range(E)]


def subsets(universe: range | list[int] | set[int], sizes: range | None = None) -> Iterator[Bookies]:
    """Subsets by size, then in lexicographic order: the order counterexamples are chosen in."""
    items = sorted(universe)
    for k in sizes if sizes is not None else range(len(items) + 1):
        yield from combinations(items, k)


def one_based(xs: Bookies) -> Bookies:
    return tuple(x + 1 for x in xs)


# -- the oracle's rules: thresholds on who replied ----------------------------------------------
def fencing_oracle(name: str, E: int, Qw: int, Qa: int) -> Callable[[set[int]], bool]:
    ws = windows(E, Qw)
    per_write_set = {"write_set_coverage": Qw - Qa + 1, "one_short": Qw - Qa}
    in_total = {"qa_total": Qa, "ensemble_coverage": E - Qa + 1}
    if name in per_write_set:
        return lambda replied: all(len(w & replied) >= per_write_set[name] for w in ws)
    return lambda replied: len(replied) >= in_total[name]


def missing_threshold(name: str, Qw: int, Qa: int) -> int:
    return {"write_set_coverage": Qw - Qa + 1, "qa_no_such": Qa, "one_short": Qw - Qa}[name]


def first_fencing_counterexample(
    E: int, Qw: int, Qa: int, complete: Callable[[set[int]], bool]
) -> tuple[int, Bookies, Bookies] | None:
    """(entry, replied, acks): fencing counted complete, yet Qa unfenced bookies of the write set ack."""
    ws = windows(E, Qw)
    for entry in range(E):
        for replied in subsets(range(E)):
            unfenced = ws[entry] - set(replied)
            if complete(set(replied)) and len(unfenced) >= Qa:
                return entry, replied, next(subsets(unfenced, range(Qa, Qa + 1)))
    return None


def first_missing_counterexample(E: int, Qw: int, Qa: int, threshold: int) -> tuple[int, Bookies, Bookies] | None:
    """(entry, acked, no_such): Qa bookies acked, others of the write set say NoSuchEntry, enough to declare it."""
    ws = windows(E, Qw)
    for entry in range(E):
        for acked in subsets(ws[entry], range(Qa, Qw + 1)):
            others = ws[entry] - set(acked)
            for no_such in subsets(others, range(max(threshold, 0), len(others) + 1)):
                return entry, acked, no_such
    return None


# -- the oracle's failure model -------------------------------------------------------------
def breaks(name: str, E: int, Qw: int, Qa: int, N: int) -> Callable[[set[int]], int | None]:
    """For each guarantee: given failed bookies, the lowest entry it fails for (0 if none is named), or None."""
    ws = windows(E, Qw)
    ensemble, spares = set(range(E)), set(range(E, N))

    def first(pred: Callable[[set[int]], bool]) -> int | None:
        return next((e for e, w in enumerate(ws) if pred(w)), None)

    def cannot_replace(failed: set[int]) -> bool:
        return len(failed & ensemble) > len(spares - failed)

    def guarantee(failed: set[int]) -> int | None:
        if name == "acked_entries_survive":  # some write set has Qa failed bookies: they may be its ackers
            return first(lambda w: len(w & failed) >= Qa)
        if name == "writes_continue_without_ensemble_change":
            return first(lambda w: len(w - failed) < Qa)
        if name == "writes_continue_with_ensemble_change":
            return first(lambda w: len(w - failed) < Qa) if cannot_replace(failed) else None
        if name == "writes_continue_with_eager_ensemble_change":
            return 0 if failed & ensemble and cannot_replace(failed) else None
        assert name == "fencing_completes"
        return first(lambda w: len(w - failed) < Qw - Qa + 1)

    return guarantee


# What docs/quorum.md states each figure to be, to be checked against both of the above.
def formula(name: str, E: int, Qw: int, Qa: int, N: int) -> int:
    return {
        "acked_entries_survive": Qa - 1,
        "writes_continue_without_ensemble_change": Qw - Qa,
        "writes_continue_with_ensemble_change": max(Qw - Qa, N - E),
        "writes_continue_with_eager_ensemble_change": N - E,
        "fencing_completes": Qa - 1,
    }[name]


@pytest.mark.parametrize(("E", "Qw", "Qa"), CONFIGS, ids=[f"E{e}-Qw{w}-Qa{a}" for e, w, a in CONFIGS])
def test_figures_and_counterexamples_match_brute_force(E: int, Qw: int, Qa: int) -> None:
    a = analyse(Quorum(E, Qw, Qa))
    assert a.proved
    assert (a.replicas_per_entry, a.fencing_replies_per_write_set, a.missing_after_no_such_entry) == (
        Qw,
        Qw - Qa + 1,
        Qw - Qa + 1,
    )
    for v in a.fencing:
        expected = first_fencing_counterexample(E, Qw, Qa, fencing_oracle(v.rule.name, E, Qw, Qa))
        assert v.safe == (expected is None), v.rule.name
        if expected is not None:
            entry, replied, acks = expected
            cex = v.counterexample
            assert cex is not None
            assert (cex.entry, cex.replied, cex.acks) == (entry, one_based(replied), one_based(acks)), v.rule.name
            assert set(cex.write_set) == set(one_based(tuple(windows(E, Qw)[entry])))
    for v in a.missing:
        expected = first_missing_counterexample(E, Qw, Qa, missing_threshold(v.rule.name, Qw, Qa))
        assert v.safe == (expected is None), v.rule.name
        if expected is not None:
            entry, acked, no_such = expected
            cex = v.counterexample
            assert cex is not None
            assert (cex.entry, cex.acked, cex.no_such) == (entry, one_based(acked), one_based(no_such)), v.rule.name
    # BookKeeper's rule is never unsafe; BP-46's never accepts replies BookKeeper's refuses.
    assert a.verdict("fencing", "write_set_coverage").safe and a.verdict("missing", "write_set_coverage").safe
    write_sets, ec = fencing_oracle("write_set_coverage", E, Qw, Qa), fencing_oracle("ensemble_coverage", E, Qw, Qa)
    assert a.ensemble_coverage_implies_write_set_coverage == all(
        write_sets(set(r)) for r in subsets(range(E)) if ec(set(r))
    )
    gap = next((r for r in subsets(range(E)) if write_sets(set(r)) and not ec(set(r))), None)
    if gap is None:
        assert a.write_set_coverage_only is None
    else:
        assert a.write_set_coverage_only is not None and a.write_set_coverage_only.replied == one_based(gap)
    check_tolerances(a.tolerances, E, Qw, Qa, E)


@pytest.mark.parametrize(("E", "Qw", "Qa"), CONFIGS, ids=[f"E{e}-Qw{w}-Qa{a}" for e, w, a in CONFIGS])
def test_tolerances_with_spare_bookies_match_brute_force(E: int, Qw: int, Qa: int) -> None:
    check_tolerances(failures_tolerated(Quorum(E, Qw, Qa), E + 2), E, Qw, Qa, E + 2)


def check_tolerances(tolerances: tuple[Tolerance, ...], E: int, Qw: int, Qa: int, N: int) -> None:
    assert [t.name for t in tolerances] == [
        "acked_entries_survive",
        "writes_continue_without_ensemble_change",
        "writes_continue_with_ensemble_change",
        "writes_continue_with_eager_ensemble_change",
        "fencing_completes",
    ]
    for t in tolerances:
        name = t.name
        guarantee = breaks(name, E, Qw, Qa, N)
        smallest = next(((f, e) for f in subsets(range(N)) if (e := guarantee(set(f))) is not None), None)
        assert smallest is not None, name  # every guarantee breaks with enough failures, in these models
        failed, entry = smallest
        assert t.tolerated == len(failed) - 1 == formula(name, E, Qw, Qa, N), name
        assert t.proved, name
        cex = t.breaks_with
        assert cex is not None
        assert cex.failed == one_based(failed), name
        assert cex.entry == (None if name == "writes_continue_with_eager_ensemble_change" else entry), name


def test_ensemble_coverage_differs_from_write_set_coverage_only_when_e_exceeds_qw() -> None:
    write_sets, ec = FENCING_RULES["write_set_coverage"], FENCING_RULES["ensemble_coverage"]
    differ = [(e, w, a) for e, w, a in CONFIGS if compare_fencing_rules(Quorum(e, w, a), write_sets, ec) is not None]
    assert differ and all(e > w for e, w, _ in differ)
    # The smallest: E=4, Qw=2, Qa=2. Bookies 1 and 3 meet every write set {1,2}, {2,3}, {3,4}, {4,1}.
    assert differ[0] == (4, 2, 2)


def test_rules_evaluate_the_same_on_python_booleans_and_in_the_proofs() -> None:
    # The ledger spec runs the rules on booleans; spot-check them against the oracle on every reply set.
    for E, Qw, Qa in [(4, 2, 2), (5, 3, 2), (6, 3, 2)]:
        q = Quorum(E, Qw, Qa)
        for name, rule in FENCING_RULES.items():
            oracle = fencing_oracle(name, E, Qw, Qa)
            for replied in subsets(range(E)):
                assert rule.holds(q, [i in replied for i in range(E)], PYTHON) == oracle(set(replied))
        for name, rule in MISSING_RULES.items():
            for k in range(Qw + 1):
                answers = [i < k for i in range(Qw)]
                assert rule.holds(q, answers, PYTHON) == (k >= missing_threshold(name, Qw, Qa))


def test_missing_rules_depend_only_on_how_many_said_no_such_entry() -> None:
    # The ledger spec tabulates them by count (LedgerSpec.missing_after); that is sound only for such rules.
    for E, Qw, Qa in CONFIGS:
        q = Quorum(E, Qw, Qa)
        for rule in MISSING_RULES.values():
            for answered in subsets(range(Qw)):
                by_count = rule.holds(q, [i < len(answered) for i in range(Qw)], PYTHON)
                assert rule.holds(q, [i in answered for i in range(Qw)], PYTHON) == by_count


def test_proving_every_configuration_reports_what_it_proved(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--max-ensemble", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("10 configurations 1 <= Qa <= Qw <= E <= 3, 0 spare bookies")
    assert "BookKeeper's fencing and missing-entry rules: proved safe" in out
    assert "10 proved" in out and "NOT" not in out


def test_the_counting_step_holds_for_every_e() -> None:
    assert counting_core_holds_for_every_quorum()


@pytest.mark.parametrize(
    ("E", "Qw", "Qa", "message"),
    [
        (0, 0, 0, "ensemble size E must be at least 1, got E=0"),
        (3, 2, 0, "ack quorum Qa must be at least 1, got Qa=0"),
        (3, 4, 2, "write quorum larger than the ensemble: Qw=4 > E=3"),
        (3, 2, 3, "ack quorum larger than the write quorum: Qa=3 > Qw=2"),
        (-1, 1, 1, "ensemble size E must be at least 1, got E=-1"),
    ],
)
def test_impossible_configurations_are_refused(E: int, Qw: int, Qa: int, message: str) -> None:
    with pytest.raises(ConstantError, match=message):
        Quorum(E, Qw, Qa)


def test_cluster_smaller_than_the_ensemble_is_refused() -> None:
    with pytest.raises(ConstantError, match="not enough bookies for the ensemble: bookies=2 < E=3"):
        analyse(Quorum(3, 3, 2), bookies=2)
