"""The reference managed ledger and cursor refine the cursor spec: random runs with crashes at every persistence step.

Each rule takes one step of a :class:`~ledgerspec.reference.managed_ledger.CursorRun`
(publish, acknowledge, reset, flush, trim, close, crash, restart, a failed
BookKeeper call or znode write, a lost cursor ledger); :class:`~ledgerspec.reference.managed_ledger.CursorRefinement`
checks every event the run logs against the spec, on the abstraction of the
run's real state: the znodes decoded from Pulsar's bytes, the cursor ledgers'
records read from the bookies, the cursor's memory. A crash can be armed at
each persistence step of the cursor (creating its ledger, switching the znode
to it, deleting the old one, appending a record, the close's znode write) and
at a rollover; the next step that reaches it stops the broker there.

Each engine mutant (``ManagedLedgerConfig.mutant``) leaves the spec on the
shortest road to it, at the step it breaks; the random machine finds each on
its own too (the longer profile, ``--run-slow``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from ledgerspec.reference.bookie import default_scratch
from ledgerspec.reference.managed_ledger import MUTANTS, TOPIC_ONLY_MUTANTS, CursorRefinement, CursorRun, RunConfig
from ledgerspec.reference.managed_ledger.cursor import CursorStatus
from ledgerspec.reference.managed_ledger.simulation import CRASH_POINTS
from ledgerspec.reference.refinement import RefinementError
from ledgerspec.spec.cursor.cursor import CursorSpec

MAX_ENTRIES = 8  # entries published in a run, at most
STEPS = 40
SLOW_STEPS = 80


class CursorRefinementMachine(RuleBasedStateMachine):
    """A topic, its cursor and a crashing broker, checked against the cursor spec at every event."""

    config = RunConfig(max_entries_per_ledger=2, metadata_max_entries_per_ledger=2, batch_size=1)

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="cursor-refinement-", dir=default_scratch())
        self.run = CursorRun(self.directory, self.config)
        self.check = CursorRefinement(self.run)
        self.published: list[tuple[int, int]] = []

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def active(self) -> bool:
        cursor = self.run.cursor
        return cursor is not None and cursor.status in (CursorStatus.NO_LEDGER, CursorStatus.OPEN)

    @precondition(lambda self: self.active() and len(self.published) < MAX_ENTRIES)
    @rule()
    def publish(self) -> None:
        position = self.run.publish()
        note(f"publish: {position}")
        if position is not None:
            self.published.append(position)

    @precondition(lambda self: self.active() and bool(self.live_messages()))
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        position, index = data.draw(st.sampled_from(self.live_messages()), label="message")
        took = self.run.ack(position, index)
        note(f"ack({position}, {index}): {'taken' if took else 'acknowledged before'}")

    def live_messages(self) -> list[tuple[tuple[int, int], int]]:
        ml = self.run.ml
        if ml is None:
            return []
        return [(p, i) for p in self.published if ml.holds(p) for i in range(self.config.batch_size)]

    @precondition(active)
    @rule()
    def flush(self) -> None:
        crashed = self.run.flush()
        note(f"flush{': crashed' if crashed else ''}")

    @precondition(active)
    @rule()
    def trim(self) -> None:
        crashed = self.run.trim()
        note(f"trim{': crashed' if crashed else ''}")

    def no_reset_pending(self) -> bool:
        return self.run.cursor is not None and self.run.cursor.resetting is None

    @precondition(lambda self: self.active() and self.no_reset_pending())
    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        ml = self.run.ml
        assert ml is not None
        targets = [ml.first_position(), *(p for p in self.published if ml.holds(p))]
        target = data.draw(st.sampled_from(targets), label="reset to")
        self.run.reset(target)
        note(f"reset to {target}")

    @precondition(lambda self: self.active() and self.no_reset_pending())
    @rule()
    def close_cursor(self) -> None:
        crashed = self.run.close_cursor()
        note(f"close_cursor{': crashed' if crashed else ''}")

    @precondition(lambda self: self.run.up and self.run.crash_at is None)
    @rule(point=st.sampled_from(CRASH_POINTS))
    def arm_crash(self, point: str) -> None:
        self.run.crash_at = point
        note(f"crash at the next {point}")

    @precondition(lambda self: self.run.up)
    @rule()
    def crash(self) -> None:
        self.run.crash()
        note("crash")

    @precondition(lambda self: not self.run.up)
    @rule()
    def restart(self) -> None:
        self.run.restart()
        note(f"restart: cursor at {self.run.cursor.mark_delete if self.run.cursor else None}")

    def no_first_record_failing(self) -> bool:
        """No failed first record is armed: it waits for the znode write it fails with."""
        return self.run.faults.first_appends == 0

    @precondition(
        lambda self: (
            self.active()
            and self.no_first_record_failing()
            and self.run.faults.creates == 0
            and self.run.faults.appends == 0
        )
    )
    @rule(call=st.sampled_from(["creates", "appends"]))
    def fail_next(self, call: str) -> None:
        """The next creation of a cursor ledger, or the next append to the open cursor ledger, fails."""
        assert self.run.cursor is not None
        if call == "appends" and self.run.cursor.status != CursorStatus.OPEN:
            call = "creates"  # an injected append failure hits appends to an open cursor ledger only
        self.run.fail_next(call)
        note(f"the next BookKeeper {call[:-1]} fails")

    @precondition(lambda self: self.active() and self.no_first_record_failing() and self.run.store.faults.writes == 0)
    @rule()
    def fail_next_znode_write(self) -> None:
        """The next znode write naming a new cursor ledger, or standing in for a failed BookKeeper call, fails."""
        self.run.fail_next("znode_writes")
        note("the next cursor-znode write fails")

    def holds_readable_ledger(self) -> bool:
        """The cursor is not Open on a lost ledger, whose append fails by itself and falls back to the znode: that
        write would take the znode failure armed with a first record's."""
        cursor = self.run.cursor
        return cursor is None or cursor.status != CursorStatus.OPEN or self.run.ledger_metadata_exists(cursor.ledger_id)

    @precondition(lambda self: self.active() and not self.run.faults_pending and self.holds_readable_ledger())
    @rule()
    def fail_next_first_record(self) -> None:
        """The first record of the next cursor ledger fails (its id spent), and so does its fallback to the znode."""
        self.run.fail_next("first_appends")
        note("the next cursor ledger's first record and its znode fallback fail")

    @precondition(lambda self: self.active() and self.config.rollover_by_time)
    @rule()
    def age_ledger(self) -> None:
        note(f"the ledger ages past maximumRolloverTimeMs: rolled over {self.run.age_ledger()}")

    # Not while a failure is armed: the append to a lost ledger falls back to the znode, and that write would take
    # the znode failure armed with a first record's, leaving that record's fallback to succeed (a step the cursor
    # spec leaves out, which the engine refuses).
    @precondition(lambda self: not self.run.faults_pending)
    @rule()
    def lose_cursor_ledger(self) -> None:
        note(f"cursor ledger lost: {self.run.lose_cursor_ledger()}")


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def test_the_reference_cursor_refines_the_spec() -> None:
    run_state_machine_as_test(CursorRefinementMachine, settings=_settings(60, STEPS))


