"""Scripted bookie workloads for the crash checks: each a short, deterministic sequence of reference steps.

A workload is a function of a :class:`~ledgerspec.reference.bookie.refinement.CheckedBookie`
that takes steps on it and nothing else; its docstring says what it exercises.
:data:`WORKLOADS` registers them by name. The crash sweep
(:mod:`ledgerspec.tools.harness.crash_check`) runs a workload once to count its file-system
boundaries, then again with a crash at each one.

All workloads run with :data:`WORKLOAD_CONFIG` (a journal file holds three
records, the spec's ``RecordsPerJournal``) and stay within
:data:`WORKLOAD_SPEC`'s ledgers and entries, so every step is one the spec can
take: a workload adds to a journal file only while it has room, and rolls it
over (a force write does) once it is full.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import attrs
from ledgerspec.reference.bookie import BookieConfig
from ledgerspec.reference.bookie.bookie import SYNC_THREAD, WRITE_CACHE
from ledgerspec.reference.bookie.refinement import CheckedBookie
from ledgerspec.spec.bookie.bookie import BookieSpec

__all__ = [
    "RANDOM_LEDGERS",
    "WORKLOADS",
    "WORKLOAD_CONFIG",
    "WORKLOAD_SPEC",
    "Workload",
    "random_spec",
    "random_steps",
    "spec_for",
]

RECORDS_PER_JOURNAL = 3
#: The reference bookie's settings in every workload (a mutant is added to them).
WORKLOAD_CONFIG = BookieConfig(journal_max_records=RECORDS_PER_JOURNAL)


def spec_for(config: BookieConfig) -> BookieSpec:
    """The correct spec the workloads are checked against: bounds large enough for them, no seeded bug.

    Crashes are not bounded by the spec here: a sweep counts them itself.
    """
    return BookieSpec(NumLedgers=4, MaxEntries=16, RecordsPerJournal=config.journal_max_records or 1, MaxCrashes=1000)


WORKLOAD_SPEC = spec_for(WORKLOAD_CONFIG)


@attrs.frozen
class Workload:
    name: str
    run: Callable[[CheckedBookie], None]

    @property
    def description(self) -> str:
        return " ".join((self.run.__doc__ or "").split())


def basic(b: CheckedBookie) -> None:
    """Adds to two ledgers, group commits of one and of two records, a checkpoint, and an unacknowledged tail
    written to the OS but never fsynced."""
    b.start()
    b.add(1, 0)
    b.force_write()
    b.add(1, 1)
    b.add(2, 0)
    b.force_write()  # the file is full: the force write rolls it over
    b.checkpoint()
    b.add(1, 2)
    b.add(2, 1)
    b.journal_flush()


def fencing(b: CheckedBookie) -> None:
    """A fence and a second fence while the first record waits for its fsync (one record, both answered after
    it), an add the fence refuses, a fence answered at once, explicit LACs, and a checkpoint that flushes the
    fenced bit and the LAC into the index header."""
    b.start()
    b.add(1, 0)
    b.add(1, 1)
    b.force_write()
    b.fence(1)
    b.fence(1)
    b.force_write()
    b.add(1, 2)  # refused: the ledger is fenced
    b.fence(1)  # durable already: answered at once
    b.set_lac(2, 0)
    b.set_lac(2, 1)
    b.force_write()
    b.checkpoint()
    b.set_lac(2, 2)
    b.force_write()  # the file is full: rolls over
    b.fence(2)
    b.journal_flush()


def rollover_and_deletion(b: CheckedBookie) -> None:
    """Enough records for four journal files, checkpoints that persist marks in later files, the deletion of
    the files wholly before the mark, and entries read back from the entry log after their journal is gone."""
    b.start()
    for e in range(3):
        b.add(1, e)
    b.force_write()
    for e in range(3):
        b.add(2, e)
    b.force_write()
    b.checkpoint()  # the mark is at the end of journal 2: journal 1 goes
    b.add(1, 3)
    b.fence(2)
    b.force_write()
    b.set_lac(1, 3)
    b.force_write()  # journal 3 is full and rolls over
    b.checkpoint()  # journal 2 goes
    b.add(3, 0)
    b.force_write()


def force_write_parts(b: CheckedBookie) -> None:
    """Group commit in its parts: a batch written and taken by the force-write thread while more records
    arrive and are written, the fsync, then the acknowledgements of the batch alone; a checkpoint taken step
    by step around a force write, whose mark is refused until its flush is done."""
    b.start()
    b.add(1, 0)
    b.journal_flush()
    b.take_batch()
    b.add(1, 1)
    b.journal_flush()
    b.journal_sync()
    b.journal_synced()  # acknowledges (1, 0) only
    b.start_checkpoint()
    b.add(2, 0)  # the file is full after this one
    b.force_write()
    b.persist_mark()  # refused: this checkpoint has not flushed yet
    b.flush_ledger_storage()
    b.persist_mark()
    b.add(2, 1)
    b.take_batch()  # nothing flushed yet: an empty batch
    b.journal_synced()
    b.force_write()


def interleaved_flushers(b: CheckedBookie) -> None:
    """The write cache's flush and the sync thread's checkpoint interleaved: the write cache takes its mark in
    journal 1, the journal rolls over, the sync thread's checkpoint persists a mark in journal 2 and deletes
    journal 1; the write cache then flushes and comes to persist its older mark, which is skipped
    (apache/bookkeeper#4105: release-4.17.2 writes it, and a restart finds journal 1 missing)."""
    b.start()
    b.add(1, 0)
    b.force_write()
    b.add(1, 1)
    b.start_checkpoint(WRITE_CACHE)  # the mark after (1, 0)
    b.add(1, 2)  # the file is full after this one
    b.force_write()  # rolls over
    b.add(2, 0)
    b.force_write()
    b.checkpoint()  # the sync thread's mark is in journal 2: journal 1 goes
    b.flush_ledger_storage(WRITE_CACHE)
    b.persist_mark(WRITE_CACHE)  # older than the persisted mark: skipped
    b.add(2, 1)
    b.force_write()


def restart(b: CheckedBookie) -> None:
    """Crashes inside the workload: a process crash (the OS keeps an unsynced fence) and a restart that
    replays it and answers a second fence at once; a power loss that tears the journal inside a record; a
    restart whose checkpoint persists the mark past the replayed journal, and the deletion that allows."""
    b.start()
    b.add(1, 0)
    b.force_write()
    b.fence(1)
    b.journal_flush()
    b.process_crash()
    b.start()
    b.fence(1)
    b.add(2, 0)
    b.force_write()
    b.add(2, 1)
    b.add(2, 2)
    b.journal_flush()
    journal = b.layout.journal_path(b.state.journal[-1][0] if b.state is not None else 1)
    b.power_loss({journal: b.fs.unsynced_bytes(journal) // 2})
    b.start()
    b.add(3, 0)
    b.force_write()
    b.checkpoint()


WORKLOADS = {
    w.name: w
    for w in (
        Workload("basic", basic),
        Workload("fencing", fencing),
        Workload("rollover-and-deletion", rollover_and_deletion),
        Workload("force-write-parts", force_write_parts),
        Workload("interleaved-flushers", interleaved_flushers),
        Workload("restart", restart),
    )
}


#: The ledgers a random run writes to (the spec's 1 .. NumLedgers).
RANDOM_LEDGERS = 3


def random_spec(config: BookieConfig, steps: int) -> BookieSpec:
    """The correct spec random runs of ``steps`` steps are checked against: an add raises an entry id by one
    and a LAC step a LAC by one, so ids stay below ``steps + 1``; a run crashes at most once a step."""
    return BookieSpec(
        NumLedgers=RANDOM_LEDGERS,
        MaxEntries=steps + 1,
        RecordsPerJournal=config.journal_max_records or 1,
        MaxCrashes=steps,
    )


def random_steps(b: CheckedBookie, rng: random.Random, steps: int) -> None:
    """``steps`` seeded random steps of a started bookie: adds, fences and explicit LACs to three ledgers while
    the journal file has room, group commit whole or in its parts, checkpoints whole, the steps of either
    flusher (the sync thread's checkpoint, the write cache's flush) interleaved, the
    deletion of journal files the mark has passed, power losses that keep a random prefix of the unsynced
    journal, process crashes, and a restart after each crash. Each step is one the bookie can take in its
    state, as the Hypothesis machine's preconditions choose them (model_tests/test_bookie_refinement.py), but
    for a flusher's: one the bookie refuses must be one the spec does not enable."""
    next_entry = dict.fromkeys(range(1, RANDOM_LEDGERS + 1), 0)
    for _ in range(steps):
        if not b.up:
            b.start()
            continue
        if rng.random() < 0.05:
            _power_loss(b, rng) if rng.random() < 0.5 else b.process_crash()
            continue
        state = b.state
        assert state is not None and b.bookie is not None
        # Each step the bookie can take now, weighted by repeats.
        steps_now = ["journal_flush", "start_checkpoint", "flush_ledger_storage", "persist_mark"]
        if not b.spec.current_file_full(state):
            steps_now += ["add", "add", "add", "fence", "set_lac"]
        if not b.batch_in_flight:
            steps_now += ["force_write", "force_write"] + (["take_batch"] if b.bookie.has_batches() else [])
        if b.batch_in_flight and not b.batch_fsynced:
            steps_now.append("journal_sync")
        if b.batch_fsynced:
            steps_now.append("journal_synced")
        if b.spec.JournalRollsOver(state) is not None:
            steps_now.append("roll_journal")
        if SYNC_THREAD not in b.bookie.flusher_marks:
            steps_now.append("checkpoint")
        if b.deletable_journals():
            steps_now.append("delete_journal")
        ledger = rng.randint(1, RANDOM_LEDGERS)
        match rng.choice(steps_now):
            case "add":
                b.add(ledger, next_entry[ledger])
                next_entry[ledger] += 1
            case "fence":
                b.fence(ledger)
            case "set_lac":
                b.set_lac(ledger, state.lac[ledger - 1] + 1)
            case "delete_journal":
                b.delete_journal(b.deletable_journals()[0])
            case "start_checkpoint" | "flush_ledger_storage" | "persist_mark" as step:
                getattr(b, step)(rng.choice((SYNC_THREAD, WRITE_CACHE)))  # refused when the flusher cannot
            case step:
                getattr(b, step)()


def _power_loss(b: CheckedBookie, rng: random.Random) -> None:
    """A power loss that keeps a random prefix of the unsynced journal bytes, in file order."""
    torn = {}
    unsynced = b.fs.unsynced_files()
    for path in b.unsynced_journals():
        keep = rng.randint(0, unsynced[path])
        if keep:
            torn[path] = keep
        if keep < unsynced[path]:
            break
    b.power_loss(torn)
