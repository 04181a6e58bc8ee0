"""ITF traces (Apalache, Quint): states become events, Next events are matched by any step of the spec."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from ledgerspec.conformance import TraceChecker, check_trace, events_from_json
from ledgerspec.conformance.generate import Walk, random_walk
from ledgerspec.conformance.itf import ItfError, from_itf, itf_events
from ledgerspec.conformance.run import check_files
from ledgerspec.spec.codecs import INT, Codec, RecordCodec, SeqCodec, SetCodec, TupleCodec
from ledgerspec.spec.ledger.ledger import LedgerSpec
from ledgerspec.spec.ledger.ledger_trace import TRACE

SPEC = LedgerSpec(MaxEntries=2, MaxLoss=1)


def to_itf(codec: Codec, value: Any, rng: random.Random) -> Any:
    """A spec value as Apalache would write it: sets, tuples, big integers and maps tagged."""
    if isinstance(codec, SetCodec):
        return {"#set": [to_itf(codec.element, v, rng) for v in value]}
    if isinstance(codec, TupleCodec):
        return {"#tup": [to_itf(c, v, rng) for c, v in zip(codec.elements, value, strict=True)]}
    if isinstance(codec, SeqCodec):
        items = [to_itf(codec.element, v, rng) for v in value]
        return {"#map": [[i + 1, v] for i, v in enumerate(items)]} if rng.random() < 0.5 else items
    if isinstance(codec, RecordCodec):
        return {name: to_itf(c, getattr(value, name), rng) for name, c in codec.fields.items()}
    if codec is INT and rng.random() < 0.3:
        return {"#bigint": str(value)}
    return value


def itf_of(walk: Walk, *, actions: bool = False) -> dict[str, Any]:
    rng = random.Random(len(walk))
    states = []
    for i, step in enumerate(walk):
        state: dict[str, Any] = {"#meta": {"index": i}}
        state.update({n: to_itf(TRACE.codecs[n], getattr(step.state, n), rng) for n in TRACE.variables})
        if actions:
            state["mbt::actionTaken"] = "init" if i == 0 else step.action
            codecs = TRACE.param_codecs.get(step.action, {})
            state["mbt::nondetPicks"] = {
                n: {"tag": "Some", "value": to_itf(c, a, rng)}
                for (n, c), a in zip(codecs.items(), step.args, strict=True)
            }
        states.append(state)
    return {"#meta": {"format": "ITF"}, "vars": list(TRACE.variables), "states": states}


def walks(count: int) -> list[Walk]:
    rng = random.Random(5)
    return [random_walk(SPEC, rng, 25) for _ in range(count)]


def test_values_lose_their_tags() -> None:
    assert from_itf({"#bigint": "-12"}) == -12
    assert from_itf({"#set": [{"#tup": [1, 2]}]}) == [[1, 2]]
    assert from_itf({"#map": [[2, "b"], [1, "a"]]}) == ["a", "b"]  # a function on 1..n is a sequence
    assert from_itf({"#map": [["x", 1]]}) == {"x": 1}
    assert from_itf({"#map": [[{"#tup": [0, 1]}, True]]}) == [[[0, 1], True]]
    with pytest.raises(ItfError, match=r"state\.v: an unserializable value"):
        from_itf({"#unserializable": "Nat"}, "state.v")


@pytest.mark.parametrize("actions", [False, True], ids=["states only", "with actions"])
def test_itf_traces_of_the_spec_conform(actions: bool) -> None:
    checker = TraceChecker(SPEC, "full")
    for i, walk in enumerate(walks(25)):
        events = itf_events(json.loads(json.dumps(itf_of(walk, actions=actions))), f"w{i}")
        assert events[0]["type"] == "Init"
        assert {e["type"] for e in events[1:]} <= ({a.name for a in SPEC.actions} if actions else {"Next"})
        verdict = checker.check(events_from_json(events))
        assert verdict.status == "conforms", verdict.reason


def test_a_state_no_step_reaches_is_a_violation_at_that_state() -> None:
    walk = next(w for w in walks(40) if len(w) > 6)
    doc = itf_of(walk)
    doc["states"][4]["writer_lap"] = 7
    verdict = check_trace(events_from_json(itf_events(doc, "w")), SPEC)
    assert verdict.status == "violates" and verdict.failure is not None
    assert verdict.failure.event_index == 4 and verdict.failure.event_type == "Next"
    assert f"after {walk[4].action}" in verdict.failure.explanation
    assert "observed writer_lap = 7" in verdict.failure.explanation
    assert verdict.failure.path[-1] != "Next"  # the path names the actions the checker found


def test_itf_files_are_read_with_the_ndjson_ones(tmp_path: Path) -> None:
    for i, walk in enumerate(walks(3)):
        (tmp_path / f"run{i}.itf.json").write_text(json.dumps(itf_of(walk)))
    (tmp_path / "broken.itf.json").write_text('{"vars": []}')
    result = check_files([tmp_path], TraceChecker(SPEC))
    assert result.traces == 4 and result.conforms == 3
    (error,) = result.input_errors
    assert error.file.endswith("broken.itf.json") and 'not an ITF trace: no "states" array' in error.message