def test_batched_acks_refine_the_spec() -> None:
    machine = type("BatchedCursorRefinement", (CursorRefinementMachine,), {"config": RunConfig(batch_size=3)})
    run_state_machine_as_test(machine, settings=_settings(40, STEPS))


def test_ledgers_rolled_over_by_age_refine_the_spec() -> None:
    """maximumRolloverTimeMs reached: the managed ledger's timer rolls a ledger over after one entry as well as
    after its maxEntriesPerLedger (the cursor spec's RolloverByTime)."""
    config = RunConfig(max_entries_per_ledger=3, rollover_by_time=True)
    machine = type("AgingLedgersRefinement", (CursorRefinementMachine,), {"config": config})
    run_state_machine_as_test(machine, settings=_settings(40, STEPS))


def test_an_aged_ledger_rolls_over_once_it_holds_an_entry(tmp_path: Path) -> None:
    """The timer finds the first ledger empty and leaves it; the next add finds it aged and is its last; the timer
    rolls the next one over after one entry. The spec, with RolloverByTime, takes each step; without it, the same
    run leaves the spec at the timer's rollover."""
    run = CursorRun(str(tmp_path / "aging"), RunConfig(max_entries_per_ledger=3, rollover_by_time=True))
    CursorRefinement(run)
    assert not run.age_ledger()
    run.publish()
    assert run.log.actions()[-2:] == ["EntryPublished", "LedgerRollsOver"]
    run.publish()
    assert run.age_ledger()
    assert run.log.actions()[-2:] == ["EntryPublished", "LedgerRollsOver"]
    config = RunConfig(max_entries_per_ledger=3, rollover_by_time=True)
    narrow = CursorRun(str(tmp_path / "narrow"), config)
    CursorRefinement(narrow, spec=CursorSpec(**{**config.spec_constants(), "RolloverByTime": False}))
    narrow.publish()
    with pytest.raises(RefinementError, match="LedgerRollsOver"):
        narrow.age_ledger()


