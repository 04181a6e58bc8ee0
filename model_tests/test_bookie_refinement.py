"""The reference bookie refines the bookie spec: random workloads with crashes and restarts, checked at every step.

Each rule takes one reference step on a
:class:`~ledgerspec.reference.bookie.refinement.CheckedBookie`, which maps the bookie's
memory and files to a spec state (``reference/bookie/abstraction.py``) and checks
that the step is a spec step (or a stutter), that a crash is the spec's
``BookieCrashes(cut)`` for the cut that survived, that a restart is
``BookieReplaysJournal`` and a checkpoint, that every spec invariant holds, and
that acknowledged entries, fences and explicit LACs outlive each restart. The
invariant of the machine is that no check has failed.

Group commit runs whole (``force_write``) or in the force-write thread's parts
(``journal_flush``, ``take_batch``, ``journal_sync``, ``journal_synced``, with
requests arriving in between); checkpoints whole, and the steps of both flushers
(the sync thread's checkpoint, the write cache's flush) interleaved, each
refused by the bookie exactly when the spec does not enable it; with one ledger
directory and with two, whose lastMark copies a crash may leave apart. Crashes are
power losses that keep any prefix of the journal's unsynced bytes (a torn tail,
cut inside a record or between records, taken in file order as the spec's
crash takes it) and process crashes.

The bookie's files are real, but its fsyncs are modelled, not passed to the
disk: ``FaultyFileSystem(sync_to_disk=False)``. What a crash keeps is decided by
the file system's model of what is durable, never by the disk, so passing the
fsyncs on would change nothing checked here and make every example wait for
the disk.

The spec's bounds do not bind the bookie: the spec is built with ledgers,
entries and crashes enough for any run of the machine (an add rule adds at most
``RECORDS_PER_JOURNAL`` entries and a LAC rule raises the LAC by one, so ids stay
below ``MaxEntries``).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import attrs
import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)
from ledgerspec.reference.bookie import MUTANTS, BookieConfig, default_scratch
from ledgerspec.reference.bookie.refinement import CheckedBookie
from ledgerspec.spec.bookie.bookie import FLUSHERS, SYNC_THREAD, BookieSpec, BookieState
from ledgerspec.tools.model_checking.explorer.explorer import explore

LEDGERS = 3
RECORDS_PER_JOURNAL = 3
STEPS = 50  # rules per run in the default profile; the slow one runs longer
SLOW_STEPS = 100
# An add rule adds up to RECORDS_PER_JOURNAL entries, a LAC rule raises the LAC by one: ids stay below MaxEntries.
SPEC = BookieSpec(
    NumLedgers=LEDGERS,
    MaxEntries=RECORDS_PER_JOURNAL * SLOW_STEPS + 1,
    RecordsPerJournal=RECORDS_PER_JOURNAL,
    MaxCrashes=SLOW_STEPS,
)
CONFIG = BookieConfig(journal_max_records=RECORDS_PER_JOURNAL)


class BookieRefinement(RuleBasedStateMachine):
    """A reference bookie and its spec, side by side."""

    ledgers = Bundle("ledgers")
    entries = Bundle("entries")
    spec = SPEC  # the spec it refines; its NumLedgerDirs is the bookie's number of ledger directories
    config = CONFIG  # the reference bookie's settings (a mutant, for the machine's own test)
    check_refinement = True  # off: the invariants and direct checks alone

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="bookie-refinement-", dir=default_scratch())
        self.bookie = CheckedBookie(self.directory, self.spec, self.config, check_refinement=self.check_refinement)
        self.bookie.start()
        self.next_entry: dict[int, int] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- what the spec and the bookie allow now

    @property
    def state(self) -> BookieState:
        assert self.bookie.state is not None
        return self.bookie.state

    def up(self) -> bool:
        return self.bookie.up

    def room(self) -> bool:
        """The bookie is up and the current journal file has room for a record (else it must roll over)."""
        return self.up() and not SPEC.current_file_full(self.state)

    def idle_force_writer(self) -> bool:
        return self.up() and not self.bookie.batch_in_flight

    def no_checkpoint(self) -> bool:
        """The sync thread is idle: a whole checkpoint may start."""
        return self.up() and self.bookie.bookie is not None and SYNC_THREAD not in self.bookie.bookie.flusher_marks

    # -- identities

    @initialize(target=ledgers)
    def open_ledgers(self) -> object:
        """The writers' ledgers: the spec's 1 .. NumLedgers (a writer numbers its entries from 0)."""
        self.next_entry = {ledger: 0 for ledger in range(1, LEDGERS + 1)}
        note(f"ledgers {list(self.next_entry)}")
        return multiple(*self.next_entry)

    # -- requests

    @precondition(room)
    @rule(target=entries, ledger=ledgers, count=st.integers(1, RECORDS_PER_JOURNAL))
    def add(self, ledger: int, count: int) -> object:
        """Up to ``count`` adds to the ledger, as many as the journal file has room for."""
        written = []
        while count and self.room():
            count -= 1
            entry = self.next_entry[ledger]
            self.next_entry[ledger] += 1
            accepted = self.bookie.add(ledger, entry)
            note(f"add({ledger}, {entry}): {'written' if accepted else 'refused, the ledger is fenced'}")
            if accepted:
                written.append((ledger, entry))
        return multiple(*written)

    @precondition(room)
    @rule(ledger=ledgers)
    def fence(self, ledger: int) -> None:
        self.bookie.fence(ledger)
        note(f"fence({ledger})")

    @precondition(room)
    @rule(ledger=ledgers)
    def set_lac(self, ledger: int) -> None:
        lac = self.state.lac[ledger - 1] + 1
        self.bookie.set_lac(ledger, lac)
        note(f"set_lac({ledger}, {lac})")

    @precondition(up)
    @rule(written=entries)
    def read(self, written: tuple[int, int]) -> None:
        path = self.bookie.read(*written)
        note(f"read{written}: {path}")

    # -- group commit, whole or in parts

    @precondition(idle_force_writer)
    @rule()
    def force_write(self) -> None:
        self.bookie.force_write()
        note("force_write")

    @precondition(up)
    @rule()
    def journal_flush(self) -> None:
        self.bookie.journal_flush()
        note("journal_flush")

    @precondition(
        lambda self: self.idle_force_writer() and self.bookie.bookie is not None and self.bookie.bookie.has_batches()
    )
    @rule()
    def take_batch(self) -> None:
        self.bookie.take_batch()
        note("take_batch")

    @precondition(lambda self: self.up() and self.bookie.batch_in_flight and not self.bookie.batch_fsynced)
    @rule()
    def journal_sync(self) -> None:
        self.bookie.journal_sync()
        note("journal_sync")

    @precondition(lambda self: self.up() and self.bookie.batch_fsynced)
    @rule()
    def journal_synced(self) -> None:
        self.bookie.journal_synced()
        note("journal_synced")

    @precondition(lambda self: self.up() and SPEC.JournalRollsOver(self.state) is not None)
    @rule()
    def roll_journal(self) -> None:
        self.bookie.roll_journal()
        note("roll_journal")

    # -- checkpoints whole, and each flusher step by step

    @precondition(no_checkpoint)
    @rule()
    def checkpoint(self) -> None:
        self.bookie.checkpoint()
        note("checkpoint")

    @precondition(up)
    @rule(flusher=st.sampled_from(sorted(FLUSHERS)))
    def start_checkpoint(self, flusher: int) -> None:
        taken = self.bookie.start_checkpoint(flusher)
        note(f"start_checkpoint({FLUSHERS[flusher]}): {'mark taken' if taken else 'refused'}")

    @precondition(up)
    @rule(flusher=st.sampled_from(sorted(FLUSHERS)))
    def flush_ledger_storage(self, flusher: int) -> None:
        flushed = self.bookie.flush_ledger_storage(flusher)
        note(f"flush_ledger_storage({FLUSHERS[flusher]}): {'flushed' if flushed else 'refused'}")

    @precondition(up)
    @rule(flusher=st.sampled_from(sorted(FLUSHERS)))
    def persist_mark(self, flusher: int) -> None:
        persisted = self.bookie.persist_mark(flusher)
        note(f"persist_mark({FLUSHERS[flusher]}): {'done' if persisted else 'refused'}")

    @precondition(lambda self: self.up() and bool(self.bookie.deletable_journals()))
    @rule()
    def delete_oldest_journal(self) -> None:
        oldest = self.bookie.deletable_journals()[0]
        self.bookie.delete_journal(oldest)
        note(f"delete_journal({oldest})")

    # -- crashes and restarts

    @precondition(up)
    @rule(power_loss=st.booleans(), data=st.data())
    def crash(self, power_loss: bool, data: st.DataObject) -> None:
        """A power loss that keeps any prefix of each file's unsynced bytes, or a process crash."""
        if not power_loss:
            self.bookie.process_crash()
            note("process_crash")
            return
        torn = {}
        unsynced = self.bookie.fs.unsynced_files()
        for path in self.bookie.unsynced_journals():  # a prefix of the journal's unsynced bytes, in file order
            keep = data.draw(st.integers(0, unsynced[path]), label=f"unsynced bytes of {os.path.basename(path)} kept")
            if keep:
                torn[path] = keep
            if keep < unsynced[path]:
                break
        self.bookie.power_loss(torn)
        note(f"power_loss(torn={ {os.path.basename(p): n for p, n in torn.items()} })")

    @precondition(lambda self: not self.up())
    @rule()
    def restart(self) -> None:
        self.bookie.start()
        note(f"restart: journal files {[f for f, _ in self.bookie.state.journal] if self.bookie.state else []}")

    @invariant()
    def refines_the_spec(self) -> None:
        assert not self.bookie.violations, "\n".join(v.explain() for v in self.bookie.violations)


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def test_the_reference_bookie_refines_the_spec() -> None:
    run_state_machine_as_test(BookieRefinement, settings=_settings(400, STEPS))


