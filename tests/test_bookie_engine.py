"""The reference bookie: round trips, group commit, replay, rollover, deletion, torn tails and corrupt files."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from bookie_support import KEY, entry, lac, started
from ledgerspec.reference.bookie import (
    BadEntryError,
    BookieConfig,
    BookieStateError,
    CorruptFileError,
    FaultyFileSystem,
    LedgerFencedError,
    LogMark,
    MissingFileError,
    NoSuchEntryError,
    NoSuchLedgerError,
    Request,
    RequestKind,
    SimulatedCrash,
    UnauthorizedError,
    check_bookie_files,
    read_bookie_files,
)
from ledgerspec.reference.bookie.bookie import WRITE_CACHE, Bookie
from ledgerspec.reference.bookie.formats import JournalEnd
from ledgerspec.reference.bookie.layout import BookieLayout


def test_tailing_reads_come_from_the_memtable_catch_up_reads_from_the_entry_log(tmp_path: Path) -> None:
    bookie = started(tmp_path)
    for e in range(3):
        bookie.add_entry(entry(1, e), KEY)
    replies = bookie.force_write()
    assert [(r.kind, r.entry_id) for r in replies] == [(RequestKind.ADD, 0), (RequestKind.ADD, 1), (RequestKind.ADD, 2)]
    assert bookie.read_path(1, 2) == "memtable" and bookie.read_entry(1, 2) == entry(1, 2)
    bookie.checkpoint()
    assert bookie.read_path(1, 2) == "entry_log" and bookie.read_entry(1, 2) == entry(1, 2)
    assert bookie.read_path(1, 3) is None
    assert bookie.read_last_add_confirmed(1) == 1  # the LAC piggybacked on entry 2
    bookie.set_explicit_lac(lac(1, 2), KEY)
    bookie.force_write()
    assert bookie.read_explicit_lac(1) == 2 and bookie.read_last_add_confirmed(1) == 2
    state = bookie.memory_state()
    assert state.flushed == {(1, 0), (1, 1), (1, 2)} and state.memtable == frozenset() and state.lac == ((1, 2),)


def test_requests_are_refused_with_the_reason(tmp_path: Path) -> None:
    bookie = Bookie(BookieLayout.in_data_dir(str(tmp_path)))
    with pytest.raises(BookieStateError, match="not up"):
        bookie.add_entry(entry(1, 0), KEY)
    bookie.start()
    corrupt = bytearray(entry(1, 0))
    corrupt[-1] ^= 0xFF
    with pytest.raises(BadEntryError, match="crc32c digest mismatch for ledger 1 entry 0"):
        bookie.add_entry(bytes(corrupt), KEY)
    bookie.add_entry(entry(1, 0), KEY)
    with pytest.raises(UnauthorizedError, match="ledger 1: the master key does not match"):
        bookie.add_entry(entry(1, 1), b"another key")
    with pytest.raises(NoSuchLedgerError, match="ledger 9"):
        bookie.read_entry(9, 0)
    with pytest.raises(NoSuchEntryError, match="ledger 1 entry 5"):
        bookie.read_entry(1, 5)
    bookie.fence_ledger(1, KEY)
    with pytest.raises(LedgerFencedError, match="ledger 1 is fenced: add of entry 1 refused"):
        bookie.add_entry(entry(1, 1), KEY)
    bookie.add_entry(entry(1, 1), KEY, recovery=True)
    with pytest.raises(BookieStateError, match=r"the mark \(0x0, 0\) is not past the persisted mark"):
        bookie.start_checkpoint()  # nothing synced: the sync thread has nothing to persist
    bookie.force_write()
    bookie.start_checkpoint()
    with pytest.raises(BookieStateError, match="flush first"):
        bookie.persist_mark()
    with pytest.raises(BookieStateError, match="flusher 2 has taken no mark"):
        bookie.flush_ledger_storage(WRITE_CACHE)


def test_group_commit_acknowledges_only_after_the_fsync(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    seen: list[tuple[Request, str]] = []  # each reply with the file-system boundary just before it
    bookie = started(tmp_path, fs)
    bookie.on_reply = lambda r: seen.append((r, str(fs.events[-1])))
    journal = bookie.layout.journal_path(1)
    for e in range(5):
        bookie.add_entry(entry(1, e), KEY)
    bookie.fence_ledger(2, KEY)
    bookie.journal_flush()
    assert seen == [] and fs.events[-1].op == "write" and fs.unsynced_bytes(journal) > 0
    before = fs.boundaries
    replies = bookie.force_write()
    assert len(replies) == 6 and [r for r, _ in seen] == replies
    assert [str(e) for e in fs.events[before:]] == [f"#{before} fsync {journal}"]  # one fsync for the batch
    assert {event for _, event in seen} == {f"#{before} fsync {journal}"}
    assert bookie.memory_state().mark == LogMark(1, os.path.getsize(journal)) and fs.unsynced_bytes(journal) == 0


def test_a_crash_at_the_fsync_loses_only_what_was_never_acknowledged(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    bookie = started(tmp_path, fs)
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.add_entry(entry(1, 1), KEY)
    bookie.journal_flush()
    fs.crash_at = fs.boundaries  # the next boundary: the fsync
    with pytest.raises(SimulatedCrash, match="crash at boundary"):
        bookie.force_write()
    assert [r.entry_id for r in bookie.replies] == [0]
    fs.power_loss()
    after = started(tmp_path, fs)
    assert after.read_entry(1, 0) == entry(1, 0)
    with pytest.raises(NoSuchEntryError):
        after.read_entry(1, 1)


def test_restart_replays_the_journal_from_the_mark(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    bookie = started(tmp_path, fs)
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.checkpoint()
    mark = bookie.persisted_mark
    bookie.add_entry(entry(1, 1), KEY)
    bookie.fence_ledger(1, KEY)
    bookie.set_explicit_lac(lac(1, 1), KEY)
    bookie.force_write()
    fs.power_loss()

    after = started(tmp_path, fs, checkpoint=False)
    state = after.memory_state()
    assert state.persisted_mark == mark  # replay started here
    assert state.memtable == {(1, 1)} and state.flushed == {(1, 0)}  # entry 1 from the journal, entry 0 from the log
    assert state.fenced == {1} and state.fenced_flushed == frozenset() and state.lac == ((1, 1),)
    assert state.mark == state.synced == LogMark(1, os.path.getsize(after.layout.journal_path(1)))  # #2087
    assert state.current_journal == 2  # a restart starts a new journal file
    after.checkpoint()
    assert after.memory_state().fenced_flushed == {1} and after.persisted_mark == state.mark


def test_replay_after_restart_without_a_checkpoint_is_idempotent(tmp_path: Path) -> None:
    bookie = started(tmp_path, checkpoint=False)
    bookie.add_entry(entry(3, 0), KEY)
    bookie.force_write()
    bookie.close()
    for _ in range(3):
        again = started(tmp_path, checkpoint=False)
        assert again.read_entry(3, 0) == entry(3, 0)
        again.close()


def test_journal_rolls_over_and_old_journals_are_deleted_after_a_checkpoint(tmp_path: Path) -> None:
    bookie = started(tmp_path, config=BookieConfig(journal_max_records=2))
    for e in range(5):
        bookie.add_entry(entry(1, e), KEY)
        bookie.force_write()
    files = read_bookie_files(bookie.layout)
    assert [(j.file_id, len(j.records)) for j in files.journals] == [(1, 3), (2, 2), (3, 1)]  # + 1 ledger key record
    assert bookie.memory_state().current_journal == 3
    bookie.checkpoint()
    assert bookie.persisted_mark.file_id == 3
    assert [j.file_id for j in read_bookie_files(bookie.layout).journals] == [3]
    with pytest.raises(BookieStateError, match="not the oldest journal wholly before the persisted mark"):
        bookie.delete_journal(3)
    bookie.close()
    after = started(tmp_path)
    assert [after.read_entry(1, e) for e in range(5)] == [entry(1, e) for e in range(5)]


def test_journals_are_deleted_oldest_first(tmp_path: Path) -> None:
    bookie = started(tmp_path, config=BookieConfig(journal_max_records=1))
    for e in range(3):
        bookie.add_entry(entry(1, e), KEY)
        bookie.force_write()
    bookie.checkpoint(delete_journals=False)
    assert bookie.persisted_mark.file_id == 3 and bookie.deletable_journals() == [1, 2]
    with pytest.raises(
        BookieStateError, match=r"journal 2.txn is not the oldest .* \(deletable: \['1.txn', '2.txn'\]\)"
    ):
        bookie.delete_journal(2)  # a crash after it would leave a gap in the journal ids
    bookie.delete_journal(1)
    bookie.delete_journal(2)
    assert [j.file_id for j in read_bookie_files(bookie.layout).journals] == [3, 4]


def test_backup_journals_are_kept(tmp_path: Path) -> None:
    bookie = started(tmp_path, config=BookieConfig(journal_max_records=1, max_backup_journals=2))
    for e in range(5):
        bookie.add_entry(entry(1, e), KEY)
        bookie.force_write()
    bookie.checkpoint()
    ids = [j.file_id for j in read_bookie_files(bookie.layout).journals]
    assert bookie.persisted_mark.file_id == 5  # the mark moves with fsyncs: file 6 has no record yet
    assert ids == [3, 4, 5, 6]  # 1 and 2 deleted, 3 and 4 kept as backups


@pytest.mark.parametrize("kept", [0, 1, 4, 30, 1000])
def test_a_torn_journal_tail_ends_replay_and_a_new_journal_starts(tmp_path: Path, kept: int) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    bookie = started(tmp_path, fs)
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.add_entry(entry(1, 1, b"x" * 2000), KEY)
    bookie.journal_flush()  # written, not fsynced: a power loss keeps a prefix of it
    journal = bookie.layout.journal_path(1)
    fs.power_loss(torn={journal: kept})
    files = read_bookie_files(bookie.layout)
    assert files.journals[0].end_kind is (JournalEnd.EOF if kept == 0 else JournalEnd.TORN)
    after = started(tmp_path, fs)
    assert after.read_entry(1, 0) == entry(1, 0)
    with pytest.raises(NoSuchEntryError):
        after.read_entry(1, 1)
    assert after.memory_state().current_journal == 2 and os.path.getsize(journal) == 1024 + kept
    assert not [p for p in check_bookie_files(read_bookie_files(after.layout)) if p.severity == "error"]


def test_a_corrupt_record_mid_journal_stops_the_restart_naming_file_and_offset(tmp_path: Path) -> None:
    bookie = started(tmp_path, checkpoint=False)
    for e in range(3):
        bookie.add_entry(entry(1, e), KEY)
    bookie.force_write()
    bookie.close()
    journal = bookie.layout.journal_path(1)
    records = read_bookie_files(bookie.layout).journals[0].records
    middle = records[2]  # key, entry 0, entry 1, entry 2
    with open(journal, "r+b") as f:
        f.seek(middle.end - 1)
        f.write(bytes([middle.data[-1] ^ 0xFF]))
    with pytest.raises(CorruptFileError, match="entry record: crc32c digest mismatch for ledger 1 entry 1") as caught:
        started(tmp_path)
    assert (caught.value.path, caught.value.offset) == (journal, middle.offset)
    with open(journal, "r+b") as f:
        f.seek(middle.offset)
        f.write(struct.pack(">i", -3))
    with pytest.raises(CorruptFileError, match=f"{journal} at offset {middle.offset}: negative record length -3"):
        started(tmp_path)


def test_a_mark_into_a_missing_or_short_journal_stops_the_restart(tmp_path: Path) -> None:
    bookie = started(tmp_path)
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.checkpoint()
    bookie.close()
    journal = bookie.layout.journal_path(1)
    with open(journal, "r+b") as f:
        f.truncate(600)
    with pytest.raises(CorruptFileError, match="lastMark \\(0x1, 1024\\) points past the end of the journal"):
        started(tmp_path)
    os.unlink(journal)
    with pytest.raises(MissingFileError, match=f"{journal}: lastMark \\(0x1, 1024\\) points into this journal"):
        started(tmp_path)


def test_the_mark_is_the_maximum_of_the_copies_and_a_corrupt_copy_is_an_error(tmp_path: Path) -> None:
    layout = BookieLayout.in_data_dir(str(tmp_path), ledger_dirs=3)
    bookie = Bookie(layout)
    bookie.start()
    bookie.add_entry(entry(1, 0), KEY)
    bookie.force_write()
    bookie.checkpoint()
    newest = bookie.persisted_mark
    bookie.close()
    copies = layout.last_mark_paths()
    assert [Path(p).read_bytes() for p in copies] == [struct.pack(">qq", newest.file_id, newest.offset)] * 3
    for stale in copies[:2]:
        with open(stale, "wb") as f:
            f.write(struct.pack(">qq", 1, 512))
    again = Bookie(layout)
    again.start(checkpoint=False)
    assert again.persisted_mark == newest
    again.close()
    with open(copies[1], "wb") as f:
        f.write(b"short")
    with pytest.raises(CorruptFileError, match=f"{copies[1]}: lastMark file of 5 bytes, expected 16"):
        Bookie(layout).start()


def test_leftovers_of_interrupted_creations_are_removed_at_start(tmp_path: Path) -> None:
    bookie = started(tmp_path)
    bookie.close()
    leftovers = [bookie.layout.journal_path(7) + ".tmp", bookie.layout.last_mark_paths()[0] + ".tmp"]
    for path in leftovers:
        with open(path, "wb") as f:
            f.write(b"half")
    assert [p.path for p in check_bookie_files(read_bookie_files(bookie.layout))] == sorted(leftovers)
    started(tmp_path).close()
    assert not any(os.path.exists(p) for p in leftovers)


def test_a_fence_is_answered_after_its_record_is_durable_and_survives_a_power_loss(tmp_path: Path) -> None:
    fs = FaultyFileSystem(str(tmp_path))
    bookie = started(tmp_path, fs)
    fence = bookie.fence_ledger(4, KEY)
    assert bookie.is_fenced(4) and fence not in bookie.replies
    assert bookie.memory_state().pending == (fence,)
    bookie.force_write()
    assert bookie.replies == [fence]
    again = bookie.fence_ledger(4, KEY)  # already durably fenced: answered at once, nothing journaled
    assert bookie.replies[-1] is again and bookie.memory_state().buffered == ()
    fs.power_loss()
    after = started(tmp_path, fs)
    assert after.is_fenced(4)
    with pytest.raises(LedgerFencedError):
        after.add_entry(entry(4, 0), KEY)
    after.add_entry(entry(4, 0), KEY, recovery=True)


def test_a_second_fence_waits_for_the_first_fence_record(tmp_path: Path) -> None:
    bookie = started(tmp_path, FaultyFileSystem(str(tmp_path), sync_to_disk=False))
    first = bookie.fence_ledger(4, KEY)
    bookie.journal_flush()
    second = bookie.fence_ledger(4, KEY)  # fenceAndLogInJournal: the first request's future, no second record
    assert bookie.memory_state().buffered == () and bookie.memory_state().pending == (first, second)
    assert bookie.force_write() == [first, second]
    assert [r.spec_record() for r in read_bookie_files(bookie.layout).journals[-1].records] == [None, ("fence", 4, -1)]


def test_entry_logs_roll_over_and_span_ledger_directories(tmp_path: Path) -> None:
    layout = BookieLayout.in_data_dir(str(tmp_path), ledger_dirs=2)
    bookie = Bookie(layout, config=BookieConfig(entry_log_max_bytes=4096))
    bookie.start()
    for e in range(12):
        bookie.add_entry(entry(e % 3, e, bytes(500)), KEY)
    bookie.force_write()
    bookie.checkpoint()
    logs = read_bookie_files(layout).entry_logs
    assert len(logs) >= 3 and all(log.size <= 4096 for log in logs)
    assert {os.path.dirname(log.path) for log in logs} == set(layout.ledger_dirs)
    bookie.close()
    after = Bookie(layout)
    after.start()
    assert [after.read_entry(e % 3, e) for e in range(12)] == [entry(e % 3, e, bytes(500)) for e in range(12)]


def test_replay_makes_the_journal_it_read_durable(tmp_path: Path) -> None:
    # A fence written to the OS but not fsynced survives a process crash; the restarted bookie replays it and
    # answers the next fence at once. That answer must outlive a power loss.
    fs = FaultyFileSystem(str(tmp_path), sync_to_disk=False)
    bookie = started(tmp_path, fs)
    bookie.fence_ledger(1, KEY)
    bookie.journal_flush()
    fs.restart_process()
    after = started(tmp_path, fs, checkpoint=False)
    answer = after.fence_ledger(1, KEY)
    assert after.replies == [answer]
    fs.power_loss()
    assert started(tmp_path, fs).is_fenced(1)


def test_a_ledger_key_the_mark_has_passed_is_kept_for_the_records_after_it(tmp_path: Path) -> None:
    # A power loss keeps ledger 4's key record and tears off its entry; the restart's checkpoint moves the
    # mark past the key. The explicit LAC and the fence that follow are journaled without a second key
    # record (the key is known), so only the ledger storage can give them their key at the next replay.
    fs = FaultyFileSystem(str(tmp_path), sync_to_disk=False)
    bookie = started(tmp_path, fs)
    bookie.add_entry(entry(4, 0), KEY)
    bookie.journal_flush()
    [journal] = fs.unsynced_files()
    key_record = 4 + 8 + 8 + 4 + len(KEY)  # length prefix, ledger, LEDGER_KEY entry id, key length, key
    fs.power_loss(torn={journal: key_record})
    bookie = started(tmp_path, fs)
    assert bookie.read_path(4, 0) is None
    bookie.set_explicit_lac(lac(4, 0), KEY)
    fence = bookie.fence_ledger(4, KEY)
    bookie.force_write()
    assert fence in bookie.replies
    for _ in range(2):  # the first restart writes the index; the second reads it back
        fs.restart_process()
        bookie = started(tmp_path, fs)
    assert [(i.ledger_id, i.header.master_key, i.header.fenced) for i in read_bookie_files(bookie.layout).indexes] == [
        (4, KEY, True)
    ]
    with pytest.raises(LedgerFencedError):
        bookie.add_entry(entry(4, 0), KEY)
    bookie.add_entry(entry(4, 0), KEY, recovery=True)
    with pytest.raises(UnauthorizedError):
        bookie.add_entry(entry(4, 1), b"another key", recovery=True)
