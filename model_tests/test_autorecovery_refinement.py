"""The reference auditor and replication workers refine the autorecovery spec: random runs with bookies stopping,
coming back and losing their disks, and workers crashing midway; of a closed ledger, and of an open one whose writer
may close it, whose passes defer it to a grace period and whose grace periods end in the recovery that closes it.

Each rule takes one step of an :class:`~ledgerspec.reference.autorecovery.AutorecoveryRun`;
:class:`~ledgerspec.reference.autorecovery.AutorecoveryRefinement` checks the events it logs against the spec,
on the abstraction of the run's real state: the ledger's znode and the mark's protobuf text decoded, the lock's
session, the entries the bookies store. Each engine mutant leaves the spec on the shortest road to it, at the
step it breaks; the random machine finds each on its own too (the longer profile, ``--run-slow``).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test
from ledgerspec.reference.autorecovery import AutorecoveryRefinement, AutorecoveryRun, RunConfig
from ledgerspec.reference.autorecovery.run import MUTANTS
from ledgerspec.reference.bookie import default_scratch
from ledgerspec.reference.refinement import RefinementError

STEPS = 40
SLOW_STEPS = 80


class AutorecoveryRefinementMachine(RuleBasedStateMachine):
    """A closed ledger on four bookies, an auditor and workers, checked against the spec at every step."""

    config = RunConfig(workers=2)

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="autorecovery-refinement-", dir=default_scratch())
        self.run = AutorecoveryRun(self.directory, self.config)
        self.check = AutorecoveryRefinement(self.run)

    def teardown(self) -> None:
        self.run.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _did(self, what: str, taken: bool) -> None:
        note(f"{what}: {'taken' if taken else 'refused'}")

    @precondition(lambda self: bool(self.run.can_stop()))
    @rule(data=st.data())
    def bookie_stops(self, data: st.DataObject) -> None:
        bookie = data.draw(st.sampled_from(self.run.can_stop()), label="bookie")
        self._did(f"{bookie} stops", self.run.bookie_stops(bookie))

    @precondition(lambda self: bool(self.run.can_come_back()))
    @rule(data=st.data())
    def bookie_comes_back(self, data: st.DataObject) -> None:
        bookie = data.draw(st.sampled_from(self.run.can_come_back()), label="bookie")
        self._did(f"{bookie} comes back", self.run.bookie_comes_back(bookie))

    @precondition(lambda self: bool(self.run.can_lose_disk()))
    @rule(data=st.data())
    def bookie_loses_disk(self, data: st.DataObject) -> None:
        bookie = data.draw(st.sampled_from(self.run.can_lose_disk()), label="bookie")
        self._did(f"{bookie} loses its disk", self.run.bookie_loses_disk(bookie))

    @precondition(lambda self: self.run.can_elect())
    @rule()
    def elect_auditor(self) -> None:
        self._did("auditor elected", self.run.elect_auditor())

    @precondition(lambda self: self.run.auditor_has_news())
    @rule()
    def auditor_checks(self) -> None:
        self._did("auditor checks", self.run.auditor_checks())

    @precondition(lambda self: self.run.auditor is not None)
    @rule()
    def auditor_checks_all_ledgers(self) -> None:
        self._did("auditor checks all ledgers", self.run.auditor_checks_all_ledgers())

    @precondition(lambda self: self.run.can_writer_close())
    @rule()
    def writer_closes_ledger(self) -> None:
        self._did("writer closes the ledger", self.run.writer_closes_ledger())

    def busy_workers(self) -> list[int]:
        return [w for w in (1, 2) if self.run.enabled_worker_steps(w)]

    @precondition(lambda self: bool(self.busy_workers()))
    @rule(data=st.data())
    def worker_step(self, data: st.DataObject) -> None:
        w = data.draw(st.sampled_from(self.busy_workers()), label="worker")
        name = data.draw(st.sampled_from(self.run.enabled_worker_steps(w)), label="step")
        self._did(f"worker {w}: {name}", self.run.worker_step(w, name))

    @precondition(lambda self: bool(self.run.can_crash()))
    @rule(data=st.data())
    def worker_crashes(self, data: st.DataObject) -> None:
        w = data.draw(st.sampled_from(self.run.can_crash()), label="worker")
        self._did(f"worker {w} crashes", self.run.worker_crashes(w))

    def nothing_else(self) -> bool:
        run = self.run
        return not (
            run.can_stop()
            or run.can_come_back()
            or run.can_elect()
            or run.auditor_has_news()
            or run.can_writer_close()
            or self.busy_workers()
            or run.can_crash()
        )

    @precondition(nothing_else)
    @rule()
    def quiet(self) -> None:
        """Nothing else can happen: an auditor check that finds nothing new is not a step of the spec."""
        self._did("auditor checks, to no effect", self.run.auditor_checks())


def _settings(examples: int, steps: int) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def test_the_reference_autorecovery_refines_the_spec() -> None:
    run_state_machine_as_test(AutorecoveryRefinementMachine, settings=_settings(150, STEPS))


def test_a_ledger_of_two_segments_refines_the_spec() -> None:
    """The ledger had an ensemble change at entry 1 (bookie 4 took bookie 1's place): a lost bookie of both
    ensembles leaves two fragments, each copied to a bookie outside its own segment's ensemble."""
    machine = type(
        "TwoSegmentRefinement",
        (AutorecoveryRefinementMachine,),
        {"config": RunConfig(workers=2, segments=2, entries=4)},
    )
    run_state_machine_as_test(machine, settings=_settings(80, STEPS))


# Open ledgers: the default one (Qw=Qa=2, two stops, a disk lost once it is closed), whose recovery replaces a
# bookie that is down, and one of two segments on Qw=3, Qa=2, whose recovery closes with its ensembles as they are.
OPEN_CONFIGS = {
    "default": RunConfig(workers=2, open_ledger=True),
    "two-segments-qw3": RunConfig(workers=2, open_ledger=True, segments=2, write_quorum=3, ack_quorum=2),
}


@pytest.mark.parametrize("config", sorted(OPEN_CONFIGS))
def test_an_open_ledger_refines_the_spec(config: str) -> None:
    machine = type("OpenLedgerRefinement", (AutorecoveryRefinementMachine,), {"config": OPEN_CONFIGS[config]})
    run_state_machine_as_test(machine, settings=_settings(100, STEPS))


@pytest.mark.slow
def test_the_reference_autorecovery_refines_the_spec_in_longer_runs() -> None:
    run_state_machine_as_test(AutorecoveryRefinementMachine, settings=_settings(600, SLOW_STEPS))


def _lose_bookie_one(run: AutorecoveryRun) -> None:
    run.bookie_stops("bookie-1")
    run.elect_auditor()
    run.auditor_checks()


def _start_a_copy(run: AutorecoveryRun) -> None:
    _lose_bookie_one(run)
    run.worker_step(1, "WorkerTakesLock")
    run.worker_step(1, "WorkerStartsFragment")


def _fail_a_pass(run: AutorecoveryRun) -> None:
    _lose_bookie_one(run)
    run.worker_step(1, "WorkerTakesLock")
    run.worker_step(1, "WorkerReleasesLockAfterFailure")


def _copy_an_open_fragment(run: AutorecoveryRun) -> None:
    # bookie 3 holds entry 1 alone, past the LAC (0): its fragment of the open ledger is open, and lost
    run.bookie_stops("bookie-3")
    run.elect_auditor()
    run.auditor_checks()
    run.worker_step(1, "WorkerTakesLock")
    run.worker_step(1, "WorkerStartsFragment")


# Each mutant on the shortest road to it, and the step at which the check stops it.
MUTANT_ROADS: dict[str, tuple[Callable[[AutorecoveryRun], object], str]] = {
    "marks_nothing": (_lose_bookie_one, "auditor_checks"),
    "metadata_before_copy": (_start_a_copy, "WorkerStartsFragment"),
    "failed_pass_unmarks": (_fail_a_pass, "WorkerReleasesLockAfterFailure"),
    "copies_open_fragment": (_copy_an_open_fragment, "WorkerStartsFragment"),
}

# The ledger each mutant shows on: closed, but for the copy of an open fragment.
MUTANT_CONFIGS = {"copies_open_fragment": RunConfig(open_ledger=True)}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_mutant_leaves_the_spec_at_its_own_step(mutant: str, tmp_path: Path) -> None:
    """Each seeded bug of the engine is a step the spec does not take; without it, the same steps refine."""
    road, step = MUTANT_ROADS[mutant]
    config = MUTANT_CONFIGS.get(mutant, RunConfig())
    correct = AutorecoveryRun(str(tmp_path / "correct"), config)
    AutorecoveryRefinement(correct)
    road(correct)
    run = AutorecoveryRun(str(tmp_path / "mutant"), attrs.evolve(config, mutant=mutant))
    AutorecoveryRefinement(run)
    with pytest.raises(RefinementError, match=step):
        road(run)


# The copy of an open fragment needs the worker to start it before the writer closes or the grace period ends, which
# the random machine draws only now and then (minutes, and not always within its examples); its road above and the
# seeded traces of tests/test_autorecovery_traces.py catch it every time.
@pytest.mark.slow
@pytest.mark.parametrize("mutant", sorted(set(MUTANTS) - set(MUTANT_CONFIGS)))
def test_the_machine_finds_each_mutant(mutant: str) -> None:
    """The random machine finds each seeded bug of a closed ledger on its own."""
    machine = type(
        f"AutorecoveryRefinement_{mutant}",
        (AutorecoveryRefinementMachine,),
        {"config": RunConfig(workers=2, mutant=mutant)},
    )
    with pytest.raises(RefinementError):
        run_state_machine_as_test(machine, settings=_settings(300, SLOW_STEPS))
