"""A trace mapping's partition key: one trace holding several units the spec checks apart (tanks of a farm
here; ledgers of a bookie, topics of a broker in real systems) is checked as one trace per unit."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import orjson
from ledgerspec.conformance import TraceChecker, check_files
from ledgerspec.conformance.partition import split_trace
from ledgerspec.conformance.reader import TraceInput, read_traces
from ledgerspec.conformance.verdict import INCONCLUSIVE, VIOLATES
from ledgerspec.spec.kernel import Constant, Spec, action, evolve
from ledgerspec.spec.tracing import INIT, ObservationMode, TraceMapping


@attrs.frozen
class Tank:
    level: int  # litres in the tank


def _fills(spec: TankSpec, s: Tank) -> Iterator[tuple[int, int]]:
    return ((tank, n) for tank in (1, 2, 3) for n in (1, 2))


class TankSpec(Spec[Tank]):
    """One tank of a farm: every action names its tank, and the spec is the same for each."""

    name = "tankfarm"
    state_type = Tank
    constants = (Constant("Capacity", int, 3, "litres a tank holds"),)
    Capacity: int

    def init_states(self) -> Iterator[Tank]:
        yield Tank(0)

    @action(_fills)
    def Fill(self, s: Tank, tank: int, n: int) -> Tank | None:
        return evolve(s, level=s.level + n) if s.level + n <= self.Capacity else None


def _tank_of(event_type: str, params: Mapping[str, Any]) -> str | None:
    tank = params.get("tank")
    return f"tank-{tank}" if event_type != INIT and tank is not None else None


FARM = TraceMapping(TankSpec, (ObservationMode("full", "everything", frozenset({"level"})),), partition=_tank_of)


def _line(seq: int, kind: str, **params: Any) -> bytes:
    event = {"v": 1, "trace": "farm", "process": "p", "seq": seq, "type": kind}
    return orjson.dumps({**event, "params": params} if params else event)


def test_each_unit_is_checked_apart_with_the_events_shared_by_all(tmp_path: Path) -> None:
    # Tanks 1 and 2 each take 2 + 1 litres: fine apart, too much for one tank.
    lines = [
        _line(1, INIT),
        _line(2, "Fill", tank=1, n=2),
        _line(3, "Fill", tank=2, n=2),
        _line(4, "Fill", tank=1, n=1),
        _line(5, "Fill", tank=2, n=1),
    ]
    path = tmp_path / "farm.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")
    (trace,) = [t for t in read_traces([path]) if isinstance(t, TraceInput)]
    units = split_trace(trace, FARM.partition)
    assert [u.trace for u in units] == ["farm/tank-1", "farm/tank-2"]
    assert [[e.line for e in u.events] for u in units] == [[1, 2, 4], [1, 3, 5]]  # Init goes to both
    run = check_files([path], TraceChecker(TankSpec(), mapping=FARM))
    assert (run.traces, run.conforms, run.events) == (2, 2, 6)
    whole = check_files([path], TraceChecker(TankSpec(), mapping=TraceMapping(TankSpec, FARM.modes.values())))
    assert whole.traces == 1 and whole.violations[0].status == VIOLATES  # as one tank it overflows


def test_a_unit_that_fails_is_told_apart_and_bad_lines_go_to_every_unit(tmp_path: Path) -> None:
    lines = [
        _line(1, "Fill", tank=1, n=2),
        _line(2, "Fill", tank=3, n=2),
        _line(3, "Fill", tank=3, n=2),  # tank 3 overflows
        b'{"v":1,"trace":"farm","process":"p","seq":4,"type":"Fill","params":',  # cut short
    ]
    path = tmp_path / "farm.ndjson"
    path.write_bytes(b"\n".join(lines) + b"\n")
    run = check_files([path], TraceChecker(TankSpec(), mapping=FARM))
    # Either unit may have lost an event on the bad line, so neither conforms; tank 3's overflow is shown,
    # but inconclusive: the line that could not be read might have come before it.
    statuses = [(v.trace, v.status) for v in run.inconclusive]
    assert statuses == [("farm/tank-1", INCONCLUSIVE), ("farm/tank-3", INCONCLUSIVE)]
    assert run.inconclusive[1].failure is not None and run.inconclusive[1].failure.event_index == 1
    assert {e.trace for e in run.input_errors} == {"farm/tank-1", "farm/tank-3"}
    assert run.conforms == 0 and not run.violations
