"""The crash checks: every workload crashed at every boundary, the correct bookie clean, each mutant caught.

Each mutant must be caught by the invariant that the spec's own seeded bug of
the same name breaks (the explorer finds it here, as tests/test_bookie_spec.py
pins it), and it is the first invariant the sweep reports.
"""

from __future__ import annotations

import json

import pytest
from ledgerspec.reference.bookie import MUTANTS
from ledgerspec.reference.bookie.workloads import WORKLOAD_CONFIG, WORKLOADS
from ledgerspec.spec.bookie.bookie import BookieSpec
from ledgerspec.tools.cli.main import main
from ledgerspec.tools.harness.crash_check import check_workload, crash_check
from ledgerspec.tools.model_checking.explorer.explorer import explore

# workload -> (boundaries, crash points, of which second crashes, restarts): the same on every run.
PINNED = {
    "basic": (60, 5122, 4978, 729),
    "fencing": (70, 5485, 5318, 826),
    "rollover-and-deletion": (91, 8095, 7872, 1241),
    "force-write-parts": (62, 5387, 5236, 866),
    "interleaved-flushers": (65, 5388, 5232, 805),
    "restart": (118, 8630, 8362, 1065),
}


def test_every_workload_is_pinned_and_described() -> None:
    assert set(PINNED) == set(WORKLOADS)
    assert all(len(w.description) > 40 for w in WORKLOADS.values())


@pytest.mark.parametrize("workload", list(WORKLOADS))
def test_the_correct_bookie_survives_every_crash_point(workload: str) -> None:
    result = check_workload(WORKLOADS[workload], WORKLOAD_CONFIG)
    assert [v.explain() for v in result.violations] == []
    assert (result.boundaries, result.crash_points, result.second_crash_points, result.restarts) == PINNED[workload]


# Each mutant, and the workload that shows it.
MUTANT_WORKLOADS = {
    "ack_before_fsync": "basic",
    "mark_before_flush": "basic",
    "fence_not_journaled": "fencing",
    "mark_not_advanced_in_replay": "basic",
    "delete_journal_at_mark": "rollover-and-deletion",
    "mark_moves_backwards": "interleaved-flushers",
}


def test_every_mutant_has_a_workload() -> None:
    assert set(MUTANT_WORKLOADS) == set(MUTANTS)


@pytest.mark.parametrize("mutant", list(MUTANT_WORKLOADS))
def test_each_mutant_is_caught_by_the_invariant_of_the_spec_bug_of_its_name(mutant: str) -> None:
    spec_verdict = explore(BookieSpec(Bug=mutant), check_deadlock=False).violations[0].name
    result = crash_check([MUTANT_WORKLOADS[mutant]], mutant, second_crashes=False)
    if spec_verdict in {p.name for p in BookieSpec().action_properties}:  # a step's rule: broken by the step
        properties = [v.name for v in result.violations if v.kind == "property"]
        assert spec_verdict in properties, [v.explain() for v in result.violations]
        return
    invariants = [v.name for v in result.violations if v.kind == "invariant"]
    assert invariants and invariants[0] == spec_verdict, [v.explain() for v in result.violations]


def test_a_refinement_violation_names_the_step_and_the_variables_that_differ() -> None:
    result = crash_check(["force-write-parts"], "ack_before_fsync", second_crashes=False)
    first = result.violations[0]
    assert (first.kind, first.name, first.step, first.crash_point) == ("refinement", "Refinement", "journal_flush", "")
    assert first.differences == (("acked", "{}", "{<<1, 0>>}"),)
    assert "after journal_flush: Refinement: the abstract state is not the state before the step" in first.explain()


def test_a_crash_violation_names_the_crash_point() -> None:
    result = crash_check(["basic"], "mark_before_flush", second_crashes=False)
    crash = next(v for v in result.violations if v.kind == "crash")
    assert crash.crash_point.startswith("crash at #") and " in checkpoint, " in crash.crash_point
    assert [d[0] for d in crash.differences] == ["last_marks"]


# -- the command line -------------------------------------------------------------------
def test_command_line_reports_crash_points_and_no_violation(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["crash-check", "bookie", "--workload", "basic", "--no-second-crash", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["violations"] == [] and data["crash_points"] == PINNED["basic"][1] - PINNED["basic"][2]
    assert [w["workload"] for w in data["workloads"]] == ["basic"]


def test_command_line_reports_each_violation(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["crash-check", "bookie", "--workload", "fencing", "--mutant", "fence_not_journaled", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 1 and data["mutant"] == "fence_not_journaled"
    assert {"FencedLedgerStaysFenced", "FenceKept"} <= {v["invariant"] for v in data["violations"]}
    assert all({"crash_point", "invariant", "message", "step", "workload"} <= set(v) for v in data["violations"])


def test_command_line_prints_a_table_and_explains_violations(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["crash-check", "bookie", "--workload", "basic", "--mutant", "mark_not_advanced_in_replay"])
    out = capsys.readouterr().out
    assert code == 1 and "crash points" in out and "MarkCoversReplayedJournal" in out
    assert "crash point: crash at #" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["crash-check", "ledger"], "unknown target 'ledger'; targets: bookie"),
        (["crash-check", "bookie", "--workload", "nope"], "unknown workload 'nope'; workloads: basic, fencing"),
        (["crash-check", "bookie", "--mutant", "ack_late"], "unknown mutant 'ack_late'; mutants: ack_before_fsync"),
    ],
)
def test_command_line_refuses_unknown_names(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_command_line_lists_workloads_and_mutants(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crash-check", "bookie", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in [*WORKLOADS, *MUTANTS])
