"""The ledger spec on TLC and on the Python explorer, beyond the models every spec is checked on
(tests/test_parity.py): liveness under fairness, symmetry, and the larger models."""

from __future__ import annotations

import json

import pytest
from ledgerspec.spec import catalog
from ledgerspec.spec.ledger.ledger_models import IN_FLIGHT_CONSTANTS
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.model_checking.model_check import ModelCheck, compare, run_python, run_tlc

pytestmark = pytest.mark.tlc


@pytest.mark.parametrize("bug", ["recovery_read_no_fence", "lac_before_qa", "missing_after_qa_no_such"])
def test_a_lost_entry_is_shown_in_a_closed_ledger(bug: str) -> None:
    """TLC's counterexample of a lost acknowledged entry ends where the loss is visible: the ledger closed."""
    (seeded,) = [b for b in catalog.find("ledger").models.seeded_bugs if b.bug == bug]
    (violation,) = run_tlc(ModelCheck("ledger", {**seeded.constants, "Bug": bug})).violations
    assert violation.invariant == "NoAckedEntryLost"
    assert violation.trace[-1]["state"]["meta_status"] == "CLOSED"


def test_tlc_checks_recovery_closes_under_fairness() -> None:
    result = run_tlc(ModelCheck("ledger", {"MaxEntries": 1}, liveness=True))
    assert result.violations == ()
    assert result.distinct_states == 1898


def test_recovery_closes_under_fairness_with_replies_in_flight() -> None:
    """The clients take the replies sent (weak fairness of ClientReceivesReply), and a reply on its way keeps its
    request awaited: no recovery waits forever, nor gives up while its answers are still coming."""
    result = run_tlc(ModelCheck("ledger", IN_FLIGHT_CONSTANTS, liveness=True))
    assert result.violations == ()
    assert result.distinct_states == 15_556


def test_liveness_fails_without_enough_live_bookies() -> None:
    # Two crashes of three bookies: fencing can never cover a write set.
    result = run_tlc(ModelCheck("ledger", {"MaxEntries": 1, "MaxCrashes": 2}, liveness=True))
    assert [v.kind for v in result.violations] == ["liveness"]
    assert result.violations[0].invariant == "RecoveryCloses"


def test_symmetry_gives_the_same_orbits_on_both_engines() -> None:
    """The explorer fingerprints the orbit of each state under renamings of the recovering clients; TLC takes
    the TLA+ RecovererOrbit as its VIEW: the same number of orbits, steps and levels."""
    constants = {"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1, "NumRecoverers": 2}
    model = ModelCheck("ledger", constants, symmetry=True)
    python, tlc = run_python(model), run_tlc(model)
    assert (python.distinct_states, python.states_generated, python.depth) == (18_909, 69_011, 24)
    assert (tlc.distinct_states, tlc.states_generated, tlc.depth) == (18_909, 69_011, 24)
    assert run_tlc(ModelCheck("ledger", constants)).distinct_states == 37_190  # without the view


def test_symmetry_keeps_a_seeded_bug_and_its_shortest_counterexample() -> None:
    constants = {"NumBookies": 2, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 1, "NumRecoverers": 2}
    constants["Bug"] = "missing_after_qa_no_such"
    model = ModelCheck("ledger", constants, symmetry=True)
    python, tlc = run_python(model), run_tlc(model)
    assert [v.invariant for v in python.violations] == [v.invariant for v in tlc.violations] == ["NoAckedEntryLost"]
    assert len(python.violations[0].trace) == len(tlc.violations[0].trace)


def test_a_spec_without_symmetry_refuses_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="spec bookie declares no symmetry"):
        ModelCheck("bookie", symmetry=True)
    assert main(["model-check", "bookie", "--symmetry", "--engine", "python"]) == 2
    assert "--symmetry: spec bookie declares no symmetry" in capsys.readouterr().err


def test_symmetry_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    constants = ["NumBookies=2", "E=2", "Qw=2", "Qa=1", "MaxEntries=1", "NumRecoverers=2"]
    argv = ["model-check", "ledger", "--symmetry", "--json", *(f"--const={c}" for c in constants)]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["python"]["distinct_states"] == data["tlc"]["distinct_states"] == 18_909
    assert data["agree"] is True and data["states_compared"] is False


@pytest.mark.slow
def test_larger_model_same_states() -> None:
    model = ModelCheck("ledger", {"E": 3, "Qw": 3, "Qa": 2, "MaxEntries": 2})
    python = run_python(model, keep_states=True)
    tlc = run_tlc(model, keep_states=True, workers=2)
    assert compare(python, tlc).agree


# The seeds' own striping: a writer and one recoverer on E=4, Qw=3, Qa=2 over four bookies, three entries.
SEEDS_MODEL = {"NumBookies": 4, "E": 4, "Qw": 3, "Qa": 2, "MaxEntries": 3, "Throttle": 1}
SEEDS_DISTINCT_STATES = 16_870_030  # both engines; TLC generates 63,065,046 states, depth 29


@pytest.mark.slow
def test_the_seeds_configuration_gives_the_same_count_and_verdict_on_both_engines() -> None:
    """Too large to keep whole states: the engines agree on the count and the verdict (no violation)."""
    model = ModelCheck("ledger", SEEDS_MODEL)
    python = run_python(model, workers=2)
    tlc = run_tlc(model, workers=2, coverage=False)  # counting actions would make TLC's half hour longer still
    assert python.violations == tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == SEEDS_DISTINCT_STATES
    assert python.states_generated == tlc.states_generated and python.depth == tlc.depth
    assert compare(python, tlc).agree


# The smallest model in which a recovery replaces a bookie for a write-back already complete: two entries to
# write back, Qw > Qa and a spare bookie; entry 0's write-back to one bookie lost (RecovererGaveUpOn).
RECOVERY_DELAYED_FAILURE_MODEL = {"NumBookies": 3, "E": 2, "Qw": 2, "Qa": 1, "MaxEntries": 2, "MaxLoss": 1}
RECOVERY_DELAYED_FAILURE_STATES = 1_559_478  # both engines, 4,935,838 generated, depth 28 (1,481,150 without)


@pytest.mark.slow
def test_a_recovery_replacing_a_bookie_for_a_complete_write_back_gives_the_same_count_on_both_engines() -> None:
    """Too large to keep whole states (the explorer's in about 3 min 20 s on two workers, TLC's in 3 min 35 s)."""
    model = ModelCheck("ledger", RECOVERY_DELAYED_FAILURE_MODEL)
    python = run_python(model, workers=2)
    tlc = run_tlc(model, workers=2, coverage=False)
    assert python.violations == tlc.violations == ()
    assert python.distinct_states == tlc.distinct_states == RECOVERY_DELAYED_FAILURE_STATES
    assert python.states_generated == tlc.states_generated and python.depth == tlc.depth
