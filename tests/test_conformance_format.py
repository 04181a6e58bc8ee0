"""The trace format: the JSON Schema in docs/ and the reader agree on what an event is."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ledgerspec.conformance.events import Event, TraceFormatError, parse_event
from ledgerspec.conformance.generate import random_walk, trace_events
from ledgerspec.spec.ledger.ledger import LedgerSpec

SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "trace-event.schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
BASE = {"v": 1, "trace": "t1", "process": "writer", "seq": 0, "type": "WriterAddsEntry"}

VALID = [
    BASE,
    {**BASE, "params": {}, "observed": {"writer_lap": 0}},
    {**BASE, "seq": 9223372036854775807},
    {**BASE, "seq": 3.0},  # an integer, to JSON Schema and to the reader
    {**BASE, "v": 1.0},
    {**BASE, "time": 1700000000.5, "clock": {"writer": 1, "bookie-1": 0}},
    {**BASE, "time": None, "clock": None},
    {**BASE, "x-thread": "main", "x-host": {"name": "a"}},
    {**BASE, "trace": "t" * 256},
]
INVALID = [
    {},
    [BASE],
    "event",
    {k: v for k, v in BASE.items() if k != "v"},
    {k: v for k, v in BASE.items() if k != "seq"},
    {k: v for k, v in BASE.items() if k != "process"},
    {k: v for k, v in BASE.items() if k != "type"},
    {**BASE, "v": 2},
    {**BASE, "v": True},
    {**BASE, "v": "1"},
    {**BASE, "trace": ""},
    {**BASE, "trace": 7},
    {**BASE, "trace": "t" * 257},
    {**BASE, "process": None},
    {**BASE, "seq": -1},
    {**BASE, "seq": 9223372036854775808},
    {**BASE, "seq": 1.5},
    {**BASE, "seq": 1e30},
    {**BASE, "seq": "3"},
    {**BASE, "type": ""},
    {**BASE, "params": []},
    {**BASE, "params": None},
    {**BASE, "observed": "writer_lac=1"},
    {**BASE, "time": "noon"},
    {**BASE, "time": True},
    {**BASE, "clock": {}},
    {**BASE, "clock": {"writer": -1}},
    {**BASE, "clock": {"writer": "1"}},
    {**BASE, "clock": [1, 2]},
    {**BASE, "observerd": {}},
]


def reader_accepts(obj: Any) -> bool:
    try:
        parse_event(obj, "f.ndjson", 1)
    except TraceFormatError:
        return False
    return True


@pytest.mark.parametrize("obj", VALID, ids=range(len(VALID)))
def test_valid_events(obj: Any) -> None:
    assert VALIDATOR.is_valid(obj)
    assert reader_accepts(obj)


@pytest.mark.parametrize("obj", INVALID, ids=range(len(INVALID)))
def test_invalid_events(obj: Any) -> None:
    assert not VALIDATOR.is_valid(obj)
    assert not reader_accepts(obj)


def test_errors_name_the_line_and_the_trace() -> None:
    with pytest.raises(TraceFormatError) as info:
        parse_event({**BASE, "seq": -4}, "logs/a.ndjson", 17)
    error = info.value.error
    assert (error.file, error.line, error.trace) == ("logs/a.ndjson", 17, "t1")
    assert str(error) == "logs/a.ndjson:17: 'seq' must be an integer from 0 to 2**63-1, got -4"


def test_generated_traces_are_valid_and_round_trip() -> None:
    spec = LedgerSpec(MaxEntries=2, MaxLoss=1, MaxCrashes=1)
    rng = random.Random(3)
    for mode in ("full", "client"):
        for clocks in (False, True):
            for objs in (trace_events(spec, random_walk(spec, rng, 30), mode, "t", clocks=clocks) for _ in range(10)):
                for obj in objs:
                    VALIDATOR.validate(obj)
                    event = parse_event(obj, "f", 1)
                    assert isinstance(event, Event) and event.to_json() == obj


def test_a_seed_gives_the_same_trace_everywhere() -> None:
    spec = LedgerSpec(MaxEntries=2, MaxLoss=1)
    first = [trace_events(spec, random_walk(spec, random.Random(9), 30), "full", "t")]
    again = [trace_events(spec, random_walk(spec, random.Random(9), 30), "full", "t")]
    assert json.dumps(first) == json.dumps(again)
    assert json.dumps(first) != json.dumps([trace_events(spec, random_walk(spec, random.Random(8), 30), "full", "t")])
