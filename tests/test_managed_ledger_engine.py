"""The reference managed ledger and cursor, call by call: rollover rules, clean and unclean restarts, the
restore's three branches, deleting cursors, and bad stored state."""

from __future__ import annotations

from pathlib import Path

import pytest
from ledgerspec.reference.ledger import InProcessCluster
from ledgerspec.reference.managed_ledger import (
    BookKeeperFaults,
    BookKeeperLedgers,
    CursorRecoveryError,
    CursorStateError,
    ManagedCursor,
    ManagedLedger,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerStore,
    StoredStateError,
    ZnodeFaults,
)
from ledgerspec.reference.metadata import EmbeddedMetadataStore, LedgerMetadataStore
from ledgerspec.reference.metadata.managed_ledger_format import decode_managed_cursor_info

TOPIC = "tenant/ns/persistent/topic"


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Broker:
    """A topic's storage: one cluster and store; each ``open()`` is a new broker's managed ledger."""

    def __init__(self, root: Path, config: ManagedLedgerConfig, faults: BookKeeperFaults | None = None) -> None:
        self.cluster = InProcessCluster(str(root), bookies=2, sync_to_disk=False)
        self.metadata = EmbeddedMetadataStore()
        self.ledgers = LedgerMetadataStore(self.metadata)
        self.znode_faults = ZnodeFaults()
        self.store = ManagedLedgerStore(self.metadata, self.znode_faults)
        self.config = config
        self.faults = faults or BookKeeperFaults()
        self.clock = Clock()

    def open(self) -> ManagedLedger:
        bookkeeper = BookKeeperLedgers(self.cluster, self.ledgers, faults=self.faults)
        return ManagedLedger.open(TOPIC, self.store, bookkeeper, self.config, clock=self.clock)

    def cursor_znode(self, name: str) -> tuple[int, str]:
        info = decode_managed_cursor_info(self.metadata.get(f"/managed-ledgers/{TOPIC}/{name}").value)
        return info.cursors_ledger_id, str(info.mark_delete)


def _config(**changes: int) -> ManagedLedgerConfig:
    values = {
        "max_entries_per_ledger": 1000,
        "minimum_rollover_ms": 0,
        "metadata_max_entries_per_ledger": 1000,
    }
    return ManagedLedgerConfig(**{**values, **changes})


# -- rollover (currentLedgerIsFull, seed 002) -----------------------------------------------
def test_rollover_on_entries(tmp_path: Path) -> None:
    ml = Broker(tmp_path, _config(max_entries_per_ledger=3)).open()
    positions = [ml.add_entry(b"m") for _ in range(7)]
    assert positions == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (2, 0)]
    assert ml.log.actions().count("LedgerRollsOver") == 2


def test_rollover_on_size(tmp_path: Path) -> None:
    ml = Broker(tmp_path, _config(max_size_per_ledger_bytes=10)).open()
    assert [ml.add_entry(b"x" * 4) for _ in range(4)] == [(0, 0), (0, 1), (0, 2), (1, 0)]


def test_rollover_on_age_waits_for_the_minimum_and_an_entry(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config(maximum_rollover_ms=100, minimum_rollover_ms=200))
    ml = broker.open()
    broker.clock.now = 150
    assert not ml.roll_over_if_full()  # the ledger is empty: nothing to roll over
    ml.add_entry(b"m")  # 150 ms old, past the maximum, not past the minimum: no rollover
    assert ml.ids() == (0,)
    broker.clock.now = 201
    assert ml.roll_over_if_full() and ml.ids() == (0, 1)


def test_full_by_space_still_waits_for_the_minimum_rollover_time(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config(max_entries_per_ledger=1, minimum_rollover_ms=50))
    ml = broker.open()
    ml.add_entry(b"a")
    ml.add_entry(b"b")  # full, but younger than the minimum: still written to ledger 0
    assert ml.ids() == (0,)
    broker.clock.now = 51
    assert ml.roll_over_if_full() and ml.add_entry(b"c") == (1, 0)


