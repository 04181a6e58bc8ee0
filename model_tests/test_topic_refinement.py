"""The reference topic and managed ledger refine the managed-ledger spec: producers with deduplication,
rollover, crashes at each step of an add, restarts, consumption and trimming.

Each rule takes one step of a :class:`~ledgerspec.reference.managed_ledger.topic_run.TopicRun`;
the producers', the clock's and the add's rules are taken when the spec's
action is enabled (they ask the spec, on the abstraction of the run), the
broker's trims whenever it is up (a trim the spec does not allow must then
change nothing); :class:`~ledgerspec.reference.managed_ledger.refinement.TopicRefinement`
checks each event against the spec on the run's real state: the ledger list
and the subscriptions' positions decoded from the store and the bookies, the
entries' producers and sequence ids decoded from Pulsar's ``MessageMetadata``.
A crash can strike before an add is written or after it is written and
before the producer's answer.

Seeded bugs (two managed-ledger mutants, and the topic forgetting its
deduplication state on reopen) leave the spec on the shortest road to them,
at the step they break; the random machine finds each on its own too (the
longer profile, ``--run-slow``).
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
from ledgerspec.reference.managed_ledger.refinement import TopicRefinement
from ledgerspec.reference.managed_ledger.topic_run import TopicRun, TopicRunConfig
from ledgerspec.reference.refinement import RefinementError
from ledgerspec.spec.managed_ledger.managed_ledger import ManagedLedgerState

STEPS = 40
CONFIGS = {
    "two producers": TopicRunConfig(producers=2, messages=3, cursors=1, disconnects=2, creation_failures=2),
    "batches, partitioned, age": TopicRunConfig(
        producers=1,
        messages=4,
        batch_size=2,
        partitioned=True,
        maximum_rollover=2,
        minimum_rollover=1,
        ticks=2,
        cursors=2,
    ),
    "limits of 0": TopicRunConfig(producers=2, messages=2, max_entries_per_ledger=0, maximum_rollover=0, cursors=1),
    "no deduplication": TopicRunConfig(producers=1, messages=3, cursors=1, deduplication=False, disconnects=1),
    "a takeover": TopicRunConfig(producers=1, messages=3, cursors=1, takeovers=2),
}


class TopicRefinementMachine(RuleBasedStateMachine):
    """A topic, its producers and subscriptions, and a crashing broker, checked against the spec at every event."""

    config = CONFIGS["two producers"]

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="topic-refinement-", dir=default_scratch())
        self.run = TopicRun(self.directory, self.config)
        self.check = TopicRefinement(self.run)
        self.spec = self.check.spec

    def teardown(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    @property
    def state(self) -> ManagedLedgerState:
        return self.check.state

    def enabled(self, action: str, *args: int) -> bool:
        return getattr(self.spec, action)(self.state, *args) is not None

    def producer_step(self, data: st.DataObject, action: str, step: Callable[[int], None]) -> None:
        """A producer the spec lets take ``action`` takes ``step``."""
        choices = [p for p in self.spec.producers if self.enabled(action, p)]
        if choices:
            p = data.draw(st.sampled_from(choices), label="producer")
            step(p)
            note(f"{step.__name__}({p})")

    @rule(data=st.data())
    def producer_sends(self, data: st.DataObject) -> None:
        self.producer_step(data, "ProducerSends", self.run.send)

    @rule(data=st.data())
    def producer_resends(self, data: st.DataObject) -> None:
        self.producer_step(data, "ProducerResends", self.run.resend)

    @rule(data=st.data())
    def connection_drops(self, data: st.DataObject) -> None:
        self.producer_step(data, "ConnectionDrops", self.run.drop_connection)

    @rule(data=st.data())
    def broker_receives(self, data: st.DataObject) -> None:
        self.producer_step(data, "BrokerReceives", self.run.receive)

    @precondition(lambda self: self.enabled("BookKeeperCompletesAdd"))
    @rule(crash=st.sampled_from([None, None, "add-write", "add-ack"]))
    def complete_add(self, crash: str | None) -> None:
        self.run.crash_at = crash if self.state.crashes < self.spec.MaxCrashes else None
        crashed = self.run.complete_add()
        note(f"complete_add{f': crashed at {crash}' if crashed else ''}")

    @precondition(lambda self: self.enabled("LedgerRollsOver"))
    @rule()
    def roll_over(self) -> None:
        assert self.run.roll_over()
        note("roll_over")

    @precondition(lambda self: self.enabled("LedgerCreationFails"))
    @rule()
    def fail_creation(self) -> None:
        assert self.run.fail_creation()
        note("fail_creation")

    @precondition(lambda self: self.enabled("ClockTicks"))
    @rule()
    def tick(self) -> None:
        self.run.tick()
        note("tick")

    @precondition(lambda self: self.run.up)
    @rule()
    def crash(self) -> None:
        self.run.crash()
        note("crash")

    @precondition(lambda self: self.enabled("TopicMovesToAnotherBroker", 0))
    @rule()
    def take_over(self) -> None:
        self.run.take_over()
        note("take_over")

    @precondition(lambda self: self.run.old_broker is not None)
    @rule()
    def old_broker_rolls_over(self) -> None:
        note(f"old_broker_rolls_over: written {self.run.old_broker_rolls_over()}")

    @precondition(lambda self: not self.run.up)
    @rule()
    def restart(self) -> None:
        self.run.restart()
        note("restart")

    @rule(data=st.data())
    def consume(self, data: st.DataObject) -> None:
        choices = [c for c in self.spec.cursors if self.enabled("ConsumerAcks", c)]
        if choices:
            c = data.draw(st.sampled_from(choices), label="subscription")
            assert self.run.consume(c)
            note(f"consume({c})")

    @rule(data=st.data())
    def persist(self, data: st.DataObject) -> None:
        """Also a subscription with nothing to persist: the engine must then persist nothing either."""
        if self.run.up:
            c = data.draw(st.sampled_from(self.spec.cursors), label="subscription")
            note(f"persist({c}): {self.run.persist(c)}")

    @precondition(lambda self: self.run.up)
    @rule()
    def skip_consumed(self) -> None:
        note(f"skip_consumed: {self.run.skip_consumed()}")

    @precondition(lambda self: self.run.up)
    @rule()
    def trim(self) -> None:
        """Also when the spec would trim nothing: the engine must then trim nothing either."""
        note(f"trim: {self.run.trim()}")


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_reference_topic_refines_the_managed_ledger_spec(name: str) -> None:
    machine = type(f"TopicRefinement_{name.replace(' ', '_')}", (TopicRefinementMachine,), {"config": CONFIGS[name]})
    run_state_machine_as_test(machine, settings=_settings(40))


def _trim_past_the_cursor(run: TopicRun) -> None:
    for _ in range(2):
        run.send(1)
        run.receive(1)
        run.complete_add()
    run.roll_over()
    run.trim()


def _skip_a_ledger_half_consumed(run: TopicRun) -> None:
    for _ in range(2):
        run.send(1)
        run.receive(1)
        run.complete_add()
    run.roll_over()
    run.consume(1)  # the first of the ledger's two entries
    run.skip_consumed()


def _resend_after_a_crash(run: TopicRun) -> None:
    run.send(1)
    run.receive(1)
    run.crash_at = "add-ack"
    run.complete_add()
    run.restart()
    run.resend(1)
    run.receive(1)


def _resend_while_the_add_waits(run: TopicRun) -> None:
    run.send(1)
    run.receive(1)
    run.drop_connection(1)
    run.resend(1)
    run.receive(1)


def _send_while_the_ledger_closes(run: TopicRun) -> None:
    for _ in range(3):  # the second fills the ledger (MaxEntriesPerLedger=2): the third comes while it closes
        run.send(1)
        run.receive(1)


def _fail_the_next_ledger(run: TopicRun) -> None:
    _send_while_the_ledger_closes(run)
    run.complete_add()
    run.complete_add()
    run.fail_creation()


def _reopen_after_an_add(run: TopicRun) -> None:
    run.send(1)
    run.receive(1)
    run.complete_add()
    run.crash()
    run.restart()


def _old_broker_rolls_over_after_a_takeover(run: TopicRun) -> None:
    run.send(1)
    run.receive(1)
    run.complete_add()
    run.take_over()
    run.restart()  # the new owner's open: it writes the ledger list
    run.old_broker_rolls_over()


#: Each seeded bug of the managed-ledger spec that the engine has: its configuration, a road to it, and the step at
#: which it leaves the spec.
BUGS: dict[str, tuple[dict[str, object], Callable[[TopicRun], None], str]] = {
    "trim_deletes_needed_ledger": (
        {"mutant": "trim_deletes_needed_ledger"},
        _trim_past_the_cursor,
        "TrimConsumedLedgers",
    ),
    # The managed ledger holds the subscription past the ledger's second entry, which it has not consumed.
    "skip_unconsumed_ledger": (
        {"mutant": "skip_unconsumed_ledger"},
        _skip_a_ledger_half_consumed,
        "CursorsSkipConsumedLedgers",
    ),
    # The reopened topic's deduplication state is not the spec's: caught before any batch comes again.
    "dedup_forgets_on_reopen": ({"topic_mutant": "forget_dedup_on_open"}, _resend_after_a_crash, "ManagedLedgerOpens"),
    # The batch sent again while its add waits is answered as a duplicate: the spec's broker answers Unknown.
    "unknown_answered_as_duplicate": (
        {"topic_mutant": "unknown_answered_as_duplicate", "disconnects": 1},
        _resend_while_the_add_waits,
        "BrokerReceives",
    ),
    # The reopened managed ledger's lastConfirmedEntry is the new ledger's (l, -1), not the entry written before.
    "reopen_confirms_new_ledger": (
        {"mutant": "reopen_confirms_new_ledger"},
        _reopen_after_an_add,
        "ManagedLedgerOpens",
    ),
    # The old broker's list write succeeds over the new owner's: the spec's is refused (BadVersionException).
    "blind_ledger_list_write": (
        {"mutant": "blind_ledger_list_write", "takeovers": 1},
        _old_broker_rolls_over_after_a_takeover,
        "OldBrokerRollsOver",
    ),
    # The batch that comes while the ledger closes is sent to it: the spec's broker queues it for the next.
    "closing_ledger_takes_adds": (
        {"topic_mutant": "closing_ledger_takes_adds"},
        _send_while_the_ledger_closes,
        "BrokerReceives",
    ),
    # The batch queued for the ledger whose creation fails is answered: the spec's broker fails it. A second
    # producer fills the ledger while adds wait more often, so that the random machine finds it too.
    "failed_creation_acks_queued": (
        {"topic_mutant": "failed_creation_acks_queued", "creation_failures": 1, "producers": 2},
        _fail_the_next_ledger,
        "LedgerCreationFails",
    ),
}


def _bug_config(bug: dict[str, object], *, seeded: bool = True) -> TopicRunConfig:
    """A seeded bug's run: one producer of three batches, one subscription, and the bug's own settings; with
    ``seeded`` false, the same run without the bug."""
    settings = {"producers": 1, "messages": 3, "cursors": 1, **bug}
    if not seeded:
        settings = {k: v for k, v in settings.items() if k not in ("mutant", "topic_mutant")}
    return TopicRunConfig(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(BUGS))
def test_each_seeded_bug_leaves_the_spec_at_its_own_step(name: str, tmp_path: Path) -> None:
    bug, road, event = BUGS[name]
    correct = TopicRun(str(tmp_path / "correct"), _bug_config(bug, seeded=False))
    TopicRefinement(correct)
    road(correct)
    run = TopicRun(str(tmp_path / "bug"), _bug_config(bug))
    TopicRefinement(run)
    with pytest.raises(RefinementError, match=rf"{event}\("):
        road(run)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUGS))
def test_the_machine_finds_each_seeded_bug(name: str) -> None:
    machine = type("TopicRefinement_bug", (TopicRefinementMachine,), {"config": _bug_config(BUGS[name][0])})
    with pytest.raises((RefinementError, ExceptionGroup)) as failure:
        run_state_machine_as_test(machine, settings=_settings(300))
    group = failure.value
    errors = group.exceptions if isinstance(group, ExceptionGroup) else (group,)
    assert all(isinstance(e, RefinementError) for e in errors), errors
