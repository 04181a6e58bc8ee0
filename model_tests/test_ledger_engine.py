"""The reference ledger engine refines the ledger spec: Hypothesis drives it, every step is checked.

The machine (``ledgerspec.reference.ledger.stateful``) adds entries, delivers
requests (keeping or losing the replies), loses requests, crashes and
restarts bookies, times out (ensemble changes, resends), starts recoveries
that race the writer, closes, and reads. After each engine step the
abstraction of the engine's state must be the spec's successor by the
action the step logged, or the same state; the spec's invariants must hold.

The bookies run on ``FaultyFileSystem(sync_to_disk=False)``: fsyncs are
modelled, not passed to the disk, so a crash keeps exactly what was fsynced
and the machine runs at memory speed.

The model's bounds are the spec's constants (``SimulationConfig``). The
default profile runs in well under a minute; ``--run-slow`` runs a longer
one on a larger model.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from ledgerspec.reference.ledger import MUTANTS, LedgerSimulation, SimulationConfig
from ledgerspec.reference.ledger.refinement import RefinementCheck, RefinementError
from ledgerspec.reference.ledger.stateful import machine_for

# Four bookies for an ensemble of three, so that an ensemble change has a bookie to take.
STRIPED = SimulationConfig(
    bookies=4, ensemble=3, write_quorum=2, ack_quorum=2, recoverers=2, max_entries=4, max_crashes=2, max_loss=2
)
# The seed's picture: E=4, Qw=3, Qa=2, with a fifth bookie to replace one.
WIDE = SimulationConfig(
    bookies=5, ensemble=4, write_quorum=3, ack_quorum=2, recoverers=1, max_entries=4, max_crashes=2, max_loss=2
)
# One bookie an entry and no recovering client: an add stays pending until its bookie acks, while the adds
# before it complete and move the LAC, so that a resend after an ensemble change often follows such a move.
PIPELINED = SimulationConfig(
    bookies=4, ensemble=2, write_quorum=1, ack_quorum=1, recoverers=0, max_entries=8, max_crashes=3, max_loss=3
)
LARGER = SimulationConfig(
    bookies=5, ensemble=3, write_quorum=3, ack_quorum=2, recoverers=2, max_entries=6, max_crashes=3, max_loss=3
)


def _settings(examples: int, steps: int, **kw: object) -> settings:
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        database=None,
        report_multiple_bugs=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("config", "examples"), [(STRIPED, 200), (WIDE, 80)], ids=["E3-Qw2-Qa2", "E4-Qw3-Qa2"])
def test_engine_refines_the_spec(config: SimulationConfig, examples: int) -> None:
    run_state_machine_as_test(machine_for(config), settings=_settings(examples, 50))


@pytest.mark.slow
def test_engine_refines_the_spec_longer() -> None:
    run_state_machine_as_test(machine_for(LARGER), settings=_settings(1500, 120))


# Two bookies an ensemble, one an entry, and a spare: a recovery's write-back to a bookie that is down has a
# replacement, and a read of an entry has no other bookie to decide it.
RECOVERY_FAULTS = SimulationConfig(
    bookies=3, ensemble=2, write_quorum=1, ack_quorum=1, recoverers=1, max_entries=2, max_crashes=2, max_loss=1
)


def test_the_engine_refines_the_recovery_ensemble_change_and_the_failed_recovery() -> None:
    """Seeded runs under the refinement check, until the engine has taken both steps (the same seeds give the same
    runs)."""
    taken: set[str] = set()
    wanted = {"RecovererChangesEnsemble", "RecovererGivesUp"}
    for seed in range(200):
        sim = LedgerSimulation(RECOVERY_FAULTS, seed=seed)
        try:
            RefinementCheck(sim).attach()
            sim.run(60)
            taken |= {event.action for event in sim.events} & wanted
        finally:
            sim.close()
        if taken == wanted:
            break
    assert taken == wanted


# Each client mutant, with a model where it shows: the refinement check must catch it.
# fence_qa_total needs Qa < Qw - Qa + 1 in some write set: E=3, Qw=2, Qa=1 (coverage asks for all three bookies).
MUTANT_MODELS = {
    "lac_before_qa": STRIPED,
    "complete_out_of_order": STRIPED,
    "fence_qa_total": SimulationConfig(bookies=3, ensemble=3, write_quorum=2, ack_quorum=1, max_entries=3, max_loss=1),
    "recovery_read_no_fence": STRIPED,
    "ensemble_change_local": STRIPED,
    "resend_with_current_lac": PIPELINED,
    "resend_reused_buffer": PIPELINED,
    "close_at_last_add_pushed": STRIPED,
    "explicit_lac_sends_lap": STRIPED,
    "recovery_change_ends_at_lac": RECOVERY_FAULTS,
    # fencing hears from all three bookies (Qw = E, Qa = 1); two then down leave a recovery read undecided
    "undecided_read_ends_ledger": SimulationConfig(
        bookies=3, ensemble=3, write_quorum=3, ack_quorum=1, recoverers=1, max_entries=2, max_crashes=2, max_loss=1
    ),
}


# Each mutant fails a seeded run within the first two seeds; the margin keeps a small change in a run's choices
# from turning a catch into a miss.
MUTANT_SEEDS = 20


def test_every_mutant_has_a_model() -> None:
    assert set(MUTANT_MODELS) == set(MUTANTS)


@pytest.mark.parametrize("mutant", sorted(MUTANT_MODELS))
def test_refinement_check_catches_the_mutant(mutant: str) -> None:
    """Seeded runs of the mutant's engine under the refinement check: one of the first seeds must fail it.

    The seeds make the runs the same on every machine and in every process. A derandomized Hypothesis search does
    not: the examples it draws depend on what the process ran before (the same search found this writer's resend
    mutant after 127 examples alone, after 246 behind two other mutants, and not within 300 in a full suite).
    """
    config = SimulationConfig(**{**_fields(MUTANT_MODELS[mutant]), "mutant": mutant})
    failures: list[RefinementError] = []
    for seed in range(MUTANT_SEEDS):
        sim = LedgerSimulation(config, seed=seed)
        try:
            RefinementCheck(sim).attach()
            sim.run(60)
        except RefinementError as failure:
            failures.append(failure)
            break
        finally:
            sim.close()
    assert failures, f"{MUTANT_SEEDS} seeded runs of {mutant} all refined the spec"
    # The check names the state where the engine left the spec, in the spec's words.
    assert "the spec" in str(failures[0]), str(failures[0])


def test_a_failure_reads_as_a_scenario() -> None:
    machine = machine_for(SimulationConfig(**{**_fields(STRIPED), "mutant": "lac_before_qa"}))
    with pytest.raises(RefinementError) as failure:
        run_state_machine_as_test(machine, settings=_settings(300, 20, phases=[Phase.generate]))
    scenario = "\n".join(getattr(failure.value, "__notes__", []))
    # Each rule prints as a call, with the engine step it took and the event it logged noted above it.
    assert "  add\n    -> writer: WriterAddsEntry(-1)\nentries_0 = state.add_entry()" in scenario
    assert "\n  deliver <add c0 bookie-" in scenario
    # Without shrinking, the run that fails is random; in each the engine's LAC runs ahead of the spec's.
    lac = re.search(r"writer_lac: the spec has (-?\d+), the engine (-?\d+)", str(failure.value))
    assert lac is not None and int(lac.group(2)) > int(lac.group(1)), str(failure.value)


def _fields(config: SimulationConfig) -> dict[str, object]:
    import attrs

    return attrs.asdict(config, recurse=False)
