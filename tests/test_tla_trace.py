"""A trace as a TLA+ trace module, validated by TLC: the same verdict, at the same event, as the Python checker."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from ledgerspec.conformance import Event, check_trace, events_from_json
from ledgerspec.conformance.generate import random_walk, trace_events
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.tools.model_checking.tlc.trace_module import TraceModuleError, trace_module

MODEL = {"MaxEntries": 3, "MaxLoss": 1, "MaxCrashes": 1}
LONGER = {"WriterClosesLedger": 0.05, "RecovererStartsRecovery": 0.05}


def _trace(spec: LedgerSpec, seed: int, trace: str = "t") -> list[Event]:
    walk = random_walk(spec, random.Random(seed), 40, weights=LONGER)
    return events_from_json(trace_events(spec, walk, "full", trace))


@pytest.mark.tlc
def test_a_conforming_trace_passes_tlc(tmp_path: Path) -> None:
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc

    spec = LedgerSpec(**MODEL)
    events = next(e for seed in range(50) if len(e := _trace(spec, seed)) > 15)
    assert check_trace(events, spec).status == "conforms"
    checked = validate_with_tlc(events, spec, directory=tmp_path)
    assert checked.outcome.conforms and checked.outcome.event_index is None
    assert checked.distinct_states == len(events)  # one state per event: the replay is deterministic


@pytest.mark.tlc
def test_a_violating_trace_fails_tlc_at_the_event_the_checker_names(tmp_path: Path) -> None:
    """Walks of the spec with the seeded bug lac_before_qa, checked against the correct spec."""
    from ledgerspec.tools.model_checking.tlc.trace_validation import validate_with_tlc

    spec, buggy = LedgerSpec(**MODEL), LedgerSpec(**MODEL, Bug="lac_before_qa")
    found = 0
    for seed in range(12):
        events = _trace(buggy, seed, f"b{seed}")
        verdict = check_trace(events, spec)
        if verdict.status != "violates":
            continue
        assert verdict.failure is not None
        checked = validate_with_tlc(events, spec, directory=tmp_path / str(seed))
        assert not checked.outcome.conforms
        assert checked.outcome.event_index == verdict.failure.event_index, (seed, verdict.reason)
        found += 1
        if found == 3:
            break
    assert found == 3


def test_a_trace_module_extends_the_spec_one_step_per_event() -> None:
    spec = LedgerSpec(**MODEL)
    events = next(e for seed in range(50) if len(e := _trace(spec, seed)) > 15)
    module = trace_module(events, spec)
    assert module.start == 1 and module.events == len(events)  # the trace opens with Init
    assert "EXTENDS ledger, TLC" in module.text and "TraceInit == Init /\\ matched = 1" in module.text
    assert f"Event{len(events) - 1} == " in module.text and f"Event{len(events)} ==" not in module.text
    assert "(LastEnsemble) = <<1, 2, 3>>" in module.text  # a projection, in the mapping's TLA+ words
    assert "INIT TraceInit\nNEXT TraceNext\n" in module.config and "    MaxLoss = 1\n" in module.config
    partial = events_from_json([{"v": 1, "trace": "p", "process": "w", "seq": 1, "type": "BookieCrashes"}])
    with pytest.raises(TraceModuleError, match="needs every parameter of BookieCrashes"):
        trace_module(partial, spec)
