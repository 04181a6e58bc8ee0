"""TLC's JSON traces (``-dumpTrace json``): counterexamples TLC wrote are checked against the Python spec.

The two ``*.tlc.json`` files in tests/data were written by TLC itself on
spec/ledger/ledger.tla (tests/data/README.md says how). The checker must agree with
TLC: the trace is a behaviour of the spec with the same seeded bug, and it
breaks the invariant TLC reported at its last state.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from ledgerspec.conformance import TraceChecker, check_files, events_from_json
from ledgerspec.conformance.documents import read_document
from ledgerspec.conformance.generate import Walk, random_walk
from ledgerspec.conformance.reader import read_traces
from ledgerspec.conformance.tlc_json import TlcJsonError, tlc_json_events
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.tools.cli.main import main

DATA = Path(__file__).parent / "data"
ACTIONS = TRACE.actions

# (file, the model TLC checked, the invariant TLC reported, the states of its counterexample)
WRITTEN_BY_TLC = [
    ("lac_before_qa.tlc.json", {"E": 3, "Qw": 2, "Qa": 2, "MaxEntries": 2}, "NoAckedEntryLost", 8),
    ("fence_qa_total.tlc.json", {"E": 3, "Qw": 2, "Qa": 1, "MaxEntries": 2}, "NoNewAcksToFencedWriter", 3),
]


@pytest.mark.parametrize(("name", "model", "invariant", "length"), WRITTEN_BY_TLC, ids=[w[0] for w in WRITTEN_BY_TLC])
def test_a_counterexample_tlc_wrote_breaks_the_same_invariant(
    name: str, model: dict[str, int], invariant: str, length: int
) -> None:
    bug = name.removesuffix(".tlc.json")
    trace, events, errors = read_document(DATA / name, ACTIONS)
    assert (trace, errors, len(events)) == (name, [], length)
    assert events[0].type == "Init"
    assert all(e.process == "tlc" and e.seq == i + 1 for i, e in enumerate(events))
    # TLC wrote these before the spec had writer_add_lac and the explicit LAC: their states leave those out, so
    # they are not observed.
    unwritten = {"writer_add_lac", "bookie_explicit_lac", "writer_explicit_lac"}
    assert all(set(e.observed) == set(TRACE.variables) - unwritten for e in events)

    verdict = TraceChecker(LedgerSpec(**model, Bug=bug), "full").check(events)
    assert verdict.status == "violates"
    assert verdict.failure is not None and verdict.failure.event_index == length - 1
    assert f"breaks the invariant {invariant}" in verdict.reason
    # Every state before the last is a state of the spec with the bug: the prefix conforms.
    assert TraceChecker(LedgerSpec(**model, Bug=bug), "full").check(events[:-1]).status == "conforms"
    # The correct spec cannot take TLC's behaviour that far.
    correct = TraceChecker(LedgerSpec(**model), "full").check(events)
    assert correct.status == "violates" and correct.failure is not None
    assert f"breaks the invariant {invariant}" not in correct.reason


def test_tlc_names_steps_by_action_and_arguments() -> None:
    _, events, _ = read_document(DATA / "lac_before_qa.tlc.json", ACTIONS)
    kinds = [(e.type, e.params) for e in events]
    assert kinds[1] == ("WriterAddsEntry", {})
    assert ("RecovererStartsRecovery", {"c": 1}) in kinds
    assert kinds[-1] == ("RecovererClosesLedger", {"c": 1})
    # TLC could not split BookieSteps (its \E ranges over the state's net): those steps are Next events.
    assert [t for t, _ in kinds].count("Next") == 4
    _, unnamed, _ = read_document(DATA / "lac_before_qa.tlc.json")  # without the spec: TLC's names stay
    assert "BookieSteps" in {e.type for e in unnamed}


def test_check_files_and_the_cli_read_tlc_traces(capsys: pytest.CaptureFixture[str]) -> None:
    run = check_files([DATA], TraceChecker(LedgerSpec(E=3, Qw=2, Qa=2, MaxEntries=2, Bug="lac_before_qa"), "full"))
    # TLC's trace of this bug breaks NoAckedEntryLost; the other file's model has Qa=1, not this one's.
    assert (run.traces, run.events, run.conforms, run.input_errors) == (2, 11, 0, [])
    assert {v.trace for v in run.violations} == {"lac_before_qa.tlc.json", "fence_qa_total.tlc.json"}
    argv = ["check", str(DATA / "lac_before_qa.tlc.json"), "--json"]
    consts = ["--const", "E=3", "--const", "Qw=2", "--const", "Qa=2", "--const", "MaxEntries=2"]
    assert main([*argv, *consts, "--const", "Bug=lac_before_qa"]) == 1
    summary = json.loads(capsys.readouterr().out)
    assert (summary["traces"], summary["events"], summary["conforms"]) == (1, 8, 0)
    (violation,) = summary["violations"]
    assert (violation["event_index"], violation["event"]) == (7, "RecovererClosesLedger")
    assert "NoAckedEntryLost" in violation["reason"]


def tlc_document(walk: Walk, *, names: bool = True) -> dict[str, Any]:
    """A walk of the Python spec as TLC's Json module writes a CounterExample: sets as arrays, states
    as [index, record], steps as [[i, s], action, [i + 1, t]], listed in no particular order."""
    states = [
        [i + 1, {n: TRACE.codecs[n].encode(getattr(step.state, n)) for n in TRACE.variables}]
        for i, step in enumerate(walk)
    ]
    actions = []
    for i, step in enumerate(walk[1:], start=1):
        action: dict[str, Any] = {"name": step.action, "location": {"module": "ledger", "beginLine": 1}}
        codecs = TRACE.param_codecs[step.action]
        if names and codecs:
            action["parameters"] = list(codecs)
            action["context"] = {n: c.encode(a) for (n, c), a in zip(codecs.items(), step.args, strict=True)}
        actions.append([states[i - 1], action if names else {}, states[i]])
    rng = random.Random(len(walk))
    rng.shuffle(actions)
    rng.shuffle(states)
    return {"counterexample": {"action": actions, "state": states}, "vars": list(TRACE.variables)}


@pytest.mark.parametrize("names", [True, False], ids=["named steps", "unnamed steps"])
def test_walks_of_the_spec_written_as_tlc_does_conform(names: bool) -> None:
    spec = LedgerSpec(MaxEntries=2, MaxLoss=1)
    checker = TraceChecker(spec, "full")
    rng = random.Random(7)
    for k in range(20):
        walk = random_walk(spec, rng, 25)
        lines = tlc_json_events(json.loads(json.dumps(tlc_document(walk, names=names))), f"w{k}", ACTIONS)
        assert [e["type"] for e in lines] == ["Init"] + [s.action if names else "Next" for s in walk[1:]]
        verdict = checker.check(events_from_json(lines))
        assert verdict.status == "conforms", verdict.reason


def test_the_step_closing_a_lasso_is_left_out() -> None:
    state = {"writer_lap": -1}
    doc = {
        "counterexample": {
            "state": [[1, state], [2, {"writer_lap": 0}]],
            "action": [
                [[1, state], {"name": "WriterAddsEntry"}, [2, {"writer_lap": 0}]],
                [[2, {"writer_lap": 0}], {"name": "WriterAddsEntry"}, [1, state]],
            ],
        }
    }
    assert [e["type"] for e in tlc_json_events(doc, "lasso")] == ["Init", "WriterAddsEntry"]


def test_the_parameter_record_of_tlaplus_853_is_read() -> None:
    doc = {
        "counterexample": {
            "state": [[1, {}], [2, {}]],
            "action": [[[1, {}], {"name": "RecovererStartsRecovery", "parameter": {"c": 1}}, [2, {}]]],
        }
    }
    assert tlc_json_events(doc, "t")[1]["params"] == {"c": 1}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"states": []}, 'no "counterexample" record'),
        ({"counterexample": {"state": []}}, "must be a non-empty array"),
        ({"counterexample": {"state": [[1, {}], [3, {}]]}}, r"states \[2\] are missing"),
        ({"counterexample": {"state": [[1, {}], [1, {}]]}}, r"counterexample.state\[1\]: a second state 1"),
        ({"counterexample": {"state": [[0, {}]]}}, r"counterexample.state\[0\]: a state must be \[index >= 1"),
        (
            {"counterexample": {"state": [[1, {}], [2, {}]], "action": [[[1, {}], {}, [3, {}]]]}},
            r"counterexample.action\[0\]: a step from state 1 to state 3 of 2",
        ),
        ({"counterexample": {"state": [[1, {}]], "action": [["x"]]}}, r"counterexample.action\[0\]: a step must be"),
    ],
)
def test_what_is_not_a_tlc_trace_is_named(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(TlcJsonError, match=message):
        tlc_json_events(doc, "t")


def test_a_bad_file_is_one_error_and_the_others_are_read(tmp_path: Path) -> None:
    (tmp_path / "bad.tlc.json").write_text('{"counterexample": {"state": [[1, {}], [3, {}]]}}')
    (tmp_path / "good.tlc.json").write_bytes((DATA / "fence_qa_total.tlc.json").read_bytes())
    (tmp_path / "event.tlc.json").write_text('{"counterexample": {"state": [[1, {"writer_lap": -1}], [2, "x"]]}}')
    items = list(read_traces([tmp_path], actions=ACTIONS))
    by_trace = {item.trace: item for item in items}
    assert set(by_trace) == {"bad.tlc.json", "event.tlc.json", "good.tlc.json"}
    (bad,) = by_trace["bad.tlc.json"].errors
    assert bad.line == 0 and "not a readable TLC JSON trace" in bad.message and "states [2] are missing" in bad.message
    assert "a state must be" in by_trace["event.tlc.json"].errors[0].message
    assert len(by_trace["good.tlc.json"].events) == 3 and not by_trace["good.tlc.json"].errors


@pytest.mark.parametrize(("spec", "bookie_steps"), [([], "BookieSteps"), (["--spec", "ledger"], "Next")])
def test_convert_traces_names_tlc_steps_by_the_spec_given(tmp_path: Path, spec: list[str], bookie_steps: str) -> None:
    out = tmp_path / "out.ndjson"
    assert main(["convert-traces", str(DATA / "lac_before_qa.tlc.json"), "--to", "ndjson", str(out), *spec]) == 0
    types = [json.loads(line)["type"] for line in out.read_text().splitlines()]
    assert len(types) == 8 and types.count(bookie_steps) == 4