class TwoLedgerDirsRefinement(BookieRefinement):
    """Two ledger directories: a persist writes two lastMark copies, a crash may come between them, and a
    start takes the larger; the write cache's flush persists no mark."""

    spec = BookieSpec(**{**SPEC.values, "NumLedgerDirs": 2})


def test_the_reference_bookie_with_two_ledger_directories_refines_the_spec() -> None:
    run_state_machine_as_test(TwoLedgerDirsRefinement, settings=_settings(200, STEPS))


@pytest.mark.slow
def test_the_reference_bookie_refines_the_spec_in_longer_runs() -> None:
    run_state_machine_as_test(BookieRefinement, settings=_settings(1000, SLOW_STEPS))


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_the_machine_finds_each_mutant(mutant: str) -> None:
    """The machine is not vacuous: with a seeded bug and the refinement checks off, it fails on the invariant
    that the spec's bug of that name breaks. (With them on, a mutant step is no spec step first.)"""
    expected = explore(BookieSpec(Bug=mutant), check_deadlock=False).violations[0].name
    attributes = {"config": attrs.evolve(CONFIG, mutant=mutant), "check_refinement": False}
    machine = type(f"BookieRefinement_{mutant}", (BookieRefinement,), attributes)
    with pytest.raises(AssertionError) as failure:
        run_state_machine_as_test(machine, settings=_settings(2000, STEPS))
    assert f": {expected}: " in str(failure.value)
