"""The spec kernel and the explorer, on small specs whose answers are known."""

from __future__ import annotations

from collections.abc import Iterator

import attrs
import pytest
from ledgerspec.spec.kernel import (
    Constant,
    ConstantError,
    Spec,
    action,
    action_property,
    evolve,
    invariant,
    reachable,
)
from ledgerspec.tools.model_checking.explorer.explorer import Explorer, explore


@attrs.frozen
class Jugs:
    big: int
    small: int


class DieHard(Spec[Jugs]):
    """The water jugs of Die Hard 3: measure 4 gallons with a 5 and a 3 gallon jug."""

    name = "diehard"
    state_type = Jugs
    constants = (Constant("Goal", int, 4, "gallons to measure"),)
    Goal: int

    def init_states(self) -> Iterator[Jugs]:
        yield Jugs(0, 0)

    @action()
    def FillSmall(self, s: Jugs) -> Jugs:
        return evolve(s, small=3)

    @action()
    def FillBig(self, s: Jugs) -> Jugs:
        return evolve(s, big=5)

    @action()
    def EmptySmall(self, s: Jugs) -> Jugs:
        return evolve(s, small=0)

    @action()
    def EmptyBig(self, s: Jugs) -> Jugs:
        return evolve(s, big=0)

    @action()
    def SmallToBig(self, s: Jugs) -> Jugs:
        poured = min(s.small, 5 - s.big)
        return Jugs(s.big + poured, s.small - poured)

    @action()
    def BigToSmall(self, s: Jugs) -> Jugs:
        poured = min(s.big, 3 - s.small)
        return Jugs(s.big - poured, s.small + poured)

    @invariant
    def NotSolved(self, s: Jugs) -> str | None:
        return f"the big jug holds {s.big}" if s.big == self.Goal else None

    @reachable
    def SmallJugFull(self, s: Jugs) -> bool:
        return s.small == 3


def test_diehard_state_count_matches_tlc() -> None:
    result = explore(DieHard(Goal=99))
    assert result.distinct_states == 16  # TLC's count for the same model
    assert result.violations == ()
    assert result.complete
    assert result.reached == {"SmallJugFull"}


def test_diehard_counterexample_is_the_shortest() -> None:
    result = explore(DieHard())
    (violation,) = result.violations
    assert violation.kind == "invariant" and violation.name == "NotSolved"
    assert violation.message == "the big jug holds 4"
    assert [str(step.step) for step in violation.trace] == [
        "Init",
        "FillBig",
        "BigToSmall",
        "EmptySmall",
        "BigToSmall",
        "FillBig",
        "BigToSmall",
    ]
    assert violation.trace[-1].state == Jugs(4, 3)
    assert not result.complete


@attrs.frozen
class Count:
    n: int


class Counter(Spec[Count]):
    name = "counter"
    state_type = Count
    constants = (Constant("Limit", int, 3, "last value"), Constant("Step", int, 1, "increment"))
    Limit: int
    Step: int

    def init_states(self) -> Iterator[Count]:
        yield Count(0)

    @action(lambda spec, s: ((k,) for k in (spec.Step,)))
    def Increment(self, s: Count, k: int) -> Count | None:
        return Count(s.n + k) if s.n < self.Limit else None

    @action_property
    def NeverBackwards(self, s: Count, t: Count) -> str | None:
        return f"went from {s.n} to {t.n}" if t.n < s.n else None


def test_deadlock_is_reported_as_tlc_reports_it() -> None:
    result = explore(Counter())
    (violation,) = result.violations
    assert violation.kind == "deadlock"
    assert [step.state.n for step in violation.trace] == [0, 1, 2, 3]
    assert str(violation.trace[1].step) == "Increment(k=1)"


def test_deadlock_check_can_be_switched_off() -> None:
    result = explore(Counter(), check_deadlock=False)
    assert result.violations == () and result.distinct_states == 4 and result.depth == 4


def test_action_property_is_checked_on_every_step() -> None:
    result = explore(Counter(Step=-1, Limit=1), check_deadlock=False, max_states=10)
    (violation,) = result.violations
    assert violation.kind == "property" and violation.name == "NeverBackwards"
    assert violation.message == "went from 0 to -1"


def test_max_states_stops_an_infinite_model() -> None:
    result = explore(Counter(Limit=10**9), check_deadlock=False, max_states=50)
    assert result.distinct_states == 50
    assert not result.complete


def test_constants_are_validated_with_clear_errors() -> None:
    with pytest.raises(ConstantError, match="unknown constant Limt for spec counter; known: Limit, Step"):
        Counter(Limt=3)
    with pytest.raises(ConstantError, match="constant Limit must be an integer, got 'three'"):
        Counter(Limit="three")
    assert Counter(Limit="5").Limit == 5


@attrs.frozen
class Bits:
    bits: tuple[int, ...]


class Toggles(Spec[Bits]):
    """N interchangeable processes, each setting its own bit once."""

    name = "toggles"
    state_type = Bits
    constants = (Constant("N", int, 3, "processes"),)
    N: int

    def init_states(self) -> Iterator[Bits]:
        yield Bits((0,) * self.N)

    @action(lambda spec, s: ((i,) for i in range(spec.N)))
    def Set(self, s: Bits, i: int) -> Bits | None:
        if s.bits[i]:
            return None
        return Bits((*s.bits[:i], 1, *s.bits[i + 1 :]))

    def symmetry(self, state: Bits) -> Bits:
        return Bits(tuple(sorted(state.bits)))


def test_symmetry_reduction_keeps_one_state_per_orbit() -> None:
    assert explore(Toggles(), check_deadlock=False).distinct_states == 8
    assert explore(Toggles(), check_deadlock=False, symmetry=True).distinct_states == 4


def test_keep_states_returns_every_distinct_state() -> None:
    result = Explorer(Counter(), check_deadlock=False, keep_states=True).run()
    assert result.states == (Count(0), Count(1), Count(2), Count(3))


def test_progress_is_reported_on_long_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import ledgerspec.tools.model_checking.explorer.explorer as explorer_module

    ticks = iter(range(0, 10**6, 2))  # every reading of the clock is two seconds later
    monkeypatch.setattr(explorer_module.time, "perf_counter", lambda: float(next(ticks)))
    calls: list[tuple[int, int, int, int]] = []
    explore(Counter(Limit=5), check_deadlock=False, progress=lambda *a: calls.append(a))
    assert calls and calls[0][0] >= 1
    assert all(distinct >= 1 and generated >= distinct - 1 for distinct, generated, _, _ in calls)


def test_evolve_matches_attrs_evolve() -> None:
    s = Jugs(1, 2)
    assert evolve(s, small=3) == attrs.evolve(s, small=3) == Jugs(1, 3)
