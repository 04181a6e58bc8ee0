"""Coverage: the actions and guards a checker counts are those of the behaviour each trace followed.

In the full mode a trace's witness is the walk that wrote it, so the counts are checked against a recount
done here from the walks, guard by guard; in the client mode against what the hidden steps must have been.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from ledgerspec.conformance import TraceChecker, check_files, events_from_json
from ledgerspec.conformance.coverage import Coverage, coverage_summary
from ledgerspec.conformance.generate import Walk, random_walk, trace_events, write_ndjson
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_trace import GUARDS, TRACE
from ledgerspec.spec.tracing import INIT, Guard, TraceMapping
from ledgerspec.tools.cli.main import main

MODEL = {"MaxEntries": 3, "MaxLoss": 1, "MaxCrashes": 1}
LONGER = {"WriterClosesLedger": 0.05, "RecovererStartsRecovery": 0.05}
INVARIANTS = {i.name for i in LedgerSpec.invariants}


def _walks(spec: LedgerSpec, seed: int, count: int) -> list[Walk]:
    rng = random.Random(seed)
    return [random_walk(spec, rng, 40, weights=LONGER) for _ in range(count)]


def _recount(spec: LedgerSpec, walks: list[Walk]) -> Coverage:
    """What the coverage of full traces of these walks must be, counted from the walks themselves."""
    expected = Coverage(traces=len(walks))
    for walk in walks:
        expected.states += len(walk)
        expected.steps.update(step.action for step in walk if step.action != INIT)
        for prop, guards in GUARDS.items():
            # An invariant's guards are counted on every state, an action property's on every state a step leaves.
            states = walk if prop in INVARIANTS else walk[:-1]
            for g in guards:
                expected.guards[(prop, g.name)] += sum(g.fn(spec, step.state) for step in states)
    return expected


@pytest.mark.parametrize("cache_limit", [100_000, 50], ids=["caches kept", "caches emptied often"])
def test_full_traces_cover_exactly_the_steps_and_guards_of_their_walks(cache_limit: int) -> None:
    spec = LedgerSpec(**MODEL)
    walks = _walks(spec, 1, 80)
    checker = TraceChecker(spec, "full", cache_limit=cache_limit)
    for i, walk in enumerate(walks):
        assert checker.check(events_from_json(trace_events(spec, walk, "full", f"t{i}"))).status == "conforms"
    covered = checker.coverage()
    expected = _recount(spec, walks)
    assert covered == expected
    assert covered.hidden_steps == Counter()
    # The walks close ledgers, so the guards about closed ledgers are exercised, and some never are.
    assert covered.guards[("NoAckedEntryLost", "ledger closed")] > 0
    assert covered.guards[("NoNewAcksToFencedWriter", "fencing completed")] > 0


def test_coverage_adds_up_across_calls_and_runs(tmp_path: Path) -> None:
    spec = LedgerSpec(**MODEL)
    walks = _walks(spec, 2, 30)
    write_ndjson(tmp_path / "a.ndjson", [trace_events(spec, w, "full", f"t{i}") for i, w in enumerate(walks)])
    checker = TraceChecker(spec, "full")
    first = check_files([tmp_path / "a.ndjson"], checker)
    second = check_files([tmp_path / "a.ndjson"], checker)
    assert first.coverage == second.coverage == _recount(spec, walks)  # each run counts its own traces
    total = first.coverage.copy()
    total.add(second.coverage)
    assert checker.coverage() == total
    assert Coverage.from_json(json.loads(json.dumps(total.to_json()))) == total


def test_hidden_steps_are_counted_apart() -> None:
    """The writer's log shows its add and its ensemble change; the shortest behaviour between them loses
    bookie 1's ack: one hidden step."""
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    log = [
        {"type": "WriterAddsEntry"},
        {"type": "WriterChangesEnsemble", "params": {"b": 1, "nb": 4}, "observed": {"last_ensemble": [4, 2, 3]}},
    ]
    events = events_from_json({"v": 1, "trace": "c", "process": "writer", "seq": n, **e} for n, e in enumerate(log, 1))
    checker = TraceChecker(spec, "client")
    assert checker.check(events).status == "conforms"
    covered = checker.coverage()
    assert covered.steps == Counter({"WriterAddsEntry": 1, "WriterChangesEnsemble": 1})
    assert sum(covered.hidden_steps.values()) == 1
    assert set(covered.hidden_steps) <= {"BookieReceivesAdd", "NetworkLosesMessage"}
    assert covered.states == 4  # the initial state and three steps