# -- restarts and the restore --------------------------------------------------------------
def test_a_clean_restart_keeps_individual_acks_in_the_znode(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    ml = broker.open()
    cursor = ml.open_cursor("sub", earliest=True)
    positions = [ml.add_entry(b"m") for _ in range(4)]
    cursor.ack(positions[0])
    cursor.ack(positions[2])
    cursor.flush()
    ml.close()
    assert broker.cursor_znode("sub") == (-1, "0:0")
    restored = broker.open().cursors["sub"]
    assert restored.mark_delete == (0, 0) and restored.acked == {(0, 2)}
    assert restored.ledger_id == -1


def test_a_crash_restores_from_the_cursor_ledgers_last_record(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    ml = broker.open()
    cursor = ml.open_cursor("sub", earliest=True)
    positions = [ml.add_entry(b"m") for _ in range(4)]
    cursor.ack(positions[1])
    cursor.flush()
    cursor.ack(positions[3])
    cursor.flush()  # a second record, in the same cursor ledger
    ledger = cursor.ledger_id
    assert broker.cursor_znode("sub") == (ledger, "0:-1")  # the znode has the mark-delete only
    restored = broker.open().cursors["sub"]
    assert restored.mark_delete == (0, -1) and restored.acked == {(0, 1), (0, 3)}
    assert restored.ledger_id == ledger  # held, read-only: the next flush replaces it


def test_a_lost_cursor_ledger_rolls_back_to_the_znodes_mark_delete(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    ml = broker.open()
    cursor = ml.open_cursor("sub", earliest=True)
    positions = [ml.add_entry(b"m") for _ in range(4)]
    cursor.ack(positions[0])
    cursor.flush()  # znode: the new cursor ledger, mark-delete 0:0
    cursor.ack(positions[1])
    cursor.ack(positions[3])
    cursor.flush()
    broker.ledgers.delete(cursor.ledger_id, -1)  # BookKeeper lost it
    restored = broker.open().cursors["sub"]
    assert (restored.mark_delete, restored.acked) == ((0, 0), set())  # 0:1 and 0:3 come again
    assert broker.cursor_znode("sub") == (-1, "0:0")  # the rollback is persisted


def test_an_empty_last_ledger_is_dropped_on_open(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    ml = broker.open()
    ml.add_entry(b"m")
    ml = broker.open()  # the crashed broker's ledger 0 is recovered (1 entry); ledger 1 is new
    assert ml.ids() == (0, 1)
    ml = broker.open()  # ledger 1 is empty: dropped and deleted
    assert ml.ids() == (0, 2) and not broker.metadata.exists(broker.ledgers.path(1))


def _one_entry_acked(broker: Broker) -> tuple[ManagedLedger, ManagedCursor]:
    """The broker's managed ledger, with one entry, and its cursor ``sub``, which acknowledged it."""
    ml = broker.open()
    cursor = ml.open_cursor("sub", earliest=True)
    cursor.ack(ml.add_entry(b"m"))
    return ml, cursor


def test_a_failed_cursor_ledger_creation_falls_back_to_the_znode(tmp_path: Path) -> None:
    faults = BookKeeperFaults(creates=1)
    broker = Broker(tmp_path, _config(), faults)
    ml, cursor = _one_entry_acked(broker)
    cursor.flush()
    assert broker.cursor_znode("sub") == (-1, "0:0") and faults.failed == 1
    assert ml.log.actions()[-1] == "CursorLedgerCreationFails"


def test_a_mutant_without_the_fallback_loses_the_mark_delete(tmp_path: Path) -> None:
    broker = Broker(tmp_path, ManagedLedgerConfig(mutant="no_store_fallback"), BookKeeperFaults(creates=1))
    _, cursor = _one_entry_acked(broker)
    cursor.flush()
    assert broker.cursor_znode("sub") == (-1, "0:-1")
    assert broker.open().cursors["sub"].mark_delete == (0, -1)


def test_a_failed_switch_deletes_the_new_ledger_and_keeps_the_state_unpersisted(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    ml, cursor = _one_entry_acked(broker)
    broker.znode_faults.writes = 1
    cursor.flush()  # ledger 0 is the data ledger; the switch to cursor ledger 1 fails
    assert ml.log.actions()[-2:] == ["CursorCreatesLedger", "CursorLedgerSwitchFails"]
    assert (cursor.status, cursor.ledger_id, cursor.dirty) == ("NoLedger", -1, True)
    assert broker.cursor_znode("sub") == (-1, "0:-1") and not broker.metadata.exists(broker.ledgers.path(1))
    cursor.flush()  # the next flush persists the state in a new cursor ledger
    assert (cursor.status, cursor.ledger_id, cursor.dirty) == ("Open", 2, False)
    assert broker.cursor_znode("sub") == (2, "0:0")


def test_a_failed_znode_fallback_fails_the_mark_delete(tmp_path: Path) -> None:
    faults = BookKeeperFaults(creates=1)
    broker = Broker(tmp_path, _config(), faults)
    ml, cursor = _one_entry_acked(broker)
    broker.znode_faults.writes = 1
    cursor.flush()
    assert ml.log.actions()[-1] == "CursorZnodeWriteFails"
    assert (cursor.status, cursor.dirty, faults.failed, broker.znode_faults.failed) == ("NoLedger", True, 1, 1)
    assert broker.cursor_znode("sub") == (-1, "0:-1")  # the znode keeps what it held
    assert broker.open().cursors["sub"].mark_delete == (0, -1)  # a crash now: the ack comes again


def test_a_failed_first_record_spends_a_ledger_id_and_keeps_the_state_unpersisted(tmp_path: Path) -> None:
    faults = BookKeeperFaults(first_appends=1)
    broker = Broker(tmp_path, _config(), faults)
    ml, cursor = _one_entry_acked(broker)
    broker.znode_faults.writes = 1  # the fallback to the znode fails too
    cursor.flush()  # cursor ledger 1 is created, its first record fails: it is deleted
    assert ml.log.actions()[-1] == "CursorLedgerFirstWriteFails"
    assert (cursor.status, cursor.dirty, faults.failed, broker.znode_faults.failed) == ("NoLedger", True, 1, 1)
    assert broker.cursor_znode("sub") == (-1, "0:-1") and not broker.metadata.exists(broker.ledgers.path(1))
    cursor.flush()  # the next flush creates cursor ledger 2: id 1 is spent
    assert (cursor.status, cursor.ledger_id, cursor.dirty) == ("Open", 2, False)


def test_a_failed_first_record_whose_fallback_succeeds_is_refused(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config(), BookKeeperFaults(first_appends=1))
    _, cursor = _one_entry_acked(broker)
    with pytest.raises(CursorStateError, match="first record of cursor ledger 1 failed but its fallback"):
        cursor.flush()


def test_a_failed_znode_fallback_after_a_failed_append_leaves_the_ledger_named(tmp_path: Path) -> None:
    faults = BookKeeperFaults()
    broker = Broker(tmp_path, _config(), faults)
    ml = broker.open()
    cursor = ml.open_cursor("sub", earliest=True)
    first, second = ml.add_entry(b"m"), ml.add_entry(b"m")
    cursor.ack(first)
    cursor.flush()
    held = cursor.ledger_id
    cursor.ack(second)
    faults.appends, broker.znode_faults.writes = 1, 1
    cursor.flush()
    assert ml.log.actions()[-1] == "CursorZnodeWriteFails"
    assert (cursor.status, cursor.ledger_id, cursor.dirty) == ("NoLedger", held, True)
    assert broker.cursor_znode("sub") == (held, "0:0")
    assert broker.open().cursors["sub"].mark_delete == (0, 0)  # from the ledger's last record: 0:1 comes again


def test_deleting_a_cursor_removes_its_znode_and_ledger(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    ml, cursor = _one_entry_acked(broker)
    cursor.flush()
    ledger = cursor.ledger_id
    ml.delete_cursor("sub")
    assert broker.store.cursor_names(TOPIC) == [] and not broker.metadata.exists(broker.ledgers.path(ledger))


# -- bad input and bad state ----------------------------------------------------------------
def test_a_corrupt_cursor_znode_names_its_path(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    broker.open().open_cursor("sub")
    path = f"/managed-ledgers/{TOPIC}/sub"
    broker.metadata.set(path, b"\x08", version=-1)
    with pytest.raises(StoredStateError, match=f"{path}: not a ManagedCursorInfo"):
        broker.open()


def test_a_corrupt_cursor_ledger_record_names_the_ledger_and_entry(tmp_path: Path) -> None:
    broker = Broker(tmp_path, _config())
    _, cursor = _one_entry_acked(broker)
    cursor.flush()
    assert cursor.ledger is not None
    # The ledger holds its first record and the ack's, written again after the switch (flushPendingMarkDeletes).
    assert cursor.records == 2
    cursor.ml.bookkeeper.append(cursor.ledger, b"\xff\xff", "cursor")  # not a PositionInfo
    with pytest.raises(CursorRecoveryError, match=rf"cursor ledger {cursor.ledger_id}, entry 2: not a PositionInfo"):
        broker.open()


def test_a_closed_managed_ledger_refuses_adds(tmp_path: Path) -> None:
    ml = Broker(tmp_path, _config()).open()
    ml.close()
    with pytest.raises(ManagedLedgerError, match=f"managed ledger {TOPIC} is closed: cannot add an entry"):
        ml.add_entry(b"m")


def test_a_bad_name_or_mutant_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown managed-ledger mutant"):
        ManagedLedgerConfig(mutant="nope")
    broker = Broker(tmp_path, _config())
    with pytest.raises(ValueError, match="is not <tenant>/<namespace>/persistent/<topic>"):
        ManagedLedger.open("topic", broker.store, BookKeeperLedgers(broker.cluster, broker.ledgers))
