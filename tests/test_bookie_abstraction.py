"""The abstraction function and the checked bookie: how reference steps meet the spec's, one choice at a time."""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import pytest
from ledgerspec.reference.bookie import BookieConfig, LogMark, SimulatedCrash, read_bookie_files
from ledgerspec.reference.bookie.abstraction import BookieAbstraction, History, canonical
from ledgerspec.reference.bookie.refinement import CheckedBookie
from ledgerspec.spec.bookie.bookie import NONE, WRITE_CACHE, BookieSpec

SPEC = BookieSpec(NumLedgers=3, MaxEntries=8, RecordsPerJournal=3, MaxCrashes=10)
CONFIG = BookieConfig(journal_max_records=3)


def checked(tmp_path: Path, config: BookieConfig = CONFIG, crash_at: int | None = None) -> CheckedBookie:
    bookie = CheckedBookie(str(tmp_path / "bookie"), SPEC, config, crash_at=crash_at)
    bookie.start()
    return bookie


def clean(bookie: CheckedBookie) -> None:
    assert [v.explain() for v in bookie.violations] == []


def test_a_new_bookie_is_the_specs_initial_state(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    clean(bookie)
    assert bookie.state is not None and canonical(SPEC, bookie.state) == SPEC.initial_state()
    assert bookie.state.synced == (0, 0)  # the bookie's LogMark(0, 0): before every record, as (1, 0) is


def test_buffered_records_are_in_the_journal_and_writing_them_is_a_stutter(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    bookie.add(1, 0)
    buffered = bookie.state
    assert buffered is not None and buffered.journal == ((1, (("entry", 1, 0),)),)
    assert read_bookie_files(bookie.layout).journals[0].records == ()  # nothing written to the OS yet
    bookie.journal_flush()
    assert bookie.state == buffered
    clean(bookie)


def test_synced_moves_with_the_acknowledgements_not_with_the_fsync(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    bookie.add(1, 0)
    bookie.journal_flush()
    bookie.take_batch()
    bookie.add(1, 1)  # arrives while the force-write thread holds the batch
    bookie.journal_flush()
    bookie.journal_sync()
    fsynced = bookie.state
    assert fsynced is not None and SPEC.unsynced(fsynced) == [("entry", 1, 0), ("entry", 1, 1)]
    assert fsynced.acked == frozenset()
    bookie.journal_synced()  # JournalForceWrites(upto=(1, 1)): a prefix of what was written
    assert bookie.state is not None
    assert (bookie.state.synced, bookie.state.mark, bookie.state.acked) == ((1, 1), (1, 1), {(1, 0)})
    assert SPEC.unsynced(bookie.state) == [("entry", 1, 1)]
    clean(bookie)


def test_marks_count_spec_records_and_outlive_their_journal_file(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    for e in range(3):
        bookie.add(1, e)
    bookie.force_write()  # journal 1 is full: a key record and three entries; the journal rolls over
    bookie.checkpoint()
    assert bookie.bookie is not None and bookie.bookie.persisted_mark == LogMark(1, 1024)
    assert bookie.state is not None and SPEC.persisted_mark(bookie.state) == (1, 3)  # the key record is not counted
    bookie.add(2, 0)
    bookie.force_write()
    bookie.checkpoint()  # the mark moves into journal 2: journal 1 is deleted
    assert bookie.state is not None and [f for f, _ in bookie.state.journal] == [2]
    assert bookie.abstraction.position(LogMark(1, 1024)) == (1, 3)  # remembered from when it was there
    clean(bookie)


def test_a_checkpoint_that_cannot_move_the_mark_is_refused_and_the_write_cache_flushes(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    bookie.add(1, 0)  # not yet synced: the mark is still where it was persisted
    assert not bookie.start_checkpoint()  # the sync thread's: refused, as the spec does not enable it
    assert bookie.start_checkpoint(WRITE_CACHE)  # the write cache holds an entry: its flush starts
    assert bookie.state is not None and bookie.state.flusher_mark == (NONE, (0, 0))
    assert bookie.flush_ledger_storage(WRITE_CACHE)
    assert bookie.state is not None and bookie.state.flushed == {(1, 0)} and bookie.state.flusher_flushed == {2}
    assert bookie.persist_mark(WRITE_CACHE)  # the same mark again
    assert bookie.state is not None and bookie.state.flusher_mark == (NONE, NONE)
    clean(bookie)


def test_a_persist_the_bookie_refuses_is_one_the_spec_does_not_enable(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    bookie.add(1, 0)
    bookie.force_write()
    bookie.start_checkpoint()
    assert bookie.state is not None and bookie.state.flusher_mark == ((1, 1), NONE)
    assert not bookie.persist_mark()  # not flushed yet
    clean(bookie)


def test_a_crashed_bookie_is_its_files_alone(tmp_path: Path) -> None:
    bookie = checked(tmp_path)
    bookie.add(1, 0)
    bookie.force_write()
    bookie.fence(2)
    bookie.journal_flush()
    bookie.process_crash()  # the unsynced fence record stays in the OS
    down = bookie.state
    assert down is not None and not down.up and down.mark == NONE and down.memtable == frozenset()
    assert down.journal == ((1, (("entry", 1, 0), ("fence", 2, -1))),) and down.synced == (1, 2)
    assert down.crashes == 1 and down.acked == {(1, 0)} and down.fence_acked == frozenset()
    abstraction = BookieAbstraction(SPEC)
    assert abstraction.crashed(read_bookie_files(bookie.layout), History(frozenset({(1, 0)}), crashes=1)) == down
    bookie.start()
    assert bookie.state is not None and bookie.state.fenced == {2}
    clean(bookie)


def test_states_compare_with_synced_at_the_first_unsynced_record() -> None:
    s = SPEC.initial_state()
    for e in range(3):
        s = SPEC.BookieAddsEntry(s, 1, e) or s
    s = SPEC.JournalRollsOver(s) or s
    synced = SPEC.JournalForceWrites(s, (1, 3))
    assert synced is not None and synced.synced == (1, 3) and synced.journal[-1] == (2, ())
    # (1, 3), the end of file 1, and (2, 0), the start of file 2, leave the same records unsynced.
    assert canonical(SPEC, synced).synced == (2, 0)
    assert canonical(SPEC, attrs.evolve(synced, synced=(2, 0))) == canonical(SPEC, synced)


def test_a_crash_inside_a_flush_leaves_part_of_it_and_the_replay_restores_the_rest(tmp_path: Path) -> None:
    clean_run = checked(tmp_path / "clean")
    clean_run.add(1, 0)
    clean_run.add(2, 0)
    clean_run.force_write()
    clean_run.start_checkpoint()
    before_flush = clean_run.fs.boundaries
    clean_run.flush_ledger_storage()
    index_fsyncs = [e.index for e in clean_run.fs.events[before_flush:] if e.op == "fsync" and e.path.endswith(".idx")]
    # Crash right after the first index file is durable: ledger 1 is flushed, ledger 2 is not.
    bookie = checked(tmp_path / "crash", crash_at=index_fsyncs[0] + 1)
    bookie.add(1, 0)
    bookie.add(2, 0)
    bookie.force_write()
    bookie.start_checkpoint()
    with pytest.raises(SimulatedCrash):
        bookie.flush_ledger_storage()
    power_loss = next(o for o in bookie.outcomes() if o.label == "power loss")
    after = bookie.fork(str(tmp_path / "after"), power_loss, bookie.crash_candidates())
    assert after.state is not None and after.state.flushed == {(1, 0)}  # between the flush's before and after
    after.start()  # the replay puts both back in the memtable, and the restart's checkpoint flushes them
    assert after.state is not None and after.state.flushed == {(1, 0), (2, 0)}
    assert [after.read(ledger, 0) for ledger in (1, 2)] == ["entry_log", "entry_log"]
    clean(after)


def test_a_restart_that_crashes_before_its_replay_is_the_crash_before_it(tmp_path: Path) -> None:
    bookie = checked(tmp_path / "first")
    bookie.add(1, 0)
    bookie.force_write()
    bookie.add(1, 1)
    bookie.journal_flush()
    bookie.process_crash()  # (1, 1) is in the OS only; the restart's replay fsyncs it
    bookie.fs.crash_at = bookie.crash_at = bookie.fs.boundaries  # the replay's first fsync
    with pytest.raises(SimulatedCrash):
        bookie.start()
    assert bookie.step_under_way == "start" and bookie.fs.crash_event is not None
    assert bookie.fs.crash_event.op == "fsync" and bookie.fs.crash_event.path.endswith("1.txn")
    power_loss = next(o for o in bookie.outcomes() if o.label == "power loss")
    again = bookie.fork(str(tmp_path / "again"), power_loss, bookie.crash_candidates())
    # To the spec the bookie never came up: one crash, which cut the unsynced (1, 1).
    assert again.state is not None and again.state.crashes == 1
    assert again.state.journal == ((1, (("entry", 1, 0),)),)
    again.start()
    clean(again)


def test_the_mutant_that_deletes_the_journal_being_written_cannot_be_abstracted(tmp_path: Path) -> None:
    bookie = checked(tmp_path, BookieConfig(journal_max_records=3, mutant="delete_journal_at_mark"))
    bookie.add(1, 0)
    bookie.force_write()
    bookie.checkpoint()  # the mark is in journal 2, the one being written: the mutant deletes it
    assert [(v.kind, v.name) for v in bookie.violations][:1] == [("abstraction", "Abstraction")]
    assert "holds no journal file" in bookie.violations[0].message


def test_a_crash_between_two_lastmark_copies_leaves_them_apart_and_the_start_takes_the_larger(tmp_path: Path) -> None:
    spec = BookieSpec(**{**SPEC.values, "NumLedgerDirs": 2})

    def checkpoint_flushed(bookie: CheckedBookie) -> None:
        bookie.start()
        bookie.add(1, 0)
        bookie.force_write()
        bookie.start_checkpoint()
        bookie.flush_ledger_storage()

    clean_run = CheckedBookie(str(tmp_path / "clean"), spec, CONFIG)
    checkpoint_flushed(clean_run)
    before_persist = clean_run.fs.boundaries
    clean_run.persist_mark()  # CheckpointPersistsMark once per ledger directory
    assert clean_run.state is not None and clean_run.state.last_marks == ((1, 1), (1, 1))
    first_copy = os.path.dirname(clean_run.layout.last_mark_paths()[0])
    done = next(e.index for e in clean_run.fs.events[before_persist:] if e.op == "fsync_dir" and e.path == first_copy)
    clean(clean_run)
    # Crash once the first copy is durable, before the second is written.
    bookie = CheckedBookie(str(tmp_path / "crash"), spec, CONFIG, crash_at=done + 1)
    checkpoint_flushed(bookie)
    with pytest.raises(SimulatedCrash):
        bookie.persist_mark()
    power_loss = next(o for o in bookie.outcomes() if o.label == "power loss")
    after = bookie.fork(str(tmp_path / "after"), power_loss, bookie.crash_candidates())
    assert after.state is not None and after.state.last_marks == ((1, 1), (0, 0))
    after.start()  # from the larger copy: nothing to replay
    assert after.state is not None and after.state.memtable == frozenset() and after.state.flushed == {(1, 0)}
    assert after.read(1, 0) == "entry_log"
    clean(after)
