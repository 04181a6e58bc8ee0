"""The explorer's fingerprint store: the same counts and the same shortest counterexamples as keeping whole states."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.spec.cursor.cursor import CursorSpec
from ledgerspec.spec.kernel import Spec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerSpec
from ledgerspec.tools.model_checking.explorer.explorer import explore
from ledgerspec.tools.model_checking.explorer.fingerprints import (
    NO_RECORD,
    NOT_NEW,
    FingerprintStore,
    collision_probability,
)


def test_the_store_keeps_each_fingerprint_once_with_its_predecessor() -> None:
    store = FingerprintStore()
    first = store.add(11, NO_RECORD)
    second = store.add(22, first if first is not None else NO_RECORD)
    assert (first, second) == (0, 1)
    assert store.add(11, 1) is None and len(store) == 2
    third = store.add(-33, 1)
    assert third is not None and store.path(third) == [11, 22, -33]
    assert store.nbytes() == 3 * 8  # the fingerprints in memory; the records are on disk


def test_a_batch_keeps_the_first_of_each_new_fingerprint_in_order() -> None:
    with FingerprintStore() as store:
        assert store.admit([5, 6], [NO_RECORD, NO_RECORD]) == [0, 1]
        # 6 was seen; 7 twice in the batch: its first one is new; the limit leaves 9 out
        assert store.admit([7, 6, 8, 7, 9], [0, 0, 1, 1, 1], limit=2) == [2, NOT_NEW, 3, NOT_NEW, NOT_NEW]
        assert 9 not in store and 8 in store and len(store) == 4
        assert store.path(3) == [6, 8]
        for fp in range(100, 140):  # many small batches: the sorted runs are merged as they come
            store.admit([fp], [3])
        assert len(store._runs) <= 7 and all(fp in store for fp in range(100, 140))
        with pytest.raises(IndexError, match="no record 44: 44 recorded"):
            store.path(44)


def test_the_collision_estimate_is_tlcs_optimistic_one() -> None:
    assert collision_probability(1_000_000, 3_000_000) == pytest.approx(1e6 * 2e6 / 2**64)
    assert collision_probability(10, 10) == 0.0


MODELS: list[tuple[Spec[Any], bool]] = [
    (LedgerSpec(MaxEntries=1), False),
    (LedgerSpec(MaxEntries=1), True),  # symmetry: the keys are canonical representatives
    (BookieSpec(), False),
    (ManagedLedgerSpec(), False),
    (CursorSpec(MaxEntries=1, BatchSize=2), False),
]


@pytest.mark.parametrize(("spec", "symmetry"), MODELS, ids=lambda x: getattr(x, "name", str(x)))
def test_the_same_counts_as_whole_states(spec: Spec[Any], symmetry: bool) -> None:
    fingerprints = explore(spec, check_deadlock=False, symmetry=symmetry)
    states = explore(spec, check_deadlock=False, symmetry=symmetry, keep_states=True)
    assert (fingerprints.distinct_states, fingerprints.states_generated, fingerprints.depth) == (
        states.distinct_states,
        states.states_generated,
        states.depth,
    )
    assert fingerprints.states is None and states.states is not None
    assert 0 < fingerprints.collision_probability < 1e-6 and states.collision_probability == 0.0


BUGGY: list[Spec[Any]] = [
    LedgerSpec(Bug="recovery_read_no_fence", MaxEntries=1),
    BookieSpec(Bug="mark_before_flush"),
    ManagedLedgerSpec(Bug="dedup_forgets_on_reopen"),
    CursorSpec(Bug="restore_skips_unacked"),
    CursorSpec(Bug="no_store_fallback"),
]


@pytest.mark.parametrize("spec", BUGGY, ids=lambda s: f"{s.name}-{s.Bug}")
def test_a_counterexample_rebuilt_from_fingerprints_is_the_searchs(spec: Spec[Any]) -> None:
    """Rebuilt by running the spec again from Init: the same steps, the same states, as the whole-state search."""
    [rebuilt] = explore(spec, check_deadlock=False).violations
    [kept] = explore(spec, check_deadlock=False, keep_states=True).violations
    assert rebuilt == kept
    assert len(rebuilt.trace) > 2


def test_a_memory_bound_stops_the_search_and_says_so() -> None:
    result = explore(CursorSpec(), check_deadlock=False, max_memory=1)
    assert not result.complete and result.stopped is not None
    assert "the memory bound of 0 MiB" in result.stopped and result.distinct_states < 389_232


def test_max_memory_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    from ledgerspec.tools.cli.commands.model_check import parse_size
    from ledgerspec.tools.cli.main import main

    assert parse_size("512M") == 512 * 2**20 and parse_size("4GiB") == 4 * 2**30 and parse_size("2g") == 2 * 2**30
    assert main(["model-check", "cursor", "--engine", "python", "--max-memory", "lots"]) == 2
    assert "expects a size such as 512M" in capsys.readouterr().err
    assert main(["model-check", "cursor", "--engine", "python", "--max-memory", "10K"]) == 2
    assert "too small to hold one level" in capsys.readouterr().err
    status = main(["model-check", "cursor", "--engine", "python", "--max-memory", "1M", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert status == 4 and "the search is incomplete" in data["python"]["stopped"]
