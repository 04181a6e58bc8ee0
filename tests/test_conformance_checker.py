"""The checker on traces whose answer is known: random walks of the spec (they conform), walks of a spec
with a seeded bug (they violate, at an event found independently here), and traces edited by hand."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from ledgerspec.conformance import Bounds, TraceChecker, check_trace, events_from_json
from ledgerspec.conformance.behaviour import Node
from ledgerspec.conformance.checker import _Budget
from ledgerspec.conformance.generate import Walk, WalkStep, random_walk, trace_events
from ledgerspec.conformance.verdict import CONFORMS, INCONCLUSIVE, VIOLATES, Verdict
from ledgerspec.spec.codecs import canonical_bytes
from ledgerspec.spec.kernel import Constant, Spec, action, evolve, invariant
from ledgerspec.spec.ledger.ledger import LedgerSpec, Msg
from ledgerspec.spec.ledger.ledger_trace import TRACE
from ledgerspec.spec.tracing import INIT, ObservationMode, TraceMapping
from ledgerspec.tools.model_checking.explorer.explorer import explore

MODEL = {"MaxEntries": 3, "MaxLoss": 1, "MaxCrashes": 1}
LONGER = {"WriterClosesLedger": 0.05, "RecovererStartsRecovery": 0.05}


def walks(spec: LedgerSpec, seed: int, count: int, steps: int = 40) -> Iterator[Walk]:
    rng = random.Random(seed)
    for _ in range(count):
        yield random_walk(spec, rng, steps, weights=LONGER)


def check(spec: LedgerSpec, walk: Walk, mode: str = "full", bounds: Bounds | None = None, **options: Any) -> Any:
    events = events_from_json(trace_events(spec, walk, mode, "t", **options))
    return check_trace(events, LedgerSpec(**MODEL), mode, bounds)


# -- conforming traces conform ----------------------------------------------------------
@pytest.mark.parametrize("mode", ["full", "client"])
def test_walks_of_the_spec_conform(mode: str) -> None:
    spec = LedgerSpec(**MODEL)
    checker = TraceChecker(spec, mode)
    verdicts = [
        checker.check(events_from_json(trace_events(spec, w, mode, f"t{i}"))) for i, w in enumerate(walks(spec, 1, 60))
    ]
    assert [v.status for v in verdicts] == [CONFORMS] * 60, [v.reason for v in verdicts if v.status != CONFORMS]
    assert all(v.checked == v.events for v in verdicts)
    if mode == "client":  # losses and crashes leave the client unsure: several candidates at once
        assert max(v.max_candidates for v in verdicts) > 10


def test_client_traces_without_values_still_conform() -> None:
    """No false positives when a client leaves values out (a log line without the LAC)."""
    spec = LedgerSpec(**MODEL)
    for i, w in enumerate(walks(spec, 2, 40)):
        rng = random.Random(i)
        verdict = check(spec, w, "client", omit=0.5, rng=rng)
        assert verdict.status == CONFORMS, verdict.reason
        bare = check(spec, w, "client", observe="none")
        assert bare.status == CONFORMS, bare.reason


def test_vector_clocks_and_lamport_order_give_the_same_answer() -> None:
    spec = LedgerSpec(**MODEL)
    for w in walks(spec, 3, 10):
        objs = trace_events(spec, w, "full", "t", clocks=True)
        assert len({o["process"] for o in objs}) > 1 and all("clock" in o for o in objs)
        # Reading order by process, as if each process wrote its own log: the merge restores the walk.
        by_process = sorted(objs, key=lambda o: o["process"])
        assert check_trace(events_from_json(by_process), spec).status == CONFORMS
        lamport = sorted(trace_events(spec, w, "full", "t"), key=lambda o: o["process"])
        assert check_trace(events_from_json(lamport), spec).status == CONFORMS


# -- seeded bugs are caught, at the event where the behaviour leaves the spec ---------------
def first_divergence(correct: LedgerSpec, walk: Walk, events: list[dict[str, Any]]) -> tuple[int, str]:
    """Replay a full-mode trace on the correct spec step by step, independently of the checker:
    the index of the first event it cannot take, and the first observed variable that differs."""
    state = next(iter(correct.init_states()))
    for index, (step, event) in enumerate(zip(walk, events, strict=True)):
        assert step.action == event["type"]
        if index > 0:
            act = correct.find_action(step.action)
            instances = [()] if act.params is None else list(act.params(correct, state))
            nxt = act.fn(correct, state, *step.args) if step.args in instances else None
            if nxt is None:
                return index, "not enabled"
            state = nxt
        for name, value in event.get("observed", {}).items():
            expected = canonical_bytes(TRACE.codecs[name], TRACE.observe(correct, state, name))
            if json.dumps(value, separators=(",", ":"), sort_keys=True).encode() != expected:
                return index, name
        for inv in correct.invariants:
            if inv.fn(correct, state) is not None:
                return index, inv.name
    return -1, ""


@pytest.mark.parametrize(
    ("bug", "constants", "mentions"),
    [
        ("lac_before_qa", {}, "observed writer_lac = 0, the spec has -1"),
        ("fence_qa_total", {"E": 3, "Qw": 2, "Qa": 1}, "observed rec "),
        ("recovery_read_no_fence", {"E": 3, "Qw": 3, "Qa": 2}, "fence) only in the spec"),
    ],
)
def test_traces_of_a_buggy_spec_violate_where_they_leave_the_spec(
    bug: str, constants: dict[str, Any], mentions: str
) -> None:
    correct = LedgerSpec(**MODEL, **constants)
    buggy = LedgerSpec(**MODEL, **constants, Bug=bug)
    checker = TraceChecker(correct, "full")
    found = 0
    for w in walks(buggy, 4, 200):
        objs = trace_events(buggy, w, "full", "t", observe="all")
        index, variable = first_divergence(correct, w, objs)
        verdict = checker.check(events_from_json(objs))
        if index < 0:
            assert verdict.status == CONFORMS  # the bug did not show in this walk
            continue
        found += 1
        assert verdict.status == VIOLATES, verdict.reason
        assert verdict.failure is not None
        assert verdict.failure.event_index == index, (variable, verdict.reason)
        assert verdict.failure.path[-1] == str(
            correct.step(correct.find_action(w[index - 1].action), w[index - 1].args)
        )
        if variable != "not enabled":
            assert f"observed {variable} " in verdict.reason
    assert found >= 5, f"only {found} walks showed the bug"
    # With the values a step changed (the usual log), the first divergence is still found and explained.
    for w in walks(buggy, 5, 200):
        changed = checker.check(events_from_json(trace_events(buggy, w, "full", "t")))
        if changed.status == VIOLATES and mentions in changed.reason:
            return
    pytest.fail(f"no trace of the {bug} spec violated with {mentions!r}")


def test_client_traces_of_a_buggy_spec_violate() -> None:
    """A client sees the seeded bugs too: its LAC moves too early, its recovery reads do not fence."""
    for bug, constants, mentions in [
        ("lac_before_qa", {}, "observed writer_lac = 0, the spec has -1"),
        ("recovery_read_no_fence", {"E": 3, "Qw": 3, "Qa": 2}, "is not enabled: no request ReadReq"),
    ]:
        correct = LedgerSpec(**MODEL, **constants)
        buggy = LedgerSpec(**MODEL, **constants, Bug=bug)
        checker = TraceChecker(correct, "client")
        verdicts = [checker.check(events_from_json(trace_events(buggy, w, "client", "t"))) for w in walks(buggy, 6, 80)]
        violations = [v for v in verdicts if v.status == VIOLATES]
        assert len(violations) >= 5, bug
        assert any(mentions in v.reason for v in violations), [v.reason for v in violations[:3]]
        assert all(v.status in (CONFORMS, VIOLATES) for v in verdicts)


# -- the depth-first search and the breadth-first one agree ------------------------------------
def _answer(v: Verdict) -> tuple[Any, ...]:
    return (v.status, v.checked, v.failure.explanation if v.failure else None, v.failure.path if v.failure else None)


@pytest.mark.parametrize("bug", ["none", "lac_before_qa", "missing_after_qa_no_such", "fence_qa_total"])
def test_the_depth_first_search_and_the_beams_give_the_breadth_first_verdicts_and_explanations(bug: str) -> None:
    """A behaviour the depth-first search or a beam finds conforms; where they find none, the breadth-first
    search decides, so a violation is told as the breadth-first search alone tells it. With a depth-first search
    that gives up at its first hidden step, the beams decide the traces that conform."""
    constants = {"E": 3, "Qw": 2, "Qa": 1} if bug == "fence_qa_total" else {}
    correct = LedgerSpec(**MODEL, **constants)
    buggy = LedgerSpec(**MODEL, **constants, Bug=bug)
    depth, breadth = TraceChecker(correct, "client"), TraceChecker(correct, "client", depth_first=False)
    beams = TraceChecker(correct, "client", Bounds(max_examined=1))
    searches: dict[str, int] = {}
    beamed: dict[str, int] = {}
    for i, w in enumerate(walks(buggy, 11, 60, steps=60)):
        events = events_from_json(trace_events(buggy, w, "client", f"t{i}"))
        found, alone, beam = depth.check(events), breadth.check(events), beams.check(events)
        assert _answer(found) == _answer(alone) == _answer(beam), (found.reason, alone.reason, beam.reason)
        assert alone.search == "breadth-first"
        assert found.search in ({"depth-first", "beam"} if found.status == CONFORMS else {"breadth-first"})
        assert beam.search in (
            {"depth-first", "beam", "breadth-first"} if beam.status == CONFORMS else {"breadth-first"}
        )
        searches[found.search] = searches.get(found.search, 0) + 1
        beamed[beam.search] = beamed.get(beam.search, 0) + 1
    if bug == "none":
        assert searches == {"depth-first": 60}  # every trace conforms, and the depth-first search finds it
        assert beamed == {"depth-first": 52, "beam": 8}, beamed  # a beam decides each the first state cannot
    else:
        assert searches.get("breadth-first", 0) >= 3, searches


def test_long_lossy_traces_conform_without_keeping_every_candidate() -> None:
    """Two losses and two crashes that may hide anywhere in a trace of 150 events or more: the depth-first
    search takes a hidden step where an event needs it, and examines a few hundred states at most for an event
    (a recovery's read that needs a crash or a loss before it); the breadth-first search keeps thousands of
    candidates for the same traces."""
    spec = LedgerSpec(MaxEntries=40, MaxLoss=2, MaxCrashes=2)
    rng = random.Random(3)
    checked = 0
    while checked < 3:
        w = random_walk(spec, rng, 300, weights={"WriterClosesLedger": 0.002, "RecovererStartsRecovery": 0.002})
        events = events_from_json(trace_events(spec, w, "client", "t"))
        if len(events) < 150 or len(w) - len(events) < 4:  # long, and with hidden steps
            continue
        verdict = check_trace(events, spec, "client")
        assert (verdict.status, verdict.search) == (CONFORMS, "depth-first"), verdict.reason
        assert verdict.max_candidates <= 500
        checked += 1
    short = events[:60]
    assert check_trace(short, spec, "client", depth_first=False).max_candidates > 50


def _hidden_actions_since(node: Node, state: Any) -> list[str]:
    """The hidden steps of a behaviour after it left ``state``."""
    actions = []
    n = node.parent
    while n is not None and n.state is not state:
        actions.append(n.action)
        n = n.parent
    return actions


def test_a_hidden_step_that_commutes_with_the_event_is_not_tried_before_it() -> None:
    """Two adds in flight, to bookies 1 and 2, and the event is bookie 1's reply. Losing the add to bookie 2
    commutes with it: it is not tried before the event until every other way was given. Crashing bookie 1
    disables the event, and is followed further: its restart enables the event again, a way to a state of its
    own. The event itself comes first. Where the event is disabled, hidden steps are tried."""
    spec = LedgerSpec(MaxEntries=1, MaxLoss=1, MaxCrashes=1)
    objs = trace_events(spec, hand_walk(spec, ("WriterAddsEntry", (-1,))), "client", "t")
    reply = {
        "v": 1, "trace": "t", "process": "writer", "seq": 3, "type": "BookieReceivesAdd",
        "params": {"m": TRACE.encode_params("BookieReceivesAdd", (Msg("AddReq", 0, 1, 0, -1), True))["m"],
                   "replied": True},
    }  # fmt: skip
    checker = TraceChecker(spec, "client")
    events = events_from_json([*objs, reply])
    state = next(iter(spec.init_states()))
    after_add = checker._state(spec.WriterAddsEntry(state, -1))
    node = Node(None, "WriterAddsEntry", (-1,), after_add)
    ways = list(checker._ways_from(node, events[2], _Budget(1000)))
    assert ways[0].action == "BookieReceivesAdd" and ways[0].parent is node
    assert len(ways) > 1 and all(n.action == "BookieReceivesAdd" for n in ways)
    # First the ways that went through bookie 1's crash and restart; those through commuting steps alone last.
    restarted = [{"BookieCrashes", "BookieRestarts"} <= set(_hidden_actions_since(n, after_add)) for n in ways[1:]]
    assert restarted[0] and False in restarted
    assert all(restarted[: restarted.index(False)])
    last = [_hidden_actions_since(n, after_add) for n in ways[1 + restarted.index(False) :]]
    assert ["NetworkLosesMessage"] in last  # the loss that commutes, alone
    hidden = {name for name, _, _, _ in checker._hidden_steps(after_add)}
    assert {"NetworkLosesMessage", "BookieCrashes", "BookieReceivesAdd"} <= hidden
    # Bookie 1 crashed: the reply needs its restart first, a hidden step tried before the event.
    crashed = checker._state(spec.BookieCrashes(after_add, 1))
    ways = list(checker._ways_from(Node(node, "BookieCrashes", (1,), crashed, hidden=True), events[2], _Budget(1000)))
    assert ways and ways[0].parent is not None and ways[0].parent.action == "BookieRestarts"
    assert all("BookieRestarts" in _hidden_actions_since(n, crashed) for n in ways)


# -- traces edited by hand fail at the edited event -----------------------------------------
def long_walks(count: int) -> Iterator[tuple[LedgerSpec, Walk]]:
    spec = LedgerSpec(**MODEL)
    for w in walks(spec, 7, count * 3):
        if len(w) >= 8:
            yield spec, w
            count -= 1
            if count == 0:
                return


def renumber(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sequence numbers in the new order, as if the process had logged the events that way."""
    return [{**o, "seq": i + 1} for i, o in enumerate(objs)]


def test_a_dropped_event_fails_at_its_place() -> None:
    for spec, w in long_walks(15):
        objs = trace_events(spec, w, "full", "t", observe="all")
        k = random.Random(len(w)).randrange(1, len(objs) - 1)
        verdict = check_trace(events_from_json(renumber(objs[:k] + objs[k + 1 :])), spec)
        assert verdict.status == VIOLATES and verdict.failure is not None
        assert verdict.failure.event_index == k, verdict.reason


def test_a_wrong_lac_fails_at_its_event_and_says_so() -> None:
    for spec, w in long_walks(15):
        objs = trace_events(spec, w, "full", "t")
        k = max(i for i, o in enumerate(objs) if "writer_lac" in o.get("observed", {}))
        lac = objs[k]["observed"]["writer_lac"]
        objs[k] = {**objs[k], "observed": {**objs[k]["observed"], "writer_lac": lac + 1}}
        verdict = check_trace(events_from_json(objs), spec)
        assert verdict.status == VIOLATES and verdict.failure is not None
        assert verdict.failure.event_index == k
        assert f"observed writer_lac = {lac + 1}, the spec has {lac}" in verdict.reason


def test_a_swapped_pair_fails_at_the_first_of_them() -> None:
    for spec, w in long_walks(15):
        objs = trace_events(spec, w, "full", "t", observe="all")
        j = random.Random(len(w) + 1).randrange(1, len(objs) - 1)
        swapped = [*objs[:j], objs[j + 1], objs[j], *objs[j + 2 :]]
        verdict = check_trace(events_from_json(renumber(swapped)), spec)
        assert verdict.status == VIOLATES and verdict.failure is not None
        assert verdict.failure.event_index == j, verdict.reason


def test_an_event_that_is_not_enabled_names_the_guard() -> None:
    spec = LedgerSpec(MaxEntries=1)
    objs = [
        {"v": 1, "trace": "t", "process": "writer", "seq": 1, "type": "WriterAddsEntry"},
        {"v": 1, "trace": "t", "process": "writer", "seq": 2, "type": "WriterAddsEntry"},
    ]
    verdict = check_trace(events_from_json(objs), spec)
    assert verdict.status == VIOLATES and verdict.failure is not None
    assert verdict.failure.event_index == 1
    assert verdict.reason == (
        "WriterAddsEntry(lac=-1) is not enabled: the writer has pushed every entry the model allows "
        "(writer_lap=0, MaxEntries=1)"
    )
    assert verdict.failure.path == ("Init", "WriterAddsEntry(lac=-1)")
    (candidate,) = verdict.failure.candidates
    assert candidate.state["writer_lap"] == 0 and candidate.hidden_steps == ()


def test_a_request_never_sent_is_not_in_flight() -> None:
    spec = LedgerSpec()
    m = {"type": "AddReq", "client": 0, "bookie": 3, "entry": 0, "lac": -1, "recovery": False, "fence": False,
         "data": 100}  # fmt: skip
    objs = [
        {"v": 1, "trace": "t", "process": "writer", "seq": 1, "type": "WriterAddsEntry"},
        {"v": 1, "trace": "t", "process": "bookie-3", "seq": 2, "type": "BookieReceivesAdd",
         "params": {"m": m, "replied": True}},
    ]  # fmt: skip
    verdict = check_trace(events_from_json(objs), spec)
    assert verdict.status == VIOLATES
    assert "no request AddReq(c0 b3 e0 lac=-1) is in flight" in verdict.reason
    assert "(in flight of that type to bookie 3: none)" in verdict.reason


# -- partial observation: hidden steps and the bounds of the search ----------------------------
def hand_walk(spec: LedgerSpec, *steps: tuple[str, tuple[Any, ...]]) -> Walk:
    state = next(iter(spec.init_states()))
    out = [WalkStep(INIT, (), state)]
    for name, args in steps:
        state = spec.find_action(name).fn(spec, state, *args)
        assert state is not None, name
        out.append(WalkStep(name, args, state))
    return tuple(out)


LOST_ADD = hand_walk(
    LedgerSpec(NumBookies=4, MaxLoss=1),
    ("WriterAddsEntry", (-1,)),
    ("NetworkLosesMessage", (Msg("AddReq", 0, 1, 0, -1),)),
    ("WriterChangesEnsemble", (1, 4)),
)


def test_a_hidden_loss_is_found_between_two_client_events() -> None:
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    objs = trace_events(spec, LOST_ADD, "client", "t")
    assert [o["type"] for o in objs] == ["Init", "WriterAddsEntry", "WriterChangesEnsemble"]
    verdict = check_trace(events_from_json(objs), spec, "client")
    assert verdict.status == CONFORMS and verdict.max_candidates > 1
    # The same trace in full mode must log the loss: without it, the ensemble change has no reason.
    full = check_trace(events_from_json(objs), spec, "full")
    assert full.status == VIOLATES and full.failure is not None and full.failure.event_index == 2
    assert "no add sent to bookie 1 has timed out" in full.reason


def test_hidden_step_bound_makes_the_verdict_inconclusive() -> None:
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    events = events_from_json(trace_events(spec, LOST_ADD, "client", "t"))
    verdict = check_trace(events, spec, "client", Bounds(max_hidden_steps=0))
    assert verdict.status == INCONCLUSIVE
    assert verdict.bound is not None and verdict.bound.bound == "max_hidden_steps" and verdict.bound.event_index == 2
    assert verdict.failure is not None and verdict.failure.event_index == 2
    assert "search bound max_hidden_steps=0 reached before event 2" in verdict.reason


def test_candidate_bound_makes_the_verdict_inconclusive() -> None:
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    events = events_from_json(trace_events(spec, LOST_ADD, "client", "t"))
    verdict = check_trace(events, spec, "client", Bounds(max_candidates=1, max_reduced_closure=1))
    assert verdict.status == INCONCLUSIVE
    assert verdict.bound is not None and verdict.bound.bound == "max_candidates"
    # the reduced search's closures may hold five times max_candidates by default: enough here
    assert check_trace(events, spec, "client", Bounds(max_candidates=1)).search == "reduced"


def test_a_client_failure_lists_every_candidate_with_its_hidden_steps() -> None:
    spec = LedgerSpec(NumBookies=4, MaxLoss=1)
    objs = trace_events(spec, LOST_ADD, "client", "t")
    objs[2]["observed"]["writer_version"] = 7  # the change was made, but the version is wrong
    verdict = check_trace(events_from_json(objs), spec, "client")
    assert verdict.status == VIOLATES and verdict.failure is not None
    f = verdict.failure
    assert f.event_index == 2 and len(f.candidates) == min(f.candidates_total, 12)
    assert f.candidates_total > 1
    assert f.candidates[0].hidden_steps == ()  # shortest first: the candidate with no hidden step
    assert "no add sent to bookie 1 has timed out" in f.candidates[0].rejections[0]
    lost = [c for c in f.candidates if c.hidden_steps == ("NetworkLosesMessage(m=AddReq(c0 b1 e0 lac=-1))",)]
    assert lost and "observed writer_version = 7, the spec has 2" in lost[0].rejections[0]
    assert f"of {f.candidates_total} candidate states (e.g. one with no hidden step" in f.explanation


# -- invariants are checked on matched behaviours ----------------------------------------------
def test_a_matched_behaviour_that_breaks_an_invariant_violates() -> None:
    """A counterexample of the spec with a seeded bug, as a trace checked against that same spec: every
    step is a step of the spec, and the last state breaks NoAckedEntryLost."""
    buggy = LedgerSpec(E=3, Qw=3, Qa=2, MaxEntries=1, Bug="recovery_read_no_fence")
    (violation,) = explore(buggy, check_deadlock=False).violations
    walk = tuple(
        WalkStep(step.step.action, tuple(v for _, v in step.step.params), step.state) for step in violation.trace
    )
    verdict = check_trace(events_from_json(trace_events(buggy, walk, "full", "t")), buggy)
    assert verdict.status == VIOLATES and verdict.failure is not None
    assert verdict.failure.event_index == len(walk) - 1
    assert "reaches a state that breaks the invariant NoAckedEntryLost" in verdict.reason
    correct = check_trace(events_from_json(trace_events(buggy, walk, "full", "t")), LedgerSpec(E=3, Qw=3, Qa=2))
    assert correct.status == VIOLATES and correct.failure is not None
    assert correct.failure.event_index < len(walk) - 1  # the correct spec sends fencing reads: earlier


# -- verdicts are plain data -------------------------------------------------------------------
def test_verdicts_serialize_to_json_and_flat_rows() -> None:
    spec = LedgerSpec(MaxEntries=1)
    objs = [{"v": 1, "trace": "t9", "process": "writer", "seq": n, "type": "WriterAddsEntry"} for n in (1, 2)]
    verdict = check_trace(events_from_json(objs, "x.ndjson"), spec)
    data = json.loads(json.dumps(verdict.to_json()))
    assert data["status"] == "violates" and data["failure"]["line"] == 2 and data["failure"]["file"] == "x.ndjson"
    row = verdict.to_row()
    assert all(v is None or isinstance(v, str | int) for v in row.values())
    assert row["event_index"] == 1 and row["path"] == "Init\nWriterAddsEntry(lac=-1)"
    assert check_trace(events_from_json(objs, "x.ndjson"), spec).to_json() == verdict.to_json()  # deterministic


def test_a_verdict_comes_back_from_its_json() -> None:
    """How a Spark executor's verdict reaches the driver: as JSON, taken back whole."""
    buggy = LedgerSpec(**MODEL, Bug="lac_before_qa")
    verdicts = [check(buggy, w, "client") for w in walks(buggy, 4, 30)]  # checked against the spec without the bug
    assert {v.status for v in verdicts} >= {CONFORMS, VIOLATES}
    for verdict in verdicts:
        assert Verdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict


# -- the checker core takes any spec with a trace mapping ----------------------------------------
@attrs.frozen
class Tank:
    level: int  # litres in the tank
    alarm: bool  # the overflow alarm has sounded


def _amounts(spec: TankSpec, s: Tank) -> Iterator[tuple[int]]:
    return ((n,) for n in (1, 2))


class TankSpec(Spec[Tank]):
    """A tank that is filled by 1 or 2 litres and drained; the alarm sounds at Capacity."""

    name = "tank"
    state_type = Tank
    constants = (Constant("Capacity", int, 3, "litres the tank holds"),)
    Capacity: int

    def init_states(self) -> Iterator[Tank]:
        yield Tank(0, False)

    @action(_amounts)
    def Fill(self, s: Tank, n: int) -> Tank | None:
        if s.level + n > self.Capacity:
            return None
        return evolve(s, level=s.level + n, alarm=s.level + n == self.Capacity)

    @action()
    def Drain(self, s: Tank) -> Tank | None:
        return evolve(s, level=0) if s.level > 0 else None

    @invariant
    def NotOverfull(self, s: Tank) -> str | None:
        return f"level {s.level} above {self.Capacity}" if s.level > self.Capacity else None


TANK_TRACE = TraceMapping(
    TankSpec,
    (
        ObservationMode("full", "everything", frozenset({"level", "alarm"})),
        ObservationMode("alarm", "only the alarm; drains are silent", frozenset({"alarm"}), hidden={"Drain": None}),
    ),
    explain={"Fill": lambda spec, s, n: f"{s.level} + {n} > {spec.Capacity}" if s.level + n > spec.Capacity else None},
)


def test_a_new_spec_needs_only_its_trace_mapping() -> None:
    spec = TankSpec()
    line = {"v": 1, "trace": "k", "process": "p"}
    ok = [{**line, "seq": 1, "type": "Fill", "params": {"n": 2}, "observed": {"level": 2, "alarm": False}}]
    assert check_trace(events_from_json(ok), spec, mapping=TANK_TRACE).status == CONFORMS
    over = [*ok, {**line, "seq": 2, "type": "Fill", "params": {"n": 2}}]
    verdict = check_trace(events_from_json(over), spec, mapping=TANK_TRACE)
    assert verdict.status == VIOLATES and verdict.reason == "Fill(n=2) is not enabled: 2 + 2 > 3"
    # Hidden drains let a second fill of 2 happen; the observed alarm must match.
    first = {**line, "seq": 1, "type": "Fill", "params": {"n": 2}, "observed": {"alarm": False}}
    silent = [first, {**line, "seq": 2, "type": "Fill", "params": {"n": 2}, "observed": {"alarm": False}}]
    assert check_trace(events_from_json(silent), spec, "alarm", mapping=TANK_TRACE).status == CONFORMS
    loud = [first, {**line, "seq": 2, "type": "Fill", "params": {"n": 2}, "observed": {"alarm": True}}]
    verdict = check_trace(events_from_json(loud), spec, "alarm", mapping=TANK_TRACE)
    assert verdict.status == VIOLATES and verdict.failure is not None and verdict.failure.candidates_total == 2
    assert "Fill(n=2) is not enabled: 2 + 2 > 3" in verdict.failure.explanation
    assert "after hidden steps Drain since the previous event" in verdict.failure.explanation
    assert "after Fill(n=2): observed alarm = true, the spec has false" in verdict.failure.explanation


def test_the_check_benchmark_runs_its_kinds_and_every_trace_conforms(capsys: pytest.CaptureFixture[str]) -> None:
    from ledgerspec.tools.bench.check import main as bench

    assert bench(["--traces", "30", "--tlc", "4", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    tlc = figures["tlc"]  # the peer: TLC's trace validation on a sample, half of it violating, verdicts compared
    assert tlc["traces"] == 4 and tlc["violating"] >= 1 and tlc["disagreements"] == []
    assert tlc["checker_events_per_second"] > 0 and tlc["tlc_events_per_second"] > 0
    kinds = {k["kind"]: k for k in figures["kinds"]}
    assert list(kinds) == ["full", "full, lean", "client", "client, lossy", "full, lossy walks"]
    assert all(not k["not_conforming"] and k["end_to_end_cold"] > 0 for k in kinds.values())
    lossy = kinds["client, lossy"]
    assert lossy["fewest_events_in_a_trace"] >= 250 and lossy["decided_breadth_first"] == 0
    assert kinds["full, lossy walks"]["events"] > lossy["events"]  # the same walks, hidden steps logged too
    assert set(figures["ratios"]) == {
        "client_lossy_over_full", "client_lossy_over_full_lossy_walks", "full_end_to_end_over_parse"
    }  # fmt: skip