def test_the_fallback_after_every_failed_creation_refines_the_spec() -> None:
    config = RunConfig(znode_fallback="always")
    machine = type("AlwaysFallbackRefinement", (CursorRefinementMachine,), {"config": config})
    run_state_machine_as_test(machine, settings=_settings(40, STEPS))


@pytest.mark.slow
def test_the_reference_cursor_refines_the_spec_in_longer_runs() -> None:
    run_state_machine_as_test(CursorRefinementMachine, settings=_settings(300, SLOW_STEPS))


def _publish_and_ack(run: CursorRun, acked: int) -> None:
    """Two entries (ledger 0 rolls over after them); the consumer acknowledges entry ``acked`` of ledger 0."""
    run.publish()
    run.publish()
    run.ack((0, acked))


def _publish_and_consume(run: CursorRun) -> None:
    """Two entries, both acknowledged: no message follows the mark-delete, so a failed creation writes the znode."""
    _publish_and_ack(run, 0)
    run.ack((0, 1))


@pytest.mark.parametrize(("fallback", "restored"), [("no_messages_after", (0, -1)), ("always", (0, 0))])
def test_a_failed_creation_writes_the_znode_only_as_configured(
    fallback: str, restored: tuple[int, int], tmp_path: Path
) -> None:
    """Pulsar 4.0.7 writes the state to the znode after a failed cursor-ledger creation only when no message
    follows the mark-delete (isNoMessagesAfterPos); here entry (0, 1) follows it, so its mark-delete fails."""
    run = CursorRun(str(tmp_path), RunConfig(znode_fallback=fallback))
    CursorRefinement(run)
    _publish_and_ack(run, 0)
    run.fail_next("creates")
    run.flush()
    run.crash()
    run.restart()
    assert run.cursor is not None
    assert run.cursor.mark_delete == restored


# Each mutant on the shortest road to it: the step where it leaves the spec, and the event the check names.
MUTANT_ROADS: dict[str, tuple[Callable[[CursorRun], object], str]] = {
    "restore_ignores_no_ledger": (
        lambda run: (_publish_and_ack(run, 1), run.close_cursor(), run.crash(), run.restart()),
        "CursorRecovers",
    ),
    "no_store_fallback": (
        lambda run: (_publish_and_consume(run), run.fail_next("creates"), run.flush()),
        "CursorLedgerCreationFails",
    ),
    "restore_skips_unacked": (
        lambda run: (_publish_and_ack(run, 1), run.flush(), run.crash(), run.restart()),
        "CursorRecovers",
    ),
    "trim_deletes_needed_ledger": (lambda run: (run.publish(), run.publish(), run.trim()), "TrimConsumedLedgers"),
    "skip_unconsumed_ledger": (
        lambda run: (run.ack(run.publish() or (0, 0)), run.publish(), run.trim()),
        "CursorSkipsConsumedLedger",
    ),
    "failed_switch_keeps_new_ledger": (
        lambda run: (_publish_and_ack(run, 0), run.fail_next("znode_writes"), run.flush()),
        "CursorLedgerSwitchFails",
    ),
    "failed_znode_write_counted_persisted": (
        lambda run: (_publish_and_consume(run), run.fail_next("creates"), run.fail_next("znode_writes"), run.flush()),
        "CursorZnodeWriteFails",
    ),
    "switch_before_first_record": (
        lambda run: (_publish_and_ack(run, 0), run.flush()),
        "CursorCreatesLedger",  # the new ledger holds no record when the znode names it
    ),
    "reset_keeps_acks": (
        lambda run: (_publish_and_ack(run, 1), run.reset((0, -1)), run.flush()),
        "CursorPersistsToLedger",  # the reset's record follows the new ledger's first (flushPendingMarkDeletes)
    ),
    "persists_read_position": (
        lambda run: (_publish_and_ack(run, 0), run.flush()),
        "CursorCreatesLedger",  # its first record holds (0, 1), read next and not acknowledged
    ),
}


