"""The explorer on several processes: the same counts, verdicts and counterexamples as on one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.model_checking.explorer.explorer import Explorer, explore
from ledgerspec.tools.model_checking.explorer.levels import LevelWorker
from ledgerspec.tools.model_checking.explorer.parallel import ParallelExplorer, explore_in_parallel

COMPLETE: list[Spec[Any]] = [LedgerSpec(MaxEntries=1), CursorSpec(MaxEntries=2), BookieSpec(), ManagedLedgerSpec()]


@pytest.mark.parametrize("spec", COMPLETE, ids=lambda s: s.name)
@pytest.mark.parametrize("workers", [2, 3])
def test_a_complete_search_counts_the_same(spec: Spec[Any], workers: int) -> None:
    one = explore(spec, check_deadlock=False, stop_at_first=False)
    many = explore_in_parallel(spec, workers, check_deadlock=False, stop_at_first=False)
    assert (many.distinct_states, many.states_generated, many.depth, many.reached, many.violations) == (
        one.distinct_states,
        one.states_generated,
        one.depth,
        one.reached,
        one.violations,
    )
    assert many.complete and many.collision_probability == pytest.approx(one.collision_probability)
    assert many.actions == one.actions


@pytest.mark.parametrize("spec", COMPLETE, ids=lambda s: s.name)
def test_each_search_counts_the_same_steps_and_first_reached_states_per_action(spec: Spec[Any]) -> None:
    """The one-process search of whole states, the level search and the parallel one take each action as often,
    and each reaches the same states first: the steps add up to the states generated after the initial ones,
    the first reached to the distinct states after them."""
    levels = explore(spec, check_deadlock=False)
    whole = explore(spec, check_deadlock=False, keep_states=True)
    assert whole.actions == levels.actions and list(levels.actions) == [a.name for a in spec.actions]
    initial = len(list(spec.init_states()))
    assert sum(c.transitions for c in levels.actions.values()) == levels.states_generated - initial
    assert sum(c.distinct_states for c in levels.actions.values()) == levels.distinct_states - initial


BUGGY: list[Spec[Any]] = [
    LedgerSpec(Bug="recovery_read_no_fence", MaxEntries=1),
    LedgerSpec(Bug="lac_before_qa", MaxEntries=1),
    BookieSpec(Bug="delete_journal_at_mark"),
    ManagedLedgerSpec(Bug="dedup_forgets_on_reopen"),
    CursorSpec(Bug="restore_ignores_no_ledger"),
    CursorSpec(Bug="trim_deletes_needed_ledger"),
]


@pytest.mark.parametrize("spec", BUGGY, ids=lambda s: f"{s.name}-{s.Bug}")
def test_the_first_violation_and_its_behaviour_are_the_one_process_searchs(spec: Spec[Any]) -> None:
    [one] = explore(spec, check_deadlock=False).violations
    [many] = explore_in_parallel(spec, 2, check_deadlock=False).violations
    assert many == one


def test_deadlocks_and_symmetry_too() -> None:
    spec = LedgerSpec(MaxEntries=1)
    assert explore_in_parallel(spec, 2).violations == explore(spec).violations
    assert (
        explore_in_parallel(spec, 2, symmetry=True, check_deadlock=False).distinct_states
        == explore(spec, symmetry=True, check_deadlock=False).distinct_states
    )


def test_whole_states_are_one_process_work() -> None:
    with pytest.raises(ValueError, match="leave workers at 1"):
        ParallelExplorer(LedgerSpec(), workers=2, keep_states=True)


def test_workers_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["model-check", "cursor", "--engine", "python", "--const", "MaxEntries=2", "--json"]
    assert main([*args, "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["python"]["distinct_states"] == 22_282
    assert main([*args, "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_the_memory_bound_counts_the_workers() -> None:
    result = explore_in_parallel(CursorSpec(), 2, check_deadlock=False, max_memory=1)
    assert not result.complete and result.stopped is not None and "memory bound" in result.stopped


def test_a_worker_that_expands_ahead_reports_what_it_would_have_reported_in_rounds() -> None:
    """While the search decides, a worker expands ahead (up to its last round's size); its next reply carries
    those states first, so the search sees the same candidates in the same order, whatever the timing."""
    spec = LedgerSpec(NumBookies=3, E=3, Qw=2, Qa=2, MaxEntries=1)
    states = explore(spec, check_deadlock=False, keep_states=True).states
    assert states is not None
    items = [(state, record) for record, state in enumerate(states[:200])]

    def worker() -> LevelWorker:
        w = LevelWorker(Explorer(spec, check_deadlock=False), None)
        w.seed(items)
        return w

    plain, ahead = worker(), worker()
    assert not ahead.can_expand_ahead()  # not before the level's first request: states may still move
    rounds = [plain.expand(50), plain.expand(50), plain.expand(100), plain.expand(100)]
    first = ahead.expand(50)
    while ahead.can_expand_ahead():
        ahead.expand_ahead(7)  # 56 states: more than the round asked
    second = ahead.expand(50)
    rest = [ahead.expand(100), ahead.expand(100)]
    assert first[:6] == rounds[0][:6]  # all but the seconds it took
    assert second[0] == rounds[1][0] + rounds[2][0][: len(second[0]) - len(rounds[1][0])]
    merged = [c for r in (first, second, *rest) for c in r[0]]
    assert merged == [c for r in rounds for c in r[0]]
    assert sum(r[3] for r in (first, second, *rest)) == sum(r[3] for r in rounds)  # states generated
    assert second[4] == 105  # the last record expanded: 50 + 56 states, from record 0
    assert rest[-1][5] and rounds[-1][5]  # both exhausted their part