def test_a_violating_trace_covers_its_steps_up_to_the_failing_event() -> None:
    buggy = LedgerSpec(**MODEL, Bug="lac_before_qa")
    walks = (random_walk(buggy, random.Random(seed), 30) for seed in range(50))
    for walk in walks:
        events = events_from_json(trace_events(buggy, walk, "full", "t"))
        checker = TraceChecker(LedgerSpec(**MODEL), "full")
        verdict = checker.check(events)
        if verdict.status == "violates":
            break
    else:
        pytest.fail("no walk of the buggy spec violates the spec")
    assert verdict.failure is not None
    index = verdict.failure.event_index  # event 0 is Init; events 1 .. index - 1 were matched
    covered = checker.coverage()
    assert (covered.traces, covered.states) == (1, index)
    assert covered.steps == Counter(step.action for step in walk[1:index])


def test_a_checker_without_coverage_says_so(tmp_path: Path) -> None:
    spec = LedgerSpec(**MODEL)
    write_ndjson(tmp_path / "a.ndjson", [trace_events(spec, w, "full", "t") for w in _walks(spec, 3, 1)])
    checker = TraceChecker(spec, "full", coverage=False)
    assert check_files([tmp_path / "a.ndjson"], checker).coverage is None
    with pytest.raises(ValueError, match="does not collect coverage"):
        checker.coverage()


def test_the_summary_lists_every_action_and_property_zeros_included() -> None:
    spec = LedgerSpec(**MODEL)
    covered = Coverage(traces=1, states=3, steps=Counter({"WriterAddsEntry": 2}))
    covered.guards[("NoAckedEntryLost", "ledger closed")] = 1
    summary = coverage_summary(covered, spec, TRACE)
    assert list(summary["actions"]) == [a.name for a in spec.actions]
    assert summary["actions"]["WriterAddsEntry"] == {"steps": 2, "hidden_steps": 0}
    assert summary["actions"]["BookieCrashes"] == {"steps": 0, "hidden_steps": 0}
    assert summary["properties"]["NoAckedEntryLost"] == {
        "kind": "invariant",
        "checked": 3,
        "guards": {"ledger closed": 1, "closed after an ack": 0},
    }
    assert summary["properties"]["TypeOK"]["guards"] == {}
    assert summary["properties"]["ClosedLedgerNeverChanges"] == {
        "kind": "action property",
        "checked": 2,
        "guards": {"step from a closed ledger": 0},
    }


def test_check_json_has_coverage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = LedgerSpec(**MODEL)
    walks = _walks(spec, 4, 10)
    write_ndjson(tmp_path / "a.ndjson", [trace_events(spec, w, "full", f"t{i}") for i, w in enumerate(walks)])
    constants = [f"--const={k}={v}" for k, v in MODEL.items()]
    assert main(["check", str(tmp_path / "a.ndjson"), "--json", *constants]) == 0
    coverage = json.loads(capsys.readouterr().out)["coverage"]
    expected = _recount(spec, walks)
    assert coverage["traces"] == 10 and coverage["states"] == expected.states
    assert {a: c["steps"] for a, c in coverage["actions"].items() if c["steps"]} == dict(expected.steps)
    guards = coverage["properties"]["NoAckedEntryLost"]["guards"]
    assert guards["ledger closed"] == expected.guards[("NoAckedEntryLost", "ledger closed")]


@pytest.mark.parametrize(
    ("guards", "message"),
    [
        ({"NoSuchInvariant": (Guard("g", lambda spec, s: True),)}, "not an invariant or action property"),
        ({"TypeOK": (Guard("g", lambda spec, s: True), Guard("g", lambda spec, s: False))}, "the same name twice"),
    ],
)
def test_bad_guard_declarations_are_refused(guards: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TraceMapping(LedgerSpec, TRACE.modes.values(), projections=TRACE.projections.values(), guards=guards)


def test_check_tells_what_was_never_exercised(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = LedgerSpec(**MODEL)
    walks = _walks(spec, 4, 1)  # one walk: it closes the ledger before any ack
    write_ndjson(tmp_path / "a.ndjson", [trace_events(spec, w, "full", f"t{i}") for i, w in enumerate(walks)])
    assert main(["check", str(tmp_path / "a.ndjson"), *[f"--const={k}={v}" for k, v in MODEL.items()]]) == 0
    out = " ".join(capsys.readouterr().out.split())
    summary = coverage_summary(_recount(spec, walks), spec, TRACE)
    idle = [a for a, n in summary["actions"].items() if not n["steps"]]
    taken = len(spec.actions) - len(idle)
    assert idle and f"coverage: {taken} of {len(spec.actions)} actions taken; never taken: {', '.join(idle)}" in out
    unheld = [f"{p} ({g})" for p, c in summary["properties"].items() for g, n in c["guards"].items() if not n]
    assert "NoAckedEntryLost (closed after an ack)" in unheld
    assert f"guards that never held: {', '.join(unheld)}" in out