def test_a_reset_back_redelivers_after_a_restart(tmp_path: Path) -> None:
    """A reset back to the first position, persisted, survives a crash: the restored cursor covers nothing, the
    acks from before the reset included (Pulsar 4.0.7 would keep entry 0:1's: the mutant reset_keeps_acks)."""
    run = CursorRun(str(tmp_path))
    check = CursorRefinement(run)
    _publish_and_ack(run, 1)
    run.ack((0, 0))
    run.flush()
    run.reset((0, -1))
    assert run.cursor is not None and run.cursor.mark_delete == (0, 1)  # the reset waits for its persist
    run.flush()
    assert run.cursor.mark_delete == (0, -1) and not run.acked
    run.crash()
    run.restart()
    assert run.cursor is not None
    assert run.cursor.mark_delete == (0, -1) and not run.cursor.acked
    assert not check.state.acked and check.state.resets == 1


def test_a_reset_whose_persist_fails_changes_nothing(tmp_path: Path) -> None:
    """The reset's mark-delete cannot be persisted (no cursor ledger, and entry 0:1 follows the target, so no
    fallback to the znode): the reset fails and the cursor keeps its state, dirty, to persist again."""
    run = CursorRun(str(tmp_path))
    check = CursorRefinement(run)
    _publish_and_ack(run, 1)
    run.reset((0, 0))
    run.fail_next("creates")
    run.flush()
    assert run.cursor is not None
    assert run.cursor.mark_delete == (0, -1) and run.cursor.acked == {(0, 1)}
    assert run.cursor.resetting is None and run.cursor.dirty
    assert check.state.acked == {(0, 1, 0)}


#: The engine's mutants a cursor's run shows (the others only a topic's: model_tests/test_topic_refinement.py).
CURSOR_MUTANTS = set(MUTANTS) - TOPIC_ONLY_MUTANTS


@pytest.mark.parametrize("mutant", sorted(CURSOR_MUTANTS))
def test_each_mutant_leaves_the_spec_at_its_own_step(mutant: str, tmp_path: Path) -> None:
    """Each seeded bug of the engine is a step the spec does not take; without it, the same steps refine."""
    road, event = MUTANT_ROADS[mutant]
    correct = CursorRun(str(tmp_path / "correct"))
    CursorRefinement(correct)
    road(correct)
    run = CursorRun(str(tmp_path / "mutant"), RunConfig(mutant=mutant))
    CursorRefinement(run)
    with pytest.raises(RefinementError, match=rf"\({event}|{event}\("):
        road(run)


@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(CURSOR_MUTANTS))
def test_the_machine_finds_each_mutant(mutant: str) -> None:
    """The random machine finds each seeded bug on its own."""
    machine = type(
        f"CursorRefinement_{mutant}",
        (CursorRefinementMachine,),
        {"config": RunConfig(max_entries_per_ledger=2, metadata_max_entries_per_ledger=2, mutant=mutant)},
    )
    with pytest.raises((RefinementError, ExceptionGroup)) as failure:
        run_state_machine_as_test(machine, settings=_settings(400, STEPS))
    # Hypothesis reports each distinct failure it found: every one is a step the spec does not take.
    group = failure.value
    errors = group.exceptions if isinstance(group, ExceptionGroup) else (group,)
    assert all(isinstance(e, RefinementError) for e in errors), errors


def test_an_append_failure_meant_for_a_lost_ledger_hits_the_next_open_one() -> None:
    """The machine with batches of 3 found this: the append to a lost cursor ledger fails by itself, so the
    failure armed for it is still due when the next ledger is created; it must hit a later append, since
    the spec's failed creation takes no ledger id: the record that follows the new ledger's first."""
    directory = tempfile.mkdtemp(prefix="cursor-refinement-", dir=default_scratch())
    try:
        run = CursorRun(directory, RunConfig(batch_size=3))
        check = CursorRefinement(run)
        position = run.publish()
        assert position is not None
        run.ack(position, 0)
        run.flush()
        run.lose_cursor_ledger()
        run.ack(position, 2)
        run.fail_next("appends")
        run.flush()  # the lost ledger fails the append: a new one is needed
        assert run.cursor is not None and run.cursor.status == CursorStatus.NO_LEDGER and run.faults.failed == 0
        run.ack(position, 1)
        # A new ledger with the state as its first record; the ack pending is written after the switch, and that
        # append takes the armed failure: the state goes to the znode.
        run.flush()
        assert run.cursor.status == CursorStatus.NO_LEDGER and run.faults.failed == 1 and check.state.faults == 1
        assert check.state.znode.cursors_ledger == -1 and check.state.durable == check.state.acked
    finally:
        shutil.rmtree(directory, ignore_errors=True)
