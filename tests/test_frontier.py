"""The explorer's frontier: whole states in memory, packed states on disk past a bound, always in record order."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from ledgerspec.spec.autorecovery.autorecovery import AutorecoverySpec
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.tools.model_checking.explorer.explorer import explore
from ledgerspec.tools.model_checking.explorer.frontier import Frontier
from ledgerspec.tools.model_checking.explorer.packing import StatePacker
from ledgerspec.tools.model_checking.explorer.parallel import explore_in_parallel

SPECS: list[Spec[Any]] = [
    LedgerSpec(MaxEntries=1),
    BookieSpec(),
    ManagedLedgerSpec(),
    CursorSpec(MaxEntries=1),
    AutorecoverySpec(MaxStops=2),
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_packed_state_unpacks_to_an_equal_state_with_the_same_fingerprint(spec: Spec[Any]) -> None:
    states = explore(spec, check_deadlock=False, keep_states=True, max_states=3000).states
    assert states is not None and len(states) > 50
    packer = StatePacker(spec.state_type)
    for state in states:
        packed = packer.pack(state)
        again = packer.unpack(packed)
        assert again == state and hash(again) == hash(state) and type(again) is type(state)
        assert len(packed) < 2000


def test_a_state_type_the_packer_cannot_pack_is_refused_when_it_is_built() -> None:
    @attrs.frozen
    class Odd:
        weights: dict[str, float]

    with pytest.raises(TypeError, match="cannot pack a value of type dict"):
        StatePacker(Odd)
    with pytest.raises(TypeError, match="must be an attrs class"):
        StatePacker(int)


def _frontier(spill_above: int | None) -> tuple[Frontier, list[tuple[Any, int]]]:
    states = explore(LedgerSpec(MaxEntries=1), check_deadlock=False, keep_states=True).states
    assert states is not None
    items = [(state, 10 * record) for record, state in enumerate(states[:1300])]
    frontier = Frontier(StatePacker(LedgerSpec.state_type), spill_above)
    frontier.extend(items)
    return frontier, items


def test_past_the_bound_states_go_to_disk_and_come_back_in_order() -> None:
    frontier, items = _frontier(spill_above=0)
    assert len(frontier) == 1300 and frontier.spilled == 1299  # the first look at memory comes after one state
    assert list(frontier) == items and list(frontier) == items  # read twice: the file is read from its start
    kept, _ = _frontier(spill_above=None)
    assert kept.spilled == 0 and list(kept) == items


def test_states_given_away_are_spread_and_taken_ones_keep_the_record_order() -> None:
    frontier, items = _frontier(spill_above=0)
    given = frontier.take_evenly(500)
    assert len(given) == 500 and given == sorted(given, key=lambda item: item[1])
    assert [record for _, record in given[:3]] == [20, 50, 70]  # 5 of every 13, over the whole level, not its tail
    assert len(frontier) == 800 and sorted([*frontier, *given], key=lambda item: item[1]) == items
    frontier.merge([(items[3][0], 15), items[1000]])  # records 15 and 10000: each goes to its place
    records = [record for _, record in frontier]
    assert records == sorted(records) and len(records) == 802 and 15 in records and 10000 in records
    frontier.close()
    assert len(frontier) == 0 and list(frontier) == []


BUGGY: list[Spec[Any]] = [
    LedgerSpec(Bug="recovery_read_no_fence", MaxEntries=1),
    CursorSpec(Bug="no_store_fallback"),
]


@pytest.mark.parametrize("spec", [LedgerSpec(MaxEntries=1), *BUGGY], ids=lambda s: f"{s.name}-{getattr(s, 'Bug', '')}")
def test_a_search_with_its_frontier_on_disk_finds_the_same(spec: Spec[Any]) -> None:
    """The same violation, the same behaviour; and, when the search ends, the same counts. (A search that stops
    at a violation has expanded some of the level beyond it, as much as its rounds happened to take.)"""
    in_memory = explore(spec, check_deadlock=False, spill_above=2**62)
    on_disk = explore(spec, check_deadlock=False, spill_above=0)
    in_parallel = explore_in_parallel(spec, 2, check_deadlock=False, spill_above=0)
    for result in (on_disk, in_parallel):
        assert result.violations == in_memory.violations
        if in_memory.complete:
            assert (result.distinct_states, result.states_generated, result.depth) == (
                in_memory.distinct_states,
                in_memory.states_generated,
                in_memory.depth,
            )
    assert in_memory.complete == (spec.Bug == "none")
