"""Ledger znode paths: BookKeeper's hybrid hierarchical layout (StringUtils.getHybridHierarchicalLedgerPath)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ledgerspec.reference.metadata import ledger_id_from_path, ledger_path


@pytest.mark.parametrize(
    ("ledger_id", "path"),
    [
        (0, "/ledgers/00/0000/L0000"),
        (1, "/ledgers/00/0000/L0001"),
        (1234567890, "/ledgers/12/3456/L7890"),
        (2**31 - 2, "/ledgers/21/4748/L3646"),  # the last id of the legacy layout
        (2**31 - 1, "/ledgers/000/0000/0021/4748/L3647"),  # Integer.MAX_VALUE: the long layout starts here
        (2**32, "/ledgers/000/0000/0042/9496/L7296"),  # the first id LongZkLedgerIdGenerator draws
        (9999999999, "/ledgers/000/0000/0099/9999/L9999"),  # fits ten digits, but is long
        (2**63 - 1, "/ledgers/922/3372/0368/5477/L5807"),
    ],
)
def test_ledger_path(ledger_id: int, path: str) -> None:
    assert ledger_path(ledger_id) == path
    assert ledger_id_from_path(path) == ledger_id


def test_another_root() -> None:
    assert ledger_path(5, "/bk/ledgers") == "/bk/ledgers/00/0000/L0005"
    assert ledger_id_from_path("/bk/ledgers/00/0000/L0005", "/bk/ledgers") == 5


@given(st.integers(0, 2**63 - 1))
def test_every_id_round_trips(ledger_id: int) -> None:
    assert ledger_id_from_path(ledger_path(ledger_id)) == ledger_id


@pytest.mark.parametrize("ledger_id", [-1, 2**63])
def test_ids_outside_the_long_range_are_refused(ledger_id: int) -> None:
    with pytest.raises(ValueError, match=f"ledger id {ledger_id} is outside 0..2\\^63-1"):
        ledger_path(ledger_id)


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("/other/00/0000/L0001", "is not under the ledgers root /ledgers"),
        ("/ledgers/00/0000/0001", "is not a ledger path"),
        ("/ledgers/00/000/L0001", "is not a ledger path"),
        ("/ledgers/idgen/ID-0000000001", "is not a ledger path"),
        ("/ledgers/000/0000/0000/0000/L0001", "uses the long layout for ledger 1"),
        ("/ledgers/99/9999/L9999", "uses the short layout for ledger 9999999999"),
    ],
)
def test_paths_that_name_no_ledger_are_refused(path: str, problem: str) -> None:
    with pytest.raises(ValueError, match=f"{path} {problem}"):
        ledger_id_from_path(path)
