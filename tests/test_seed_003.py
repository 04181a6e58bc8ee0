"""Seed 003: a broker restarts, the cursor is restored from its ledger to 56:9, held at <new>:-1, ledger 56 trimmed.

The broker's log in the seed, line for line, and the states between the
lines: the reference managed ledger must take the same steps in the same
order, with the same ledger ids (other topics drew ids 0..55 and 58..602
from the same BookKeeper).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from ledgerspec.reference.ledger import InProcessCluster
from ledgerspec.reference.managed_ledger import (
    BookKeeperLedgers,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerLog,
    ManagedLedgerStore,
)
from ledgerspec.reference.metadata import EmbeddedMetadataStore, LedgerMetadataStore

TOPIC = "tenant_c/ns1/persistent/topic_cursor"
SUBSCRIPTION = "consumer_002"

# The lines of the seed's log that the managed ledger writes, from the restart on.
SEED_LOG = [
    "Opening managed ledger tenant_c/ns1/persistent/topic_cursor",
    "[tenant_c/ns1/persistent/topic_cursor] Created ledger 603",
    "[tenant_c/ns1/persistent/topic_cursor] Recovering from bookkeeper ledger 57 cursor: consumer_002",
    "[tenant_c/ns1/persistent/topic_cursor] Cursor consumer_002 recovered to position 56:9",
    "Reset cursor:ManagedCursorImpl{ledger=tenant_c/ns1/persistent/topic_cursor, name=consumer_002, ackPos=56:9} "
    "to 603:-1 since ledger consumed completely",
    "[tenant_c/ns1/persistent/topic_cursor] End TrimConsumedLedgers. ledgers=1",
    "[tenant_c/ns1/persistent/topic_cursor] Removing ledger 56 - size: 90",
]

# (event, ledger list, the cursor's mark-delete, the managed ledger's position of the cursor) after each step of
# the restart, in the cursor spec's words: the skip moves the managed ledger's position, not the cursor's
# (maybeUpdateCursorBeforeTrimmingConsumedLedger, Pulsar 4.0.7), and the trim goes by it.
SEED_STATES = [
    ("ManagedLedgerOpens", (56, 603), None, None),
    ("CursorRecovers", (56, 603), (56, 9), (56, 9)),
    ("CursorSkipsConsumedLedger", (56, 603), (56, 9), (603, -1)),
    ("TrimConsumedLedgers", (603,), (56, 9), (603, -1)),
]


def test_the_restore_of_seed_003(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cluster = InProcessCluster(str(tmp_path), bookies=2, sync_to_disk=False)
    metadata = EmbeddedMetadataStore()
    ledgers = LedgerMetadataStore(metadata)
    store = ManagedLedgerStore(metadata)
    config = ManagedLedgerConfig(minimum_rollover_ms=0)
    while ledgers.new_ledger_id() < 55:  # other topics' ledgers
        pass

    # Before the restart: ledger 56 holds 56:0 .. 56:9, all consumed; the cursor ledger 57 says so.
    ml = ManagedLedger.open(TOPIC, store, BookKeeperLedgers(cluster, ledgers), config)
    cursor = ml.open_cursor(SUBSCRIPTION, earliest=True)
    positions = [ml.add_entry(b"message %d" % i) for i in range(10)]
    assert positions[0] == (56, 0) and positions[-1] == (56, 9)
    for position in positions:
        cursor.ack(position)
    cursor.flush()
    assert cursor.mark_delete == (56, 9) and cursor.ledger_id == 57

    # The broker dies (its objects are dropped: nothing more is written); other topics take ids up to 602.
    del ml, cursor
    while ledgers.new_ledger_id() < 602:
        pass

    states = []
    caplog.set_level(logging.INFO, logger="ledgerspec.managed_ledger")
    caplog.clear()  # the restart's records only, whatever level the logger had before
    restarted = ManagedLedger(
        TOPIC, store, BookKeeperLedgers(cluster, ledgers), config, log=ManagedLedgerLog(), clock=lambda: 0
    )
    restarted.log.listeners.append(lambda event: states.append(_state(event.action, restarted)))
    restarted.initialize()
    assert restarted.trim_consumed_ledgers() == [56]

    assert [r.getMessage() for r in caplog.records if r.name == "ledgerspec.managed_ledger"] == SEED_LOG
    assert states == SEED_STATES
    assert not ledgers.store.exists(ledgers.path(56)), "ledger 56 is deleted from BookKeeper"


def _state(
    action: str, ml: ManagedLedger
) -> tuple[str, tuple[int, ...], tuple[int, int] | None, tuple[int, int] | None]:
    cursor = ml.cursors.get(SUBSCRIPTION)
    return (action, ml.ids(), cursor.mark_delete if cursor is not None else None, ml.positions.get(SUBSCRIPTION))
