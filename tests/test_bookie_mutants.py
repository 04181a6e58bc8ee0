"""Each seeded bug of the reference bookie behaves differently from the correct bookie.

That the crash checks catch each one, by the invariant the spec's seeded bug breaks, is tests/test_crash_check.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bookie_support import KEY, entry, started
from ledgerspec.reference.bookie import (
    BookieConfig,
    FaultyFileSystem,
    LogMark,
    MissingFileError,
    SimulatedCrash,
)
from ledgerspec.reference.bookie.bookie import SYNC_THREAD, WRITE_CACHE


def test_unknown_mutants_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown mutant 'ack_late'; known mutants: ack_before_fsync"):
        BookieConfig(mutant="ack_late")


def test_ack_before_fsync_acknowledges_before_the_fsync_boundary(tmp_path: Path) -> None:
    for mutant, acked_before_fsync in ((None, False), ("ack_before_fsync", True)):
        root = tmp_path / str(mutant)
        root.mkdir()
        fs = FaultyFileSystem(str(root), sync_to_disk=False)
        bookie = started(root, fs, BookieConfig(mutant=mutant))
        bookie.add_entry(entry(1, 0), KEY)
        bookie.journal_flush()
        assert (len(bookie.replies) == 1) is acked_before_fsync
        fs.crash_at = fs.boundaries  # the fsync
        with pytest.raises(SimulatedCrash):
            bookie.force_write()
        fs.power_loss()
        after = started(root, fs)
        assert after.read_path(1, 0) is None  # gone in both; with the mutant it had been acknowledged


def test_mark_before_flush_persists_a_mark_over_data_only_in_memory(tmp_path: Path) -> None:
    outcomes = {}
    for mutant in (None, "mark_before_flush"):
        root = tmp_path / str(mutant)
        root.mkdir()
        fs = FaultyFileSystem(str(root), sync_to_disk=False)
        bookie = started(root, fs, BookieConfig(mutant=mutant))
        bookie.add_entry(entry(1, 0), KEY)
        bookie.force_write()
        mark = bookie.start_checkpoint()
        flusher = SYNC_THREAD
        if mutant:
            bookie.persist_mark()  # the correct bookie refuses this order (BookieStateError)
            bookie.start_checkpoint(WRITE_CACHE)  # the entry is still in the write cache: its flush starts
            flusher = WRITE_CACHE
        fs.crash_at = fs.boundaries  # the first write of the flush
        with pytest.raises(SimulatedCrash):
            bookie.flush_ledger_storage(flusher)
        fs.power_loss()
        after = started(root, fs)
        outcomes[mutant] = (bookie.persisted_mark == mark, after.read_path(1, 0))
    assert outcomes == {None: (False, "entry_log"), "mark_before_flush": (True, None)}


def test_fence_not_journaled_is_forgotten_by_a_restart(tmp_path: Path) -> None:
    for mutant, fenced_after in ((None, True), ("fence_not_journaled", False)):
        root = tmp_path / str(mutant)
        root.mkdir()
        bookie = started(root, config=BookieConfig(mutant=mutant))
        bookie.fence_ledger(1, KEY)
        bookie.force_write()
        assert [r.kind.value for r in bookie.replies] == ["fence"]
        bookie.close()
        after = started(root, config=BookieConfig(mutant=mutant), checkpoint=False)
        assert after.is_fenced(1) is fenced_after
        if not fenced_after:  # the old writer may append again
            after.add_entry(entry(1, 0), KEY)


def test_mark_not_advanced_in_replay_leaves_a_stale_mark_that_the_checkpoint_persists(tmp_path: Path) -> None:
    results = {}
    for mutant in (None, "mark_not_advanced_in_replay"):
        root = tmp_path / str(mutant)
        root.mkdir()
        bookie = started(root, config=BookieConfig(mutant=mutant), checkpoint=False)
        bookie.add_entry(entry(1, 0), KEY)
        bookie.force_write()
        end = bookie.memory_state().synced
        bookie.close()
        after = started(root, config=BookieConfig(mutant=mutant))  # replay, then the checkpoint of start()
        results[mutant] = (after.memory_state().mark, after.persisted_mark)
        assert after.memory_state().synced == end
    assert results[None] == (LogMark(1, 1024), LogMark(1, 1024))  # the end of journal 1
    assert results["mark_not_advanced_in_replay"] == (LogMark(0, 0), LogMark(0, 0))


def test_delete_journal_at_mark_removes_the_journal_the_restart_needs(tmp_path: Path) -> None:
    for mutant in (None, "delete_journal_at_mark"):
        root = tmp_path / str(mutant)
        root.mkdir()
        bookie = started(root, config=BookieConfig(mutant=mutant, journal_max_records=1))
        bookie.add_entry(entry(1, 0), KEY)
        bookie.force_write()  # entry 0 in journal 1, then a rollover to journal 2
        assert bookie.deletable_journals() == []  # nothing persisted yet
        bookie.checkpoint()  # mark persisted in journal 1, then old journals deleted
        assert bookie.persisted_mark.file_id == 1
        assert os.path.exists(bookie.layout.journal_path(1)) is (mutant is None)
        bookie.close()
        if mutant is None:
            assert started(root).read_entry(1, 0) == entry(1, 0)
        else:
            with pytest.raises(MissingFileError, match="lastMark \\(0x1, 1024\\) points into this journal"):
                started(root)
